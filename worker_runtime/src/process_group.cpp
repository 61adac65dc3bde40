#include "ddprun/process_group.hpp"

#include <signal.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "ddprun/error.hpp"
#include "gloo_process_group.hpp"
#if DDPRUN_HAVE_NCCL
#include "nccl_process_group.hpp"
#endif

namespace ddprun {
namespace {

void check_buffer(const Buffer& buffer, std::string_view operation, std::string_view role) {
  if (buffer.count > 0 && buffer.data == nullptr) {
    throw Error(std::string(operation) + ": the " + std::string(role) + " buffer has " + std::to_string(buffer.count) +
                " elements but no data (a null pointer)");
  }
}

void check_same_type(const Buffer& input, const Buffer& output, std::string_view operation) {
  if (input.type != output.type) {
    throw Error(std::string(operation) + ": the input is " + std::string(name_of(input.type)) + " but the output is " +
                std::string(name_of(output.type)) + "; both must have the same type");
  }
}

Backend resolve(Backend requested) {
  if (requested != Backend::automatic) return requested;
#if DDPRUN_HAVE_NCCL
  if (detail::worker_has_cuda_device()) return Backend::nccl;
#endif
  return Backend::gloo;
}

}  // namespace

std::string_view name_of(Backend backend) {
  switch (backend) {
    case Backend::automatic:
      return "auto";
    case Backend::gloo:
      return "gloo";
    case Backend::nccl:
      return "nccl";
  }
  return "unknown backend";
}

std::chrono::milliseconds default_timeout() {
  const char* text = std::getenv("DDPRUN_TIMEOUT_S");
  if (text == nullptr || *text == '\0') return std::chrono::minutes(30);
  char* end = nullptr;
  errno = 0;
  const double seconds = std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !std::isfinite(seconds) || seconds <= 0 || seconds > 1e9) {
    throw Error("DDPRUN_TIMEOUT_S=\"" + std::string(text) +
                "\" is not a positive number of seconds (e.g. DDPRUN_TIMEOUT_S=600)");
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(seconds * 1000.0)));
}

namespace {

/// gloo's TCP transport writes with writev(2), which raises SIGPIPE when a peer has gone; by
/// default that kills the survivor before it can report the peer's death as an error. Python
/// ignores SIGPIPE at start-up (so PyTorch workers never see it); a C++ worker gets the same here,
/// unless its program already chose a disposition of its own.
void ignore_sigpipe_unless_handled() {
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
}

}  // namespace

std::unique_ptr<ProcessGroup> ProcessGroup::create(const Identity& identity, ProcessGroupOptions options) {
  ignore_sigpipe_unless_handled();
  if (identity.world_size < 1 || identity.rank < 0 || identity.rank >= identity.world_size) {
    throw Error("cannot create a process group for rank " + std::to_string(identity.rank) + " of a world of " +
                std::to_string(identity.world_size));
  }
  if (options.timeout <= std::chrono::milliseconds::zero()) {
    throw Error("the process group's timeout must be positive, not " + std::to_string(options.timeout.count()) + " ms");
  }
  switch (resolve(options.backend)) {
    case Backend::gloo:
      return std::make_unique<detail::GlooProcessGroup>(identity, options);
    case Backend::nccl:
#if DDPRUN_HAVE_NCCL
      return detail::make_nccl_process_group(identity, options);
#else
      throw Error(
          "the nccl backend needs CUDA devices; this build has no NCCL support (it was built without "
          "CUDA and NCCL): use the gloo backend for CPU memory");
#endif
    case Backend::automatic:
      break;
  }
  throw Error("unknown backend " + std::to_string(static_cast<int>(options.backend)));
}

std::shared_ptr<Work> ProcessGroup::all_reduce_async(Buffer buffer, ReduceOp op) {
  check_buffer(buffer, "all_reduce", "input/output");
  return start_all_reduce(buffer, op);
}

std::shared_ptr<Work> ProcessGroup::broadcast_async(Buffer buffer, int root) {
  check_buffer(buffer, "broadcast", "input/output");
  if (root < 0 || root >= size()) {
    throw Error("broadcast: root " + std::to_string(root) + " is not a rank of this group (0.." +
                std::to_string(size() - 1) + ")");
  }
  return start_broadcast(buffer, root);
}

std::shared_ptr<Work> ProcessGroup::all_gather_async(Buffer input, Buffer output) {
  check_buffer(input, "all_gather", "input");
  check_buffer(output, "all_gather", "output");
  check_same_type(input, output, "all_gather");
  const std::size_t expected = input.count * static_cast<std::size_t>(size());
  if (output.count != expected) {
    throw Error("all_gather: the output has " + std::to_string(output.count) + " elements; it needs size() x input = " +
                std::to_string(size()) + " x " + std::to_string(input.count) + " = " + std::to_string(expected));
  }
  return start_all_gather(input, output);
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter_async(Buffer input, Buffer output, ReduceOp op) {
  check_buffer(input, "reduce_scatter", "input");
  check_buffer(output, "reduce_scatter", "output");
  check_same_type(input, output, "reduce_scatter");
  const std::size_t expected = output.count * static_cast<std::size_t>(size());
  if (input.count != expected) {
    throw Error("reduce_scatter: the input has " + std::to_string(input.count) +
                " elements; it needs size() x output = " + std::to_string(size()) + " x " +
                std::to_string(output.count) + " = " + std::to_string(expected));
  }
  return start_reduce_scatter(input, output, op);
}

std::shared_ptr<Work> ProcessGroup::barrier_async() { return start_barrier(); }

}  // namespace ddprun

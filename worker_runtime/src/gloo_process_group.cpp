#include "gloo_process_group.hpp"

#include <cstring>
#include <gloo/rendezvous/context.h>

#include "ddprun/error.hpp"
#include "gloo_collectives.hpp"
#include "gloo_device.hpp"
#include "gloo_store.hpp"

namespace ddprun::detail {
namespace {

std::string describe(Buffer buffer) { return std::string(name_of(buffer.type)) + " x " + std::to_string(buffer.count); }

}  // namespace

GlooProcessGroup::GlooProcessGroup(const Identity& identity, const ProcessGroupOptions& options)
    : rank_(identity.rank), size_(identity.world_size), timeout_(options.timeout) {
  if (size_ > 1) connect(identity);
  // Fail-stop that tells the peers: a rank that gave up closes its connections, so a peer blocked on
  // it (in a ring, possibly not on the dead rank at all) fails at once instead of after the timeout.
  executor_ = std::make_unique<GlooExecutor>([this] {
    if (context_) context_->closeConnections();
  });
}

GlooProcessGroup::~GlooProcessGroup() = default;

void GlooProcessGroup::connect(const Identity& identity) {
  const std::string who = "rank " + std::to_string(rank_) + " of " + std::to_string(size_);
  store_ = connect_group_store(identity, timeout_);
  auto device = create_gloo_device(identity);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank_, size_);
  context->setTimeout(timeout_);
  GlooStore store(*store_.client, store_.prefix, timeout_);
  try {
    context->connectFullMesh(store, device);
  } catch (const TimeoutError& error) {
    throw TimeoutError(who + " could not join the gloo group within " + std::to_string(timeout_.count()) +
                       " ms: " + error.what() + " (has every rank started, with the same world size?)");
  } catch (const std::exception& error) {
    throw Error(who + " could not connect the gloo group: " + error.what());
  }
  context_ = std::move(context);
  // Learning who is at the other end of each connection also proves every peer is connected, so
  // none needs the store any more: a rank that hosts it may take it down afterwards.
  const std::uint32_t tag = next_tag_++;
  try {
    peers_ = exchange_connection_ends(context_, store.published(std::to_string(rank_)), tag, timeout_);
  } catch (const std::exception& error) {
    FailureContext failure{"exchanging connection ends (the last step of joining the group)", rank_, size_, timeout_,
                           &peers_};
    std::rethrow_exception(translate_gloo_failure(failure, error));
  }
}

template <class Body>
std::shared_ptr<Work> GlooProcessGroup::submit(std::string_view name, const std::string& details, Body body) {
  // Ranks match operations by tag, so tags must follow the queue's order even when several threads
  // submit (which order they win is theirs to agree on, as with torch.distributed).
  std::lock_guard lock(submit_mutex_);
  const std::uint32_t tag = next_tag_++;
  std::string operation = std::string(name) + " #" + std::to_string(tag);
  if (!details.empty()) operation += " (" + details + ")";
  FailureContext failure{operation, rank_, size_, timeout_, &peers_};
  return executor_->submit(std::move(operation), [this, tag, failure, body = std::move(body)] {
    try {
      body(GlooCall{context_, tag, timeout_});
    } catch (const std::exception& error) {
      std::rethrow_exception(translate_gloo_failure(failure, error));
    }
  });
}

std::shared_ptr<Work> GlooProcessGroup::start_all_reduce(Buffer buffer, ReduceOp op) {
  return submit("all_reduce", describe(buffer) + ", " + std::string(name_of(op)), [=, this](const GlooCall& call) {
    if (size_ == 1 || buffer.count == 0) return;  // avg over one rank divides by one
    gloo_all_reduce(call, buffer, op);
  });
}

std::shared_ptr<Work> GlooProcessGroup::start_broadcast(Buffer buffer, int root) {
  return submit("broadcast", describe(buffer) + ", root " + std::to_string(root), [=, this](const GlooCall& call) {
    if (size_ == 1 || buffer.count == 0) return;
    gloo_broadcast(call, buffer, root);
  });
}

std::shared_ptr<Work> GlooProcessGroup::start_all_gather(Buffer input, Buffer output) {
  return submit("all_gather", describe(input) + " per rank", [=, this](const GlooCall& call) {
    if (input.count == 0) return;
    if (size_ == 1) {
      if (input.data != output.data) std::memmove(output.data, input.data, input.bytes());
      return;
    }
    gloo_all_gather(call, input, output);
  });
}

std::shared_ptr<Work> GlooProcessGroup::start_reduce_scatter(Buffer input, Buffer output, ReduceOp op) {
  return submit("reduce_scatter", describe(output) + " per rank, " + std::string(name_of(op)),
                [=, this](const GlooCall& call) {
                  if (output.count == 0) return;
                  if (size_ == 1) {
                    if (input.data != output.data) std::memmove(output.data, input.data, output.bytes());
                    return;
                  }
                  gloo_reduce_scatter(call, input, output, op);
                });
}

std::shared_ptr<Work> GlooProcessGroup::start_barrier() {
  return submit("barrier", "", [this](const GlooCall& call) {
    if (size_ == 1) return;
    gloo_barrier(call);
  });
}

}  // namespace ddprun::detail

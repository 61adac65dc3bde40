#include "nccl_communicator.hpp"

#include <thread>

#include "ddprun/error.hpp"

namespace ddprun::detail::nccl {

namespace {

using Clock = std::chrono::steady_clock;

std::string milliseconds_text(std::chrono::milliseconds duration) {
  return std::to_string(duration.count()) + " ms";
}

/// ncclCommAbort and friends may need the device current; a destructor path cannot throw.
class QuietDeviceGuard {
 public:
  explicit QuietDeviceGuard(int device) {
    if (cudaGetDevice(&previous_) == cudaSuccess && previous_ != device) switched_ = cudaSetDevice(device) == cudaSuccess;
  }
  ~QuietDeviceGuard() {
    if (switched_) (void)cudaSetDevice(previous_);
  }
  QuietDeviceGuard(const QuietDeviceGuard&) = delete;
  QuietDeviceGuard& operator=(const QuietDeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool switched_ = false;
};

}  // namespace

std::string Operation::describe() const {
  std::string text = name;
  if (count == 0 && !op && root < 0) return text;  // e.g. barrier, ncclCommFinalize
  // Appends one piece at a time (g++ 12 warns falsely about `"(" + std::string(...)`).
  if (op) text.append("(").append(name_of(*op)).append(")");
  if (root >= 0) text.append("(root ").append(std::to_string(root)).append(")");
  return text.append(" of ").append(std::to_string(count)).append(" ").append(name_of(type));
}

Communicator::Communicator(int device, int rank, int size, const ncclUniqueId& id, std::chrono::milliseconds timeout)
    : device_(device), rank_(rank), size_(size), timeout_(timeout) {
  try {
    check_cuda(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
    // A blocking stream (not cudaStreamNonBlocking): ordered after what the worker queued on the
    // legacy default stream, so buffers it just filled there are complete when NCCL reads them.
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamDefault), "cudaStreamCreateWithFlags");
    check_cuda(cudaMalloc(&scratch_, sizeof(float)), "cudaMalloc(barrier scratch)");
    check_cuda(cudaMemset(scratch_, 0, sizeof(float)), "cudaMemset(barrier scratch)");
    auto deadline = Clock::now() + timeout;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
    // Non-blocking: ncclCommInitRankConfig returns at once and the join is polled, so that a rank
    // that never comes gives a TimeoutError instead of hanging this one forever.
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t result = ncclCommInitRankConfig(&comm_, size, id, rank, &config);
    if (result != ncclSuccess && result != ncclInProgress) check_nccl(result, "ncclCommInitRankConfig", comm_);
    wait_until_settled("ncclCommInitRankConfig (joining " + std::to_string(size) + " ranks)", deadline);
#else
    (void)deadline;
    check_nccl(ncclCommInitRank(&comm_, size, id, rank), "ncclCommInitRank");
#endif
  } catch (...) {
    if (comm_ != nullptr) (void)ncclCommAbort(comm_);
    comm_ = nullptr;
    release();
    throw;
  }
}

Communicator::~Communicator() {
  std::lock_guard lock(mutex_);
  if (comm_ != nullptr) {
    QuietDeviceGuard guard(device_);
    bool finalized = false;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
    try {
      // Flushes what is still queued; a dead peer would make that wait forever, so it is bounded.
      settle(ncclCommFinalize(comm_), Operation{"ncclCommFinalize", 0, DataType::float32, std::nullopt, -1});
      finalized = true;
    } catch (const std::exception&) {
      // settle() aborted the communicator already when it timed out; abort below otherwise.
    }
#else
    finalized = true;  // ncclCommDestroy waits for what is queued
#endif
    if (comm_ != nullptr) {
      if (finalized) {
        (void)ncclCommDestroy(comm_);
      } else {
        (void)ncclCommAbort(comm_);
      }
      comm_ = nullptr;
    }
  }
  release();
}

void Communicator::release() noexcept {
  QuietDeviceGuard guard(device_);
  for (cudaEvent_t event : free_events_) (void)cudaEventDestroy(event);
  free_events_.clear();
  if (scratch_ != nullptr) (void)cudaFree(scratch_);
  scratch_ = nullptr;
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  stream_ = nullptr;
}

std::string Communicator::where() const {
  return "rank " + std::to_string(rank_) + " of " + std::to_string(size_) + " (cuda:" + std::to_string(device_) + ")";
}

void Communicator::throw_if_aborted(const Operation& operation) const {
  if (!abort_reason_.empty()) {
    throw Error("nccl " + operation.describe() + " on " + where() +
                ": the communicator was aborted earlier and cannot run collectives (" + abort_reason_ +
                "); create a new process group");
  }
}

void Communicator::settle(ncclResult_t result, const Operation& operation) {
  if (result == ncclSuccess) return;
  std::string what = std::string("nccl ") + operation.describe();
  if (result != ncclInProgress) {
    std::string text = nccl_error_text(result, comm_);
    abort_locked(what + " failed: " + text);
    throw Error(what + " on " + where() + " failed: " + text + "; the communicator was aborted");
  }
  wait_until_settled(what, Clock::now() + timeout_);
}

void Communicator::wait_until_settled(const std::string& what, Clock::time_point deadline) {
  for (unsigned polls = 0;; ++polls) {
    ncclResult_t state = ncclSuccess;
    check_nccl(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError", comm_);
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) {
      std::string text = nccl_error_text(state, comm_);
      abort_locked(what + " failed: " + text);
      throw Error(what + " on " + where() + " failed: " + text + "; the communicator was aborted");
    }
    if (Clock::now() >= deadline) {
      abort_locked(what + " timed out");
      throw TimeoutError(what + " on " + where() + " did not complete within " + milliseconds_text(timeout_) +
                         ": another rank died, hangs, or did not call it; the communicator was aborted");
    }
    // Usually settled within microseconds; back off so that a long wait does not burn a core.
    if (polls < 1000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
}

bool Communicator::poll(cudaEvent_t event, const Operation& operation) {
  std::lock_guard lock(mutex_);
  throw_if_aborted(operation);
  cudaError_t status = cudaEventQuery(event);
  if (status == cudaSuccess) return true;
  std::string what = "nccl " + operation.describe();
  if (status != cudaErrorNotReady) {
    (void)cudaGetLastError();
    std::string text = std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
    abort_locked(what + ": the device failed: " + text);
    throw Error(what + " on " + where() + ": the device failed: " + text + "; the communicator was aborted");
  }
  // A peer that died or a broken connection shows here while the kernel waits forever.
  ncclResult_t state = ncclSuccess;
  check_nccl(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError", comm_);
  if (state != ncclSuccess && state != ncclInProgress) {
    std::string text = nccl_error_text(state, comm_);
    abort_locked(what + " failed: " + text);
    throw Error(what + " on " + where() + " failed: " + text +
                " (a peer may have died or a connection broke); the communicator was aborted");
  }
  return false;
}

void Communicator::abort(const std::string& reason) noexcept {
  std::lock_guard lock(mutex_);
  abort_locked(reason);
}

void Communicator::abort_locked(const std::string& reason) noexcept {
  if (abort_reason_.empty()) abort_reason_ = reason.empty() ? "aborted" : reason;
  if (comm_ == nullptr) return;
  QuietDeviceGuard guard(device_);
  (void)ncclCommAbort(comm_);
  comm_ = nullptr;
}

cudaEvent_t Communicator::take_event() {
  if (!free_events_.empty()) {
    cudaEvent_t event = free_events_.back();
    free_events_.pop_back();
    return event;
  }
  cudaEvent_t event = nullptr;
  // Timing off: the cheapest event to record and query.
  check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  return event;
}

void Communicator::release_event(cudaEvent_t event) noexcept {
  std::lock_guard lock(mutex_);
  // An event still pending may be reused: recording it again simply captures the later work.
  try {
    free_events_.push_back(event);
  } catch (...) {
    (void)cudaEventDestroy(event);
  }
}

}  // namespace ddprun::detail::nccl

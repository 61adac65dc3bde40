#pragma once
/// One NCCL communicator with its device, stream and completion events. The group and every Work it
/// returned share it, so a Work may outlive its group; it is released when the last of them goes.
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ddprun/types.hpp"
#include "nccl_check.hpp"

namespace ddprun::detail::nccl {

/// What an operation was, kept as values: the text is made only when an error needs it.
struct Operation {
  const char* name = "";  ///< "all_reduce", "broadcast", ...
  std::size_t count = 0;
  DataType type = DataType::float32;
  std::optional<ReduceOp> op;
  int root = -1;
  std::string describe() const;  ///< "all_reduce(sum) of 1024 float32"
};

class Communicator {
 public:
  /// Makes `device` current (and leaves it so: the worker's later cudaMalloc lands there), creates
  /// the stream and joins the communicator non-blocking; throws TimeoutError when the other ranks
  /// did not all join within `timeout` (after aborting what was started), Error on any failure.
  Communicator(int device, int rank, int size, const ncclUniqueId& id, std::chrono::milliseconds timeout);
  /// Finalizes and destroys the communicator, or aborts it when finalizing fails or takes longer
  /// than the timeout (a dead peer must not hang the worker's exit). Never throws.
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }
  /// A one-element float32 device buffer for barrier().
  void* scratch() const { return scratch_; }

  /// Queues `launch(comm, stream)` (an NCCL call) with the device current, then records and returns
  /// a completion event, owned by the caller until release_event(). Throws when the communicator
  /// was aborted, when the call fails, or when NCCL does not accept it within the timeout.
  template <class Launch>
  cudaEvent_t launch(const Operation& operation, Launch&& call) {
    std::lock_guard lock(mutex_);
    throw_if_aborted(operation);
    DeviceGuard guard(device_);
    settle(call(comm_, stream_), operation);
    cudaEvent_t event = take_event();
    check_cuda(cudaEventRecord(event, stream_), "cudaEventRecord after " + operation.describe());
    return event;
  }

  /// True when `event` completed; false while it runs. Throws (after aborting the communicator)
  /// when the device or the communicator reports an error, e.g. a peer died.
  bool poll(cudaEvent_t event, const Operation& operation);
  /// ncclCommAbort, once; later operations throw with `reason`. Never throws.
  void abort(const std::string& reason) noexcept;
  void release_event(cudaEvent_t event) noexcept;
  std::chrono::milliseconds timeout() const { return timeout_; }
  /// "rank 1 of 4 (cuda:1)", as errors name this member.
  std::string where() const;

 private:
  void throw_if_aborted(const Operation& operation) const;
  /// A non-blocking communicator may answer ncclInProgress: polls its state until settled.
  void settle(ncclResult_t result, const Operation& operation);
  void wait_until_settled(const std::string& what, std::chrono::steady_clock::time_point deadline);
  cudaEvent_t take_event();
  void abort_locked(const std::string& reason) noexcept;
  void release() noexcept;

  int device_;
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  mutable std::mutex mutex_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* scratch_ = nullptr;
  std::vector<cudaEvent_t> free_events_;  ///< reused: creating an event per operation costs
  std::string abort_reason_;              ///< non-empty once aborted
};

}  // namespace ddprun::detail::nccl

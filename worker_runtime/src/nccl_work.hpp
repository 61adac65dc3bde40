#pragma once
/// Work of the nccl backend: a completion event on the group's stream, polled together with the
/// communicator's asynchronous error, so that a dead peer ends the wait with an error, not a hang.
#include <atomic>
#include <chrono>
#include <memory>

#include "ddprun/process_group.hpp"
#include "nccl_communicator.hpp"

namespace ddprun::detail::nccl {

class NcclWork final : public Work {
 public:
  /// `event` was recorded after the operation; it returns to the communicator's pool with the Work.
  NcclWork(std::shared_ptr<Communicator> communicator, cudaEvent_t event, Operation operation);
  ~NcclWork() override;
  NcclWork(const NcclWork&) = delete;
  NcclWork& operator=(const NcclWork&) = delete;

  /// Returns once the results are in the buffers. Throws Error when the device or the communicator
  /// failed, TimeoutError when the operation has not ended within the group's timeout after it was
  /// queued; both abort the communicator first: a collective that one rank gave up on can never
  /// complete on the others.
  void wait() override;
  /// As wait(), but also gives up after `timeout` with a TimeoutError that aborts nothing.
  void wait(std::chrono::milliseconds timeout) override;
  /// True once ended, successfully or not (past the group's timeout counts as failed). Never blocks.
  bool completed() const override;

 private:
  using Clock = std::chrono::steady_clock;
  /// True when ended successfully, false while running; throws as wait() does.
  bool check() const;
  void wait_until(Clock::time_point caller_deadline, std::chrono::milliseconds caller_timeout);

  std::shared_ptr<Communicator> communicator_;
  cudaEvent_t event_;
  Operation operation_;
  Clock::time_point group_deadline_;  ///< queued + the group's timeout
  mutable std::atomic<bool> done_{false};
};

}  // namespace ddprun::detail::nccl

#pragma once
/// The gloo backend's operations in flight: each group runs its operations one at a time, in
/// submission order, on a thread of its own (as PyTorch's ProcessGroupGloo does), so the caller is
/// never blocked by the network and every rank runs its collectives in the order it issued them.
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "ddprun/process_group.hpp"

namespace ddprun::detail {

/// One queued operation: done once the executor ran it, holding its failure if it failed.
class GlooWork final : public Work {
 public:
  explicit GlooWork(std::string description) : description_(std::move(description)) {}

  void wait() override;
  void wait(std::chrono::milliseconds timeout) override;
  bool completed() const override;

  /// Called by the executor once, when the operation ended (`failure` is null on success).
  void finish(std::exception_ptr failure);
  const std::string& description() const { return description_; }

 private:
  void rethrow_failure() const;  // under mutex_

  const std::string description_;
  mutable std::mutex mutex_;
  std::condition_variable ended_;
  bool done_ = false;
  std::exception_ptr failure_;
};

/// A serial executor with fail-stop: once an operation failed, the group's connections are in an
/// unknown state (gloo closes them on a timeout), so every later operation fails at once with an
/// error that quotes the first failure instead of running.
class GlooExecutor {
 public:
  /// `on_first_failure` runs on the executor's thread right after the first operation failed (the
  /// gloo group closes its connections there, so that peers blocked on this rank fail now rather
  /// than after their timeout).
  explicit GlooExecutor(std::function<void()> on_first_failure);
  /// Lets the queued operations end (each is bounded by the group's timeout), then joins the thread.
  ~GlooExecutor();
  GlooExecutor(const GlooExecutor&) = delete;
  GlooExecutor& operator=(const GlooExecutor&) = delete;

  /// Queues `run`; what it throws becomes the Work's failure. `description` names the operation in
  /// errors ("all_reduce #3 (float32 x 1024, sum)").
  std::shared_ptr<Work> submit(std::string description, std::function<void()> run);

 private:
  struct Task {
    std::shared_ptr<GlooWork> work;
    std::function<void()> run;
  };
  void run_tasks();

  std::mutex mutex_;
  std::condition_variable queued_;
  std::deque<Task> tasks_;
  bool stopping_ = false;
  std::function<void()> on_first_failure_;
  std::string first_failure_;  // only the executor thread touches it
  std::thread thread_;         // last: started once everything above exists
};

}  // namespace ddprun::detail

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

  /// Called when the operation ended (`failure` is null on success); the first call wins (the
  /// executor's, or an abort's).
  void finish(std::exception_ptr failure);
  const std::string& description() const { return description_; }
  /// True once the operation ended, waiting up to `limit` for it; never throws.
  bool ended_within(std::chrono::milliseconds limit) const;

 private:
  void rethrow_failure() const;  // under mutex_

  const std::string description_;
  mutable std::mutex mutex_;
  mutable std::condition_variable ended_;
  bool done_ = false;
  std::exception_ptr failure_;
};

/// A serial executor with fail-stop: once an operation failed, the group's connections are in an
/// unknown state (gloo closes them on a timeout), so every later operation fails at once with an
/// error that quotes the first failure instead of running.
///
/// abort() (the peer watch, when a connection broke) fails the running operation and the queued
/// ones: gloo may never tell an operation stuck in its socket I/O, which then ends at gloo's own
/// timeout, on a thread nobody waits for. That thread owns everything it touches (the executor's
/// state here; the task's captures), so the group may go first.
class GlooExecutor {
 public:
  /// `on_first_failure` runs on the executor's thread right after the first operation failed, with
  /// its failure (the gloo group closes its connections there, so that peers blocked on this rank
  /// fail now rather than after their timeout).
  explicit GlooExecutor(std::function<void(std::exception_ptr)> on_first_failure);
  /// shut_down(), if not done yet.
  ~GlooExecutor();
  GlooExecutor(const GlooExecutor&) = delete;
  GlooExecutor& operator=(const GlooExecutor&) = delete;

  /// Queues `run`; what it throws becomes the Work's failure. `description` names the operation in
  /// errors ("all_reduce #3 (float32 x 1024, sum)"). `run` must own what it uses (see above).
  std::shared_ptr<Work> submit(std::string description, std::function<void()> run);

  /// Fails the running operation and the queued ones with `error_for(description)`, and every later
  /// one at once; no-op once an operation failed (the group is failing already). `stop_io` (it
  /// closes the group's connections) runs first; then the running operation gets `grace` to end by
  /// itself (after `stop_io` it can only fail, and it fails with `error_for`'s error): the caller
  /// is told only once its buffers are left alone, or once the operation sits in a wait that no
  /// I/O can end any more (it left them then, and gloo touches them no more after its timeout).
  void abort(const std::function<std::exception_ptr(const std::string& description)>& error_for,
             const std::function<void()>& stop_io, std::chrono::milliseconds grace);

  /// True once an operation failed or abort() ran.
  bool failed() const;

  /// Lets the queued operations end (each is bounded by the group's timeout) and joins the thread;
  /// after an abort, returns at once and leaves the stuck operation's thread to end by itself.
  void shut_down();

 private:
  struct Task {
    std::shared_ptr<GlooWork> work;
    std::function<void()> run;
  };
  /// Shared with the thread, which may outlive the executor after an abort.
  struct State {
    mutable std::mutex mutex;
    std::condition_variable queued;
    std::condition_variable changed;  // the thread exited, or abort() ran
    std::deque<Task> tasks;
    std::shared_ptr<GlooWork> current;  // the task running or last run
    bool stopping = false;
    bool exited = false;
    bool aborted = false;
    bool stuck = false;                   // the running operation outlived abort()'s grace
    std::exception_ptr abort_failure;     // what the running operation fails with after an abort
    std::string first_failure;  // empty until an operation failed
    std::function<void(std::exception_ptr)> on_first_failure;
  };
  static void run_tasks(const std::shared_ptr<State>& state);

  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace ddprun::detail

#include "gloo_work.hpp"

#include "ddprun/error.hpp"

namespace ddprun::detail {

void GlooWork::wait() {
  std::unique_lock lock(mutex_);
  ended_.wait(lock, [&] { return done_; });
  rethrow_failure();
}

void GlooWork::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!ended_.wait_for(lock, timeout, [&] { return done_; })) {
    throw TimeoutError(description_ + " has not ended after waiting " + std::to_string(timeout.count()) +
                       " ms (it goes on: wait again, or give the group up)");
  }
  rethrow_failure();
}

bool GlooWork::completed() const {
  std::lock_guard lock(mutex_);
  return done_;
}

void GlooWork::finish(std::exception_ptr failure) {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
    failure_ = std::move(failure);
  }
  ended_.notify_all();
}

void GlooWork::rethrow_failure() const {
  if (failure_) std::rethrow_exception(failure_);
}

GlooExecutor::GlooExecutor(std::function<void()> on_first_failure)
    : on_first_failure_(std::move(on_first_failure)), thread_([this] { run_tasks(); }) {}

GlooExecutor::~GlooExecutor() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_one();
  thread_.join();
}

std::shared_ptr<Work> GlooExecutor::submit(std::string description, std::function<void()> run) {
  auto work = std::make_shared<GlooWork>(std::move(description));
  {
    std::lock_guard lock(mutex_);
    tasks_.push_back(Task{work, std::move(run)});
  }
  queued_.notify_one();
  return work;
}

void GlooExecutor::run_tasks() {
  for (;;) {
    Task task;
    {
      std::unique_lock lock(mutex_);
      queued_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and nothing left to run
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    if (!first_failure_.empty()) {
      task.work->finish(
          std::make_exception_ptr(Error(task.work->description() + " was not run: the group failed earlier (" +
                                        first_failure_ + "); create a new group (usually: restart the job)")));
      continue;
    }
    std::exception_ptr failure;
    try {
      task.run();
    } catch (const std::exception& error) {
      first_failure_ = error.what();
      failure = std::current_exception();
    } catch (...) {
      first_failure_ = task.work->description() + " failed";
      failure = std::current_exception();
    }
    if (failure && on_first_failure_) {
      try {
        on_first_failure_();
      } catch (...) {
        // the operation's own failure is what the caller needs to see
      }
    }
    task.work->finish(failure);
  }
}

}  // namespace ddprun::detail

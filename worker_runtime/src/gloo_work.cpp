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

bool GlooWork::ended_within(std::chrono::milliseconds limit) const {
  std::unique_lock lock(mutex_);
  return ended_.wait_for(lock, limit, [&] { return done_; });
}

bool GlooWork::completed() const {
  std::lock_guard lock(mutex_);
  return done_;
}

void GlooWork::finish(std::exception_ptr failure) {
  {
    std::lock_guard lock(mutex_);
    if (done_) return;  // an abort came first, or the operation ended just before it
    done_ = true;
    failure_ = std::move(failure);
  }
  ended_.notify_all();
}

void GlooWork::rethrow_failure() const {
  if (failure_) std::rethrow_exception(failure_);
}

namespace {

std::exception_ptr not_run(const std::string& description, const std::string& first_failure) {
  return std::make_exception_ptr(Error(description + " was not run: the group failed earlier (" + first_failure +
                                       "); create a new group (usually: restart the job)"));
}

}  // namespace

GlooExecutor::GlooExecutor(std::function<void(std::exception_ptr)> on_first_failure)
    : state_(std::make_shared<State>()) {
  state_->on_first_failure = std::move(on_first_failure);
  thread_ = std::thread([state = state_] { run_tasks(state); });
}

GlooExecutor::~GlooExecutor() { shut_down(); }

void GlooExecutor::shut_down() {
  if (!thread_.joinable()) return;
  bool stuck = false;
  {
    std::unique_lock lock(state_->mutex);
    state_->stopping = true;
    state_->queued.notify_one();
    state_->changed.wait(lock, [&] { return state_->exited || state_->stuck; });
    stuck = !state_->exited;
  }
  if (stuck) {
    thread_.detach();  // it owns its state; gloo's timeout ends it
  } else {
    thread_.join();
  }
}

std::shared_ptr<Work> GlooExecutor::submit(std::string description, std::function<void()> run) {
  auto work = std::make_shared<GlooWork>(std::move(description));
  {
    std::lock_guard lock(state_->mutex);
    if (!state_->aborted) {
      state_->tasks.push_back(Task{work, std::move(run)});
      state_->queued.notify_one();
      return work;
    }
  }
  // After an abort the thread may be stuck: fail here instead of queueing behind it.
  work->finish(not_run(work->description(), state_->first_failure));  // fixed once aborted
  return work;
}

void GlooExecutor::abort(const std::function<std::exception_ptr(const std::string& description)>& error_for,
                         const std::function<void()>& stop_io, std::chrono::milliseconds grace) {
  std::shared_ptr<GlooWork> running;
  std::deque<Task> queued;
  std::string first_failure;
  {
    std::lock_guard lock(state_->mutex);
    if (state_->aborted || !state_->first_failure.empty()) return;
    state_->aborted = true;
    if (state_->current && !state_->current->completed()) running = state_->current;
    queued.swap(state_->tasks);
    // What later operations quote: the running one's failure, or the broken connection alone.
    auto failure = error_for(running ? running->description() : std::string("the group"));
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& error) {
      state_->first_failure = error.what();
    }
    if (running) state_->abort_failure = failure;
    first_failure = state_->first_failure;
  }
  for (auto& task : queued) task.work->finish(not_run(task.work->description(), first_failure));
  stop_io();
  if (running && !running->ended_within(grace)) {
    running->finish(state_->abort_failure);  // set once above, before anyone could read it
    std::lock_guard lock(state_->mutex);
    state_->stuck = true;
  }
  state_->changed.notify_all();
}

bool GlooExecutor::failed() const {
  std::lock_guard lock(state_->mutex);
  return state_->aborted || !state_->first_failure.empty();
}

void GlooExecutor::run_tasks(const std::shared_ptr<State>& state) {
  for (;;) {
    Task task;
    std::string first_failure;
    {
      std::unique_lock lock(state->mutex);
      state->queued.wait(lock, [&] { return state->stopping || !state->tasks.empty(); });
      if (state->tasks.empty()) {  // stopping, and nothing left to run
        state->exited = true;
        state->changed.notify_all();
        return;
      }
      task = std::move(state->tasks.front());
      state->tasks.pop_front();
      state->current = task.work;
      first_failure = state->first_failure;
    }
    if (!first_failure.empty()) {
      task.work->finish(not_run(task.work->description(), first_failure));
      continue;
    }
    std::exception_ptr failure;
    std::string failure_text;
    try {
      task.run();
    } catch (const std::exception& error) {
      failure_text = error.what();
      failure = std::current_exception();
    } catch (...) {
      failure_text = task.work->description() + " failed";
      failure = std::current_exception();
    }
    if (failure) {
      bool first = false;
      {
        std::lock_guard lock(state->mutex);
        if (state->abort_failure) {
          failure = state->abort_failure;  // it failed because abort() closed the connections
        } else if (state->first_failure.empty()) {
          state->first_failure = failure_text;
          first = true;
        }
      }
      if (first && state->on_first_failure) {
        try {
          state->on_first_failure(failure);
        } catch (...) {
          // the operation's own failure is what the caller needs to see
        }
      }
    }
    task.work->finish(failure);
  }
}

}  // namespace ddprun::detail

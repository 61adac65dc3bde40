#include "nccl_work.hpp"

#include <thread>

#include "ddprun/error.hpp"

namespace ddprun::detail::nccl {

namespace {

/// now + duration, without overflowing for "forever"-like durations.
std::chrono::steady_clock::time_point deadline_after(std::chrono::milliseconds duration) {
  auto now = std::chrono::steady_clock::now();
  auto room = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::time_point::max() - now);
  return duration >= room ? std::chrono::steady_clock::time_point::max() : now + duration;
}

}  // namespace

NcclWork::NcclWork(std::shared_ptr<Communicator> communicator, cudaEvent_t event, Operation operation)
    : communicator_(std::move(communicator)),
      event_(event),
      operation_(operation),
      group_deadline_(deadline_after(communicator_->timeout())) {}

NcclWork::~NcclWork() { communicator_->release_event(event_); }

bool NcclWork::check() const {
  if (done_.load(std::memory_order_acquire)) return true;
  if (communicator_->poll(event_, operation_)) {
    done_.store(true, std::memory_order_release);
    return true;
  }
  if (Clock::now() >= group_deadline_) {
    std::string what = "nccl " + operation_.describe();
    std::string limit = std::to_string(communicator_->timeout().count()) + " ms";
    communicator_->abort(what + " timed out after " + limit);
    throw TimeoutError(what + " on " + communicator_->where() + " did not end within the group's timeout (" + limit +
                       "): another rank died, hangs, or did not call it; the communicator was aborted");
  }
  return false;
}

void NcclWork::wait() { wait_until(Clock::time_point::max(), std::chrono::milliseconds::max()); }

void NcclWork::wait(std::chrono::milliseconds timeout) { wait_until(deadline_after(timeout), timeout); }

void NcclWork::wait_until(Clock::time_point caller_deadline, std::chrono::milliseconds caller_timeout) {
  for (unsigned polls = 0;; ++polls) {
    if (check()) return;
    if (Clock::now() >= caller_deadline) {
      throw TimeoutError("nccl " + operation_.describe() + " on " + communicator_->where() +
                         " has not ended after waiting " + std::to_string(caller_timeout.count()) +
                         " ms (it goes on: wait again, or give the group up)");
    }
    // Spin first: small collectives end within microseconds, which a sleep would dominate. Then back
    // off, so that a long collective does not keep a core busy.
    if (polls < 2000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(polls < 20000 ? 50 : 500));
    }
  }
}

bool NcclWork::completed() const {
  try {
    return check();
  } catch (const std::exception&) {
    return true;  // ended by failing; wait() says how
  }
}

}  // namespace ddprun::detail::nccl

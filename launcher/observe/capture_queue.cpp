#include "launcher/observe/capture_queue.hpp"

#include <boost/asio/post.hpp>
#include <utility>

namespace ddprun::launcher {

CaptureQueue::CaptureQueue(boost::asio::io_context& io, StackCaptureSettings settings)
    : io_(io), capture_(io, std::move(settings)) {}

CaptureQueue::~CaptureQueue() { *alive_ = false; }

void CaptureQueue::on_demand(std::vector<StackTarget> targets, Handler done) {
  waiting_.push_back(std::move(done));
  if (running_) return;
  hang_ = false;
  start(std::move(targets), {});
}

void CaptureQueue::for_hang(std::vector<StackTarget> targets, Handler on_digest, Handler on_done) {
  capture_.cancel();  // a request's or an earlier hang's capture: its waiters stay in waiting_
  running_ = false;
  hang_ = true;
  hang_done_ = std::move(on_done);
  start(std::move(targets), std::move(on_digest));
}

void CaptureQueue::start(std::vector<StackTarget> targets, Handler on_digest) {
  // StackCapture may finish inside start() (no targets, nothing to read): every handler is posted,
  // so that none runs inside a call to this object, and in the order the capture gave them.
  auto digest = [this, alive = alive_, on_digest = std::move(on_digest)](const std::vector<CapturedRank>& ranks) {
    if (!on_digest) return;
    boost::asio::post(io_, [alive, on_digest, ranks] {
      if (*alive) on_digest(ranks);
    });
  };
  running_ = true;
  if (!capture_.start(std::move(targets), std::move(digest),
                      [this](const std::vector<CapturedRank>& ranks) { finished(ranks); })) {
    running_ = false;  // not reached: this class starts a capture only when none runs
  }
}

void CaptureQueue::finished(const std::vector<CapturedRank>& ranks) {
  running_ = false;
  std::vector<Handler> handlers;
  if (hang_ && hang_done_) handlers.push_back(std::move(hang_done_));
  for (Handler& done : waiting_) handlers.push_back(std::move(done));
  waiting_.clear();
  hang_done_ = {};
  hang_ = false;
  boost::asio::post(io_, [alive = alive_, handlers = std::move(handlers), ranks] {
    for (const Handler& done : handlers) {
      if (!*alive) return;
      done(ranks);
    }
  });
}

}  // namespace ddprun::launcher

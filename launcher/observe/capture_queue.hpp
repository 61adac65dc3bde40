#pragma once
/// CaptureQueue: the agent's one way to its workers' stacks (owned by NodeStacks). Three parties want them: the hang
/// watch (--hang-timeout), a user asking (`ddprun stacks`, /api/stacks) and, in a multi-node job,
/// another node's agent asking through the job board. Two captures at once would collide: a process
/// has one ptrace tracer, so the second unwinder's attach fails and faulthandler's dump file is
/// written for both. So there is one StackCapture per agent, and this decides who it serves:
///  - a request while nothing runs starts a capture;
///  - a request on demand while a capture runs waits for that one and gets its stacks (they are
///    seconds old at most; a second capture would only take them again);
///  - a hang while a capture runs drops it (its gdb killed) and starts its own at once: the hang's
///    digest must not wait for a gdb that may take half a minute, and the hang's targets are the
///    ones to capture; whoever waited for the dropped capture gets the hang's stacks instead.
/// Handlers run on the loop, never inside a call to this object, and none after its destruction.
#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <vector>

#include "launcher/observe/stack_capture.hpp"

namespace ddprun::launcher {

class CaptureQueue {
 public:
  using Handler = StackCapture::Handler;

  CaptureQueue(boost::asio::io_context& io, StackCaptureSettings settings);
  /// Kills a capture under way; no handler is called after.
  ~CaptureQueue();
  CaptureQueue(const CaptureQueue&) = delete;
  CaptureQueue& operator=(const CaptureQueue&) = delete;

  /// Someone asks: `done` gets the stacks of the capture under way, or of a new one of `targets`
  /// (none: `done` gets no ranks, posted).
  void on_demand(std::vector<StackTarget> targets, Handler done);
  /// A hang: a capture of `targets` now; `on_digest` and `on_done` as StackCapture::start's. A
  /// capture under way is dropped, and its waiters are answered by this one; a hang capture under
  /// way too (the newer hang's targets are the current ones), whose own handlers are not called.
  void for_hang(std::vector<StackTarget> targets, Handler on_digest, Handler on_done);
  /// Whether a hang's capture is under way (its digest is coming).
  bool hang_capture_running() const { return running_ && hang_; }
  bool busy() const { return running_; }

 private:
  void start(std::vector<StackTarget> targets, Handler on_digest);
  void finished(const std::vector<CapturedRank>& ranks);

  boost::asio::io_context& io_;
  StackCapture capture_;
  bool running_ = false;
  bool hang_ = false;               ///< the running capture is a hang's
  Handler hang_done_;               ///< the hang's on_done, when hang_
  std::vector<Handler> waiting_;    ///< on-demand requests answered by the running capture
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  ///< false once destroyed: posted answers are dropped
};

}  // namespace ddprun::launcher

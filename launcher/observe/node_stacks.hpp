#pragma once
/// NodeStacks: this node's one way to take its ranks' stacks — which process each running rank is
/// and where its Python dumps go (the targets), and the one capture queue (capture_queue.hpp) the
/// hang watch, the status endpoint and the job board share, so that two captures never attach to
/// a process at once. Also what a worker needs for its Python stacks to be taken: ddprun's Python
/// folder on its path and the file its faulthandler writes.
#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/observe/attempt_view.hpp"
#include "launcher/observe/job_status.hpp"

namespace ddprun::launcher {

class CaptureQueue;
class RunLogs;
struct StackTarget;

/// A worker's side of stack capture (WorkerSpec's python_dir, python_stacks_file, stacks_signal).
struct PythonHooks {
  std::string python_dir;          ///< ddprun's Python folder: sitecustomize, ddprun_progress
  std::string python_stacks_file;  ///< where its faulthandler appends its dumps
  int stacks_signal = 0;           ///< the signal it registers faulthandler for
};

class NodeStacks {
 public:
  /// Where ddprun's Python folder is, or nothing (a ddprun copied away from its tree).
  using PythonDirFinder = std::function<std::optional<std::filesystem::path>()>;

  /// `find_python`: unset (the agent's case), ddprun's own tree (find_python_dir); a test's own lookup.
  NodeStacks(boost::asio::io_context& io, const RunLogs& logs, const AttemptView& attempt,
             PythonDirFinder find_python = {});
  ~NodeStacks();
  NodeStacks(const NodeStacks&) = delete;
  NodeStacks& operator=(const NodeStacks&) = delete;

  /// For the worker whose folder is `worker_dir`; nullopt when ddprun has no Python folder (a
  /// ddprun copied away from its tree: no Python stacks, no ddprun_progress).
  std::optional<PythonHooks> python_hooks(const std::filesystem::path& worker_dir);

  /// What a capture of `node`'s running ranks attaches to: the one list every capture uses.
  std::vector<StackTarget> targets(const NodeStatus& node) const;
  /// The capture queue, made at its first use: ddprun-unwind when it sits beside ddprun, else gdb.
  CaptureQueue& queue();
  /// Captures `node`'s running ranks (or joins the capture under way); `done` later, on the loop.
  void capture(const NodeStatus& node, std::function<void(std::vector<RankStacks>)> done);

 private:
  boost::asio::io_context& io_;
  const RunLogs& logs_;
  const AttemptView& attempt_;
  PythonDirFinder find_python_;
  std::unique_ptr<CaptureQueue> queue_;
  std::optional<std::filesystem::path> python_dir_;  ///< ddprun's Python folder, looked up once
  bool python_dir_looked_up_ = false;
};

}  // namespace ddprun::launcher

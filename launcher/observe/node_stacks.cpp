#include "launcher/observe/node_stacks.hpp"

#include "launcher/base/python_dir.hpp"
#include "launcher/observe/capture_queue.hpp"
#include "launcher/observe/stack_capture.hpp"
#include "launcher/output/run_logs.hpp"

namespace ddprun::launcher {
namespace {

/// In each worker's folder: where its faulthandler appends its dumps.
constexpr const char* kPythonStacksFile = "python_stacks.txt";

}  // namespace

NodeStacks::NodeStacks(boost::asio::io_context& io, const RunLogs& logs, const AttemptView& attempt,
                       PythonDirFinder find_python)
    : io_(io), logs_(logs), attempt_(attempt), find_python_(std::move(find_python)) {}

NodeStacks::~NodeStacks() = default;

std::optional<PythonHooks> NodeStacks::python_hooks(const std::filesystem::path& worker_dir) {
  if (!python_dir_looked_up_) {
    python_dir_ = find_python_ ? find_python_() : find_python_dir();
    python_dir_looked_up_ = true;
  }
  if (!python_dir_) return std::nullopt;
  return PythonHooks{python_dir_->string(), (worker_dir / kPythonStacksFile).string(), stack_dump_signal()};
}

std::vector<StackTarget> NodeStacks::targets(const NodeStatus& node) const {
  std::vector<StackTarget> targets;
  for (const RankStatus& rank : node.ranks) {
    if (rank.state != RankState::running || rank.pid <= 1) continue;
    StackTarget target;
    target.rank = rank.rank;
    target.local_rank = rank.local_rank;
    target.node_rank = attempt_.group_rank;
    target.pid = rank.pid;
    if (python_dir_) target.python_stacks_file = (logs_.worker_dir(attempt_.attempt, rank.local_rank) / kPythonStacksFile).string();
    targets.push_back(std::move(target));
  }
  return targets;
}

CaptureQueue& NodeStacks::queue() {
  if (!queue_) {
    StackCaptureSettings settings;
    settings.unwinder = find_unwinder().value_or("");
    queue_ = std::make_unique<CaptureQueue>(io_, settings);
  }
  return *queue_;
}

void NodeStacks::capture(const NodeStatus& node, std::function<void(std::vector<RankStacks>)> done) {
  queue().on_demand(targets(node), [done = std::move(done)](const std::vector<CapturedRank>& ranks) {
    std::vector<RankStacks> stacks;
    for (const CapturedRank& rank : ranks) stacks.push_back(rank.stacks);
    done(std::move(stacks));
  });
}

}  // namespace ddprun::launcher

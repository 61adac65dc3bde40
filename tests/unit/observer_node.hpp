#pragma once
/// One node's observers as the agent wires them, for the tests of those that lean on the others
/// (HangWatch, BoardLink, StatusService): the attempt's view, the event recorder (and a sink that
/// keeps every event), the log folder, the status watch over real child processes, the node's
/// stack capture and its side of the job board. The board's samples reach it as the agent's do:
/// as a listener of the status watch.
#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "launcher/observe/board_link.hpp"
#include "launcher/observe/event_recorder.hpp"
#include "launcher/observe/node_stacks.hpp"
#include "launcher/observe/status_watch.hpp"
#include "launcher/output/run_logs.hpp"
#include "observer_rig.hpp"

namespace ddprun::testing_support {

/// A sink of the test's: every event, as handed on.
struct CollectedEvents : launcher::JobEventSink {
  void record(const launcher::JobEvent& event) override { events.push_back(event); }
  std::vector<launcher::JobEvent> of(launcher::JobEventKind kind) const {
    std::vector<launcher::JobEvent> found;
    for (const auto& event : events) {
      if (event.kind == kind) found.push_back(event);
    }
    return found;
  }
  std::vector<launcher::JobEvent> events;
};

struct ObserverNodeOptions {
  launcher::AttemptView attempt;
  std::vector<pid_t> workers;   ///< local ranks 0.., as the worker group would describe them
  bool samples_wanted = false;  ///< --hang-timeout or --status-port: a monitor from the start
};

class ObserverNode {
 public:
  ObserverNode(boost::asio::io_context& io, const std::filesystem::path& log_dir, ObserverNodeOptions options)
      : attempt(options.attempt),
        workers(std::move(options.workers)),
        console(io),
        events(io, launcher::JobFacts{}, attempt, [](const std::string&) {}),
        logs(log_dir.string(), "run"),
        status(io, console.writer(), status_settings(options), attempt, events,
               [this](std::vector<launcher::WorkerView>& views) {
                 for (std::size_t i = 0; i < workers.size(); ++i) {
                   launcher::WorkerView view;
                   view.local_rank = static_cast<int>(i);
                   view.pid = workers[i];
                   views.push_back(view);
                 }
               }),
        stacks(io, logs, attempt, [] { return std::optional<std::filesystem::path>(); }),
        board(io, "run", attempt, status, stacks) {
    events.add_sink(&sink);
    status.add_listener([this](const launcher::NodeStatus& node) { board.on_sample(node); });
  }

  launcher::AttemptView attempt;
  std::vector<pid_t> workers;
  NullConsole console;
  CollectedEvents sink;
  launcher::EventRecorder events;
  launcher::RunLogs logs;
  launcher::StatusWatch status;
  launcher::NodeStacks stacks;
  launcher::BoardLink board;

 private:
  launcher::StatusWatchSettings status_settings(const ObserverNodeOptions& options) const {
    launcher::StatusWatchSettings settings;
    settings.block = false;
    settings.samples_wanted = options.samples_wanted;
    settings.host = "node" + std::to_string(options.attempt.group_rank);
    settings.nproc_per_node = static_cast<int>(workers.size());
    return settings;
  }
};

}  // namespace ddprun::testing_support

/// ddprun: parse, plan, run. Every failure that ends it becomes one line on stderr and the exit
/// status of the architecture page, in one place (exit_status.hpp).
#include <signal.h>
#include <unistd.h>

#include <climits>
#include <exception>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "launcher/agent.hpp"
#include "launcher/cli/cli.hpp"
#include "launcher/output/console.hpp"
#include "launcher/base/errors.hpp"
#include "launcher/report/exit_status.hpp"
#include "launcher/fleet/fleet.hpp"
#include "launcher/base/own_executable.hpp"
#include "launcher/cli/program.hpp"
#include "launcher/observe/trace_command.hpp"
#include "launcher/observe/status_command.hpp"

using namespace ddprun::launcher;

namespace {

std::string this_hostname() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

int run(const std::vector<std::string>& args) {
  // `ddprun trace EVENTS.jsonl`: an event log (--events) as a Chrome trace.
  if (is_trace_command(args)) return run_trace_command(args);
  Environ env = current_environ();
  // `ddprun status` / `ddprun stacks`: a running job, seen from another terminal.
  if (is_status_command(args)) return run_status_command(args, env);
  CommandLine command_line = parse_command_line(args, env, read_host_facts(env));
  if (const auto* info = std::get_if<InfoText>(&command_line)) {
    write_all(STDOUT_FILENO, info->text);
    return kExitSuccess;
  }
  LaunchConfig& config = std::get<LaunchConfig>(command_line);
  // --hostfile / -H: this ddprun starts every host's agent over ssh and runs no worker itself.
  if (!config.fleet.hosts.empty()) return run_fleet(config, env);
  WorkerCommand command = resolve_program(config, env, own_executable_dir());
  Agent agent(AgentPlan{std::move(config), std::move(command), std::move(env), this_hostname()});
  return agent.run();
}

}  // namespace

int main(int argc, char** argv) {
  // A closed console must not kill the launcher before it has stopped its workers.
  ::signal(SIGPIPE, SIG_IGN);
  try {
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (...) {
    ExitReport report = report_failure(std::current_exception());
    write_all(STDERR_FILENO, report.line);
    return report.status;
  }
}

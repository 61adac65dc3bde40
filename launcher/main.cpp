/// ddprun: parse, plan, run. Every expected failure becomes one line on stderr and the exit
/// status of the architecture page.
#include <signal.h>
#include <unistd.h>

#include <boost/system/system_error.hpp>
#include <climits>
#include <filesystem>
#include <new>
#include <system_error>
#include <string>
#include <vector>

#include "launcher/agent.hpp"
#include "launcher/cli.hpp"
#include "launcher/console.hpp"
#include "launcher/devices.hpp"
#include "launcher/errors.hpp"
#include "launcher/program.hpp"

using namespace ddprun::launcher;

namespace {

std::string this_hostname() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

AgentPlan plan_job(const std::vector<std::string>& args) {
  Environ env = current_environ();
  HostFacts host = read_host_facts(env);
  // Counted at most once, and only when the command line needs it; kept for -v.
  std::optional<VisibleDevices> counted;
  host.count_devices = [&counted, count = host.count_devices] {
    if (!counted) counted = count();
    return *counted;
  };
  LaunchConfig config = parse_command_line(args, env, host);
  std::vector<std::optional<std::string>> devices(static_cast<std::size_t>(config.nproc_per_node));
  if (config.devices_per_worker > 0) {
    const VisibleDevices& visible = host.count_devices();
    auto assigned = assign_devices(visible.names, config.devices_per_worker, config.nproc_per_node, visible.source);
    for (std::size_t i = 0; i < devices.size(); ++i) devices[i] = assigned.at(i);
  }
  WorkerCommand command = resolve_program(config, env);
  // --standalone is c10d on a store of its own: one node, which the single-node agent runs as it is.
  const bool multi_node = config.max_nodes > 1 || (config.rdzv_backend == "c10d" && !config.standalone);
  AgentPlan plan{std::move(config), std::move(command), std::move(env), std::move(devices), this_hostname(),
                 multi_node, std::nullopt};
  if (counted) plan.device_source = counted->source;
  return plan;
}

int fail(const std::string& line, int status) {
  write_all(STDERR_FILENO, "ddprun: " + line + "\n");
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  // A closed console must not kill the launcher before it has stopped its workers.
  ::signal(SIGPIPE, SIG_IGN);
  try {
    Agent agent(plan_job(std::vector<std::string>(argv + 1, argv + argc)));
    return agent.run();
  } catch (const InfoRequested& info) {
    write_all(STDOUT_FILENO, info.text);
    return kExitSuccess;
  } catch (const UsageError& error) {
    return fail(std::string("error: ") + error.what() + " (see ddprun --help)", kExitUsage);
  } catch (const LaunchError& error) {
    return fail(error.what(), kExitJobFailed);
  } catch (const std::filesystem::filesystem_error& error) {
    // The machine, not ddprun: a missing folder, a full disk, no permission.
    return fail(std::string(error.what()) + " (check that the folder exists, is writable and has room)",
                kExitJobFailed);
  } catch (const boost::system::system_error& error) {  // Asio's: a socket or descriptor the system refused
    return fail(std::string(error.what()) + " (a system resource ran out or was refused: check ulimit -a)",
                kExitJobFailed);
  } catch (const std::system_error& error) {
    return fail(std::string(error.what()) + " (a system resource ran out or was refused: check ulimit -a)",
                kExitJobFailed);
  } catch (const std::bad_alloc&) {
    return fail("out of memory", kExitJobFailed);
  } catch (const std::exception& error) {
    return fail(std::string("internal error: ") + error.what(), kExitJobFailed);
  }
}

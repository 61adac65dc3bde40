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
#include <utility>
#include <variant>
#include <vector>

#include "launcher/agent.hpp"
#include "launcher/cli.hpp"
#include "launcher/console.hpp"
#include "launcher/errors.hpp"
#include "launcher/program.hpp"

using namespace ddprun::launcher;

namespace {

std::string this_hostname() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

/// The job to run, or the text --help/--version ask for.
std::variant<AgentPlan, InfoText> plan_job(const std::vector<std::string>& args) {
  Environ env = current_environ();
  CommandLine command_line = parse_command_line(args, env, read_host_facts(env));
  if (auto* info = std::get_if<InfoText>(&command_line)) return std::move(*info);
  LaunchConfig& config = std::get<LaunchConfig>(command_line);
  WorkerCommand command = resolve_program(config, env);
  return AgentPlan{std::move(config), std::move(command), std::move(env), this_hostname()};
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
    auto plan = plan_job(std::vector<std::string>(argv + 1, argv + argc));
    if (const auto* info = std::get_if<InfoText>(&plan)) {
      write_all(STDOUT_FILENO, info->text);
      return kExitSuccess;
    }
    Agent agent(std::move(std::get<AgentPlan>(plan)));
    return agent.run();
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

#include "launcher/fleet/fleet_child.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "launcher/base/errors.hpp"

namespace ddprun::launcher {
namespace {

/// A pipe whose ends are closed on exec: the child gets only what is dup2'ed into 0, 1, 2.
std::pair<UniqueFd, UniqueFd> make_pipe(const std::string& what) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw LaunchError("cannot make a pipe for " + what + ": " + std::strerror(errno));
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

}  // namespace

FleetChild spawn_fleet_child(const std::vector<std::string>& argv, const Environ& env) {
  auto [in_read, in_write] = make_pipe(argv.at(0));
  auto [out_read, out_write] = make_pipe(argv.at(0));
  auto [err_read, err_write] = make_pipe(argv.at(0));

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_read.get(), 0);
  posix_spawn_file_actions_adddup2(&actions, out_write.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, err_write.get(), 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults, empty;
  sigemptyset(&empty);
  sigfillset(&defaults);
  sigdelset(&defaults, SIGKILL);
  sigdelset(&defaults, SIGSTOP);
  posix_spawnattr_setsigdefault(&attr, &defaults);  // ddprun ignores SIGPIPE; ssh must not inherit that
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);

  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> entries;
  for (const auto& [name, value] : env) entries.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (auto& entry : entries) envp.push_back(entry.data());
  envp.push_back(nullptr);

  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, argv[0].c_str(), &actions, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw LaunchError("cannot start " + argv[0] + ": " + std::strerror(rc));

  ::fcntl(in_write.get(), F_SETFL, ::fcntl(in_write.get(), F_GETFL) | O_NONBLOCK);  // a keep-alive never waits
  FleetChild child;
  child.pid = pid;
  child.in = std::move(in_write);
  child.out = std::move(out_read);
  child.err = std::move(err_read);
  return child;
}

std::optional<int> reap_if_exited(pid_t pid) {
  int status = 0;
  pid_t done = ::waitpid(pid, &status, WNOHANG);
  if (done == 0) return std::nullopt;
  if (done < 0) return kExitJobFailed;  // not ours any more: nothing to wait for
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

}  // namespace ddprun::launcher

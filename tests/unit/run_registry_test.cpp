// The run registry: where it lives, which socket path a run gets, which runs an argument names
// (tables), and entries written, read back and cleaned when their agent is gone (real files, real
// processes).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "launcher/base/errors.hpp"
#include "launcher/observe/run_registry.hpp"
#include "scratch_folder.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;
using testing_support::ScratchFolder;

RunEntry entry(std::string run_id, pid_t pid, std::uint64_t ticks, std::string run_dir, std::string socket) {
  RunEntry run;
  run.run_id = std::move(run_id);
  run.pid = pid;
  run.start_ticks = ticks;
  run.host = "h";
  run.run_dir = std::move(run_dir);
  run.socket = std::move(socket);
  return run;
}

TEST(RunRegistry, FolderFollowsXdgRuntimeDirOnlyWhenUsable) {
  const struct {
    const char* xdg;  ///< nullptr: unset
    bool usable;
    const char* folder;
  } rows[] = {
      {"/run/user/1000", true, "/run/user/1000/ddprun"},
      {"/run/user/1000", false, "/tmp/ddprun-1000"},
      {"relative/dir", true, "/tmp/ddprun-1000"},
      {"", true, "/tmp/ddprun-1000"},
      {nullptr, true, "/tmp/ddprun-1000"},
  };
  for (const auto& row : rows) {
    Environ env;
    if (row.xdg != nullptr) env["XDG_RUNTIME_DIR"] = row.xdg;
    EXPECT_EQ(registry_folder(env, 1000, row.usable).string(), row.folder) << (row.xdg ? row.xdg : "(unset)");
  }
}

TEST(RunRegistry, SocketInTheRunFolderWhenItFits) {
  const std::string registry = "/run/user/1000/ddprun";
  const std::string fits(107 - std::string("/status.sock").size(), 'a');  // 107 bytes and the NUL
  const std::string too_long = fits + "b";
  const struct {
    std::string run_dir;
    std::string socket;
  } rows[] = {
      {"/tmp/logs/run_ab12", "/tmp/logs/run_ab12/status.sock"},
      {fits, fits + "/status.sock"},
      {too_long, registry + "/4242.sock"},
  };
  for (const auto& row : rows) EXPECT_EQ(status_socket_path(row.run_dir, registry, 4242), row.socket) << row.run_dir;
  EXPECT_EQ(status_socket_path(fits, registry, 1).size(), 107u);
}

TEST(RunRegistry, WhichRunsAnArgumentNames) {
  RunEntry a = entry("job7", 100, 0, "/logs/job7_ab", "/logs/job7_ab/status.sock");
  RunEntry b = entry("job7", 200, 0, "/logs/job7_cd", "/logs/job7_cd/status.sock");
  RunEntry c = entry("none", 300, 0, "/tmp/x/none_ef", "/tmp/x/none_ef/status.sock");
  const std::vector<RunEntry> runs{a, b, c};
  const struct {
    const char* argument;
    std::vector<pid_t> pids;
  } rows[] = {
      {"job7", {100, 200}},          // a run id two runs share
      {"200", {200}},                // an agent's pid
      {"/logs/job7_ab", {100}},      // a run folder
      {"/logs/job7_ab/", {100}},     // with a trailing slash
      {"/logs/./job7_cd", {200}},    // not in normal form
      {"/logs", {100, 200}},         // the --log-dir they share
      {"/tmp/x", {300}},
      {"none", {300}},
      {"job", {}},
      {"/logs/job7", {}},
      {"10", {}},
  };
  for (const auto& row : rows) {
    std::vector<pid_t> pids;
    for (const auto& run : runs_named(runs, row.argument)) pids.push_back(run.pid);
    EXPECT_EQ(pids, row.pids) << row.argument;
  }
}

TEST(RunRegistry, OpensAPrivateFolderAndRefusesAnOpenOne) {
  ScratchFolder scratch("run_registry");
  ASSERT_EQ(::chmod(scratch.root().c_str(), 0700), 0);
  Environ env{{"XDG_RUNTIME_DIR", scratch.root().string()}};
  const fs::path folder = open_registry_folder(env);
  EXPECT_EQ(folder, scratch.root() / "ddprun");
  struct stat info {};
  ASSERT_EQ(::stat(folder.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0700u);
  EXPECT_EQ(open_registry_folder(env), folder) << "a second agent uses the same";

  ASSERT_EQ(::chmod(folder.c_str(), 0777), 0);  // someone opened it to others
  try {
    open_registry_folder(env);
    ADD_FAILURE() << "an open registry was used";
  } catch (const LaunchError& error) {
    EXPECT_NE(std::string(error.what()).find("others may enter it (mode 0777)"), std::string::npos) << error.what();
  }
  ASSERT_EQ(::chmod(folder.c_str(), 0700), 0);
  fs::remove(folder);
  ASSERT_EQ(::symlink("/tmp", folder.c_str()), 0);  // a link planted where the folder goes
  EXPECT_THROW(open_registry_folder(env), LaunchError);
}

TEST(RunRegistry, EntriesOfLiveAgentsAreListedAndDeadOnesRemoved) {
  ScratchFolder scratch("run_registry_entries");
  const fs::path folder = scratch.root();
  RunEntry self = entry("me", ::getpid(), *process_start_ticks(::getpid()), "/logs/me_1", "/logs/me_1/status.sock");
  self.started_at = 2;
  self.command = "train.py --lr 0.1";

  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);
  RunEntry dead = entry("gone", child, 12345, "/logs/gone_1", (folder / "gone.sock").string());
  std::ofstream(folder / "gone.sock") << "";
  RunEntry reused = entry("reused", ::getppid(), 1, "/logs/reused", "/logs/reused/status.sock");  // pid alive, another start

  {
    RunRegistration mine(folder, self);
    EXPECT_EQ(mine.file(), folder / (std::to_string(::getpid()) + ".json"));
    RunRegistration gone(folder, dead);
    RunRegistration other(folder, reused);
    std::ofstream(folder / "junk.json") << "{not json";
    std::ofstream(folder / "notes.txt") << "ignored";
    std::vector<RunEntry> runs = registered_runs(folder);
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].run_id, "me");
    EXPECT_EQ(runs[0].command, "train.py --lr 0.1");
    EXPECT_EQ(runs[0].socket, "/logs/me_1/status.sock");
    EXPECT_FALSE(fs::exists(folder / (std::to_string(child) + ".json"))) << "a dead agent's entry is removed";
    EXPECT_FALSE(fs::exists(folder / "gone.sock")) << "with its socket in the registry";
    EXPECT_TRUE(fs::exists(folder / "junk.json")) << "what is not an entry is left alone";
  }
  EXPECT_FALSE(fs::exists(folder / (std::to_string(::getpid()) + ".json"))) << "removed when the agent ends";
}

TEST(RunRegistry, StartTicksOfThisProcessAndNoneOfAGoneOne) {
  auto mine = process_start_ticks(::getpid());
  ASSERT_TRUE(mine.has_value());
  EXPECT_GT(*mine, 0u);
  EXPECT_EQ(process_start_ticks(::getpid()), mine);
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  EXPECT_FALSE(process_start_ticks(child).has_value());
}

}  // namespace
}  // namespace ddprun::launcher

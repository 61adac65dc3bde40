// --preload (warm start) through the real binary, with real Python workers (Debian's python3):
// - a warm worker is the cold one but for sys.modules: what it sees of its start (argv, __main__,
//   sys.path, both environments, descriptors, terminals, process group and session, signals, stdin)
//   and how it ends (exit code, traceback, SIGKILL: the failure summary), on pipes and on ptys;
// - a restart hands over interpreters that were waiting before the failure (found in /proc, and as
//   `ddprun status` shows them), each to its own local rank; on a terminal too, and in an elastic job;
// - a failed import, a CUDA-initialising preload (a stand-in libcuda.so.1) and a warm interpreter
//   killed while it waits give warm start up with one line, and the job runs cold;
// - usage errors; no process of the job outlives it (the warm interpreters and what they started
//   included), whatever ends ddprun; hang digests, `ddprun stacks` and progress reports of warm workers.
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <thread>

#include "harness.hpp"
#include "pty_launch.hpp"

namespace ddprun::testing {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

const fs::path kData = WARM_DATA_DIR;
const std::string kCudaStandin = CUDA_STANDIN_LIBRARY;

bool has_system_python() { return ::access(kSystemPython, X_OK) == 0; }

bool system_python_has_torch() {
  static const bool has = std::system((std::string(kSystemPython) + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0;
  return has;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// A value no other job of this machine carries: the jobs here put it in their environment, so that
/// every process they start (warm interpreters and what those start included) is found in /proc.
std::string unique_tag() {
  static std::atomic<int> count{0};
  std::random_device random;
  return std::to_string(::getpid()) + "-" + std::to_string(count++) + "-" + std::to_string(random());
}

/// What every job here runs with: Debian's Python for the workers (it has torch), first on PATH too.
std::map<std::string, std::string> python_env(std::map<std::string, std::string> more = {}) {
  more.emplace("PYTHON_EXEC", kSystemPython);
  const char* path = std::getenv("PATH");
  more.emplace("PATH", std::string("/usr/bin:") + (path != nullptr ? path : "/bin"));
  return more;
}

std::vector<std::string> joined(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

json read_json(const fs::path& path) { return json::parse(read_file(path), nullptr, false); }

/// Waits for a record a worker writes (atomically, by rename) and reads it.
json wait_json(const fs::path& path, std::chrono::milliseconds timeout = 60s) {
  if (!eventually([&] { return fs::exists(path); }, timeout)) {
    ADD_FAILURE() << path << " was never written";
    return json::object();
  }
  return read_json(path);
}

bool has_module(const json& record, const std::string& name) {
  for (const auto& key : {"modules", "warm"}) {
    if (!record.contains(key)) continue;
    const auto& list = record.at(key);
    if (std::find(list.begin(), list.end(), name) != list.end()) return true;
  }
  return false;
}

void write_file(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

/// The NAME=VALUE entries a process was started (exec'd) with: /proc/PID/environ, which keeps them
/// whatever the process did to its environment since.
std::vector<std::string> environ_of(pid_t pid) {
  std::vector<std::string> entries;
  const std::string text = read_file("/proc/" + std::to_string(pid) + "/environ");
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\0', start);
    if (end == std::string::npos) end = text.size();
    entries.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return entries;
}

std::vector<pid_t> all_pids() {
  std::vector<pid_t> pids;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") == std::string::npos) pids.push_back(std::stoi(name));
  }
  return pids;
}

/// The live processes (zombies are dead) of the job tagged `tag` (unique_tag).
std::set<pid_t> job_processes(const std::string& tag) {
  std::set<pid_t> found;
  const std::string entry = "WARM_TEST_TAG=" + tag;
  for (pid_t pid : all_pids()) {
    const auto env = environ_of(pid);
    if (std::find(env.begin(), env.end(), entry) != env.end() && process_alive(pid)) found.insert(pid);
  }
  return found;
}

/// The job's warm interpreters (started with DDPRUN_WARM_FD) that are not one of `workers`: the ones
/// waiting for the next start (an interpreter that became a worker keeps its start's environ).
std::set<pid_t> waiting_interpreters(const std::string& tag, const std::set<pid_t>& workers) {
  std::set<pid_t> found;
  for (pid_t pid : job_processes(tag)) {
    const auto env = environ_of(pid);
    if (std::find(env.begin(), env.end(), "DDPRUN_WARM_FD=3") != env.end() && !workers.contains(pid)) found.insert(pid);
  }
  return found;
}

/// Whether `pid` waits for its "go": blocked in read(2) on its socket to ddprun, descriptor 3 (what
/// python/ddprun_warm.py does once its modules are imported and it said "ready").
bool waits_for_go(pid_t pid) {
  const std::string read_on_3 = std::to_string(SYS_read) + " 0x3 ";
  return read_file("/proc/" + std::to_string(pid) + "/syscall").rfind(read_on_3, 0) == 0;
}

std::string describe(const std::set<pid_t>& pids) {
  std::string text;
  for (pid_t pid : pids) {
    std::string cmdline = read_file("/proc/" + std::to_string(pid) + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    text += "\n  " + std::to_string(pid) + ": " + cmdline;
  }
  return text;
}

/// The worker_started events of `attempt` in an --events file, by rank.
std::map<int, json> started_workers(const fs::path& events, int attempt) {
  std::map<int, json> started;
  for (const auto& line : split_lines(read_file(events))) {
    const json event = json::parse(line, nullptr, false);
    if (event.is_object() && event.value("event", "") == "worker_started" && event.value("attempt", -1) == attempt) {
      started[event.at("rank").get<int>()] = event;
    }
  }
  return started;
}

/// The lines of `text` that hold `part`.
std::vector<std::string> lines_with(const std::string& text, const std::string& part) {
  std::vector<std::string> found;
  for (const auto& line : split_lines(text)) {
    if (contains(line, part)) found.push_back(line);
  }
  return found;
}

// ---------------------------------------------------------------------------------------------
// 1. A warm worker is the cold one.

struct EquivalenceCase {
  const char* name;
  const char* preload;  ///< the modules
  bool terminal;        ///< ddprun on a terminal, --pty on; else pipes, bytes piped into ddprun's stdin
  const char* action;   ///< what rank 1 does at the end (probe.py): ok, exit3, raise, kill9
  bool module;          ///< run as `-m probe` from the working folder rather than as a script
  const char* stdin_flag = "--stdin=rank0";  ///< who reads ddprun's stdin
};

/// One run of probe.py: what ddprun said and did, and each rank's record.
struct ProbeRun {
  int exit_status = -1;
  std::string out;  ///< on a terminal: everything
  std::string err;
  json records[2];
};

constexpr const char* kStdinBytes = "line one\nnot a line \x01\x7f\xc3\xa9 end";

/// `bytes` as probe.py records them: decoded as Latin-1 (a character per byte), in JSON's UTF-8.
std::string latin1(const std::string& bytes) {
  std::string text;
  for (unsigned char byte : bytes) {
    if (byte < 0x80) {
      text.push_back(static_cast<char>(byte));
    } else {
      text.push_back(static_cast<char>(0xc0 | (byte >> 6)));
      text.push_back(static_cast<char>(0x80 | (byte & 0x3f)));
    }
  }
  return text;
}

ProbeRun run_probe(const EquivalenceCase& c, bool warm, const fs::path& work) {
  const fs::path out = work / "out";
  fs::remove_all(out);
  fs::create_directories(out);
  std::vector<std::string> job{ddprun_binary(), "--standalone", "--nproc-per-node", "2"};
  if (warm) job = joined(job, {"--preload", c.preload});
  if (c.terminal) job = joined(job, {"--pty", "on", "--status", "off"});
  job.push_back(c.stdin_flag);
  if (c.module) {
    job = joined(job, {"-m", "probe"});
  } else {
    job.push_back((work / "probe.py").string());
  }
  job = joined(job, {out.string(), c.action, c.terminal ? "nostdin" : "stdin"});
  // The same working folder and TMPDIR for both runs.
  const auto env = python_env({{"TMPDIR", (work / "tmp").string()}});
  ProbeRun run;
  if (c.terminal) {
    PtyLaunch launch(joined({"/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", work.string()}, job), PtyLaunch::as_given, env);
    run.exit_status = launch.wait_exit();
    run.out = launch.output();
  } else {
    Launch launch(Launch::Command{joined({"/bin/sh", "-c", "cd \"$0\" && cat stdin.bin | \"$@\"", work.string()}, job)},
                  env);
    Outcome outcome = launch.wait();
    run.exit_status = outcome.exit_status;
    run.out = outcome.out;
    run.err = outcome.err;
  }
  for (int rank = 0; rank < 2; ++rank) {
    const fs::path path = out / (std::to_string(rank) + ".json");
    if (fs::exists(path)) run.records[rank] = read_json(path);
  }
  return run;
}

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

/// A record with what legitimately differs between two runs made the same: the modules, the pid,
/// the run's id, folder, port and guardian mark, the ptys' numbers (named by order of appearance).
json normalised_record(json record) {
  record.erase("modules");
  record.erase("pid");
  json& env = record["environ"];
  const std::string progress = env.value("DDPRUN_PROGRESS_FILE", "");
  const std::string run_folder = progress.substr(0, progress.find("/attempt_"));
  for (const char* name : {"MASTER_PORT", "TORCHELASTIC_RUN_ID", "DDPRUN_GUARDIAN_MARK"}) {
    if (env.contains(name)) env[name] = "<varies>";
    for (auto& entry : record["c_environ"]) {
      if (entry.get<std::string>().rfind(std::string(name) + "=", 0) == 0) entry = std::string(name) + "=<varies>";
    }
  }
  std::string text = record.dump(1);
  replace_all(text, run_folder, "<run folder>");
  static const std::regex pty("/dev/pts/[0-9]+");
  std::map<std::string, std::string> ptys;
  std::string renamed;
  std::size_t done = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), pty); it != std::sregex_iterator(); ++it) {
    ptys.emplace(it->str(), "<pty " + std::to_string(ptys.size()) + ">");
    renamed += text.substr(done, static_cast<std::size_t>(it->position()) - done) + ptys[it->str()];
    done = static_cast<std::size_t>(it->position() + it->length());
  }
  text = renamed + text.substr(done);
  return json::parse(text);
}

/// ddprun's report (its stderr, or a terminal's text) with what differs between runs made the same
/// (time, pids, the banners' widths, which follow the pids'), and the ranks' own racing lines gone.
/// A terminal's line is what shows: after its last carriage return, with no escape sequence.
std::string normalised_report(const std::string& text) {
  static const std::regex escape("\x1b\\[[0-9;?]*[A-Za-z]");
  static const std::regex rank_line("^rank [01] (wrote its record|to stderr)$");
  static const std::regex time_line("^  time      : .*$");
  static const std::regex pid(R"((pid: |PID )[0-9]+)");
  static const std::regex banner("^(=+|-+)$");
  std::string result;
  for (std::string line : split_lines(text)) {
    line = std::regex_replace(line, escape, "");
    while (line.ends_with('\r')) line.pop_back();
    if (auto cr = line.rfind('\r'); cr != std::string::npos) line.erase(0, cr + 1);
    if (std::regex_match(line, rank_line)) continue;
    line = std::regex_replace(line, time_line, "  time      : <time>");
    line = std::regex_replace(line, pid, "$1<pid>");
    line = std::regex_replace(line, banner, "<banner>");
    result += line + "\n";
  }
  return result;
}

std::vector<std::string> sorted_lines(const std::string& text) {
  auto lines = split_lines(text);
  std::sort(lines.begin(), lines.end());
  return lines;
}

class WarmIsCold : public ::testing::TestWithParam<EquivalenceCase> {};

TEST_P(WarmIsCold, TheWorkerSeesTheSameStartAndEndsTheSameWay) {
  const EquivalenceCase& c = GetParam();
  if (!has_system_python()) GTEST_SKIP() << kSystemPython << " is missing";
  if (std::string(c.preload) == "torch" && !system_python_has_torch()) GTEST_SKIP() << "no torch in " << kSystemPython;
  TempDir work;
  fs::copy_file(kData / "probe.py", work.path() / "probe.py");
  write_file(work.path() / "stdin.bin", kStdinBytes);
  fs::create_directories(work.path() / "tmp");

  ProbeRun cold = run_probe(c, false, work.path());
  ProbeRun warm = run_probe(c, true, work.path());
  const std::string both = "\ncold:\n" + cold.out + cold.err + "\nwarm:\n" + warm.out + warm.err;

  const std::string action = c.action;
  const int expected_status = action == "ok" ? 0 : 1;
  EXPECT_EQ(cold.exit_status, expected_status) << both;
  EXPECT_EQ(warm.exit_status, expected_status) << both;
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_FALSE(cold.records[rank].is_null()) << "cold rank " << rank << both;
    ASSERT_FALSE(warm.records[rank].is_null()) << "warm rank " << rank << both;
    // Warm indeed (ddprun_warm made it a worker, the modules are there), and cold indeed.
    EXPECT_TRUE(has_module(warm.records[rank], "ddprun_warm")) << rank;
    EXPECT_TRUE(has_module(warm.records[rank], c.preload)) << rank;
    EXPECT_FALSE(has_module(cold.records[rank], "ddprun_warm")) << rank;
    if (std::string(c.preload) == "torch") {
      EXPECT_FALSE(has_module(cold.records[rank], "torch")) << rank;
    }

    const json a = normalised_record(cold.records[rank]);
    const json b = normalised_record(warm.records[rank]);
    for (const auto& [key, value] : a.items()) {
      EXPECT_EQ(value.dump(1), b.contains(key) ? b.at(key).dump(1) : "<missing>") << "rank " << rank << ": " << key;
    }
    EXPECT_EQ(a.size(), b.size()) << "rank " << rank;
  }
  // What the records hold is what a worker of this kind should see.
  json& zero = warm.records[0];
  EXPECT_EQ(zero["stdin"], c.terminal ? json(nullptr) : json(latin1(kStdinBytes))) << "rank 0 reads ddprun's stdin";
  if (!c.terminal) {
    const bool all = std::string(c.stdin_flag) == "--stdin=all";
    EXPECT_EQ(warm.records[1]["stdin"], all ? latin1(kStdinBytes) : "") << "rank 1 reads ddprun's stdin, or /dev/null";
  }
  EXPECT_EQ(zero["name"], "__main__");
  EXPECT_EQ(zero["cwd"], work.str());
  EXPECT_EQ(zero["environ"]["RANK"], "0");
  EXPECT_EQ(warm.records[1]["environ"]["RANK"], "1");
  EXPECT_EQ(zero["parent"], "ddprun");
  EXPECT_EQ(zero["pgid_is_pid"], true);
  EXPECT_EQ(zero["terminals"][1]["tty"], c.terminal);
  EXPECT_FALSE(zero["descriptors"].contains("4")) << zero["descriptors"].dump() << ": the socket to ddprun left open?";
  if (c.module) {
    EXPECT_EQ(zero["main_spec"], "probe");
    EXPECT_EQ(zero["path0"], work.str());
  } else {
    EXPECT_EQ(zero["main_file"], (work.path() / "probe.py").string());
  }

  // The same end: ddprun's report (the failure summary), and the workers' own output.
  EXPECT_EQ(normalised_report(cold.err), normalised_report(warm.err));
  EXPECT_EQ(normalised_report(cold.out), normalised_report(warm.out));
  if (!c.terminal) {
    EXPECT_EQ(sorted_lines(cold.out), sorted_lines(warm.out));
  }
  const std::string report = warm.out + warm.err;
  const std::string failed_pid = std::to_string(warm.records[1]["pid"].get<int>());
  if (action == "exit3") {
    EXPECT_TRUE(contains(report, "  rank      : 1 (local_rank: 1)\n  exitcode  : 3 (pid: " + failed_pid + ")\n")) << report;
  } else if (action == "raise") {
    EXPECT_TRUE(contains(report, "  exitcode  : 1 (pid: " + failed_pid + ")\n")) << report;
    EXPECT_TRUE(contains(report, "ValueError: probe failed on purpose\n")) << report;
    EXPECT_TRUE(contains(report, "probe.py\", line 131, in <module>\n")) << report;
  } else if (action == "kill9") {
    EXPECT_TRUE(contains(report, "  exitcode  : -9 (pid: " + failed_pid + ")\n")) << report;
    EXPECT_TRUE(contains(report, "Signal 9 (SIGKILL) received by PID " + failed_pid)) << report;
  } else {
    EXPECT_FALSE(contains(report, "FAILED")) << report;
  }
  EXPECT_FALSE(contains(report, "--preload")) << report;
}

INSTANTIATE_TEST_SUITE_P(
    Preload, WarmIsCold,
    ::testing::Values(EquivalenceCase{"json_pipes", "json", false, "ok", false},
                      EquivalenceCase{"json_pipes_module", "json", false, "ok", true},
                      EquivalenceCase{"json_pipes_stdin_all", "json", false, "ok", false, "--stdin=all"},
                      EquivalenceCase{"json_pipes_exit3", "json", false, "exit3", false},
                      EquivalenceCase{"json_pipes_exception", "json", false, "raise", false},
                      EquivalenceCase{"json_pipes_sigkill", "json", false, "kill9", false},
                      EquivalenceCase{"json_pty", "json", true, "ok", false},
                      EquivalenceCase{"json_pty_exception", "json", true, "raise", false},
                      EquivalenceCase{"torch_pipes", "torch", false, "ok", false}),
    [](const auto& test) { return std::string(test.param.name); });

// ---------------------------------------------------------------------------------------------
// 2. Restarts.

/// A job of restart.py; `flags` come before the script.
struct RestartJob {
  RuntimeDir runtime;  ///< its own run registry: `ddprun status` finds this job alone
  TempDir dir;
  std::string tag = unique_tag();
  fs::path out = dir.path() / "out";
  fs::path events = dir.path() / "events.jsonl";
  std::unique_ptr<Launch> launch;
  bool gave_up = false;  ///< a record never came: the job was ended

  /// `job`: the flags of a job on this node alone (one_node_job_flags).
  RestartJob(const std::vector<std::string>& flags, std::map<std::string, std::string> env = {},
             const std::vector<std::string>& job = {"--standalone"}) {
    fs::create_directories(out);
    env["WARM_TEST_TAG"] = tag;
    env["XDG_RUNTIME_DIR"] = runtime.str();
    launch = std::make_unique<Launch>(
        joined(joined(joined(job, {"--nproc-per-node", "2", "--events", events.string()}), flags),
               {(kData / "restart.py").string(), out.string()}),
        python_env(env));
  }
  /// attempt's rank's record, once written; when it never is, the job is ended and what it said shown.
  json record(int attempt, int rank) {
    const fs::path path = out / ("attempt" + std::to_string(attempt) + "_rank" + std::to_string(rank) + ".json");
    if (gave_up || !eventually([&] { return fs::exists(path); }, 60s)) {
      if (gave_up) return json::object();
      gave_up = true;
      launch->send(SIGKILL);
      ADD_FAILURE() << path << " was never written; ddprun said:\n" << launch->wait(10s).err;
      return json::object();
    }
    return read_json(path);
  }
  std::set<pid_t> workers(int attempt) {
    return {record(attempt, 0).value("pid", 0), record(attempt, 1).value("pid", 0)};
  }
  /// The two interpreters waiting for the next start, once both wait for their "go".
  std::set<pid_t> waiting(const std::set<pid_t>& workers) {
    std::set<pid_t> found;
    const bool two = eventually([&] {
      found = waiting_interpreters(tag, workers);
      return found.size() == 2 && std::all_of(found.begin(), found.end(), waits_for_go);
    }, 60s);
    EXPECT_TRUE(two) << "waiting interpreters:" << describe(found);
    return found;
  }
  void touch(const std::string& name) { write_file(out / name, ""); }
  /// The interpreters `ddprun status --json` shows waiting: pid by local rank.
  std::map<int, pid_t> status_waiting() {
    std::map<int, pid_t> found;
    const json status = json::parse(run_ddprun({"status", "--json"}, {{"XDG_RUNTIME_DIR", runtime.str()}}).out, nullptr, false);
    if (!status.is_object() || !status.contains("nodes") || status["nodes"].empty()) return found;
    for (const json& interpreter : status["nodes"][0].value("warm", json::array())) {
      found[interpreter.at("local_rank").get<int>()] = interpreter.at("pid").get<pid_t>();
    }
    return found;
  }
};

std::set<pid_t> values(const std::map<int, pid_t>& by_rank) {
  std::set<pid_t> pids;
  for (const auto& [rank, pid] : by_rank) pids.insert(pid);
  return pids;
}

TEST(WarmRestart, TheNextAttemptsWorkersAreTheInterpretersThatWaitedAsTheirOwnRanks) {
  if (!has_system_python()) GTEST_SKIP() << kSystemPython << " is missing";
  RestartJob job({"--max-restarts", "1", "--preload", "json"});
  const std::set<pid_t> first = job.workers(0);
  const std::set<pid_t> waiting = job.waiting(first);
  // ddprun shows them, by local rank.
  std::map<int, pid_t> shown;
  EXPECT_TRUE(eventually([&] { return values(shown = job.status_waiting()) == waiting; }))
      << "ddprun status shows " << describe(values(shown)) << "\nwaiting:" << describe(waiting);
  job.touch("fail");  // rank 1 exits 7
  std::set<pid_t> second;
  for (int rank = 0; rank < 2; ++rank) {
    json record = job.record(1, rank);
    EXPECT_EQ(record["restart_count"], "1") << record;
    EXPECT_EQ(record["rank"], rank) << record;
    EXPECT_EQ(record["local_rank"], rank) << record;
    EXPECT_EQ(record["world_size"], 2) << record;
    EXPECT_EQ(record["warm"], json::array({"ddprun_warm", "json"})) << record;
    EXPECT_TRUE(waiting.contains(record.value("pid", 0))) << record << " is not one of" << describe(waiting);
    EXPECT_EQ(record.value("pid", 0), shown[rank]) << "local rank " << rank << "'s worker is its own interpreter";
    second.insert(record.value("pid", 0));
  }
  EXPECT_EQ(second.size(), 2u);
  // The last restart allowed: no interpreter waits for another.
  std::this_thread::sleep_for(500ms);
  EXPECT_TRUE(waiting_interpreters(job.tag, second).empty()) << describe(waiting_interpreters(job.tag, second));
  job.touch("end");
  Outcome outcome = job.launch->wait();
  EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_TRUE(contains(outcome.err, "ddprun: rank 1 failed (exit code 7); restarting the worker group, restart 1 of 1\n"))
      << outcome.err;
  EXPECT_FALSE(contains(outcome.err, "--preload")) << outcome.err;
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(job.record(0, rank)["warm"], json::array({"ddprun_warm", "json"})) << "attempt 0 starts warm too";
    EXPECT_EQ(job.record(0, rank)["restart_count"], "0");
  }
  // The events name the same processes, started warm.
  for (int attempt = 0; attempt < 2; ++attempt) {
    const auto started = started_workers(job.events, attempt);
    ASSERT_EQ(started.size(), 2u) << read_file(job.events);
    for (const auto& [rank, event] : started) {
      EXPECT_EQ(event.value("pid", 0), job.record(attempt, rank).value("pid", 0)) << event;
      EXPECT_EQ(event.value("warm", false), true) << event;
    }
  }
}

// An elastic job (c10d, --nnodes=1:2: rendezvous rounds) restarts warm too.
TEST(WarmRestart, AnElasticJobsNextRoundStartsWarm) {
  if (!has_system_python()) GTEST_SKIP() << kSystemPython << " is missing";
  RestartJob job({"--max-restarts", "1", "--preload", "json"}, {}, one_node_job_flags(true));
  const std::set<pid_t> waiting = job.waiting(job.workers(0));
  job.touch("fail");
  for (int rank = 0; rank < 2; ++rank) {
    json record = job.record(1, rank);
    EXPECT_EQ(record["restart_count"], "1") << record;
    EXPECT_EQ(record["rank"], rank) << record;
    EXPECT_EQ(record["warm"], json::array({"ddprun_warm", "json"})) << record;
    EXPECT_TRUE(waiting.contains(record.value("pid", 0))) << record << " is not one of" << describe(waiting);
  }
  job.touch("end");
  Outcome outcome = job.launch->wait();
  EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_FALSE(contains(outcome.err, "--preload")) << outcome.err;
}

// Under a terminal (--pty on): the new rank 0's pty is sized as ddprun's terminal is at the restart
// (it was resized while the interpreter waited), and takes the keys typed.
TEST(WarmRestart, UnderATerminalTheNewRankZeroHasTheTerminalsSizeAndItsKeys) {
  if (!has_system_python()) GTEST_SKIP() << kSystemPython << " is missing";
  TempDir dir;
  const fs::path out = dir.path() / "out";
  fs::create_directories(out);
  const std::string tag = unique_tag();
  PtyLaunch launch({ddprun_binary(), "--standalone", "--nproc-per-node", "2", "--max-restarts", "1", "--preload",
                    "json", "--pty", "on", "--status", "off", (kData / "terminal_restart.py").string(), out.string()},
                   PtyLaunch::as_given, python_env({{"WARM_TEST_TAG", tag}}));
  json first0 = wait_json(out / "attempt0_rank0.json");
  json first1 = wait_json(out / "attempt0_rank1.json");
  EXPECT_EQ(first0["size"], json::parse("[[120, 40], [120, 40]]")) << first0;
  std::set<pid_t> waiting;
  ASSERT_TRUE(eventually([&] {
    waiting = waiting_interpreters(tag, {first0.value("pid", 0), first1.value("pid", 0)});
    return waiting.size() == 2 && std::all_of(waiting.begin(), waiting.end(), waits_for_go);
  }, 60s)) << describe(waiting) << launch.output();
  launch.resize(37, 91);
  std::this_thread::sleep_for(300ms);  // ddprun takes the SIGWINCH
  write_file(out / "fail", "");
  ASSERT_TRUE(launch.wait_for("ready")) << launch.output();
  launch.type("again\n");
  EXPECT_TRUE(launch.wait_for("rank 0 got again")) << launch.output();
  EXPECT_EQ(launch.wait_exit(), 0) << launch.output();
  json second = wait_json(out / "attempt1_rank0.json");
  EXPECT_EQ(second["warm"], json::array({"ddprun_warm", "json"})) << second;
  EXPECT_TRUE(waiting.contains(second.value("pid", 0))) << second << describe(waiting);
  EXPECT_EQ(second["size"], json::parse("[[91, 37], [91, 37]]")) << second;
}

// ---------------------------------------------------------------------------------------------
// 3. A preload that fails: one line, and the job runs cold.

struct FailedPreload {
  const char* name;
  const char* modules;
  const char* reason;  ///< in the line: "MODULE: Exception: message"
};

class PreloadFails : public ::testing::TestWithParam<FailedPreload> {};

TEST_P(PreloadFails, OneLineThenTheJobRunsColdAndRestartsCold) {
  const FailedPreload& c = GetParam();
  if (!has_system_python()) GTEST_SKIP() << kSystemPython << " is missing";
  TempDir modules;
  write_file(modules.path() / "refuses_to_load.py", "import json\nraise RuntimeError('this module   refuses\\nto load')\n");
  write_file(modules.path() / "exits_at_import.py", "import sys\nsys.exit(4)\n");
  RestartJob job({"--max-restarts", "2", "--preload", c.modules}, {{"PYTHONPATH", modules.str()}});
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_FALSE(has_module(job.record(0, rank), "ddprun_warm")) << job.record(0, rank);
  }
  job.touch("fail");
  for (int rank = 0; rank < 2; ++rank) {
    json record = job.record(1, rank);
    EXPECT_FALSE(has_module(record, "ddprun_warm")) << record;
    EXPECT_EQ(record["rank"], rank);
  }
  EXPECT_TRUE(job.status_waiting().empty()) << "warm start given up: no interpreter waits for restart 2";
  for (const auto& [rank, event] : started_workers(job.events, 1)) EXPECT_EQ(event.value("warm", true), false) << event;
  job.touch("end");
  Outcome outcome = job.launch->wait();
  EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
  const auto lines = lines_with(outcome.err, "--preload");
  ASSERT_EQ(lines.size(), 1u) << outcome.err;
  const std::regex expected("ddprun: warning: --preload failed on local rank [01] \\(" + std::string(c.reason) +
                            "\\): the workers start cold");
  EXPECT_TRUE(std::regex_match(lines[0], expected)) << lines[0];
}

// An upgrade of ddprun while a job runs gives the job's next interpreters a ddprun_warm.py that may
// speak other messages: it says so and fails its worker, never running the script with the shared
// environment; the restart is cold. A copy of ddprun beside a ddprun_warm.py of protocol 99.
TEST(PreloadFails, AnInterpreterOfAnotherProtocolFailsItsWorkerAndTheRestartIsCold) {
  if (!has_system_python()) GTEST_SKIP() << kSystemPython << " is missing";
  TempDir copy;
  fs::create_directories(copy.path() / "bin");
  fs::copy_file(ddprun_binary(), copy.path() / "bin" / "ddprun");
  const fs::path built_python = fs::path(ddprun_binary()).parent_path().parent_path() / "share" / "ddprun" / "python";
  const fs::path python = copy.path() / "share" / "ddprun" / "python";
  fs::create_directories(python);
  for (const char* module : {"sitecustomize.py", "ddprun_progress.py", "ddprun_warm.py"}) {
    fs::copy_file(built_python / module, python / module);
  }
  std::string warm = read_file(python / "ddprun_warm.py");
  const std::string line = "PROTOCOL = \"1\"";
  ASSERT_NE(warm.find(line), std::string::npos) << "ddprun_warm.py's protocol line moved";
  warm.replace(warm.find(line), line.size(), "PROTOCOL = \"99\"");
  write_file(python / "ddprun_warm.py", warm);
  TempDir dir;
  write_file(dir.path() / "which.py", "import os, sys\n"
                                      "print('attempt', os.environ['TORCHELASTIC_RESTART_COUNT'], 'warm' if 'ddprun_warm' in sys.modules else 'cold')\n");
  Launch job(Launch::Command{{(copy.path() / "bin" / "ddprun").string(), "--standalone", "--nproc-per-node", "2",
                              "--max-restarts", "1", "--preload", "json", (dir.path() / "which.py").string()}},
             python_env());
  Outcome outcome = job.wait();
  EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_EQ(outcome.out.find("attempt 0"), std::string::npos) << "a script ran in an interpreter of another protocol:\n" << outcome.out;
  EXPECT_EQ(lines_with(outcome.out, "attempt 1 cold").size(), 2u) << outcome.out;
  const auto warnings = lines_with(outcome.err, "--preload failed");
  ASSERT_EQ(warnings.size(), 1u) << outcome.err;
  EXPECT_NE(warnings[0].find("ddprun_warm.py speaks protocol 99, the ddprun that started it 1"), std::string::npos) << warnings[0];
  EXPECT_FALSE(lines_with(outcome.err, "ddprun: warm interpreter: ").empty()) << outcome.err;
}

INSTANTIATE_TEST_SUITE_P(
    Preload, PreloadFails,
    ::testing::Values(
        FailedPreload{"missing", "json,no_such_module_for_ddprun",
                      "no_such_module_for_ddprun: ModuleNotFoundError: No module named 'no_such_module_for_ddprun'"},
        FailedPreload{"raises", "json,refuses_to_load", "refuses_to_load: RuntimeError: this module refuses to load"},
        FailedPreload{"exits", "exits_at_import", "exits_at_import: SystemExit: 4"}),
    [](const auto& test) { return std::string(test.param.name); });

// A module beside the script is preloaded as the script would import it (the script's folder first
// on sys.path), and sys.path is the cold worker's afterwards.
TEST(Preload, AModuleBesideTheScriptIsFoundAsTheScriptFindsIt) {
  if (!has_system_python()) GTEST_SKIP() << kSystemPython << " is missing";
  TempDir dir;
  write_file(dir.path() / "beside_the_script.py", "VALUE = 42\n");
  write_file(dir.path() / "train.py", "import sys\n"
                                      "print(sorted(m for m in ('ddprun_warm', 'beside_the_script') if m in sys.modules))\n"
                                      "print(sys.path.count(sys.path[0]), sys.path[0])\n");
  Outcome outcome = run_ddprun({"--standalone", "--preload", "beside_the_script", (dir.path() / "train.py").string()},
                               python_env());
  EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_EQ(outcome.out, "['beside_the_script', 'ddprun_warm']\n1 " + dir.str() + "\n") << outcome.err;
  EXPECT_FALSE(contains(outcome.err, "--preload")) << outcome.err;
}

// ---------------------------------------------------------------------------------------------
// 4. A preload that initialises CUDA is refused (a stand-in libcuda.so.1: the CUDA driver's
//    cuInit and cuDeviceGetCount), and one that only loads the driver is not.

std::string cuda_module(bool init) {
  return "import ctypes\n"
         "driver = ctypes.CDLL(" + json(kCudaStandin).dump() + ")\n" +
         (init ? "result = driver.cuInit(0)\n" : "");
}

/// A worker that says which of the modules it has and whether the driver is mapped into it.
constexpr const char* kCudaWorker = R"(import os, sys
names = [m for m in ("ddprun_warm", "json", "cuda_init", "cuda_loaded") if m in sys.modules]
mapped = any(os.path.basename(line.split()[-1]).startswith("libcuda.so") for line in open("/proc/self/maps") if "/" in line)
print(os.environ["RANK"], ",".join(names) or "-", "mapped" if mapped else "unmapped", flush=True)
)";

class CudaPreload : public ::testing::TestWithParam<bool> {};

TEST_P(CudaPreload, InitialisingCudaIsRefusedAndTheWorkersAreFreshInterpreters) {
  if (!has_system_python()) GTEST_SKIP() << kSystemPython << " is missing";
  const bool no_device = GetParam();
  TempDir dir;
  write_file(dir.path() / "cuda_init.py", cuda_module(true));
  write_file(dir.path() / "worker.py", kCudaWorker);
  std::map<std::string, std::string> env{{"PYTHONPATH", dir.str()}};
  if (no_device) env["CUDA_STANDIN_NO_DEVICE"] = "1";
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "2", "--preload", "json,cuda_init",
                                (dir.path() / "worker.py").string()},
                               python_env(env));
  EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_EQ(sorted_lines(outcome.out), std::vector<std::string>({"0 - unmapped", "1 - unmapped"})) << outcome.err;
  const auto lines = lines_with(outcome.err, "--preload");
  ASSERT_EQ(lines.size(), 1u) << outcome.err;
  EXPECT_EQ(lines[0], "ddprun: error: --preload refused: importing json,cuda_init initialised CUDA, which must wait for "
                      "each worker's CUDA_VISIBLE_DEVICES: the workers start cold");
}

INSTANTIATE_TEST_SUITE_P(Preload, CudaPreload, ::testing::Values(false, true),
                         [](const auto& test) { return test.param ? "cuInit_no_device" : "cuInit_one_device"; });

TEST(Preload, LoadingTheCudaDriverWithoutCuInitStaysWarm) {
  if (!has_system_python()) GTEST_SKIP() << kSystemPython << " is missing";
  TempDir dir;
  write_file(dir.path() / "cuda_loaded.py", cuda_module(false));
  write_file(dir.path() / "worker.py", kCudaWorker);
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "2", "--preload", "cuda_loaded",
                                (dir.path() / "worker.py").string()},
                               python_env({{"PYTHONPATH", dir.str()}}));
  EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_EQ(sorted_lines(outcome.out),
            std::vector<std::string>({"0 ddprun_warm,cuda_loaded mapped", "1 ddprun_warm,cuda_loaded mapped"}))
      << outcome.err;
  EXPECT_FALSE(contains(outcome.err, "--preload")) << outcome.err;
}

// ---------------------------------------------------------------------------------------------
// 5. Usage errors, and PET_PRELOAD.

struct BadPreload {
  const char* name;
  std::vector<std::string> args;  ///< SHEBANG: an executable script with `shebang` as its #! line
  std::string line;               ///< the one line, after "ddprun: error: " and before " (see ddprun --help)"
  std::map<std::string, std::string> env = {};
  std::string shebang = "";
};

class PreloadUsage : public ::testing::TestWithParam<BadPreload> {};

TEST_P(PreloadUsage, OneLineAndExitTwo) {
  const BadPreload& bad = GetParam();
  TempDir dir;
  const std::string script = (dir.path() / "train").string();
  write_file(script, "#!" + bad.shebang + "\nopen(" + json((dir.path() / "ran").string()).dump() + ", 'w')\n");
  fs::permissions(script, fs::perms::owner_all);
  std::vector<std::string> args = bad.args;
  std::string line = bad.line;
  for (auto& a : args) {
    if (a == "WORKER") a = test_worker_binary();
    if (a == "SHEBANG") a = script;
  }
  replace_all(line, "WORKER", test_worker_binary());
  replace_all(line, "SHEBANG", script);
  Outcome outcome = run_ddprun(joined({"--standalone"}, args), python_env(bad.env));
  EXPECT_EQ(outcome.exit_status, 2) << outcome.err;
  EXPECT_EQ(outcome.err, "ddprun: error: " + line + " (see ddprun --help)\n");
  EXPECT_EQ(outcome.out, "");
  EXPECT_FALSE(fs::exists(dir.path() / "ran")) << "a worker ran";
}

const std::string kNeedsPython = "--preload needs Python workers, and \"WORKER\" runs without Python (an executable, or --no-python)";

std::string cannot_warm(const std::string& option, char flag) {
  return "--preload cannot warm /usr/bin/python3 " + option + ": -" + flag +
         " keeps Python from importing ddprun's sitecustomize (from the #! line of SHEBANG)";
}

INSTANTIATE_TEST_SUITE_P(
    Preload, PreloadUsage,
    ::testing::Values(
        BadPreload{"no_python", {"--no-python", "--preload", "json", "WORKER", "true"}, kNeedsPython},
        BadPreload{"executable", {"--preload", "json", "WORKER", "true"}, kNeedsPython},
        BadPreload{"pet_preload_executable", {"WORKER", "true"}, kNeedsPython, {{"PET_PRELOAD", "json"}}},
        BadPreload{"shebang_E", {"--preload", "json", "SHEBANG"}, cannot_warm("-E", 'E'), {}, "/usr/bin/python3 -E"},
        BadPreload{"shebang_S", {"--preload", "json", "SHEBANG"}, cannot_warm("-S", 'S'), {}, "/usr/bin/python3 -S"},
        BadPreload{"shebang_I", {"--preload", "json", "SHEBANG"}, cannot_warm("-I", 'I'), {}, "/usr/bin/python3 -I"},
        BadPreload{"shebang_env_sE", {"--preload", "json", "SHEBANG"}, cannot_warm("-sE", 'E'), {}, "/usr/bin/env -S python3 -sE"},
        // A -u of the #! line's own is not ddprun's: the options after it count too.
        BadPreload{"shebang_env_u_E", {"--preload", "json", "SHEBANG"}, cannot_warm("-E", 'E'), {}, "/usr/bin/env -S python3 -u -E"},
        BadPreload{"shebang_env_u_I", {"--preload", "json", "SHEBANG"}, cannot_warm("-I", 'I'), {}, "/usr/bin/env -S python3 -u -I"},
        BadPreload{"shebang_env_u_S", {"--preload", "json", "SHEBANG"}, cannot_warm("-S", 'S'), {}, "/usr/bin/env -S python3 -u -S"},
        BadPreload{"shebang_one_word_u_E", {"--preload", "json", "SHEBANG"}, cannot_warm("-E", 'E'), {}, "/usr/bin/python3 -u -E"},
        BadPreload{"empty", {"--preload", "", "SHEBANG"}, "--preload: \"\" names no module"},
        BadPreload{"empty_entry", {"--preload", "a,,b", "SHEBANG"}, "--preload: \"a,,b\" has an empty entry"},
        BadPreload{"trailing_comma", {"--preload", "json,", "SHEBANG"}, "--preload: \"json,\" has an empty entry"},
        BadPreload{"not_a_name", {"--preload", "torch.nn,my-module", "SHEBANG"},
                   "--preload: \"torch.nn,my-module\" has \"my-module\", which is not a module name"},
        BadPreload{"empty_part", {"--preload", "torch..nn", "SHEBANG"}, "--preload: \"torch..nn\" has \"torch..nn\", which is not a module name"},
        BadPreload{"pet_preload_empty_entry", {"SHEBANG"}, "--preload (from PET_PRELOAD): \"x,,y\" has an empty entry",
                   {{"PET_PRELOAD", "x,,y"}}}),
    [](const auto& test) { return std::string(test.param.name); });

// PET_PRELOAD=torch is --preload torch (the command line wins over it).
TEST(Preload, PetPreloadWarmsLikeTheFlag) {
  if (!has_system_python()) GTEST_SKIP() << kSystemPython << " is missing";
  if (!system_python_has_torch()) GTEST_SKIP() << "no torch in " << kSystemPython;
  TempDir dir;
  write_file(dir.path() / "train.py", "import sys\n"
                                      "print(sorted(m for m in ('ddprun_warm', 'torch') if m in sys.modules))\n");
  Outcome env = run_ddprun({"--standalone", "--nproc-per-node", "2", (dir.path() / "train.py").string()},
                           python_env({{"PET_PRELOAD", "torch"}}));
  EXPECT_EQ(env.exit_status, 0) << env.err;
  EXPECT_EQ(env.out, "['ddprun_warm', 'torch']\n['ddprun_warm', 'torch']\n") << env.err;
  Outcome flag = run_ddprun({"--standalone", "--preload", "json", (dir.path() / "train.py").string()},
                            python_env({{"PET_PRELOAD", "torch"}}));
  EXPECT_EQ(flag.exit_status, 0) << flag.err;
  EXPECT_EQ(flag.out, "['ddprun_warm']\n") << flag.err;  // json's, not torch
}

// ---------------------------------------------------------------------------------------------
// 6. No process of the job outlives it: not the workers, not the interpreters waiting for the
//    next attempt, not what a preload started in a session of its own.

/// A preload that starts a helper in a new session (as a library's server or compile workers
/// would), and notes its pid in WARM_HELPER_DIR. Its streams are /dev/null: one that held the
/// worker's output open would hold the job's end up (cold or warm, ddprun waits for the output).
constexpr const char* kHelperModule = R"(import os, subprocess
_helper = subprocess.Popen(["sleep", "1009"], start_new_session=True, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
open(os.path.join(os.environ["WARM_HELPER_DIR"], "helper_%d" % _helper.pid), "w").close()
)";

struct EndCase {
  const char* name;
  int signo;  ///< 0: the job ends by itself
  bool cgroup;
};

class WarmNoOrphans : public ::testing::TestWithParam<EndCase> {};

TEST_P(WarmNoOrphans, NothingOfTheJobOutlivesDdprun) {
  const EndCase c = GetParam();
  if (!has_system_python()) GTEST_SKIP() << kSystemPython << " is missing";
  TempDir modules;
  write_file(modules.path() / "starts_a_helper.py", kHelperModule);
  std::map<std::string, std::string> env{{"PYTHONPATH", modules.str()}, {"WARM_HELPER_DIR", modules.str()}};
  if (!c.cgroup) env["DDPRUN_JOB_CGROUP"] = "off";
  RestartJob job({"--max-restarts", "2", "--shutdown-timeout", "2", "--preload", "json,starts_a_helper"}, env);
  const std::set<pid_t> workers = job.workers(0);
  const std::set<pid_t> waiting = job.waiting(workers);
  // Each interpreter, the two workers' and the two waiting ones, started its helper.
  auto helpers = [&] {
    int count = 0;
    for (const auto& entry : fs::directory_iterator(modules.path())) count += entry.path().filename().string().starts_with("helper_");
    return count;
  };
  ASSERT_TRUE(eventually([&] { return helpers() == 4; })) << helpers();
  const std::set<pid_t> before = job_processes(job.tag);
  EXPECT_GE(before.size(), 8u) << describe(before);

  Outcome outcome;
  if (c.signo == 0) {
    job.touch("end");
    outcome = job.launch->wait();
    EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
  } else {
    job.launch->send(c.signo);
    outcome = job.launch->wait(30s);
    EXPECT_EQ(outcome.exit_status, 128 + c.signo) << outcome.err;
  }
  std::set<pid_t> left;
  EXPECT_TRUE(eventually([&] { return (left = job_processes(job.tag)).empty(); }, 10s))
      << "outlived ddprun:" << describe(left) << "\n" << outcome.err;
  for (pid_t pid : left) ::kill(pid, SIGKILL);  // this test's own leftovers
  EXPECT_FALSE(contains(outcome.err, "--preload")) << outcome.err;
}

INSTANTIATE_TEST_SUITE_P(Preload, WarmNoOrphans,
                         ::testing::Values(EndCase{"normal_end", 0, true}, EndCase{"normal_end_no_cgroup", 0, false},
                                           EndCase{"sigkill", SIGKILL, true}, EndCase{"sigkill_no_cgroup", SIGKILL, false},
                                           EndCase{"sigterm", SIGTERM, true}, EndCase{"sigint_no_cgroup", SIGINT, false}),
                         [](const auto& test) { return std::string(test.param.name); });

// ---------------------------------------------------------------------------------------------
// 7. A warm interpreter that dies while it waits: one line, and the restart is cold and works.

TEST(WarmRestart, AWaitingInterpreterKilledMakesTheRestartCold) {
  if (!has_system_python()) GTEST_SKIP() << kSystemPython << " is missing";
  RestartJob job({"--max-restarts", "1", "--preload", "json"});
  const std::set<pid_t> first = job.workers(0);
  const std::set<pid_t> waiting = job.waiting(first);
  ASSERT_EQ(waiting.size(), 2u);
  std::map<int, pid_t> shown;
  ASSERT_TRUE(eventually([&] { return values(shown = job.status_waiting()) == waiting; })) << describe(values(shown));
  const pid_t victim = shown[1];  // local rank 1's
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  // ddprun reaps it and gives warm start up: the other waiting one is killed too.
  EXPECT_TRUE(eventually([&] { return !fs::exists("/proc/" + std::to_string(victim)); })) << "not reaped";
  EXPECT_TRUE(eventually([&] { return waiting_interpreters(job.tag, first).empty(); }))
      << describe(waiting_interpreters(job.tag, first));
  job.touch("fail");
  for (int rank = 0; rank < 2; ++rank) {
    json record = job.record(1, rank);
    EXPECT_EQ(record["restart_count"], "1") << record;
    EXPECT_EQ(record["warm"], json::array()) << record << ": the restart is cold";
    EXPECT_FALSE(waiting.contains(record.value("pid", 0))) << record;
    EXPECT_EQ(started_workers(job.events, 1)[rank].value("warm", true), false) << read_file(job.events);
  }
  job.touch("end");
  Outcome outcome = job.launch->wait();
  EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
  const auto lines = lines_with(outcome.err, "--preload");
  ASSERT_EQ(lines.size(), 1u) << outcome.err;
  EXPECT_EQ(lines[0], "ddprun: warning: --preload: local rank 1's warm interpreter ended (killed by SIGKILL) before it "
                      "became a worker: the workers start cold");
  EXPECT_TRUE(contains(outcome.err, "restarting the worker group, restart 1 of 1\n")) << outcome.err;
}

// ---------------------------------------------------------------------------------------------
// 8. A warm worker is as observable as a cold one.

TEST(WarmObservability, HangTimeoutFindsAWarmWorkerAsleepWithItsPythonFrames) {
  if (!has_system_python()) GTEST_SKIP() << kSystemPython << " is missing";
  TempDir dir;
  const fs::path logs = dir.path() / "logs";
  Outcome outcome = Launch({"--standalone", "--nproc-per-node", "2", "--preload", "json", "--hang-timeout", "2",
                            "--hang-action", "stop", "--log-dir", logs.string(), (kData / "sleepy.py").string(), dir.str()},
                           python_env())
                        .wait(120s);
  EXPECT_EQ(outcome.exit_status, 1) << outcome.err;
  EXPECT_TRUE(contains(outcome.err, "ddprun: hang: no rank made progress for ")) << outcome.err;
  EXPECT_TRUE(contains(outcome.err, "ddprun: hang: ranks 0,1: time.sleep(600) <- sleepy.py:15\n")) << outcome.err;
  EXPECT_TRUE(contains(outcome.err, "Root Cause: hang\n")) << outcome.err;
  EXPECT_TRUE(contains(outcome.err, "  where     : ranks 0,1: time.sleep(600) <- sleepy.py:15\n")) << outcome.err;
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(wait_json(dir.path() / (std::to_string(rank) + ".json"), 1s)["warm"],
              json::array({"ddprun_warm", "json"}));
  }
}

TEST(WarmObservability, DdprunStacksShowsAWarmWorkersPythonFrames) {
  if (!has_system_python()) GTEST_SKIP() << kSystemPython << " is missing";
  RuntimeDir runtime;
  TempDir dir;
  Launch job({"--standalone", "--nproc-per-node", "2", "--preload", "json", (kData / "sleepy.py").string(), dir.str()},
             python_env({{"XDG_RUNTIME_DIR", runtime.str()}}));
  json zero = wait_json(dir.path() / "0.json");
  json one = wait_json(dir.path() / "1.json");
  EXPECT_EQ(zero["warm"], json::array({"ddprun_warm", "json"}));
  Outcome stacks;
  const std::string frame = "    sleep_here  " + (kData / "sleepy.py").string() + ":15\n";
  EXPECT_TRUE(eventually([&] {
    stacks = run_ddprun({"stacks"}, {{"XDG_RUNTIME_DIR", runtime.str()}});
    return stacks.exit_status == 0 && contains(stacks.out, frame);
  })) << stacks.out << stacks.err;
  for (const json& record : {zero, one}) {
    const std::string pid = std::to_string(record.value("pid", 0));
    const auto at = stacks.out.find("(pid " + pid + ", node 0):\n");
    ASSERT_NE(at, std::string::npos) << stacks.out;
    EXPECT_NE(stacks.out.find(frame, at), std::string::npos) << stacks.out;
  }
  job.send(SIGTERM);
  job.wait();
}

/// The progress reports of progress.py's ranks, read back with `ddprun status --json`.
void expect_progress_reported(const std::string& preload, const std::map<std::string, std::string>& more_env = {}) {
  RuntimeDir runtime;
  TempDir dir;
  auto env = python_env(more_env);
  env["XDG_RUNTIME_DIR"] = runtime.str();
  Launch job({"--standalone", "--nproc-per-node", "2", "--preload", preload, (kData / "progress.py").string(), dir.str()},
             env);
  json records[2] = {wait_json(dir.path() / "0.json"), wait_json(dir.path() / "1.json")};
  for (const json& record : records) EXPECT_TRUE(has_module(record, "ddprun_warm")) << record;
  json status;
  std::string seen;
  const bool reported = eventually([&] {
    Outcome outcome = run_ddprun({"status", "--json"}, {{"XDG_RUNTIME_DIR", runtime.str()}});
    seen = outcome.out + outcome.err;
    status = json::parse(outcome.out, nullptr, false);
    if (!status.is_object() || !status.contains("nodes") || status["nodes"].empty()) return false;
    for (const json& rank : status["nodes"][0]["ranks"]) {
      if (!rank.contains("progress") || !rank["progress"].is_object()) return false;
    }
    return true;
  }, 10s);
  write_file(dir.path() / "end", "");
  Outcome outcome = job.wait();
  EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
  ASSERT_TRUE(reported) << "no progress in `ddprun status --json`: " << seen << "\nthe workers: " << records[0] << records[1];
  for (json rank : status["nodes"][0]["ranks"]) {
    const int r = rank["rank"];
    EXPECT_EQ(rank["pid"], records[r]["pid"]) << rank;
    EXPECT_EQ(rank["progress"]["step"], 10 + r) << rank;
    EXPECT_EQ(rank["progress"]["samples"], 100 * (10 + r)) << rank;
    EXPECT_EQ(rank["progress"]["text"], "rank " + std::to_string(r) + " at step " + std::to_string(10 + r)) << rank;
  }
}

TEST(WarmObservability, AWarmWorkersProgressReportsReachDdprun) {
  if (!has_system_python()) GTEST_SKIP() << kSystemPython << " is missing";
  expect_progress_reported("json");
}

// A preloaded module that imports ddprun_progress (a training library that reports progress) imports
// it before "go" brings DDPRUN_PROGRESS_FILE: the workers' reports must still reach ddprun.
TEST(WarmObservability, APreloadThatImportsDdprunProgressLeavesTheWorkersReportsOn) {
  if (::access(kSystemPython, X_OK) != 0) GTEST_SKIP() << kSystemPython << " is missing";
  RuntimeDir runtime;
  TempDir dir;
  TempDir modules;
  write_file(modules.path() / "reports_progress.py", "import ddprun_progress\n");
  Launch job({"--standalone", "--nproc-per-node", "2", "--preload", "json,reports_progress",
              (kData / "progress.py").string(), dir.str()},
             python_env({{"XDG_RUNTIME_DIR", runtime.str()}, {"PYTHONPATH", modules.str()}}));
  json records[2];
  for (int rank = 0; rank < 2; ++rank) {
    const fs::path path = dir.path() / (std::to_string(rank) + ".json");
    ASSERT_TRUE(eventually([&] { return fs::exists(path); }, 60s)) << path;
    records[rank] = json::parse(read_file(path));
    EXPECT_NE(std::find(records[rank]["warm"].begin(), records[rank]["warm"].end(), "ddprun_warm"),
              records[rank]["warm"].end())
        << records[rank];
  }
  json status;
  const bool reported = eventually([&] {
    status = json::parse(run_ddprun({"status", "--json"}, {{"XDG_RUNTIME_DIR", runtime.str()}}).out, nullptr, false);
    if (!status.is_object() || !status.contains("nodes") || status["nodes"].empty()) return false;
    for (const json& rank : status["nodes"][0]["ranks"]) {
      if (!rank.contains("progress") || !rank["progress"].is_object()) return false;
    }
    return true;
  }, 5s);
  write_file(dir.path() / "end", "");
  Outcome outcome = job.wait();
  EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(records[rank]["progress_enabled"], true) << "rank " << rank << ": ddprun_progress.enabled()";
  }
  EXPECT_TRUE(reported) << "no progress in `ddprun status --json`: " << status.dump(1);
}

}  // namespace
}  // namespace ddprun::testing

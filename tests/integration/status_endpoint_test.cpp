// The status endpoint of a real job (issue 13): /api/status names the job's ranks and pids,
// /metrics passes promtool, the page rendered by headless Chromium shows the same rows (a
// screenshot is kept in tests/output/status_endpoint/), `ddprun status` and `ddprun stacks` from
// another process find the job and print every rank, and hostile clients (a 1 MB header, 1,000
// connections, a byte a second) lose only their connection while the job runs on untouched.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "../support/chromium.hpp"
#include "../support/raw_http.hpp"
#include "harness.hpp"

namespace ddprun::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;


/// A job of `nproc` test_worker processes that write their pid and sleep, under ddprun with the
/// status endpoint (one node, its store on a port the kernel picks, the run id the test's); ddprun's
/// stderr goes to a file read while it runs.
class StatusJob {
 public:
  /// `worker`: the worker's command; empty: test_worker writing its pid (started() waits for them).
  StatusJob(const RuntimeDir& runtime, int nproc, const std::vector<std::string>& extra_flags = {},
            std::map<std::string, std::string> env = {}, const std::vector<std::string>& worker = {})
      : log_dir_(logs_.path() / "logs"), stderr_file_(logs_.path() / "ddprun.err") {
    std::vector<std::string> argv = {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>\"$DDPRUN_TEST_STDERR\"", ddprun_binary(),
                                     "--master-port", "0", "--nproc-per-node", std::to_string(nproc), "--rdzv-id", run_id(),
                                     "--log-dir", log_dir_.string()};
    argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
    argv.push_back("--no-python");
    if (worker.empty()) {
      argv.insert(argv.end(), {test_worker_binary(), "pid", logs_.str()});
    } else {
      argv.insert(argv.end(), worker.begin(), worker.end());
    }
    env["XDG_RUNTIME_DIR"] = runtime.str();
    env["DDPRUN_TEST_STDERR"] = stderr_file_.string();
    launch_ = std::make_unique<Launch>(Launch::Command{argv}, env);
    if (!worker.empty()) {
      started_ = eventually([&] { return port() > 0; });
      return;
    }
    started_ = eventually([&] {
      for (int rank = 0; rank < nproc; ++rank) {
        if (!std::filesystem::exists(logs_.path() / ("pid_" + std::to_string(rank)))) return false;
      }
      return true;
    });
    for (int rank = 0; rank < nproc; ++rank) pids_[rank] = std::stoi(read_file(logs_.path() / ("pid_" + std::to_string(rank))));
  }
  ~StatusJob() {
    if (launch_) {
      launch_->send(SIGTERM);
      launch_->wait();
    }
  }

  bool started() const { return started_; }
  static std::string run_id() { return "status-test-" + std::to_string(::getpid()); }
  const std::filesystem::path& log_dir() const { return log_dir_; }
  const std::map<int, pid_t>& pids() const { return pids_; }
  pid_t agent_pid() const { return launch_->pid(); }
  std::string stderr_text() const { return read_file(stderr_file_); }

  /// The port of "ddprun: status at http://127.0.0.1:PORT/"; 0 when not printed (yet).
  int port() const { return printed_status_port(stderr_text()); }

  /// Stops the job; its outcome.
  Outcome stop() {
    launch_->send(SIGTERM);
    Outcome outcome = launch_->wait();
    launch_.reset();
    return outcome;
  }

 private:
  TempDir logs_;
  std::filesystem::path log_dir_;
  std::filesystem::path stderr_file_;
  std::unique_ptr<Launch> launch_;
  std::map<int, pid_t> pids_;
  bool started_ = false;
};

HttpReply get(int port, const std::string& target, const std::string& headers = "") {
  return http_get(RawConnection::tcp(port), target, headers);
}

/// The job's status as served: every rank of every node by rank.
std::map<int, json> ranks_of(const json& status) {
  std::map<int, json> ranks;
  for (const auto& node : status.at("nodes")) {
    for (const auto& rank : node.at("ranks")) ranks[rank.at("rank").get<int>()] = rank;
  }
  return ranks;
}

/// `ddprun ARGS` with the test's registry.
Outcome ddprun_command(const RuntimeDir& runtime, const std::vector<std::string>& args,
                       std::map<std::string, std::string> env = {}) {
  env["XDG_RUNTIME_DIR"] = runtime.str();
  return run_ddprun(args, env);
}

TEST(StatusEndpoint, ApiStatusNamesTheJobsRanksAndPids) {
  RuntimeDir runtime;
  StatusJob job(runtime, 3, {"--status-port", "0"});
  ASSERT_TRUE(job.started()) << job.stderr_text();
  ASSERT_GT(job.port(), 0) << job.stderr_text();
  auto reply = get(job.port(), "/api/status");
  ASSERT_EQ(reply.status, 200) << reply.body;
  json status = json::parse(reply.body);
  EXPECT_EQ(status["run_id"], StatusJob::run_id());
  EXPECT_EQ(status["world_size"], 3);
  auto ranks = ranks_of(status);
  ASSERT_EQ(ranks.size(), 3u) << reply.body;
  for (const auto& [rank, pid] : job.pids()) {
    EXPECT_EQ(ranks[rank]["pid"], pid) << "rank " << rank;
    EXPECT_EQ(ranks[rank]["state"], "running");
    EXPECT_EQ(ranks[rank]["local_rank"], rank);
  }
  // The timeline: the job started, then each worker with its pid.
  std::vector<std::string> kinds;
  std::set<pid_t> started;
  for (const auto& event : status["events"]) {
    kinds.push_back(event["event"]);
    if (event["event"] == "worker_started") started.insert(event["pid"].get<pid_t>());
  }
  ASSERT_FALSE(kinds.empty());
  EXPECT_EQ(kinds.front(), "job_started");
  for (const auto& [rank, pid] : job.pids()) EXPECT_TRUE(started.contains(pid)) << "rank " << rank;
}

TEST(StatusEndpoint, MetricsPassPromtool) {
  if (::access("/usr/bin/promtool", X_OK) != 0) {
    GTEST_SKIP() << "promtool is not installed (Debian's prometheus package; scripts/setup.sh --tests installs it)";
  }
  RuntimeDir runtime;
  StatusJob job(runtime, 2, {"--status-port", "0"});
  ASSERT_TRUE(job.started()) << job.stderr_text();
  auto reply = get(job.port(), "/metrics");
  ASSERT_EQ(reply.status, 200);
  EXPECT_EQ(reply.headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
  for (const auto& [rank, pid] : job.pids()) {
    const std::string running = "ddprun_rank_state{node=\"0\",host=\"";
    const std::string labels = "\",rank=\"" + std::to_string(rank) + "\",local_rank=\"" + std::to_string(rank) +
                               "\",state=\"running\"} 1\n";
    EXPECT_NE(reply.body.find(labels), std::string::npos) << "rank " << rank << " running in\n" << reply.body;
  }
  TempDir scratch;
  const auto file = scratch.path() / "metrics.txt";
  std::ofstream(file) << reply.body;
  int status = 0;
  const std::string output = shell_output("promtool check metrics < '" + file.string() + "' 2>&1", &status);
  EXPECT_EQ(status, 0) << output;
  EXPECT_EQ(output, "") << "promtool's lint";
}

TEST(StatusEndpoint, ThePageInChromiumShowsARowPerRankAsApiStatus) {
  if (!chromium_available()) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh --tests installs it)";
  RuntimeDir runtime;
  // Workers that report progress (the worker runtime's writer), so that every column has a value.
  StatusJob job(runtime, 3, {"--status-port", "0"}, {},
                {PROGRESS_WORKER_BINARY, "--rate", "20", "--seconds", "120", "--batch", "64"});
  ASSERT_TRUE(job.started()) << job.stderr_text();
  const int port = job.port();
  auto reporting = [&] {
    auto ranks = ranks_of(json::parse(get(port, "/api/status").body));
    if (ranks.size() != 3) return false;
    for (auto& [rank, status] : ranks) {
      if (!status["progress"].is_object() || status["progress"]["samples_per_second"].get<double>() <= 0) return false;
    }
    return true;
  };
  ASSERT_TRUE(eventually(reporting, 30s)) << get(port, "/api/status").body;

  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/";
  TempDir profile;
  auto before = ranks_of(json::parse(get(port, "/api/status").body));
  const std::string dom = dump_dom(url, profile.path());
  auto after = ranks_of(json::parse(get(port, "/api/status").body));
  auto rows = rank_rows(dom);
  ASSERT_EQ(rows.size(), 3u) << dom.substr(0, 3000);
  for (auto& [rank, cells] : rows) {
    // The page shows a sample taken between the two reads of the API: the same pid and state, a
    // step between theirs, and the worker's own text.
    EXPECT_EQ(cells["pid"], std::to_string(before.at(rank)["pid"].get<int>())) << "rank " << rank;
    EXPECT_EQ(cells["pid"], std::to_string(after.at(rank)["pid"].get<int>())) << "rank " << rank;
    EXPECT_EQ(cells["state"], "running");
    EXPECT_EQ(cells["node"], "0");
    const long long step = std::stoll(cells["step"]);
    EXPECT_GE(step, before.at(rank)["progress"]["step"].get<long long>()) << "rank " << rank;
    EXPECT_LE(step, after.at(rank)["progress"]["step"].get<long long>()) << "rank " << rank;
    EXPECT_EQ(cells["text"], "step " + cells["step"]);
    EXPECT_GT(std::stod(cells["samples-per-second"]), 0) << cells["samples-per-second"];
    EXPECT_NE(cells["rss"].find("iB"), std::string::npos) << cells["rss"];
  }
  EXPECT_EQ(element_text(dom, "run-id"), StatusJob::run_id());
  EXPECT_EQ(element_text(dom, "conn"), "live");
  EXPECT_EQ(element_text(dom, "world-size"), "3");
  EXPECT_NE(dom.find("<td class=\"event\">worker_started</td>"), std::string::npos) << "the timeline";

  const auto shot = test_output_folder("status_endpoint") / "page.png";
  EXPECT_TRUE(screenshot(url, shot, profile.path())) << shot;
  std::cout << "screenshot: " << shot.string() << "\n";
}

TEST(StatusEndpoint, StatusAndStacksFromAnotherProcess) {
  RuntimeDir runtime;
  StatusJob job(runtime, 2);  // no --status-port: the Unix socket serves
  ASSERT_TRUE(job.started()) << job.stderr_text();
  EXPECT_EQ(job.port(), 0) << "no TCP endpoint without --status-port";

  // The only job of this user, by run id, by log folder, by agent pid: the same table.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"status"}, {"status", StatusJob::run_id()}, {"status", job.log_dir().string()},
        {"status", std::to_string(job.agent_pid())}}) {
    Outcome outcome = ddprun_command(runtime, args);
    ASSERT_EQ(outcome.exit_status, 0) << args.back() << ": " << outcome.err;
    EXPECT_EQ(outcome.out.rfind("run " + StatusJob::run_id() + " (pid " + std::to_string(job.agent_pid()), 0), 0u)
        << outcome.out;
    for (const auto& [rank, pid] : job.pids()) {
      std::regex row("\\n +" + std::to_string(rank) + " +0 +" + std::to_string(rank) + " +" + std::to_string(pid) +
                     " +running ");
      EXPECT_TRUE(std::regex_search(outcome.out, row)) << "rank " << rank << " in\n" << outcome.out;
    }
  }
  Outcome raw = ddprun_command(runtime, {"status", "--json"});
  ASSERT_EQ(raw.exit_status, 0) << raw.err;
  EXPECT_EQ(ranks_of(json::parse(raw.out)).size(), 2u);

  Outcome stacks = ddprun_command(runtime, {"stacks", StatusJob::run_id()});
  ASSERT_EQ(stacks.exit_status, 0) << stacks.err;
  for (const auto& [rank, pid] : job.pids()) {
    EXPECT_NE(stacks.out.find("rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ", node 0)"),
              std::string::npos)
        << stacks.out;
  }
  EXPECT_EQ(stacks.out.rfind("ranks 0,1: ", 0), 0u) << "the digest first: both ranks sleep in the same place\n"
                                                     << stacks.out;
  EXPECT_NE(stacks.out.find("pause"), std::string::npos) << "test_worker waits in pause()\n" << stacks.out;
  for (const auto& [rank, pid] : job.pids()) EXPECT_TRUE(process_alive(pid)) << "a capture leaves the ranks running";
}

TEST(StatusEndpoint, StacksOfAPythonJobFromAnotherProcessShowItsLines) {
  if (::access(kSystemPython, X_OK) != 0) GTEST_SKIP() << kSystemPython << " is not installed";
  RuntimeDir runtime;
  TempDir dir;
  const auto script = dir.path() / "sleepy.py";
  std::ofstream(script) << "import os, pathlib, time\n"
                           "def wait_here(seconds):\n"
                           "    time.sleep(seconds)\n"
                           "pathlib.Path(os.environ['READY_DIR'], 'ready_' + os.environ['RANK']).touch()\n"
                           "if os.environ['RANK'] == '1':\n"
                           "    time.sleep(600)\n"
                           "wait_here(600)\n";
  std::vector<std::string> argv = {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>/dev/null", ddprun_binary(), "--master-port", "0",
                                   "--rdzv-id", "py-" + StatusJob::run_id(), "--nproc-per-node", "2", script.string()};
  Launch launch(Launch::Command{argv},
                {{"XDG_RUNTIME_DIR", runtime.str()}, {"PYTHON_EXEC", kSystemPython}, {"READY_DIR", dir.str()}});
  ASSERT_TRUE(eventually([&] {
    return std::filesystem::exists(dir.path() / "ready_0") && std::filesystem::exists(dir.path() / "ready_1");
  }));
  Outcome stacks = ddprun_command(runtime, {"stacks"});
  launch.send(SIGTERM);
  launch.wait();
  ASSERT_EQ(stacks.exit_status, 0) << stacks.err;
  // The digest names each rank at its own line of the script, the odd one out (a tie: the lowest) first.
  EXPECT_EQ(stacks.out.rfind("rank 0: time.sleep(seconds) <- sleepy.py:3\n"
                             "rank 1: time.sleep(600) <- sleepy.py:6\n", 0), 0u)
      << stacks.out;
  EXPECT_NE(stacks.out.find("wait_here  " + script.string() + ":3"), std::string::npos) << stacks.out;
  EXPECT_NE(stacks.out.find("<module>  " + script.string() + ":6"), std::string::npos) << stacks.out;
}

TEST(StatusEndpoint, WhichJobWhenThereAreSeveralOrNone) {
  RuntimeDir runtime;
  Outcome none = ddprun_command(runtime, {"status"});
  EXPECT_EQ(none.exit_status, 1);
  EXPECT_NE(none.err.find("ddprun: no running ddprun job of yours"), std::string::npos) << none.err;

  StatusJob first(runtime, 1);
  StatusJob second(runtime, 1);
  ASSERT_TRUE(first.started() && second.started());
  Outcome several = ddprun_command(runtime, {"status"});
  EXPECT_EQ(several.exit_status, 2);
  EXPECT_NE(several.err.find("2 jobs of yours are running"), std::string::npos) << several.err;
  EXPECT_NE(several.err.find("pid " + std::to_string(first.agent_pid())), std::string::npos);
  EXPECT_NE(several.err.find("pid " + std::to_string(second.agent_pid())), std::string::npos);
  EXPECT_NE(several.err.find("pick one: ddprun status RUN_ID, PID or LOG_DIR"), std::string::npos);
  Outcome by_pid = ddprun_command(runtime, {"status", std::to_string(second.agent_pid())});
  EXPECT_EQ(by_pid.exit_status, 0) << by_pid.err;
  EXPECT_NE(by_pid.out.find(std::to_string(second.pids().at(0))), std::string::npos);

  Outcome unknown = ddprun_command(runtime, {"status", "no-such-run"});
  EXPECT_EQ(unknown.exit_status, 1);
  EXPECT_NE(unknown.err.find("no running ddprun job is no-such-run"), std::string::npos) << unknown.err;
  EXPECT_EQ(ddprun_command(runtime, {"status", "--bogus"}).exit_status, 2);
}

TEST(StatusEndpoint, TheRegistryEntryAndSocketGoWithTheJob) {
  RuntimeDir runtime;
  std::filesystem::path socket;
  {
    StatusJob job(runtime, 1);
    ASSERT_TRUE(job.started());
    const auto entry = std::filesystem::path(runtime.str()) / "ddprun" / (std::to_string(job.agent_pid()) + ".json");
    ASSERT_TRUE(std::filesystem::exists(entry));
    socket = json::parse(read_file(entry))["socket"].get<std::string>();
    struct stat info {};
    ASSERT_EQ(::lstat(socket.c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 0777, 0600u) << "owner-only";
    EXPECT_EQ(socket.parent_path().parent_path(), job.log_dir()) << "in the run folder";
    job.stop();
    EXPECT_FALSE(std::filesystem::exists(entry));
  }
  EXPECT_FALSE(std::filesystem::exists(socket));
}

TEST(StatusEndpoint, StatusFromAnotherProcessOverTcpWithTheToken) {
  RuntimeDir runtime;
  StatusJob job(runtime, 1, {"--status-port", "0", "--status-host", "0.0.0.0"}, {{"DDPRUN_STORE_TOKEN", "s3cret"}});
  ASSERT_TRUE(job.started()) << job.stderr_text();
  ASSERT_GT(job.port(), 0) << job.stderr_text();
  EXPECT_EQ(get(job.port(), "/api/status").status, 401);
  EXPECT_EQ(get(job.port(), "/api/status", "Authorization: Bearer s3cret\r\n").status, 200);
  EXPECT_EQ(get(job.port(), "/metrics?token=s3cret").status, 200);
  const std::string where = "127.0.0.1:" + std::to_string(job.port());
  Outcome refused = ddprun_command(runtime, {"status", where});
  EXPECT_EQ(refused.exit_status, 1);
  EXPECT_NE(refused.err.find("this endpoint requires the store token"), std::string::npos) << refused.err;
  Outcome with_token = ddprun_command(runtime, {"status", "http://" + where + "/"}, {{"DDPRUN_STORE_TOKEN", "s3cret"}});
  EXPECT_EQ(with_token.exit_status, 0) << with_token.err;
  EXPECT_NE(with_token.out.find(std::to_string(job.pids().at(0))), std::string::npos) << with_token.out;
}

// Issue 25: bound to every address (0.0.0.0), the URL printed and registered was
// http://0.0.0.0:PORT/, which no browser opens; it names the host instead.
TEST(StatusEndpoint, BoundToEveryAddressTheUrlNamesTheHost) {
  RuntimeDir runtime;
  StatusJob job(runtime, 1, {"--status-port", "0", "--status-host", "0.0.0.0"}, {{"DDPRUN_STORE_TOKEN", "s3cret"}});
  ASSERT_TRUE(job.started()) << job.stderr_text();
  ASSERT_GT(job.port(), 0) << job.stderr_text();
  char name[256] = {};
  ASSERT_EQ(::gethostname(name, sizeof name - 1), 0);
  const std::string url = "http://" + std::string(name) + ":" + std::to_string(job.port()) + "/";
  EXPECT_NE(job.stderr_text().find("ddprun: status at " + url + "\n"), std::string::npos) << job.stderr_text();
  const auto entry = std::filesystem::path(runtime.str()) / "ddprun" / (std::to_string(job.agent_pid()) + ".json");
  ASSERT_TRUE(std::filesystem::exists(entry));
  EXPECT_EQ(json::parse(read_file(entry)).value("url", ""), url);
}

TEST(StatusEndpoint, BeyondLoopbackWithoutATokenIsAUsageError) {
  Outcome outcome = run_ddprun({"--standalone", "--status-port", "0", "--status-host", "0.0.0.0", "--no-python",
                                test_worker_binary(), "echo", "x"});
  EXPECT_EQ(outcome.exit_status, 2);
  EXPECT_NE(outcome.err.find("requires the store token"), std::string::npos) << outcome.err;
  EXPECT_EQ(outcome.out, "") << "no worker ran";
}

TEST(StatusEndpoint, ABusyStatusPortFailsTheJobBeforeItStarts) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  const int port = ntohs(address.sin_port);
  Outcome outcome =
      run_ddprun({"--standalone", "--status-port", std::to_string(port), "--no-python", test_worker_binary(), "echo", "x"});
  ::close(fd);
  EXPECT_EQ(outcome.exit_status, 1);
  EXPECT_NE(outcome.err.find("cannot serve the status endpoint on 127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << outcome.err;
  EXPECT_EQ(outcome.out, "") << "no worker ran";
}

TEST(StatusEndpoint, HostileClientsLoseOnlyTheirConnection) {
  RuntimeDir runtime;
  StatusJob job(runtime, 2, {"--status-port", "0"});
  ASSERT_TRUE(job.started()) << job.stderr_text();
  const int port = job.port();

  // A 1 MB header.
  RawConnection big = RawConnection::tcp(port);
  big.send("GET /api/status HTTP/1.1\r\nHost: localhost\r\nX-Big: " + std::string(1 << 20, 'a') + "\r\n\r\n");
  const int big_status = parse_http_reply(big.read_all(10s)).status;
  EXPECT_TRUE(big_status == 431 || big_status == 0) << big_status;

  // 1,000 idle connections: the oldest make room for the newest, and for a client that asks.
  std::vector<RawConnection> idle;
  for (int i = 0; i < 1000; ++i) idle.push_back(RawConnection::tcp(port));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(get(port, "/api/status").status, 200) << "still served during the flood";
  idle.clear();

  // A byte a second: dropped at the request deadline (10 s); others are served meanwhile.
  RawConnection slow = RawConnection::tcp(port);
  const std::string request = "GET /api/status HTTP/1.1\r\nHost: localhost\r\n\r\n";
  bool closed = false;
  auto start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < request.size() && !closed; ++i) {
    slow.send(request.substr(i, 1));
    EXPECT_EQ(get(port, "/metrics").status, 200);
    closed = slow.closed_within(1s);
  }
  EXPECT_TRUE(closed) << "a byte a second is dropped";
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);

  // The job is untouched: the same workers, running; the endpoint counted what it dropped.
  auto ranks = ranks_of(json::parse(get(port, "/api/status").body));
  for (const auto& [rank, pid] : job.pids()) {
    EXPECT_TRUE(process_alive(pid));
    EXPECT_EQ(ranks[rank]["pid"], pid);
    EXPECT_EQ(ranks[rank]["state"], "running");
  }
  const std::string metrics = get(port, "/metrics").body;
  std::smatch refused;
  ASSERT_TRUE(std::regex_search(metrics, refused, std::regex("ddprun_status_refused_connections_total ([0-9]+)")));
  EXPECT_GE(std::stoi(refused[1]), 900) << "1,000 connections against a limit of 64";
  std::smatch dropped;
  ASSERT_TRUE(std::regex_search(metrics, dropped, std::regex("ddprun_status_dropped_connections_total ([0-9]+)")));
  EXPECT_GE(std::stoi(dropped[1]), 2) << "the big header and the slow client";
  Outcome outcome = job.stop();
  EXPECT_EQ(outcome.exit_status, 128 + SIGTERM) << job.stderr_text();
  EXPECT_NE(job.stderr_text().find("received SIGTERM, workers stopped"), std::string::npos) << job.stderr_text();
}

}  // namespace
}  // namespace ddprun::testing

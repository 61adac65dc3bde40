// The status endpoint against a fake StatusSource, on real sockets (TCP on loopback and a Unix
// socket): what each path serves, who may ask, and the bounds — a 1 MB header, a body, a byte a
// second, a thousand idle connections, a reply too large — each costing only the offender its
// connection while others are served. The page is rendered in headless Chromium (skipped when
// absent) and its rows compared with the status served.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "../support/chromium.hpp"
#include "../support/raw_http.hpp"
#include "launcher/base/errors.hpp"
#include "launcher/observe/status_http.hpp"
#include "launcher/observe/status_json.hpp"
#include "scratch_folder.hpp"

namespace ddprun::launcher {
namespace {

namespace asio = boost::asio;
using nlohmann::json;
using ddprun::testing::http_get;
using ddprun::testing::RawConnection;
using namespace std::chrono_literals;
using testing_support::ScratchFolder;

bool eventually(const std::function<bool()>& predicate) {
  for (auto end = std::chrono::steady_clock::now() + 20s; std::chrono::steady_clock::now() < end;) {
    if (predicate()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return predicate();
}

JobStatus sample_job() {
  JobStatus job;
  job.run_id = "fake-run";
  job.world_size = 3;
  NodeStatus node;
  node.host = "fakehost";
  node.restarts = 1;
  node.hangs = 2;
  for (int rank = 0; rank < 3; ++rank) {
    RankStatus r;
    r.rank = rank;
    r.local_rank = rank;
    r.pid = 1000 + rank;
    r.state = rank == 2 ? RankState::failed : RankState::running;
    r.exitcode = rank == 2 ? 1 : 0;
    r.cpu_percent = 50.0 * rank;
    r.rss_bytes = (std::uint64_t{100} << 20) * (rank + 1);
    r.output_age_seconds = 1.5;
    if (rank != 1) r.progress = ProgressSample{100 + rank, 6400, rank == 0 ? "<b>loss</b> & 0.5" : "", 0.1, 2.0, 128.0};
    r.straggler = rank == 2;
    node.ranks.push_back(r);
  }
  job.nodes.push_back(node);
  return job;
}

class FakeSource : public StatusSource {
 public:
  explicit FakeSource(asio::io_context& io) : io_(io) {}
  JobStatus status() override { return job; }
  std::vector<JobEvent> recent_events() override { return events; }
  void capture_stacks(std::function<void(StacksReply)> done) override {
    ++captures;
    if (hold_captures) {
      held.push_back(std::move(done));
      return;
    }
    asio::post(io_, [done = std::move(done), reply = stacks] { done(reply); });
  }

  JobStatus job = sample_job();
  std::vector<JobEvent> events;
  StacksReply stacks;
  int captures = 0;
  bool hold_captures = false;
  std::vector<std::function<void(StacksReply)>> held;

 private:
  asio::io_context& io_;
};

/// A server on its own loop thread, as the agent's loop would run it.
class Endpoint {
 public:
  explicit Endpoint(StatusHttpLimits limits = {}, std::optional<std::string> token = std::nullopt,
                    std::string unix_path = {})
      : source(io), server(io, source, std::move(token), limits) {
    port = server.listen_tcp("127.0.0.1", 0);
    if (!unix_path.empty()) server.listen_unix(unix_path);
    thread_ = std::thread([this] { io.run(); });
  }
  ~Endpoint() {
    on_loop([this] { server.stop(); });
    work_.reset();
    io.stop();
    thread_.join();
  }
  /// Runs `f` on the loop and waits for it.
  template <class F>
  auto on_loop(F f) -> decltype(f()) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto result = task.get_future();
    asio::post(io, [&task] { task(); });
    return result.get();
  }
  EndpointCounters counters() {
    return on_loop([this] { return server.counters(); });
  }
  testing::HttpReply get(const std::string& target, const std::string& headers = "", const std::string& host = "127.0.0.1") {
    return http_get(RawConnection::tcp(port), target, headers, host);
  }

  asio::io_context io;
  FakeSource source;
  StatusHttpServer server;
  int port = 0;

 private:
  asio::executor_work_guard<asio::io_context::executor_type> work_ = asio::make_work_guard(io);
  std::thread thread_;
};

TEST(StatusHttp, ServesStatusWithEvents) {
  Endpoint endpoint;
  endpoint.on_loop([&] {
    for (int i = 0; i < 300; ++i) {
      JobEvent event;
      event.time = 1700000000 + i;
      event.kind = JobEventKind::worker_started;
      event.rank = i;
      endpoint.source.events.push_back(event);
    }
  });
  auto reply = endpoint.get("/api/status");
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.headers["content-type"], "application/json");
  EXPECT_EQ(reply.headers["cache-control"], "no-store");
  json body = json::parse(reply.body);
  EXPECT_EQ(to_json(job_status_from_json(body)), to_json(sample_job()));
  ASSERT_EQ(body["events"].size(), 200u) << "the most recent 200 only";
  EXPECT_EQ(body["events"].front()["rank"], 100);
  EXPECT_EQ(body["events"].back()["rank"], 299);
}

TEST(StatusHttp, InvalidUtf8FromAWorkerIsReplacedNotFatal) {
  Endpoint endpoint;
  endpoint.on_loop([&] { endpoint.source.job.nodes[0].ranks[0].progress->text = "bad \xff\xfe bytes"; });
  auto reply = endpoint.get("/api/status");
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_NE(json::parse(reply.body)["nodes"][0]["ranks"][0]["progress"]["text"].get<std::string>().find("\xef\xbf\xbd"),
            std::string::npos);
}

TEST(StatusHttp, ServesPageMetricsAndStacks) {
  Endpoint endpoint;
  auto page = endpoint.get("/");
  ASSERT_EQ(page.status, 200);
  EXPECT_EQ(page.headers["content-type"], "text/html; charset=utf-8");
  EXPECT_NE(page.headers["content-security-policy"].find("default-src 'none'"), std::string::npos);
  EXPECT_NE(page.body.find("<!DOCTYPE html>"), std::string::npos);

  auto metrics = endpoint.get("/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(metrics.body.find("ddprun_rank_step{node=\"0\",host=\"fakehost\",rank=\"0\",local_rank=\"0\"} 100"),
            std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("ddprun_status_requests_total 2"), std::string::npos) << "this request is the 2nd";

  endpoint.on_loop([&] {
    RankStacks rank;
    rank.rank = 1;
    rank.pid = 1001;
    rank.threads.push_back({"Thread 1", false, {{"nanosleep", "libc.so.6"}, {"main", "worker.cpp:12"}}});
    endpoint.source.stacks.ranks = {rank};
    endpoint.source.stacks.digest = {"rank 1: nanosleep <- main"};
  });
  auto stacks = endpoint.get("/api/stacks");
  ASSERT_EQ(stacks.status, 200) << stacks.body;
  json body = json::parse(stacks.body);
  EXPECT_EQ(body["digest"], json::array({"rank 1: nanosleep <- main"}));
  EXPECT_EQ(rank_stacks_from_json(body["ranks"][0]).threads.at(0).frames.at(1).location, "worker.cpp:12");

  endpoint.on_loop([&] { endpoint.source.stacks.error = "stack capture is not available"; });
  auto unavailable = endpoint.get("/api/stacks");
  EXPECT_EQ(unavailable.status, 503);
  EXPECT_EQ(json::parse(unavailable.body)["error"], "stack capture is not available");
}

TEST(StatusHttp, HeadNotFoundAndMethods) {
  Endpoint endpoint;
  RawConnection head = RawConnection::tcp(endpoint.port);
  head.send("HEAD /api/status HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
  auto reply = testing::parse_http_reply(head.read_all(10s));
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, "");
  EXPECT_GT(std::stoul(reply.headers["content-length"]), 100u);

  EXPECT_EQ(endpoint.get("/nowhere").status, 404);
  RawConnection post = RawConnection::tcp(endpoint.port);
  post.send("POST /api/status HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
  auto refused = testing::parse_http_reply(post.read_all(10s));
  EXPECT_EQ(refused.status, 405);
  EXPECT_EQ(refused.headers["allow"], "GET, HEAD");
  EXPECT_EQ(endpoint.get("/api/status", "", "evil.example").status, 403) << "DNS rebinding";
  EXPECT_EQ(endpoint.get("/api/stacks", "Sec-Fetch-Site: cross-site\r\n").status, 403) << "another site's page";
  EXPECT_EQ(endpoint.on_loop([&] { return endpoint.source.captures; }), 0) << "and nothing was captured";
}

TEST(StatusHttp, KeepAliveServesSeveralRequestsOnOneConnection) {
  Endpoint endpoint;
  RawConnection connection = RawConnection::tcp(endpoint.port);
  connection.send("GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\nGET /api/status HTTP/1.1\r\nHost: localhost\r\n"
                  "Connection: close\r\n\r\n");
  std::string both = connection.read_all(10s);
  EXPECT_EQ(both.rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_NE(both.find("HTTP/1.1 200", 20), std::string::npos) << both.substr(0, 300);
}

TEST(StatusHttp, TheTokenIsRequiredWhenConfigured) {
  Endpoint endpoint({}, std::string("s3cret"));
  auto none = endpoint.get("/api/status");
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.headers["www-authenticate"], "Bearer realm=\"ddprun\"");
  EXPECT_EQ(endpoint.get("/api/status", "Authorization: Bearer wrong\r\n").status, 401);
  EXPECT_EQ(endpoint.get("/api/status", "Authorization: Bearer s3cret\r\n", "node7:1").status, 200);
  EXPECT_EQ(endpoint.get("/metrics?token=s3cret").status, 200);
}

TEST(StatusHttp, UnixSocketIsOwnerOnlyAndNeedsNoToken) {
  ScratchFolder folder("status_http");
  const std::string path = (folder.root() / "status.sock").string();
  {
    Endpoint endpoint({}, std::string("s3cret"), path);
    struct stat info {};
    ASSERT_EQ(::lstat(path.c_str(), &info), 0);
    EXPECT_TRUE(S_ISSOCK(info.st_mode));
    EXPECT_EQ(info.st_mode & 0777, 0600u);
    auto reply = http_get(RawConnection::unix_socket(path), "/api/status", "", "localhost");
    ASSERT_EQ(reply.status, 200) << reply.body;
    EXPECT_EQ(json::parse(reply.body)["run_id"], "fake-run");
    EXPECT_EQ(endpoint.get("/api/status").status, 401) << "TCP still needs the token";
    // A second server cannot take a live socket.
    asio::io_context other;
    FakeSource source(other);
    StatusHttpServer second(other, source, std::nullopt);
    EXPECT_THROW(second.listen_unix(path), LaunchError);
  }
  EXPECT_FALSE(std::filesystem::exists(path)) << "stop() removes the socket";
  // A dead socket left behind (a killed agent) is replaced.
  {
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strcpy(address.sun_path, path.c_str());
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    ::close(fd);
  }
  Endpoint again({}, std::nullopt, path);
  EXPECT_EQ(http_get(RawConnection::unix_socket(path), "/api/status", "", "localhost").status, 200);
}

TEST(StatusHttp, AHugeHeaderLosesItsConnectionOnly) {
  Endpoint endpoint;
  RawConnection hostile = RawConnection::tcp(endpoint.port);
  std::string request = "GET /api/status HTTP/1.1\r\nHost: localhost\r\nX-Big: " + std::string(1 << 20, 'a') + "\r\n\r\n";
  hostile.send(request);  // may fail part way: the server closes once the limit is passed
  auto reply = testing::parse_http_reply(hostile.read_all(10s));
  EXPECT_TRUE(reply.status == 431 || reply.status == 0) << reply.status;
  EXPECT_EQ(endpoint.get("/api/status").status, 200);
  EXPECT_GE(endpoint.counters().dropped_connections, 1u);
}

TEST(StatusHttp, ABodyIsRefused) {
  Endpoint endpoint;
  RawConnection client = RawConnection::tcp(endpoint.port);
  client.send("GET /api/status HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello");
  EXPECT_EQ(testing::parse_http_reply(client.read_all(10s)).status, 413);
  RawConnection chunked = RawConnection::tcp(endpoint.port);
  chunked.send("GET /api/status HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
  EXPECT_EQ(testing::parse_http_reply(chunked.read_all(10s)).status, 413);
  RawConnection garbage = RawConnection::tcp(endpoint.port);
  garbage.send("\x01\x02 not http\r\n\r\n");
  EXPECT_EQ(testing::parse_http_reply(garbage.read_all(10s)).status, 400);
  EXPECT_EQ(endpoint.get("/api/status").status, 200);
}

TEST(StatusHttp, AByteASecondClientIsDroppedAtTheDeadline) {
  StatusHttpLimits limits;
  limits.request_timeout = 1500ms;
  Endpoint endpoint(limits);
  RawConnection slow = RawConnection::tcp(endpoint.port);
  const std::string request = "GET /api/status HTTP/1.1\r\nHost: localhost\r\n\r\n";
  auto start = std::chrono::steady_clock::now();
  bool closed = false;
  for (std::size_t i = 0; i < request.size() && !closed; ++i) {
    slow.send(request.substr(i, 1));
    EXPECT_EQ(endpoint.get("/metrics").status, 200) << "others are served meanwhile";
    closed = slow.closed_within(1s);
  }
  EXPECT_TRUE(closed);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_GE(endpoint.counters().dropped_connections, 1u);
}

TEST(StatusHttp, AnIdleKeepAliveConnectionEndsQuietly) {
  StatusHttpLimits limits;
  limits.request_timeout = 500ms;
  Endpoint endpoint(limits);
  RawConnection client = RawConnection::tcp(endpoint.port);
  client.send("GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n");
  EXPECT_TRUE(client.closed_within(5s));
  EXPECT_EQ(endpoint.counters().dropped_connections, 0u) << "not a misbehaving client";
}

TEST(StatusHttp, AThousandIdleConnectionsDoNotShutOthersOut) {
  StatusHttpLimits limits;
  limits.max_connections = 16;
  Endpoint endpoint(limits);
  std::vector<RawConnection> idle;
  for (int i = 0; i < 1000; ++i) {
    idle.push_back(RawConnection::tcp(endpoint.port));
    ASSERT_TRUE(idle.back().ok()) << i;
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(endpoint.get("/api/status").status, 200) << "the oldest idle one made room";
  auto counters = endpoint.counters();
  EXPECT_GE(counters.refused_connections, 1000u - 16u);
  // The evicted ones are closed, not left hanging.
  EXPECT_TRUE(idle.front().closed_within(5s));
}

TEST(StatusHttp, AReplyTooLargeIsRefusedWithAReason) {
  StatusHttpLimits limits;
  limits.max_reply_bytes = 200;
  Endpoint endpoint(limits);
  auto reply = endpoint.get("/api/status");
  EXPECT_EQ(reply.status, 500);
  EXPECT_NE(json::parse(reply.body)["error"].get<std::string>().find("more than the endpoint's 200"), std::string::npos);
}

TEST(StatusHttp, StoppingWithACaptureUnderWayAnswersNoOne) {
  auto endpoint = std::make_unique<Endpoint>();
  endpoint->on_loop([&] { endpoint->source.hold_captures = true; });
  RawConnection client = RawConnection::tcp(endpoint->port);
  client.send("GET /api/stacks HTTP/1.1\r\nHost: localhost\r\n\r\n");
  ASSERT_TRUE(eventually([&] { return endpoint->on_loop([&] { return endpoint->source.captures; }) == 1; }));
  endpoint->on_loop([&] {
    endpoint->server.stop();
    for (auto& done : endpoint->source.held) done(StacksReply{});  // late: nobody to answer
  });
  EXPECT_EQ(client.read_all(5s), "");
  endpoint.reset();
}

TEST(StatusHttp, ThePageRendersTheStatusInChromium) {
  if (!testing::chromium_available()) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh --tests installs it)";
  Endpoint endpoint;
  endpoint.on_loop([&] {
    JobEvent started{1700000000.5, JobEventKind::worker_started, 0, 2, 1002, {{"local_rank", 2}}};
    JobEvent exited{1700000001.5, JobEventKind::worker_exited, 0, 2, 1002, {{"exitcode", 1}}};
    endpoint.source.events = {started, exited};
  });
  ScratchFolder profile("status_http_chromium");
  const std::string url = "http://127.0.0.1:" + std::to_string(endpoint.port) + "/";
  const std::string dom = testing::dump_dom(url, profile.root());
  auto rows = testing::rank_rows(dom);
  ASSERT_EQ(rows.size(), 3u) << dom.substr(0, 4000);
  const JobStatus job = sample_job();
  for (const auto& rank : job.nodes[0].ranks) {
    auto& cells = rows.at(rank.rank);
    EXPECT_EQ(cells["pid"], std::to_string(rank.pid));
    EXPECT_EQ(cells["state"].rfind(rank_state_name(rank.state), 0), 0u) << cells["state"];
    EXPECT_EQ(cells["step"], rank.progress ? std::to_string(rank.progress->step) : "-");
  }
  EXPECT_EQ(rows.at(0)["text"], "<b>loss</b> & 0.5") << "worker text stays text";
  EXPECT_EQ(rows.at(0)["rss"], "100.0 MiB");
  EXPECT_EQ(rows.at(1)["cpu"], "50");
  EXPECT_EQ(testing::element_text(dom, "restarts"), "1");
  EXPECT_EQ(testing::element_text(dom, "hangs"), "2");
  EXPECT_EQ(testing::element_text(dom, "conn"), "live");
  EXPECT_NE(dom.find("<tr data-rank=\"2\" class=\"straggler\">"), std::string::npos);
  // The timeline, newest first.
  const auto exited_at = dom.find("<td class=\"event\">worker_exited</td>");
  const auto started_at = dom.find("<td class=\"event\">worker_started</td>");
  ASSERT_NE(exited_at, std::string::npos) << dom;
  ASSERT_NE(started_at, std::string::npos);
  EXPECT_LT(exited_at, started_at);
  EXPECT_NE(dom.find("{\"exitcode\":1}", exited_at), std::string::npos);

  const auto shot = testing::test_output_folder("status_http") / "page.png";
  EXPECT_TRUE(testing::screenshot(url, shot, profile.root())) << shot;
}

TEST(StatusHttp, ThePageShowsTheGpusInChromium) {
  if (!testing::chromium_available()) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh --tests installs it)";
  Endpoint endpoint;
  endpoint.on_loop([&] {
    constexpr std::uint64_t kGiB = 1024ull * 1024 * 1024;
    RankGpu busy;
    busy.index = 0;
    busy.uuid = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6";
    busy.bus_id = "00000000:3B:00.0";
    busy.utilisation_percent = 97;
    busy.memory_used_bytes = 61 * kGiB;
    busy.memory_total_bytes = 80 * kGiB;
    busy.own_memory_bytes = 60 * kGiB;
    busy.temperature_c = 71;
    busy.power_watts = 612.5;
    busy.throttle = {"SwPowerCap"};
    busy.uncorrectable_ecc_errors = 0;
    busy.xid_count = 2;
    busy.xids = {13, 79};
    RankGpu geforce;  // nothing known: dashes, never 0
    geforce.index = 1;
    geforce.memory_used_bytes = kGiB / 2;
    geforce.memory_total_bytes = 16 * kGiB;
    RankGpu lost;
    lost.index = 2;
    lost.bus_id = "00000000:5E:00.0";
    lost.problem = "has fallen off the bus or is inaccessible (NVML: GPU_IS_LOST) <b>";
    JobStatus& job = endpoint.source.job;
    auto& ranks = job.nodes[0].ranks;
    ranks[0].gpus = {busy, geforce, lost};  // it works on GPU 0 and sees two more
    ranks[1].gpus = {geforce};
    ranks[1].gpu_straggler = true;
    ranks[2].gpus = {lost};
    job.nodes[0].gpu_note = "NVML stalled: nvmlDeviceGetUtilizationRates has not returned for 2.0 s";
  });
  ScratchFolder profile("status_http_chromium_gpus");
  const std::string url = "http://127.0.0.1:" + std::to_string(endpoint.port) + "/";
  const std::string dom = testing::dump_dom(url, profile.root());
  auto rows = testing::rank_rows(dom);
  ASSERT_EQ(rows.size(), 3u) << dom.substr(0, 4000);
  EXPECT_EQ(rows.at(0)["gpu"], "97% 61/80G 71C thr xid79 +2");
  EXPECT_EQ(rows.at(1)["gpu"], "- 0.5/16G -");
  EXPECT_EQ(rows.at(2)["gpu"], "LOST");
  EXPECT_NE(dom.find("<table id=\"ranks\" class=\"\">"), std::string::npos) << "the GPU column is shown";
  EXPECT_NE(dom.find("<td class=\"gpu warn\" title=\"GPU 0 (GPU-8932f937-d72c-4106-c12f-20bd9faed9f6, bus "
                     "00000000:3B:00.0): utilisation 97 %, memory 61.0 GiB of 80.0 GiB, own 60.0 GiB, temperature 71 C, "
                     "power 612.5 W, throttled SwPowerCap, uncorrectable ECC errors 0, Xids 2 (last: 13 79)"),
            std::string::npos)
      << "every GPU in full in the tooltip";
  EXPECT_NE(dom.find("GPU 1 (uuid unknown, bus unknown): utilisation -, memory 512.0 MiB of 16.0 GiB, own -, "
                     "temperature -, power -, throttled no, uncorrectable ECC errors -, Xids 0"),
            std::string::npos);
  EXPECT_NE(dom.find("<td class=\"gpu bad\""), std::string::npos);
  EXPECT_NE(dom.find("<tr data-rank=\"1\" class=\"gpu-straggler\">"), std::string::npos);
  EXPECT_NE(dom.find("<tr data-rank=\"2\" class=\"straggler\">"), std::string::npos) << "a straggler stays one";
  // Under the table: the unhealthy GPU once (two ranks see it), with its reason as text, then the note.
  EXPECT_NE(dom.find("<div id=\"gpu-notes\"><div>node 0: GPU 2 (uuid unknown, bus 00000000:5E:00.0) has fallen off the "
                     "bus or is inaccessible (NVML: GPU_IS_LOST) &lt;b&gt;</div><div>node 0: gpu: NVML stalled: "
                     "nvmlDeviceGetUtilizationRates has not returned for 2.0 s</div></div>"),
            std::string::npos)
      << dom;
  testing::screenshot(url, testing::test_output_folder("status_http") / "gpus.png", profile.root());
}

TEST(StatusHttp, ThePageHidesTheGpuColumnWithoutGpus) {
  if (!testing::chromium_available()) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh --tests installs it)";
  Endpoint endpoint;
  ScratchFolder profile("status_http_chromium_no_gpus");
  const std::string dom = testing::dump_dom("http://127.0.0.1:" + std::to_string(endpoint.port) + "/", profile.root());
  ASSERT_EQ(testing::rank_rows(dom).size(), 3u) << dom.substr(0, 4000);
  EXPECT_NE(dom.find("<table id=\"ranks\" class=\"no-gpu\">"), std::string::npos);
  EXPECT_EQ(testing::element_text(dom, "gpu-notes"), "");
}

TEST(StatusHttp, ThePageShowsStacksInChromium) {
  if (!testing::chromium_available()) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh --tests installs it)";
  Endpoint endpoint;
  endpoint.on_loop([&] {
    RankStacks rank;
    rank.rank = 1;
    rank.pid = 1001;
    rank.threads.push_back({"Thread 1 (LWP 1001)", false, {{"nanosleep", "libc.so.6"}, {"main", "worker.cpp:12"}}});
    RankStacks failed;
    failed.rank = 0;
    failed.pid = 1000;
    failed.error = "gdb <could not attach>";
    endpoint.source.stacks.ranks = {rank, failed};
    endpoint.source.stacks.digest = {"rank 1: nanosleep <- main", "rank 0: <no stacks>"};
  });
  ScratchFolder profile("status_http_chromium_stacks");
  const std::string url = "http://127.0.0.1:" + std::to_string(endpoint.port) + "/#stacks";
  const std::string dom = testing::dump_dom(url, profile.root());
  EXPECT_EQ(endpoint.on_loop([&] { return endpoint.source.captures; }), 1);
  EXPECT_NE(dom.find("<div>rank 1: nanosleep &lt;- main</div>"), std::string::npos) << dom;
  EXPECT_NE(dom.find("main  worker.cpp:12"), std::string::npos);
  EXPECT_NE(dom.find("gdb &lt;could not attach&gt;"), std::string::npos) << "an error is text, not markup";
  EXPECT_NE(testing::element_text(dom, "stacks-state").find("captured at"), std::string::npos);
  testing::screenshot(url, testing::test_output_folder("status_http") / "stacks.png", profile.root());
}

}  // namespace
}  // namespace ddprun::launcher

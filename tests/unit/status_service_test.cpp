// StatusService on a real loop: started with its Unix socket in a temporary run folder and the run
// registry in a temporary XDG_RUNTIME_DIR, it registers the run, and a real HTTP request over that
// socket (status_client.hpp, what `ddprun status` sends) gets this node's ranks, sampled for the
// request; a --status-port that another socket holds fails the start with a LaunchError naming it.
#include "launcher/observe/status_service.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <future>
#include <nlohmann/json.hpp>
#include <string>

#include "launcher/base/errors.hpp"
#include "launcher/observe/status_client.hpp"
#include "launcher/observe/status_json.hpp"
#include "observer_node.hpp"
#include "scratch_folder.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing_support::ObserverNode;
using testing_support::run_until;
using testing_support::ScratchFolder;
using testing_support::SleepChild;

class Service : public ::testing::Test {
 protected:
  void SetUp() override {
    // The registry's home, as systemd makes XDG_RUNTIME_DIR: this user's, closed to others.
    fs::create_directories(xdg_);
    ASSERT_EQ(::chmod(xdg_.c_str(), 0700), 0);
    env_["XDG_RUNTIME_DIR"] = xdg_.string();
  }

  ScratchFolder dir_{"status_service"};
  fs::path xdg_ = dir_.root() / "xdg";
  Environ env_;
  boost::asio::io_context io_;
  SleepChild child_;
  std::unique_ptr<ObserverNode> node_ = std::make_unique<ObserverNode>(
      io_, dir_.root() / "logs", testing_support::ObserverNodeOptions{.attempt = {.rank_base = 2, .world_size = 4},
                                                                      .workers = {child_.pid()}});
};

TEST_F(Service, ServesThisNodesRanksOverItsSocketToWhomTheRegistryShowsIt) {
  node_->status.attempt_started();
  ASSERT_EQ(node_->status.monitor(), nullptr);  // nobody has asked yet: nothing samples
  StatusServiceSettings settings{.run_id = "run-7", .host = "hosty", .command = "train.py --epochs 3"};
  StatusService service(io_, settings, env_, node_->logs, node_->attempt, node_->status, node_->events, node_->stacks,
                        node_->board);
  service.start();

  const std::vector<RunEntry> runs = registered_runs(xdg_ / "ddprun");
  ASSERT_EQ(runs.size(), 1u);
  const RunEntry& entry = runs[0];
  EXPECT_EQ(entry.run_id, "run-7");
  EXPECT_EQ(entry.pid, ::getpid());
  EXPECT_EQ(entry.host, "hosty");
  EXPECT_EQ(entry.command, "train.py --epochs 3");
  EXPECT_EQ(entry.run_dir, node_->logs.run_dir().string());
  EXPECT_EQ(entry.url, "");  // no --status-port
  ASSERT_FALSE(entry.socket.empty());

  // `ddprun status`'s request, from another thread (the client blocks); the agent's loop serves it.
  StatusAddress address;
  address.unix_socket = entry.socket;
  auto reply = std::async(std::launch::async, [address] { return fetch_status(address, "/api/status", std::nullopt, 30s); });
  ASSERT_TRUE(run_until(io_, [&] { return reply.wait_for(0s) == std::future_status::ready; }));
  const StatusReply got = reply.get();
  ASSERT_EQ(got.status, 200) << got.body;
  const JobStatus job = job_status_from_json(nlohmann::json::parse(got.body));
  EXPECT_EQ(job.run_id, "run-7");
  EXPECT_EQ(job.world_size, 4);
  ASSERT_EQ(job.nodes.size(), 1u);
  ASSERT_EQ(job.nodes[0].ranks.size(), 1u);
  EXPECT_EQ(job.nodes[0].ranks[0].rank, 2);
  EXPECT_EQ(job.nodes[0].ranks[0].pid, child_.pid());
  EXPECT_EQ(job.nodes[0].ranks[0].state, RankState::running);
  EXPECT_NE(node_->status.monitor(), nullptr);  // the request started the samples
}

TEST_F(Service, TheRegistryEntryGoesWithTheService) {
  {
    StatusService service(io_, {.run_id = "run-8"}, env_, node_->logs, node_->attempt, node_->status, node_->events,
                          node_->stacks, node_->board);
    service.start();
    EXPECT_EQ(registered_runs(xdg_ / "ddprun").size(), 1u);
  }
  EXPECT_TRUE(registered_runs(xdg_ / "ddprun").empty());
}

TEST_F(Service, AStatusPortThatIsTakenFailsTheStartNamingIt) {
  boost::asio::ip::tcp::acceptor holder(io_, {boost::asio::ip::make_address("127.0.0.1"), 0});
  const int port = holder.local_endpoint().port();
  StatusServiceSettings settings{.run_id = "run-9", .status_host = "127.0.0.1", .status_port = port};
  StatusService service(io_, settings, env_, node_->logs, node_->attempt, node_->status, node_->events, node_->stacks,
                        node_->board);
  try {
    service.start();
    FAIL() << "no LaunchError for a port in use";
  } catch (const LaunchError& error) {
    EXPECT_NE(std::string(error.what()).find("127.0.0.1:" + std::to_string(port)), std::string::npos) << error.what();
  }
  EXPECT_TRUE(registered_runs(xdg_ / "ddprun").empty());  // the run is not registered
}

TEST_F(Service, AFreeStatusPortIsServedAndRegistered) {
  StatusServiceSettings settings{.run_id = "run-10", .status_host = "127.0.0.1", .status_port = 0};
  StatusService service(io_, settings, env_, node_->logs, node_->attempt, node_->status, node_->events, node_->stacks,
                        node_->board);
  ::testing::internal::CaptureStderr();
  service.start();
  const std::string printed = ::testing::internal::GetCapturedStderr();
  const std::vector<RunEntry> runs = registered_runs(xdg_ / "ddprun");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].url.rfind("http://127.0.0.1:", 0), 0u) << runs[0].url;
  EXPECT_NE(printed.find("status at " + runs[0].url), std::string::npos) << printed;
}

}  // namespace
}  // namespace ddprun::launcher

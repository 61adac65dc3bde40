// The master port: a busy one is named in the error; --standalone finds a free one.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.hpp"

using namespace ddprun::testing;

namespace {

/// A listening socket on 127.0.0.1 and a port the kernel picked.
struct Listener {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int port = 0;
  Listener() {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(fd, 1), 0);
    socklen_t len = sizeof(addr);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
  }
  ~Listener() { ::close(fd); }
};

}  // namespace

TEST(Ports, BusyMasterPortIsNamedAndNothingStarts) {
  Listener busy;
  TempDir dir;
  Outcome outcome = run_ddprun({"--master-port", std::to_string(busy.port), test_worker_binary(), "env", dir.str()});
  EXPECT_EQ(outcome.exit_status, 1);
  auto lines = split_lines(outcome.err);
  ASSERT_EQ(lines.size(), 1U) << outcome.err;
  EXPECT_NE(lines[0].find("port " + std::to_string(busy.port)), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("in use"), std::string::npos) << lines[0];
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(Ports, StandaloneFindsAFreePort) {
  TempDir dir;
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "2", test_worker_binary(), "env", dir.str()});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  auto env0 = parse_env_file(dir.path() / "env_0");
  auto env1 = parse_env_file(dir.path() / "env_1");
  EXPECT_EQ(env0["MASTER_PORT"], env1["MASTER_PORT"]);
  EXPECT_GT(std::stoi(env0["MASTER_PORT"]), 0);
  EXPECT_NE(env0["TORCHELASTIC_RUN_ID"], "none");  // a random id, as torchrun's --standalone
}

TEST(Ports, StoreTokenSettingsThatContradictAreAUsageError) {
  TempDir dir;
  Outcome outcome = run_ddprun({"--standalone", test_worker_binary(), "env", dir.str()},
                               {{"DDPRUN_STORE_TOKEN", "a"}, {"DDPRUN_STORE_TOKEN_FILE", "/nonexistent"}});
  EXPECT_EQ(outcome.exit_status, 2) << outcome.err;
  EXPECT_EQ(split_lines(outcome.err).size(), 1U) << outcome.err;
  EXPECT_NE(outcome.err.find("DDPRUN_STORE_TOKEN"), std::string::npos) << outcome.err;
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

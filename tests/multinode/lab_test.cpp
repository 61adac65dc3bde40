// The network-namespace lab itself: nodes reach each other over TCP, a cut link really cuts, and
// nothing the lab made outlives it.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.hpp"
#include "netns_lab.hpp"

using namespace ddprun::testing;

namespace {

/// From `from`, opens a TCP connection to host:port (bash's /dev/tcp), giving up after 3 s.
int connect_from(const NetnsLab& lab, int from, const std::string& host, int port) {
  std::string script = "exec 3<>/dev/tcp/" + host + "/" + std::to_string(port);
  return run_command(lab.in_node(from, {"/usr/bin/timeout", "3", "/bin/bash", "-c", script})).status;
}

/// A ddprun-store listening on the node's address; returns its port once listening.
int start_store(const NetnsLab& lab, int node, const TempDir& dir, std::unique_ptr<Launch>& store) {
  auto port_file = dir.path() / "port";
  store = std::make_unique<Launch>(
      Launch::Command{lab.in_node(node, {ddprun_store_binary(), "--port", "0", "--port-file", port_file.string()})});
  if (!eventually([&] { return !read_file(port_file).empty(); })) return -1;
  return std::stoi(read_file(port_file));
}

}  // namespace

TEST(Lab, NodesReachEachOtherAndACutLinkCuts) {
  std::string why_not;
  auto lab = NetnsLab::create(3, why_not);
  if (!lab) GTEST_SKIP() << why_not;
  TempDir dir;
  std::unique_ptr<Launch> store;
  int port = start_store(*lab, 0, dir, store);
  ASSERT_GT(port, 0) << "ddprun-store did not write its port";

  EXPECT_EQ(connect_from(*lab, 1, lab->address(0), port), 0);
  EXPECT_EQ(connect_from(*lab, 2, lab->address(0), port), 0);
  EXPECT_EQ(connect_from(*lab, 0, "127.0.0.1", port), 0) << "lo is not up in the namespace";

  lab->cut(1);
  EXPECT_NE(connect_from(*lab, 1, lab->address(0), port), 0) << "the cut node still reaches node 0";
  EXPECT_EQ(connect_from(*lab, 2, lab->address(0), port), 0) << "cutting node 1 cut node 2 too";
  lab->restore(1);
  EXPECT_TRUE(eventually([&] { return connect_from(*lab, 1, lab->address(0), port) == 0; }))
      << "the restored node does not reach node 0";
  store->send(SIGTERM);
  store->wait(std::chrono::seconds(10));
}

TEST(Lab, TheDestructorRemovesEverythingItMade) {
  std::string why_not;
  auto lab = NetnsLab::create(2, why_not);
  if (!lab) GTEST_SKIP() << why_not;
  auto names = lab->names();
  std::string before = netns_and_links();
  for (const auto& name : names) EXPECT_NE(before.find(name), std::string::npos) << name << " was not made";
  lab.reset();
  std::string after = netns_and_links();
  for (const auto& name : names) EXPECT_EQ(after.find(name), std::string::npos) << name << " is left:\n" << after;
}

TEST(Lab, ALabOfACrashedRunIsRemovedByTheNext) {
  std::string why_not;
  auto probe = NetnsLab::create(1, why_not);
  if (!probe) GTEST_SKIP() << why_not;
  probe.reset();
  // A pid that is surely gone: a child that has exited and was reaped.
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  const std::string stale_ns = "ddpmn" + std::to_string(child) + "x0n0";
  const std::string stale_bridge = "dmb" + std::to_string(child) + "x0";
  ASSERT_EQ(run_command({ip_binary(), "netns", "add", stale_ns}).status, 0);
  ASSERT_EQ(run_command({ip_binary(), "link", "add", stale_bridge, "type", "bridge"}).status, 0);

  auto lab = NetnsLab::create(1, why_not);
  ASSERT_TRUE(lab) << why_not;
  std::string now = netns_and_links();
  EXPECT_EQ(now.find(stale_ns), std::string::npos) << now;
  EXPECT_EQ(now.find(stale_bridge), std::string::npos) << now;
  run_command({ip_binary(), "netns", "delete", stale_ns});  // in case the check failed
  run_command({ip_binary(), "link", "delete", stale_bridge});
}

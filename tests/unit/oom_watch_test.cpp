#include "launcher/report/oom_watch.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kMemoryEventsV2 =
    "low 0\n"
    "high 12\n"
    "max 3\n"
    "oom 2\n"
    "oom_kill 2\n"
    "oom_group_kill 0\n";

constexpr std::string_view kOomControlV1 =
    "oom_kill_disable 0\n"
    "under_oom 0\n"
    "oom_kill 5\n";

/// A hybrid host: v1 controllers, v2 only for process tracking (the memory line is a container's).
constexpr std::string_view kHybridCgroup =
    "9:name=systemd:/\n"
    "7:cpu,cpuacct:/\n"
    "4:memory:/process_api/11c0db45\n"
    "0::/\n";

constexpr std::string_view kUnifiedCgroup = "0::/user.slice/user-1000.slice/session-3.scope\n";

TEST(ParseOomKillCount, CgroupV2MemoryEvents) { EXPECT_EQ(parse_oom_kill_count(kMemoryEventsV2), 2U); }

TEST(ParseOomKillCount, CgroupV1OomControl) { EXPECT_EQ(parse_oom_kill_count(kOomControlV1), 5U); }

TEST(ParseOomKillCount, NothingWithoutTheField) {
  // Kernels before 4.13 have no oom_kill in memory.oom_control.
  EXPECT_FALSE(parse_oom_kill_count("oom_kill_disable 0\nunder_oom 0\n"));
  EXPECT_FALSE(parse_oom_kill_count("oom_group_kill 4\n"));
  EXPECT_FALSE(parse_oom_kill_count(""));
  EXPECT_FALSE(parse_oom_kill_count("oom_kill lots\n"));
}

TEST(ParseOomKillCount, LastLineWithoutNewline) {
  EXPECT_EQ(parse_oom_kill_count("oom 1\noom_kill 18446744073709551615"), 18446744073709551615U);
}

TEST(ParseCgroupV2Path, TheZeroLine) {
  EXPECT_EQ(parse_cgroup_v2_path(kUnifiedCgroup), "/user.slice/user-1000.slice/session-3.scope");
  EXPECT_EQ(parse_cgroup_v2_path(kHybridCgroup), "/");
  EXPECT_EQ(parse_cgroup_v2_path("0::/kubepods/pod:with:colons/ctr"), "/kubepods/pod:with:colons/ctr");
}

TEST(ParseCgroupV2Path, NothingOnPureV1OrGarbage) {
  EXPECT_FALSE(parse_cgroup_v2_path("4:memory:/a\n3:cpu:/b\n"));
  EXPECT_FALSE(parse_cgroup_v2_path("0:memory:/a\n"));
  EXPECT_FALSE(parse_cgroup_v2_path("garbage"));
  EXPECT_FALSE(parse_cgroup_v2_path(""));
}

TEST(ParseCgroupV1MemoryPath, TheMemoryHierarchy) {
  EXPECT_EQ(parse_cgroup_v1_memory_path(kHybridCgroup), "/process_api/11c0db45");
  EXPECT_EQ(parse_cgroup_v1_memory_path("5:cpu,memory:/slurm/uid_1/job_7\n"), "/slurm/uid_1/job_7");
  EXPECT_FALSE(parse_cgroup_v1_memory_path(kUnifiedCgroup));
  EXPECT_FALSE(parse_cgroup_v1_memory_path("4:memory_x,name=memory2:/a\n"));
}

/// A temporary tree laid out like /proc/self/cgroup and /sys/fs/cgroup.
class OomWatchTree : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("ddprun_oom_watch_test_" + std::to_string(::getpid()));
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  fs::path proc_self_cgroup() const { return root_ / "proc_self_cgroup"; }
  fs::path cgroup_root() const { return root_ / "cgroup"; }

  void write(const fs::path& path, std::string_view text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
  }

  OomWatch watch() const { return OomWatch::for_this_process(proc_self_cgroup(), cgroup_root()); }

  fs::path root_;
};

TEST_F(OomWatchTree, CgroupV2ReadsThisCgroupsMemoryEvents) {
  write(proc_self_cgroup(), kUnifiedCgroup);
  auto events = cgroup_root() / "user.slice/user-1000.slice/session-3.scope/memory.events";
  write(events, kMemoryEventsV2);
  write(cgroup_root() / "user.slice/memory.events", "oom_kill 99\n");

  auto oom = watch();
  ASSERT_TRUE(oom.available());
  EXPECT_EQ(oom.counter_file(), events);
  EXPECT_EQ(oom.read_kills(), 2U);

  write(events, "oom 3\noom_kill 3\n");  // the kernel killed one more
  EXPECT_EQ(oom.read_kills(), 3U);
}

TEST_F(OomWatchTree, CgroupV2FallsBackToTheNearestAncestorWithTheMemoryController) {
  write(proc_self_cgroup(), kUnifiedCgroup);
  fs::create_directories(cgroup_root() / "user.slice/user-1000.slice/session-3.scope");
  write(cgroup_root() / "user.slice/memory.events", "oom_kill 7\n");

  auto oom = watch();
  EXPECT_EQ(oom.counter_file(), cgroup_root() / "user.slice/memory.events");
  EXPECT_EQ(oom.read_kills(), 7U);
}

TEST_F(OomWatchTree, CgroupNamespaceSeesItsCgroupAtTheRoot) {
  write(proc_self_cgroup(), "0::/\n");
  write(cgroup_root() / "memory.events", kMemoryEventsV2);
  EXPECT_EQ(watch().read_kills(), 2U);
}

TEST_F(OomWatchTree, HybridHostUsesTheV1MemoryHierarchy) {
  write(proc_self_cgroup(), kHybridCgroup);
  auto control = cgroup_root() / "memory/process_api/11c0db45/memory.oom_control";
  write(control, kOomControlV1);
  write(cgroup_root() / "memory/memory.oom_control", "oom_kill 1000\n");

  auto oom = watch();
  EXPECT_EQ(oom.counter_file(), control);
  EXPECT_EQ(oom.read_kills(), 5U);
}

TEST_F(OomWatchTree, V1ContainerWithoutCgroupNamespaceSeesItsCgroupAtTheMountRoot) {
  write(proc_self_cgroup(), "4:memory:/docker/0123abcd\n");
  write(cgroup_root() / "memory/memory.oom_control", kOomControlV1);
  EXPECT_EQ(watch().read_kills(), 5U);
}

TEST_F(OomWatchTree, UnavailableWithoutAReadableCounter) {
  EXPECT_FALSE(watch().available());  // no /proc/self/cgroup

  write(proc_self_cgroup(), kHybridCgroup);
  write(cgroup_root() / "memory/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\n");  // kernel < 4.13
  auto oom = watch();
  EXPECT_FALSE(oom.available());
  EXPECT_FALSE(oom.read_kills());
  EXPECT_TRUE(oom.counter_file().empty());
}

TEST_F(OomWatchTree, NothingWhenTheCounterVanishes) {
  write(proc_self_cgroup(), "0::/\n");
  write(cgroup_root() / "memory.events", kMemoryEventsV2);
  auto oom = watch();
  ASSERT_TRUE(oom.available());
  fs::remove(cgroup_root() / "memory.events");
  EXPECT_FALSE(oom.read_kills());
}

TEST(OomWatch, DefaultIsUnavailable) {
  OomWatch oom;
  EXPECT_FALSE(oom.available());
  EXPECT_FALSE(oom.read_kills());
}

TEST(OomWatch, ThisProcessIfTheHostHasACounter) {
  auto oom = OomWatch::for_this_process();
  if (!oom.available()) GTEST_SKIP() << "no readable memory cgroup oom_kill counter on this host";
  EXPECT_TRUE(oom.read_kills());
}

}  // namespace
}  // namespace ddprun::launcher

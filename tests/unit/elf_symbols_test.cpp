// Names of code addresses from ELF files (elf_symbols), and ddprun-unwind on a real process: every
// thread's frames named, printed as gdb prints them, and the process running on afterwards.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "launcher/observe/elf_symbols.hpp"
#include "launcher/observe/stack_text.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ParseMaps, KeepsFileMappingsOnly) {
  auto maps = parse_maps(
      "55d0c0a00000-55d0c0a02000 r--p 00000000 08:01 131 /usr/bin/sleep\n"
      "55d0c0a02000-55d0c0a06000 r-xp 00002000 08:01 131 /usr/bin/sleep\n"
      "55d0c1b3f000-55d0c1b60000 rw-p 00000000 00:00 0   [heap]\n"
      "7f0a1c000000-7f0a1c021000 rw-p 00000000 00:00 0 \n"
      "7f0a1e228000-7f0a1e37d000 r-xp 00028000 08:01 2274 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
      "7f0a1e400000-7f0a1e401000 r-xp 00000000 08:01 99 /tmp/gone (deleted)\n"
      "7ffd5a3f0000-7ffd5a3f2000 r-xp 00000000 00:00 0   [vdso]\n");
  ASSERT_EQ(maps.size(), 3u);
  EXPECT_EQ(maps[1].start, 0x55d0c0a02000u);
  EXPECT_EQ(maps[1].end, 0x55d0c0a06000u);
  EXPECT_EQ(maps[1].offset, 0x2000u);
  EXPECT_TRUE(maps[1].executable);
  EXPECT_FALSE(maps[0].executable);
  EXPECT_EQ(maps[2].path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
}

[[gnu::noinline]] int a_function_of_this_test(int x) { return x * 3 + 1; }

TEST(AddressNames, NamesAFunctionOfThisProgramAndOfLibc) {
  AddressNames names(parse_maps(read_text("/proc/self/maps")));
  const std::string exe = fs::canonical("/proc/self/exe").string();
  auto here = reinterpret_cast<std::uintptr_t>(&a_function_of_this_test);
  AddressNames::Name name = names.name(here + 1, exe);
  EXPECT_NE(name.function.find("a_function_of_this_test(int)"), std::string::npos) << name.function;
  EXPECT_EQ(name.file, exe);
  EXPECT_TRUE(name.executable_file);
  AddressNames::Name libc = names.name(reinterpret_cast<std::uintptr_t>(&::getpid), exe);
  EXPECT_NE(libc.function.find("getpid"), std::string::npos) << libc.function;
  EXPECT_NE(libc.file.find("libc.so"), std::string::npos) << libc.file;
  EXPECT_FALSE(libc.executable_file);
  EXPECT_EQ(names.name(0x10, exe).function, "??");
  EXPECT_EQ(names.name(0x10, exe).file, "");
}

TEST(Demangle, CppNamesAndOthers) {
  EXPECT_EQ(demangle("_ZN4c10d4Work4waitEv"), "c10d::Work::wait()");
  EXPECT_EQ(demangle("poll"), "poll");
}

/// build/tests/unit_elf_symbols -> build/bin/ddprun-unwind
fs::path unwinder() { return fs::canonical("/proc/self/exe").parent_path().parent_path() / "bin" / "ddprun-unwind"; }

TEST(DdprunUnwind, EveryThreadOfARunningProcessNamedAndLetGo) {
  if (!fs::exists(unwinder())) GTEST_SKIP() << unwinder() << " not built (libunwind-dev missing)";
  pid_t child = ::fork();
  if (child == 0) {
    std::thread([] { ::pause(); }).detach();
    ::sleep(60);
    ::_exit(0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::string command = unwinder().string() + " " + std::to_string(child);
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  while (std::size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  EXPECT_EQ(::pclose(pipe), 0);
  auto threads = parse_gdb_backtrace(output);
  ASSERT_EQ(threads.size(), 2u) << output;
  const ThreadStack& main = threads.back();
  EXPECT_EQ(gdb_thread_lwp(main), child) << output;
  EXPECT_EQ(main.name, "Thread 1 (LWP " + std::to_string(child) + ")");
  bool sleeps = false, in_test = false;
  for (const auto& frame : main.frames) {
    if (frame.function.find("nanosleep") != std::string::npos) sleeps = true;
    if (frame.function.find("EveryThreadOfARunningProcessNamedAndLetGo") != std::string::npos) in_test = true;
  }
  EXPECT_TRUE(sleeps) << output;
  EXPECT_TRUE(in_test) << output;  // unwound through libc into this program's own frames
  EXPECT_NE(output.find(" from /"), std::string::npos) << output;
  // Let go: not stopped, and still there.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::string stat = read_text("/proc/" + std::to_string(child) + "/stat");
  auto state = stat.substr(stat.rfind(')') + 2, 1);
  EXPECT_EQ(state, "S") << stat;
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);

  // A pid that is gone: said, exit status 0.
  pipe = ::popen((unwinder().string() + " " + std::to_string(child)).c_str(), "r");
  output.clear();
  while (std::size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  EXPECT_EQ(::pclose(pipe), 0);
  EXPECT_NE(output.find("No such process"), std::string::npos) << output;
}

}  // namespace
}  // namespace ddprun::launcher

// elf_needed on real files: this test's own executable, a LibTorch example of the build when there
// is one (Debian's LibTorch 1.13 names its sonames with the version), and files that are not ELF.
#include "launcher/workers/elf_needed.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "launcher/workers/worker_env.hpp"

namespace ddprun::launcher {
namespace {

bool has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

TEST(ElfNeeded, ThisTestsOwnExecutableNamesLibc) {
  const std::vector<std::string> needed = elf_needed(std::filesystem::read_symlink("/proc/self/exe").string());
  EXPECT_TRUE(has(needed, "libc.so.6"));
  EXPECT_TRUE(has(needed, "libstdc++.so.6"));
  EXPECT_FALSE(links_libtorch_1(needed));
}

TEST(ElfNeeded, NothingForWhatIsNotADynamicElfFile) {
  const auto dir = std::filesystem::temp_directory_path() / ("elf_needed_test." + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "script.sh") << "#!/bin/sh\necho hi\n";
  std::ofstream(dir / "short") << "\x7f" "ELF";  // a header cut short
  EXPECT_TRUE(elf_needed((dir / "script.sh").string()).empty());
  EXPECT_TRUE(elf_needed((dir / "short").string()).empty());
  EXPECT_TRUE(elf_needed((dir / "missing").string()).empty());
  EXPECT_TRUE(elf_needed(dir.string()).empty());  // a folder
  std::filesystem::remove_all(dir);
}

#ifdef LIBTORCH_PROGRAM
TEST(ElfNeeded, ALibTorchProgramOfThisBuild) {
  // Debian's libtorch-dev is 1.13, with versioned sonames: the sign ddprun reads (links_libtorch_1).
  const std::vector<std::string> needed = elf_needed(LIBTORCH_PROGRAM);
  const bool versioned_1 = has(needed, "libtorch.so.1.13") || has(needed, "libc10.so.1.13");
  EXPECT_EQ(links_libtorch_1(needed), versioned_1) << LIBTORCH_PROGRAM;
  EXPECT_TRUE(std::any_of(needed.begin(), needed.end(), [](const std::string& n) { return n.starts_with("libc10.so"); }))
      << LIBTORCH_PROGRAM << " names no libc10";
}
#endif

}  // namespace
}  // namespace ddprun::launcher

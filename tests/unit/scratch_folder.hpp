#pragma once
/// ScratchFolder: a temporary folder of one test (named after the test and the pid, so tests run
/// side by side never share one), removed with everything in it when the test ends.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace ddprun::testing_support {

class ScratchFolder {
 public:
  explicit ScratchFolder(const std::string& prefix)
      : root_(std::filesystem::temp_directory_path() /
              (prefix + "_" + std::to_string(::getpid()) + "_" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  ~ScratchFolder() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;

  const std::filesystem::path& root() const { return root_; }

  /// Writes `text` to `path` (absolute, or relative to the folder) with permissions `mode`.
  void write(const std::filesystem::path& path, const std::string& text, mode_t mode) const {
    std::filesystem::path file = path.is_absolute() ? path : root_ / path;
    std::ofstream(file) << text;
    ASSERT_EQ(::chmod(file.c_str(), mode), 0) << file;
  }

 private:
  std::filesystem::path root_;
};

}  // namespace ddprun::testing_support

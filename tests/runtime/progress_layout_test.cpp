// The progress file's bytes, golden: python/ddprun_progress.py (which cannot include the layout)
// and the runtime's ProgressWriter make the same reports, each file is copied after every report,
// and each pair of copies must be byte-identical wherever common/progress_layout.hpp says the bytes
// mean something; each copy must also hold, at the header's offsets, the values reported. The pid,
// the timestamp and the text past text_length differ by nature and are checked on their own.
#include "common/progress_layout.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "ddprun/progress.hpp"

namespace ddprun {
namespace {

namespace fs = std::filesystem;
using namespace common::progress_layout;

/// The interpreter with which ddprun's tests run Python (the one with torch; `python3` on PATH may
/// be another).
constexpr const char* kSystemPython = "/usr/bin/python3";

/// One report, as Python spells it and as C++ does, and the text the file must then hold.
struct Report {
  std::int64_t step;
  std::int64_t samples;
  const char* python_text;  ///< a Python expression
  std::string text;         ///< what C++ passes
  std::string stored;       ///< what the file holds: `text` cut to kMaxText at a character boundary
  bool changes;             ///< whether it publishes (an unchanged report writes nothing)
};

std::string repeated(const std::string& piece, int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out += piece;
  return out;
}

const std::vector<Report>& reports() {
  static const std::vector<Report> table = {
      {0, 32, "None", "", "", true},
      {1, 64, "'epoch 1 loss 0.31'", "epoch 1 loss 0.31", "epoch 1 loss 0.31", true},
      {1, 64, "'epoch 1 loss 0.31'", "epoch 1 loss 0.31", "epoch 1 loss 0.31", false},
      {2, 96, "'ok'", "ok", "ok", true},  // shorter: what is past text_length is no one's business
      {3, 128, "'\\u00e9' * 200", repeated("\xc3\xa9", 200), repeated("\xc3\xa9", 128), true},
      {-5, (std::int64_t{1} << 62) + 7, "'a' * 255 + '\\u00e9'", std::string(255, 'a') + "\xc3\xa9", std::string(255, 'a'), true},
      {-5, (std::int64_t{1} << 62) + 7, "'a' * 255 + '\\u00e9'", std::string(255, 'a') + "\xc3\xa9", std::string(255, 'a'), false},
      {6, 7, "None", "", "", true},
  };
  return table;
}

std::int64_t coarse_now_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

std::vector<unsigned char> bytes_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

template <class T>
T field(const std::vector<unsigned char>& file, std::size_t offset) {
  T value{};
  std::memcpy(&value, file.data() + offset, sizeof value);
  return value;
}

class ProgressLayout : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ddprun_progress_layout_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// Runs the reports through python/ddprun_progress.py in a process of its own, copying its file
  /// to python_<i> after report i; returns that process's pid.
  pid_t run_python_writer() {
    std::string script = "import shutil, sys\nimport ddprun_progress as p\nout = sys.argv[1]\n";
    for (std::size_t i = 0; i < reports().size(); ++i) {
      const Report& r = reports()[i];
      script += "p.report(" + std::to_string(r.step) + ", " + std::to_string(r.samples) + ", " + r.python_text + ")\n";
      script += "shutil.copyfile(out + '/python', out + '/python_" + std::to_string(i) + "')\n";
    }
    const std::string progress_file = (dir_ / "python").string();
    const std::string out = dir_.string();
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("DDPRUN_PROGRESS_FILE", progress_file.c_str(), 1);
      ::setenv("PYTHONPATH", DDPRUN_PYTHON_SOURCE_DIR, 1);
      ::execl(kSystemPython, kSystemPython, "-c", script.c_str(), out.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << kSystemPython << " -c ...: status " << status;
    return pid;
  }

  /// The same reports through the runtime's writer, copying its file to cpp_<i> after report i.
  void run_cpp_writer() {
    ProgressWriter writer((dir_ / "cpp").string());
    for (std::size_t i = 0; i < reports().size(); ++i) {
      const Report& r = reports()[i];
      writer.report(r.step, r.samples, r.text);
      fs::copy_file(dir_ / "cpp", dir_ / ("cpp_" + std::to_string(i)));
    }
  }

  fs::path dir_;
};

/// Whether byte `at` of a file must be the same whoever wrote it, once `text_length` bytes of text
/// are published: everything but the writer's pid, its clock, and the text area past the text.
bool must_match(std::size_t at, std::uint32_t text_length) {
  if (at >= kPidAt && at < kPidAt + 4) return false;
  if (at >= kTimestampAt && at < kTimestampAt + 8) return false;
  if (at >= kTextAt + text_length && at < kTextAt + kMaxText) return false;
  return true;
}

TEST_F(ProgressLayout, PythonAndCppWritersLayTheSameBytesWhereTheLayoutSays) {
  const std::int64_t before = coarse_now_ns();
  const pid_t python_pid = run_python_writer();
  run_cpp_writer();
  const std::int64_t after = coarse_now_ns();

  std::uint64_t published = 0;
  for (std::size_t i = 0; i < reports().size(); ++i) {
    const Report& r = reports()[i];
    if (r.changes) ++published;
    const std::string index = std::to_string(i);
    const auto python = bytes_of(dir_ / ("python_" + index));
    const auto cpp = bytes_of(dir_ / ("cpp_" + index));
    ASSERT_EQ(python.size(), kFileSize) << "python, after report " << i;
    ASSERT_EQ(cpp.size(), kFileSize) << "c++, after report " << i;

    // The layout, read at the header's offsets, holds what was reported.
    for (const auto* file : {&python, &cpp}) {
      const char* writer = file == &python ? "python" : "c++";
      SCOPED_TRACE(std::string(writer) + ", after report " + index);
      EXPECT_EQ(std::memcmp(file->data() + kMagicAt, "DDPRPRG1", 8), 0);
      EXPECT_EQ(field<std::uint64_t>(*file, kMagicAt), kMagic);
      EXPECT_EQ(field<std::uint32_t>(*file, kVersionAt), kVersion);
      EXPECT_EQ(field<std::uint32_t>(*file, kSizeAt), kFileSize);
      EXPECT_EQ(field<std::int32_t>(*file, kPidAt), file == &python ? python_pid : ::getpid());
      EXPECT_EQ(field<std::uint64_t>(*file, kSequenceAt), 2 * published) << "even, two per change";
      EXPECT_EQ(field<std::int64_t>(*file, kStepAt), r.step);
      EXPECT_EQ(field<std::int64_t>(*file, kSamplesAt), r.samples);
      const auto timestamp = field<std::int64_t>(*file, kTimestampAt);
      EXPECT_GE(timestamp, before) << "CLOCK_MONOTONIC_COARSE";
      EXPECT_LE(timestamp, after) << "CLOCK_MONOTONIC_COARSE";
      EXPECT_EQ(field<std::uint32_t>(*file, kTextLengthAt), r.stored.size());
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(file->data() + kTextAt), r.stored.size()), r.stored);
      for (std::size_t at = kReservedAt; at < kFileSize; ++at) ASSERT_EQ((*file)[at], 0) << "reserved byte " << at;
    }

    // And the two files agree byte for byte wherever the layout gives the bytes a meaning.
    const auto text_length = static_cast<std::uint32_t>(r.stored.size());
    for (std::size_t at = 0; at < kFileSize; ++at) {
      if (!must_match(at, text_length)) continue;
      ASSERT_EQ(static_cast<int>(python[at]), static_cast<int>(cpp[at]))
          << "byte " << at << " differs after report " << i << " (python, c++)";
    }
  }
}

TEST(ProgressLayoutMask, OnlyThePidTheClockAndTheTextsTailMayDiffer) {
  struct Case {
    std::size_t at;
    std::uint32_t text_length;
    bool must;
  };
  const Case cases[] = {
      {kMagicAt, 0, true},          {kVersionAt, 0, true},       {kSizeAt + 3, 0, true},
      {kPidAt, 0, false},           {kPidAt + 3, 0, false},      {kPidAt + 4, 0, true},  // reserved
      {kSequenceAt, 0, true},       {kStepAt, 0, true},          {kSamplesAt + 7, 0, true},
      {kTimestampAt, 0, false},     {kTimestampAt + 7, 0, false}, {kTextLengthAt, 0, true},
      {kTextAt, 0, false},          {kTextAt, 1, true},          {kTextAt + 1, 1, false},
      {kTextAt + kMaxText - 1, kMaxText, true}, {kReservedAt, 0, true}, {kFileSize - 1, 0, true},
  };
  for (const auto& c : cases) EXPECT_EQ(must_match(c.at, c.text_length), c.must) << c.at << " " << c.text_length;
}

}  // namespace
}  // namespace ddprun

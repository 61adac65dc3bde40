// python/ddprun_progress.py, the pure-Python progress writer, read back by the launcher's own
// reader (launcher/observe/progress_reader.hpp, which knows the layout from the C++ contract, not from the
// module): a Python worker under ddprun imports it with no PYTHONPATH of the user's; text cut at a
// character boundary; no system call per report (seccomp strict mode); a no-op without ddprun and
// never an exception into training; a forked child leaves its parent's file alone; and a reader
// never sees a torn snapshot while a Python process writes flat out.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <string>
#include <thread>

#include "harness.hpp"
#include "launcher/observe/progress_reader.hpp"

using namespace ddprun::testing;
using ddprun::launcher::ProgressFile;
using ddprun::launcher::ProgressRead;
using ddprun::launcher::ProgressRecord;

namespace {

const std::string kSourceDir = DDPRUN_PYTHON_SOURCE_DIR;

/// /usr/bin/python3 -c `script` ARGS with the module's source folder on PYTHONPATH and
/// DDPRUN_PROGRESS_FILE = `progress_file` ("" = unset).
Outcome run_python(const std::string& script, const std::string& progress_file,
                   const std::vector<std::string>& args = {}) {
  std::vector<std::string> argv = {kSystemPython, "-c", script};
  argv.insert(argv.end(), args.begin(), args.end());
  std::map<std::string, std::string> env = {{"PYTHONPATH", kSourceDir}};
  std::vector<std::string> unset;
  if (progress_file.empty()) {
    unset.push_back("DDPRUN_PROGRESS_FILE");
  } else {
    env["DDPRUN_PROGRESS_FILE"] = progress_file;
  }
  Launch launch(Launch::Command{argv}, env, unset);
  return launch.wait(std::chrono::seconds(120));
}

ProgressRecord read_back(const std::string& path) {
  std::string why;
  auto file = ProgressFile::open(path, &why);
  EXPECT_TRUE(file) << path << ": " << why;
  ProgressRecord record;
  if (file) EXPECT_EQ(file->read(record), ProgressRead::ok) << path;
  return record;
}

}  // namespace

TEST(PythonProgress, AWorkerUnderDdprunImportsItWithNoPythonpathAndItsReportsAreRead) {
  TempDir dir;
  const auto script = dir.path() / "train.py";
  std::ofstream(script) << R"(import os, sys, time
import ddprun_progress
rank = int(os.environ["RANK"])
out = sys.argv[1]
for step in range(41 + rank):
    ddprun_progress.report(step, 1000 * (step + 1), "rank %d: épreuve %d" % (rank, step))
info = "%d\n%s\n%s\n%s\n" % (os.getpid(), os.environ["DDPRUN_PROGRESS_FILE"], ddprun_progress.__file__,
                           os.environ.get("PYTHONPATH", ""))
with open("%s/info_%d.tmp" % (out, rank), "w") as f:
    f.write(info)
os.rename("%s/info_%d.tmp" % (out, rank), "%s/info_%d" % (out, rank))
while not os.path.exists(out + "/go"):
    time.sleep(0.05)
)";
  Launch launch({"--standalone", "--nproc-per-node", "2", script.string(), dir.str()}, {}, {"PYTHONPATH"});
  for (int rank = 0; rank < 2; ++rank) {
    const auto info_path = dir.path() / ("info_" + std::to_string(rank));
    ASSERT_TRUE(eventually([&] { return std::filesystem::exists(info_path); }, std::chrono::seconds(60)))
        << "rank " << rank << " did not report";
    const std::vector<std::string> info = split_lines(read_file(info_path));
    ASSERT_EQ(info.size(), 4u) << read_file(info_path);
    // Found in ddprun's own folder (build tree or installed), the only PYTHONPATH entry.
    EXPECT_NE(info[2].find("share/ddprun/python/ddprun_progress.py"), std::string::npos) << info[2];
    EXPECT_EQ(info[3] + "/ddprun_progress.py", info[2]);
    const ProgressRecord record = read_back(info[1]);
    const int last_step = 40 + rank;
    EXPECT_EQ(record.step, last_step);
    EXPECT_EQ(record.samples, 1000 * (last_step + 1));
    EXPECT_EQ(record.text, "rank " + std::to_string(rank) + ": \xc3\xa9preuve " + std::to_string(last_step));
    EXPECT_EQ(record.generation, static_cast<std::uint64_t>(last_step + 1)) << "one publication per change";
    EXPECT_EQ(std::to_string(record.pid), info[0]) << "the worker stamped its pid";
    EXPECT_GT(record.timestamp_ns, 0);
  }
  std::ofstream(dir.path() / "go") << "";
  Outcome outcome = launch.wait();
  EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
}

TEST(PythonProgress, TextIsCutToTheLast256BytesThatEndACharacter) {
  TempDir dir;
  const std::string path = (dir.path() / "progress").string();
  struct Case {
    std::string python_text;
    std::string expected;
  };
  const Case cases[] = {
      {"'a' * 255 + '\\u00e9tape'", std::string(255, 'a')},              // 'é' would straddle byte 256
      {"'a' * 254 + '\\u20ac'", std::string(254, 'a')},                    // so would '€' (3 bytes)
      {"'a' * 253 + '\\u20ac'", std::string(253, 'a') + "\xe2\x82\xac"},  // ends exactly at 256
      {"'b' * 300", std::string(256, 'b')},
      {"'\\U0001F600' * 70", [] { std::string s; for (int i = 0; i < 64; ++i) s += "\xf0\x9f\x98\x80"; return s; }()},
      {"None", ""},
      {"12345", "12345"},  // not a str: its str()
  };
  for (const auto& c : cases) {
    Outcome outcome = run_python("import ddprun_progress as p; p.report(1, 2, " + c.python_text + ")", path);
    ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
    EXPECT_EQ(outcome.err, "");
    EXPECT_EQ(read_back(path).text, c.expected) << c.python_text;
  }
}

TEST(PythonProgress, ReportsMakeNoSystemCall) {
  TempDir dir;
  const std::string path = (dir.path() / "progress").string();
  // Seccomp's strict mode kills the process at any system call but read, write, exit and
  // sigreturn: 100,000 reports (changed values, changing texts, unchanged ones) must all pass.
  // The first report maps the file, before strict mode; the exit is the exit system call itself
  // (Python's would call exit_group, which strict mode forbids).
  const std::string script = R"(import ctypes, os, sys
import ddprun_progress as p
libc = ctypes.CDLL(None, use_errno=True)
syscall = libc.syscall
syscall.restype = ctypes.c_long
p.report(0, 0, "start")
texts = ["epoch %d" % i for i in range(4)]
syscall(39)  # getpid: ctypes' call path is warm before strict mode
if libc.prctl(22, 1, 0, 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_STRICT
    os._exit(77)
for i in range(1, 100001):
    p.report(i, i * 32, texts[i % 4])
    p.report(i, i * 32, texts[i % 4])
os.write(1, b"done\n")
syscall(60, 0)  # SYS_exit
)";
  Outcome outcome = run_python(script, path);
  if (outcome.exit_status == 77) GTEST_SKIP() << "seccomp strict mode is not available here";
  EXPECT_EQ(outcome.exit_status, 0) << "killed by seccomp (128+9) means a report made a system call; " << outcome.err;
  EXPECT_EQ(outcome.out, "done\n");
  const ProgressRecord record = read_back(path);
  EXPECT_EQ(record.step, 100000);
  EXPECT_EQ(record.samples, 3200000);
  EXPECT_EQ(record.text, "epoch 0");
  EXPECT_EQ(record.generation, 100001u) << "the repeated reports wrote nothing";
}

TEST(PythonProgress, WithoutDdprunItDoesNothingAndItNeverRaisesIntoTraining) {
  TempDir dir;
  Outcome unset = run_python("import ddprun_progress as p\nassert p.report(1, 2, 'x') is None\nprint(p.enabled())", "");
  EXPECT_EQ(unset.exit_status, 0) << unset.err;
  EXPECT_EQ(unset.out, "False\n");
  EXPECT_EQ(unset.err, "");

  // A file that cannot be made: said once, then silence; the script goes on.
  const std::string missing = (dir.path() / "missing" / "progress").string();
  Outcome unusable = run_python("import ddprun_progress as p\nfor i in range(5): p.report(i, i)\nprint(p.enabled())", missing);
  EXPECT_EQ(unusable.exit_status, 0) << unusable.err;
  EXPECT_EQ(unusable.out, "False\n");
  EXPECT_EQ(unusable.err, "ddprun_progress: progress reports are off: " + missing +
                              ": [Errno 2] No such file or directory: '" + missing + "'\n");

  // Values that are not int64: said once, reporting stops, the last good report stays whole.
  const std::string path = (dir.path() / "progress").string();
  Outcome bad = run_python(R"(import ddprun_progress as p
p.report(3, 96, "good")
p.report(4.5, 128)
p.report(5, 160)
p.report(2 ** 70, 1)
class Weird:
    def __eq__(self, other): raise RuntimeError("no comparing me")
p.report(Weird(), 1)
print("still training")
)", path);
  EXPECT_EQ(bad.exit_status, 0) << bad.err;
  EXPECT_EQ(bad.out, "still training\n");
  EXPECT_EQ(split_lines(bad.err).size(), 1u) << bad.err;
  EXPECT_NE(bad.err.find("step and samples must be integers: 4.5, 128"), std::string::npos) << bad.err;
  const ProgressRecord record = read_back(path);
  EXPECT_EQ(record.step, 3);
  EXPECT_EQ(record.samples, 96);
  EXPECT_EQ(record.text, "good");

  // A value that cannot even be compared, at the first report.
  Outcome weird = run_python(R"(import ddprun_progress as p
class Weird:
    def __eq__(self, other): raise RuntimeError("no comparing me")
p.report(Weird(), 1)
p.report(1, 1)
print("still training")
)", (dir.path() / "progress2").string());
  EXPECT_EQ(weird.exit_status, 0) << weird.err;
  EXPECT_EQ(weird.out, "still training\n");
  EXPECT_NE(weird.err.find("no comparing me"), std::string::npos) << weird.err;
  EXPECT_EQ(split_lines(weird.err).size(), 1u) << weird.err;
}

TEST(PythonProgress, AForkedChildLeavesItsParentsFileAlone) {
  TempDir dir;
  const std::string path = (dir.path() / "progress").string();
  Outcome outcome = run_python(R"(import os
import ddprun_progress as p
p.report(1, 32, "parent")
child = os.fork()
if child == 0:
    p.report(99, 99, "child")
    os._exit(0)
os.waitpid(child, 0)
print(os.getpid())
)", path);
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  const ProgressRecord record = read_back(path);
  EXPECT_EQ(record.step, 1);
  EXPECT_EQ(record.text, "parent");
  EXPECT_EQ(std::to_string(record.pid) + "\n", outcome.out);
}

TEST(PythonProgress, SnapshotsAreNeverTornWhileAPythonWorkerWritesFlatOut) {
  TempDir dir;
  const std::string path = (dir.path() / "progress").string();
  constexpr int kSteps = 200000;
  // Every field derives from the step: a torn snapshot would mix two steps.
  const std::string script = R"(import sys
import ddprun_progress as p
for step in range(1, int(sys.argv[1]) + 1):
    p.report(step, step * 32, "step %d%s" % (step, "." * (step % 200)))
)";
  std::vector<std::string> argv = {kSystemPython, "-c", script, std::to_string(kSteps)};
  Launch writer(Launch::Command{argv}, {{"PYTHONPATH", kSourceDir}, {"DDPRUN_PROGRESS_FILE", path}});
  std::unique_ptr<ProgressFile> file;
  ASSERT_TRUE(eventually([&] { return (file = ProgressFile::open(path)) != nullptr; }));
  long reads = 0, bad = 0;
  std::int64_t last_step = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (last_step < kSteps && std::chrono::steady_clock::now() < deadline) {
    ProgressRecord record;
    if (file->read(record) != ProgressRead::ok) continue;
    ++reads;
    const std::string expected = "step " + std::to_string(record.step) + std::string(static_cast<std::size_t>(record.step % 200), '.');
    if (record.samples != record.step * 32 || record.text != expected || record.step < last_step) ++bad;
    last_step = record.step;
  }
  Outcome outcome = writer.wait();
  EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_EQ(last_step, kSteps);
  EXPECT_EQ(bad, 0) << "of " << reads << " snapshots";
  EXPECT_GT(reads, 1);
}

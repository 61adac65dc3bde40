// warm_plan: what a warm interpreter starts with, when it may become a worker, and its messages.
#include "launcher/workers/warm_plan.hpp"

#include <gtest/gtest.h>

#include "launcher/workers/worker_env.hpp"

namespace ddprun::launcher {
namespace {

TEST(WarmPlan, TheEnvironmentIsDdprunsWithWhatIsReadBeforeGo) {
  const Environ base{{"PATH", "/bin"}, {"OMP_NUM_THREADS", "8"}, {"PYTHONUNBUFFERED", "1"}, {"HOME", "/h"}};
  const Environ worker{{"PATH", "/bin"},           {"HOME", "/h"},   {"RANK", "3"},
                       {"PYTHONPATH", "/ddprun:/u"}, {"OMP_NUM_THREADS", "1"}, {"CUDA_VISIBLE_DEVICES", "3"},
                       {"MASTER_PORT", "29500"}};
  const Environ expected{{"PATH", "/bin"}, {"HOME", "/h"}, {"PYTHONPATH", "/ddprun:/u"}, {"OMP_NUM_THREADS", "1"}};
  // PYTHONUNBUFFERED: the worker has none here, so neither has its warm interpreter.
  EXPECT_EQ(warm_environment(base, worker), expected);
}

TEST(WarmPlan, TheSameForEveryRankAndAttemptOfANode) {
  WorkerSpec spec;
  spec.executable = "/usr/bin/python3";
  spec.argv = {"/usr/bin/python3", "-u", "train.py"};
  spec.python_dir = "/ddprun/python";
  spec.local_world_size = 4;
  const Environ base{{"PATH", "/bin"}};
  WorkerSpec other = spec;
  other.rank = 7;
  other.restart_count = 2;
  other.master_port = 1234;
  other.cuda_visible_devices = "3";
  other.progress_file = "/logs/attempt_2/3/progress";
  EXPECT_EQ(warm_start_of(spec, base, build_worker_env(base, spec)),
            warm_start_of(other, base, build_worker_env(base, other)));
}

TEST(WarmPlan, AnythingElseMakesAnotherStart) {
  WorkerSpec spec;
  spec.executable = "/usr/bin/python3";
  spec.argv = {"/usr/bin/python3", "-u", "train.py"};
  const Environ base{{"PATH", "/bin"}};
  const WarmStart start = warm_start_of(spec, base, build_worker_env(base, spec));
  auto differs = [&](auto change) {
    WorkerSpec changed = spec;
    change(changed);
    return !(warm_start_of(changed, base, build_worker_env(base, changed)) == start);
  };
  EXPECT_TRUE(differs([](WorkerSpec& s) { s.argv.push_back("--lr=1"); }));
  EXPECT_TRUE(differs([](WorkerSpec& s) { s.executable = "/venv/bin/python3"; }));
  EXPECT_TRUE(differs([](WorkerSpec& s) { s.local_rank = 1; }));
  EXPECT_TRUE(differs([](WorkerSpec& s) { s.terminal = WorkerTerminal::pty; }));
  EXPECT_TRUE(differs([](WorkerSpec& s) { s.cpu_affinity = {0, 1}; }));
  EXPECT_TRUE(differs([](WorkerSpec& s) { s.local_world_size = 2; }));  // OMP_NUM_THREADS=1 from 2 workers on
  EXPECT_TRUE(differs([](WorkerSpec& s) { s.python_dir = "/elsewhere"; }));  // PYTHONPATH
  EXPECT_FALSE(differs([](WorkerSpec& s) { s.world_size = 64; }));
}

TEST(WarmPlan, StdinIsGivenUpAtGoNeverGained) {
  WorkerSpec spec;
  spec.executable = "/usr/bin/python3";
  const Environ base{{"PATH", "/bin"}};
  WorkerSpec reader = spec;
  reader.reads_stdin = true;
  const Environ env = build_worker_env(base, spec);
  const WarmStart start = warm_start_of(spec, base, env);
  EXPECT_TRUE(may_become(start, true, reader, base, env));
  EXPECT_TRUE(may_become(start, true, spec, base, env));    // /dev/null at go
  EXPECT_TRUE(may_become(start, false, spec, base, env));
  EXPECT_FALSE(may_become(start, false, reader, base, env));  // no pipe to give it
  WorkerSpec other = spec;
  other.argv = {"python3", "-u", "other.py"};
  EXPECT_FALSE(may_become(start, true, other, base, build_worker_env(base, other)));
}

TEST(WarmPlan, GoCarriesTheExecTriple) {
  const std::string message = go_message("/usr/bin/python3", {"python3", "-u", "t.py"}, {"A=1", "B=x=y"});
  const std::string payload("/usr/bin/python3\0" "3\0" "python3\0-u\0t.py\0A=1\0B=x=y\0", 45);
  EXPECT_EQ(message, "go " + std::to_string(payload.size()) + " keep\n" + payload);
  // An empty argument and an empty value travel as empty fields.
  EXPECT_EQ(go_message("/p", {"p", ""}, {"E="}, true), std::string("go 11 null\n/p\0" "2\0p\0\0E=\0", 22));
}

TEST(WarmPlan, ReportsAsTheInterpreterWritesThem) {
  const struct {
    std::string line;
    WarmReport::Kind kind;
    std::string text;
  } rows[] = {
      {"hello\n", WarmReport::Kind::hello, ""},
      {"ready", WarmReport::Kind::ready, ""},
      {"failed torch: ModuleNotFoundError: No module named 'torch'", WarmReport::Kind::failed,
       "torch: ModuleNotFoundError: No module named 'torch'"},
      {"cuda torch,mine", WarmReport::Kind::cuda, "torch,mine"},
      {"ready now", WarmReport::Kind::unknown, "ready now"},
      {"", WarmReport::Kind::unknown, ""},
      {"HELLO", WarmReport::Kind::unknown, "HELLO"},
  };
  for (const auto& row : rows) {
    const WarmReport report = parse_warm_report(row.line);
    EXPECT_EQ(report.kind, row.kind) << row.line;
    EXPECT_EQ(report.text, row.text) << row.line;
  }
}

TEST(WarmPlan, OneLineSaysWhyTheWorkersStartCold) {
  EXPECT_EQ(describe_cold_start({WarmReport::Kind::failed, "x: ImportError: boom"}, 2),
            "warning: --preload failed on local rank 2 (x: ImportError: boom): the workers start cold");
  EXPECT_EQ(describe_cold_start({WarmReport::Kind::cuda, "torch"}, 0),
            "error: --preload refused: importing torch initialised CUDA, which must wait for each worker's "
            "CUDA_VISIBLE_DEVICES: the workers start cold");
  EXPECT_EQ(describe_warm_death(1, "killed by SIGKILL"),
            "warning: --preload: local rank 1's warm interpreter ended (killed by SIGKILL) before it became a "
            "worker: the workers start cold");
}

}  // namespace
}  // namespace ddprun::launcher

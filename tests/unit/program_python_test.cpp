// Which Python runs the workers (issue 11, item 3): choose_python's order, #! lines of console
// scripts, torchrun's $local_rank substitution and torch.distributed.launch's --local_rank.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "launcher/base/errors.hpp"
#include "launcher/base/own_executable.hpp"
#include "launcher/cli/program.hpp"
#include "scratch_folder.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;
using Args = std::vector<std::string>;

/// bin/python3 (PATH), venv/bin/python, conda/bin/python, exec/py (PYTHON_EXEC candidates), all
/// executable; empty/ is an environment without an interpreter.
class PythonChoiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* dir : {"bin", "venv/bin", "conda/bin", "exec", "empty/bin", "tools"}) fs::create_directories(root_ / dir);
    for (const char* file : {"bin/python3", "venv/bin/python", "conda/bin/python", "exec/py"}) {
      write(root_ / file, "#!/bin/sh\n", 0755);
    }
  }
  void write(const fs::path& p, const std::string& text, mode_t mode) const { scratch_.write(p, text, mode); }
  std::string at(const char* relative) const { return (root_ / relative).string(); }

  testing_support::ScratchFolder scratch_{"ddprun_python_test"};
  const fs::path& root_ = scratch_.root();
};

TEST_F(PythonChoiceTest, DocumentedOrder) {
  struct Row {
    Environ env;
    std::string interpreter;
    std::string reason;
  };
  const std::string path = at("bin");
  const std::vector<Row> rows{
      {{{"PATH", path}}, at("bin/python3"), "python3 on PATH"},
      {{{"PATH", path}, {"CONDA_PREFIX", at("conda")}}, at("conda/bin/python"), "CONDA_PREFIX=" + at("conda")},
      {{{"PATH", path}, {"CONDA_PREFIX", at("conda")}, {"VIRTUAL_ENV", at("venv")}}, at("venv/bin/python"),
       "VIRTUAL_ENV=" + at("venv")},
      {{{"PATH", path}, {"CONDA_PREFIX", at("conda")}, {"VIRTUAL_ENV", at("venv")}, {"PYTHON_EXEC", at("exec/py")}},
       at("exec/py"), "PYTHON_EXEC"},
      {{{"PATH", at("exec")}, {"VIRTUAL_ENV", at("venv")}, {"PYTHON_EXEC", "py"}}, at("exec/py"), "PYTHON_EXEC"},
      // Empty values count as unset.
      {{{"PATH", path}, {"VIRTUAL_ENV", ""}, {"CONDA_PREFIX", ""}, {"PYTHON_EXEC", ""}}, at("bin/python3"),
       "python3 on PATH"},
      // An environment without an interpreter is skipped, and said so.
      {{{"PATH", path}, {"VIRTUAL_ENV", at("empty")}}, at("bin/python3"),
       "python3 on PATH; VIRTUAL_ENV=" + at("empty") + " has no bin/python"},
      {{{"PATH", path}, {"VIRTUAL_ENV", at("empty")}, {"CONDA_PREFIX", at("conda")}}, at("conda/bin/python"),
       "CONDA_PREFIX=" + at("conda") + "; VIRTUAL_ENV=" + at("empty") + " has no bin/python"},
  };
  for (const auto& row : rows) {
    PythonChoice choice = choose_python(row.env);
    SCOPED_TRACE(describe_python(choice));
    EXPECT_EQ(choice.interpreter, row.interpreter);
    EXPECT_EQ(choice.reason, row.reason);
  }
  EXPECT_EQ(describe_python({"/usr/bin/python3", "python3 on PATH"}), "/usr/bin/python3 (python3 on PATH)");
}

TEST_F(PythonChoiceTest, TheInterpreterBesideDdprunComesAfterPythonExecOnly) {
  // ddprun pip-installed into an env sits in its bin/ beside python3 (a venv's is a symlink) and
  // python; a build tree's bin/ has none. Called by full path, no env is active.
  for (const char* dir : {"env/bin", "pyonly/bin", "build/bin"}) fs::create_directories(root_ / dir);
  fs::create_symlink(root_ / "bin/python3", root_ / "env/bin/python3");
  write(root_ / "env/bin/python", "#!/bin/sh\n", 0755);
  write(root_ / "pyonly/bin/python", "#!/bin/sh\n", 0755);
  write(root_ / "build/bin/python3", "not executable\n", 0644);
  struct Row {
    Environ env;
    std::string dir;
    std::string interpreter;
    std::string reason;
  };
  const std::string path = at("bin");
  const Environ active{{"PATH", path}, {"VIRTUAL_ENV", at("venv")}, {"CONDA_PREFIX", at("conda")}};
  Environ with_exec = active;
  with_exec["PYTHON_EXEC"] = at("exec/py");
  const std::vector<Row> rows{
      {{{"PATH", path}}, at("env/bin"), at("env/bin/python3"), "beside ddprun in " + at("env/bin")},
      {active, at("env/bin"), at("env/bin/python3"), "beside ddprun in " + at("env/bin")},
      {active, at("pyonly/bin"), at("pyonly/bin/python"), "beside ddprun in " + at("pyonly/bin")},
      {with_exec, at("env/bin"), at("exec/py"), "PYTHON_EXEC"},
      // Nothing executable beside it: the order goes on as before.
      {active, at("build/bin"), at("venv/bin/python"), "VIRTUAL_ENV=" + at("venv")},
      {{{"PATH", path}}, at("build/bin"), at("bin/python3"), "python3 on PATH"},
      {{{"PATH", path}}, at("missing/bin"), at("bin/python3"), "python3 on PATH"},
  };
  for (const auto& row : rows) {
    PythonChoice choice = choose_python(row.env, "t.py", row.dir);
    SCOPED_TRACE(row.dir + ": " + describe_python(choice));
    EXPECT_EQ(choice.interpreter, row.interpreter);  // the symlink's path, not its target
    EXPECT_EQ(choice.reason, row.reason);
  }
}

TEST_F(PythonChoiceTest, OwnExecutableDirIsThisTestsFolder) {
  EXPECT_EQ(own_executable_dir(), fs::canonical("/proc/self/exe").parent_path());
}

TEST_F(PythonChoiceTest, VenvInterpreterKeepsItsSymlinkPath) {
  // A venv's bin/python is a symlink; resolving it would lose the venv (pyvenv.cfg sits beside it).
  fs::create_directories(root_ / "linked/bin");
  fs::create_symlink(root_ / "bin/python3", root_ / "linked/bin/python");
  PythonChoice choice = choose_python({{"PATH", at("bin")}, {"VIRTUAL_ENV", at("linked")}});
  EXPECT_EQ(choice.interpreter, at("linked/bin/python"));
}

TEST_F(PythonChoiceTest, BrokenPythonExecIsAnErrorNotAFallback) {
  try {
    choose_python({{"PATH", at("bin")}, {"VIRTUAL_ENV", at("venv")}, {"PYTHON_EXEC", at("exec/missing")}}, "t.py");
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("PYTHON_EXEC: ", 0), 0U) << e.what();
  }
  EXPECT_THROW(choose_python({{"PATH", at("tools")}}), UsageError);
}

TEST(ParsePythonShebang, ByTable) {
  struct Row {
    std::string head;
    bool python;
    std::string interpreter;
    Args args;
  };
  const std::vector<Row> rows{
      {"#!/usr/bin/python3\nimport x\n", true, "/usr/bin/python3", {}},
      {"#! /usr/bin/python3.11 \n", true, "/usr/bin/python3.11", {}},
      {"#!/x/venv/bin/python -E\n", true, "/x/venv/bin/python", {"-E"}},
      {"#!/x/venv/bin/python -E -s\n", true, "/x/venv/bin/python", {"-E -s"}},  // the kernel: one argument
      {"#!/usr/bin/env python3\n", true, "python3", {}},
      {"#!/usr/bin/env -S python3 -E -s\n", true, "python3", {"-E", "-s"}},
      {"#!/opt/pypy/bin/pypy3\n", true, "/opt/pypy/bin/pypy3", {}},
      {"#!/bin/sh\n'''exec' \"/a very/long/venv/bin/python\" \"$0\" \"$@\"\n' '''\n", true,
       "/a very/long/venv/bin/python", {}},
      {"#!/bin/sh\n'''exec' /long/venv/bin/python3 \"$0\" \"$@\"\n", true, "/long/venv/bin/python3", {}},
      {"#!/usr/bin/env python3 -E\n", false, "", {}},  // env looks for "python3 -E": left to fail as it does
      {"#!/bin/bash\necho hi\n", false, "", {}},
      {"#!/bin/sh\nexec python3 \"$0\"\n", false, "", {}},
      {"#!/usr/bin/env bash\n", false, "", {}},
      {"#!/usr/bin/pythonista\n", false, "", {}},
      {"#!/usr/bin/python3", false, "", {}},  // no end of line within what was read
      {std::string("\x7f" "ELF\x02\x01\x01", 7), false, "", {}},
      {"import torch\n", false, "", {}},
      {"", false, "", {}},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.head);
    auto shebang = parse_python_shebang(row.head);
    ASSERT_EQ(shebang.has_value(), row.python);
    if (!shebang) continue;
    EXPECT_EQ(shebang->interpreter, row.interpreter);
    EXPECT_EQ(shebang->args, row.args);
  }
}

class ConsoleScriptTest : public PythonChoiceTest {
 protected:
  LaunchConfig config(const std::string& program, Args args = {}) const {
    LaunchConfig c;
    c.mode = ProgramMode::executable;
    c.program = program;
    c.program_args = std::move(args);
    return c;
  }
};

TEST_F(ConsoleScriptTest, PythonShebangRunsWithThatInterpreterAndDashU) {
  write(root_ / "tools/train-tool", "#!" + at("venv/bin/python") + " -E\nfrom pkg import main\n", 0755);
  Environ env{{"PATH", at("tools") + ":" + at("bin")}};
  // By name on PATH: Python is given the path PATH found, as the kernel gives it.
  WorkerCommand c = resolve_program(config("train-tool", {"--lr", "1"}), env);
  EXPECT_EQ(c.executable, at("venv/bin/python"));
  EXPECT_EQ(c.argv, (Args{at("venv/bin/python"), "-E", "-u", at("tools/train-tool"), "--lr", "1"}));
  ASSERT_TRUE(c.python);
  EXPECT_EQ(c.python->interpreter, at("venv/bin/python"));
  EXPECT_NE(c.python->reason.find("#!"), std::string::npos) << c.python->reason;
  // By path: as typed.
  std::string typed = at("tools") + "/./train-tool";
  EXPECT_EQ(resolve_program(config(typed), env).argv, (Args{at("venv/bin/python"), "-E", "-u", typed}));
}

TEST_F(ConsoleScriptTest, EnvShebangFindsTheInterpreterOnPath) {
  write(root_ / "tools/tool", "#!/usr/bin/env python3\n", 0755);
  WorkerCommand c = resolve_program(config(at("tools/tool")), {{"PATH", at("bin")}});
  EXPECT_EQ(c.argv, (Args{at("bin/python3"), "-u", at("tools/tool")}));
}

TEST_F(ConsoleScriptTest, UnversionedEnvShebangRunsWithTheWorkersPython) {
  // `#!/usr/bin/env python3` and pip's unbuilt `#!python` ask for "the" Python: the one ddprun
  // runs Python workers with (beside ddprun, an active env), as torchrun runs its own.
  fs::create_directories(root_ / "env/bin");
  write(root_ / "env/bin/python3", "#!/bin/sh\n", 0755);
  write(root_ / "tools/env-tool", "#!/usr/bin/env python3\n", 0755);
  write(root_ / "tools/bare-tool", "#!python\n", 0755);
  write(root_ / "tools/versioned-tool", "#!/usr/bin/env python3.11\n", 0755);
  write(root_ / "bin/python3.11", "#!/bin/sh\n", 0755);
  const Environ env{{"PATH", at("bin")}, {"VIRTUAL_ENV", at("venv")}};
  for (const char* tool : {"tools/env-tool", "tools/bare-tool"}) {
    SCOPED_TRACE(tool);
    WorkerCommand beside = resolve_program(config(at(tool)), env, at("env/bin"));
    EXPECT_EQ(beside.argv, (Args{at("env/bin/python3"), "-u", at(tool)}));
    ASSERT_TRUE(beside.python);
    EXPECT_NE(beside.python->reason.find("beside ddprun"), std::string::npos) << beside.python->reason;
    EXPECT_EQ(resolve_program(config(at(tool)), env).argv, (Args{at("venv/bin/python"), "-u", at(tool)}));
  }
  // A version asked for by name is the kernel's lookup on PATH.
  EXPECT_EQ(resolve_program(config(at("tools/versioned-tool")), env, at("env/bin")).argv,
            (Args{at("bin/python3.11"), "-u", at("tools/versioned-tool")}));
}

TEST_F(ConsoleScriptTest, OthersAreExecdAsToday) {
  struct Row {
    std::string name, text;
    mode_t mode;
  };
  const std::vector<Row> rows{
      {"bash-tool", "#!/bin/bash\necho\n", 0755},
      {"elf-tool", std::string("\x7f" "ELF\x02\x01\x01\0\0\0", 11), 0755},
      {"missing-interp", "#!/nonexistent/python3\n", 0755},  // the kernel's ENOENT, as today
      {"exec-only", "#!/usr/bin/python3\n", 0111},           // cannot be read: exec'd as today
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.name);
    write(root_ / "tools" / row.name, row.text, row.mode);
    if (row.mode == 0111 && ::geteuid() == 0) continue;  // root reads it anyway
    WorkerCommand c = resolve_program(config(at("tools") + "/" + row.name, {"a"}), {{"PATH", at("bin")}});
    EXPECT_EQ(c.executable, at("tools") + "/" + row.name);
    EXPECT_EQ(c.argv, (Args{at("tools") + "/" + row.name, "a"}));
    EXPECT_FALSE(c.python);
  }
}

TEST_F(ConsoleScriptTest, NoPythonExecsEvenAPythonShebang) {
  write(root_ / "tools/tool", "#!/usr/bin/env python3\n", 0755);
  LaunchConfig c = config(at("tools/tool"));
  c.no_python = true;
  EXPECT_EQ(resolve_program(c, {{"PATH", at("bin")}}).argv, (Args{at("tools/tool")}));
}

TEST_F(ConsoleScriptTest, PythonScriptsAndModulesNameTheirInterpreter) {
  write(root_ / "tools/t.py", "print(1)\n", 0644);
  LaunchConfig c;
  c.program = at("tools/t.py");
  WorkerCommand w = resolve_program(c, {{"PATH", at("bin")}, {"VIRTUAL_ENV", at("venv")}});
  ASSERT_TRUE(w.python);
  EXPECT_EQ(w.executable, at("venv/bin/python"));
  EXPECT_EQ(w.python->reason, "VIRTUAL_ENV=" + at("venv"));
}

TEST_F(ConsoleScriptTest, AppendLocalRankGoesRightAfterProgramAsTorchDistributedLaunch) {
  write(root_ / "tools/t.py", "print(1)\n", 0644);
  write(root_ / "tools/exe", "#!/bin/sh\n", 0755);
  const Environ env{{"PATH", at("bin")}};
  struct Row {
    ProgramMode mode;
    std::string program;
    LocalRankArg arg;
    Args expected;
  };
  const std::string py = at("bin/python3");
  const std::vector<Row> rows{
      {ProgramMode::python_script, at("tools/t.py"), LocalRankArg::underscore,
       {py, "-u", at("tools/t.py"), "--local_rank=${local_rank}", "--lr", "1"}},
      {ProgramMode::python_script, at("tools/t.py"), LocalRankArg::dash,
       {py, "-u", at("tools/t.py"), "--local-rank=${local_rank}", "--lr", "1"}},
      {ProgramMode::python_module, "pkg.train", LocalRankArg::underscore,
       {py, "-u", "-m", "pkg.train", "--local_rank=${local_rank}", "--lr", "1"}},
      {ProgramMode::executable, at("tools/exe"), LocalRankArg::underscore,
       {at("tools/exe"), "--local_rank=${local_rank}", "--lr", "1"}},
      {ProgramMode::python_script, at("tools/t.py"), LocalRankArg::off, {py, "-u", at("tools/t.py"), "--lr", "1"}},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.program);
    LaunchConfig c;
    c.mode = row.mode;
    c.program = row.program;
    c.program_args = {"--lr", "1"};
    c.append_local_rank = row.arg;
    WorkerCommand w = resolve_program(c, env);
    EXPECT_EQ(w.argv, row.expected);
    Args worker = substitute_local_rank(w.argv, 3);
    const char* expected = row.arg == LocalRankArg::underscore ? "--local_rank=3"
                           : row.arg == LocalRankArg::dash     ? "--local-rank=3"
                                                               : nullptr;
    if (expected != nullptr) {
      EXPECT_NE(std::find(worker.begin(), worker.end(), expected), worker.end());
    }
  }
}

TEST(SubstituteLocalRankAsTorchrun, TemplateSafeSubstitute) {
  // Each row: what Python's string.Template(arg).safe_substitute(local_rank="7") gives.
  struct Row {
    std::string in, out;
  };
  const std::vector<Row> rows{
      {"$local_rank", "7"},
      {"${local_rank}", "7"},
      {"--out=/ckpt/$local_rank/x", "--out=/ckpt/7/x"},
      {"r$local_rank-of-${local_rank}", "r7-of-7"},
      {"$local_rank.log", "7.log"},
      {"$local_rankx", "$local_rankx"},
      {"$local_rank_1", "$local_rank_1"},
      {"$LOCAL_RANK", "$LOCAL_RANK"},
      {"${LOCAL_RANK}", "${LOCAL_RANK}"},
      {"${rank}", "${rank}"},
      {"$rank", "$rank"},
      {"${local_rank", "${local_rank"},
      {"$$", "$"},
      {"$$local_rank", "$local_rank"},
      {"$$$local_rank", "$7"},
      {"a$", "a$"},
      {"$1", "$1"},
      {"${", "${"},
      {"$ {local_rank}", "$ {local_rank}"},
      {"", ""},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.in);
    EXPECT_EQ(substitute_local_rank({"prog$local_rank", row.in}, 7), (Args{"prog$local_rank", row.out}));
  }
}

}  // namespace
}  // namespace ddprun::launcher

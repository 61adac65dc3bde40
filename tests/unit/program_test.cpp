// resolve_program and substitute_local_rank, against files in a temporary folder.
#include "launcher/cli/program.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "launcher/base/errors.hpp"
#include "scratch_folder.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;
using Args = std::vector<std::string>;

/// A scratch folder: bin/python3 and bin/trainer (executable), work/train.py (readable),
/// work/data.txt (not executable), work/folder/.
class ProgramTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(bin());
    fs::create_directories(work() / "folder");
    write(bin() / "python3", "#!/bin/sh\n", 0755);
    write(bin() / "trainer", "#!/bin/sh\n", 0755);
    write(work() / "train.py", "print('hi')\n", 0644);
    write(work() / "data.txt", "x\n", 0644);
  }
  void write(const fs::path& p, const std::string& text, mode_t mode) const { scratch_.write(p, text, mode); }
  fs::path bin() const { return root_ / "bin"; }
  fs::path work() const { return root_ / "work"; }
  Environ env() const { return {{"PATH", bin().string()}}; }

  static LaunchConfig config(ProgramMode mode, std::string program, Args args = {}) {
    LaunchConfig c;
    c.mode = mode;
    c.program = std::move(program);
    c.program_args = std::move(args);
    return c;
  }

  static std::string usage_error(const LaunchConfig& c, const Environ& e) {
    try {
      resolve_program(c, e);
    } catch (const UsageError& error) {
      std::string message = error.what();
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
      return message;
    }
    ADD_FAILURE() << "expected UsageError for " << c.program;
    return {};
  }

  testing_support::ScratchFolder scratch_{"ddprun_program_test"};
  const fs::path& root_ = scratch_.root();
};

TEST_F(ProgramTest, PythonScriptRunsUnbufferedWithPython3FromPath) {
  std::string script = (work() / "train.py").string();
  auto command = resolve_program(config(ProgramMode::python_script, script, {"--lr", "0.1"}), env());
  std::string python = (bin() / "python3").string();
  EXPECT_EQ(command.executable, python);
  EXPECT_EQ(command.argv, (Args{python, "-u", script, "--lr", "0.1"}));
}

TEST_F(ProgramTest, PythonExecWins) {
  write(work() / "mypython", "#!/bin/sh\n", 0755);
  std::string python = (work() / "mypython").string();
  Environ e = env();
  e["PYTHON_EXEC"] = python;
  auto command = resolve_program(config(ProgramMode::python_script, (work() / "train.py").string()), e);
  EXPECT_EQ(command.executable, python);
  EXPECT_EQ(command.argv.at(0), python);
}

TEST_F(ProgramTest, PythonExecBareNameIsSearchedOnPath) {
  Environ e = env();
  e["PYTHON_EXEC"] = "trainer";  // any executable on PATH will do
  auto command = resolve_program(config(ProgramMode::python_module, "pkg.main"), e);
  EXPECT_EQ(command.executable, (bin() / "trainer").string());
}

TEST_F(ProgramTest, PythonExecMissingNamesTheVariable) {
  Environ e = env();
  e["PYTHON_EXEC"] = (work() / "nope").string();
  std::string message = usage_error(config(ProgramMode::python_script, (work() / "train.py").string()), e);
  EXPECT_EQ(message.rfind("PYTHON_EXEC", 0), 0U) << message;
}

TEST_F(ProgramTest, NoPython3OnPath) {
  Environ e{{"PATH", work().string()}};
  std::string message = usage_error(config(ProgramMode::python_script, (work() / "train.py").string()), e);
  EXPECT_NE(message.find("python3"), std::string::npos) << message;
  EXPECT_NE(message.find("PYTHON_EXEC"), std::string::npos) << message;
}

TEST_F(ProgramTest, Module) {
  auto command = resolve_program(config(ProgramMode::python_module, "pkg.train", {"-x"}), env());
  std::string python = (bin() / "python3").string();
  EXPECT_EQ(command.argv, (Args{python, "-u", "-m", "pkg.train", "-x"}));
}

TEST_F(ProgramTest, MissingScriptIsNamed) {
  std::string script = (work() / "missing.py").string();
  std::string message = usage_error(config(ProgramMode::python_script, script), env());
  EXPECT_NE(message.find(script), std::string::npos) << message;
}

TEST_F(ProgramTest, ExecutableByPathKeepsArgv0AsTyped) {
  std::string typed = (bin() / "." / "trainer").string();
  auto command = resolve_program(config(ProgramMode::executable, typed, {"${local_rank}"}), env());
  EXPECT_EQ(command.executable, (bin() / "trainer").string());
  EXPECT_EQ(command.argv, (Args{typed, "${local_rank}"}));
}

TEST_F(ProgramTest, ExecutableFoundOnPath) {
  auto command = resolve_program(config(ProgramMode::executable, "trainer", {"a"}), env());
  EXPECT_EQ(command.executable, (bin() / "trainer").string());
  EXPECT_EQ(command.argv, (Args{"trainer", "a"}));
}

TEST_F(ProgramTest, ExecutableNotOnPath) {
  std::string message = usage_error(config(ProgramMode::executable, "no_such_trainer_xyz"), env());
  EXPECT_NE(message.find("no_such_trainer_xyz"), std::string::npos) << message;
  EXPECT_NE(message.find("PATH"), std::string::npos) << message;
}

TEST_F(ProgramTest, MissingExecutable) {
  std::string message = usage_error(config(ProgramMode::executable, (work() / "gone").string()), env());
  EXPECT_NE(message.find("no such file"), std::string::npos) << message;
}

TEST_F(ProgramTest, NonExecutableFile) {
  std::string message = usage_error(config(ProgramMode::executable, (work() / "data.txt").string()), env());
  EXPECT_NE(message.find("data.txt"), std::string::npos) << message;
  EXPECT_NE(message.find("not executable"), std::string::npos) << message;
}

TEST_F(ProgramTest, FolderIsNotAProgram) {
  std::string message = usage_error(config(ProgramMode::executable, (work() / "folder").string()), env());
  EXPECT_NE(message.find("not a regular file"), std::string::npos) << message;
}

TEST_F(ProgramTest, FindProgramFallsBackToCurrentFolderForBareNames) {
  struct Cwd {
    fs::path saved = fs::current_path();
    ~Cwd() { fs::current_path(saved); }
  } restore;
  fs::current_path(bin());
  Environ elsewhere{{"PATH", work().string()}};
  EXPECT_FALSE(find_executable("trainer", elsewhere));
  ASSERT_TRUE(find_program("trainer", elsewhere));
  EXPECT_EQ(*find_program("trainer", elsewhere), bin() / "trainer");
  fs::current_path(work());
  EXPECT_FALSE(find_program("data.txt", elsewhere));  // python would open it; not an executable
}

TEST_F(ProgramTest, EmptyPathEntryMeansCurrentFolder) {
  struct Cwd {
    fs::path saved = fs::current_path();
    ~Cwd() { fs::current_path(saved); }
  } restore;
  fs::current_path(bin());
  EXPECT_EQ(find_executable("trainer", {{"PATH", "/nonexistent:"}}), bin() / "trainer");
}

TEST(SubstituteLocalRank, ReplacesEveryOccurrence) {
  Args argv{"train.py", "--out=/tmp/${local_rank}/x${local_rank}", "${local_rank}${local_rank}", "plain"};
  EXPECT_EQ(substitute_local_rank(argv, 3), (Args{"train.py", "--out=/tmp/3/x3", "33", "plain"}));
}

TEST(SubstituteLocalRank, LeavesOtherTextAlone) {
  Args argv{"prog", "${local_rank", "$local_rankx", "${rank}", "", "{local_rank}", "$", "a$", "$LOCAL_RANK"};
  EXPECT_EQ(substitute_local_rank(argv, 12), argv);
  EXPECT_TRUE(substitute_local_rank({}, 0).empty());
}

}  // namespace
}  // namespace ddprun::launcher

namespace ddprun::launcher {
namespace {

// --preload warms Python workers only, and only where Python will run ddprun's sitecustomize.
class PreloadProgramTest : public ProgramTest {};

TEST_F(PreloadProgramTest, PythonScriptsAndModulesMayBeWarmed) {
  LaunchConfig script = config(ProgramMode::python_script, (work() / "train.py").string());
  script.preload = {"torch"};
  EXPECT_NO_THROW(resolve_program(script, env()));
  LaunchConfig module = config(ProgramMode::python_module, "pkg.train");
  module.preload = {"torch"};
  EXPECT_NO_THROW(resolve_program(module, env()));
  // A #! line with options that leave site and PYTHONPATH alone.
  write(work() / "tool", "#!" + (bin() / "python3").string() + " -W error::SyntaxWarning\n", 0755);
  LaunchConfig tool = config(ProgramMode::executable, (work() / "tool").string());
  tool.preload = {"json"};
  EXPECT_NO_THROW(resolve_program(tool, env()));
}

TEST_F(PreloadProgramTest, ProgramsWithoutPythonAreAUsageError) {
  LaunchConfig trainer = config(ProgramMode::executable, "trainer");
  trainer.preload = {"torch"};
  EXPECT_EQ(usage_error(trainer, env()),
            "--preload needs Python workers, and \"trainer\" runs without Python (an executable, or --no-python)");
  LaunchConfig no_python = config(ProgramMode::executable, (work() / "train.py").string());
  no_python.no_python = true;
  no_python.preload = {"torch"};
  ::chmod((work() / "train.py").c_str(), 0755);
  EXPECT_NE(usage_error(no_python, env()).find("--preload needs Python workers"), std::string::npos);
}

TEST_F(PreloadProgramTest, InterpreterOptionsThatSkipSitecustomizeAreAUsageError) {
  for (const std::string option : {"-E", "-S", "-I", "-sE", "-u -E"}) {
    write(work() / "tool", "#!" + (bin() / "python3").string() + " " + option + "\n", 0755);
    LaunchConfig tool = config(ProgramMode::executable, (work() / "tool").string());
    tool.preload = {"json"};
    const std::string message = usage_error(tool, env());
    EXPECT_TRUE(message.starts_with("--preload cannot warm ")) << message;
    EXPECT_NE(message.find(option.substr(option.rfind('-')) + ": -"), std::string::npos) << message;
  }
  // `env -S` splits the line: each option its own word.
  write(work() / "tool", "#!/usr/bin/env -S python3 -u -I\n", 0755);
  LaunchConfig split = config(ProgramMode::executable, (work() / "tool").string());
  split.preload = {"json"};
  EXPECT_NE(usage_error(split, env()).find(" -I: -I keeps Python"), std::string::npos);
}

}  // namespace
}  // namespace ddprun::launcher

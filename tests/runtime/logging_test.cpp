// Rank-aware logging: the level rules as a pure function, then real processes (the logger is
// configured once per process) whose stderr is read back.
#include "ddprun/logging.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <map>
#include <cstdio>
#include <regex>
#include <string>
#include <string_view>

#include "ddprun/error.hpp"

namespace ddprun {
namespace {

using level_enum = LogLevel;

TEST(LogLevelFor, DefaultsRankZeroInfoOthersWarn) {
  EXPECT_EQ(log_level_for(0, nullptr, nullptr), level_enum::info);
  EXPECT_EQ(log_level_for(1, nullptr, nullptr), level_enum::warn);
  EXPECT_EQ(log_level_for(7, "", ""), level_enum::warn);
}

TEST(LogLevelFor, LevelAppliesToListedRanksAndNeverLoosensOthersPastWarn) {
  EXPECT_EQ(log_level_for(0, "debug", nullptr), level_enum::debug);
  EXPECT_EQ(log_level_for(1, "debug", nullptr), level_enum::warn);
  EXPECT_EQ(log_level_for(0, "TRACE", nullptr), level_enum::trace);
  EXPECT_EQ(log_level_for(0, "warning", nullptr), level_enum::warn);
  EXPECT_EQ(log_level_for(3, "error", nullptr), level_enum::error);  // stricter than warn: all ranks
  EXPECT_EQ(log_level_for(0, "off", nullptr), level_enum::off);
  EXPECT_EQ(log_level_for(5, "off", nullptr), level_enum::off);
  EXPECT_EQ(log_level_for(5, "critical", nullptr), level_enum::critical);
}

TEST(LogLevelFor, RanksList) {
  EXPECT_EQ(log_level_for(5, nullptr, "all"), level_enum::info);
  EXPECT_EQ(log_level_for(3, "debug", "0,3"), level_enum::debug);
  EXPECT_EQ(log_level_for(0, "debug", "3"), level_enum::warn);  // rank 0 is not special once listed
  EXPECT_EQ(log_level_for(6, nullptr, "0,5-7"), level_enum::info);
  EXPECT_EQ(log_level_for(8, nullptr, "0,5-7"), level_enum::warn);
}

TEST(LogLevelFor, MalformedValuesNameTheVariable) {
  for (const char* ranks : {"0,", "x", "1-", "3-1", "-1", "all,1", " 0"}) {
    try {
      log_level_for(0, nullptr, ranks);
      ADD_FAILURE() << ranks;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("DDPRUN_LOG_RANKS="), std::string::npos) << e.what();
    }
  }
  try {
    log_level_for(0, "verbose", nullptr);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("DDPRUN_LOG_LEVEL=verbose"), std::string::npos) << e.what();
  }
}

/// Runs `body` in a forked child with `env` added (and the launchers' rank variables removed);
/// returns what it wrote on stderr.
std::string stderr_of_child(const std::map<std::string, std::string>& env, const std::function<void()>& body) {
  int fds[2];
  if (::pipe(fds) != 0) {
    ADD_FAILURE() << "pipe";
    return {};
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID",
                             "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "PMI_RANK", "PMI_SIZE",
                             "DDPRUN_LOG_LEVEL", "DDPRUN_LOG_RANKS", "CLICOLOR_FORCE", "NO_COLOR"}) {
      ::unsetenv(name);
    }
    for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
    body();
    std::fflush(stderr);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string output;
  char buffer[4096];
  for (ssize_t got; (got = ::read(fds[0], buffer, sizeof buffer)) > 0;) output.append(buffer, static_cast<std::size_t>(got));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return output;
}

void log_every_level() {
  log().debug("debug line");
  log().infof("info line %d", 42);
  log().warn("warn line");
  log().error("error line");
}

TEST(Log, RankZeroByDefaultLogsInfoWithTheRankInThePrefix) {
  std::string out = stderr_of_child({{"RANK", "0"}, {"WORLD_SIZE", "4"}}, log_every_level);
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(^\[rank 0\] \[I \d\d:\d\d:\d\d\.\d\d\d\] info line 42\n)")))
      << out;
  EXPECT_NE(out.find("[rank 0] [W "), std::string::npos) << out;
  EXPECT_NE(out.find("] error line\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("debug line"), std::string::npos) << out;
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << "no colors on a pipe: " << out;
}

TEST(Log, OtherRanksWarnAndAbove) {
  std::string out = stderr_of_child({{"RANK", "3"}, {"WORLD_SIZE", "4"}}, log_every_level);
  EXPECT_EQ(out.find("info line"), std::string::npos) << out;
  EXPECT_NE(out.find("[rank 3] [W "), std::string::npos) << out;
  EXPECT_NE(out.find("[rank 3] [E "), std::string::npos) << out;
}

TEST(Log, EnvironmentSelectsLevelAndRanks) {
  std::string out = stderr_of_child(
      {{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"DDPRUN_LOG_LEVEL", "debug"}, {"DDPRUN_LOG_RANKS", "0,3"}}, log_every_level);
  EXPECT_NE(out.find("[rank 3] [D "), std::string::npos) << out;
  EXPECT_NE(out.find("info line 42"), std::string::npos) << out;

  out = stderr_of_child({{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"DDPRUN_LOG_LEVEL", "off"}}, log_every_level);
  EXPECT_EQ(out, "");
}

TEST(Log, MalformedSettingIsReportedOnceAndDefaultsApply) {
  std::string out = stderr_of_child({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"DDPRUN_LOG_RANKS", "zero"}}, log_every_level);
  EXPECT_NE(out.find("DDPRUN_LOG_RANKS=zero is malformed"), std::string::npos) << out;
  EXPECT_NE(out.find("info line 42"), std::string::npos) << out;
}

TEST(Log, ConfigureLoggingSetsTheRank) {
  std::string out = stderr_of_child({}, [] {
    configure_logging(5);
    log().warn("from five");
    log().info("hidden");
    configure_logging(0);
    log().info("from zero");
  });
  EXPECT_NE(out.find("[rank 5] [W "), std::string::npos) << out;
  EXPECT_EQ(out.find("hidden"), std::string::npos) << out;
  EXPECT_NE(out.find("[rank 0] [I "), std::string::npos) << out;
}

TEST(Log, LevelAndEnabledFollowTheRank) {
  std::string out = stderr_of_child({{"RANK", "3"}, {"WORLD_SIZE", "4"}}, [] {
    std::fprintf(stderr, "level %d info %d warn %d off %d\n", static_cast<int>(log().level()),
                 log().enabled(LogLevel::info), log().enabled(LogLevel::warn), log().enabled(LogLevel::off));
  });
  EXPECT_EQ(out, "level 3 info 0 warn 1 off 0\n");
}

TEST(Log, PrintfFormsWriteLongMessagesWhole) {
  std::string out = stderr_of_child({{"RANK", "0"}, {"WORLD_SIZE", "1"}}, [] {
    const std::string long_text(3000, 'x');
    log().warnf("%s|%05.1f|%s", "head", 2.5, long_text.c_str());
    log().logf(LogLevel::error, "level given: %d", 7);
    log().log(LogLevel::info, std::string_view("a view, not a string"));
  });
  EXPECT_NE(out.find("] head|002.5|" + std::string(3000, 'x') + "\n"), std::string::npos) << out.substr(0, 200);
  EXPECT_NE(out.find("[E "), std::string::npos) << out.substr(0, 200);
  EXPECT_NE(out.find("] level given: 7\n"), std::string::npos) << out;
  EXPECT_NE(out.find("] a view, not a string\n"), std::string::npos) << out;
}

TEST(Log, ColorsWhenForced) {
  std::string out = stderr_of_child({{"CLICOLOR_FORCE", "1"}}, [] { log().info("colored"); });
  EXPECT_NE(out.find('\x1b'), std::string::npos) << out;
  out = stderr_of_child({{"CLICOLOR_FORCE", "1"}, {"NO_COLOR", "1"}}, [] { log().info("plain"); });
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
}

}  // namespace
}  // namespace ddprun

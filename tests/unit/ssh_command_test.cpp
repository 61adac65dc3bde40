// What the launching ddprun hands to ssh, by table: the quoting (checked by running /bin/sh on
// every byte 1..255), the ssh argv, the remote command, the exported environment, the pre-flight's
// verdicts.
#include "launcher/fleet/ssh_command.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>

#include "launcher/base/errors.hpp"

namespace ddprun::launcher {
namespace {

using Argv = std::vector<std::string>;

TEST(ShellQuote, Table) {
  struct Row {
    std::string word, quoted;
  };
  const std::vector<Row> rows{
      {"plain", "plain"},
      {"/a/b-c_d.py", "/a/b-c_d.py"},
      {"--nproc-per-node=2", "--nproc-per-node=2"},
      {"", "''"},
      {"two words", "'two words'"},
      {"it's", "'it'\\''s'"},
      {"$HOME", "'$HOME'"},
      {"a\nb", "'a\nb'"},
      {"`x`;|&<>*?!~#", "'`x`;|&<>*?!~#'"},
  };
  for (const auto& row : rows) EXPECT_EQ(shell_quote(row.word), row.quoted) << row.word;
}

/// What /bin/sh makes of `printf %s QUOTED`: the word back, if the quoting holds.
std::string through_shell(const std::string& word) {
  std::string command = "printf %s " + shell_quote(word);
  FILE* pipe = ::popen(command.c_str(), "r");
  std::string out;
  std::array<char, 4096> buffer{};
  while (std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe)) out.append(buffer.data(), n);
  ::pclose(pipe);
  return out;
}

TEST(ShellQuote, EveryByteSurvivesTheShell) {
  std::string all;
  for (int c = 1; c < 256; ++c) all += static_cast<char>(c);
  EXPECT_EQ(through_shell(all), all);
  for (std::string word : {"'", "''", "\\'", "a'b'c", " leading", "trailing\n", "-n", "%s%d"}) {
    EXPECT_EQ(through_shell(word), word) << word;
  }
}

TEST(SshArgv, UserOptionsFirstThenOurs) {
  SshSettings settings;
  settings.port = 2222;
  settings.options = {"StrictHostKeyChecking=no", "IdentityFile=/k/id"};
  settings.connect_timeout_s = 5;
  settings.alive_timeout_s = 9;
  EXPECT_EQ(ssh_argv(settings, "u@[fd00::1]", "true"),
            (Argv{"ssh", "-o", "StrictHostKeyChecking=no", "-o", "IdentityFile=/k/id", "-o", "BatchMode=yes", "-o",
                  "ConnectTimeout=5", "-o", "ServerAliveInterval=3", "-o", "ServerAliveCountMax=3", "-p", "2222", "-T",
                  "--", "u@fd00::1", "true"}));
  EXPECT_EQ(ssh_argv(SshSettings{}, "h", "x"),
            (Argv{"ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=3", "-o",
                  "ServerAliveCountMax=3", "-T", "--", "h", "x"}));
}

TEST(RemoteCommand, CdEnvExec) {
  RemoteCommand command{"/work/my job", {{"PATH", "/usr/bin:/bin"}, {"X", "it's"}}, {"/opt/ddprun", "--nnodes=2", "--", "train.py", "a b"}};
  EXPECT_EQ(remote_shell_command(command),
            "cd '/work/my job' && exec env PATH=/usr/bin:/bin 'X=it'\\''s' /opt/ddprun --nnodes=2 -- train.py 'a b'");
}

TEST(RemoteCommand, RunsAsGivenThroughTheShell) {
  // The remote command through a real sh: the arguments arrive byte for byte.
  std::string odd = "sp ace 'q' \"d\" $V `c` \\ \n;";
  RemoteCommand command{"/", {{"V", odd}}, {"/bin/sh", "-c", "printf '%s|%s|%s' \"$V\" \"$0\" \"$1\"", odd, "-x"}};
  FILE* pipe = ::popen(remote_shell_command(command).c_str(), "r");
  std::string out;
  std::array<char, 4096> buffer{};
  while (std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe)) out.append(buffer.data(), n);
  ::pclose(pipe);
  EXPECT_EQ(out, odd + "|" + odd + "|-x");
}

TEST(ExportedEnvironment, DefaultsThenNamedOnceEach) {
  const Environ env{{"PATH", "/p"}, {"VIRTUAL_ENV", "/v"}, {"NCCL_DEBUG", "INFO"}, {"HOME", "/root"}};
  using Pairs = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(exported_environment(env, {}), (Pairs{{"PATH", "/p"}, {"VIRTUAL_ENV", "/v"}}));
  EXPECT_EQ(exported_environment(env, {"NCCL_DEBUG", "PATH", "UNSET"}),
            (Pairs{{"PATH", "/p"}, {"VIRTUAL_ENV", "/v"}, {"NCCL_DEBUG", "INFO"}}));
}

TEST(ExportedEnvironment, PetVariablesButTheFleetsOwn) {
  const Environ env{{"PATH", "/p"},         {"PET_NPROC_PER_NODE", "4"}, {"PET_HOSTFILE", "h"}, {"PET_HOSTS", "a,b"},
                    {"PET_SSH_OPTION", "A=b"}, {"PET_MAX_RESTARTS", "2"}, {"PETS", "cat"}};
  using Pairs = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(exported_environment(env, {"PET_MAX_RESTARTS"}),
            (Pairs{{"PATH", "/p"}, {"PET_MAX_RESTARTS", "2"}, {"PET_NPROC_PER_NODE", "4"}}));
}

TEST(ExportNames, Table) {
  EXPECT_EQ(parse_export_names("A,B_2, _C", "--env-export"), (Argv{"A", "B_2", "_C"}));
  EXPECT_EQ(parse_export_names("", "--env-export"), Argv{});
  for (std::string bad : {"2X", "A-B", "A=1", "A B"}) EXPECT_THROW(parse_export_names(bad, "--env-export"), UsageError) << bad;
}

TEST(Preflight, Verdicts) {
  const std::string cwd = "/w", bin = "/b/ddprun";
  EXPECT_EQ(preflight_verdict(0, "warning: added key\n", cwd, bin), "");
  EXPECT_EQ(preflight_verdict(255, "ssh: connect to host h port 22: Connection refused\r\n", cwd, bin),
            "unreachable: ssh: connect to host h port 22: Connection refused");
  EXPECT_EQ(preflight_verdict(255, "", cwd, bin), "unreachable");
  EXPECT_EQ(preflight_verdict(kPreflightNoFolder, "", cwd, bin), "has no folder /w (the job runs in the launching folder)");
  EXPECT_EQ(preflight_verdict(kPreflightNoProgram, "", cwd, bin),
            "has no executable /b/ddprun (ddprun must be at the same path on every host)");
  EXPECT_EQ(preflight_verdict(127, "sh: 1: x: not found\n", cwd, bin), "pre-flight failed (exit 127): sh: 1: x: not found");
}

/// What /bin/sh does with `command`'s gated form, `input` on its stdin: its exit status and stdout.
std::pair<int, std::string> gated(const RemoteCommand& command, const std::string& input) {
  std::string line = "printf '" + input + "' | { " + gated_remote_command(command) + "; } 2>/dev/null";
  FILE* pipe = ::popen(line.c_str(), "r");
  std::string out;
  std::array<char, 4096> buffer{};
  while (std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe)) out.append(buffer.data(), n);
  int status = ::pclose(pipe);
  return {WEXITSTATUS(status), out};
}

TEST(GatedCommand, ChecksThenWaitsForGoThenRuns) {
  RemoteCommand command{"/work/my job", {{"A", "it's"}}, {"/opt/ddprun", "--", "x"}};
  EXPECT_EQ(gated_remote_command(command),
            "cd '/work/my job' || exit 3; test -x /opt/ddprun || exit 4; echo ddprun-ssh-ready; IFS= read -r go || exit 0; "
            "case $go in 'go '*) DDPRUN_STORE_TOKEN=${go#go }; export DDPRUN_STORE_TOKEN; unset DDPRUN_STORE_TOKEN_FILE;; "
            "esac; exec env 'A=it'\\''s' /opt/ddprun -- x");
  // Through a real sh: the checks' statuses, the ready line, nothing run without a go line, and
  // the keep-alive bytes after the go left unread for the program.
  const RemoteCommand cat{"/", {{"V", "v"}}, {"/bin/sh", "-c", "printf '%s:' \"$V\"; cat"}};
  EXPECT_EQ(gated({"/nonexistent/dir", {}, {"/bin/sh"}}, ""), std::make_pair(kPreflightNoFolder, std::string()));
  EXPECT_EQ(gated({"/", {}, {"/nonexistent/ddprun"}}, ""), std::make_pair(kPreflightNoProgram, std::string()));
  EXPECT_EQ(gated(cat, ""), std::make_pair(0, std::string("ddprun-ssh-ready\n")));
  EXPECT_EQ(gated(cat, "go\\n\\n\\n"), std::make_pair(0, std::string("ddprun-ssh-ready\nv:\n\n")));
}

TEST(GatedCommand, TheGoLineCarriesTheStoreTokenIntoTheEnvironmentOnly) {
  EXPECT_EQ(go_line(std::nullopt), "go\n");
  EXPECT_EQ(go_line(std::string(" s3cret\\x ")), "go  s3cret\\x \n");
  EXPECT_THROW(go_line(std::string("a\nb")), UsageError);
  // The program sees the token exactly (spaces, backslashes), and a token file the host's login
  // set is dropped (both set is an error to ddprun).
  const RemoteCommand show{"/", {}, {"/bin/sh", "-c", "printf '[%s][%s]' \"$DDPRUN_STORE_TOKEN\" \"${DDPRUN_STORE_TOKEN_FILE-unset}\""}};
  EXPECT_EQ(gated(show, "go  s3cret\\\\x \\n"), std::make_pair(0, std::string("ddprun-ssh-ready\n[ s3cret\\x ][unset]")));
  EXPECT_EQ(gated(show, "go\\n"), std::make_pair(0, std::string("ddprun-ssh-ready\n[][unset]")));
  // Never exported on the command line, even when named.
  const Environ env{{"DDPRUN_STORE_TOKEN", "t"}, {"DDPRUN_STORE_TOKEN_FILE", "/f"}, {"PATH", "/bin"}};
  const auto exported = exported_environment(env, {"DDPRUN_STORE_TOKEN", "DDPRUN_STORE_TOKEN_FILE"});
  EXPECT_EQ(exported, (std::vector<std::pair<std::string, std::string>>{{"PATH", "/bin"}}));
}

}  // namespace
}  // namespace ddprun::launcher

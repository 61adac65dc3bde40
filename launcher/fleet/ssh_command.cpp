#include "launcher/fleet/ssh_command.hpp"

#include <algorithm>
#include <cctype>
#include <set>

#include "launcher/base/errors.hpp"
#include "launcher/fleet/hostfile.hpp"
#include "launcher/base/text.hpp"

namespace ddprun::launcher {
namespace {

bool safe_in_shell(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("_-./=:@%+,").find(c) != std::string_view::npos;
}

bool is_variable_name(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name.front()))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

}  // namespace

std::string shell_quote(std::string_view word) {
  if (!word.empty() && std::all_of(word.begin(), word.end(), safe_in_shell)) return std::string(word);
  std::string quoted = "'";
  for (char c : word) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  quoted += '\'';
  return quoted;
}

std::string ssh_destination(std::string_view destination) {
  std::string user;
  if (auto at = destination.rfind('@'); at != std::string_view::npos) user = std::string(destination.substr(0, at + 1));
  return user + host_address(destination);
}

std::vector<std::string> ssh_argv(const SshSettings& settings, std::string_view destination,
                                  const std::string& remote_command) {
  std::vector<std::string> argv{"ssh"};
  for (const auto& option : settings.options) {
    argv.push_back("-o");
    argv.push_back(option);
  }
  // ServerAliveCountMax probes, one every interval: silence for about alive_timeout_s ends ssh.
  const int interval = std::max(1, settings.alive_timeout_s / 3);
  for (std::string option : {std::string("BatchMode=yes"), "ConnectTimeout=" + std::to_string(settings.connect_timeout_s),
                             "ServerAliveInterval=" + std::to_string(interval), std::string("ServerAliveCountMax=3")}) {
    argv.push_back("-o");
    argv.push_back(std::move(option));
  }
  if (settings.port != 0) {
    argv.push_back("-p");
    argv.push_back(std::to_string(settings.port));
  }
  argv.push_back("-T");
  argv.push_back("--");
  argv.push_back(ssh_destination(destination));
  argv.push_back(remote_command);
  return argv;
}

std::string remote_shell_command(const RemoteCommand& command) {
  std::string text = "cd " + shell_quote(command.cwd) + " && exec env";
  for (const auto& [name, value] : command.env) text += " " + shell_quote(name + "=" + value);
  for (const auto& word : command.argv) text += " " + shell_quote(word);
  return text;
}

std::vector<std::pair<std::string, std::string>> exported_environment(const Environ& env,
                                                                      const std::vector<std::string>& names) {
  std::vector<std::string> all(std::begin(kDefaultExports), std::end(kDefaultExports));
  all.insert(all.end(), names.begin(), names.end());
  std::set<std::string> seen;
  std::vector<std::pair<std::string, std::string>> exported;
  // The store token goes on the go line (go_line): on a command line it would show in ps.
  seen.insert("DDPRUN_STORE_TOKEN");
  seen.insert("DDPRUN_STORE_TOKEN_FILE");
  for (const auto& name : all) {
    if (!seen.insert(name).second) continue;
    if (auto value = lookup(env, name)) exported.emplace_back(name, *value);
  }
  static const std::set<std::string> fleet_only{"PET_HOSTFILE", "PET_HOSTS",      "PET_INCLUDE",   "PET_EXCLUDE",
                                                "PET_SSH_PORT", "PET_SSH_OPTION", "PET_ENV_EXPORT"};
  for (const auto& [name, value] : env) {  // a std::map: in name order
    if (name.starts_with("PET_") && !fleet_only.contains(name) && seen.insert(name).second) exported.emplace_back(name, value);
  }
  return exported;
}

std::vector<std::string> parse_export_names(std::string_view text, std::string_view label) {
  std::vector<std::string> names;
  for (std::string_view name : split(text, ',')) {
    name = trim(name);
    if (name.empty()) continue;
    if (!is_variable_name(name)) {
      throw UsageError(std::string(label) + ": \"" + std::string(name) +
                       "\" is not an environment variable name (letters, digits, '_')");
    }
    names.emplace_back(name);
  }
  return names;
}

std::string gated_remote_command(const RemoteCommand& command) {
  // IFS= and -r: the go line's token arrives as written (no trimming, no backslash escapes); it is
  // exported by the shell itself, so it never appears in an argv (ps).
  std::string text = "cd " + shell_quote(command.cwd) + " || exit " + std::to_string(kPreflightNoFolder) + "; test -x " +
                     shell_quote(command.argv.at(0)) + " || exit " + std::to_string(kPreflightNoProgram) + "; echo " +
                     std::string(kReadyLine) +
                     "; IFS= read -r go || exit 0; case $go in 'go '*) DDPRUN_STORE_TOKEN=${go#go }; export "
                     "DDPRUN_STORE_TOKEN; unset DDPRUN_STORE_TOKEN_FILE;; esac; exec env";
  for (const auto& [name, value] : command.env) text += " " + shell_quote(name + "=" + value);
  for (const auto& word : command.argv) text += " " + shell_quote(word);
  return text;
}

std::string go_line(const std::optional<std::string>& store_token) {
  if (!store_token) return "go\n";
  if (store_token->find_first_of("\n\r") != std::string::npos || store_token->find('\0') != std::string::npos) {
    throw UsageError("the store token (DDPRUN_STORE_TOKEN or DDPRUN_STORE_TOKEN_FILE) holds a line break or a NUL "
                     "byte: it cannot be sent to the hosts over ssh");
  }
  return "go " + *store_token + "\n";
}

std::string preflight_verdict(int status, std::string_view ssh_stderr, const std::string& cwd,
                              const std::string& program) {
  if (status == 0) return {};
  if (status == kPreflightNoFolder) return "has no folder " + cwd + " (the job runs in the launching folder)";
  if (status == kPreflightNoProgram) return "has no executable " + program + " (ddprun must be at the same path on every host)";
  // The last line ssh printed says why (connection refused, timed out, permission denied).
  std::string last;
  for (std::string_view line : split(ssh_stderr, '\n')) {
    line = trim(line);
    if (!line.empty()) last = std::string(line);
  }
  std::string why = status == 255 ? "unreachable" : "pre-flight failed (exit " + std::to_string(status) + ")";
  return last.empty() ? why : why + ": " + last;
}

}  // namespace ddprun::launcher

#include "program.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <system_error>

#include "cli.hpp"
#include "errors.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;

/// "/x/./y" -> "/x/y" for readable paths; ".." is kept because it may cross a symlink.
fs::path absolute_path(const fs::path& p) {
  fs::path abs = fs::absolute(p);
  for (const auto& part : abs) {
    if (part == "..") return abs;
  }
  return abs.lexically_normal();
}

bool is_executable_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

/// One line for a program that cannot be exec'd, with the reason the kernel would give.
std::string why_not_executable(const fs::path& p) {
  std::error_code ec;
  if (!fs::exists(p, ec)) return "no such file";
  if (!fs::is_regular_file(p, ec)) return "not a regular file";
  if (::access(p.c_str(), X_OK) != 0) return std::string("not executable (") + std::strerror(errno) + ")";
  return "not executable";
}

fs::path python_interpreter(const Environ& env, const std::string& program) {
  if (auto exec = lookup(env, "PYTHON_EXEC"); exec && !exec->empty()) {
    if (auto found = find_executable(*exec, env)) return *found;
    std::string why = exec->find('/') == std::string::npos ? "not found on PATH" : why_not_executable(*exec);
    throw UsageError("PYTHON_EXEC: " + quote_for_message(*exec) + " is " + (why == "no such file" ? "missing" : why) +
                     " (the interpreter that would run " + quote_for_message(program) + ")");
  }
  if (auto found = find_executable("python3", env)) return *found;
  throw UsageError("PROGRAM " + quote_for_message(program) +
                   ": python3 is not on PATH (set PYTHON_EXEC, or use --no-python for a program that is "
                   "not Python)");
}

}  // namespace

std::optional<fs::path> find_executable(const std::string& name, const Environ& env) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string::npos) {
    if (is_executable_file(name)) return absolute_path(name);
    return std::nullopt;
  }
  std::string path = lookup(env, "PATH").value_or("/usr/local/bin:/usr/bin:/bin");
  std::string_view rest = path;
  while (true) {
    auto colon = rest.find(':');
    std::string_view dir = rest.substr(0, colon);
    fs::path candidate = (dir.empty() ? fs::path(".") : fs::path(dir)) / name;  // empty entry = cwd, as execvp
    if (is_executable_file(candidate)) return absolute_path(candidate);
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return std::nullopt;
}

std::optional<fs::path> find_program(const std::string& program, const Environ& env) {
  if (auto found = find_executable(program, env)) return found;
  if (!program.empty() && program.find('/') == std::string::npos && is_executable_file(program)) {
    return absolute_path(program);
  }
  return std::nullopt;
}

WorkerCommand resolve_program(const LaunchConfig& config, const Environ& env) {
  WorkerCommand command;
  if (config.program.empty()) throw UsageError("PROGRAM: missing; usage: ddprun [options] PROGRAM [ARGS...]");
  if (config.mode == ProgramMode::executable) {
    auto found = find_program(config.program, env);
    if (!found) {
      std::string why =
          config.program.find('/') == std::string::npos ? "not found on PATH" : why_not_executable(config.program);
      throw UsageError("PROGRAM " + quote_for_message(config.program) + ": " + why);
    }
    command.executable = found->string();
    command.argv.push_back(config.program);
  } else {
    if (config.mode == ProgramMode::python_script && ::access(config.program.c_str(), R_OK) != 0) {
      throw UsageError("PROGRAM " + quote_for_message(config.program) + ": cannot be read (" + std::strerror(errno) + ")");
    }
    fs::path python = python_interpreter(env, config.program);
    command.executable = python.string();
    command.argv = {python.string(), "-u"};
    if (config.mode == ProgramMode::python_module) command.argv.push_back("-m");
    command.argv.push_back(config.program);
  }
  command.argv.insert(command.argv.end(), config.program_args.begin(), config.program_args.end());
  return command;
}

std::vector<std::string> substitute_local_rank(const std::vector<std::string>& argv, int local_rank) {
  static constexpr std::string_view placeholder = "${local_rank}";
  const std::string rank = std::to_string(local_rank);
  std::vector<std::string> out;
  out.reserve(argv.size());
  for (const auto& arg : argv) {
    std::string replaced;
    std::size_t from = 0;
    for (auto at = arg.find(placeholder); at != std::string::npos; at = arg.find(placeholder, from)) {
      replaced.append(arg, from, at - from).append(rank);
      from = at + placeholder.size();
    }
    replaced.append(arg, from, std::string::npos);
    out.push_back(std::move(replaced));
  }
  return out;
}

}  // namespace ddprun::launcher

#include "launcher/cli/program.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <system_error>

#include "launcher/cli/cli_values.hpp"  // quote_for_message
#include "launcher/base/errors.hpp"

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

/// The file name of a Python interpreter: python, python3, python3.11, pypy3.
bool is_python_name(std::string_view path) {
  auto slash = path.rfind('/');
  std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  for (std::string_view stem : {"python", "pypy"}) {
    if (!name.starts_with(stem)) continue;
    std::string_view rest = name.substr(stem.size());
    return std::all_of(rest.begin(), rest.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
  }
  return false;
}

std::vector<std::string> split_blanks(std::string_view text) {
  std::vector<std::string> words;
  std::size_t at = 0;
  while (true) {
    at = text.find_first_not_of(" \t", at);
    if (at == std::string_view::npos) return words;
    auto end = text.find_first_of(" \t", at);
    words.emplace_back(text.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at));
    if (end == std::string_view::npos) return words;
    at = end;
  }
}

std::string_view trim_blanks(std::string_view text) {
  auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

/// pip's (distlib's) second line for an interpreter path too long or odd for a #! line:
/// `'''exec' "/x/bin/python" "$0" "$@"` (the quotes around the path only when it needs them).
std::optional<PythonShebang> parse_trampoline(std::string_view line) {
  constexpr std::string_view lead = "'''exec' ";
  if (!line.starts_with(lead)) return std::nullopt;
  line.remove_prefix(lead.size());
  std::string_view path;
  if (line.starts_with('"')) {
    auto close = line.find('"', 1);
    if (close == std::string_view::npos) return std::nullopt;
    path = line.substr(1, close - 1);
  } else {
    path = line.substr(0, line.find(' '));
  }
  if (path.empty() || !is_python_name(path)) return std::nullopt;
  return PythonShebang{std::string(path), {}};
}

/// Reads at most kShebangBytes of `file`; nothing when it cannot be read.
std::optional<std::string> read_head(const fs::path& file) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  std::string head(kShebangBytes, '\0');
  std::size_t got = 0;
  while (got < head.size()) {
    ssize_t n = ::read(fd, head.data() + got, head.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  head.resize(got);
  return head;
}

}  // namespace

std::string describe_python(const PythonChoice& choice) {
  return choice.interpreter.string() + " (" + choice.reason + ")";
}

PythonChoice choose_python(const Environ& env, const std::string& program, const fs::path& launcher_dir) {
  const std::string for_what =
      program.empty() ? "" : " (the interpreter that would run " + quote_for_message(program) + ")";
  if (auto exec = lookup(env, "PYTHON_EXEC"); exec && !exec->empty()) {
    if (auto found = find_executable(*exec, env)) return {*found, "PYTHON_EXEC"};
    std::string why = exec->find('/') == std::string::npos ? "not found on PATH" : why_not_executable(*exec);
    throw UsageError("PYTHON_EXEC: " + quote_for_message(*exec) + " is " + (why == "no such file" ? "missing" : why) +
                     for_what);
  }
  if (!launcher_dir.empty()) {
    for (const char* name : {"python3", "python"}) {
      fs::path candidate = launcher_dir / name;
      if (is_executable_file(candidate)) return {absolute_path(candidate), "beside ddprun in " + launcher_dir.string()};
    }
  }
  std::string skipped;  // environments that were active but had no interpreter: said in the reason
  for (const char* variable : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
    auto prefix = lookup(env, variable);
    if (!prefix || prefix->empty()) continue;
    std::string reason = std::string(variable) + "=" + *prefix;
    fs::path candidate = fs::path(*prefix) / "bin" / "python";
    if (is_executable_file(candidate)) return {absolute_path(candidate), reason + skipped};
    skipped += "; " + reason + " has no bin/python";
  }
  if (auto found = find_executable("python3", env)) return {*found, "python3 on PATH" + skipped};
  throw UsageError("PROGRAM " + quote_for_message(program) +
                   ": python3 is not on PATH (set PYTHON_EXEC, or use --no-python for a program that is "
                   "not Python)");
}

std::optional<PythonShebang> parse_python_shebang(std::string_view head) {
  if (!head.starts_with("#!")) return std::nullopt;  // ELF ("\x7f" "ELF"), plain text, ...
  auto newline = head.find('\n');
  if (newline == std::string_view::npos) return std::nullopt;  // too long to be sure of
  std::string_view line = trim_blanks(head.substr(2, newline - 2));
  auto blank = line.find_first_of(" \t");
  std::string_view interpreter = line.substr(0, blank);
  std::string_view rest = blank == std::string_view::npos ? std::string_view() : trim_blanks(line.substr(blank));
  if (interpreter == "/bin/sh" && rest.empty()) {
    std::string_view second = head.substr(newline + 1);
    auto end = second.find('\n');
    if (end == std::string_view::npos) return std::nullopt;
    return parse_trampoline(second.substr(0, end));
  }
  if (interpreter.ends_with("/env") || interpreter == "env") {
    // The kernel hands env the rest of the line as one word: only `env -S` splits it.
    std::vector<std::string> words = split_blanks(rest);
    if (words.size() > 1 && words.front() == "-S") {
      words.erase(words.begin());
    } else if (words.size() != 1) {
      return std::nullopt;  // env would look for a program named "python3 -E": let it fail as it does
    }
    if (!is_python_name(words.front())) return std::nullopt;
    PythonShebang shebang{words.front(), {}};
    shebang.args.assign(words.begin() + 1, words.end());
    return shebang;
  }
  if (!is_python_name(interpreter)) return std::nullopt;
  PythonShebang shebang{std::string(interpreter), {}};
  if (!rest.empty()) shebang.args.emplace_back(rest);
  return shebang;
}

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

WorkerCommand resolve_program(const LaunchConfig& config, const Environ& env, const fs::path& launcher_dir) {
  WorkerCommand command;
  if (config.program.empty()) throw UsageError("PROGRAM: missing; usage: ddprun [options] PROGRAM [ARGS...]");
  std::vector<std::string> interpreter_options;  // a Python #! line's, before "-u PROGRAM"
  std::vector<std::string> local_rank_arg;  // torch.distributed.launch's, right after PROGRAM
  if (config.append_local_rank == LocalRankArg::underscore) local_rank_arg = {"--local_rank=${local_rank}"};
  if (config.append_local_rank == LocalRankArg::dash) local_rank_arg = {"--local-rank=${local_rank}"};
  if (config.mode == ProgramMode::executable) {
    auto found = find_program(config.program, env);
    if (!found) {
      std::string why =
          config.program.find('/') == std::string::npos ? "not found on PATH" : why_not_executable(config.program);
      throw UsageError("PROGRAM " + quote_for_message(config.program) + ": " + why);
    }
    std::optional<PythonShebang> shebang;
    if (!config.no_python) {
      if (auto head = read_head(*found)) shebang = parse_python_shebang(*head);
    }
    // "python3" or "python" with no folder asks for whichever Python this is run with: PYTHON.
    // An interpreter that cannot be found is left to the kernel, which fails the way it always has.
    std::optional<PythonChoice> interpreter;
    if (shebang && (shebang->interpreter == "python3" || shebang->interpreter == "python")) {
      PythonChoice python = choose_python(env, config.program, launcher_dir);
      python.reason = "the #! line of " + found->string() + " names " + shebang->interpreter + ": " + python.reason;
      interpreter = std::move(python);
    } else if (shebang) {
      if (auto path = find_executable(shebang->interpreter, env)) {
        interpreter = PythonChoice{*path, "the #! line of " + found->string()};
      }
    }
    if (interpreter) {
      // The path Python opens: as typed, or where PATH found it (what the kernel would pass).
      std::string script = config.program.find('/') == std::string::npos ? found->string() : config.program;
      command.executable = interpreter->interpreter.string();
      command.argv.push_back(interpreter->interpreter.string());
      command.argv.insert(command.argv.end(), shebang->args.begin(), shebang->args.end());
      interpreter_options = shebang->args;
      command.argv.push_back("-u");
      command.argv.push_back(script);
      command.python = std::move(interpreter);
    } else {
      command.executable = found->string();
      command.argv.push_back(config.program);
    }
  } else {
    if (config.mode == ProgramMode::python_script && ::access(config.program.c_str(), R_OK) != 0) {
      throw UsageError("PROGRAM " + quote_for_message(config.program) + ": cannot be read (" + std::strerror(errno) + ")");
    }
    PythonChoice python = choose_python(env, config.program, launcher_dir);
    command.executable = python.interpreter.string();
    command.argv = {python.interpreter.string(), "-u"};
    if (config.mode == ProgramMode::python_module) command.argv.push_back("-m");
    command.argv.push_back(config.program);
    command.python = std::move(python);
  }
  command.argv.insert(command.argv.end(), local_rank_arg.begin(), local_rank_arg.end());
  command.argv.insert(command.argv.end(), config.program_args.begin(), config.program_args.end());
  if (!config.preload.empty()) check_preload(command, config.program, interpreter_options);
  return command;
}

void check_preload(const WorkerCommand& command, const std::string& program,
                   const std::vector<std::string>& interpreter_options) {
  if (!command.python) {
    throw UsageError("--preload needs Python workers, and " + quote_for_message(program) +
                     " runs without Python (an executable, or --no-python)");
  }
  // -S (no site), -I and -E (no PYTHONPATH) would keep ddprun's sitecustomize, which makes an
  // interpreter warm, from running. A #! line's options may come as one word ("-u -E", as the kernel
  // passes the rest of the line).
  for (const std::string& words : interpreter_options) {
    std::size_t start = 0;
    while (start < words.size()) {
      const std::size_t end = std::min(words.find(' ', start), words.size());
      const std::string option = words.substr(start, end - start);
      start = end + 1;
      // -W and -X take their value in the same word (-Werror::SyntaxWarning), -c and -m end the options.
      if (option.size() < 2 || option[0] != '-' || option[1] == '-') continue;
      const std::string letters = option.substr(1, option.find_first_of("WXcm") - 1);
      for (char flag : {'S', 'I', 'E'}) {
        if (letters.find(flag) != std::string::npos) {
          throw UsageError(std::string("--preload cannot warm ") + command.argv[0] + " " + option + ": -" + flag +
                           " keeps Python from importing ddprun's sitecustomize (from the #! line of " + program + ")");
        }
      }
    }
  }
}

namespace {

bool is_identifier_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_'; }
bool is_identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

/// string.Template(arg).safe_substitute(local_rank=rank): `$$` -> `$`, `$local_rank` and
/// `${local_rank}` -> rank; any other `$name`, `${name}` or `$` is kept as written.
std::string safe_substitute(const std::string& arg, const std::string& rank) {
  constexpr std::string_view name = "local_rank";
  std::string out;
  std::size_t i = 0;
  while (i < arg.size()) {
    char c = arg[i];
    if (c != '$' || i + 1 == arg.size()) {
      out += c;
      ++i;
      continue;
    }
    char next = arg[i + 1];
    if (next == '$') {
      out += '$';
      i += 2;
    } else if (is_identifier_start(next)) {
      std::size_t end = i + 1;
      while (end < arg.size() && is_identifier_char(arg[end])) ++end;
      std::string_view id(arg.data() + i + 1, end - i - 1);
      out += id == name ? rank : arg.substr(i, end - i);
      i = end;
    } else if (next == '{' && i + 2 < arg.size() && is_identifier_start(arg[i + 2])) {
      std::size_t end = i + 2;
      while (end < arg.size() && is_identifier_char(arg[end])) ++end;
      if (end < arg.size() && arg[end] == '}') {
        std::string_view id(arg.data() + i + 2, end - i - 2);
        out += id == name ? rank : arg.substr(i, end + 1 - i);
        i = end + 1;
      } else {
        out += '$';  // `${name` without '}': Template's "invalid", kept
        ++i;
      }
    } else {
      out += '$';
      ++i;
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> substitute_local_rank(const std::vector<std::string>& argv, int local_rank) {
  const std::string rank = std::to_string(local_rank);
  std::vector<std::string> out;
  out.reserve(argv.size());
  for (std::size_t i = 0; i < argv.size(); ++i) {
    // torchrun substitutes the entrypoint's arguments, not the entrypoint.
    out.push_back(i == 0 ? argv[i] : safe_substitute(argv[i], rank));
  }
  return out;
}

}  // namespace ddprun::launcher

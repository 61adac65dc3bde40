#include "launcher/observe/run_registry.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/bounded_json.hpp"
#include "launcher/base/errors.hpp"

namespace ddprun::launcher {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/// Whether `path` is a real folder (not a link) owned by `uid` that no one else may enter or write.
std::string private_folder_problem(const fs::path& path, uid_t uid) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) return std::strerror(errno);
  if (!S_ISDIR(info.st_mode)) return "it is not a folder";
  if (info.st_uid != uid) return "it belongs to another user (uid " + std::to_string(info.st_uid) + ")";
  if ((info.st_mode & 0077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.st_mode & 07777));
    return std::string("others may enter it (mode ") + mode + ")";
  }
  return {};
}

/// The path without a trailing separator, made absolute and normal, for comparing folders.
std::string normal_folder(std::string_view text) {
  if (text.empty()) return {};
  fs::path path(text);
  std::error_code ec;
  if (path.is_relative()) path = fs::absolute(path, ec);
  std::string normal = path.lexically_normal().string();
  while (normal.size() > 1 && normal.back() == '/') normal.pop_back();
  return normal;
}

bool alive(const RunEntry& entry) {
  if (entry.pid <= 0) return false;
  auto ticks = process_start_ticks(entry.pid);
  return ticks && (*ticks == entry.start_ticks || entry.start_ticks == 0);
}

}  // namespace

json to_json(const RunEntry& entry) {
  return {{"run_id", entry.run_id}, {"pid", entry.pid},         {"start_ticks", entry.start_ticks},
          {"host", entry.host},     {"run_dir", entry.run_dir}, {"socket", entry.socket},
          {"url", entry.url},       {"started_at", entry.started_at}, {"command", entry.command}};
}

RunEntry run_entry_from_json(const json& object) {
  RunEntry entry;
  entry.run_id = object.at("run_id").get<std::string>();
  entry.pid = object.at("pid").get<pid_t>();
  entry.start_ticks = object.value("start_ticks", std::uint64_t{0});
  entry.host = object.value("host", std::string());
  entry.run_dir = object.value("run_dir", std::string());
  entry.socket = object.at("socket").get<std::string>();
  entry.url = object.value("url", std::string());
  entry.started_at = object.value("started_at", 0.0);
  entry.command = object.value("command", std::string());
  return entry;
}

fs::path registry_folder(const Environ& env, uid_t uid, bool xdg_usable) {
  auto xdg = lookup(env, "XDG_RUNTIME_DIR");
  if (xdg_usable && xdg && !xdg->empty() && xdg->front() == '/') return fs::path(*xdg) / "ddprun";
  return fs::path("/tmp") / ("ddprun-" + std::to_string(uid));
}

fs::path open_registry_folder(const Environ& env) {
  const uid_t uid = ::geteuid();
  auto xdg = lookup(env, "XDG_RUNTIME_DIR");
  const bool xdg_usable = xdg && !xdg->empty() && xdg->front() == '/' && private_folder_problem(*xdg, uid).empty();
  fs::path folder = registry_folder(env, uid, xdg_usable);
  if (::mkdir(folder.c_str(), 0700) != 0 && errno != EEXIST) {
    throw LaunchError("cannot make the run registry " + folder.string() + ": " + std::strerror(errno));
  }
  if (auto problem = private_folder_problem(folder, uid); !problem.empty()) {
    throw LaunchError("cannot use the run registry " + folder.string() + ": " + problem);
  }
  return folder;
}

std::string status_socket_path(const fs::path& run_dir, const fs::path& registry, pid_t pid) {
  constexpr std::size_t kLongest = sizeof(sockaddr_un{}.sun_path) - 1;  // and its terminating NUL
  std::string in_run = (run_dir / "status.sock").string();
  if (in_run.size() <= kLongest) return in_run;
  return (registry / (std::to_string(pid) + ".sock")).string();
}

std::optional<std::uint64_t> process_start_ticks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');  // the name may hold spaces and parentheses: fields follow the last ')'
  if (close == std::string::npos || close + 2 > text.size()) return std::nullopt;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(fields >> field)) return std::nullopt;
  }
  try {
    return std::stoull(field);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::vector<RunEntry> registered_runs(const fs::path& folder) {
  std::vector<RunEntry> runs;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(folder, ec)) {
    if (item.path().extension() != ".json" || !item.is_regular_file(ec)) continue;
    std::ifstream in(item.path());
    std::ostringstream text;
    text << in.rdbuf();
    RunEntry entry;
    try {
      entry = run_entry_from_json(common::parse_bounded_json(text.str()));
    } catch (const std::exception&) {
      continue;  // being written (never: it is renamed into place), or not ours
    }
    if (!alive(entry)) {
      fs::remove(item.path(), ec);
      if (entry.socket.rfind(folder.string() + "/", 0) == 0) fs::remove(entry.socket, ec);
      continue;
    }
    runs.push_back(std::move(entry));
  }
  std::sort(runs.begin(), runs.end(), [](const RunEntry& a, const RunEntry& b) { return a.started_at < b.started_at; });
  return runs;
}

std::vector<RunEntry> runs_named(const std::vector<RunEntry>& runs, std::string_view argument) {
  std::vector<RunEntry> named;
  const std::string folder = normal_folder(argument);
  for (const auto& run : runs) {
    const std::string run_dir = normal_folder(run.run_dir);
    const bool match = run.run_id == argument || std::to_string(run.pid) == argument ||
                       (!folder.empty() && (run_dir == folder || fs::path(run_dir).parent_path().string() == folder));
    if (match) named.push_back(run);
  }
  return named;
}

RunRegistration::RunRegistration(fs::path folder, RunEntry entry)
    : file_(folder / (std::to_string(entry.pid) + ".json")) {
  const fs::path temporary = folder / (std::to_string(entry.pid) + ".json.tmp");
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << to_json(entry).dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
    if (!out.flush()) throw LaunchError("cannot write the run registry entry " + temporary.string());
  }
  std::error_code ec;
  fs::rename(temporary, file_, ec);  // readers see the whole entry or none
  if (ec) throw LaunchError("cannot write the run registry entry " + file_.string() + ": " + ec.message());
}

RunRegistration::~RunRegistration() {
  std::error_code ec;
  fs::remove(file_, ec);
}

}  // namespace ddprun::launcher

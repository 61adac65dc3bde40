#include "launcher/output/run_logs.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <system_error>

#include "launcher/base/errors.hpp"

namespace ddprun::launcher {
namespace {

std::string random_suffix() {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device device;
  std::uniform_int_distribution<std::size_t> pick(0, sizeof(kAlphabet) - 2);
  std::string suffix(8, ' ');
  for (char& c : suffix) c = kAlphabet[pick(device)];
  return suffix;
}

/// Where temporary log folders go: TMPDIR when it names a folder, else /tmp, as Python's tempfile
/// (and so torchrun) falls back; a TMPDIR that is missing or not a folder is no reason not to run.
std::filesystem::path temporary_root() {
  if (const char* tmpdir = std::getenv("TMPDIR"); tmpdir != nullptr && *tmpdir != '\0') {
    std::error_code ec;
    if (std::filesystem::is_directory(tmpdir, ec) && ::access(tmpdir, W_OK | X_OK) == 0) return tmpdir;
  }
  return "/tmp";
}

std::filesystem::path make_temporary_base() {
  std::string pattern = (temporary_root() / "ddprun_XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw LaunchError("cannot create a temporary log folder " + pattern + ": " + std::strerror(errno) +
                      " (set --log-dir or TMPDIR to a writable folder)");
  }
  return pattern;
}

void create_folder(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw LaunchError("cannot create log folder " + dir.string() + ": " + ec.message());
}

}  // namespace

RunLogs::RunLogs(const std::string& log_dir, const std::string& run_id) {
  std::filesystem::path base = log_dir;
  if (log_dir.empty()) base = temporary_base_ = make_temporary_base();
  run_dir_ = base / (run_id + "_" + random_suffix());
  create_folder(run_dir_);
}

std::filesystem::path RunLogs::worker_dir(int attempt, int local_rank) const {
  auto dir = run_dir_ / ("attempt_" + std::to_string(attempt)) / std::to_string(local_rank);
  create_folder(dir);
  return dir;
}

std::filesystem::path RunLogs::attempt_dir(int attempt) const {
  auto dir = run_dir_ / ("attempt_" + std::to_string(attempt));
  create_folder(dir);
  return dir;
}

void RunLogs::remove_if_temporary() const {
  if (temporary_base_.empty()) return;
  std::error_code ignored;  // best effort: a leftover temp folder is not worth failing a job for
  std::filesystem::remove_all(temporary_base_, ignored);
}

}  // namespace ddprun::launcher

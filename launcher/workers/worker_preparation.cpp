#include "launcher/workers/worker_preparation.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "launcher/base/errors.hpp"
#include "launcher/cli/verbose.hpp"
#include "launcher/devices/numa_plan.hpp"
#include "launcher/output/console.hpp"
#include "launcher/output_plan.hpp"
#include "launcher/workers/elf_needed.hpp"
#include "launcher/workers/worker_env.hpp"

namespace ddprun::launcher {
namespace {

UniqueFd open_log_file(const std::filesystem::path& path) {
  // Non-blocking: a FIFO left at the path would otherwise block the loop in open() until a reader came.
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0644);
  if (fd < 0) throw LaunchError("cannot open log file " + path.string() + ": " + std::strerror(errno));
  UniqueFd file(fd);
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    throw LaunchError("cannot use log file " + path.string() + ": it is not a regular file");
  }
  return file;
}

}  // namespace

WorkerPreparation::WorkerPreparation(const LaunchConfig& config, const WorkerCommand& command, const Environ& env,
                                     std::string hostname)
    : config_(config),
      command_(command),
      env_(env),
      hostname_(std::move(hostname)),
      libtorch_1_(links_libtorch_1(elf_needed(command.executable))) {}

std::vector<std::string> WorkerPreparation::plan_numa_binding() {
  NumaBinding binding = launcher::plan_numa_binding(config_, env_);
  std::vector<std::string> lines;
  for (const auto& note : binding.notes) lines.push_back("note: " + note);
  numa_cpus_.clear();
  for (const auto& cpus : binding.cpus) numa_cpus_.emplace_back(cpus ? std::vector<int>(cpus->begin(), cpus->end()) : std::vector<int>{});
  if (config_.verbose) {
    for (std::size_t local_rank = 0; local_rank < binding.cpus.size(); ++local_rank) {
      if (binding.cpus[local_rank]) {
        lines.push_back("--numa-binding: local rank " + std::to_string(local_rank) + " on CPUs " +
                        format_cpu_list(*binding.cpus[local_rank]));
      }
    }
  }
  return lines;
}

std::vector<WorkerSpec> WorkerPreparation::specs(AttemptFacts facts) const {
  facts.numa_cpus = &numa_cpus_;
  facts.libtorch_1 = libtorch_1_;
  return worker_specs(config_, command_, facts);
}

void WorkerPreparation::begin_attempt(const RunLogs& logs, int attempt) {
  attempt_log_files_.clear();
  logs_ = &logs;
  attempt_ = attempt;
  // torchrun opens them whenever filters are given, whichever ranks are teed: an empty file says
  // that nothing matched, or that no rank's stream was teed.
  filtered_stdout_fd_ = filtered_stderr_fd_ = -1;
  auto open = [&](const std::vector<std::string>& filters, const char* name) {
    if (filters.empty()) return -1;
    attempt_log_files_.push_back(open_log_file(logs.attempt_dir(attempt) / name));
    return attempt_log_files_.back().get();
  };
  filtered_stdout_fd_ = open(config_.duplicate_stdout_filters, "filtered_stdout.log");
  filtered_stderr_fd_ = open(config_.duplicate_stderr_filters, "filtered_stderr.log");
}

WorkerRoutes WorkerPreparation::open_routes(int local_rank, int rank, const std::filesystem::path& dir,
                                            ConsoleOutput& console_output) {
  const LaunchConfig& config = config_;
  WorkerOutputPlan output = plan_output(config, local_rank);
  const std::string& tmpl =
      config.log_line_prefix_template.empty() ? std::string(kDefaultPrefixTemplate) : config.log_line_prefix_template;
  auto route = [&](const StreamPlan& stream, ConsoleWriter& console, const char* file_name) {
    std::string prefix = expand_prefix(tmpl, config.role, rank, local_rank, hostname_);
    if (use_color(env_, console.fd())) prefix = colorize(prefix, local_rank);
    StreamRoute r;
    if (stream.to_console) {
      r.console = &console;
      if (stream.prefixed) r.prefix = prefix;
    }
    if (stream.to_file) {
      r.file_path = (dir / file_name).string();
      attempt_log_files_.push_back(open_log_file(r.file_path));
      r.file_fd = attempt_log_files_.back().get();
      // Should the file fail (a full disk), its lines go to the console, marked with their rank.
      r.fallback = &console;
      r.fallback_prefix = prefix;
    }
    return r;
  };
  WorkerRoutes routes{route(output.out, console_output.out(), "stdout.log"),
                      route(output.err, console_output.err(), "stderr.log")};
  // --duplicate-std*-filters: torchrun's tee prefix ([role0]: or the template), as its TailLog writes it.
  auto filter = [&](StreamRoute& r, const StreamPlan& stream, int fd, const std::vector<std::string>& filters, const char* name) {
    if (!stream.to_filtered_file || fd < 0) return;
    r.filtered_fd = fd;
    r.filtered_path = (logs_->attempt_dir(attempt_) / name).string();
    r.filters = filters;
    r.filtered_prefix = expand_prefix(tmpl, config.role, rank, local_rank, hostname_);
  };
  filter(routes.out, output.out, filtered_stdout_fd_, config.duplicate_stdout_filters, "filtered_stdout.log");
  filter(routes.err, output.err, filtered_stderr_fd_, config.duplicate_stderr_filters, "filtered_stderr.log");
  return routes;
}

void WorkerPreparation::preparing(const WorkerSpec& spec) { being_started_ = spec; }

std::optional<WorkerPreparation::Started> WorkerPreparation::started(pid_t pgid) {
  // The worker just prepared is the one started (WorkerGroup::spawn_batch).
  if (!being_started_) return std::nullopt;
  Started started{being_started_->local_rank, std::nullopt};
  if (config_.verbose) {
    started.verbose_line = describe_worker_start(being_started_->local_rank, being_started_->rank, pgid, being_started_->argv);
  }
  being_started_.reset();
  return started;
}

}  // namespace ddprun::launcher

#pragma once
/// RunLogs: the contract's log folder, `<log_dir>/<run_id>_<random>/attempt_<n>/<local_rank>/`,
/// holding stdout.log, stderr.log (when redirected or teed) and the worker's error.json, and in
/// `attempt_<n>/` the filtered_stdout.log / filtered_stderr.log of --duplicate-std*-filters.
#include <filesystem>
#include <string>

namespace ddprun::launcher {

class RunLogs {
 public:
  /// Creates the run folder under `log_dir`, or under a fresh temporary folder when it is empty.
  /// Throws LaunchError naming the folder when it cannot be created.
  RunLogs(const std::string& log_dir, const std::string& run_id);

  const std::filesystem::path& run_dir() const { return run_dir_; }

  /// Creates and returns the folder of one worker of one attempt.
  std::filesystem::path worker_dir(int attempt, int local_rank) const;

  /// Creates and returns the folder of one attempt (torchrun's filtered_stdout.log goes there).
  std::filesystem::path attempt_dir(int attempt) const;

  /// Removes everything ddprun created when the user gave no --log-dir (after a success there is
  /// nothing in it worth keeping); a no-op for a user's folder.
  void remove_if_temporary() const;

 private:
  std::filesystem::path temporary_base_;  ///< empty when the user chose the folder
  std::filesystem::path run_dir_;
};

}  // namespace ddprun::launcher

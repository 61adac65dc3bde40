#pragma once
/// Progress to the agent: a worker says how far it got (step, samples, a short text) so that the
/// launcher can show live status and spot a rank whose step stopped moving.
///
///   for (std::int64_t step = 0; step < steps; ++step) {
///     train_step();
///     ddprun::progress::report(step, (step + 1) * batch_size);   // a few memory writes
///   }
///
/// The channel: one small shared file per worker, mapped by the worker (read-write) and the agent
/// (read-only). Its path is DDPRUN_PROGRESS_FILE, set by the launcher; unset, report() does nothing.
/// The worker publishes with plain atomic stores under a seqlock; the agent reads a consistent
/// snapshot whenever it likes. No syscall on the worker's side after the first call (which maps
/// the file): a call that changes nothing takes an uncontended mutex and compares; a call that
/// changes something also writes memory and reads CLOCK_MONOTONIC_COARSE, which the vDSO serves on
/// every clock source (CLOCK_MONOTONIC itself is a syscall on some VMs). A test checks this under
/// seccomp's strict mode.
/// Nothing is sent: a hung worker cannot block on it, and the agent cannot be flooded by it.
///
/// The file's layout (512 bytes, version 1) and its seqlock are ddprun's own contract between this
/// writer and the launcher's reader, defined once in common/progress_layout.hpp of ddprun's
/// sources (not installed: no program needs it to report).
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace ddprun {

namespace progress {

/// Publishes this worker's progress to DDPRUN_PROGRESS_FILE. `text` replaces the previous text
/// ({} clears it); a text longer than 256 bytes is cut at a character boundary. Does nothing when
/// the variable is unset; when the file cannot be opened, says so once on stderr and does nothing
/// from then on (progress must never stop training). Thread-safe.
void report(std::int64_t step, std::int64_t samples, std::string_view text = {});

/// Whether report() publishes (DDPRUN_PROGRESS_FILE set and its file mapped). Opens it when needed.
bool enabled();

}  // namespace progress

/// The worker's side of one progress file.
class ProgressWriter {
 public:
  /// Maps `path`, creating it (and growing it to the layout's size) when needed, and stamps the
  /// header with this process's pid. Throws ddprun::Error with the errno text when it cannot.
  explicit ProgressWriter(const std::string& path);
  ~ProgressWriter();
  ProgressWriter(const ProgressWriter&) = delete;
  ProgressWriter& operator=(const ProgressWriter&) = delete;

  /// Publishes, unless the values equal the published ones (then it writes nothing at all).
  /// The first call after opening always publishes, so a new worker stamps a fresh timestamp.
  void report(std::int64_t step, std::int64_t samples, std::string_view text = {});

 private:
  unsigned char* memory_ = nullptr;
  std::mutex write_mutex_;  // uncontended: no syscall
  bool published_ = false;  // guarded by write_mutex_
};

/// One consistent view of a progress file.
struct ProgressSnapshot {
  std::uint64_t generation = 0;  ///< changes published so far
  std::int64_t step = 0;
  std::int64_t samples = 0;
  std::int64_t timestamp_ns = 0;  ///< CLOCK_MONOTONIC_COARSE of the last change
  std::string text;
  std::int32_t pid = 0;  ///< the writer
};

/// The agent's side of one progress file.
class ProgressReader {
 public:
  /// Opens `path` read-only for reading, creating it zeroed (the layout's size) when it does
  /// not exist yet: the agent may set it up before it starts the worker. Throws ddprun::Error with
  /// the errno text when it cannot.
  explicit ProgressReader(const std::string& path);
  ~ProgressReader();
  ProgressReader(const ProgressReader&) = delete;
  ProgressReader& operator=(const ProgressReader&) = delete;

  /// A consistent snapshot; nothing before the first publication, for a file of another format,
  /// or when no consistent read succeeded within a bounded number of tries (a writer that died
  /// in the middle of a write leaves the sequence odd).
  std::optional<ProgressSnapshot> read() const;

 private:
  const unsigned char* memory_ = nullptr;
};

}  // namespace ddprun

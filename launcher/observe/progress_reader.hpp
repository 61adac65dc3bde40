#pragma once
/// The agent's side of a worker's progress file (DDPRUN_PROGRESS_FILE): mapped read-only, read as a
/// consistent snapshot under the writer's seqlock.
///
/// The file's layout and the seqlock are common/progress_layout.hpp (version 1, 512 bytes), the one
/// definition the runtime's writer uses too; the launcher does not link the worker runtime.
///
/// Unlike the runtime's reader, this one never waits: it is called on the agent's loop. A writer
/// caught in the middle of a write (or one that died there, leaving the sequence odd) costs a few
/// tries and then "busy" for this sample; the monitor keeps the previous snapshot.
///
/// The worker owns the file and may cut it short at any moment, also in the middle of a read: a
/// read of the mapping past the file's end faults (SIGBUS). ProgressFile reads under a guard (a
/// SIGBUS handler, installed at the first open, that jumps out of a read whose mapping faulted),
/// so that such a read is a bad sample ("refused"), never the end of the launcher; why a guard and
/// not pread: progress_reader.cpp.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/progress_layout.hpp"

namespace ddprun::launcher {

namespace progress_layout = common::progress_layout;

/// One consistent view of a progress file.
struct ProgressRecord {
  std::uint64_t generation = 0;   ///< changes published so far (sequence / 2)
  std::int64_t step = 0;
  std::int64_t samples = 0;
  std::int64_t timestamp_ns = 0;  ///< the writer's CLOCK_MONOTONIC_COARSE at its last change
  std::int32_t pid = 0;           ///< the writer
  std::string text;
};

enum class ProgressRead {
  ok,
  unpublished,  ///< a file of this format with nothing published yet
  refused,      ///< not a version-1 progress file (magic, version or size field)
  busy,         ///< a write was in progress on every try
};

/// Test hook: called between the two looks at the sequence (after the fields were loaded).
using BetweenLooks = void (*)(void* context);

/// Reads `memory` (kFileSize bytes laid out as the contract says) with at most `tries` looks.
/// Pure but for the loads; `between` lets a test change the fields in the middle of a read.
ProgressRead read_progress(const unsigned char* memory, int tries, ProgressRecord& record,
                           BetweenLooks between = nullptr, void* context = nullptr);

/// One worker's progress file, mapped read-only.
class ProgressFile {
 public:
  static constexpr int kTries = 64;

  /// Maps `path` read-only; nothing when it does not exist yet or is shorter than the layout (the
  /// worker has not created it yet): try again at the next sample. `why` says why not.
  static std::unique_ptr<ProgressFile> open(const std::string& path, std::string* why = nullptr);
  ~ProgressFile();
  ProgressFile(const ProgressFile&) = delete;
  ProgressFile& operator=(const ProgressFile&) = delete;

  /// A snapshot into `record` when the result is ok (otherwise `record` means nothing). A file cut
  /// shorter than the layout, before or during the read, reads as refused. Not async-signal-safe.
  ProgressRead read(ProgressRecord& record) const;

 private:
  explicit ProgressFile(const unsigned char* memory) : memory_(memory) {}
  const unsigned char* memory_;  ///< kFileSize bytes, mapped shared and read-only (the fd closed)
};

}  // namespace ddprun::launcher

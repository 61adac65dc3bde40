#pragma once
/// The progress file (DDPRUN_PROGRESS_FILE), version 1: the one definition of its bytes, shared by
/// the worker runtime's writer (worker_runtime/src/progress.cpp) and the launcher's reader
/// (launcher/observe/progress_reader.*). python/ddprun_progress.py writes the same bytes; it cannot
/// include this, so tests/runtime/progress_layout_test.cpp runs it and the C++ writer side by side
/// and reads both files at these offsets.
///
/// 512 bytes, native byte order (little-endian on x86-64 and AArch64), every field naturally
/// aligned and accessed with atomic loads and stores (two processes share it).
///   offset size field
///        0    8 magic          "DDPRPRG1" as bytes (0x3147525052504444 as a little-endian u64)
///        8    4 version        1
///       12    4 size           512, the file's length
///       16    4 pid            the writing worker's pid (0 until a worker opened the file)
///       20    4 reserved       0
///       24    8 sequence       seqlock counter: odd while a write is in progress;
///                              generation = sequence / 2 = the number of changes published
///       32    8 step           int64, as reported
///       40    8 samples        int64, as reported
///       48    8 timestamp_ns   CLOCK_MONOTONIC_COARSE of the last change, in ns: the monotonic
///                              clock at a tick's resolution (1-4 ms), the same in every process
///                              of the host; the agent compares it with its own CLOCK_MONOTONIC
///       56    4 text_length    bytes of text, <= 256
///       60    4 reserved       0
///       64  256 text           UTF-8, not NUL-terminated; a longer text is cut at a character
///                              boundary. Bytes past text_length mean nothing (a writer may leave
///                              an older, longer text's tail there)
///      320  192 reserved       0
/// Opening: a writer stamps version, size and pid, makes an odd sequence even (a previous writer
/// died mid-write; this one is the only writer now), and stores the magic last, with release: a
/// reader that sees the magic sees the header.
/// Writer: sequence += 1 (odd), release fence, store the fields, sequence += 1 (even, release).
/// Reader: s1 = sequence (acquire); if odd, retry; load the fields; acquire fence; if sequence != s1,
/// retry. Only one process writes a file; threads of that process take turns with a mutex.
///
/// Standard library only: the runtime's sources include it, and nothing of it is installed.
#include <cstddef>
#include <cstdint>

namespace ddprun::common::progress_layout {

inline constexpr std::uint64_t kMagic = 0x3147525052504444ull;  // "DDPRPRG1" as little-endian bytes
inline constexpr std::uint32_t kVersion = 1;
inline constexpr std::size_t kFileSize = 512;
inline constexpr std::size_t kMaxText = 256;
inline constexpr std::size_t kTextWords = kMaxText / 8;

inline constexpr std::size_t kMagicAt = 0, kVersionAt = 8, kSizeAt = 12, kPidAt = 16, kSequenceAt = 24, kStepAt = 32,
                             kSamplesAt = 40, kTimestampAt = 48, kTextLengthAt = 56, kTextAt = 64, kReservedAt = 320;

/// The file as a struct, for a writer that accesses fields through std::atomic_ref. The asserts
/// below tie it to the offsets above, so the two cannot drift apart.
struct Record {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t size;
  std::int32_t pid;
  std::uint32_t reserved0;
  std::uint64_t sequence;
  std::int64_t step;
  std::int64_t samples;
  std::int64_t timestamp_ns;
  std::uint32_t text_length;
  std::uint32_t reserved1;
  std::uint64_t text[kTextWords];
  unsigned char reserved2[kFileSize - kReservedAt];
};
static_assert(sizeof(Record) == kFileSize);
static_assert(offsetof(Record, magic) == kMagicAt && offsetof(Record, version) == kVersionAt &&
              offsetof(Record, size) == kSizeAt && offsetof(Record, pid) == kPidAt);
static_assert(offsetof(Record, sequence) == kSequenceAt && offsetof(Record, step) == kStepAt &&
              offsetof(Record, samples) == kSamplesAt && offsetof(Record, timestamp_ns) == kTimestampAt);
static_assert(offsetof(Record, text_length) == kTextLengthAt && offsetof(Record, text) == kTextAt &&
              offsetof(Record, reserved2) == kReservedAt);

}  // namespace ddprun::common::progress_layout

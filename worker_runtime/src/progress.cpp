#include "ddprun/progress.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/progress_layout.hpp"
#include "ddprun/error.hpp"

namespace ddprun {
namespace {

using common::progress_layout::kFileSize;
using common::progress_layout::kMagic;
using common::progress_layout::kMaxText;
using common::progress_layout::kTextWords;
using common::progress_layout::kVersion;
using common::progress_layout::Record;

static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free && std::atomic_ref<std::uint32_t>::is_always_lock_free,
              "a shared-memory seqlock needs lock-free (address-free) atomics");

template <class T>
std::atomic_ref<T> atomic(T& field) {
  return std::atomic_ref<T>(field);
}

/// The first kMaxText bytes at most, never cutting a UTF-8 character in two.
std::string_view clip_text(std::string_view text) {
  if (text.size() <= kMaxText) return text;
  std::size_t cut = kMaxText;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut);
}

std::int64_t monotonic_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

std::size_t words_for(std::size_t bytes) { return (bytes + 7) / 8; }

/// Whether the published values are these (relaxed loads: only the writing process calls it).
bool published_equals(Record& record, std::int64_t step, std::int64_t samples, std::string_view text) {
  if (atomic(record.step).load(std::memory_order_relaxed) != step ||
      atomic(record.samples).load(std::memory_order_relaxed) != samples ||
      atomic(record.text_length).load(std::memory_order_relaxed) != text.size()) {
    return false;
  }
  std::uint64_t words[kTextWords];
  for (std::size_t i = 0; i < words_for(text.size()); ++i) words[i] = atomic(record.text[i]).load(std::memory_order_relaxed);
  // Not memcmp for no text: glibc's AVX-512 memcmp reads even a length-0 range with a masked load,
  // and the CPU suppressing the fault of a masked load at an unmapped address (an empty view's null
  // data) is slow: the most common report (no text, unchanged) took 300 ns instead of 15
  // (bench/progress_cost, AMD EPYC).
  return text.empty() || std::memcmp(words, text.data(), text.size()) == 0;
}

[[noreturn]] void throw_errno(const std::string& what, const std::string& path) {
  throw Error("progress file " + path + ": " + what + ": " + std::strerror(errno));
}

/// Opens `path` (creating it), grows it to kFileSize when shorter, maps it. Writable mapping
/// when `writable`; a reader falls back to a read-only open when it may not write.
void* map_file(const std::string& path, bool writable) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  bool can_write = fd >= 0;
  if (fd < 0 && !writable && (errno == EACCES || errno == EROFS)) fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_errno("cannot open", path);
  struct stat status {};
  if (::fstat(fd, &status) != 0) {
    ::close(fd);
    throw_errno("cannot stat", path);
  }
  if (static_cast<std::size_t>(status.st_size) < kFileSize) {
    if (!can_write || ::ftruncate(fd, static_cast<off_t>(kFileSize)) != 0) {
      ::close(fd);
      if (!can_write) throw Error("progress file " + path + " is shorter than " + std::to_string(kFileSize) + " bytes");
      throw_errno("cannot size", path);
    }
  }
  void* memory = ::mmap(nullptr, kFileSize, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);  // the mapping keeps the file
  if (memory == MAP_FAILED) throw_errno("cannot map", path);
  return memory;
}

/// The process's writer on DDPRUN_PROGRESS_FILE; null when unset or unusable. Never destroyed,
/// so that a report from a static destructor is still safe.
ProgressWriter* process_writer() {
  static ProgressWriter* writer = []() -> ProgressWriter* {
    const char* path = std::getenv("DDPRUN_PROGRESS_FILE");
    if (path == nullptr || *path == '\0') return nullptr;
    try {
      return new ProgressWriter(path);
    } catch (const Error& e) {
      std::fprintf(stderr, "ddprun: progress reports are off: %s\n", e.what());
      return nullptr;
    }
  }();
  return writer;
}

}  // namespace

// ---- Writer.

ProgressWriter::ProgressWriter(const std::string& path)
    : memory_(static_cast<unsigned char*>(map_file(path, /*writable=*/true))) {
  auto& record = *reinterpret_cast<Record*>(memory_);
  atomic(record.version).store(kVersion, std::memory_order_relaxed);
  atomic(record.size).store(static_cast<std::uint32_t>(kFileSize), std::memory_order_relaxed);
  atomic(record.pid).store(static_cast<std::int32_t>(::getpid()), std::memory_order_relaxed);
  // A previous writer that died in the middle of a write left the sequence odd; this process is
  // the only writer now.
  std::uint64_t sequence = atomic(record.sequence).load(std::memory_order_relaxed);
  if (sequence % 2 != 0) atomic(record.sequence).store(sequence + 1, std::memory_order_release);
  // Last, with release: a reader that sees the magic sees the header.
  atomic(record.magic).store(kMagic, std::memory_order_release);
}

ProgressWriter::~ProgressWriter() { ::munmap(memory_, kFileSize); }

void ProgressWriter::report(std::int64_t step, std::int64_t samples, std::string_view text) {
  text = clip_text(text);
  auto& record = *reinterpret_cast<Record*>(memory_);
  std::lock_guard lock(write_mutex_);
  if (published_ && published_equals(record, step, samples, text)) return;

  std::uint64_t words[kTextWords] = {};
  std::memcpy(words, text.data(), text.size());
  const std::int64_t now = monotonic_ns();

  const std::uint64_t sequence = atomic(record.sequence).load(std::memory_order_relaxed);
  atomic(record.sequence).store(sequence + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);  // the odd count before any field
  atomic(record.step).store(step, std::memory_order_relaxed);
  atomic(record.samples).store(samples, std::memory_order_relaxed);
  atomic(record.timestamp_ns).store(now, std::memory_order_relaxed);
  atomic(record.text_length).store(static_cast<std::uint32_t>(text.size()), std::memory_order_relaxed);
  for (std::size_t i = 0; i < words_for(text.size()); ++i) atomic(record.text[i]).store(words[i], std::memory_order_relaxed);
  atomic(record.sequence).store(sequence + 2, std::memory_order_release);  // the fields before the even count
  published_ = true;
}

// ---- Reader.

ProgressReader::ProgressReader(const std::string& path)
    : memory_(static_cast<const unsigned char*>(map_file(path, /*writable=*/false))) {}

ProgressReader::~ProgressReader() { ::munmap(const_cast<unsigned char*>(memory_), kFileSize); }

std::optional<ProgressSnapshot> ProgressReader::read() const {
  // Loads only: atomic_ref wants a non-const object, the mapping is read-only.
  auto& record = *reinterpret_cast<Record*>(const_cast<unsigned char*>(memory_));
  if (atomic(record.magic).load(std::memory_order_acquire) != kMagic) return std::nullopt;
  if (atomic(record.version).load(std::memory_order_relaxed) != kVersion) return std::nullopt;

  // A write takes tens of nanoseconds: spin briefly, then let a preempted writer run.
  constexpr int kTries = 10'000;
  for (int attempt = 0; attempt < kTries; ++attempt) {
    if (attempt >= 100) std::this_thread::yield();
    const std::uint64_t before = atomic(record.sequence).load(std::memory_order_acquire);
    if (before == 0) return std::nullopt;  // nothing published yet
    if (before % 2 != 0) continue;
    ProgressSnapshot snapshot;
    snapshot.generation = before / 2;
    snapshot.step = atomic(record.step).load(std::memory_order_relaxed);
    snapshot.samples = atomic(record.samples).load(std::memory_order_relaxed);
    snapshot.timestamp_ns = atomic(record.timestamp_ns).load(std::memory_order_relaxed);
    snapshot.pid = atomic(record.pid).load(std::memory_order_relaxed);
    const std::size_t length = std::min<std::size_t>(atomic(record.text_length).load(std::memory_order_relaxed), kMaxText);
    std::uint64_t words[kTextWords];
    for (std::size_t i = 0; i < words_for(length); ++i) words[i] = atomic(record.text[i]).load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);  // the fields before the second look
    if (atomic(record.sequence).load(std::memory_order_relaxed) != before) continue;
    snapshot.text.assign(reinterpret_cast<const char*>(words), length);
    return snapshot;
  }
  return std::nullopt;
}

// ---- The process's channel.

void progress::report(std::int64_t step, std::int64_t samples, std::string_view text) {
  if (ProgressWriter* writer = process_writer()) writer->report(step, samples, text);
}

bool progress::enabled() { return process_writer() != nullptr; }

}  // namespace ddprun

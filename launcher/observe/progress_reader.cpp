#include "launcher/observe/progress_reader.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

namespace ddprun::launcher {
namespace {

using namespace progress_layout;

/// An atomic load of the field at `offset` (naturally aligned, as the contract says). The GCC
/// builtin, because std::atomic_ref cannot refer to the const bytes of a read-only mapping.
template <class T>
T load(const unsigned char* memory, std::size_t offset, int order = __ATOMIC_RELAXED) {
  return __atomic_load_n(reinterpret_cast<const T*>(memory + offset), order);
}

}  // namespace

ProgressRead read_progress(const unsigned char* memory, int tries, ProgressRecord& record, BetweenLooks between,
                           void* context) {
  if (load<std::uint64_t>(memory, kMagicAt, __ATOMIC_ACQUIRE) != kMagic) return ProgressRead::refused;
  if (load<std::uint32_t>(memory, kVersionAt) != kVersion) return ProgressRead::refused;
  if (load<std::uint32_t>(memory, kSizeAt) != kFileSize) return ProgressRead::refused;
  for (int attempt = 0; attempt < tries; ++attempt) {
    const auto before = load<std::uint64_t>(memory, kSequenceAt, __ATOMIC_ACQUIRE);
    if (before == 0) return ProgressRead::unpublished;
    if (before % 2 != 0) continue;  // a write in progress
    record.generation = before / 2;
    record.step = load<std::int64_t>(memory, kStepAt);
    record.samples = load<std::int64_t>(memory, kSamplesAt);
    record.timestamp_ns = load<std::int64_t>(memory, kTimestampAt);
    record.pid = load<std::int32_t>(memory, kPidAt);
    const std::size_t length = std::min<std::size_t>(load<std::uint32_t>(memory, kTextLengthAt), kMaxText);
    std::uint64_t words[kMaxText / 8];
    for (std::size_t i = 0; i < (length + 7) / 8; ++i) words[i] = load<std::uint64_t>(memory, kTextAt + 8 * i);
    if (between != nullptr) between(context);
    std::atomic_thread_fence(std::memory_order_acquire);  // the fields before the second look
    if (load<std::uint64_t>(memory, kSequenceAt) != before) continue;  // torn: a write came in between
    record.text.assign(reinterpret_cast<const char*>(words), length);
    return ProgressRead::ok;
  }
  return ProgressRead::busy;
}

std::unique_ptr<ProgressFile> ProgressFile::open(const std::string& path, std::string* why) {
  // Non-blocking: a FIFO planted at the path must not block the loop in open().
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (fd.get() < 0) {
    if (why != nullptr) *why = std::strerror(errno);
    return nullptr;
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0 || !S_ISREG(info.st_mode) || static_cast<std::size_t>(info.st_size) < kFileSize) {
    if (why != nullptr) *why = "not a regular file of " + std::to_string(kFileSize) + " bytes or more";
    return nullptr;
  }
  void* memory = ::mmap(nullptr, kFileSize, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (memory == MAP_FAILED) {
    if (why != nullptr) *why = std::strerror(errno);
    return nullptr;
  }
  return std::unique_ptr<ProgressFile>(new ProgressFile(std::move(fd), static_cast<const unsigned char*>(memory)));
}

ProgressFile::~ProgressFile() { ::munmap(const_cast<unsigned char*>(memory_), kFileSize); }

ProgressRead ProgressFile::read(ProgressRecord& record) const {
  // A page of a mapping beyond the file's end faults (SIGBUS): a file cut short is not read.
  struct stat info {};
  if (::fstat(fd_.get(), &info) != 0 || static_cast<std::size_t>(info.st_size) < kFileSize) return ProgressRead::refused;
  return read_progress(memory_, kTries, record);
}

}  // namespace ddprun::launcher

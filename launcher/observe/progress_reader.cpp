#include "launcher/observe/progress_reader.hpp"

#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "launcher/base/unique_fd.hpp"

namespace ddprun::launcher {
namespace {

using namespace progress_layout;

/// An atomic load of the field at `offset` (naturally aligned, as the contract says). The GCC
/// builtin, because std::atomic_ref cannot refer to the const bytes of a read-only mapping.
template <class T>
T load(const unsigned char* memory, std::size_t offset, int order = __ATOMIC_RELAXED) {
  return __atomic_load_n(reinterpret_cast<const T*>(memory + offset), order);
}

// A worker owns its file and may cut it short at any moment (ftruncate, or a new file written
// over it), and a load from a page of a mapping past the file's end is a SIGBUS, which would end
// the launcher. Checking the size first (fstat) leaves a window between the check and the loads
// that a worker cutting its file in a loop hits within a second. So the loads run under a guard:
// a SIGBUS whose address lies in the mapping being read, on the thread reading it, jumps back out
// of the read, which is then a bad sample ("refused"). Why a guard rather than the alternatives:
//   - pread of the fields instead of the mapping: the seqlock needs three preads per read (the
//     sequence, the fields, the sequence again), about 1.3 us each on the VMs measured
//     (docs/performance.md, "Launcher CPU with live status on"), where the mapping's loads cost
//     tens of ns: +30 us per sample of 8 workers, on a budget met narrowly;
//   - a mapping at a size the launcher owns: nothing the launcher can hold stops the worker, which
//     opens its file by path with write access, from truncating it (seals are for memfds only);
//   - the guard costs a sigsetjmp that saves no signal mask (no syscall) and drops the fstat that
//     each read made before: a sample costs less than it did.
// Only a fault inside an armed mapping jumps; any other SIGBUS gets the action that was there
// before this one (by default: the process ends with SIGBUS, as it would have).

/// Armed on this thread while ProgressFile::read loads from [begin, end).
struct FaultGuard {
  sigjmp_buf jump;
  const unsigned char* begin = nullptr;
  const unsigned char* end = nullptr;
};

thread_local FaultGuard* armed_guard = nullptr;
struct sigaction sigbus_before {};  // SIGBUS's action before ours (written once, before any read)

extern "C" void on_sigbus(int signo, siginfo_t* info, void* context) {
  FaultGuard* guard = armed_guard;
  const auto* address = static_cast<const unsigned char*>(info->si_addr);
  if (guard != nullptr && info->si_code > 0 && address >= guard->begin && address < guard->end) {
    armed_guard = nullptr;
    siglongjmp(guard->jump, 1);  // SA_NODEFER: SIGBUS is not left blocked on this thread
  }
  // Not a progress file's: as if this handler had never been installed.
  ::sigaction(SIGBUS, &sigbus_before, nullptr);
  if ((sigbus_before.sa_flags & SA_SIGINFO) != 0) return sigbus_before.sa_sigaction(signo, info, context);
  if (sigbus_before.sa_handler != SIG_DFL && sigbus_before.sa_handler != SIG_IGN) return sigbus_before.sa_handler(signo);
  if (info->si_code <= 0) ::raise(SIGBUS);  // sent by a process: again, to the action restored
  // A fault: returning runs the faulting instruction again, under the action restored.
}

void install_sigbus_guard() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = on_sigbus;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    ::sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &sigbus_before);
  });
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
  install_sigbus_guard();
  return std::unique_ptr<ProgressFile>(new ProgressFile(static_cast<const unsigned char*>(memory)));
}

ProgressFile::~ProgressFile() { ::munmap(const_cast<unsigned char*>(memory_), kFileSize); }

ProgressRead ProgressFile::read(ProgressRecord& record) const {
  FaultGuard guard;
  guard.begin = memory_;
  guard.end = memory_ + kFileSize;
  // 0: no signal mask saved or restored (no syscall); the handler's SA_NODEFER keeps it unchanged.
  if (sigsetjmp(guard.jump, 0) != 0) return ProgressRead::refused;  // the file was cut short under the read
  armed_guard = &guard;
  const ProgressRead result = read_progress(memory_, kTries, record);
  armed_guard = nullptr;
  return result;
}

}  // namespace ddprun::launcher

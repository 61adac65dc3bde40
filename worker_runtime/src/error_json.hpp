#pragma once
/// The error file in PyTorch's @record format, written with async-signal-safe calls only (fixed
/// buffers, write(2), rename(2); no allocation), so that a fatal-signal handler can write it too;
/// and the rule that the first error of a process wins.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ddprun::detail {

/// Appends to caller-owned storage, truncating at its end.
struct FixedText {
  char* data;
  std::size_t capacity;
  std::size_t size = 0;

  void add(std::string_view text) {
    for (char c : text) {
      if (size == capacity) return;
      data[size++] = c;
    }
  }
  void add_unsigned(std::uint64_t value) {
    char digits[20];
    int count = 0;
    do {
      digits[count++] = static_cast<char>('0' + value % 10);
      value /= 10;
    } while (value != 0);
    while (count > 0) add(std::string_view(&digits[--count], 1));
  }
  void add_hex(std::uintptr_t value) {
    char digits[16];
    int count = 0;
    do {
      digits[count++] = "0123456789abcdef"[value & 0xf];
      value >>= 4;
    } while (value != 0);
    add("0x");
    while (count > 0) add(std::string_view(&digits[--count], 1));
  }
  std::string_view view() const { return {data, size}; }
};

/// Buffered output to a file descriptor with write(2) only.
class FdWriter {
 public:
  explicit FdWriter(int fd) : fd_(fd) {}

  void add(std::string_view text) {
    for (char c : text) put(c);
  }
  /// `text` as a JSON string: quoted, escaped, invalid UTF-8 replaced by U+FFFD so that the
  /// launcher's strict parser accepts the file whatever the message holds.
  void add_json_string(std::string_view text);
  /// Flushes; false when any write failed.
  bool finish() {
    flush();
    return ok_;
  }

 private:
  void put(char c) {
    if (used_ == sizeof buffer_) flush();
    buffer_[used_++] = c;
  }
  void flush();

  int fd_;
  char buffer_[2048];
  std::size_t used_ = 0;
  bool ok_ = true;
};

/// Seconds since the epoch, for the report's timestamp. Async-signal-safe.
std::int64_t epoch_seconds();

/// Writes the report to `tmp_path`, then renames it over `path` (the launcher never reads half a
/// report); straight to `path` when its folder takes no new file. Async-signal-safe.
bool write_report(const char* path, const char* tmp_path, std::string_view message, std::string_view traceback,
                  std::int64_t timestamp);

/// Makes this thread the one writer of the process's report; false when another error came first
/// (waiting a while for a report in progress, so that the process does not die half-way through it).
/// Async-signal-safe.
bool claim_report();
/// Called by the writer claim_report chose once its report is written.
void finish_report();

}  // namespace ddprun::detail

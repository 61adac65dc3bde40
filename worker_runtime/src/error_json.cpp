#include "error_json.hpp"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>

namespace ddprun::detail {
namespace {

/// The first error of a process wins: kIdle -> kWriting (one writer) -> kWritten.
enum ReportState : int { kIdle = 0, kWriting = 1, kWritten = 2 };
std::atomic<int> g_report_state{kIdle};

static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free state");

/// Length of the well-formed UTF-8 sequence at `p` (RFC 3629, as strict JSON parsers check it), or 0.
std::size_t utf8_sequence_length(const unsigned char* p, std::size_t left) {
  const unsigned c = p[0];
  if (c < 0x80) return 1;
  std::size_t length = 0;
  unsigned low = 0x80, high = 0xBF;  // bounds of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    length = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    length = 3;
    if (c == 0xE0) low = 0xA0;   // no overlong forms
    if (c == 0xED) high = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    length = 4;
    if (c == 0xF0) low = 0x90;
    if (c == 0xF4) high = 0x8F;  // nothing past U+10FFFF
  } else {
    return 0;
  }
  if (left < length || p[1] < low || p[1] > high) return 0;
  for (std::size_t i = 2; i < length; ++i) {
    if ((p[i] & 0xC0) != 0x80) return 0;
  }
  return length;
}

}  // namespace

void FdWriter::add_json_string(std::string_view text) {
  put('"');
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char c = bytes[i];
    if (c >= 0x80) {
      std::size_t length = utf8_sequence_length(bytes + i, text.size() - i);
      if (length == 0) {
        add("\\ufffd");
        ++i;
      } else {
        add(text.substr(i, length));
        i += length;
      }
      continue;
    }
    switch (c) {
      case '"': add("\\\""); break;
      case '\\': add("\\\\"); break;
      case '\n': add("\\n"); break;
      case '\r': add("\\r"); break;
      case '\t': add("\\t"); break;
      default:
        if (c < 0x20) {
          add("\\u00");
          put("0123456789abcdef"[c >> 4]);
          put("0123456789abcdef"[c & 0xf]);
        } else {
          put(static_cast<char>(c));
        }
    }
    ++i;
  }
  put('"');
}

void FdWriter::flush() {
  std::size_t done = 0;
  while (done < used_ && ok_) {
    ssize_t wrote = ::write(fd_, buffer_ + done, used_ - done);
    if (wrote > 0) {
      done += static_cast<std::size_t>(wrote);
    } else if (wrote < 0 && errno == EINTR) {
      continue;
    } else {
      ok_ = false;
    }
  }
  used_ = 0;
}

std::int64_t epoch_seconds() {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);  // async-signal-safe, unlike most of <chrono>'s callers
  return now.tv_sec;
}

bool write_report(const char* path, const char* tmp_path, std::string_view message, std::string_view traceback,
                  std::int64_t timestamp) {
  bool via_tmp = true;
  int fd = ::open(tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    via_tmp = false;
    fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return false;
  }
  char digits_storage[24];
  FixedText digits{digits_storage, sizeof digits_storage};
  digits.add_unsigned(static_cast<std::uint64_t>(timestamp < 0 ? 0 : timestamp));

  FdWriter out(fd);
  out.add(R"({"message": {"message": )");
  out.add_json_string(message);
  out.add(R"(, "extraInfo": {"py_callstack": )");
  out.add_json_string(traceback);
  out.add(R"(, "timestamp": ")");
  out.add(digits.view());
  out.add("\"}}}\n");
  bool ok = out.finish();
  ok = ::close(fd) == 0 && ok;
  if (via_tmp) {
    if (ok) ok = ::rename(tmp_path, path) == 0;
    if (!ok) ::unlink(tmp_path);
  }
  return ok;
}

bool claim_report() {
  int expected = kIdle;
  if (g_report_state.compare_exchange_strong(expected, kWriting)) return true;
  for (int i = 0; i < 300 && g_report_state.load() == kWriting; ++i) {
    timespec pause{0, 10'000'000};
    ::nanosleep(&pause, nullptr);
  }
  return false;
}

void finish_report() { g_report_state.store(kWritten); }

}  // namespace ddprun::detail

#include "launcher/report/error_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/bounded_json.hpp"
#include "common/integer.hpp"
#include "launcher/base/unique_fd.hpp"

namespace ddprun::launcher {
namespace {

using nlohmann::json;

std::string string_field(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

/// PyTorch's nested format writes the timestamp as a string, the flat one as an int; accept both in both.
std::optional<std::int64_t> timestamp_field(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end()) return std::nullopt;
  if (it->is_number_unsigned()) {
    auto value = it->get<std::uint64_t>();
    if (value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
    return static_cast<std::int64_t>(value);
  }
  if (it->is_number_integer()) return it->get<std::int64_t>();
  if (it->is_number_float()) {
    double value = std::floor(it->get<double>());
    // 2^63 is exactly representable; anything at or past it does not fit.
    if (!(value >= -9223372036854775808.0 && value < 9223372036854775808.0)) return std::nullopt;
    return static_cast<std::int64_t>(value);
  }
  if (it->is_string()) {
    if (auto value = common::parse_integer<std::int64_t>(it->get_ref<const std::string&>())) return value;
  }
  return std::nullopt;
}

}  // namespace

std::optional<ErrorFileContent> parse_error_file(std::string_view json_text) {
  json document = common::parse_bounded_json_or_discarded(json_text);
  if (!document.is_object()) return std::nullopt;  // also covers a parse error (a discarded value)

  ErrorFileContent content;
  auto message = document.find("message");
  if (message != document.end() && message->is_object()) {
    content.message = string_field(*message, "message");
    auto extra = message->find("extraInfo");
    if (extra != message->end() && extra->is_object()) {
      content.traceback = string_field(*extra, "py_callstack");
      content.timestamp_s = timestamp_field(*extra, "timestamp");
    }
  } else {
    content.message = string_field(document, "message");
    content.timestamp_s = timestamp_field(document, "timestamp");
  }
  return content;
}

std::optional<ErrorFileContent> read_error_file(const std::filesystem::path& path) {
  // Non-blocking, and regular files only: a FIFO or a device at the path (a worker may put anything
  // there) must neither block the agent's loop in open() or read() nor feed it without end.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return std::nullopt;
  UniqueFd file(fd);
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) return std::nullopt;
  if (static_cast<std::uint64_t>(info.st_size) > kMaxErrorFileBytes) return std::nullopt;
  std::string text;
  char buffer[64 * 1024];
  while (true) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > kMaxErrorFileBytes) return std::nullopt;
  }
  return parse_error_file(text);
}

}  // namespace ddprun::launcher

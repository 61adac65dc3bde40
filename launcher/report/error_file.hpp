#pragma once
/// A worker's TORCHELASTIC_ERROR_FILE: the JSON that PyTorch's `@record` (or a C++ worker) writes
/// when it fails, read back by the agent for the failure summary.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace ddprun::launcher {

/// What a worker wrote about its failure; a field the file lacks is empty.
struct ErrorFileContent {
  std::string message;    ///< "<Type>: <text>", or the flat format's text
  std::string traceback;  ///< extraInfo.py_callstack as written (Python's ends with the message)
  std::optional<std::int64_t> timestamp_s;  ///< when the worker recorded the error, epoch seconds
};

/// Parses both formats of the contract:
/// {"message": {"message": "<Type>: <text>", "extraInfo": {"py_callstack": "...", "timestamp": "<epoch s>"}}}
/// and the flat {"message": "<text>", "timestamp": <int>}. A timestamp may be a number or a decimal
/// string in either. Tolerant of missing or mistyped fields (they stay empty); nothing for invalid
/// JSON or a document that is not an object.
std::optional<ErrorFileContent> parse_error_file(std::string_view json_text);

/// A file larger than this is not read: a runaway worker must not make the agent allocate without bound.
inline constexpr std::size_t kMaxErrorFileBytes = 16 * 1024 * 1024;

/// Reads and parses the file without ever blocking; nothing when it does not exist, is not a regular
/// file (a FIFO, a device), cannot be read, is larger than kMaxErrorFileBytes or cannot be parsed.
std::optional<ErrorFileContent> read_error_file(const std::filesystem::path& path);

}  // namespace ddprun::launcher

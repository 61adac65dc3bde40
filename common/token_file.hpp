#pragma once
/// Token files: a shared secret kept in a file (DDPRUN_STORE_TOKEN_FILE, ddprun-store --token-file),
/// read the same way by everything that reads one, so that a server and its clients given the
/// same file always hold the same token.
#include <string>
#include <string_view>

namespace ddprun::common {

/// A token file's text without the line end an editor or `echo` adds: one trailing "\n", then one
/// trailing "\r" ("tok\n" and "tok\r\n" are "tok"; "tok\n\n" is "tok\n": only one line end goes).
std::string without_line_end(std::string text);

/// What reading a token file gave.
struct TokenFile {
  std::string token;  ///< the file's bytes, without_line_end; may be empty (the caller says what that means)
  std::string error;  ///< empty when the file was read; else why not (strerror text)
};

/// Reads the token file at `path` whole, as bytes.
TokenFile read_token_file(const std::string& path);

}  // namespace ddprun::common

#pragma once
/// The runtime's exception: what failed, with which input, what to do; file:line of the throw.
#include <source_location>
#include <stdexcept>
#include <string>

namespace ddprun {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, std::source_location where = std::source_location::current());
  const char* file() const noexcept { return file_; }
  unsigned line() const noexcept { return line_; }

 private:
  const char* file_;
  unsigned line_;
};

/// A collective or store operation did not finish in time (e.g. a peer died or hangs).
class TimeoutError : public Error {
 public:
  using Error::Error;
};

}  // namespace ddprun

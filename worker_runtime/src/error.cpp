#include "ddprun/error.hpp"

namespace ddprun {

// what() stays the message alone, so that a user-facing line reads well; where it was thrown is kept
// apart (file(), line()) and shown by the error report next to the backtrace.
Error::Error(const std::string& message, std::source_location where)
    : std::runtime_error(message), file_(where.file_name()), line_(where.line()) {}

}  // namespace ddprun

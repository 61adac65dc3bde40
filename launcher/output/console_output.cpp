#include "launcher/output/console_output.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <memory>

#include "launcher/output/console.hpp"

namespace ddprun::launcher {
namespace {

ConsoleOutput* installed = nullptr;  // the loop's thread only, like everything of the agent

/// Whether two descriptors lead to the same file (the same pipe, terminal or regular file).
bool same_file(int a, int b) {
  struct stat sa {};
  struct stat sb {};
  return ::fstat(a, &sa) == 0 && ::fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace

ConsoleOutput::ConsoleOutput(boost::asio::io_context& io) : out_(io, STDOUT_FILENO) {
  if (!same_file(STDOUT_FILENO, STDERR_FILENO)) err_ = std::make_unique<ConsoleWriter>(io, STDERR_FILENO);
  installed = this;
}

ConsoleOutput::~ConsoleOutput() {
  if (installed == this) installed = nullptr;
}

void ConsoleOutput::when_drained(std::function<void()> done) {
  out_.when_drained([this, done = std::move(done)]() mutable { err().when_drained(std::move(done)); });
}

void write_stderr(std::string_view text) {
  if (installed != nullptr) return installed->err().write(text);
  write_all(STDERR_FILENO, text);
}

}  // namespace ddprun::launcher

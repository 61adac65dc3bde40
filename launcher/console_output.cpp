#include "console_output.hpp"

#include <unistd.h>

#include <memory>

#include "console.hpp"

namespace ddprun::launcher {
namespace {

ConsoleOutput* installed = nullptr;  // the loop's thread only, like everything of the agent

}  // namespace

ConsoleOutput::ConsoleOutput(boost::asio::io_context& io) : out_(io, STDOUT_FILENO), err_(io, STDERR_FILENO) {
  installed = this;
}

ConsoleOutput::~ConsoleOutput() {
  if (installed == this) installed = nullptr;
}

void ConsoleOutput::when_drained(std::function<void()> done) {
  out_.when_drained([this, done = std::move(done)]() mutable { err_.when_drained(std::move(done)); });
}

void write_stderr(std::string_view text) {
  if (installed != nullptr) return installed->err().write(text);
  write_all(STDERR_FILENO, text);
}

}  // namespace ddprun::launcher

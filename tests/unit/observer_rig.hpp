#pragma once
/// What the tests of the agent's observers (launcher/observe/: EventRecorder, StatusWatch,
/// NodeStacks, HangWatch, BoardLink, StatusService) share: a loop run until something happened
/// (bounded, never a timing assertion), a real short-lived child process to watch, a console that
/// goes nowhere, and a StoreFactory whose every connection is the one in-process store.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without including it

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/output/console_writer.hpp"
#include "rendezvous/in_process_store.hpp"
#include "rendezvous/store_factory.hpp"

namespace ddprun::testing_support {

/// A generous bound on anything that must not hang; never a timing assertion.
inline constexpr std::chrono::seconds kNoHang{60};

/// Runs `io` in short turns until `done` holds; false when `bound` passed first.
inline bool run_until(boost::asio::io_context& io, const std::function<bool()>& done,
                      std::chrono::milliseconds bound = kNoHang) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    io.restart();  // a loop that ran out of work stays stopped until restarted
    io.run_for(std::chrono::milliseconds(10));
  }
  return true;
}

/// Runs every handler that is ready now, and those they make ready, without waiting for a timer.
inline void run_ready(boost::asio::io_context& io) {
  io.restart();
  while (io.poll() > 0) io.restart();
}

/// A real worker-like child: `/bin/sleep 600`, killed (SIGKILL) and reaped when this goes, and
/// with the test should the test die first (PR_SET_PDEATHSIG).
class SleepChild {
 public:
  SleepChild() {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::execl("/bin/sleep", "sleep", "600", static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~SleepChild() {
    if (pid_ > 1) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  SleepChild(const SleepChild&) = delete;
  SleepChild& operator=(const SleepChild&) = delete;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

/// ddprun's console for a test: a ConsoleWriter on /dev/null (not a terminal: no status block).
class NullConsole {
 public:
  explicit NullConsole(boost::asio::io_context& io)
      : fd_(::open("/dev/null", O_WRONLY | O_CLOEXEC)), writer_(std::make_unique<launcher::ConsoleWriter>(io, fd_)) {}
  ~NullConsole() {
    writer_.reset();
    ::close(fd_);
  }
  NullConsole(const NullConsole&) = delete;
  NullConsole& operator=(const NullConsole&) = delete;
  launcher::ConsoleWriter& writer() { return *writer_; }

 private:
  int fd_;
  std::unique_ptr<launcher::ConsoleWriter> writer_;
};

/// One connection to a shared InProcessStore: what a StoreFactory hands each opener (a JobBoard
/// owns its connection; here every connection reaches the same keys, as every TCPStore client of
/// one server does).
class InProcessConnection final : public rendezvous::Store {
 public:
  explicit InProcessConnection(rendezvous::InProcessStore& store) : store_(store) {}
  rendezvous::Task<void> set(std::string key, std::string value) override {
    co_await store_.set(std::move(key), std::move(value));
  }
  rendezvous::Task<std::string> get(std::string key, std::chrono::milliseconds timeout) override {
    co_return co_await store_.get(std::move(key), timeout);
  }
  rendezvous::Task<std::int64_t> add(std::string key, std::int64_t delta) override {
    co_return co_await store_.add(std::move(key), delta);
  }
  rendezvous::Task<std::string> compare_set(std::string key, std::string expected, std::string desired) override {
    co_return co_await store_.compare_set(std::move(key), std::move(expected), std::move(desired));
  }
  rendezvous::Task<bool> check(std::vector<std::string> keys) override { co_return co_await store_.check(std::move(keys)); }
  rendezvous::Task<void> wait(std::vector<std::string> keys, std::chrono::milliseconds timeout) override {
    co_await store_.wait(std::move(keys), timeout);
  }
  rendezvous::Task<std::vector<std::string>> multi_get(std::vector<std::string> keys,
                                                       std::chrono::milliseconds timeout) override {
    co_return co_await store_.multi_get(std::move(keys), timeout);
  }
  std::string address() const override { return store_.address(); }

 private:
  rendezvous::InProcessStore& store_;
};

/// A StoreFactory over `store` (which must outlive every connection it opens).
inline rendezvous::StoreFactory in_process_factory(rendezvous::InProcessStore& store) {
  rendezvous::StoreFactory factory;
  factory.open = [&store](boost::asio::any_io_executor, std::chrono::milliseconds, std::chrono::milliseconds) {
    return std::unique_ptr<rendezvous::Store>(std::make_unique<InProcessConnection>(store));
  };
  factory.address = store.address();
  return factory;
}

}  // namespace ddprun::testing_support

#pragma once
/// Tests of coroutines (rendezvous::Task): spawn one on an io_context and look at its outcome when
/// it has one, or run one to completion from a plain thread (a test's node, a benchmark's agent).
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without including it

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "rendezvous/store.hpp"

namespace ddprun::testing {

/// What a spawned coroutine ended with, once `done`.
template <class T>
struct Spawned {
  bool done = false;
  std::optional<T> value;
  std::exception_ptr error;

  /// The value (a copy: get() may be called again), or the exception rethrown.
  T get() const {
    if (!done) throw std::logic_error("the coroutine has not completed");
    if (error) std::rethrow_exception(error);
    return *value;
  }
  /// The exception's what(), or "" when it completed without one.
  std::string error_message() const {
    if (!error) return {};
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      return e.what();
    }
  }
};

template <>
struct Spawned<void> {
  bool done = false;
  std::exception_ptr error;
  void get() const {
    if (!done) throw std::logic_error("the coroutine has not completed");
    if (error) std::rethrow_exception(error);
  }
  std::string error_message() const {
    if (!error) return {};
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      return e.what();
    }
  }
};

/// Starts `task` on `io` (it runs when the io_context does).
template <class T>
std::shared_ptr<Spawned<T>> spawn(boost::asio::io_context& io, rendezvous::Task<T> task) {
  auto outcome = std::make_shared<Spawned<T>>();
  if constexpr (std::is_void_v<T>) {
    boost::asio::co_spawn(io, std::move(task), [outcome](std::exception_ptr error) {
      outcome->error = error;
      outcome->done = true;
    });
  } else {
    boost::asio::co_spawn(io, std::move(task), [outcome](std::exception_ptr error, T value) {
      outcome->error = error;
      if (!error) outcome->value = std::move(value);
      outcome->done = true;
    });
  }
  return outcome;
}

/// Runs `task` on `io` until it completes (from the thread that owns `io`); returns its value or
/// rethrows its exception. For a blocking caller of a coroutine API.
template <class T>
T run_to_completion(boost::asio::io_context& io, rendezvous::Task<T> task) {
  auto outcome = spawn(io, std::move(task));
  while (!outcome->done) {
    io.restart();
    io.run_one();
  }
  return outcome->get();
}

}  // namespace ddprun::testing

#pragma once
/// Tests of coroutines (rendezvous::Task): spawn one on an io_context and look at its outcome when
/// it has one, or run one to completion from a plain thread (a test's node), bounded so that a
/// test fails instead of hanging.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without including it

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "rendezvous/store.hpp"

namespace ddprun::testing {

/// A generous bound on anything that must not hang; never a timing assertion.
inline constexpr std::chrono::milliseconds kNoHang{std::chrono::seconds(60)};

/// How a spawned coroutine ended, once `done` (what does not depend on its value).
struct SpawnedOutcome {
  bool done = false;
  std::exception_ptr error;

  /// Throws std::logic_error before it completed, and its exception after it threw.
  void rethrow() const {
    if (!done) throw std::logic_error("the coroutine has not completed");
    if (error) std::rethrow_exception(error);
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

/// What a spawned coroutine ended with, once `done`.
template <class T>
struct Spawned : SpawnedOutcome {
  std::optional<T> value;
  /// The value (a copy: get() may be called again), or the exception rethrown.
  T get() const {
    rethrow();
    return *value;
  }
};

template <>
struct Spawned<void> : SpawnedOutcome {
  void get() const { rethrow(); }
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

/// Runs `io` (all the work on it, from the thread that owns it) until `done()` holds or `bound`
/// has passed; returns done().
template <class Done>
bool run_until(boost::asio::io_context& io, Done done, std::chrono::milliseconds bound = kNoHang) {
  const auto give_up = std::chrono::steady_clock::now() + bound;
  while (!done() && std::chrono::steady_clock::now() < give_up) {
    io.restart();
    io.run_one_for(std::chrono::milliseconds(100));
  }
  return done();
}

/// Runs `task` on `io` until it completes (other work on `io` runs meanwhile); returns its value or
/// rethrows its exception. Throws std::runtime_error when it has not completed within `bound`.
template <class T>
T run_to_completion(boost::asio::io_context& io, rendezvous::Task<T> task, std::chrono::milliseconds bound = kNoHang) {
  auto outcome = spawn(io, std::move(task));
  if (!run_until(io, [&] { return outcome->done; }, bound)) {
    throw std::runtime_error("the coroutine did not complete within " + std::to_string(bound.count()) + " ms");
  }
  if constexpr (std::is_void_v<T>) {
    outcome->get();
  } else {
    outcome->rethrow();
    return std::move(*outcome->value);
  }
}

}  // namespace ddprun::testing

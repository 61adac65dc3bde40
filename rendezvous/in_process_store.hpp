#pragma once
/// InProcessStore: the Store interface (store.hpp) over a KeySpace (key_space.hpp, the server's own
/// state and semantics) in this process, for tests and table-driven checks of the round protocol:
/// several nodes, each a coroutine, share one store on one io_context.
///
/// A wait completes when another coroutine sets the key (the KeySpace's wake-up), or times out by
/// the store's clock: the real one, or manual time that the test moves with advance() /
/// advance_to_next_deadline(), so that deadlines are driven without sleeping. Give the protocol the
/// same clock (clock()).
///
/// Every operation first yields to the executor, as a round trip to a server would, so that
/// coroutines interleave as nodes do instead of one running to its next wait.
///
/// One thread: every call, every Task and advance() on the executor's thread. The store must
/// outlive every Task it returned.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without including it

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "rendezvous/clock.hpp"
#include "rendezvous/key_space.hpp"
#include "rendezvous/store.hpp"

namespace ddprun::rendezvous {

class InProcessStore final : public Store {
 public:
  enum class Time {
    real,    ///< steady_clock; waits time out by themselves (a timer each)
    manual,  ///< a clock that stands still until advance(): waits time out only then
  };

  explicit InProcessStore(boost::asio::any_io_executor executor, Time time = Time::real);
  InProcessStore(const InProcessStore&) = delete;
  InProcessStore& operator=(const InProcessStore&) = delete;

  /// The time the store's timeouts follow: for the protocol's deadlines.
  ClockFn clock() const;
  /// Manual time only: moves the clock forward by `by` and times out every wait whose deadline
  /// has come (they throw StoreTimeout when the io_context next runs them).
  void advance(std::chrono::milliseconds by);
  /// Manual time: the earliest deadline of the waits in progress, if any.
  std::optional<SteadyTime> next_deadline() const;
  /// Manual time: moves the clock to the next deadline (advance()); false when nothing waits.
  bool advance_to_next_deadline();

  /// The keys, as a server's would hold them (without the "/" a TCPStore client adds).
  KeySpace& key_space() { return keys_; }

  Task<void> set(std::string key, std::string value) override;
  Task<std::string> get(std::string key, std::chrono::milliseconds timeout) override;
  Task<std::int64_t> add(std::string key, std::int64_t delta) override;
  Task<std::string> compare_set(std::string key, std::string expected, std::string desired) override;
  Task<bool> check(std::vector<std::string> keys) override;
  Task<void> wait(std::vector<std::string> keys, std::chrono::milliseconds timeout) override;
  Task<std::vector<std::string>> multi_get(std::vector<std::string> keys, std::chrono::milliseconds timeout) override;
  std::string address() const override { return "in-process"; }

 private:
  struct Waiter;
  /// Yields to the executor: the round trip a request would cost.
  Task<void> round_trip();
  /// Executes `request` as `session`, wakes the waits it completes; returns the reply's bytes.
  /// Throws StoreError when the KeySpace refuses the request.
  std::string execute_raw(SessionId session, const wire::Request& request);
  /// execute_raw() in the session of the operations that are not waits, its reply decoded.
  wire::Reply execute(const wire::Request& request);
  SteadyTime now() const;

  boost::asio::any_io_executor executor_;
  Time time_;
  SteadyTime manual_now_;
  KeySpace keys_;
  /// Operations that are not waits share one session; each wait has one of its own, so that any
  /// number of coroutines may wait at once (a KeySpace session holds one live WAIT).
  SessionId next_session_ = 1;
  std::unordered_map<SessionId, Waiter*> waiters_;
};

}  // namespace ddprun::rendezvous

#include "rendezvous/store_client.hpp"

#include "rendezvous/async_store_client.hpp"  // first of the Asio includes: it brings <utility>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <exception>
#include <mutex>
#include <optional>
#include <stdexcept>

namespace ddprun::rendezvous {

/// The AsyncStoreClient on an io_context of its own, run by the calling thread for one call at a
/// time (the mutex) until that call's coroutine completes.
class StoreClient::Impl {
 public:
  explicit Impl(StoreClientOptions options)
      : client(io.get_executor(), std::move(options), AsyncStoreClient::Loop::private_blocking) {}

  /// Runs `task` to completion on the private loop; returns its result or rethrows what it threw.
  template <class T>
  T run(Task<T> task) {
    std::lock_guard lock(mutex);
    std::exception_ptr error;
    std::optional<T> value;
    bool done = false;
    boost::asio::co_spawn(io, std::move(task), [&](std::exception_ptr e, T result) {
      error = e;
      if (!e) value.emplace(std::move(result));
      done = true;
    });
    drive(done);
    if (error) std::rethrow_exception(error);
    return std::move(*value);
  }

  void run(Task<void> task) {
    std::lock_guard lock(mutex);
    std::exception_ptr error;
    bool done = false;
    boost::asio::co_spawn(io, std::move(task), [&](std::exception_ptr e) {
      error = e;
      done = true;
    });
    drive(done);
    if (error) std::rethrow_exception(error);
  }

  /// Thread-safe: the cancel runs on the loop, ending the call in progress (or, posted ahead of
  /// it, the next one), and the client stays cancelled.
  void interrupt() {
    if (interrupted.exchange(true)) return;
    boost::asio::post(io, [this] { client.cancel(); });
  }

  // Declared first, destroyed last: handlers still queued (a posted cancel, the deadline timer's
  // wait) are destroyed with it, never run after the client is gone.
  boost::asio::io_context io{1};
  AsyncStoreClient client;
  std::mutex mutex;
  std::atomic<bool> interrupted{false};
  /// The client's dialect as of the last call, for dialect() from any thread.
  std::atomic<wire::Dialect> dialect{wire::Dialect::current};

 private:
  /// Runs handlers until `done`; the deadline timer may stay armed between calls (it is not waited
  /// for). A loop left with no work while the call is pending would be a lost coroutine.
  void drive(const bool& done) {
    if (io.stopped()) io.restart();
    while (!done) {
      if (io.run_one() == 0 && !done) {
        io.restart();
        throw std::logic_error("StoreClient: the call's coroutine was lost (no work left on its loop)");
      }
    }
    dialect = client.dialect();
  }
};

StoreClient::StoreClient(StoreClientOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  if (!impl_->client.options().defer_connect) impl_->run(impl_->client.connect());
}

StoreClient::~StoreClient() = default;

void StoreClient::connect() { impl_->run(impl_->client.connect()); }

std::string StoreClient::address() const { return impl_->client.address(); }

void StoreClient::interrupt() { impl_->interrupt(); }

wire::Dialect StoreClient::dialect() const { return impl_->dialect.load(); }

void StoreClient::set(std::string_view key, std::string_view value) {
  impl_->run(impl_->client.set(std::string(key), std::string(value)));
}

std::string StoreClient::get(std::string_view key) { return get(key, impl_->client.options().timeout); }

std::string StoreClient::get(std::string_view key, std::chrono::milliseconds timeout) {
  return impl_->run(impl_->client.get(std::string(key), timeout));
}

std::int64_t StoreClient::add(std::string_view key, std::int64_t delta) {
  return impl_->run(impl_->client.add(std::string(key), delta));
}

std::string StoreClient::compare_set(std::string_view key, std::string_view expected, std::string_view desired) {
  return impl_->run(impl_->client.compare_set(std::string(key), std::string(expected), std::string(desired)));
}

bool StoreClient::check(const std::vector<std::string>& keys) { return impl_->run(impl_->client.check(keys)); }

void StoreClient::wait(const std::vector<std::string>& keys) { wait(keys, impl_->client.options().timeout); }

void StoreClient::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  impl_->run(impl_->client.wait(keys, timeout));
}

std::int64_t StoreClient::num_keys() { return impl_->run(impl_->client.num_keys()); }

bool StoreClient::delete_key(std::string_view key) { return impl_->run(impl_->client.delete_key(std::string(key))); }

void StoreClient::append(std::string_view key, std::string_view value) {
  impl_->run(impl_->client.append(std::string(key), std::string(value)));
}

std::vector<std::string> StoreClient::multi_get(const std::vector<std::string>& keys) {
  return impl_->run(impl_->client.multi_get(keys, impl_->client.options().timeout));
}

void StoreClient::multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values) {
  impl_->run(impl_->client.multi_set(keys, values));
}

void StoreClient::queue_push(std::string_view key, std::string_view value) {
  impl_->run(impl_->client.queue_push(std::string(key), std::string(value)));
}

std::string StoreClient::queue_pop(std::string_view key, std::chrono::milliseconds timeout) {
  return impl_->run(impl_->client.queue_pop(std::string(key), timeout));
}

std::int64_t StoreClient::queue_len(std::string_view key) {
  return impl_->run(impl_->client.queue_len(std::string(key)));
}

void StoreClient::ping() { impl_->run(impl_->client.ping()); }

}  // namespace ddprun::rendezvous

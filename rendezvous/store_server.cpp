#include "rendezvous/store_server.hpp"

#include <pthread.h>
#include <sys/socket.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <future>
#include <thread>

#include "common/listen.hpp"
#include "rendezvous/endpoint.hpp"
#include "rendezvous/store_connection.hpp"
#include "rendezvous/store_error.hpp"

namespace asio = boost::asio;
using asio::ip::tcp;

namespace ddprun::rendezvous {
namespace {

/// The kernel clamps this to net.core.somaxconn; ask for plenty, ranks connect all at once.
constexpr int kListenBacklog = 65535;

}  // namespace

class StoreServer::Impl {
 public:
  explicit Impl(StoreServerOptions options)
      : options_(std::move(options)), acceptor_(io_), shared_(options_.limits) {
    shared_.token = options_.token;
  }

  void bind_and_listen() {
    boost::system::error_code ec;
    auto endpoint = common::endpoint_to_bind(io_, options_.host, options_.port, ec);
    if (!endpoint) throw StoreError("store: cannot resolve host " + options_.host + ": " + ec.message());
    ec = common::bind_and_listen(acceptor_, *endpoint, kListenBacklog);
    if (ec) {
      throw StoreError("store: cannot listen on " + format_endpoint(options_.host, options_.port) + ": " +
                       ec.message());
    }
  }

  void adopt(int listening_fd) {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    if (::getsockname(listening_fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      throw StoreError("store: the socket handed over is not bound");
    }
    boost::system::error_code ec;
    acceptor_.assign(address.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), listening_fd, ec);
    if (!ec) acceptor_.listen(kListenBacklog, ec);  // raises the backlog of a socket bound elsewhere
    if (ec) throw StoreError("store: cannot serve on the socket handed over: " + ec.message());
  }

  int port() const { return acceptor_.local_endpoint().port(); }

  void start() {
    for (const auto& [key, value] : options_.initial_keys) {
      wire::Request request;
      request.op = wire::Op::set;
      request.keys = {"/" + key};
      request.values = {value};
      shared_.keys.execute(/*session=*/0, request);  // no client yet: nobody to reply to
    }
    accept();
    thread_ = std::thread([this] {
      // Named, so that a look at the agent's threads (/proc/PID/task/*/comm, top -H) tells them apart.
      pthread_setname_np(pthread_self(), "ddprun-store");
      io_.run();
    });
  }

  void stop() {
    if (stopped_) return;
    stopped_ = true;
    on_server([this] {
      boost::system::error_code ignored;
      acceptor_.close(ignored);
      retry_timer_.cancel();
      close_all_connections();
      work_.reset();
    });
    if (thread_.joinable()) thread_.join();
  }

  void clear() {
    on_server([this] {
      close_all_connections();
      shared_.keys.clear();
    });
  }

  std::size_t erase_all_but(const std::string& kept) {
    return on_server([this, kept] { return shared_.keys.erase_all_but("/" + kept); });
  }

  bool wait_until_idle(std::chrono::milliseconds timeout) {
    std::promise<void> idle;
    auto future = idle.get_future();
    on_server([&] {
      if (shared_.sessions.empty()) {
        idle.set_value();
      } else {
        shared_.on_idle = [&idle] { idle.set_value(); };
      }
    });
    bool became_idle = future.wait_for(timeout) == std::future_status::ready;
    on_server([this] { shared_.on_idle = nullptr; });  // before `idle` goes
    return became_idle;
  }

  std::size_t connection_count() {
    return on_server([this] { return shared_.sessions.size(); });
  }
  std::size_t key_count() {
    return on_server([this] { return shared_.keys.key_count(); });
  }

 private:
  /// Runs `f` on the server's thread and waits for its result (or runs it here when the thread is
  /// not running), so that the server's state is only ever touched by one thread.
  template <class F>
  auto on_server(F f) -> decltype(f()) {
    if (!thread_.joinable() || std::this_thread::get_id() == thread_.get_id()) return f();
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto result = task.get_future();
    asio::post(io_, [&task] { task(); });
    return result.get();
  }

  void accept() {
    acceptor_.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
      if (ec) {
        // Out of descriptors (EMFILE) or the like: back off briefly instead of spinning.
        retry_timer_.expires_after(std::chrono::milliseconds(10));
        retry_timer_.async_wait([this](const boost::system::error_code& timer_ec) {
          if (!timer_ec) accept();
        });
        return;
      }
      if (shared_.sessions.size() >= options_.max_connections) {
        boost::system::error_code ignored;
        socket.close(ignored);
      } else {
        SessionId id = next_session_++;
        auto connection = std::make_shared<StoreConnection>(std::move(socket), id, shared_);
        shared_.sessions.emplace(id, connection);
        connection->start();
      }
      accept();
    });
  }

  void close_all_connections() {
    std::vector<std::shared_ptr<StoreConnection>> open;
    for (auto& [id, weak] : shared_.sessions) {
      if (auto connection = weak.lock()) open.push_back(std::move(connection));
    }
    for (auto& connection : open) connection->close();
    shared_.sessions.clear();
  }

  StoreServerOptions options_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_ = asio::make_work_guard(io_);
  tcp::acceptor acceptor_;
  asio::steady_timer retry_timer_{io_};
  ServerShared shared_;
  SessionId next_session_ = 1;
  std::thread thread_;
  bool stopped_ = false;
};

StoreServer::StoreServer(StoreServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  impl_->bind_and_listen();
}

StoreServer::StoreServer(StoreServerOptions options, int listening_fd)
    : impl_(std::make_unique<Impl>(std::move(options))) {
  impl_->adopt(listening_fd);
}

StoreServer::~StoreServer() { impl_->stop(); }

int StoreServer::port() const { return impl_->port(); }
void StoreServer::start() { impl_->start(); }
void StoreServer::stop() { impl_->stop(); }
void StoreServer::clear() { impl_->clear(); }
std::size_t StoreServer::erase_all_but(const std::string& kept) { return impl_->erase_all_but(kept); }
std::size_t StoreServer::connection_count() const { return impl_->connection_count(); }
bool StoreServer::wait_until_idle(std::chrono::milliseconds timeout) { return impl_->wait_until_idle(timeout); }
std::size_t StoreServer::key_count() const { return impl_->key_count(); }

}  // namespace ddprun::rendezvous

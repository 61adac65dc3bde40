#include "launcher/observe/status_http.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <cerrno>
#include <cstring>
#include <list>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/listen.hpp"
#include "launcher/base/errors.hpp"
#include "launcher/observe/status_json.hpp"
#include "launcher/observe/status_page.hpp"
#include "launcher/observe/status_request.hpp"
#include "rendezvous/endpoint.hpp"

namespace ddprun::launcher {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;
using nlohmann::json;

namespace {

constexpr int kListenBacklog = 128;

/// Worker text may be any bytes: invalid UTF-8 becomes U+FFFD rather than an exception.
std::string dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string error_json(const std::string& message) { return dump(json{{"error", message}}); }

/// The page may run its own inline script and style and talk to its own origin, nothing else.
constexpr const char* kPagePolicy =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// A connection, as its listener sees it: whether it may be evicted, and how to end it.
class Session {
 public:
  virtual ~Session() = default;
  virtual void close() = 0;
  /// Waiting for (the rest of) a request: the first to go when the listener is full.
  bool reading = true;
};

}  // namespace

namespace status_http_detail {

struct Shared {
  StatusSource* source = nullptr;  ///< null once stopped: late callbacks answer no one
  std::optional<std::string> token;
  StatusHttpLimits limits;
  EndpointCounters counters;
};

/// One listener's sessions, oldest first, and the rule that keeps them bounded.
class Listener {
 public:
  virtual ~Listener() = default;
  virtual void close() = 0;

  /// Room for one more connection: when full, the oldest session still reading its request goes;
  /// false when every session is busy answering (the new one is then refused).
  bool make_room(EndpointCounters& counters, std::size_t max) {
    if (sessions_.size() < max) return true;
    for (Session* session : sessions_) {
      if (session->reading) {
        ++counters.refused_connections;
        session->close();  // leaves sessions_
        return true;
      }
    }
    ++counters.refused_connections;
    return false;
  }
  std::list<Session*>::iterator enlist(Session* session) { return sessions_.insert(sessions_.end(), session); }
  void delist(std::list<Session*>::iterator at) { sessions_.erase(at); }
  void close_sessions() {
    while (!sessions_.empty()) sessions_.front()->close();
  }

 private:
  std::list<Session*> sessions_;
};

}  // namespace status_http_detail

namespace {

using status_http_detail::Listener;
using status_http_detail::Shared;

template <class Socket>
class HttpSession : public Session, public std::enable_shared_from_this<HttpSession<Socket>> {
 public:
  HttpSession(Socket socket, std::shared_ptr<Shared> shared, std::shared_ptr<Listener> listener, bool unix_socket)
      : socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        shared_(std::move(shared)),
        listener_(std::move(listener)),
        unix_socket_(unix_socket),
        buffer_(shared_->limits.max_header_bytes + 1024) {
    place_ = listener_->enlist(this);
  }
  ~HttpSession() override { close(); }

  void start() { read_request(); }

  void close() override {
    if (closed_) return;
    closed_ = true;
    listener_->delist(place_);
    ++deadline_;
    timer_.cancel();
    error_code ignored;
    socket_.shutdown(asio::socket_base::shutdown_both, ignored);
    socket_.close(ignored);
  }

 private:
  /// Closes the connection unless the step armed now ends within `limit`.
  void arm(std::chrono::milliseconds limit) {
    const std::uint64_t deadline = ++deadline_;
    timer_.expires_after(limit);
    timer_.async_wait([weak = this->weak_from_this(), deadline](const error_code& ec) {
      auto self = weak.lock();
      if (ec || !self || self->deadline_ != deadline || self->closed_) return;
      // An idle keep-alive connection that sent nothing of a next request just ends; one that
      // is slow to send a request, or to take a reply, is dropped for it.
      const bool idle = self->reading && !self->parser_->got_some() && self->buffer_.size() == 0;
      if (!idle) ++self->shared_->counters.dropped_connections;
      self->close();
    });
  }

  void read_request() {
    reading = true;
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(shared_->limits.max_header_bytes));
    parser_->body_limit(0);
    arm(shared_->limits.request_timeout);
    http::async_read(socket_, buffer_, *parser_,
                     [self = this->shared_from_this()](const error_code& ec, std::size_t) { self->on_read(ec); });
  }

  void on_read(const error_code& ec) {
    if (closed_) return;
    reading = false;
    if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset) {
      return close();  // the client is done
    }
    if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
      ++shared_->counters.dropped_connections;
      return reply_error(http::status::request_header_fields_too_large, "request header too large", true);
    }
    if (ec == http::error::body_limit || ec == http::error::unexpected_body) {
      ++shared_->counters.dropped_connections;
      return reply_error(http::status::payload_too_large, "a request body is not accepted", true);
    }
    if (ec) {
      ++shared_->counters.dropped_connections;
      if (ec.category() == http::make_error_code(http::error::bad_method).category()) {  // malformed: say so
        return reply_error(http::status::bad_request, "bad request: " + ec.message(), true);
      }
      return close();
    }
    const auto& request = parser_->get();
    ++shared_->counters.requests;
    version_ = request.version();
    keep_alive_ = request.keep_alive();
    head_ = request.method() == http::verb::head;
    StatusRequestFacts facts;
    facts.method = std::string_view(request.method_string().data(), request.method_string().size());
    facts.target = std::string_view(request.target().data(), request.target().size());
    auto authorization = request[http::field::authorization];
    facts.authorization = std::string_view(authorization.data(), authorization.size());
    auto host = request[http::field::host];
    facts.host = std::string_view(host.data(), host.size());
    auto fetch_site = request["Sec-Fetch-Site"];
    facts.fetch_site = std::string_view(fetch_site.data(), fetch_site.size());
    facts.unix_socket = unix_socket_;
    serve(decide_status_request(facts, shared_->token));
  }

  void serve(const StatusDecision& decision) {
    switch (decision.verdict) {
      case StatusVerdict::not_found: return reply_error(http::status::not_found, "no such resource", false);
      case StatusVerdict::method_not_allowed:
        return reply_error(http::status::method_not_allowed, "only GET and HEAD", false);
      case StatusVerdict::unauthorized:
        return reply_error(http::status::unauthorized,
                           "this endpoint requires the store token (Authorization: Bearer TOKEN or ?token=TOKEN)",
                           false);
      case StatusVerdict::forbidden_host:
        return reply_error(http::status::forbidden, "the Host header must name a loopback address", true);
      case StatusVerdict::forbidden_origin:
        return reply_error(http::status::forbidden, "a request from another site's page", true);
      case StatusVerdict::serve: break;
    }
    StatusSource* source = shared_->source;
    if (source == nullptr) return reply_error(http::status::service_unavailable, "the job is ending", true);
    switch (decision.resource) {
      case StatusResource::page:
        return reply(http::status::ok, "text/html; charset=utf-8", std::string(status_page_html()), false);
      case StatusResource::status: {
        json body = to_json(source->status());
        std::vector<JobEvent> events = source->recent_events();
        const std::size_t keep = std::min(events.size(), shared_->limits.max_events);
        json list = json::array();
        for (auto it = events.end() - static_cast<std::ptrdiff_t>(keep); it != events.end(); ++it) {
          list.push_back(to_json(*it));
        }
        body["events"] = std::move(list);
        return reply(http::status::ok, "application/json", dump(body), false);
      }
      case StatusResource::metrics:
        return reply(http::status::ok, "text/plain; version=0.0.4; charset=utf-8",
                     metrics_text(source->status(), shared_->counters), false);
      case StatusResource::stacks:
        arm(shared_->limits.stacks_timeout);
        source->capture_stacks([self = this->shared_from_this()](StacksReply stacks) {
          self->on_stacks(std::move(stacks));
        });
        return;
    }
  }

  void on_stacks(StacksReply stacks) {
    if (closed_) return;
    if (!stacks.error.empty()) return reply_error(http::status::service_unavailable, stacks.error, false);
    json ranks = json::array();
    for (const auto& rank : stacks.ranks) ranks.push_back(to_json(rank));
    json body = {{"ranks", std::move(ranks)}, {"digest", stacks.digest}};
    reply(http::status::ok, "application/json", dump(body), false);
  }

  void reply_error(http::status status, const std::string& message, bool close_after) {
    reply(status, "application/json", error_json(message), close_after);
  }

  void reply(http::status status, const char* type, std::string body, bool close_after) {
    if (body.size() > shared_->limits.max_reply_bytes) {
      body = error_json("the reply would be " + std::to_string(body.size()) + " bytes, more than the endpoint's " +
                        std::to_string(shared_->limits.max_reply_bytes));
      status = http::status::internal_server_error;
      type = "application/json";
    }
    auto response = std::make_shared<http::response<http::string_body>>(status, version_ == 0 ? 11 : version_);
    response->set(http::field::server, "ddprun");
    response->set(http::field::content_type, type);
    response->set(http::field::cache_control, "no-store");
    response->set("X-Content-Type-Options", "nosniff");
    if (std::string_view(type).starts_with("text/html")) response->set("Content-Security-Policy", kPagePolicy);
    if (status == http::status::unauthorized) response->set(http::field::www_authenticate, "Bearer realm=\"ddprun\"");
    if (status == http::status::method_not_allowed) response->set(http::field::allow, "GET, HEAD");
    const bool keep = keep_alive_ && !close_after;
    response->keep_alive(keep);
    response->body() = std::move(body);
    response->prepare_payload();
    if (head_) response->body().clear();  // Content-Length stays: that of the GET
    arm(shared_->limits.write_timeout);
    http::async_write(socket_, *response,
                      [self = this->shared_from_this(), response, keep](const error_code& ec, std::size_t) {
                        if (self->closed_) return;
                        if (ec || !keep) return self->close();
                        self->read_request();
                      });
  }

  Socket socket_;
  asio::steady_timer timer_;
  std::uint64_t deadline_ = 0;  ///< which arm() the timer stands for; a stale expiry closes nothing
  std::shared_ptr<Shared> shared_;
  std::shared_ptr<Listener> listener_;
  std::list<Session*>::iterator place_;
  bool unix_socket_;
  bool closed_ = false;
  beast::flat_buffer buffer_;  ///< bounded: a header past the limit fails the read, not the memory
  std::optional<http::request_parser<http::empty_body>> parser_;
  unsigned version_ = 11;
  bool keep_alive_ = false;
  bool head_ = false;
};

/// Accepts on `Protocol`'s acceptor, a session per connection, within the listener's bounds.
template <class Protocol>
class ProtocolListener : public Listener,
                         public std::enable_shared_from_this<ProtocolListener<Protocol>> {
 public:
  ProtocolListener(typename Protocol::acceptor acceptor, std::shared_ptr<Shared> shared)
      : acceptor_(std::move(acceptor)), retry_(acceptor_.get_executor()), shared_(std::move(shared)) {}

  void accept() {
    acceptor_.async_accept([self = this->shared_from_this()](const error_code& ec, typename Protocol::socket socket) {
      if (ec == asio::error::operation_aborted || !self->acceptor_.is_open()) return;
      if (ec) {
        // Out of descriptors (EMFILE) or the like: back off briefly rather than spin.
        self->retry_.expires_after(std::chrono::milliseconds(50));
        self->retry_.async_wait([self](const error_code& timer_ec) {
          if (!timer_ec) self->accept();
        });
        return;
      }
      self->admit(std::move(socket));
      self->accept();
    });
  }

  void close() override {
    error_code ignored;
    acceptor_.close(ignored);
    retry_.cancel();
    close_sessions();
  }

 private:
  void admit(typename Protocol::socket socket) {
    constexpr bool kUnix = std::is_same_v<Protocol, asio::local::stream_protocol>;
    if constexpr (kUnix) {
      // The socket file is 0600 already; the peer's uid is checked too, in case the folder or a
      // later chmod lets others reach it.
      ucred peer{};
      socklen_t length = sizeof peer;
      if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0 ||
          (peer.uid != ::geteuid() && peer.uid != 0)) {
        ++shared_->counters.refused_connections;
        return;  // the socket closes as it goes
      }
    }
    if (!make_room(shared_->counters, shared_->limits.max_connections)) return;
    auto session = std::make_shared<HttpSession<typename Protocol::socket>>(std::move(socket), shared_,
                                                                           this->shared_from_this(), kUnix);
    session->start();
  }

  typename Protocol::acceptor acceptor_;
  asio::steady_timer retry_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace

StatusHttpServer::StatusHttpServer(asio::io_context& io, StatusSource& source, std::optional<std::string> token,
                                   StatusHttpLimits limits)
    : io_(io), shared_(std::make_shared<Shared>()) {
  shared_->source = &source;
  shared_->token = std::move(token);
  shared_->limits = limits;
}

StatusHttpServer::~StatusHttpServer() { stop(); }

int StatusHttpServer::listen_tcp(const std::string& host, int port) {
  const std::string where = rendezvous::format_endpoint(host, port);
  error_code ec;
  auto endpoint = common::endpoint_to_bind(io_, host, port, ec);
  if (!endpoint) {
    throw LaunchError("cannot serve the status endpoint on " + where + ": cannot resolve " + host +
                      (ec ? ": " + ec.message() : std::string()));
  }
  asio::ip::tcp::acceptor acceptor(io_);
  ec = common::bind_and_listen(acceptor, *endpoint, kListenBacklog);
  if (ec) throw LaunchError("cannot serve the status endpoint on " + where + ": " + ec.message());
  const int bound = acceptor.local_endpoint().port();
  auto listener = std::make_shared<ProtocolListener<asio::ip::tcp>>(std::move(acceptor), shared_);
  listener->accept();
  listeners_.push_back(std::move(listener));
  return bound;
}

void StatusHttpServer::listen_unix(const std::string& path) {
  using asio::local::stream_protocol;
  auto fail = [&](const std::string& why) -> LaunchError {
    return LaunchError("cannot serve the status socket " + path + ": " + why);
  };
  if (path.size() >= sizeof(sockaddr_un{}.sun_path)) throw fail("the path is longer than a socket address holds");
  struct stat existing {};
  if (::lstat(path.c_str(), &existing) == 0) {
    if (!S_ISSOCK(existing.st_mode)) throw fail("something else is at that path");
    stream_protocol::socket probe(io_);
    error_code ec;
    probe.open(stream_protocol(), ec);
    if (!ec) probe.non_blocking(true, ec);  // a live server with a full backlog must not hold the loop
    if (!ec) probe.connect(stream_protocol::endpoint(path), ec);
    if (!ec || ec == asio::error::would_block || ec == asio::error::try_again) {
      throw fail("another process serves on it");
    }
    ::unlink(path.c_str());  // a dead one, left by a process that was killed
  }
  stream_protocol::acceptor acceptor(io_);
  error_code ec;
  acceptor.open(stream_protocol(), ec);
  // Owner-only from the start: the mode of a socket's file is taken from the socket at bind().
  if (!ec && ::fchmod(acceptor.native_handle(), 0600) != 0) ec = error_code(errno, boost::system::system_category());
  if (!ec) acceptor.bind(stream_protocol::endpoint(path), ec);
  const bool bound_here = !ec;
  if (!ec && ::chmod(path.c_str(), 0600) != 0) ec = error_code(errno, boost::system::system_category());
  if (!ec) acceptor.listen(kListenBacklog, ec);
  if (ec) {
    if (bound_here) ::unlink(path.c_str());
    throw fail(ec.message());
  }
  struct stat bound {};
  if (::stat(path.c_str(), &bound) == 0) unix_inode_ = bound.st_ino;
  unix_path_ = path;
  auto listener = std::make_shared<ProtocolListener<stream_protocol>>(std::move(acceptor), shared_);
  listener->accept();
  listeners_.push_back(std::move(listener));
}

void StatusHttpServer::stop() {
  shared_->source = nullptr;
  for (auto& listener : listeners_) listener->close();
  listeners_.clear();
  if (!unix_path_.empty()) {
    struct stat now {};
    // Only our own socket: after a replacement by someone else, theirs stays.
    if (::lstat(unix_path_.c_str(), &now) == 0 && now.st_ino == unix_inode_) ::unlink(unix_path_.c_str());
    unix_path_.clear();
  }
}

EndpointCounters StatusHttpServer::counters() const { return shared_->counters; }

}  // namespace ddprun::launcher

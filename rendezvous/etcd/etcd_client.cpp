#include "rendezvous/etcd/etcd_client.hpp"

#include <unistd.h>

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without including it

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "rendezvous/deadline.hpp"  // describe_duration
#include "rendezvous/etcd/etcd_json.hpp"
#include "rendezvous/etcd/etcd_peer.hpp"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace ddprun::rendezvous {
namespace {

constexpr auto use_awaitable = asio::use_awaitable;

/// Something went wrong with one member: try the next.
struct MemberFailed {
  explicit MemberFailed(std::string why_, std::exception_ptr definitive_ = nullptr, bool silent_close_ = false)
      : why(std::move(why_)), definitive(std::move(definitive_)), silent_close(silent_close_) {}
  std::string why;
  /// Set when this member will not do better on another try (its TLS refused us or did not verify,
  /// it speaks another protocol, it is not etcd): what to throw once every member failed so. One
  /// member with an expired certificate must not end a job that the others can serve.
  std::exception_ptr definitive;
  /// The member closed a fresh connection on our request without a byte (counted: etcd_peer.hpp).
  bool silent_close = false;
};

/// A MemberFailed that is `error` when every member fails so.
template <class Error>
MemberFailed definitively(Error error, bool silent_close = false) {
  std::string why = error.what();
  return MemberFailed{std::move(why), std::make_exception_ptr(std::move(error)), silent_close};
}

std::string ms_text(milliseconds ms) { return describe_duration(ms); }

/// An error OpenSSL reported (an alert the peer sent, a certificate that did not verify, bytes that
/// are not TLS), as opposed to the connection breaking.
bool is_tls_error(const boost::system::error_code& ec) { return ec.category() == asio::error::get_ssl_category(); }

/// The peer answered our TLS hello with something that is not TLS (a plain HTTP listener).
bool is_not_tls(const boost::system::error_code& ec) {
  return is_tls_error(ec) && ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == SSL_R_WRONG_VERSION_NUMBER;
}

/// The connection ended without a byte of answer.
bool is_closed(const boost::system::error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset;
}

}  // namespace

/// Throws Error naming `what` when `path` cannot be opened for reading (OpenSSL would only say
/// "asio.ssl error").
static void check_readable(const std::string& path, const std::string& what) {
  if (::access(path.c_str(), R_OK) != 0) {
    throw Error("cannot read the etcd " + what + "=" + path + ": " + std::strerror(errno));
  }
}

/// Whether the PEM key at `path` is encrypted (PKCS#8 "ENCRYPTED PRIVATE KEY", or the older
/// "Proc-Type: 4,ENCRYPTED" header).
static bool is_encrypted_key(const std::string& path) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.find("ENCRYPTED") != std::string::npos) return true;
  }
  return false;
}

EtcdCluster::EtcdCluster(EtcdOptions options) : options_(std::move(options)) {
  if (options_.endpoints.empty()) throw Error("no etcd member to talk to");
  if (!options_.tls) return;
  if (!options_.cacert.empty()) check_readable(options_.cacert, "CA certificate cacert");
  if (!options_.cert.empty()) check_readable(options_.cert, "client certificate cert");
  if (!options_.key.empty()) check_readable(options_.key, "client key key");
  tls_ = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
  boost::system::error_code ec;
  if (options_.cacert.empty()) {
    tls_->set_default_verify_paths(ec);
  } else {
    tls_->load_verify_file(options_.cacert, ec);
    if (ec) throw Error("cannot read the etcd CA certificate cacert=" + options_.cacert + ": " + ec.message());
  }
  tls_->set_verify_mode(asio::ssl::verify_peer);
  if (!options_.cert.empty()) {
    tls_->use_certificate_chain_file(options_.cert, ec);
    if (ec) throw Error("cannot read the etcd client certificate cert=" + options_.cert + ": " + ec.message());
    // Never OpenSSL's prompt: with no terminal it reads the passphrase from stdin (which, under
    // --hostfile, carries the launcher's keep-alive bytes), with one it waits for a user.
    tls_->set_password_callback([](std::size_t, asio::ssl::context::password_purpose) { return std::string(); }, ec);
    tls_->use_private_key_file(options_.key, asio::ssl::context::pem, ec);
    if (ec && is_encrypted_key(options_.key)) {
      throw Error("cannot read the etcd client key key=" + options_.key +
                  ": it is encrypted with a passphrase, which ddprun does not ask for; give it an unencrypted "
                  "copy, readable by you only (openssl pkey -in KEY -out KEY.plain)");
    }
    if (ec) throw Error("cannot read the etcd client key key=" + options_.key + ": " + ec.message());
  }
}

EtcdCluster::~EtcdCluster() = default;

void EtcdCluster::move_on(std::size_t member) {
  if (preferred_ == member) preferred_ = (member + 1) % options_.endpoints.size();
}

class EtcdConnection::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(asio::any_io_executor executor, std::shared_ptr<EtcdCluster> cluster_)
      : ex(executor), cluster(std::move(cluster_)), resolver(executor), pause(executor) {}

  asio::any_io_executor ex;
  std::shared_ptr<EtcdCluster> cluster;
  tcp::resolver resolver;
  asio::steady_timer pause;
  std::unique_ptr<beast::tcp_stream> plain;
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> secure;
  std::optional<std::size_t> member;  ///< connected to this one
  int exchanges = 0;                   ///< requests answered on this connection
  beast::flat_buffer buffer;
  bool cancelled = false;
  /// Per member, why it failed last (for EtcdUnreachable).
  std::map<std::size_t, std::string> failures;
  /// The members that failed definitively in this operation (MemberFailed::definitive).
  std::map<std::size_t, std::exception_ptr> definitive_failures;
  /// Per member, how many fresh connections in a row it closed on our request without a byte.
  std::map<std::size_t, int> silent_closes;
  void note(std::size_t index, const std::string& why) { failures[index] = why; }

  /// `index` failed: noted, and the next member is tried first; when every member failed
  /// definitively, the first listed member's error is thrown (the same whatever the order of tries).
  void member_failed(std::size_t index, const MemberFailed& failed) {
    note(index, failed.why);
    if (failed.definitive) definitive_failures[index] = failed.definitive;
    else definitive_failures.erase(index);
    if (!failed.silent_close) silent_closes.erase(index);
    cluster->move_on(index);
    close();
    if (failed.definitive && definitive_failures.size() == options().endpoints.size()) {
      std::rethrow_exception(definitive_failures.begin()->second);
    }
  }

  const EtcdOptions& options() const { return cluster->options(); }
  beast::tcp_stream& tcp_layer() { return secure ? beast::get_lowest_layer(*secure) : *plain; }
  std::string member_name(std::size_t i) const {
    const Endpoint& e = options().endpoints.at(i);
    return format_endpoint(e.host, e.port);
  }

  /// Closes the sockets; the streams stay until close() (an operation may still pend on them).
  void abort() {
    boost::system::error_code ignored;
    if (plain) plain->socket().close(ignored);
    if (secure) beast::get_lowest_layer(*secure).socket().close(ignored);
  }

  /// Drops the connection; from the operation's own coroutine only.
  void close() {
    boost::system::error_code ignored;
    if (plain) plain->socket().close(ignored);
    if (secure) beast::get_lowest_layer(*secure).socket().close(ignored);
    plain.reset();
    secure.reset();
    member.reset();
    exchanges = 0;
    buffer.clear();
  }

  /// The bytes the member sent that no parser took (after a read failed: what it said instead of HTTP).
  std::string_view unparsed() const {
    return std::string_view(static_cast<const char*>(buffer.data().data()), buffer.size());
  }

  /// A member that answered a fresh connection with bytes that cannot start an HTTP reply (an ssh
  /// banner, a binary protocol): never etcd, whatever the timing.
  std::optional<MemberFailed> not_http(std::size_t index) const {
    if (secure || exchanges != 0 || unparsed().empty() || etcd::could_be_http(unparsed())) return std::nullopt;
    return definitively(StoreError(etcd::not_http_error(member_name(index), unparsed())));
  }

  void check_cancelled() const {
    if (cancelled) throw StoreError("etcd at " + cluster->options().describe_endpoints() + ": interrupted");
  }

  [[noreturn]] void unreachable(milliseconds timeout) {
    std::string list;
    for (std::size_t i = 0; i < options().endpoints.size(); ++i) {
      if (!list.empty()) list += ", ";
      auto it = failures.find(i);
      list += member_name(i) + " (" + (it == failures.end() ? std::string("not tried") : it->second) + ")";
    }
    throw EtcdUnreachable("no etcd member answered within " + ms_text(timeout) + ": " + list);
  }

  /// Connects to the preferred member, bounded by `until`. Throws MemberFailed, EtcdAuthError.
  Task<void> connect(Clock::time_point until) {
    const std::size_t index = cluster->preferred();
    const Endpoint& endpoint = options().endpoints.at(index);
    boost::system::error_code ec;
    // The resolver has no deadline of its own: a name that takes long fails the member at `until`.
    auto results = co_await resolver.async_resolve(std::string(without_brackets(endpoint.host)),
                                                   std::to_string(endpoint.port),
                                                   asio::redirect_error(use_awaitable, ec));
    check_cancelled();
    if (ec) throw MemberFailed{"cannot resolve " + endpoint.host + ": " + ec.message()};
    if (cluster->tls()) {
      secure = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(ex, *cluster->tls());
    } else {
      plain = std::make_unique<beast::tcp_stream>(ex);
    }
    tcp_layer().expires_at(until);
    co_await tcp_layer().async_connect(results, asio::redirect_error(use_awaitable, ec));
    check_cancelled();
    if (ec == beast::error::timeout) throw MemberFailed{"no connection within " + ms_text(kMemberAnswer)};
    if (ec) throw MemberFailed{ec.message()};
    tcp_layer().socket().set_option(tcp::no_delay(true), ec);
    if (secure) {
      if (!SSL_set_tlsext_host_name(secure->native_handle(), endpoint.host.c_str())) {
        throw MemberFailed{"cannot set the TLS server name"};
      }
      // OpenSSL checks the name itself (not a verify callback), so that a mismatch is reported as
      // such ("hostname mismatch", "IP address mismatch") rather than as an unspecified error.
      const std::string name(without_brackets(endpoint.host));
      X509_VERIFY_PARAM* param = SSL_get0_param(secure->native_handle());
      boost::system::error_code not_an_address;
      asio::ip::make_address(name, not_an_address);
      if ((not_an_address ? X509_VERIFY_PARAM_set1_host(param, name.c_str(), 0)
                          : X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str())) != 1) {
        throw MemberFailed{"cannot set the name to verify: " + name};
      }
      co_await secure->async_handshake(asio::ssl::stream_base::client, asio::redirect_error(use_awaitable, ec));
      check_cancelled();
      if (ec == beast::error::timeout) throw MemberFailed{"no TLS handshake within " + ms_text(kMemberAnswer)};
      if (ec) {
        // A refused certificate (ours or theirs) will not get better on another try.
        bool not_tls = is_not_tls(ec);
        if (!not_tls && (is_closed(ec) || ec == asio::ssl::error::stream_truncated)) {
          boost::system::error_code ignored;
          const tcp::endpoint where = tcp_layer().socket().remote_endpoint(ignored);
          not_tls = !ignored && co_await speaks_plain_http(where, until);
        }
        if (not_tls) {
          throw definitively(StoreError("etcd at " + member_name(index) +
                                        " does not speak TLS: write http:// in --rdzv-endpoint and leave out "
                                        "protocol, cacert, cert and key in --rdzv-conf"));
        }
        if (is_tls_error(ec)) {
          throw definitively(tls_refused(index, ec, SSL_get_verify_result(secure->native_handle())));
        }
        throw MemberFailed{"TLS handshake: " + ec.message()};
      }
    }
    member = index;
  }

  /// What a TLS error from `index` means to the user. `verify_result`: OpenSSL's verdict on the
  /// server's certificate (X509_V_OK when it passed, or when the error came after the handshake).
  EtcdAuthError tls_refused(std::size_t index, const boost::system::error_code& ec, long verify_result = X509_V_OK) const {
    std::string message = "TLS with etcd at " + member_name(index) + " failed: " + ec.message();
    if (verify_result != X509_V_OK) message += " (" + std::string(X509_verify_cert_error_string(verify_result)) + ")";
    switch (verify_result) {
      case X509_V_OK:
        if (options().cert.empty()) {
          message += ": etcd may want a client certificate (--client-cert-auth): set cert and key in --rdzv-conf";
        } else {
          message += ": etcd refused the client certificate cert=" + options().cert +
                     " (is it signed by etcd's --trusted-ca-file, and not expired?)";
        }
        break;
      case X509_V_ERR_HOSTNAME_MISMATCH:
      case X509_V_ERR_IP_ADDRESS_MISMATCH:
        message += ": etcd's certificate does not hold the name the endpoint is written with; write a name or "
                   "address it holds in --rdzv-endpoint";
        break;
      case X509_V_ERR_CERT_HAS_EXPIRED:
      case X509_V_ERR_CERT_NOT_YET_VALID:
        message += ": etcd's certificate is outside its validity period; renew it (or check this machine's clock)";
        break;
      default:
        message += ": check cacert in --rdzv-conf (the CA that signed etcd's certificate)";
    }
    return EtcdAuthError(message);
  }

  /// After a plain HTTP request was met with a closed connection: does the member speak TLS on
  /// that port? (etcd with TLS closes on plain HTTP without a word, so a user who forgot https://
  /// would otherwise wait for the whole join timeout.) Tries a handshake that checks nothing.
  Task<bool> speaks_tls(const tcp::endpoint& where, Clock::time_point until) {
    asio::ssl::context any_peer(asio::ssl::context::tls_client);
    any_peer.set_verify_mode(asio::ssl::verify_none);
    beast::ssl_stream<beast::tcp_stream> probe(ex, any_peer);
    auto& layer = beast::get_lowest_layer(probe);
    layer.expires_at(until);
    boost::system::error_code ec;
    co_await layer.async_connect(where, asio::redirect_error(use_awaitable, ec));
    check_cancelled();
    if (ec) co_return false;
    co_await probe.async_handshake(asio::ssl::stream_base::client, asio::redirect_error(use_awaitable, ec));
    check_cancelled();
    // A refusal of our (absent) certificate still proves that TLS answered.
    co_return !ec || (is_tls_error(ec) && !is_not_tls(ec));
  }

  /// After our TLS hello was met with a closed connection: does the member answer plain HTTP there?
  /// (etcd without TLS closes on a TLS hello without a word.)
  Task<bool> speaks_plain_http(const tcp::endpoint& where, Clock::time_point until) {
    beast::tcp_stream probe(ex);
    probe.expires_at(until);
    boost::system::error_code ec;
    co_await probe.async_connect(where, asio::redirect_error(use_awaitable, ec));
    check_cancelled();
    if (ec) co_return false;
    http::request<http::empty_body> req{http::verb::get, "/version", 11};
    req.set(http::field::host, where.address().to_string());
    co_await http::async_write(probe, req, asio::redirect_error(use_awaitable, ec));
    check_cancelled();
    if (ec) co_return false;
    beast::flat_buffer reply;
    http::response_parser<http::empty_body> parser;
    co_await http::async_read_header(probe, reply, parser, asio::redirect_error(use_awaitable, ec));
    check_cancelled();
    co_return !ec;
  }

  http::request<http::string_body> request(const std::string& path, std::string body) const {
    http::request<http::string_body> req{http::verb::post, path, 11};
    const Endpoint& e = options().endpoints.at(*member);
    req.set(http::field::host, format_endpoint(e.host, e.port));
    req.set(http::field::content_type, "application/json");
    if (cluster->token) req.set(http::field::authorization, *cluster->token);
    req.keep_alive(true);
    req.body() = std::move(body);
    req.prepare_payload();
    return req;
  }

  template <class Body>
  Task<void> write(http::request<Body>& req, boost::system::error_code& ec) {
    if (secure) co_await http::async_write(*secure, req, asio::redirect_error(use_awaitable, ec));
    else co_await http::async_write(*plain, req, asio::redirect_error(use_awaitable, ec));
  }
  template <class Parser>
  Task<void> read(Parser& parser, boost::system::error_code& ec) {
    if (secure) co_await http::async_read(*secure, buffer, parser, asio::redirect_error(use_awaitable, ec));
    else co_await http::async_read(*plain, buffer, parser, asio::redirect_error(use_awaitable, ec));
  }
  /// Whatever arrives next (a watch event is a small chunk: async_read would wait for a full buffer).
  template <class Parser>
  Task<void> read_some(Parser& parser, boost::system::error_code& ec) {
    if (secure) co_await http::async_read_some(*secure, buffer, parser, asio::redirect_error(use_awaitable, ec));
    else co_await http::async_read_some(*plain, buffer, parser, asio::redirect_error(use_awaitable, ec));
  }
  template <class Parser>
  Task<void> read_header(Parser& parser, boost::system::error_code& ec) {
    if (secure) co_await http::async_read_header(*secure, buffer, parser, asio::redirect_error(use_awaitable, ec));
    else co_await http::async_read_header(*plain, buffer, parser, asio::redirect_error(use_awaitable, ec));
  }

  /// A request's write or read failed: throws MemberFailed, definitive when TLS refused us or the
  /// member wants TLS and we spoke plain (then its error is thrown once every member failed so).
  Task<void> io_failed(const boost::system::error_code& ec, Clock::time_point until) {
    const std::size_t index = *member;
    // TLS 1.3 ends the handshake before the server has judged our certificate: its refusal comes
    // as an alert on the first read.
    if (is_tls_error(ec)) throw definitively(tls_refused(index, ec));
    if (ec == beast::error::timeout) throw MemberFailed{"no answer within " + ms_text(kMemberAnswer)};
    if (auto failed = not_http(index)) throw *failed;
    if (!secure && exchanges == 0 && is_closed(ec)) {
      boost::system::error_code ignored;
      const tcp::endpoint where = tcp_layer().socket().remote_endpoint(ignored);
      if (!ignored && co_await speaks_tls(where, until)) {
        throw definitively(StoreError("etcd at " + member_name(index) + " speaks TLS: write https://" +
                                      member_name(index) +
                                      " in --rdzv-endpoint, with cacert in --rdzv-conf (and cert and key if etcd asks "
                                      "for a client certificate)"));
      }
      // Not TLS either: a TCPStore does this, a member that is stopping might do it once.
      if (++silent_closes[index] >= etcd::kSilentClosesNotHttp) {
        throw definitively(StoreError(etcd::silent_close_error(member_name(index))), /*silent_close=*/true);
      }
      throw MemberFailed{ec.message(), nullptr, /*silent_close=*/true};
    }
    throw MemberFailed{ec.message()};
  }

  /// One exchange with the connected member. Returns the status and body; MemberFailed on I/O.
  Task<std::pair<int, std::string>> exchange(const std::string& path, std::string body, Clock::time_point until) {
    auto req = request(path, std::move(body));
    tcp_layer().expires_at(until);
    boost::system::error_code ec;
    co_await write(req, ec);
    check_cancelled();
    if (ec) co_await io_failed(ec, until);
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 * 1024 * 1024);
    co_await read(parser, ec);
    check_cancelled();
    if (ec) co_await io_failed(ec, until);
    ++exchanges;
    auto& res = parser.get();
    if (!res.keep_alive()) close();
    co_return std::pair<int, std::string>(static_cast<int>(res.result_int()), std::move(res.body()));
  }

  /// What a non-200 reply means: returns normally to retry on the next member, throws otherwise.
  Task<void> judge(std::size_t index, int status, const std::string& body, const std::string& path,
                   Clock::time_point deadline, milliseconds timeout) {
    const auto error = etcd::parse_error(body);
    if (!error && status != 502 && status != 503 && status != 504) {
      // Not etcd's error JSON, nor a proxy's "try later": another server on that port.
      throw definitively(StoreError("the server at " + member_name(index) + " answered " + path + " with HTTP " +
                                    std::to_string(status) + ", not as etcd's v3 API does (is it etcd's client " +
                                    "port, etcd 3.4 or later?): " + etcd::one_line(body, 120)));
    }
    const std::string said = error ? error->message : "HTTP " + std::to_string(status) + " " + etcd::one_line(body, 200);
    switch (etcd::classify(status, error)) {
      case etcd::Failure::retry_elsewhere:
        note(index, said);
        cluster->move_on(index);
        close();
        co_return;
      case etcd::Failure::reauthenticate:
        if (!options().user.empty() && path != "/v3/auth/authenticate") {
          cluster->token.reset();
          co_await authenticate(deadline, timeout);
          co_return;
        }
        [[fallthrough]];
      case etcd::Failure::authentication: {
        std::string advice = options().user.empty() ? " (set user and password in --rdzv-conf)"
                                                    : " (check user and password in --rdzv-conf)";
        if (!options().user.empty() && said.find("permission denied") != std::string::npos) {
          // Right credentials, no grant: the user's roles must cover the job's keys.
          advice = " (user '" + options().user + "' may not use the keys under key_prefix '" + options().key_prefix +
                   "': grant one of its roles readwrite on that prefix, e.g. etcdctl role grant-permission ROLE "
                   "--prefix=true readwrite " + options().key_prefix + ")";
        }
        throw EtcdAuthError("etcd at " + member_name(index) + " refused the request: " + said + advice);
      }
      case etcd::Failure::fatal:
        throw StoreError("etcd at " + member_name(index) + " refused " + path + ": " + said);
    }
  }

  Task<void> authenticate(Clock::time_point deadline, milliseconds timeout) {
    std::string body = co_await call("/v3/auth/authenticate",
                                     etcd::authenticate_body(options().user, options().password), deadline, timeout);
    cluster->token = etcd::parse_token(body);
  }

  /// Waits a moment after every member failed once, so a cluster that is down is not hammered.
  Task<void> pause_before_retry(Clock::time_point deadline) {
    pause.expires_at(std::min(deadline, Clock::now() + milliseconds(100)));
    boost::system::error_code ignored;
    co_await pause.async_wait(asio::redirect_error(use_awaitable, ignored));
    check_cancelled();
  }

  /// Connects (to the preferred member, then the next, ...) unless connected; false when `deadline` passed.
  Task<bool> ensure_connected(Clock::time_point deadline, int& failed_in_a_row) {
    while (!member) {
      check_cancelled();
      if (Clock::now() >= deadline) co_return false;
      const std::size_t index = cluster->preferred();
      bool pause_first = false;
      try {
        co_await connect(std::min(deadline, Clock::now() + kMemberAnswer));
      } catch (const MemberFailed& failed) {
        member_failed(index, failed);
        pause_first = ++failed_in_a_row % static_cast<int>(options().endpoints.size()) == 0;
      }
      if (pause_first) co_await pause_before_retry(deadline);
    }
    co_return true;
  }

  Task<std::string> call(std::string path, std::string body, Clock::time_point deadline, milliseconds timeout) {
    int failed_in_a_row = 0;
    if (!options().user.empty() && !cluster->token && path != "/v3/auth/authenticate") {
      co_await authenticate(deadline, timeout);
    }
    for (;;) {
      if (!co_await ensure_connected(deadline, failed_in_a_row)) unreachable(timeout);
      const std::size_t index = *member;
      int status = 0;
      std::string reply;
      bool exchange_failed = false;
      try {
        std::tie(status, reply) = co_await exchange(path, body, std::min(deadline, Clock::now() + kMemberAnswer));
      } catch (const MemberFailed& failed) {
        member_failed(index, failed);
        exchange_failed = true;
      }
      if (exchange_failed) {
        // As after connects that failed: when every member failed in a row, a moment's pause, so
        // that a member that breaks every request at once is not asked again in a tight loop.
        if (++failed_in_a_row % static_cast<int>(options().endpoints.size()) == 0) co_await pause_before_retry(deadline);
        continue;
      }
      if (status == 200) {
        cluster->answered(index);
        co_return reply;
      }
      try {
        co_await judge(index, status, reply, path, deadline, timeout);
      } catch (const MemberFailed& failed) {
        member_failed(index, failed);
        continue;
      }
      if (++failed_in_a_row % static_cast<int>(options().endpoints.size()) == 0) co_await pause_before_retry(deadline);
    }
  }

  Task<void> stream(std::string path, std::function<std::string()> body, std::function<bool(const std::string&)> on_line,
                    Clock::time_point deadline, milliseconds timeout) {
    int failed_in_a_row = 0;
    if (!options().user.empty() && !cluster->token) co_await authenticate(deadline, timeout);
    for (;;) {
      if (!co_await ensure_connected(deadline, failed_in_a_row)) {
        if (Clock::now() >= deadline && failures.empty()) throw StoreTimeout("timed out");
        unreachable(timeout);
      }
      const std::size_t index = *member;
      auto req = request(path, body());
      tcp_layer().expires_at(std::min(deadline, Clock::now() + kMemberAnswer));
      boost::system::error_code ec;
      co_await write(req, ec);
      check_cancelled();
      http::response_parser<http::buffer_body> parser;
      parser.body_limit(boost::none);
      if (!ec) co_await read_header(parser, ec);
      check_cancelled();
      if (is_tls_error(ec)) {
        member_failed(index, definitively(tls_refused(index, ec)));
        continue;
      }
      if (auto failed = ec ? not_http(index) : std::nullopt) {
        member_failed(index, *failed);
        continue;
      }
      if (ec && Clock::now() >= deadline && !failures.count(index)) {
        // The caller's deadline, not the member: it answered every request before this one.
        close();
        throw StoreTimeout("timed out after " + ms_text(timeout));
      }
      if (ec) {
        note(index, ec == beast::error::timeout ? "no answer within " + ms_text(kMemberAnswer) : ec.message());
        cluster->move_on(index);
        close();
        continue;
      }
      // The stream is up: it may stay silent until the caller's deadline.
      tcp_layer().expires_at(deadline);
      std::string pending;
      std::string whole;  // an error reply's body
      char chunk[16 * 1024];
      bool done = false;
      while (!done && !parser.is_done()) {
        parser.get().body().data = chunk;
        parser.get().body().size = sizeof chunk;
        co_await read_some(parser, ec);
        check_cancelled();
        if (ec == http::error::need_buffer) ec = {};
        if (ec) break;
        const std::string_view got(chunk, sizeof chunk - parser.get().body().size);
        if (parser.get().result_int() != 200) {
          whole.append(got);
          if (whole.size() > etcd::kMaxWatchMessage) break;
          continue;
        }
        for (const std::string& line : etcd::take_lines(pending, got)) {
          if (on_line(line)) {
            done = true;
            break;
          }
        }
        if (pending.size() > etcd::kMaxWatchMessage) break;
      }
      if (!done && !ec && (pending.size() > etcd::kMaxWatchMessage || whole.size() > etcd::kMaxWatchMessage)) {
        note(index, "sent a watch message over " + std::to_string(etcd::kMaxWatchMessage >> 20) + " MiB");
        cluster->move_on(index);
        close();
        continue;
      }
      if (done) {
        // The rest of the stream is not read: this connection cannot carry another request.
        close();
        co_return;
      }
      if (ec == beast::error::timeout || (ec && Clock::now() >= deadline)) {
        close();
        throw StoreTimeout("timed out after " + ms_text(timeout));
      }
      if (is_tls_error(ec)) {
        member_failed(index, definitively(tls_refused(index, ec)));
        continue;
      }
      if (ec) {
        note(index, "the stream broke: " + ec.message());
        cluster->move_on(index);
        close();
        continue;
      }
      const int status = static_cast<int>(parser.get().result_int());
      close();
      if (status == 200) {
        note(index, "the stream ended");
        cluster->move_on(index);
        co_await pause_before_retry(deadline);
        continue;
      }
      co_await judge(index, status, whole, path, deadline, timeout);
    }
  }
};

EtcdConnection::EtcdConnection(asio::any_io_executor executor, std::shared_ptr<EtcdCluster> cluster)
    : session_(std::make_shared<Session>(executor, std::move(cluster))) {}

EtcdConnection::~EtcdConnection() { cancel(); }

Task<std::string> EtcdConnection::call(std::string path, std::string body, milliseconds timeout) {
  auto session = session_;  // the coroutine keeps it alive
  session->check_cancelled();
  session->failures.clear();
  session->definitive_failures.clear();
  session->silent_closes.clear();
  co_return co_await session->call(std::move(path), std::move(body), Clock::now() + timeout, timeout);
}

Task<void> EtcdConnection::stream(std::string path, std::function<std::string()> body,
                                  std::function<bool(const std::string&)> on_line, milliseconds timeout) {
  auto session = session_;
  session->check_cancelled();
  session->failures.clear();
  session->definitive_failures.clear();
  session->silent_closes.clear();
  co_await session->stream(std::move(path), std::move(body), std::move(on_line), Clock::now() + timeout, timeout);
}

void EtcdConnection::cancel() {
  session_->cancelled = true;
  session_->resolver.cancel();
  session_->pause.cancel();
  session_->abort();
}

std::string EtcdConnection::address() const { return session_->cluster->options().describe_endpoints(); }

}  // namespace ddprun::rendezvous

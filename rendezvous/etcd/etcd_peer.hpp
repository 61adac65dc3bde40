#pragma once
/// What answered on an etcd endpoint that does not speak HTTP at all, in words for the one-line
/// error: the usual slips are a c10d TCPStore (ddprun-store, or torchrun's) left in
/// --rdzv-endpoint when switching to etcd-v3, which closes an HTTP request's connection without a
/// byte, and an ssh server (port 22), which greets with its banner. Either is refused at once, as a
/// plain HTTP server that is not etcd already is, instead of being retried until join_timeout as if
/// a member were down. Pure; the client (etcd_client.cpp) decides when to use it.
#include <cstddef>
#include <string>
#include <string_view>

namespace ddprun::rendezvous::etcd {

/// How many times in a row a member must close a fresh connection on our HTTP request without a
/// byte before it is judged not to speak HTTP. etcd never does so while it serves, nor while it
/// starts (the client port's connections wait in its backlog until it is ready); a member that is
/// stopping might close one connection, and then refuses the next (which resets the count).
inline constexpr int kSilentClosesNotHttp = 3;

/// Whether `first_bytes`, the start of what a server sent back, can be the start of an HTTP/1.x
/// status line ("HTTP/1.1 200 OK", or any prefix of "HTTP/1."). Empty: yes (nothing to judge).
bool could_be_http(std::string_view first_bytes);

/// The first line of `bytes` for a message, at most `limit` bytes of it, quoted: printable ASCII as
/// it is, any other byte as \xNN (a peer's bytes never reach a terminal raw), "..." after the quote
/// when cut. "'SSH-2.0-OpenSSH_9.2p1'".
std::string quote_peer_bytes(std::string_view bytes, std::size_t limit = 48);

/// "the server at H:P does not speak HTTP (it sent '...'): is it etcd's client port?"
std::string not_http_error(std::string_view member, std::string_view sent);

/// "the server at H:P closed the connection without a word on each of 3 HTTP requests: ..."
std::string silent_close_error(std::string_view member);

}  // namespace ddprun::rendezvous::etcd

#pragma once
/// StoreClientOptions: how a TCPStore client (AsyncStoreClient, and the blocking StoreClient over it)
/// reaches its store, authenticates, and bounds each operation.
#include <chrono>
#include <optional>
#include <string>

#include "rendezvous/wire.hpp"

namespace ddprun::rendezvous {

struct StoreClientOptions {
  std::string host;  ///< a name, an IPv4 or an IPv6 address ("::1", without brackets)
  int port = 0;
  /// Total time to keep retrying the connection (refused, unreachable, name not resolvable yet,
  /// closed before answering PING): the store may start after its clients. Authentication failures
  /// are not retried.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(60)};
  /// The default per-operation timeout (and the WAIT timeout of get() and wait()).
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  /// Authenticate with this token (see auth.hpp) when set.
  std::optional<std::string> token;
  /// Bounds on what a reply may make this client allocate, and on what it sends.
  wire::Limits limits;
  /// Blocking StoreClient only: when set, the constructor does not connect: the first call (or
  /// connect()) does, with the same retry. An owner that may have to interrupt() a long connect
  /// registers the client first. (AsyncStoreClient always connects at its first call.)
  bool defer_connect = false;
  /// PyTorch 1.13's TCPStore (Debian's torchrun) knows no VALIDATE: it reads one as a SET with an
  /// impossible key length and resets the connection. When set (and no token is), a connection
  /// closed in the VALIDATE/PING handshake is tried again at once in the legacy dialect (1.13's
  /// codes, a GETNUMKEYS as the probe); when the store answers that, the client keeps the legacy
  /// dialect for the rest of its life. There: no PING (ping() throws StoreError), no queues, no
  /// authentication; a timed-out wait() closes the connection instead of CANCEL_WAIT (1.13 has
  /// none; the next call reconnects); multi_get() and multi_set() are done key by key. For worker
  /// programs that may run under any launcher; ddprun's own agents speak the current dialect only.
  bool legacy_fallback = false;
};

}  // namespace ddprun::rendezvous

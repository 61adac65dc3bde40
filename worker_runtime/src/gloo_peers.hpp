#pragma once
/// Who is at the other end of each of a rank's gloo connections, so that an error quoting a peer's
/// address can name its rank.
///
/// gloo's I/O errors quote the remote end of the broken connection: as the kernel reports it
/// (getpeername), or, depending on the side and on gloo's version, as the peer advertised it in the
/// store before connecting. Only the peer knows both (an accepted connection's remote end is an
/// ephemeral port), so once connected every rank sends each peer, over their connection, its own end
/// of it in both forms: what a rank receives is what its errors quote.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gloo {
class Context;
}

namespace ddprun::detail {

class PeerDirectory {
 public:
  /// `quoted`: the forms gloo's messages may print (this gloo prints ports in network byte order);
  /// `shown`: the address as users read it ("127.0.0.1:41234").
  void add(int rank, std::vector<std::string> quoted, std::string shown);
  /// The rank whose address appears in `message`.
  std::optional<int> find_in(std::string_view message) const;
  /// `rank`'s end of the connection as users read it.
  std::optional<std::string> address_of(int rank) const;

 private:
  struct Peer {
    std::vector<std::string> quoted;
    std::string shown;
  };
  std::map<int, Peer> peers_;
};

/// Exchanges connection ends with every peer (2 x (size-1) small messages, each step bounded by
/// `timeout`). `published` is what this rank advertised in the store for its pairs (gloo's
/// connectFullMesh: one address per peer, in rank order, none for itself); unparsable is fine.
/// Returning also proves that every peer has finished connecting: a peer sends only once its own
/// mesh is up, so a rank that hosts the store may take it down afterwards. Throws what gloo throws
/// when a peer fails meanwhile.
PeerDirectory exchange_connection_ends(const std::shared_ptr<gloo::Context>& context,
                                       const std::vector<char>& published, std::uint32_t tag,
                                       std::chrono::milliseconds timeout);

}  // namespace ddprun::detail

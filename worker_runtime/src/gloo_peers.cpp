#include "gloo_peers.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cctype>
#include <cstring>
#include <gloo/context.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>
#include <vector>

#include "rendezvous/endpoint.hpp"

namespace ddprun::detail {
namespace {

/// A slot prefix that gloo's own collectives (0x01..0x08) and ddprun's reduce_scatter (0x40) do not use.
constexpr std::uint8_t kConnectionEndsSlotPrefix = 0x41;

/// One connection end on the wire: NUL-terminated strings of fixed width.
struct Record {
  char connected[72];   // the socket's local end, as gloo prints it
  char advertised[72];  // the address published in the store for this pair, as gloo prints it
  char shown[72];       // the socket's local end, as users read it
};

void copy_into(char (&field)[72], const std::string& text) {
  std::strncpy(field, text.c_str(), sizeof field - 1);
  field[sizeof field - 1] = '\0';
}

std::string read_field(const char (&field)[72]) { return std::string(field, strnlen(field, sizeof field)); }

/// The address this rank advertised for its pair with `peer`, as gloo prints it; empty when the
/// published bytes do not have the expected shape (size-1 addresses of one width).
std::string advertised_form(const std::vector<char>& published, int rank, int size, int peer) {
  const auto parts = static_cast<std::size_t>(size - 1);
  if (parts == 0 || published.empty() || published.size() % parts != 0) return {};
  const std::size_t width = published.size() / parts;
  const std::size_t index = static_cast<std::size_t>(peer < rank ? peer : peer - 1);
  try {
    auto begin = published.begin() + static_cast<std::ptrdiff_t>(index * width);
    return gloo::transport::tcp::Address(std::vector<char>(begin, begin + static_cast<std::ptrdiff_t>(width))).str();
  } catch (const std::exception&) {
    return {};  // another layout: this form is only a fallback
  }
}

/// "127.0.0.1:41234" / "[::1]:41234" for a tcp address; empty for another transport.
std::string shown_form(const gloo::transport::Address& address) {
  const auto* tcp = dynamic_cast<const gloo::transport::tcp::Address*>(&address);
  if (tcp == nullptr) return {};
  const sockaddr_storage& storage = tcp->getSockaddr();
  char text[INET6_ADDRSTRLEN] = {};
  if (storage.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&storage);
    inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
    return rendezvous::format_endpoint(text, ntohs(v4->sin_port));
  }
  if (storage.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&storage);
    inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
    return rendezvous::format_endpoint(text, ntohs(v6->sin6_port));  // bracketed: "[::1]:41234"
  }
  return {};
}

}  // namespace

void PeerDirectory::add(int rank, std::vector<std::string> quoted, std::string shown) {
  peers_[rank] = Peer{std::move(quoted), std::move(shown)};
}

std::optional<int> PeerDirectory::find_in(std::string_view message) const {
  for (const auto& [rank, peer] : peers_) {
    for (const auto& quoted : peer.quoted) {
      if (quoted.empty()) continue;
      // "[127.0.0.1]:4123" must not match inside "[127.0.0.1]:41234".
      for (auto at = message.find(quoted); at != std::string_view::npos; at = message.find(quoted, at + 1)) {
        auto after = at + quoted.size();
        if (after == message.size() || !std::isdigit(static_cast<unsigned char>(message[after]))) return rank;
      }
    }
  }
  return std::nullopt;
}

std::optional<std::string> PeerDirectory::address_of(int rank) const {
  auto found = peers_.find(rank);
  if (found == peers_.end() || found->second.shown.empty()) return std::nullopt;
  return found->second.shown;
}

PeerDirectory exchange_connection_ends(const std::shared_ptr<gloo::Context>& context,
                                       const std::vector<char>& published, std::uint32_t tag,
                                       std::chrono::milliseconds timeout) {
  const int size = context->size;
  const int rank = context->rank;
  std::vector<Record> mine(static_cast<std::size_t>(size));
  std::vector<Record> theirs(static_cast<std::size_t>(size));
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    // Once connected, a tcp pair's address is its socket's local end: the peer's remote end.
    const auto& address = context->getPair(peer)->address();
    Record& record = mine[static_cast<std::size_t>(peer)];
    copy_into(record.connected, address.str());
    copy_into(record.advertised, advertised_form(published, rank, size, peer));
    copy_into(record.shown, shown_form(address));
  }
  auto send_buffer = context->createUnboundBuffer(mine.data(), mine.size() * sizeof(Record));
  auto receive_buffer = context->createUnboundBuffer(theirs.data(), theirs.size() * sizeof(Record));
  const auto slot = gloo::Slot::build(kConnectionEndsSlotPrefix, tag);
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const std::size_t offset = static_cast<std::size_t>(peer) * sizeof(Record);
    receive_buffer->recv(peer, slot, offset, sizeof(Record));
    send_buffer->send(peer, slot, offset, sizeof(Record));
  }
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    receive_buffer->waitRecv(timeout);
    send_buffer->waitSend(timeout);
  }
  PeerDirectory directory;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const Record& record = theirs[static_cast<std::size_t>(peer)];
    directory.add(peer, {read_field(record.connected), read_field(record.advertised)}, read_field(record.shown));
  }
  return directory;
}

}  // namespace ddprun::detail

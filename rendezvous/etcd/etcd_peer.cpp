#include "rendezvous/etcd/etcd_peer.hpp"

#include <algorithm>

namespace ddprun::rendezvous::etcd {

bool could_be_http(std::string_view first_bytes) {
  constexpr std::string_view kStart = "HTTP/1.";
  const std::size_t n = std::min(first_bytes.size(), kStart.size());
  return first_bytes.substr(0, n) == kStart.substr(0, n);
}

std::string quote_peer_bytes(std::string_view bytes, std::size_t limit) {
  const std::size_t line_end = bytes.find_first_of("\r\n");
  std::string_view line = bytes.substr(0, line_end);
  // A line ending at once (a server that sends "\r\n" first) shows the bytes, not an empty quote.
  if (line.empty()) line = bytes;
  std::string out = "'";
  std::size_t shown = 0;
  for (; shown < line.size() && shown < limit; ++shown) {
    const auto c = static_cast<unsigned char>(line[shown]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  out += '\'';
  if (shown < line.size()) out += "...";
  return out;
}

std::string not_http_error(std::string_view member, std::string_view sent) {
  return "the server at " + std::string(member) + " does not speak HTTP (it sent " + quote_peer_bytes(sent) +
         "): is it etcd's client port?";
}

std::string silent_close_error(std::string_view member) {
  return "the server at " + std::string(member) + " closed the connection without a word on each of " +
         std::to_string(kSilentClosesNotHttp) +
         " HTTP requests: it does not speak HTTP (a TCPStore, c10d's or ddprun-store, does so): is it etcd's client "
         "port?";
}

}  // namespace ddprun::rendezvous::etcd

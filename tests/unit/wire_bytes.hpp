#pragma once
/// Bytes on the TCPStore wire, as the codec tests write them by hand: each field encoder returns
/// the field's bytes (little-endian, as wire::put_* writes them), to be concatenated with +.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/wire.hpp"

namespace ddprun::testing {

using Bytes = std::vector<std::uint8_t>;

inline Bytes bytes_of(const std::string& s) { return Bytes(s.begin(), s.end()); }

inline std::string u8(std::uint8_t n) {
  std::string out;
  rendezvous::wire::put_u8(out, n);
  return out;
}
inline std::string u32(std::uint32_t n) {
  std::string out;
  rendezvous::wire::put_u32(out, n);
  return out;
}
inline std::string i64(std::int64_t n) {
  std::string out;
  rendezvous::wire::put_i64(out, n);
  return out;
}
inline std::string u64(std::uint64_t n) {
  std::string out;
  rendezvous::wire::put_u64(out, n);
  return out;
}
/// A u64 length, then the bytes.
inline std::string field(std::string_view value) {
  std::string out;
  rendezvous::wire::put_bytes(out, value);
  return out;
}

}  // namespace ddprun::testing

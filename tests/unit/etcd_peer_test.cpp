// What answered on an etcd endpoint that does not speak HTTP (rendezvous/etcd/etcd_peer.hpp): which
// first bytes can start an HTTP reply, and a peer's bytes quoted safely for the one-line error.
#include "rendezvous/etcd/etcd_peer.hpp"

#include <gtest/gtest.h>

#include <string>

using namespace ddprun::rendezvous::etcd;

TEST(EtcdPeer, WhichFirstBytesCanStartAnHttpReply) {
  const struct {
    std::string bytes;
    bool http;
  } cases[] = {
      {"", true},
      {"H", true},
      {"HTTP/", true},
      {"HTTP/1.", true},
      {"HTTP/1.1 200 OK\r\n", true},
      {"HTTP/1.0 502 Bad Gateway\r\n", true},
      {"HTTP/2", false},
      {"http/1.1 200 OK", false},
      {"SSH-2.0-OpenSSH_9.2p1\r\n", false},
      {std::string("\x00\x00\x00\x01", 4), false},
      {"\x16\x03\x01", false},  // a TLS record
      {"<html>", false},
  };
  for (const auto& c : cases) EXPECT_EQ(could_be_http(c.bytes), c.http) << quote_peer_bytes(c.bytes);
}

TEST(EtcdPeer, APeersBytesAreQuotedPrintableAndShort) {
  const struct {
    std::string bytes;
    std::string quoted;
  } cases[] = {
      {"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n", "'SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3'"},
      {"first line\nsecond line", "'first line'"},
      {std::string("\x00\x01\xff", 3), "'\\x00\\x01\\xff'"},
      {"\x1b[31mred", "'\\x1b[31mred'"},  // no escape sequence reaches the terminal
      {"it's a \\ path", "'it\\x27s a \\x5c path'"},
      {"\r\nafter a line break", "'\\x0d\\x0aafter a line break'"},
      {std::string(100, 'a'), "'" + std::string(48, 'a') + "'..."},
      {std::string(48, 'a'), "'" + std::string(48, 'a') + "'"},
      {"", "''"},
  };
  for (const auto& c : cases) EXPECT_EQ(quote_peer_bytes(c.bytes), c.quoted);
  EXPECT_EQ(quote_peer_bytes("abcdef", 3), "'abc'...");
}

TEST(EtcdPeer, TheErrorsNameTheMemberAndAskForEtcdsClientPort) {
  EXPECT_EQ(not_http_error("127.0.0.1:22", "SSH-2.0-OpenSSH_9.2p1\r\n"),
            "the server at 127.0.0.1:22 does not speak HTTP (it sent 'SSH-2.0-OpenSSH_9.2p1'): is it etcd's client "
            "port?");
  EXPECT_EQ(silent_close_error("127.0.0.1:29400"),
            "the server at 127.0.0.1:29400 closed the connection without a word on each of 3 HTTP requests: it does "
            "not speak HTTP (a TCPStore, c10d's or ddprun-store, does so): is it etcd's client port?");
}

// etcd's v3 JSON gateway, apart from any I/O: base64, request bodies, replies as etcd 3.4 writes
// them (recorded with curl from Debian's etcd-server), and what a failed request means.
#include "rendezvous/etcd/etcd_json.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

using namespace ddprun::rendezvous::etcd;

TEST(EtcdJson, Base64RoundTripsEveryLengthAndByte) {
  struct Case {
    std::string bytes;
    std::string text;
  };
  for (const auto& c : std::vector<Case>{{"", ""},
                                         {"f", "Zg=="},
                                         {"fo", "Zm8="},
                                         {"foo", "Zm9v"},
                                         {"foob", "Zm9vYg=="},
                                         {std::string("\0\xff\x10", 3), "AP8Q"}}) {
    EXPECT_EQ(base64_encode(c.bytes), c.text);
    EXPECT_EQ(base64_decode(c.text), c.bytes);
  }
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  EXPECT_EQ(base64_decode(base64_encode(all)), all);
  for (const char* bad : {"Zg=", "Z===", "Zg==Zg==", "Z!9v", "=Zg="}) EXPECT_EQ(base64_decode(bad), std::nullopt) << bad;
}

TEST(EtcdJson, TransactionBodiesNameTheirComparesAndOperations) {
  Compare created{Compare::Target::create, "k", 0, ""};
  Compare value{Compare::Target::value, "k", 0, "old"};
  Operation put{Operation::Kind::put, "k", "v", 42};
  Operation read{Operation::Kind::range, "k", "", 0};
  auto body = nlohmann::json::parse(txn_body({created, value}, {put}, {read}));
  EXPECT_EQ(body["compare"][0]["target"], "CREATE");
  EXPECT_EQ(body["compare"][0]["create_revision"], "0");
  EXPECT_EQ(body["compare"][1]["target"], "VALUE");
  EXPECT_EQ(body["compare"][1]["value"], base64_encode("old"));
  EXPECT_EQ(body["success"][0]["request_put"]["lease"], "42");
  EXPECT_EQ(body["success"][0]["request_put"]["value"], base64_encode("v"));
  EXPECT_EQ(body["failure"][0]["request_range"]["key"], base64_encode("k"));
  // No lease: none sent (0 would be "no lease" too, but etcd 3.4 is strict about types).
  EXPECT_FALSE(nlohmann::json::parse(put_body("k", "v", 0)).contains("lease"));
  EXPECT_EQ(nlohmann::json::parse(watch_body("k", 7))["create_request"]["start_revision"], "7");
}

TEST(EtcdJson, RepliesAsEtcdWritesThem) {
  const auto txn = parse_txn(
      R"({"header":{"revision":"2"},"responses":[{"response_range":{"header":{"revision":"2"},"kvs":[{"key":"Zm9v","create_revision":"2","mod_revision":"2","version":"1","value":"YmFy"}],"count":"1"}}]})");
  EXPECT_FALSE(txn.succeeded);
  EXPECT_EQ(txn.revision, 2);
  ASSERT_EQ(txn.ranges.size(), 1U);
  ASSERT_TRUE(txn.ranges[0]);
  EXPECT_EQ(txn.ranges[0]->key, "foo");
  EXPECT_EQ(txn.ranges[0]->value, "bar");
  EXPECT_EQ(txn.ranges[0]->mod_revision, 2);
  const auto empty = parse_txn(R"({"header":{"revision":"9"},"succeeded":true,"responses":[{"response_range":{"header":{"revision":"9"}}},{"response_put":{"header":{"revision":"9"}}}]})");
  EXPECT_TRUE(empty.succeeded);
  ASSERT_EQ(empty.ranges.size(), 2U);
  EXPECT_FALSE(empty.ranges[0]);
  EXPECT_FALSE(empty.ranges[1]);
  EXPECT_EQ(parse_range(R"({"header":{"revision":"1"}})").kv, std::nullopt);
  const auto lease = parse_lease_grant(R"({"header":{"revision":"1"},"ID":"2324035582739511557","TTL":"5"})");
  EXPECT_EQ(lease.id, 2324035582739511557);
  EXPECT_EQ(lease.ttl, 5);
  EXPECT_EQ(parse_keepalive("{\"result\":{\"header\":{},\"ID\":\"7\",\"TTL\":\"5\"}}\n").ttl, 5);
  EXPECT_EQ(parse_keepalive(R"({"result":{"header":{},"ID":"123"}})").ttl, 0) << "a lease that is gone";
  EXPECT_THROW(parse_txn("<html>proxy error</html>"), EtcdReplyError);
  EXPECT_THROW(parse_range(R"({"header":{"revision":"x"}})"), EtcdReplyError);
}

TEST(EtcdJson, WatchStreamsSplitIntoMessagesAndEvents) {
  std::string pending;
  auto lines = take_lines(pending, "{\"result\":{\"header\":{\"revision\":\"2\"},\"created\":true}}\n{\"res");
  ASSERT_EQ(lines.size(), 1U);
  EXPECT_TRUE(parse_watch_message(lines[0]).created);
  lines = take_lines(pending,
                     "ult\":{\"header\":{\"revision\":\"4\"},\"events\":[{\"kv\":{\"key\":\"YQ==\",\"mod_revision\":\"3\","
                     "\"value\":\"MQ==\"}},{\"type\":\"DELETE\",\"kv\":{\"key\":\"YQ==\",\"mod_revision\":\"4\"}}]}}\n");
  ASSERT_EQ(lines.size(), 1U);
  EXPECT_TRUE(pending.empty());
  const WatchMessage message = parse_watch_message(lines[0]);
  ASSERT_EQ(message.events.size(), 2U);
  EXPECT_FALSE(message.events[0].deleted);
  EXPECT_EQ(message.events[0].kv.key, "a");
  EXPECT_EQ(message.events[0].kv.value, "1");
  EXPECT_TRUE(message.events[1].deleted);
  EXPECT_EQ(parse_watch_message(R"({"result":{"header":{},"canceled":true,"compact_revision":"5"}})").compact_revision, 5);
  // A message in many pieces, and pieces that end several messages at once.
  std::string piecewise;
  std::vector<std::string> whole;
  for (const char* piece : {"{\"a\"", ":1}", "\n{\"b\":2}\n{", "\"c\":3}", "", "\n\n"}) {
    for (auto& line : take_lines(piecewise, piece)) whole.push_back(line);
  }
  EXPECT_EQ(whole, (std::vector<std::string>{"{\"a\":1}", "{\"b\":2}", "{\"c\":3}"}));
  EXPECT_TRUE(piecewise.empty());
  const auto error = parse_watch_message(R"({"error":{"grpc_code":14,"message":"etcdserver: no leader"}})");
  ASSERT_TRUE(error.error);
  EXPECT_EQ(error.error->code, 14);
}

TEST(EtcdJson, FailuresAreClassifiedByWhatTheUserCanDo) {
  struct Case {
    int status;
    std::optional<ApiError> error;
    Failure expected;
  };
  const std::vector<Case> cases = {
      {503, ApiError{14, "etcdserver: leader changed"}, Failure::retry_elsewhere},
      {503, ApiError{14, "etcdserver: no leader"}, Failure::retry_elsewhere},
      {504, ApiError{4, "etcdserver: request timed out"}, Failure::retry_elsewhere},
      {502, std::nullopt, Failure::retry_elsewhere},
      {400, ApiError{3, "etcdserver: user name is empty"}, Failure::authentication},
      {400, ApiError{3, "etcdserver: authentication failed, invalid user ID or password"}, Failure::authentication},
      {403, ApiError{7, "etcdserver: permission denied"}, Failure::authentication},
      {401, ApiError{16, "etcdserver: invalid auth token"}, Failure::reauthenticate},
      {400, ApiError{3, "etcdserver: requested lease not found"}, Failure::fatal},
      {400, ApiError{3, "etcdserver: request is too large"}, Failure::fatal},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(classify(c.status, c.error), c.expected) << (c.error ? c.error->message : "no body");
  }
  EXPECT_EQ(parse_error(R"({"error":"etcdserver: requested lease not found","message":"etcdserver: requested lease not found","code":5})")->code, 5);
  EXPECT_EQ(parse_error(R"({"header":{}})"), std::nullopt);
}

// A reply nested 100,000 deep (a broken or hostile endpoint) is refused before a value is built:
// parse_error's dump() of it once recursed until the stack overflowed (SIGSEGV).
TEST(EtcdJson, AReplyNestedTooDeepIsNotEtcdsJson) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(parse_error("{\"error\":" + deep + "}"), std::nullopt);
  EXPECT_THROW(parse_range("{\"kvs\":" + deep + "}"), EtcdReplyError);
}

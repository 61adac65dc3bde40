#include "rendezvous/etcd/etcd_json.hpp"

#include <array>
#include <charconv>
#include <nlohmann/json.hpp>

#include "common/bounded_json.hpp"

namespace ddprun::rendezvous::etcd {
namespace {

using nlohmann::json;

constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

json parse(std::string_view body, const char* what) {
  json doc = common::parse_bounded_json_or_discarded(body);
  if (doc.is_discarded() || !doc.is_object()) {
    throw EtcdReplyError(std::string("etcd's ") + what + " reply is not JSON (is the endpoint etcd's client port?): " +
                         one_line(body, 120));
  }
  return doc;
}

/// The gateway writes int64 as a decimal string; an absent field is 0 (proto3 omits defaults).
std::int64_t int64_field(const json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return 0;
  if (it->is_number_integer()) return it->get<std::int64_t>();
  if (!it->is_string()) throw EtcdReplyError(std::string("etcd's reply has a ") + name + " that is not a number");
  const std::string& text = it->get_ref<const std::string&>();
  std::int64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    throw EtcdReplyError(std::string("etcd's reply has a ") + name + " that is not a number: " + text);
  }
  return value;
}

std::string bytes_field(const json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return {};
  if (!it->is_string()) throw EtcdReplyError(std::string("etcd's reply has a ") + name + " that is not base64 text");
  auto decoded = base64_decode(it->get_ref<const std::string&>());
  if (!decoded) throw EtcdReplyError(std::string("etcd's reply has a ") + name + " that is not base64");
  return *decoded;
}

KeyValue key_value(const json& kv) {
  KeyValue out;
  out.key = bytes_field(kv, "key");
  out.value = bytes_field(kv, "value");
  out.create_revision = int64_field(kv, "create_revision");
  out.mod_revision = int64_field(kv, "mod_revision");
  out.version = int64_field(kv, "version");
  out.lease = int64_field(kv, "lease");
  return out;
}

std::int64_t header_revision(const json& reply) {
  auto it = reply.find("header");
  return it != reply.end() && it->is_object() ? int64_field(*it, "revision") : 0;
}

std::optional<KeyValue> first_kv(const json& range) {
  auto it = range.find("kvs");
  if (it == range.end() || !it->is_array() || it->empty()) return std::nullopt;
  return key_value(it->front());
}

json operation(const Operation& op) {
  if (op.kind == Operation::Kind::range) return {{"request_range", {{"key", base64_encode(op.key)}}}};
  json put = {{"key", base64_encode(op.key)}, {"value", base64_encode(op.value)}};
  if (op.lease != 0) put["lease"] = std::to_string(op.lease);
  return {{"request_put", put}};
}

json compare(const Compare& c) {
  json out = {{"key", base64_encode(c.key)}, {"result", "EQUAL"}};
  switch (c.target) {
    case Compare::Target::create:
      out["target"] = "CREATE";
      out["create_revision"] = std::to_string(c.revision);
      break;
    case Compare::Target::mod:
      out["target"] = "MOD";
      out["mod_revision"] = std::to_string(c.revision);
      break;
    case Compare::Target::value:
      out["target"] = "VALUE";
      out["value"] = base64_encode(c.value);
      break;
  }
  return out;
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const unsigned n = (static_cast<unsigned char>(bytes[i]) << 16) | (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                       static_cast<unsigned char>(bytes[i + 2]);
    out += kAlphabet[n >> 18];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += kAlphabet[n & 63];
  }
  if (i < bytes.size()) {
    unsigned n = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) n |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out += kAlphabet[n >> 18];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::array<int, 256> value{};
  value.fill(-1);
  for (std::size_t i = 0; i < kAlphabet.size(); ++i) value[static_cast<unsigned char>(kAlphabet[i])] = static_cast<int>(i);
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    int v[4];
    int padding = 0;
    for (int j = 0; j < 4; ++j) {
      const char c = text[i + static_cast<std::size_t>(j)];
      if (c == '=' && last && j >= 2) {
        v[j] = 0;
        ++padding;
        continue;
      }
      if (padding > 0) return std::nullopt;  // data after '='
      v[j] = value[static_cast<unsigned char>(c)];
      if (v[j] < 0) return std::nullopt;
    }
    const unsigned n = (static_cast<unsigned>(v[0]) << 18) | (static_cast<unsigned>(v[1]) << 12) |
                       (static_cast<unsigned>(v[2]) << 6) | static_cast<unsigned>(v[3]);
    out += static_cast<char>(n >> 16);
    if (padding < 2) out += static_cast<char>((n >> 8) & 255);
    if (padding < 1) out += static_cast<char>(n & 255);
  }
  return out;
}

std::string range_body(std::string_view key) { return json{{"key", base64_encode(key)}}.dump(); }

std::string put_body(std::string_view key, std::string_view value, std::int64_t lease) {
  return operation(Operation{Operation::Kind::put, std::string(key), std::string(value), lease})["request_put"].dump();
}

std::string txn_body(const std::vector<Compare>& compares, const std::vector<Operation>& success,
                     const std::vector<Operation>& failure) {
  json body = json::object();
  json c = json::array();
  for (const auto& each : compares) c.push_back(compare(each));
  json s = json::array();
  for (const auto& each : success) s.push_back(operation(each));
  json f = json::array();
  for (const auto& each : failure) f.push_back(operation(each));
  if (!c.empty()) body["compare"] = c;
  if (!s.empty()) body["success"] = s;
  if (!f.empty()) body["failure"] = f;
  return body.dump();
}

std::string lease_grant_body(std::int64_t ttl_seconds) { return json{{"TTL", std::to_string(ttl_seconds)}}.dump(); }

std::string lease_id_body(std::int64_t id) { return json{{"ID", std::to_string(id)}}.dump(); }

std::string authenticate_body(std::string_view user, std::string_view password) {
  return json{{"name", std::string(user)}, {"password", std::string(password)}}.dump();
}

std::string watch_body(std::string_view key, std::int64_t start_revision) {
  return json{{"create_request", {{"key", base64_encode(key)}, {"start_revision", std::to_string(start_revision)}}}}
      .dump();
}

RangeReply parse_range(std::string_view body) {
  const json reply = parse(body, "range");
  return RangeReply{header_revision(reply), first_kv(reply)};
}

TxnReply parse_txn(std::string_view body) {
  const json reply = parse(body, "transaction");
  TxnReply out;
  out.revision = header_revision(reply);
  out.succeeded = reply.value("succeeded", false);
  auto responses = reply.find("responses");
  if (responses != reply.end() && responses->is_array()) {
    for (const auto& response : *responses) {
      auto range = response.find("response_range");
      out.ranges.push_back(range != response.end() && range->is_object() ? first_kv(*range) : std::nullopt);
    }
  }
  return out;
}

LeaseReply parse_lease_grant(std::string_view body) {
  const json reply = parse(body, "lease grant");
  if (reply.contains("error") && !reply["error"].empty()) {
    throw EtcdReplyError("etcd did not grant a lease: " + reply["error"].dump());
  }
  LeaseReply out{int64_field(reply, "ID"), int64_field(reply, "TTL")};
  if (out.id == 0 || out.ttl <= 0) throw EtcdReplyError("etcd granted no lease: " + one_line(body, 200));
  return out;
}

LeaseReply parse_keepalive(std::string_view body) {
  // A stream of one message here (one request sent): the first line.
  const auto newline = body.find('\n');
  const json reply = parse(body.substr(0, newline), "lease keepalive");
  auto result = reply.find("result");
  if (result == reply.end() || !result->is_object()) {
    throw EtcdReplyError("etcd's lease keepalive reply has no result: " + one_line(body, 200));
  }
  return LeaseReply{int64_field(*result, "ID"), int64_field(*result, "TTL")};
}

std::string parse_token(std::string_view body) {
  const json reply = parse(body, "authenticate");
  auto token = reply.find("token");
  if (token == reply.end() || !token->is_string() || token->get_ref<const std::string&>().empty()) {
    throw EtcdReplyError("etcd's authenticate reply has no token");
  }
  return token->get<std::string>();
}

std::optional<ApiError> parse_error(std::string_view body) {
  const auto newline = body.find('\n');
  json reply = common::parse_bounded_json_or_discarded(body.substr(0, newline));
  if (reply.is_discarded() || !reply.is_object()) return std::nullopt;
  // A streamed reply wraps its error: {"error": {"grpc_code": 14, "message": ...}}.
  auto error = reply.find("error");
  if (error == reply.end()) return std::nullopt;
  if (error->is_object()) {
    ApiError out;
    out.code = error->value("grpc_code", error->value("code", 0));
    out.message = error->value("message", error->dump());
    return out;
  }
  ApiError out;
  out.code = reply.value("code", 0);
  out.message = reply.value("message", error->is_string() ? error->get<std::string>() : error->dump());
  return out;
}

Failure classify(int http_status, const std::optional<ApiError>& error) {
  const std::string message = error ? error->message : std::string();
  auto says = [&](std::string_view text) { return message.find(text) != std::string::npos; };
  if (says("invalid auth token") || says("auth: revision in header is old")) return Failure::reauthenticate;
  if (says("user name is empty") || says("authentication failed") || says("permission denied") ||
      says("user name not found") || says("authentication is not enabled")) {
    return Failure::authentication;
  }
  const int code = error ? error->code : 0;
  if (code == 16 || code == 7 || http_status == 401 || http_status == 403) return Failure::authentication;
  if (code == 14 || code == 4 || code == 10 || http_status == 502 || http_status == 503 || http_status == 504 ||
      says("leader changed") || says("no leader") || says("timed out") || says("server stopped") ||
      says("too many requests")) {
    return Failure::retry_elsewhere;
  }
  return Failure::fatal;
}

WatchMessage parse_watch_message(std::string_view line) {
  const json message = parse(line, "watch");
  WatchMessage out;
  if (auto error = parse_error(line)) {
    out.error = error;
    return out;
  }
  auto result = message.find("result");
  if (result == message.end() || !result->is_object()) {
    throw EtcdReplyError("etcd's watch message has no result: " + one_line(line, 200));
  }
  out.revision = header_revision(*result);
  out.created = result->value("created", false);
  out.canceled = result->value("canceled", false);
  out.compact_revision = int64_field(*result, "compact_revision");
  out.cancel_reason = result->value("cancel_reason", std::string());
  auto events = result->find("events");
  if (events != result->end() && events->is_array()) {
    for (const auto& event : *events) {
      WatchEvent each;
      each.deleted = event.value("type", std::string()) == "DELETE";
      if (auto kv = event.find("kv"); kv != event.end() && kv->is_object()) each.kv = key_value(*kv);
      out.events.push_back(std::move(each));
    }
  }
  return out;
}

std::string one_line(std::string_view text, std::size_t limit) {
  std::string out;
  for (char c : text) {
    if (out.size() >= limit) {
      out += "...";
      break;
    }
    const bool space = c == '\n' || c == '\r' || c == '\t' || c == ' ';
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::vector<std::string> take_lines(std::string& pending, std::string_view bytes) {
  // `pending` holds no newline: only the new bytes are searched, so a long message that arrives in
  // small pieces costs its length once, not its length times the pieces.
  std::size_t search_from = pending.size();
  pending.append(bytes);
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t newline; (newline = pending.find('\n', search_from)) != std::string::npos;
       start = search_from = newline + 1) {
    if (newline > start) lines.emplace_back(pending, start, newline - start);
  }
  pending.erase(0, start);
  return lines;
}

}  // namespace ddprun::rendezvous::etcd

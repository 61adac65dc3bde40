#include "rendezvous/rendezvous_settings.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <set>
#include <utility>

namespace ddprun::rendezvous {
namespace {

using std::chrono::milliseconds;

[[noreturn]] void reject(std::string_view key, std::string_view value, const std::string& expected) {
  throw SettingError(std::string(key), std::string(value), expected);
}

double number_of(std::string_view key, std::string_view value) {
  double number = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, number);
  if (value.empty() || ec != std::errc() || ptr != end || !std::isfinite(number) || number < 0) {
    reject(key, value, "a number >= 0");
  }
  return number;
}

milliseconds seconds_of(std::string_view key, std::string_view value, bool zero_allowed) {
  double seconds = number_of(key, value);
  if (!zero_allowed && seconds <= 0) reject(key, value, "a number > 0");
  // Days of milliseconds fit easily; anything longer is "forever" for a rendezvous.
  constexpr double kMaxSeconds = 1e9;
  milliseconds duration(std::llround(std::min(seconds, kMaxSeconds) * 1000.0));
  if (!zero_allowed && duration <= milliseconds(0)) reject(key, value, "at least 0.001 (1 ms)");
  return duration;
}

bool boolean_of(std::string_view key, std::string_view value) {
  std::string lower(value);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  static const std::set<std::string, std::less<>> yes{"1", "true", "t", "yes", "y"};
  static const std::set<std::string, std::less<>> no{"0", "false", "f", "no", "n"};
  if (yes.contains(lower)) return true;
  if (no.contains(lower)) return false;
  reject(key, value, "a boolean");
}

}  // namespace

SettingError::SettingError(std::string key_, std::string value_, std::string expected_)
    : Error(key_ + "=" + value_ + " is not " + expected_),
      key(std::move(key_)),
      value(std::move(value_)),
      expected(std::move(expected_)) {}

void apply_rendezvous_setting(RendezvousSettings& settings, std::string_view key, std::string_view value) {
  if (key == "join_timeout") settings.join_timeout = seconds_of(key, value, true);
  else if (key == "last_call_timeout") settings.last_call_timeout = seconds_of(key, value, true);
  else if (key == "close_timeout") settings.close_timeout = seconds_of(key, value, true);
  else if (key == "keep_alive_interval") settings.keep_alive_interval = seconds_of(key, value, false);
  else if (key == "heartbeat_timeout") settings.heartbeat_timeout = seconds_of(key, value, false);
  else if (key == "read_timeout") settings.read_timeout = seconds_of(key, value, true);
  else if (key == "timeout") settings.timeout = seconds_of(key, value, true);
  else if (key == "is_host") settings.is_host = boolean_of(key, value);
  else if (key == "keep_alive_max_attempt") {
    double attempts = number_of(key, value);
    if (attempts < 1 || attempts != std::floor(attempts) || attempts > 1e6) reject(key, value, "an integer >= 1");
    settings.keep_alive_max_attempt = static_cast<int>(attempts);
  }
}

void apply_rendezvous_conf(RendezvousSettings& settings, const std::map<std::string, std::string>& conf) {
  for (const auto& [key, value] : conf) apply_rendezvous_setting(settings, key, value);
}

}  // namespace ddprun::rendezvous

// The rendezvous settings (--rdzv-conf's keys): torchrun's keys and defaults, and the values a typo produces.
#include "rendezvous/rendezvous_settings.hpp"

#include <gtest/gtest.h>

#include <string>

using namespace ddprun::rendezvous;
using namespace std::chrono_literals;

namespace {

RendezvousSettings applied(const std::map<std::string, std::string>& conf) {
  RendezvousSettings settings;
  apply_rendezvous_conf(settings, conf);
  return settings;
}

/// The message apply_rendezvous_conf throws for `key=value`; empty when it accepts it.
std::string rejection(const std::string& key, const std::string& value) {
  try {
    applied({{key, value}});
  } catch (const SettingError& error) {
    EXPECT_EQ(error.key, key);
    EXPECT_EQ(error.value, value);
    return error.what();
  }
  return {};
}

const char* const kDurationKeys[] = {"join_timeout",        "last_call_timeout", "close_timeout",
                                     "keep_alive_interval", "heartbeat_timeout", "read_timeout",
                                     "timeout"};

}  // namespace

TEST(RendezvousSettings, DefaultsAreTorchrunsDefaults) {
  RendezvousSettings settings;
  EXPECT_EQ(settings.join_timeout, 600s);
  EXPECT_EQ(settings.last_call_timeout, 30s);
  EXPECT_EQ(settings.close_timeout, 30s);
  EXPECT_EQ(settings.keep_alive_interval, 5s);
  EXPECT_EQ(settings.keep_alive_max_attempt, 3);
  EXPECT_EQ(settings.heartbeat_timeout, 5s);
  EXPECT_EQ(settings.read_timeout, 60s);
  EXPECT_EQ(settings.timeout, 900s);
  EXPECT_FALSE(settings.is_host.has_value());
  EXPECT_EQ(settings.lost_after(), 15s);
}

TEST(RendezvousSettings, EmptyConfChangesNothing) {
  RendezvousSettings settings = applied({});
  EXPECT_EQ(settings.join_timeout, 600s);
  EXPECT_EQ(settings.timeout, 900s);
  EXPECT_FALSE(settings.is_host.has_value());
}

TEST(RendezvousSettings, EveryKeyIsApplied) {
  RendezvousSettings settings = applied({{"join_timeout", "10"},
                                         {"last_call_timeout", "11"},
                                         {"close_timeout", "12"},
                                         {"keep_alive_interval", "13"},
                                         {"keep_alive_max_attempt", "14"},
                                         {"heartbeat_timeout", "15"},
                                         {"read_timeout", "16"},
                                         {"timeout", "17"},
                                         {"is_host", "true"}});
  EXPECT_EQ(settings.join_timeout, 10s);
  EXPECT_EQ(settings.last_call_timeout, 11s);
  EXPECT_EQ(settings.close_timeout, 12s);
  EXPECT_EQ(settings.keep_alive_interval, 13s);
  EXPECT_EQ(settings.keep_alive_max_attempt, 14);
  EXPECT_EQ(settings.heartbeat_timeout, 15s);
  EXPECT_EQ(settings.read_timeout, 16s);
  EXPECT_EQ(settings.timeout, 17s);
  EXPECT_EQ(settings.is_host, true);
}

TEST(RendezvousSettings, FractionalSeconds) {
  EXPECT_EQ(applied({{"join_timeout", "0.5"}}).join_timeout, 500ms);
  EXPECT_EQ(applied({{"keep_alive_interval", "1.25"}}).keep_alive_interval, 1250ms);
  EXPECT_EQ(applied({{"read_timeout", ".2"}}).read_timeout, 200ms);
  // 1.001 is 1000.999... in binary: milliseconds are rounded, not truncated.
  EXPECT_EQ(applied({{"close_timeout", "1.001"}}).close_timeout, 1001ms);
  EXPECT_EQ(applied({{"timeout", "2.002"}}).timeout, 2002ms);
}

TEST(RendezvousSettings, TinyPositiveValuesDoNotBecomeZero) {
  // 0 is refused for these keys; a value that would round to 0 ms must not slip through as 0.
  for (std::string key : {"keep_alive_interval", "heartbeat_timeout"}) {
    try {
      RendezvousSettings settings = applied({{key, "0.0001"}});
      EXPECT_GT(key == "keep_alive_interval" ? settings.keep_alive_interval : settings.heartbeat_timeout, 0ms) << key;
    } catch (const SettingError& error) {
      EXPECT_NE(std::string(error.what()).find(key), std::string::npos) << error.what();
    }
  }
}

TEST(RendezvousSettings, ZeroIsAcceptedWhereItMeansNoWait) {
  EXPECT_EQ(applied({{"last_call_timeout", "0"}}).last_call_timeout, 0ms);
  EXPECT_EQ(applied({{"close_timeout", "0"}}).close_timeout, 0ms);
}

TEST(RendezvousSettings, IsHostSpellings) {
  for (std::string yes : {"1", "true", "TRUE", "True", "t", "T", "yes", "YES", "y", "Y"}) {
    EXPECT_EQ(applied({{"is_host", yes}}).is_host, true) << yes;
  }
  for (std::string no : {"0", "false", "FALSE", "False", "f", "F", "no", "No", "n", "N"}) {
    EXPECT_EQ(applied({{"is_host", no}}).is_host, false) << no;
  }
  for (std::string bad : {"", "2", "maybe", "on", "yess"}) {
    EXPECT_NE(rejection("is_host", bad).find("is_host"), std::string::npos) << bad;
  }
}

TEST(RendezvousSettings, UnknownKeysAreIgnored) {
  RendezvousSettings settings = applied({{"store_type", "file"}, {"local_addr", "x"}, {"join_timeoutt", "abc"}});
  EXPECT_EQ(settings.join_timeout, 600s);
  EXPECT_FALSE(settings.is_host.has_value());
}

TEST(RendezvousSettings, BadValuesNameTheKey) {
  for (const char* key : kDurationKeys) {
    for (std::string bad : {"", "abc", "-1", "-0.5", "5s", "1,5", "nan", "inf"}) {
      std::string message = rejection(key, bad);
      EXPECT_NE(message, "") << key << "=" << bad << " accepted";
      // The layer's own words: KEY=VALUE is not ...; the command line names the flag.
      EXPECT_EQ(message.rfind(std::string(key) + "=" + bad + " is not ", 0), 0u) << message;
      EXPECT_NE(message.find(key), std::string::npos) << message;
    }
  }
  for (std::string bad : {"", "abc", "-1", "2.5", "3x"}) {
    EXPECT_NE(rejection("keep_alive_max_attempt", bad).find("keep_alive_max_attempt"), std::string::npos) << bad;
  }
}

TEST(RendezvousSettings, ZeroIsRejectedWhereItMeansNothing) {
  for (std::string key : {"keep_alive_interval", "keep_alive_max_attempt", "heartbeat_timeout"}) {
    EXPECT_NE(rejection(key, "0").find(key), std::string::npos) << key;
  }
}

TEST(RendezvousSettings, JoinDeadlineIsTimeoutForStaticAndJoinTimeoutForC10d) {
  RendezvousSettings settings = applied({{"join_timeout", "7"}, {"timeout", "8"}});
  settings.is_static = false;
  EXPECT_EQ(settings.join_deadline(), 7s);
  settings.is_static = true;
  EXPECT_EQ(settings.join_deadline(), 8s);
}

TEST(RendezvousSettings, LostAfterIsIntervalTimesAttempts) {
  RendezvousSettings settings = applied({{"keep_alive_interval", "0.5"}, {"keep_alive_max_attempt", "4"}});
  EXPECT_EQ(settings.lost_after(), 2s);
}

TEST(RendezvousSettings, SettingErrorIsTheLayersErrorAndSaysWhatWasExpected) {
  struct Row {
    std::string key, value, expected;
  };
  const Row rows[] = {
      {"join_timeout", "soon", "a number >= 0"},
      {"read_timeout", "-1", "a number >= 0"},
      {"keep_alive_interval", "0", "a number > 0"},
      {"heartbeat_timeout", "0.0001", "at least 0.001 (1 ms)"},
      {"keep_alive_max_attempt", "2.5", "an integer >= 1"},
      {"keep_alive_max_attempt", "x", "a number >= 0"},
      {"is_host", "maybe", "a boolean"},
  };
  for (const auto& row : rows) {
    RendezvousSettings settings;
    try {
      apply_rendezvous_setting(settings, row.key, row.value);
      ADD_FAILURE() << row.key << "=" << row.value << " accepted";
    } catch (const Error& error) {  // the layer's base
      const auto* setting = dynamic_cast<const SettingError*>(&error);
      ASSERT_NE(setting, nullptr) << error.what();
      EXPECT_EQ(setting->expected, row.expected) << row.key << "=" << row.value;
      EXPECT_EQ(std::string(error.what()), row.key + "=" + row.value + " is not " + row.expected);
    }
  }
}

TEST(RendezvousSettings, EntriesApplyInOrderAndTheLastWins) {
  RendezvousSettings settings;
  apply_rendezvous_setting(settings, "join_timeout", "1");
  apply_rendezvous_setting(settings, "join_timeout", "2");
  EXPECT_EQ(settings.join_timeout, 2s);
}

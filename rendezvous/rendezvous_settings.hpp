#pragma once
/// RendezvousSettings: the membership rules of one job (static or c10d), with every `--rdzv-conf`
/// key of the contract as a typed value. Pure.
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "rendezvous/error.hpp"

namespace ddprun::rendezvous {

/// A rendezvous setting refused: `key` set to `value`, which is not `expected` ("a number >= 0").
/// what() = "KEY=VALUE is not EXPECTED"; the caller names where the setting came from.
struct SettingError : Error {
  SettingError(std::string key, std::string value, std::string expected);
  std::string key;
  std::string value;
  std::string expected;
};

struct RendezvousSettings {
  std::string run_id = "none";
  bool is_static = false;  ///< static: min == max nodes, ranks from --node-rank, no last call
  int min_nodes = 1;
  int max_nodes = 1;
  int static_rank = -1;  ///< static only: this node's --node-rank
  /// --max-restarts: part of the job's shape (job_shape.hpp), since every node must count restarts
  /// alike; not a rendezvous rule otherwise.
  int max_restarts = 0;
  /// Static only (--worker-store agent): the workers use node 0's store on --master-port, each
  /// attempt under its own key prefix, instead of a fresh store per round. Part of the job's shape:
  /// nodes that disagree would send their workers to different stores.
  bool agent_worker_store = false;

  /// c10d: how long a node waits for its round to form before it gives up.
  std::chrono::milliseconds join_timeout{std::chrono::seconds(600)};
  /// c10d, MIN < MAX only: once MIN nodes are in, how long more nodes may still join.
  std::chrono::milliseconds last_call_timeout{std::chrono::seconds(30)};
  /// How long a leaving agent (job done, failed, stopped by a signal) may spend telling the others.
  std::chrono::milliseconds close_timeout{std::chrono::seconds(30)};
  /// A node writes its heartbeat this often, and checks the other nodes' heartbeats as often.
  std::chrono::milliseconds keep_alive_interval{std::chrono::seconds(5)};
  /// A node whose heartbeat has not changed for keep_alive_interval x this many is dropped.
  int keep_alive_max_attempt = 3;
  /// The deadline of one heartbeat's store exchange; a late one counts as a missed beat.
  std::chrono::milliseconds heartbeat_timeout{std::chrono::seconds(5)};
  /// The deadline of every other store operation of the agent; a store that cannot be reached for
  /// this long is lost, and the agent stops with an error.
  std::chrono::milliseconds read_timeout{std::chrono::seconds(60)};
  /// static: how long node 0's store and all the nodes have to come up and join.
  std::chrono::milliseconds timeout{std::chrono::seconds(900)};
  /// Force (true) or forbid (false) hosting the store; unset: host when the endpoint is this machine.
  std::optional<bool> is_host;

  /// How long a node waits for its round to form: `timeout` (static) or `join_timeout` (c10d).
  std::chrono::milliseconds join_deadline() const { return is_static ? timeout : join_timeout; }
  /// How long a silent node stays in the round.
  std::chrono::milliseconds lost_after() const { return keep_alive_interval * keep_alive_max_attempt; }
};

/// Applies one key of the contract (durations in seconds, fractions allowed; keep_alive_max_attempt
/// an integer; is_host a boolean: 1/0, true/false, t/f, yes/no, y/n in any case); other keys are
/// ignored, as torchrun does. The one validator of these values. Throws SettingError for a value
/// that is not a number >= 0 ("a number >= 0"), or is 0 (or rounds to 0 ms) where 0 means nothing
/// sensible (keep_alive_interval, heartbeat_timeout: "a number > 0", "at least 0.001 (1 ms)";
/// keep_alive_max_attempt: "an integer >= 1"), or an is_host that is not a boolean ("a boolean").
void apply_rendezvous_setting(RendezvousSettings& settings, std::string_view key, std::string_view value);

/// apply_rendezvous_setting for every entry of `conf`, in key order.
void apply_rendezvous_conf(RendezvousSettings& settings, const std::map<std::string, std::string>& conf);

}  // namespace ddprun::rendezvous

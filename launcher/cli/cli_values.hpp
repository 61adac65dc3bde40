#pragma once
/// Option values: text -> checked, typed value. Each parser takes the value's `text` and `flag`,
/// how a message names where the value came from ("--nnodes", or "--nnodes (from PET_NNODES)"),
/// and refuses a bad value with a one-line UsageError `FLAG: "TEXT" WHY`. Pure functions: what
/// they know of the host is passed in.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "launcher/cli/host_facts.hpp"
#include "launcher/cli/launch_config.hpp"
#include "rendezvous/endpoint.hpp"
#include "rendezvous/rendezvous_settings.hpp"

namespace ddprun::launcher {

/// The largest value an int option takes.
inline constexpr long long kIntMax = 2147483647;

/// `value` in double quotes with control characters escaped, so that a message quoting user
/// input stays on one line.
std::string quote_for_message(std::string_view value);

/// Throws UsageError `FLAG: "TEXT" WHY`, TEXT quoted by quote_for_message.
[[noreturn]] void reject_value(std::string_view text, std::string_view flag, std::string_view why);

/// Throws UsageError `FLAG: empty value` when `text` is empty.
void require_non_empty(std::string_view text, std::string_view flag);

/// A whole decimal integer (an optional '-', digits, nothing else), or nothing.
std::optional<long long> to_integer(std::string_view s);

/// A finite decimal number, or nothing.
std::optional<double> to_number(std::string_view s);

/// `text` as an integer in [low, high]; anything else is rejected with `expected` as the reason
/// ("is not a port number (0..65535)").
int integer_in(std::string_view text, std::string_view flag, long long low, long long high,
               std::string_view expected);

/// A flag's value (a PET_* boolean, or the text after `--flag=`): 1, 0, true or false, in any case.
bool parse_boolean(std::string_view text, std::string_view flag);

/// --nnodes: N (= N:N) or MIN:MAX with 0 < MIN <= MAX -> {MIN, MAX}.
std::pair<int, int> parse_nnodes(std::string_view text, std::string_view flag);

/// --nproc-per-node: a positive integer, or gpu: the visible devices divided among workers of
/// `devices_per_worker` each (refused when that gives none); cpu: usable CPUs; auto: gpu when
/// any device is visible, else cpu.
int parse_nproc(std::string_view text, std::string_view flag, const HostFacts& host, int devices_per_worker);

/// --redirects/--tee: 0-3 for every local rank, or LOCAL_RANK:0-3,... (each rank at most once).
StreamSelection parse_streams(std::string_view text, std::string_view flag);

/// --rdzv-conf: K=V,... (spaces around either trimmed; the last of a repeated key wins), read once.
/// Each entry is applied to `settings` in order by rendezvous::apply_rendezvous_setting, the one
/// validator of those values; a value it refuses is a UsageError `FLAG: "TEXT" sets KEY to VALUE,
/// not EXPECTED`. etcd's keys are taken into the result's `etcd` (rendezvous::take_etcd_conf_key),
/// other keys pass unchecked; every entry is in `given`.
RdzvConf parse_rdzv_conf(std::string_view text, std::string_view flag, rendezvous::RendezvousSettings& settings);

/// --signals-to-handle: SIG,... by name or number, in order, without repeats; SIGKILL and
/// SIGSTOP are refused.
std::vector<int> parse_signals(std::string_view text, std::string_view flag);

/// --local-ranks-filter: LR,... each below `nproc`; blank text = nothing (every local rank).
std::optional<std::set<int>> parse_rank_filter(std::string_view text, std::string_view flag, int nproc);

/// --log-line-prefix-template: refuses an unclosed "${" and placeholders other than
/// ${role_name} ${rank} ${local_rank} ${hostname}.
void check_prefix_template(std::string_view text, std::string_view flag);

/// Parses `host[:port]` or `[v6addr][:port]` by torchrun's rules (parse_rendezvous_endpoint): an
/// unbracketed text with several ':' is split at its last ':' ("::1:29400" = [::1]:29400), and is
/// refused when what is left of the last ':' is not an IPv6 address. Empty text = localhost.
/// The port defaults to `default_port`. Throws UsageError starting with `flag` when malformed.
rendezvous::Endpoint parse_endpoint(std::string_view text, int default_port, std::string_view flag = "--rdzv-endpoint");

}  // namespace ddprun::launcher

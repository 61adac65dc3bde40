#pragma once
/// ddprun's option table: one entry per option drives CLI11, the PET_* names, the --help text and
/// the check that an option taking a value got one.
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace ddprun::launcher {

/// Every option, by name in code: the handle the command line's reader asks for, so that a typo is
/// a compile error rather than a failed lookup at run time. In --help order, as the table.
enum class Option : std::size_t {
  nnodes, node_rank, master_addr, master_port, rdzv_backend, rdzv_endpoint, rdzv_id, rdzv_conf,
  standalone, local_addr, nproc_per_node, devices_per_worker, role, max_restarts, monitor_interval,
  shutdown_timeout, signals_to_handle, forward_signals, start_method, numa_binding, virtual_local_rank,
  event_log_handler, worker_store, log_dir, redirects, tee, local_ranks_filter, duplicate_stdout_filters,
  duplicate_stderr_filters, logs_specs, log_line_prefix_template, pty, stdin_target, verbose, events, module,
  no_python, run_path, use_env, append_local_rank, preload,
  status, status_interval,
  hang_timeout, hang_action, gpu_health, gpu_release_timeout,
  status_port, status_host,
  hostfile, hosts, include, exclude, ssh_port, ssh_option, env_export,
  count_  ///< the number of options, not one
};

/// The --help section an option is listed under.
enum class Group { membership, workers, output, program, hosts };

struct OptionSpec {
  Option id;                  ///< its handle; the table holds the options in the handles' order
  std::string_view name;      ///< long name with '-', e.g. "nproc-per-node"; '_' spelling is derived
  char short_name;            ///< 0 when none
  std::string_view metavar;   ///< empty for a flag (an option without a value)
  std::string_view fallback;  ///< the default, as --help shows it
  Group group;
  std::string_view help;
  /// `--opt=` (an empty value, as templates write) means the default, as torchrun reads it; false:
  /// the empty value is checked like any other, and refused where torchrun refuses it too.
  bool empty_is_default = false;
};

/// Every option, in --help order. -h/--help and --version are not in it.
std::span<const OptionSpec> option_table();

/// The table's entry for `option`.
const OptionSpec& spec_of(Option option);

/// True for an option that takes no value (--standalone, -m).
bool is_flag(const OptionSpec& spec);

/// "--nproc-per-node": how messages name the option.
std::string dash_name(const OptionSpec& spec);

/// "PET_NPROC_PER_NODE": the environment variable that sets the option.
std::string pet_name(const OptionSpec& spec);

/// "nproc_per_node": the '_' spelling of the long name (the same as the name when it has no '-').
std::string underscored_name(const OptionSpec& spec);

/// An argument that reads as an option rather than a value or PROGRAM: "-x", "--x"; not "-",
/// "-1", "-.5" (negative numbers are values).
bool looks_like_option(std::string_view arg);

/// CLI11's name list: "-m,--module", "--nproc-per-node,--nproc_per_node".
std::string cli11_names(const OptionSpec& spec);

/// The option with long name `name` (without "--"; '_' and '-' alike), or nullptr.
const OptionSpec* find_long(std::string_view name);

/// The option with short name `c`, or nullptr.
const OptionSpec* find_short(char c);

/// The whole --help text, ending with a newline.
std::string help_text();

}  // namespace ddprun::launcher

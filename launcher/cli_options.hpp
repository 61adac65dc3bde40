#pragma once
/// ddprun's option table: one entry per option drives CLI11, the PET_* names, the --help text and
/// the check that an option taking a value got one.
#include <span>
#include <string>
#include <string_view>

namespace ddprun::launcher {

/// The --help section an option is listed under.
enum class Group { membership, workers, output, program };

struct OptionSpec {
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

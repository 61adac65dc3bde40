#pragma once
/// argparse's habits with long option names, which torchrun's users bring: a unique prefix of a
/// long option stands for it (`--nproc=2`, `--nnod 1`), and `--opt=` gives the option an empty
/// value. CLI11 knows neither, so the command line is rewritten into full names before CLI11 reads
/// it. Pure functions.
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::launcher {

/// What a typed long option name (without "--", before any '=') stands for among `names` (each
/// without "--"; one option may have several spellings, listed as separate names with the same
/// `owner` index). argparse's rule: an exact name wins; else every name the typed text is a prefix
/// of; one owner among them = that option; several = ambiguous.
struct NameMatch {
  enum class Kind { none, unique, ambiguous } kind = Kind::none;
  std::size_t owner = 0;                 ///< the option, when unique
  std::vector<std::string> candidates;   ///< when ambiguous: per option, its first matching name (with "--")
};

struct LongName {
  std::string_view name;  ///< without "--", e.g. "nproc_per_node"
  std::size_t owner;      ///< which option it spells
};

NameMatch match_long_name(std::string_view typed, std::span<const LongName> names);

/// The command line with every long option before PROGRAM spelled out in full (its dashed name),
/// as argparse would read it: `--nproc=2` -> `--nproc-per-node=2`, `--nnod 1` -> `--nnodes 1`, and
/// `--opt=` (an empty value after '=') -> `--opt ""`, so that CLI11 reads an empty value instead of
/// taking the next argument. -h/--help and --version are expanded too. Unknown options are left
/// for CLI11 to report; nothing at or after PROGRAM (or `--`) is touched.
/// Throws UsageError `--PREFIX: ambiguous option: could match --a, --b` like argparse.
std::vector<std::string> spell_out_options(const std::vector<std::string>& args);

}  // namespace ddprun::launcher

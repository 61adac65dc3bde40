#include "launcher/cli/cli_spelling.hpp"

#include <algorithm>

#include "launcher/cli/cli_options.hpp"
#include "launcher/base/errors.hpp"

namespace ddprun::launcher {
namespace {

/// Options outside the table that argparse-style prefixes still reach (torchrun: `--h` is --help).
constexpr std::string_view kHelp = "help";
constexpr std::string_view kVersion = "version";

struct Spellings {
  std::vector<std::string> storage;  ///< underscored spellings, owned here
  std::vector<LongName> names;
  std::vector<std::string> full;  ///< per owner: the name CLI11 knows, with "--"
};

const Spellings& spellings() {
  static const Spellings all = [] {
    Spellings s;
    auto table = option_table();
    s.storage.reserve(table.size());
    for (std::size_t i = 0; i < table.size(); ++i) {
      s.names.push_back({table[i].name, i});
      s.full.push_back(dash_name(table[i]));
      if (table[i].name.find('-') != std::string_view::npos) s.storage.push_back(underscored_name(table[i]));
    }
    // Second pass: `storage` no longer reallocates, so views into it stay valid.
    std::size_t k = 0;
    for (std::size_t i = 0; i < table.size(); ++i) {
      if (table[i].name.find('-') != std::string_view::npos) s.names.push_back({s.storage[k++], i});
    }
    s.names.push_back({kHelp, table.size()});
    s.full.push_back("--help");
    s.names.push_back({kVersion, table.size() + 1});
    s.full.push_back("--version");
    return s;
  }();
  return all;
}

/// True when the option (an index into option_table, or help/version) takes no value.
bool owner_is_flag(std::size_t owner) {
  auto table = option_table();
  return owner >= table.size() || is_flag(table[owner]);
}

}  // namespace

NameMatch match_long_name(std::string_view typed, std::span<const LongName> names) {
  NameMatch match;
  for (const auto& n : names) {
    if (n.name == typed) {
      match.kind = NameMatch::Kind::unique;
      match.owner = n.owner;
      return match;
    }
  }
  if (typed.empty()) return match;
  std::vector<std::size_t> owners;
  for (const auto& n : names) {
    if (!n.name.starts_with(typed)) continue;
    if (std::find(owners.begin(), owners.end(), n.owner) != owners.end()) continue;  // named once
    owners.push_back(n.owner);
    match.candidates.push_back("--" + std::string(n.name));
  }
  if (owners.size() == 1) {
    match.kind = NameMatch::Kind::unique;
    match.owner = owners.front();
    match.candidates.clear();
  } else if (owners.size() > 1) {
    match.kind = NameMatch::Kind::ambiguous;
  }
  return match;
}

std::vector<std::string> spell_out_options(const std::vector<std::string>& args) {
  const Spellings& s = spellings();
  std::vector<std::string> out;
  out.reserve(args.size() + 1);
  std::size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--" || !looks_like_option(arg)) break;  // PROGRAM (or `--`): the rest is the program's
    if (arg.starts_with("--")) {
      auto eq = arg.find('=');
      std::string_view typed = std::string_view(arg).substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      NameMatch match = match_long_name(typed, s.names);
      if (match.kind == NameMatch::Kind::ambiguous && kHelp.starts_with(typed)) {
        // torchrun's only --h... option is --help, so `--h` has always meant help there; ddprun's own
        // --hang-* options (--hang-t, --hang-a at the shortest) do not take that habit away.
        match.kind = NameMatch::Kind::unique;
        match.owner = option_table().size();
      }
      if (match.kind == NameMatch::Kind::ambiguous) {
        std::string list;
        for (const auto& c : match.candidates) list += (list.empty() ? "" : ", ") + c;
        throw UsageError("--" + std::string(typed) + ": ambiguous option: could match " + list);
      }
      if (match.kind == NameMatch::Kind::none) break;  // unknown: CLI11 stops here and it is reported
      const std::string& full = s.full[match.owner];
      if (eq == std::string::npos) {
        out.push_back(full);
        if (!owner_is_flag(match.owner) && i + 1 < args.size()) out.push_back(args[++i]);  // its value
      } else if (eq + 1 == arg.size() && !owner_is_flag(match.owner)) {
        out.push_back(full);  // `--opt=`: an empty value, as argparse reads it
        out.emplace_back();
      } else {
        out.push_back(full + arg.substr(eq));
      }
      continue;
    }
    // A cluster of short options, the last of which may take a value: -mr3, -mr 3.
    out.push_back(arg);
    for (std::size_t j = 1; j < arg.size(); ++j) {
      const OptionSpec* spec = find_short(arg[j]);
      if (spec == nullptr) break;
      if (!is_flag(*spec)) {
        if (j + 1 == arg.size() && i + 1 < args.size()) out.push_back(args[++i]);
        break;
      }
    }
  }
  out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  return out;
}

}  // namespace ddprun::launcher

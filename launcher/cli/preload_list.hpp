#pragma once
/// --preload's value (PET_PRELOAD): the modules a warm interpreter imports. Pure.
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::launcher {

/// "torch,transformers": the names, or why the text is not such a list. A name is a dotted Python
/// identifier (ASCII letters, digits, '_'); an empty entry is an error.
struct PreloadList {
  std::vector<std::string> modules;
  std::string error;  ///< empty: valid
};
PreloadList parse_preload_list(std::string_view text);

}  // namespace ddprun::launcher

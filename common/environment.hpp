#pragma once
/// A process environment as a value, so that everything reading it is a plain function of it; and
/// the one place that reads this process's environment into one.
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace ddprun::common {

/// Variable name -> value; the same type as ddprun::identity_from's argument (worker_runtime).
using Environment = std::map<std::string, std::string>;

/// A copy of this process's environment (environ); an entry without '=' is skipped.
Environment environment_snapshot();

/// The value of `name` in `env`, or nothing when it is unset. An empty value counts as set.
std::optional<std::string> lookup(const Environment& env, std::string_view name);

/// The value of `name` in this process's environment (std::getenv), or nothing when it is unset.
std::optional<std::string> getenv_value(const char* name);

}  // namespace ddprun::common

#pragma once
/// A process environment as a value, so that everything reading it is a plain function.
#include <map>
#include <optional>
#include <string>

namespace ddprun::launcher {

using Environ = std::map<std::string, std::string>;

/// A copy of this process's environment.
Environ current_environ();

/// The value of `name`, or nothing when it is unset. An empty value counts as set.
std::optional<std::string> lookup(const Environ& env, const std::string& name);

}  // namespace ddprun::launcher

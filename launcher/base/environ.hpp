#pragma once
/// A process environment as a value, so that everything reading it is a plain function. The
/// launcher's names for common/environment.hpp, which the worker runtime reads it with too.
#include <optional>
#include <string>

#include "common/environment.hpp"

namespace ddprun::launcher {

using Environ = common::Environment;

/// A copy of this process's environment.
Environ current_environ();

/// The value of `name`, or nothing when it is unset. An empty value counts as set.
std::optional<std::string> lookup(const Environ& env, const std::string& name);

}  // namespace ddprun::launcher

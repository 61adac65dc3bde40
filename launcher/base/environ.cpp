#include "launcher/base/environ.hpp"

namespace ddprun::launcher {

Environ current_environ() { return common::environment_snapshot(); }

std::optional<std::string> lookup(const Environ& env, const std::string& name) { return common::lookup(env, name); }

}  // namespace ddprun::launcher

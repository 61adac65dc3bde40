#include "launcher/environ.hpp"

extern char** environ;

namespace ddprun::launcher {

Environ current_environ() {
  Environ env;
  for (char** entry = ::environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string item(*entry);
    auto eq = item.find('=');
    if (eq == std::string::npos) continue;
    env.emplace(item.substr(0, eq), item.substr(eq + 1));
  }
  return env;
}

std::optional<std::string> lookup(const Environ& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  return it->second;
}

}  // namespace ddprun::launcher

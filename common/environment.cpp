#include "common/environment.hpp"

#include <cstdlib>

extern char** environ;

namespace ddprun::common {

Environment environment_snapshot() {
  Environment env;
  for (char** entry = ::environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view item(*entry);
    auto equals = item.find('=');
    if (equals == std::string_view::npos) continue;
    env.emplace(item.substr(0, equals), item.substr(equals + 1));
  }
  return env;
}

std::optional<std::string> lookup(const Environment& env, std::string_view name) {
  auto it = env.find(std::string(name));
  if (it == env.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> getenv_value(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

}  // namespace ddprun::common

#include "launcher/output/console.hpp"

#include <poll.h>
#include <unistd.h>

#include <array>
#include <cerrno>

namespace ddprun::launcher {

bool use_color(const Environ& env, int fd) {
  if (auto force = lookup(env, "CLICOLOR_FORCE"); force && !force->empty() && *force != "0") return true;
  if (auto no_color = lookup(env, "NO_COLOR"); no_color && !no_color->empty()) return false;
  if (auto term = lookup(env, "TERM"); term && *term == "dumb") return false;
  return ::isatty(fd) == 1;
}

std::string expand_prefix(std::string_view tmpl, const std::string& role, int rank, int local_rank,
                          const std::string& hostname) {
  struct Placeholder {
    std::string_view name;
    std::string value;
  };
  const std::array<Placeholder, 4> placeholders{{{"${role_name}", role},
                                                 {"${rank}", std::to_string(rank)},
                                                 {"${local_rank}", std::to_string(local_rank)},
                                                 {"${hostname}", hostname}}};
  std::string out;
  out.reserve(tmpl.size() + 16);
  while (!tmpl.empty()) {
    bool replaced = false;
    for (const auto& p : placeholders) {
      if (tmpl.starts_with(p.name)) {
        out += p.value;
        tmpl.remove_prefix(p.name.size());
        replaced = true;
        break;
      }
    }
    if (!replaced) {
      out += tmpl.front();
      tmpl.remove_prefix(1);
    }
  }
  return out;
}

std::string colorize(const std::string& prefix, int local_rank) {
  // Bright colours that read on dark and light backgrounds; red is left for errors.
  static constexpr std::array<const char*, 6> kColors{"36", "32", "33", "35", "34", "96"};
  const char* code = kColors[static_cast<std::size_t>(local_rank) % kColors.size()];
  return std::string("\x1b[") + code + "m" + prefix + "\x1b[0m";
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n >= 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN) {
      // Our stdout was left non-blocking by whoever shares it: wait for room rather than drop lines.
      pollfd pfd{fd, POLLOUT, 0};
      ::poll(&pfd, 1, -1);
      continue;
    }
    return false;
  }
  return true;
}

}  // namespace ddprun::launcher

#include "common/token_file.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ddprun::common {

std::string without_line_end(std::string text) {
  if (!text.empty() && text.back() == '\n') text.pop_back();
  if (!text.empty() && text.back() == '\r') text.pop_back();
  return text;
}

TokenFile read_token_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return {{}, std::strerror(errno)};
  std::ostringstream content;
  content << file.rdbuf();
  if (file.bad()) return {{}, std::strerror(errno)};
  return {without_line_end(content.str()), {}};
}

}  // namespace ddprun::common

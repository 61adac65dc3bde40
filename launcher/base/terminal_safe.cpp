#include "launcher/base/terminal_safe.hpp"

#include <vector>

namespace ddprun::launcher {

std::string terminal_safe(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (c == '\n' || c == '\t' || (byte >= 0x20 && byte != 0x7F)) {
      out.push_back(c);
    } else if (c == '\r') {
      continue;
    } else {
      out.push_back('^');
      out.push_back(byte == 0x7F ? '?' : static_cast<char>(byte + 0x40));
    }
  }
  return out;
}

std::string terminal_safe_line(std::string_view text) {
  std::string out = terminal_safe(text);
  for (char& c : out) {
    if (c == '\n' || c == '\t') c = ' ';
  }
  return out;
}

Excerpt last_lines(std::string_view text, std::size_t max_lines, std::size_t max_bytes) {
  std::vector<std::string_view> lines;
  while (true) {
    auto end = text.find('\n');
    lines.push_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  Excerpt excerpt;
  std::size_t first = lines.size();
  std::size_t bytes = 0;
  while (first > 0 && lines.size() - first < max_lines) {
    std::size_t size = lines[first - 1].size() + 1;
    if (bytes + size > max_bytes && first < lines.size()) break;  // always keep the last line
    bytes += size;
    --first;
  }
  excerpt.omitted = first;
  for (std::size_t i = first; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    if (line.size() > max_bytes) {
      excerpt.text.append(line.substr(0, max_bytes)).append("...");
    } else {
      excerpt.text.append(line);
    }
    if (i + 1 < lines.size()) excerpt.text.push_back('\n');
  }
  return excerpt;
}

}  // namespace ddprun::launcher

#include "launcher/output/live_region.hpp"

namespace ddprun::launcher {

std::string_view last_frame(std::string_view line) {
  while (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  auto cr = line.rfind('\r');
  return cr == std::string_view::npos ? line : line.substr(cr + 1);
}

namespace {

/// The length of the escape sequence at the start of `text` (which starts with ESC).
std::size_t escape_length(std::string_view text) {
  if (text.size() < 2) return text.size();
  if (text[1] == '[') {  // CSI: parameters and intermediates, then one final byte in 0x40..0x7E
    std::size_t i = 2;
    while (i < text.size() && (static_cast<unsigned char>(text[i]) < 0x40 || static_cast<unsigned char>(text[i]) > 0x7E)) ++i;
    return i < text.size() ? i + 1 : text.size();
  }
  if (text[1] == ']') {  // OSC: up to BEL or ST
    for (std::size_t i = 2; i < text.size(); ++i) {
      if (text[i] == '\a') return i + 1;
      if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '\\') return i + 2;
    }
    return text.size();
  }
  return 2;
}

bool is_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

std::string fit_to_width(std::string_view text, std::size_t columns) {
  std::string out;
  std::size_t width = 0;
  bool cut = false;
  bool escapes = false;
  while (!text.empty()) {
    if (text.front() == '\x1b') {
      // Colours (SGR, "ESC [ ... m") are kept; any other sequence could move the cursor out of the
      // live region (tqdm's nested bars go up a line) and is dropped.
      std::size_t n = escape_length(text);
      std::string_view sequence = text.substr(0, n);
      if (sequence.size() > 2 && sequence[1] == '[' && sequence.back() == 'm') {
        out.append(sequence);
        escapes = true;
      }
      text.remove_prefix(n);
      continue;
    }
    auto byte = static_cast<unsigned char>(text.front());
    if (byte < 0x20 || byte == 0x7F) {  // a control character would move the cursor: not drawn
      text.remove_prefix(1);
      continue;
    }
    if (!is_continuation(text.front())) {
      if (width == columns) {
        cut = true;
        break;
      }
      ++width;
    }
    out.push_back(text.front());
    text.remove_prefix(1);
  }
  if (cut && escapes) out.append("\x1b[0m");
  return out;
}

std::string render_frame(std::size_t shown, std::string_view complete, const std::vector<std::string>& live) {
  std::string out;
  if (shown > 0) {
    out.push_back('\r');
    if (shown > 1) out.append("\x1b[").append(std::to_string(shown - 1)).append("A");
    out.append("\x1b[J");
  }
  out.append(complete);
  for (std::size_t i = 0; i < live.size(); ++i) {
    if (i > 0) out.push_back('\n');
    out.append(live[i]);
  }
  return out;
}

std::vector<std::string> fit_to_rows(std::vector<std::string> live, std::size_t rows) {
  std::size_t room = rows > 1 ? rows - 1 : 1;
  if (live.size() <= room) return live;
  std::size_t keep = room - 1;
  std::size_t more = live.size() - keep;
  live.resize(keep);
  live.push_back("... " + std::to_string(more) + " more live lines");
  return live;
}

}  // namespace ddprun::launcher

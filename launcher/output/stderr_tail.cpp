#include "launcher/output/stderr_tail.hpp"

namespace ddprun::launcher {
namespace {

/// What a terminal shows of a line written with carriage returns.
std::string_view visible_part(std::string_view line) {
  if (line.ends_with('\r')) line.remove_suffix(1);  // CRLF line endings
  if (auto last_cr = line.rfind('\r'); last_cr != std::string_view::npos) line.remove_prefix(last_cr + 1);
  return line;
}

/// The longest prefix of at most `max_bytes` that does not split a UTF-8 sequence.
std::string_view utf8_prefix(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  std::size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut);
}

}  // namespace

StderrTail::StderrTail(std::size_t max_lines, std::size_t max_bytes)
    : max_lines_(max_lines), max_bytes_(max_bytes) {}

void StderrTail::add_line(std::string_view line_without_newline) {
  if (max_lines_ == 0) return;
  std::string_view visible = visible_part(line_without_newline);
  std::string line;
  if (visible.size() <= max_bytes_) {
    line = visible;
  } else if (max_bytes_ > kCutMark.size()) {
    std::string_view kept = utf8_prefix(visible, max_bytes_ - kCutMark.size());
    line.reserve(kept.size() + kCutMark.size());
    line.append(kept).append(kCutMark);
  } else {
    line = utf8_prefix(visible, max_bytes_);
  }

  text_bytes_ += line.size() + (lines_.empty() ? 0 : 1);
  lines_.push_back(std::move(line));
  // The new line fits on its own, so this stops before dropping it.
  while (lines_.size() > max_lines_ || text_bytes_ > max_bytes_) drop_oldest();
}

void StderrTail::drop_oldest() {
  text_bytes_ -= lines_.front().size() + (lines_.size() > 1 ? 1 : 0);
  lines_.pop_front();
}

std::string StderrTail::text() const {
  std::string text;
  text.reserve(text_bytes_);
  for (const auto& line : lines_) {
    if (&line != &lines_.front()) text += '\n';
    text += line;
  }
  return text;
}

void StderrTail::clear() {
  lines_.clear();
  text_bytes_ = 0;
}

}  // namespace ddprun::launcher

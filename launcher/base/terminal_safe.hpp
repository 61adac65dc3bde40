#pragma once
/// Worker-written text (error files, stderr tails) made fit for a terminal: a traceback can hold
/// escape sequences that would recolour, move or retitle the user's terminal, and can be megabytes
/// long. The summary prints a safe excerpt; the full text stays in the worker's file.
#include <cstddef>
#include <string>
#include <string_view>

namespace ddprun::launcher {

/// `text` with every control character but '\n' and '\t' shown in caret notation ("\x1b" -> "^[",
/// DEL -> "^?"), and '\r' dropped (CRLF line ends). UTF-8 passes unchanged.
std::string terminal_safe(std::string_view text);

/// terminal_safe(text) on one line: '\n' and '\t' shown as spaces. For a worker's text in a cell
/// of a table or a line of the status block, where a line break would break the layout.
std::string terminal_safe_line(std::string_view text);

struct Excerpt {
  std::string text;          ///< the kept lines, joined by '\n'
  std::size_t omitted = 0;   ///< lines left out before them
};

/// The last lines of `text`: at most `max_lines` lines and about `max_bytes` bytes (a single longer
/// line is cut at its end, marked "..."). A traceback ends with what matters (the exception).
Excerpt last_lines(std::string_view text, std::size_t max_lines, std::size_t max_bytes);

}  // namespace ddprun::launcher

#pragma once
/// The live region: the lines at the bottom of a terminal console that are redrawn in place (a
/// worker's `\r`-updated progress bar, a prompt without its newline). Complete lines are printed
/// above it, so they are never torn by a redraw. Pure functions: the console writer does the I/O.
///
/// The cursor convention: after a frame, the cursor stands at the end of the last live line (no
/// newline after it), so a region of N lines is taken back with "\r", N-1 lines up, clear to the
/// end of the screen. Each live line is cut to the terminal's width, so that it takes one row.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::launcher {

/// What a `\r`-updated line shows at its end: the text after its last carriage return that is
/// followed by something ("a\rb" -> "b"; "abc\r" -> "abc", a CRLF ending).
std::string_view last_frame(std::string_view line);

/// `text` cut to at most `columns` columns: colour sequences (SGR) take none and are kept whole,
/// other escape sequences and control characters are dropped (they would move the cursor), a UTF-8
/// character takes one (a wide one too: a cut line may end a column early); an SGR reset is appended
/// when the cut may have left a colour on.
std::string fit_to_width(std::string_view text, std::size_t columns);

/// The bytes that take a terminal from showing `shown` live lines (cursor at the end of the last)
/// to showing `complete` (whole lines, each ending in '\n') above the lines `live`. `live` lines
/// must be fitted to the width already, without control characters that move the cursor.
std::string render_frame(std::size_t shown, std::string_view complete, const std::vector<std::string>& live);

/// The live lines worth showing on a terminal of `rows` rows: all when they fit (leaving a row for
/// the complete lines above), else the first ones and a line saying how many more there are.
std::vector<std::string> fit_to_rows(std::vector<std::string> live, std::size_t rows);

}  // namespace ddprun::launcher

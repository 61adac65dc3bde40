#pragma once
/// Debian's Chromium, headless, for tests of the status page: the DOM after the page's scripts ran
/// (--dump-dom with a virtual time budget, so a page that polls every second has polled), a
/// screenshot, and the rank rows read back from the DOM. Tests skip when Chromium is absent.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace ddprun::testing {

inline const char* kChromium = "/usr/bin/chromium";

inline bool chromium_available() { return ::access(kChromium, X_OK) == 0; }

/// Runs `command` through the shell; its stdout (stderr is dropped: Chromium logs D-Bus noise there).
inline std::string shell_output(const std::string& command, int* status = nullptr) {
  std::string output;
  FILE* pipe = ::popen((command + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return output;
  char buffer[65536];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, n);
  int rc = ::pclose(pipe);
  if (status != nullptr) *status = rc;
  return output;
}

inline std::string chromium_command(const std::filesystem::path& profile) {
  return std::string("timeout 120 ") + kChromium +
         " --headless --no-sandbox --disable-gpu --no-first-run --disable-extensions --user-data-dir='" +
         profile.string() + "'";
}

/// The page's DOM once its scripts have had `budget_ms` of virtual time.
inline std::string dump_dom(const std::string& url, const std::filesystem::path& profile, int budget_ms = 5000) {
  return shell_output(chromium_command(profile) + " --virtual-time-budget=" + std::to_string(budget_ms) +
                      " --dump-dom '" + url + "'");
}

/// A PNG of the page at `width`x`height`; whether the file was written.
inline bool screenshot(const std::string& url, const std::filesystem::path& file, const std::filesystem::path& profile,
                       int width = 1400, int height = 900, int budget_ms = 5000) {
  std::filesystem::remove(file);
  shell_output(chromium_command(profile) + " --virtual-time-budget=" + std::to_string(budget_ms) +
               " --hide-scrollbars --window-size=" + std::to_string(width) + "," + std::to_string(height) +
               " --screenshot='" + file.string() + "' '" + url + "'");
  std::error_code ec;
  return std::filesystem::file_size(file, ec) > 0 && !ec;
}

/// Text content with the entities Chromium's serializer writes decoded.
inline std::string html_text(std::string text) {
  const std::pair<const char*, const char*> entities[] = {
      {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#39;", "'"}, {"&nbsp;", "\xc2\xa0"}, {"&amp;", "&"}};
  for (const auto& [from, to] : entities) {
    for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + std::strlen(to))) {
      text.replace(at, std::strlen(from), to);
    }
  }
  return text;
}

/// The page's rank rows: for each <tr data-rank="N">, its cells by their first class
/// (td class="pid num" -> "pid").
inline std::map<int, std::map<std::string, std::string>> rank_rows(const std::string& dom) {
  std::map<int, std::map<std::string, std::string>> rows;
  const std::string open = "<tr data-rank=\"";
  for (std::size_t at = dom.find(open); at != std::string::npos; at = dom.find(open, at + 1)) {
    int rank = std::atoi(dom.c_str() + at + open.size());
    std::size_t end = dom.find("</tr>", at);
    std::string row = dom.substr(at, end - at);
    auto& cells = rows[rank];
    const std::string cell = "<td class=\"";
    for (std::size_t c = row.find(cell); c != std::string::npos; c = row.find(cell, c + 1)) {
      std::size_t name_start = c + cell.size();
      std::size_t name_end = row.find_first_of(" \"", name_start);
      std::size_t text_start = row.find('>', c) + 1;
      std::size_t text_end = row.find("</td>", text_start);
      cells[row.substr(name_start, name_end - name_start)] = html_text(row.substr(text_start, text_end - text_start));
    }
  }
  return rows;
}

/// The text of the element with id `id` (its markup stripped).
inline std::string element_text(const std::string& dom, const std::string& id) {
  auto at = dom.find("id=\"" + id + "\"");
  if (at == std::string::npos) return {};
  auto start = dom.find('>', at) + 1;
  auto end = dom.find("</", start);
  std::string inner = dom.substr(start, end - start);
  std::string text;
  bool in_tag = false;
  for (char c : inner) {
    if (c == '<') in_tag = true;
    if (!in_tag) text += c;
    if (c == '>') in_tag = false;
  }
  return html_text(text);
}

}  // namespace ddprun::testing

namespace ddprun::testing {

/// Where a test keeps what a person may want to look at afterwards (screenshots): next to the test
/// binary, `output/<name>/`, created; it survives the test.
inline std::filesystem::path test_output_folder(const std::string& name) {
  std::filesystem::path folder = std::filesystem::read_symlink("/proc/self/exe").parent_path() / "output" / name;
  std::filesystem::create_directories(folder);
  return folder;
}

}  // namespace ddprun::testing

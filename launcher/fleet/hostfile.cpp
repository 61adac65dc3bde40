#include "launcher/fleet/hostfile.hpp"

#include <algorithm>
#include <set>

#include "launcher/base/errors.hpp"
#include "launcher/base/text.hpp"

namespace ddprun::launcher {
namespace {

/// A host name as ssh and the rendezvous can both use it: no white space, no shell-special start.
void check_destination(std::string_view destination, const std::string& where) {
  if (destination.empty()) throw UsageError(where + ": a host name is missing");
  if (destination.front() == '-') {
    throw UsageError(where + ": \"" + std::string(destination) + "\" is not a host name (it starts with '-')");
  }
  for (char c : destination) {
    if (std::isspace(static_cast<unsigned char>(c)) || static_cast<unsigned char>(c) < 0x20 || c == ',') {
      throw UsageError(where + ": \"" + std::string(destination) + "\" is not a host name");
    }
  }
  if (host_address(destination).empty()) {
    throw UsageError(where + ": \"" + std::string(destination) + "\" names no host after the user");
  }
}

int parse_slots(std::string_view value, const std::string& where) {
  if (value.empty() || value.size() > 6 ||
      !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    throw UsageError(where + ": slots=\"" + std::string(value) + "\" is not a count (an integer from 1 to 999999)");
  }
  int slots = std::stoi(std::string(value));
  if (slots < 1) throw UsageError(where + ": slots=" + std::string(value) + " is not a count >= 1");
  return slots;
}

void check_unique(const std::vector<HostSlot>& hosts, const std::string& where) {
  std::set<std::string> seen;
  for (const auto& host : hosts) {
    if (!seen.insert(host.destination).second) {
      throw UsageError(where + ": host \"" + host.destination + "\" is listed twice (give it one line with slots=N)");
    }
  }
  if (hosts.empty()) throw UsageError(where + ": lists no host");
}

}  // namespace

std::string host_address(std::string_view destination) {
  if (auto at = destination.rfind('@'); at != std::string_view::npos) destination.remove_prefix(at + 1);
  if (destination.size() >= 2 && destination.front() == '[' && destination.back() == ']') {
    destination = destination.substr(1, destination.size() - 2);
  }
  return std::string(destination);
}

std::vector<HostSlot> parse_hostfile(std::string_view text, std::string_view name) {
  std::vector<HostSlot> hosts;
  int number = 0;
  const std::string file = "--hostfile " + std::string(name);
  for (std::string_view line : split(text, '\n')) {
    ++number;
    const std::string where = file + ":" + std::to_string(number);
    if (auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = trim(line);
    if (line.empty()) continue;
    std::vector<std::string_view> words;
    while (!line.empty()) {
      std::size_t end = 0;
      while (end < line.size() && !std::isspace(static_cast<unsigned char>(line[end]))) ++end;
      words.push_back(line.substr(0, end));
      line = trim(line.substr(end));
    }
    HostSlot host{std::string(words[0]), std::nullopt};
    check_destination(host.destination, where);
    for (std::size_t i = 1; i < words.size(); ++i) {
      std::string_view word = words[i];
      auto eq = word.find('=');
      std::string_view key = word.substr(0, eq);
      std::string_view value = eq == std::string_view::npos ? std::string_view() : word.substr(eq + 1);
      if (eq == std::string_view::npos || (key != "slots" && key != "max_slots")) {
        throw UsageError(where + ": \"" + std::string(word) + "\" is not slots=N (a line is: HOST [slots=N])");
      }
      int count = parse_slots(value, where);
      if (key == "slots") host.slots = count;
    }
    hosts.push_back(std::move(host));
  }
  check_unique(hosts, file);
  return hosts;
}

std::vector<HostSlot> parse_host_list(std::string_view text, std::string_view label) {
  std::vector<HostSlot> hosts;
  const std::string where = std::string(label) + " " + std::string(text);
  for (std::string_view item : split(text, ',')) {
    item = trim(item);
    HostSlot host;
    // The slots follow the last ':' unless it is inside an IPv6 address: `[v6]:4`, or `v6` alone.
    auto colon = item.rfind(':');
    bool bracketed = item.find('[') != std::string_view::npos;
    bool has_slots = colon != std::string_view::npos &&
                     (bracketed ? colon > item.rfind(']') : item.find(':') == colon);
    if (has_slots) {
      host.destination = std::string(item.substr(0, colon));
      host.slots = parse_slots(item.substr(colon + 1), where);
    } else {
      host.destination = std::string(item);
    }
    check_destination(host.destination, where);
    hosts.push_back(std::move(host));
  }
  check_unique(hosts, where);
  return hosts;
}

std::vector<HostSlot> select_hosts(std::vector<HostSlot> hosts, std::string_view include, std::string_view exclude) {
  if (!include.empty() && !exclude.empty()) {
    throw UsageError("--include: cannot be used with --exclude (name the hosts to keep, or those to leave out)");
  }
  if (include.empty() && exclude.empty()) return hosts;
  const bool keep = !include.empty();
  const std::string label = keep ? "--include" : "--exclude";
  std::set<std::string> named;
  for (std::string_view name : split(keep ? include : exclude, ',')) {
    name = trim(name);
    if (name.empty()) continue;
    auto matches = [&](const HostSlot& host) { return host.destination == name || host_address(host.destination) == name; };
    if (std::none_of(hosts.begin(), hosts.end(), matches)) {
      throw UsageError(label + ": \"" + std::string(name) + "\" is not one of the job's hosts");
    }
    for (const auto& host : hosts) {
      if (matches(host)) named.insert(host.destination);
    }
  }
  std::erase_if(hosts, [&](const HostSlot& host) { return named.contains(host.destination) != keep; });
  if (hosts.empty()) throw UsageError(label + ": leaves no host to run on");
  return hosts;
}

}  // namespace ddprun::launcher

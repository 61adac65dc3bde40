#pragma once
/// Helpers shared by the multi-node tests: worker scripts written on the fly, marker files that
/// workers leave behind, and waits that never hang.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "harness.hpp"

namespace ddprun::testing {

inline std::string plain_sgd_binary() { return PLAIN_SGD_BINARY; }

/// plain_sgd's data shape for every world size these tests use (2, 3, 4, 6, 8, 12, 24 divide 24).
inline std::vector<std::string> plain_sgd_args() { return {"--samples", "2400", "--global-batch", "24"}; }

/// What is missing from `out` for it to show a plain_sgd job of `world` workers that trained and
/// checked its result: rank 0's "plain_sgd: rank 0 of <world>," and "plain_sgd: OK". Empty when
/// nothing is.
inline std::string plain_sgd_missing(const std::string& out, int world) {
  std::string missing;
  std::string rank0 = "plain_sgd: rank 0 of ";
  rank0 += std::to_string(world);
  rank0 += ',';
  for (const std::string& line : {rank0, std::string("plain_sgd: OK")}) {
    if (out.find(line) != std::string::npos) continue;
    if (!missing.empty()) missing += "; ";
    missing += "no \"" + line + "\"";
  }
  return missing;
}

/// `a` followed by `b`: a node's flags, then its program.
inline std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// The flags of a static node with one worker on 127.0.0.1, node 0 hosting the store on `port`.
inline std::vector<std::string> static_flags(int nnodes, int node_rank, int port, const std::string& rdzv_conf) {
  return {"--nnodes=" + std::to_string(nnodes),
          "--node_rank=" + std::to_string(node_rank),
          "--master_addr=127.0.0.1",
          "--master_port=" + std::to_string(port),
          "--nproc_per_node=1",
          "--rdzv_conf=" + rdzv_conf};
}

/// Writes an executable /bin/sh script `name` (no .py: ddprun execs it directly) into `dir`.
inline std::string write_script(const TempDir& dir, const std::string& name, const std::string& body) {
  auto path = dir.path() / name;
  {
    std::ofstream out(path);
    out << "#!/bin/sh\n" << body;
  }
  ::chmod(path.c_str(), 0755);
  return path.string();
}

/// A worker that says it started (DIR/started_<RANK>) and waits, at most 2 minutes, for DIR/go the
/// first time it runs on its rank; when it runs again (a new round), it exits 0 at once.
inline std::string wait_for_go_worker(const TempDir& dir) {
  const std::string d = "\"" + dir.str() + "\"";
  return write_script(dir, "wait_for_go",
                      "[ -e " + d + "/started_$RANK ] && exit 0\n"
                      "touch " + d + "/started_$RANK\n"
                      "i=0; while [ ! -e " + d + "/go ] && [ $i -lt 2400 ]; do sleep 0.05; i=$((i+1)); done\n"
                      "exit 0\n");
}

/// Waits until every one of `names` exists in `dir`; returns whether they all did within `timeout`.
inline bool files_appear(const TempDir& dir, const std::vector<std::string>& names, std::chrono::milliseconds timeout) {
  return eventually(
      [&] {
        for (const auto& name : names) {
          if (!std::filesystem::exists(dir.path() / name)) return false;
        }
        return true;
      },
      timeout);
}

/// Waits for a launch that may legitimately run on (a node cut off from the others): up to
/// `timeout` for it to end by itself, then SIGKILL. Returns whether it ended by itself; `outcome`
/// gets what it printed either way.
inline bool ends_by_itself(Launch& launch, std::chrono::milliseconds timeout, Outcome& outcome) {
  bool ended = eventually([&] { return !process_alive(launch.pid()); }, timeout);
  if (!ended) launch.send(SIGKILL);
  outcome = launch.wait(std::chrono::seconds(10));
  return ended;
}

/// Every line of `err` that ddprun printed itself starts with `ddprun: `; returns the first that does not.
inline std::string first_unprefixed_line(const std::string& err) {
  for (const auto& line : split_lines(err)) {
    if (!line.empty() && line.rfind("ddprun: ", 0) != 0) return line;
  }
  return {};
}

/// Output of several launches, each headed by its name, for failure messages.
inline std::string all_output(const std::vector<std::pair<std::string, Outcome>>& outcomes) {
  std::string text;
  for (const auto& [name, outcome] : outcomes) {
    text += "---- " + name + " (exit " + std::to_string(outcome.exit_status) + ") stdout:\n" + outcome.out + "---- " +
            name + " stderr:\n" + outcome.err;
  }
  return text;
}

}  // namespace ddprun::testing

#!/usr/bin/env bash
# Set up, build, and run the launcher benchmarks: ddprun against torchrun-anchor, same run.
# Usage: scripts/bench.sh [FILTER] [bench/launcher_bench.py options]
#   FILTER: substring of a benchmark name (launch, restart, cpu); e.g. `scripts/bench.sh cpu --cpu-sleep 3`
# Exits non-zero if a benchmark fails to run (a missed goal is reported, not a failure).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
build_dir=${DDPRUN_BUILD_DIR:-build}
# The anchor lives in shared/, beside the repository.
anchor=${TORCHRUN_ANCHOR:-$(realpath ../shared/tools/torchrun-anchor)}
# /usr/bin/python3 explicitly: the anchor needs Debian's python3-torch; the harness is stdlib only.
exec /usr/bin/python3 bench/launcher_bench.py \
  --ddprun "$build_dir/bin/ddprun" --probe "$build_dir/bin/restart_probe" --anchor "$anchor" "$@"

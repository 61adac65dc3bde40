#!/usr/bin/env bash
# Set up, build, and run the whole test suite. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --tests
./scripts/build.sh
build_dir=${DDPRUN_BUILD_DIR:-build}
ctest --test-dir "$build_dir" --output-on-failure --timeout 600 -j "$(nproc)" "$@"

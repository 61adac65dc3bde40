#!/usr/bin/env bash
# Configures and builds ddprun (Release) into build/; binaries land in build/bin/.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${DDPRUN_BUILD_DIR:-build}
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release
fi
cmake --build "$build_dir" --parallel "$(nproc)"

#!/usr/bin/env bash
# Configures and builds ddprun (Release) into build/ (or $DDPRUN_BUILD_DIR); binaries land in bin/.
#   scripts/build.sh [--target T ...] [-DOPTION=VALUE ...]
#   e.g. -DDDPRUN_BUILD_BENCH=OFF, -DCMAKE_BUILD_TYPE=Debug; --target builds only T (and what it
#   needs), as demo.sh does; without one, everything is built.
# The build is configured with the project's defaults and these options, every one named each time:
# an option dropped from the command line goes back to its default instead of staying in the cache.
# CMake runs again only when the options differ from the last configure's (a stamp in the build
# folder) or the folder was never configured; otherwise only the build runs (ninja itself
# reconfigures when a CMakeLists.txt changed).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${DDPRUN_BUILD_DIR:-build}
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
targets=()
given=()
while (($#)); do
  case "$1" in
    --target) [[ $# -ge 2 ]] || { echo "build.sh: --target needs a name" >&2; exit 2; }; targets+=(--target "$2"); shift 2 ;;
    *) given+=("$1"); shift ;;
  esac
done
options=(-DCMAKE_BUILD_TYPE=Release -DDDPRUN_BUILD_TESTS=ON -DDDPRUN_BUILD_BENCH=ON "${given[@]}")  # the last -D of a name wins
stamp=$build_dir/.build-sh-options
wanted=$(printf '%s\n' "${generator[@]}" "${options[@]}")
if [[ ! -f $build_dir/CMakeCache.txt || ! -f $stamp || $(<"$stamp") != "$wanted" ]]; then
  rm -f "$stamp"  # a configure that fails must not leave the old stamp saying all is done
  cmake -S . -B "$build_dir" "${generator[@]}" "${options[@]}"
  printf '%s\n' "$wanted" >"$stamp"
fi
cmake --build "$build_dir" --parallel "$(nproc)" "${targets[@]}"

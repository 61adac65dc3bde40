#!/usr/bin/env bash
# Builds the wheel users install with pip: dist/ddprun-<version>-py3-none-manylinux_<glibc>_x86_64.whl
#   scripts/package.sh [OUT_DIR]      (default dist/; the build folder: $DDPRUN_PORTABLE_BUILD_DIR,
#                                      default build-portable/)
# 1. setup.sh (the build's packages, Python's build and hatchling);
# 2. a portable build (-DDDPRUN_PORTABLE=ON): ddprun, ddprun-store and ddprun-unwind only, linked
#    so that they need glibc alone (cmake/Dependencies.cmake, portable/glibc_floor.cpp);
# 3. cmake --install --strip into a staging folder: bin/ and share/ddprun/python/;
# 4. packaging/glibc_only.py checks the binaries and names the manylinux tag they allow (the newest
#    glibc symbol version any of them references);
# 5. python3 -m build --wheel with hatchling (packaging/pyproject.toml.in), offline (Debian's
#    hatchling declares editables, which only editable installs use: the check is skipped): the binaries
#    and the Python helpers are the wheel's shared data, installed under the env's prefix (bin/ is
#    the env's PATH), nothing into site-packages.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
out=$(mkdir -p "${1:-dist}" && cd "${1:-dist}" && pwd)
build_dir=${DDPRUN_PORTABLE_BUILD_DIR:-build-portable}
python=/usr/bin/python3  # Debian's, which has build and hatchling (the first python3 on PATH may not)

./scripts/setup.sh
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DDDPRUN_PORTABLE=ON \
  -DDDPRUN_BUILD_TESTS=OFF -DDDPRUN_BUILD_BENCH=OFF >/dev/null
cmake --build "$build_dir" --parallel "$(nproc)" --target ddprun ddprun-store ddprun-unwind

stage=$(mktemp -d "${TMPDIR:-/tmp}/ddprun-wheel.XXXXXX")
trap 'rm -rf "$stage"' EXIT
cmake --install "$build_dir" --prefix "$stage/root" --strip >/dev/null
platform=$("$python" packaging/glibc_only.py "$stage"/root/bin/*)

version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build_dir/CMakeCache.txt")
sed "s/@VERSION@/$version/" packaging/pyproject.toml.in >"$stage/pyproject.toml"
cp packaging/hatch_build.py "$stage/"
cp packaging/wheel_description.md "$stage/README.md"
rm -f "$out/ddprun-$version-"*.whl
DDPRUN_WHEEL_PLATFORM=$platform "$python" -m build --wheel --no-isolation --skip-dependency-check --outdir "$out" "$stage" >"$stage/build.log" 2>&1 || {
  cat "$stage/build.log" >&2
  echo "package.sh: python3 -m build failed (log above)" >&2
  exit 1
}
wheel=$(ls "$out/ddprun-$version-py3-none-$platform.whl")
echo "package.sh: ${wheel#"$root"/} ($(du -k "$wheel" | cut -f1) KiB; $platform: the newest glibc symbol version the binaries reference)"

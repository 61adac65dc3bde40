#!/usr/bin/env bash
# The packaging test: installs the current build into a fresh prefix, builds tests/packaging/consumer
# against it as an out-of-tree project (find_package(ddprun), ddprun::runtime), and runs it as a
# world of one and as two ranks under the installed ddprun.
#   run_packaging_test.sh BUILD_DIR [GENERATOR] [CXX_COMPILER]
set -euo pipefail

build_dir=$(cd "${1:?usage: run_packaging_test.sh BUILD_DIR [GENERATOR] [CXX_COMPILER]}" && pwd)
generator=${2:-Ninja}
compiler=${3:-c++}
consumer_src=$(cd "$(dirname "$0")/consumer" && pwd)

work=$(mktemp -d "${TMPDIR:-/tmp}/ddprun-packaging.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

fail() { echo "packaging test: $*" >&2; exit 1; }

echo "== cmake --install $build_dir --prefix $prefix"
cmake --install "$build_dir" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; fail "install failed"; }

for path in bin/ddprun bin/ddprun-store include/ddprun/process_group.hpp include/ddprun/identity.hpp; do
  [[ -e $prefix/$path ]] || fail "the install lacks $path"
done
# Under lib/ or lib/<multiarch>/, as GNUInstallDirs decided when the build was configured.
for name in libddprun_runtime.a libddprun_rendezvous.a cmake/ddprun/ddprunConfig.cmake \
            cmake/ddprun/ddprunConfigVersion.cmake cmake/ddprun/ddprunTargets.cmake; do
  compgen -G "$prefix/lib*/$name" >/dev/null || compgen -G "$prefix/lib*/*/$name" >/dev/null \
    || fail "the install lacks lib/$name"
done

echo "== configure and build the consumer against $prefix"
# Only the installed tree may satisfy find_package(ddprun): no package registry, no source tree.
cmake -S "$consumer_src" -B "$work/consumer" -G "$generator" -DCMAKE_CXX_COMPILER="$compiler" \
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
      >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configuring the consumer failed"; }
grep -q "$prefix" "$work/consumer/CMakeCache.txt" || fail "ddprun was not found under $prefix"
cmake --build "$work/consumer" >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "building the consumer failed"; }

echo "== run it alone (a world of one)"
# Without the variables of a launcher, the consumer is a world of one.
output=$(env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u TORCHELASTIC_RUN_ID -u OMPI_COMM_WORLD_RANK \
             -u OMPI_COMM_WORLD_SIZE -u SLURM_PROCID -u PMI_RANK -u MASTER_PORT "$work/consumer/app") \
  || fail "the consumer failed alone: $output"
echo "$output"
grep -q "consumer ok: rank 0 of 1" <<<"$output" || fail "unexpected output alone: $output"

echo "== run it as two ranks under the installed ddprun (--standalone: a free port)"
output=$("$prefix/bin/ddprun" --standalone --nproc-per-node 2 "$work/consumer/app" 2>&1) || fail "under ddprun: $output"
echo "$output"
for rank in 0 1; do
  grep -q "consumer ok: rank $rank of 2" <<<"$output" || fail "rank $rank did not report success under ddprun"
done
echo "packaging test: ok"

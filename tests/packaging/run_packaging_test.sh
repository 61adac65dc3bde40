#!/usr/bin/env bash
# The packaging tests: ddprun installed into a fresh prefix and used as docs/runtime.md says.
#   run_packaging_test.sh STAGE BUILD_DIR WORK_DIR SOURCE_DIR [GENERATOR] [CXX_COMPILER]
# Stages (CTest runs `install` first, as the fixture of the others):
#   install   cmake --install BUILD_DIR into WORK_DIR/first-prefix (emptied first), then moves it
#             with mv to WORK_DIR/prefix, where every stage uses it: a package that names the
#             prefix it was installed into fails there. Checks the exported targets leak nothing of
#             the build (paths, internal targets) nor the first prefix; takes the trainer's
#             CMakeLists.txt and trainer.cpp from docs/runtime.md as written, configures it with the
#             doc's command in an environment without CUDA or Torch hints, builds it, checks that
#             Torch was not looked for, and runs it alone (a world of one).
#   ddprun    runs the trainer as 2 ranks under the installed ddprun (--standalone), and a Python
#             script that imports ddprun_progress (found in the prefix's share/ddprun/python).
#   torchrun  runs the trainer as 2 ranks under torchrun-anchor (PyTorch 1.13's torchrun, static
#             rendezvous: the workers use its agent's TCPStore, PyTorch 1.13's server).
#   mpirun    runs it as 2 ranks under Open MPI's mpirun.
#   torch     builds tests/packaging/torch_consumer (find_package(ddprun COMPONENTS torch)) against
#             the moved prefix and runs it alone; checks that an unknown component is a clear error.
# Exit 77 (CTest: skipped) with the reason when a needed tool cannot start.
set -euo pipefail

usage="usage: run_packaging_test.sh install|ddprun|torchrun|mpirun|torch BUILD_DIR WORK_DIR SOURCE_DIR [GENERATOR] [CXX_COMPILER]"
stage=${1:?$usage}
build_dir=$(cd "${2:?$usage}" && pwd)
work=${3:?$usage}
source_dir=$(cd "${4:?$usage}" && pwd)
generator=${5:-Ninja}
compiler=${6:-c++}
prefix=$work/prefix
first_prefix=$work/first-prefix  # where cmake --install puts it, before it is moved to $prefix
trainer=$work/trainer/build/trainer
system_python=/usr/bin/python3
anchor=/work/shared/tools/torchrun-anchor

fail() { echo "packaging test ($stage): $*" >&2; exit 1; }
skip() { echo "packaging test ($stage): SKIPPED: $*"; exit 77; }

# A user's shell as far as the build is concerned: no CUDA on PATH, no CUDA_PATH, Torch_DIR or
# CMAKE_PREFIX_PATH; the prefix comes only from the command line, as the doc says.
clean_env() {
  env -i HOME="${HOME:-/root}" PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      LANG=C.UTF-8 TMPDIR="${TMPDIR:-/tmp}" "$@"
}

# The fenced block after the line `<!-- packaging-test: NAME ...` in docs/runtime.md.
doc_snippet() {
  awk -v marker="<!-- packaging-test: $1 " '
    index($0, marker) == 1 { armed = 1; next }
    armed && !inside && /^```/ { inside = 1; next }
    inside && /^```/ { exit }
    inside { print }
  ' "$source_dir/docs/runtime.md"
}

# A log with CMake's line wrapping undone (a message is wrapped where its words fall).
one_line() { tr -s ' \n' '  ' <"$1"; }

free_port() {
  "$system_python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# expect_ranks OUTPUT LAUNCHER: every rank of 2 printed its success line under LAUNCHER.
expect_ranks() {
  for rank in 0 1; do
    grep -q "trainer ok: rank $rank of 2 under $2" <<<"$1" || fail "rank $rank did not report success under $2"
  done
}

case $stage in
install)
  rm -rf "$work"
  mkdir -p "$work/trainer"
  echo "== cmake --install $build_dir --prefix $first_prefix, then mv $first_prefix $prefix"
  cmake --install "$build_dir" --prefix "$first_prefix" >"$work/install.log" || { cat "$work/install.log"; fail "install failed"; }
  # A user copies or unpacks an install somewhere else: nothing may depend on where it was made.
  mv "$first_prefix" "$prefix"
  [[ ! -e $first_prefix ]] || fail "$first_prefix is still there after mv"
  stale=$(grep -rlF "$first_prefix" "$prefix" || true)
  [[ -z $stale ]] || fail "the moved install names the prefix it was installed into: $stale"
  for path in bin/ddprun bin/ddprun-store include/ddprun/ddprun.hpp include/ddprun/process_group.hpp \
              share/ddprun/python/ddprun_progress.py; do
    [[ -e $prefix/$path ]] || fail "the install lacks $path"
  done
  config_dir=$(dirname "$(compgen -G "$prefix/lib*/cmake/ddprun/ddprunConfig.cmake" || compgen -G "$prefix/lib*/*/cmake/ddprun/ddprunConfig.cmake" || true)")
  [[ -f $config_dir/ddprunTargets.cmake ]] || fail "the install lacks lib/cmake/ddprun/ddprunTargets.cmake"
  [[ -f $config_dir/../../libddprun_runtime.a ]] || fail "the install lacks libddprun_runtime.a next to lib/cmake"

  echo "== the exported targets name nothing of the build"
  exports=$(cat "$config_dir"/ddprun*Targets.cmake)
  for internal in ddprun::warnings ddprun::rendezvous ddprun::common ddprun_warnings ddprun_rendezvous ddprun_common; do
    grep -q "$internal" <<<"$exports" && fail "the exported targets name the internal target $internal"
  done
  grep -qE '/(usr/local/cuda|work/)|\.so' <<<"$exports" && fail "the exported targets hold a path of this machine: $(grep -oE '[^;"]*(cuda|/work/|\.so)[^;"]*' <<<"$exports" | head -3)"
  grep -q 'INTERFACE_COMPILE_FEATURES "cxx_std_20"' <<<"$exports" || fail "ddprun::runtime does not export cxx_std_20"

  echo "== the trainer of docs/runtime.md, as written"
  doc_snippet CMakeLists.txt >"$work/trainer/CMakeLists.txt"
  doc_snippet trainer.cpp >"$work/trainer/trainer.cpp"
  [[ -s $work/trainer/CMakeLists.txt && -s $work/trainer/trainer.cpp ]] \
    || fail "docs/runtime.md lacks the blocks marked <!-- packaging-test: CMakeLists.txt / trainer.cpp -->"
  grep -q "CMAKE_CXX_STANDARD" "$work/trainer/CMakeLists.txt" \
    && fail "the doc's CMakeLists.txt sets CMAKE_CXX_STANDARD: the package must bring C++20 itself"

  echo "== cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$prefix (clean environment)"
  # The doc's command; -G and the compiler only match the build's; no package registry may answer.
  (cd "$work/trainer" && clean_env cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
      -G "$generator" -DCMAKE_CXX_COMPILER="$compiler" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF) \
    >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configuring the trainer failed"; }
  grep -q "^ddprun_DIR:PATH=$prefix" "$work/trainer/build/CMakeCache.txt" || fail "ddprun was not found under $prefix"
  grep -qE "^Torch_DIR|^Caffe2_DIR" "$work/trainer/build/CMakeCache.txt" \
    && fail "find_package(ddprun) without components looked for LibTorch"
  (cd "$work/trainer" && clean_env cmake --build build) >"$work/build.log" 2>&1 \
    || { cat "$work/build.log"; fail "building the trainer failed"; }

  echo "== alone (a world of one)"
  output=$(env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u TORCHELASTIC_RUN_ID -u OMPI_COMM_WORLD_RANK \
               -u OMPI_COMM_WORLD_SIZE -u SLURM_PROCID -u PMI_RANK -u MASTER_PORT timeout 60 "$trainer" 2>&1) \
    || fail "the trainer failed alone: $output"
  echo "$output"
  grep -q "trainer ok: rank 0 of 1 under none" <<<"$output" || fail "unexpected output alone: $output"
  ;;

ddprun)
  [[ -x $trainer ]] || fail "no trainer at $trainer: run the install stage first"
  echo "== 2 ranks under the installed ddprun --nproc-per-node 2 --no-python"
  output=$(timeout 120 "$prefix/bin/ddprun" --standalone --nproc-per-node 2 --no-python "$trainer" 2>&1) \
    || fail "under ddprun: $output"
  echo "$output"
  expect_ranks "$output" torchrun  # ddprun gives workers torchrun's variables

  echo "== a Python worker under the installed ddprun imports ddprun_progress (no PYTHONPATH of its own)"
  probe=$work/progress_probe.py
  printf '%s\n' 'import ddprun_progress' 'ddprun_progress.report(7, 70, "probe")' \
    'print("progress probe:", ddprun_progress.__file__, ddprun_progress.enabled())' >"$probe"
  output=$(env -u PYTHONPATH timeout 120 "$prefix/bin/ddprun" --standalone "$probe" 2>&1) \
    || fail "the progress probe under ddprun: $output"
  grep -q "progress probe: $prefix/share/ddprun/python/ddprun_progress.py True" <<<"$output" \
    || fail "ddprun_progress was not imported from $prefix/share/ddprun/python: $output"
  ;;

torchrun)
  [[ -x $trainer ]] || fail "no trainer at $trainer: run the install stage first"
  [[ -e $anchor ]] || skip "torchrun-anchor is not at $anchor"
  version=$("$system_python" -c 'import torch; print(torch.__version__)' 2>&1) \
    || skip "$system_python cannot import torch (Debian's python3-torch): $version"
  port=$(free_port)
  echo "== 2 ranks under torchrun-anchor (torch $version) --nproc_per_node 2 --no_python, static rendezvous on $port"
  # Static rendezvous (torchrun's default): TORCHELASTIC_USE_AGENT_STORE=True, the workers' store is
  # the agent's TCPStore, PyTorch's own server.
  output=$(timeout 180 "$system_python" "$anchor" --nnodes 1 --nproc_per_node 2 --master_addr 127.0.0.1 \
             --master_port "$port" --no_python "$trainer" 2>&1) || fail "under torchrun-anchor: $output"
  echo "$output"
  expect_ranks "$output" torchrun
  ;;

mpirun)
  [[ -x $trainer ]] || fail "no trainer at $trainer: run the install stage first"
  command -v mpirun >/dev/null || skip "mpirun is not installed"
  # As root Open MPI needs both the flag and the variables; loopback only, no slot accounting.
  mpi=(mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl self,tcp --mca btl_tcp_if_include lo
       --mca oob_tcp_if_include lo)
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  probe=$(timeout 60 "${mpi[@]}" /bin/true 2>&1) || skip "mpirun cannot start 2 processes here: $probe"
  port=$(free_port)
  echo "== 2 ranks under mpirun -np 2 (rank 0 hosts the store on $port)"
  output=$(MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 120 "${mpi[@]}" -x MASTER_ADDR -x MASTER_PORT "$trainer" 2>&1) \
    || fail "under mpirun: $output"
  echo "$output"
  expect_ranks "$output" "Open MPI"
  ;;

torch)
  [[ -d $prefix ]] || fail "no install at $prefix: run the install stage first"
  config_dir=$(dirname "$(compgen -G "$prefix/lib*/cmake/ddprun/ddprunConfig.cmake" || compgen -G "$prefix/lib*/*/cmake/ddprun/ddprunConfig.cmake" || true)")
  [[ -f $config_dir/ddprunTorchTargets.cmake ]] || skip "this ddprun was built without LibTorch (no component torch)"
  echo "== find_package(ddprun REQUIRED COMPONENTS torch), clean environment"
  rm -rf "$work/torch_consumer"
  clean_env cmake -S "$source_dir/tests/packaging/torch_consumer" -B "$work/torch_consumer" -G "$generator" \
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$compiler" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >"$work/torch_configure.log" 2>&1 \
    || { cat "$work/torch_configure.log"; fail "configuring the torch consumer failed"; }
  clean_env cmake --build "$work/torch_consumer" >"$work/torch_build.log" 2>&1 \
    || { cat "$work/torch_build.log"; fail "building the torch consumer failed"; }
  output=$(env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u TORCHELASTIC_RUN_ID -u OMPI_COMM_WORLD_RANK \
               -u OMPI_COMM_WORLD_SIZE -u SLURM_PROCID -u PMI_RANK -u MASTER_PORT \
               timeout 60 "$work/torch_consumer/torch_trainer" 2>&1) || fail "the torch consumer failed: $output"
  echo "$output"
  grep -q "torch consumer ok: rank 0 of 1" <<<"$output" || fail "unexpected output: $output"

  echo "== an unknown component is a clear error"
  mkdir -p "$work/bad_component"
  printf '%s\n' 'cmake_minimum_required(VERSION 3.25)' 'project(bad LANGUAGES CXX)' \
    'find_package(ddprun REQUIRED COMPONENTS tensorflow)' >"$work/bad_component/CMakeLists.txt"
  if clean_env cmake -S "$work/bad_component" -B "$work/bad_component/build" -G "$generator" \
       -DCMAKE_CXX_COMPILER="$compiler" -DCMAKE_PREFIX_PATH="$prefix" >"$work/bad.log" 2>&1; then
    fail "find_package(ddprun COMPONENTS tensorflow) succeeded"
  fi
  one_line "$work/bad.log" | grep -q 'no component "tensorflow"' || { cat "$work/bad.log"; fail "the error does not name the component"; }

  echo "== the component torch of a ddprun built without LibTorch is a clear error"
  # The same install, its config as a build without LibTorch writes it (ddprun_WITH_TORCH OFF).
  rm -rf "$work/no_torch_prefix" && cp -r "$prefix" "$work/no_torch_prefix"
  no_torch_config=$work/no_torch_prefix/${config_dir#"$prefix"/}/ddprunConfig.cmake
  sed -i 's/^set(ddprun_WITH_TORCH ON)/set(ddprun_WITH_TORCH OFF)/' "$no_torch_config"
  grep -q '^set(ddprun_WITH_TORCH OFF)' "$no_torch_config" || fail "the config does not set ddprun_WITH_TORCH"
  printf '%s\n' 'cmake_minimum_required(VERSION 3.25)' 'project(no_torch LANGUAGES CXX)' \
    'find_package(ddprun REQUIRED COMPONENTS torch)' >"$work/bad_component/CMakeLists.txt"
  rm -rf "$work/bad_component/build"
  if clean_env cmake -S "$work/bad_component" -B "$work/bad_component/build" -G "$generator" \
       -DCMAKE_CXX_COMPILER="$compiler" -DCMAKE_PREFIX_PATH="$work/no_torch_prefix" >"$work/bad.log" 2>&1; then
    fail "find_package(ddprun REQUIRED COMPONENTS torch) succeeded without ddprun::torch"
  fi
  one_line "$work/bad.log" | grep -q "was built without LibTorch, so it has no component torch" || { cat "$work/bad.log"; fail "the error does not say why"; }
  rm -rf "$work/no_torch_prefix"
  ;;

*) fail "$usage" ;;
esac
echo "packaging test ($stage): ok"

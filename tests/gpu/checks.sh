#!/bin/bash
# The GPU checks that live with the code (../shared/tools/gpu/ is the machine's harness and is not
# the repository's): run THERE after `bash .gpu/run.sh gpu` built ddprun into /tmp/ddprun-build,
# from the project's root: `bash tests/gpu/checks.sh [check ...]`. Output goes to $OUT/checks.txt.
#   gpustate   issue 27: GPU fields and metrics of a PyTorch 2.x CUDA job, the restart after a
#              SIGKILLed worker that held GPU memory, the GPU check's cost to a first start
set -u
here=$(cd "$(dirname "$0")" && pwd)
P=${DDPRUN_GPU_BUILD:-/tmp/ddprun-build}/bin
PY=$(command -v python3)
exec > >(tee -a "${OUT:-/tmp}/checks.txt") 2>&1
want() { [ $# -eq 0 ] || [ -z "$CHECKS" ] || [[ " $CHECKS " == *" $1 "* ]]; }
CHECKS="$*"
if want gpustate; then
  echo "=== $(date +%T) gpustate"
  timeout 420 "$PY" "$here/gpu_state_check.py" "$P/ddprun"
fi

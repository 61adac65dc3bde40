#!/usr/bin/env bash
# The main job, from a fresh machine: set up, build, then run multi-worker jobs through ddprun.
# (The Fashion-MNIST training demo replaces this once ddprun::torch lands.)
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh

ddprun=build/bin/ddprun
nproc=${DDPRUN_DEMO_NPROC:-4}

echo
echo "== $nproc C++ workers check their torchrun environment and meet rank 0 at MASTER_ADDR:MASTER_PORT"
"$ddprun" --standalone --nproc-per-node "$nproc" --tee 3 build/bin/hello_ranks

echo
echo "== an unchanged PyTorch script: init_process_group(\"gloo\", \"env://\") and all_reduce on 2 workers"
PYTHON_EXEC=/usr/bin/python3 "$ddprun" --standalone --nproc-per-node 2 --tee 3 examples/python/allreduce_gloo.py

echo
echo "== a failing worker: ddprun stops the others, restarts the group once, then reports the root cause"
"$ddprun" --standalone --nproc-per-node 2 --max-restarts 1 --no-python \
  /bin/sh -c 'echo "worker $RANK, attempt $TORCHELASTIC_RESTART_COUNT"; [ "$RANK" != 1 ] || { echo "rank 1 gives up" >&2; exit 3; }' \
  && status=0 || status=$?
echo "ddprun exit status: $status (1 = the job failed, as expected here)"
[[ $status == 1 ]]
echo
echo "demo: done"

#!/usr/bin/env bash
# The main job, from a fresh machine: set up, build, then train a CNN on Fashion-MNIST with 2 C++
# workers through ddprun (examples/torch/fashion_mnist on ddprun::torch's DistributedDataParallel),
# show a worker killed mid-epoch and the job resuming from its checkpoint, then the smaller
# multi-worker demos.
# Environment: DDPRUN_DEMO_EPOCHS (2), DDPRUN_DEMO_NPROC (workers of hello_ranks, 4).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
# Only what the demo runs: no tests, no benchmarks (test.sh builds those, reconfiguring the folder).
./scripts/build.sh -DDDPRUN_BUILD_TESTS=OFF -DDDPRUN_BUILD_BENCH=OFF \
  --target ddprun --target fashion_mnist --target hello_ranks

ddprun=build/bin/ddprun
epochs=${DDPRUN_DEMO_EPOCHS:-2}
nproc=${DDPRUN_DEMO_NPROC:-4}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo
echo "== Fashion-MNIST: a small CNN trained data-parallel by 2 C++ workers x 1 thread, $epochs epochs"
echo "   (DistributedSampler shards, gradients all-reduced during backward, a checkpoint per epoch)"
start_ns=$(date +%s%N)
"$ddprun" --standalone --nproc-per-node 2 build/bin/fashion_mnist --epochs "$epochs" \
  --checkpoint-dir "$work/fashion" | tee "$work/fashion.out"
elapsed_ms=$((($(date +%s%N) - start_ns) / 1000000))
seconds=$((elapsed_ms / 1000)).$(printf '%03d' $((elapsed_ms % 1000)))
accuracy=$(sed -n 's/^test_accuracy=//p' "$work/fashion.out" | tail -n 1)
echo "Fashion-MNIST: test accuracy $accuracy after $epochs epochs, $seconds s from launch to exit" \
  "(target: >= 0.85 in < 300 s)"
if [[ $epochs -ge 2 ]]; then
  awk -v a="$accuracy" -v s="$seconds" 'BEGIN { exit !(a >= 0.85 && s < 300) }'
fi

echo
echo "== a worker is SIGKILLed in the middle of epoch 2: ddprun restarts the group, which resumes from"
echo "   the epoch-1 checkpoint (6000 images, so that it takes seconds)"
"$ddprun" --standalone --nproc-per-node 2 --max-restarts 1 build/bin/fashion_mnist --epochs 2 \
  --train-limit 6000 --test-limit 2000 --log-every 20 --die-at-step 60 --checkpoint-dir "$work/killed"

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

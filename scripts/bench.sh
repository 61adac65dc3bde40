#!/usr/bin/env bash
# Set up, build, and run the benchmarks, each against its PyTorch anchor in the same run:
#   launcher  (bench/launcher_bench.py):  ddprun against torchrun-anchor (the build tree's binary,
#             and the wheel's: installed_launch_8x_true builds it with package.sh); the status monitor's
#             cost (status_cpu: ddprun with its status block on against off)
#   store     (bench/store_bench.py):     ddprun-store against PyTorch 1.13's TCPStore server
#   allreduce (bench/allreduce_bench.py): ddprun::runtime's gloo all_reduce against PyTorch's gloo
#   train     (bench/train_bench.py):     Fashion-MNIST on ddprun::torch against Python DDP
#   rendezvous (bench/rendezvous_bench.py): ddprun's c10d rendezvous of N local agents against
#             torchrun-anchor's; and one 1024-agent round in process (build/bin/rendezvous_sim)
#   progress  (bench/progress_bench.py):  one progress report's cost in a worker, C++ and Python,
#             against an empty call of the same signature
#   hang      (bench/hang_bench.py):      --hang-timeout to the digest on the console, 8 ranks, and
#             what torchrun-anchor + PyTorch 1.13 print in the same situation
#   etcd      (bench/etcd_bench.py):      the etcd-v3 rendezvous of 8 and 64 local agents against ddprun's
#             and torchrun-anchor's c10d; failover after SIGKILL of the etcd leader or of an agent
#   ssh       (bench/ssh_bench.py):       3 namespaced hosts x 2 workers from one machine: ddprun
#             --hostfile against ssh + torchrun-anchor per host (needs root and openssh-server)
#   gpu       (bench/gpu_bench.py):       ddprun's NVML sampling and its check before each start (the
#             stand-in NVML, 8 GPUs) against ddprun without them: launcher CPU with status on, restart
#   warm      (bench/warm_bench.py):      ddprun --preload torch against ddprun cold and torchrun-anchor:
#             a restart of 4 PyTorch ranks, the first start of 2 nodes; the memory of warm interpreters
# Usage: scripts/bench.sh [FILTER] [options]
#   FILTER: substring of a benchmark name; runs every benchmark whose name contains it, e.g.
#     launch, restart, cpu; store, store_barrier; allreduce; train, train_throughput, train_demo;
#     rdzv, rdzv_startup, rdzv_sim; progress_cost, progress_cost_cpp, progress_cost_python.
#     Empty (or omitted): all of them (about 30 minutes).
#   options: --store-* go to store_bench.py, --allreduce-* to allreduce_bench.py, --rdzv-* to
#     rendezvous_bench.py, the rest to launcher_bench.py; e.g. `scripts/bench.sh cpu --cpu-sleep 3`,
#     `scripts/bench.sh store --store-duration 1`, `scripts/bench.sh rdzv_startup --rdzv-nodes 2,8`.
#     train_bench.py takes its options when run directly.
# Exits non-zero if a benchmark fails to run (a missed goal is reported, not a failure).
set -euo pipefail
cd "$(dirname "$0")/.."
filter=""
if [[ $# -gt 0 && "$1" != -* ]]; then
  filter=$1
  shift
fi
launcher_args=()
store_args=()
allreduce_args=()
rdzv_args=()
etcd_args=()
while [[ $# -gt 0 ]]; do
  # Every --store-/--allreduce-/--rdzv- option takes a value, as --opt=value or --opt value.
  case "$1" in
    --store-*=*) store_args+=("$1"); shift ;;
    --store-*) store_args+=("$1" "${2-}"); shift $(($# > 1 ? 2 : 1)) ;;
    --allreduce-*=*) allreduce_args+=("$1"); shift ;;
    --allreduce-*) allreduce_args+=("$1" "${2-}"); shift $(($# > 1 ? 2 : 1)) ;;
    --rdzv-*=*) rdzv_args+=("$1"); shift ;;
    --rdzv-*) rdzv_args+=("$1" "${2-}"); shift $(($# > 1 ? 2 : 1)) ;;
    --etcd-*=*) etcd_args+=("$1"); shift ;;
    --etcd-*) etcd_args+=("$1" "${2-}"); shift $(($# > 1 ? 2 : 1)) ;;
    *) launcher_args+=("$1"); shift ;;
  esac
done

# /usr/bin/python3 explicitly: the anchors need Debian's python3-torch.
py=/usr/bin/python3
# --list exits 0 when the filter selects one of the harness's benchmarks.
selected=()
for harness in launcher store allreduce train rendezvous progress hang ssh etcd warm gpu; do
  if "$py" "bench/${harness}_bench.py" "$filter" --list >/dev/null; then selected+=("$harness"); fi
done
if ((${#selected[@]} == 0)); then
  echo "bench.sh: no benchmark name contains '$filter'; the names are:" >&2
  for harness in launcher store allreduce train rendezvous progress hang ssh etcd warm gpu; do "$py" "bench/${harness}_bench.py" --list >&2; done
  exit 2
fi

./scripts/setup.sh --tests
./scripts/build.sh
# installed_launch_8x_true times the wheel's binary: build the wheel (dist/) when it is selected.
if [[ installed_launch_8x_true == *"$filter"* ]]; then ./scripts/package.sh; fi
build_dir=${DDPRUN_BUILD_DIR:-build}
# The anchor lives in shared/, beside the repository.
anchor=${TORCHRUN_ANCHOR:-$(realpath ../shared/tools/torchrun-anchor)}
status=0
for harness in "${selected[@]}"; do
  case "$harness" in
    launcher)
      "$py" bench/launcher_bench.py "$filter" \
        --ddprun "$build_dir/bin/ddprun" --probe "$build_dir/bin/restart_probe" --anchor "$anchor" \
        --progress-worker "$build_dir/tests/progress_worker" \
        ${launcher_args[@]+"${launcher_args[@]}"} || status=1 ;;
    store)
      "$py" bench/store_bench.py "$filter" \
        --store-server "$build_dir/bin/ddprun-store" --store-load "$build_dir/bin/store_load" \
        ${store_args[@]+"${store_args[@]}"} || status=1 ;;
    allreduce)
      "$py" bench/allreduce_bench.py "$filter" --allreduce-ddprun "$build_dir/bin/ddprun" \
        --allreduce-worker "$build_dir/bin/allreduce" --allreduce-memcpy "$build_dir/bin/memcpy_ceiling" \
        ${allreduce_args[@]+"${allreduce_args[@]}"} || status=1 ;;
    train)
      "$py" bench/train_bench.py "$filter" --ddprun "$build_dir/bin/ddprun" \
        --fashion "$build_dir/bin/fashion_mnist" --anchor "$anchor" || status=1 ;;
    rendezvous)
      "$py" bench/rendezvous_bench.py "$filter" --ddprun "$build_dir/bin/ddprun" \
        --anchor "$anchor" --sim "$build_dir/bin/rendezvous_sim" \
        ${rdzv_args[@]+"${rdzv_args[@]}"} || status=1 ;;
    progress)
      "$py" bench/progress_bench.py "$filter" --progress-cost "$build_dir/bin/progress_cost" || status=1 ;;
    hang)
      "$py" bench/hang_bench.py "$filter" --ddprun "$build_dir/bin/ddprun" \
        --plain-sgd "$build_dir/bin/plain_sgd" --anchor "$anchor" || status=1 ;;
    ssh)
      "$py" bench/ssh_bench.py "$filter" --ssh-launch "$build_dir/bin/ssh_launch" \
        --ddprun "$build_dir/bin/ddprun" --anchor "$anchor" || status=1 ;;
    etcd)
      "$py" bench/etcd_bench.py "$filter" --ddprun "$build_dir/bin/ddprun" --anchor "$anchor" \
        ${etcd_args[@]+"${etcd_args[@]}"} || status=1 ;;
    warm)
      "$py" bench/warm_bench.py "$filter" --ddprun "$build_dir/bin/ddprun" --anchor "$anchor" || status=1 ;;
    gpu)
      "$py" bench/gpu_bench.py "$filter" --ddprun "$build_dir/bin/ddprun" --probe "$build_dir/bin/restart_probe" \
        --progress-worker "$build_dir/tests/progress_worker" \
        --standin "$build_dir/tests/nvml_standin/libnvidia-ml.so.1" || status=1 ;;
  esac
done
exit $status

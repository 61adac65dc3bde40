#!/usr/bin/python3
"""allreduce_torch: the PyTorch side of the all-reduce benchmark, the twin of bench/allreduce.cpp.

    ../shared/tools/torchrun-anchor --standalone --nproc_per_node 2 bench/allreduce_torch.py [options]
    PYTHON_EXEC=/usr/bin/python3 build/bin/ddprun --standalone --nproc-per-node 2 bench/allreduce_torch.py

Needs Debian's python3-torch (1.13) under /usr/bin/python3. torch.distributed's gloo process group,
float32 sum, CPU tensors; for each size every rank:
  1. verifies one all_reduce: element i of rank r is (r+1) + i%13, the sum n(n+1)/2 + n*(i%13),
     every element checked (exit 1 otherwise);
  2. runs `warmup` unmeasured all_reduces of a zeroed tensor;
  3. times `iters` all_reduces, each started right after dist.barrier(), with time.perf_counter()
     around the dist.all_reduce call alone (synchronous: async_op=False waits for the result);
  4. all_reduces its per-iteration times with MAX: an iteration takes as long as its slowest rank.
Rank 0 reports the median over iterations of those maxima (also mean, min, p90), algbw = bytes /
median and busbw = algbw * 2(n-1)/n (GB = 1e9 bytes). The options are allreduce.cpp's, --method
loop included (one timed loop of back-to-back all_reduces, the slowest rank's mean).
"""
import argparse
import datetime
import json
import statistics
import sys
import time

import torch
import torch.distributed as dist


def human_bytes(n):
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n >> 10} KiB"
    return f"{n} B"


def verify(buf, rank, n):
    index_part = (torch.arange(buf.numel(), dtype=torch.int64) % 13).to(torch.float32)
    buf.copy_(index_part + float(rank + 1))
    dist.all_reduce(buf, op=dist.ReduceOp.SUM)
    expected = index_part * float(n) + float(n * (n + 1) // 2)
    if not torch.equal(buf, expected):
        bad = int((buf != expected).nonzero()[0])
        raise RuntimeError(f"wrong all_reduce result at rank {rank}, {human_bytes(buf.numel() * 4)}, "
                           f"element {bad}: {float(buf[bad])} instead of {float(expected[bad])}")


def measure(a, nbytes, rank, n):
    iters = min(max(a.iter_bytes // nbytes, a.min_iters), a.max_iters)
    warmup = a.warmup if a.warmup >= 0 else min(max(iters // 10, 2), 20)
    buf = torch.empty(nbytes // 4, dtype=torch.float32)
    verify(buf, rank, n)
    buf.zero_()
    for _ in range(warmup):
        dist.all_reduce(buf)
    clock = time.perf_counter
    if a.method == "loop":
        # One barrier, then iters back-to-back all_reduces; the slowest rank's mean per operation.
        dist.barrier()
        start = clock()
        for _ in range(iters):
            dist.all_reduce(buf)
        mean = torch.tensor([(clock() - start) / iters], dtype=torch.float64)
        dist.all_reduce(mean, op=dist.ReduceOp.MAX)
        t = float(mean[0])
        algbw = nbytes / t / 1e9
        return {"bytes": nbytes, "iters": iters, "warmup": warmup, "median_s": t, "mean_s": t,
                "min_s": t, "p90_s": t, "over_2ms": -1, "algbw_GBps": algbw, "busbw_GBps": algbw * 2 * (n - 1) / n,
                "verified": True}
    times = [0.0] * iters
    for i in range(iters):
        dist.barrier()
        start = clock()
        dist.all_reduce(buf)
        times[i] = clock() - start
    slowest = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    times = sorted(slowest.tolist())
    median = statistics.median(times)
    algbw = nbytes / median / 1e9
    return {"bytes": nbytes, "iters": iters, "warmup": warmup, "median_s": median,
            "mean_s": sum(times) / len(times), "min_s": times[0],
            "p90_s": times[min(len(times) - 1, int(0.9 * len(times)))],
            "over_2ms": sum(t > 2e-3 for t in times) / len(times),
            "algbw_GBps": algbw, "busbw_GBps": algbw * 2 * (n - 1) / n, "verified": True}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--min-bytes", type=int, default=4096)
    p.add_argument("--max-bytes", type=int, default=256 << 20)
    p.add_argument("--factor", type=int, choices=[2, 4], default=4)
    p.add_argument("--iter-bytes", type=int, default=1 << 30)
    p.add_argument("--min-iters", type=int, default=10)
    p.add_argument("--max-iters", type=int, default=1000)
    p.add_argument("--warmup", type=int, default=-1)
    p.add_argument("--timeout-s", type=float, default=120)
    p.add_argument("--method", choices=["barrier", "loop"], default="barrier")
    p.add_argument("--json")
    a = p.parse_args()
    if a.min_bytes < 4 or a.min_bytes % 4 or a.max_bytes < a.min_bytes:
        p.error("need 4 <= --min-bytes <= --max-bytes, --min-bytes a multiple of 4")
    if a.min_iters < 1 or a.max_iters < a.min_iters:
        p.error("need 1 <= --min-iters <= --max-iters")

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=a.timeout_s))
    rank, n = dist.get_rank(), dist.get_world_size()
    report = rank == 0
    method = ("mean of one timed loop of back-to-back operations, slowest rank" if a.method == "loop"
              else "median over iterations of the slowest rank's time, barrier before each")
    if report:
        print(f"pytorch {torch.__version__} gloo all_reduce (float32 sum), {n} ranks; time = {method}")
        print(f"{'size':>10} {'iters':>6} {'median_ms':>12} {'min_ms':>12} {'p90_ms':>12} "
              f"{'algbw_GB/s':>12} {'busbw_GB/s':>12}", flush=True)
    results = []
    nbytes = a.min_bytes
    while nbytes <= a.max_bytes:
        r = measure(a, nbytes, rank, n)
        results.append(r)
        if report:
            print(f"{human_bytes(nbytes):>10} {r['iters']:>6} {r['median_s'] * 1e3:>12.4f} "
                  f"{r['min_s'] * 1e3:>12.4f} {r['p90_s'] * 1e3:>12.4f} {r['algbw_GBps']:>12.3f} "
                  f"{r['busbw_GBps']:>12.3f}", flush=True)
        nbytes *= a.factor
    if report and a.json:
        with open(a.json, "w") as f:
            json.dump({"impl": "pytorch", "torch_version": torch.__version__, "backend": "gloo",
                       "world_size": n, "method": method, "results": results}, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    try:
        main()
    except Exception as error:  # noqa: BLE001 — one line, then a non-zero exit for the launcher
        print(f"allreduce_torch: {error}", file=sys.stderr)
        sys.exit(1)

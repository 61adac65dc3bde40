#!/usr/bin/python3
"""Training benchmark: the Fashion-MNIST CNN trained data-parallel by ddprun + ddprun::torch
(build/bin/fashion_mnist) against PyTorch's Python DDP on gloo under torchrun
(examples/torch/fashion_mnist_ddp.py under shared/tools/torchrun-anchor), measured in the same run.

Usage: bench/train_bench.py [FILTER] [options]        (stdlib only; see docs/performance.md)

Benchmarks (FILTER is a substring of their names; empty runs all):
  train_throughput  samples/s of the training loop, 2 workers x --threads threads, the same model,
                    batch, optimizer, data and seed on both sides; goal: ddprun >= 1.2x the anchor.
                    Also the CPU time per sample of the training loops (all workers' threads):
                    other load on the machine moves it far less than samples/s
  train_batch_sweep the same comparison at other batch sizes per worker (--sweep): how the ratio
                    moves as the per-step work shrinks against the per-step overhead
  train_scaling     ddprun with 1 worker and with 2 (batch per worker fixed): speedup, efficiency
  train_overlap     the share of the gradient all_reduce's time hidden behind backward, from
                    DistributedDataParallel's stats, with the default buckets and with small ones
  train_demo        the full demo job: 2 epochs, 2 workers: test accuracy and wall time
                    (target: >= 0.85 in under 5 minutes)
Runs alternate between the two sides (ABBA order) so that drifting load on the machine hits both.
Every number is the median over --repeats runs. Exits non-zero when a run fails (a missed goal is
reported, not a failure).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import BenchError

REPO = Path(__file__).resolve().parent.parent
NAMES = ["train_throughput", "train_batch_sweep", "train_scaling", "train_overlap", "train_demo"]


def run_job(cmd, timeout_s, env=None, retries=1):
    """Runs one launcher job; returns (wall seconds, stdout). A failed job is run again up to
    `retries` times (torchrun's own rendezvous sometimes loses its store connection on a loaded
    machine); raises BenchError when every try failed."""
    for attempt in range(retries + 1):
        try:
            return run_once(cmd, timeout_s, env)
        except BenchError as error:
            if attempt == retries:
                raise
            print(f"    (retrying after a failed run: {str(error).splitlines()[0]} ... {str(error).splitlines()[-1]})",
                  flush=True)


def run_once(cmd, timeout_s, env):
    start = time.perf_counter()
    try:
        done = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, timeout=timeout_s, env=env,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise BenchError(f"timed out after {timeout_s} s: {' '.join(map(str, cmd))}")
    wall = time.perf_counter() - start
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-20:])
        raise BenchError(f"exit status {done.returncode}: {' '.join(map(str, cmd))}\n{tail}")
    return wall, done.stdout


def value(stdout, key):
    match = re.search(rf"\b{key}=([0-9.eE+-]+)", stdout)
    if not match:
        raise BenchError(f"no {key}= in the output:\n{stdout[-2000:]}")
    return float(match.group(1))


class Bench:
    def __init__(self, args):
        self.args = args
        self.common = ["--threads", args.threads, "--lr", args.lr,
                       "--seed", args.seed, "--log-every", 0]
        if args.train_limit:
            self.common += ["--train-limit", args.train_limit]

    def ddprun(self, nproc, epochs, extra=(), batch_size=None):
        """fashion_mnist under ddprun; a fresh checkpoint folder, so nothing is resumed."""
        with tempfile.TemporaryDirectory() as checkpoints:
            cmd = [self.args.ddprun, "--standalone", "--nproc-per-node", nproc, self.args.fashion, *self.common,
                   "--batch-size", batch_size or self.args.batch_size, "--epochs", epochs,
                   "--checkpoint-dir", checkpoints, *extra]
            return run_job(cmd, self.args.timeout)

    def anchor(self, nproc, epochs, batch_size=None):
        cmd = [self.args.anchor, "--standalone", "--nproc_per_node", nproc, REPO / "examples/torch/fashion_mnist_ddp.py",
               *self.common, "--batch-size", batch_size or self.args.batch_size, "--epochs", epochs]
        return run_job(cmd, self.args.timeout, env=dict(os.environ, PYTHONWARNINGS="ignore"))


def median(values):
    return statistics.median(values) if values else float("nan")


def spread(values):
    return f"min {min(values):.0f} max {max(values):.0f} n={len(values)}"


def compare(bench, args, batch_size, repeats):
    """ABBA runs of both sides at one batch size: {side: {"rate": [...], "cpu": [...], "wall": [...]}}."""
    sides = {"ddprun": {"rate": [], "cpu": [], "wall": [], "hidden": []}, "anchor": {"rate": [], "cpu": [], "wall": []}}
    for repeat in range(repeats):
        for side in (["ddprun", "anchor"] if repeat % 2 == 0 else ["anchor", "ddprun"]):
            load = os.getloadavg()[0]
            if side == "ddprun":
                wall, out = bench.ddprun(2, args.epochs, batch_size=batch_size)
                sides[side]["hidden"].append(value(out, "ddp_hidden_share"))
            else:
                wall, out = bench.anchor(2, args.epochs, batch_size=batch_size)
            record = sides[side]
            record["rate"].append(value(out, "train_samples_per_s"))
            record["cpu"].append(value(out, "train_cpu_ms_per_sample"))
            record["wall"].append(wall)
            print(f"    batch {batch_size} run {repeat + 1} {side:>6}: {record['rate'][-1]:6.0f} samples/s, "
                  f"{record['cpu'][-1]:.4f} CPU ms/sample, job {wall:5.1f} s (load before: {load:.2f})", flush=True)
    return sides


def train_throughput(bench, args, results):
    sides = compare(bench, args, args.batch_size, args.repeats)
    ours, theirs = sides["ddprun"], sides["anchor"]
    ratio = median(ours["rate"]) / median(theirs["rate"])
    cpu_ratio = median(theirs["cpu"]) / median(ours["cpu"])
    print(f"train_throughput  ddprun median {median(ours['rate']):.0f} samples/s  torchrun-anchor median "
          f"{median(theirs['rate']):.0f} samples/s  ratio {ratio:.2f}x (goal >= 1.2x: {'met' if ratio >= 1.2 else 'NOT met'})")
    print(f"    ddprun {spread(ours['rate'])}; anchor {spread(theirs['rate'])}")
    print(f"    CPU per sample (all workers, training loop): ddprun median {median(ours['cpu']):.4f} ms, anchor median "
          f"{median(theirs['cpu']):.4f} ms: the anchor costs {cpu_ratio:.2f}x")
    print(f"    whole job (launch to exit, {args.epochs} epoch(s)): ddprun median {median(ours['wall']):.1f} s, "
          f"anchor median {median(theirs['wall']):.1f} s")
    results["two_workers"] = ours["rate"]
    results["hidden_default"] = ours["hidden"]


def train_batch_sweep(bench, args, results):
    rows = []
    for batch_size in args.sweep:
        sides = compare(bench, args, batch_size, args.sweep_repeats)
        rows.append((batch_size, median(sides["ddprun"]["rate"]), median(sides["anchor"]["rate"]),
                     median(sides["anchor"]["cpu"]) / median(sides["ddprun"]["cpu"])))
    for batch_size, ours, theirs, cpu_ratio in rows:
        print(f"train_batch_sweep  batch {batch_size} per worker: ddprun {ours:.0f} samples/s, anchor {theirs:.0f} "
              f"samples/s, ratio {ours / theirs:.2f}x; anchor CPU per sample {cpu_ratio:.2f}x ddprun's")


def train_scaling(bench, args, results):
    one = []
    two = list(results.get("two_workers", []))
    for repeat in range(args.repeats):
        _, out = bench.ddprun(1, args.epochs)
        one.append(value(out, "train_samples_per_s"))
        if len(two) <= repeat:
            _, out = bench.ddprun(2, args.epochs)
            two.append(value(out, "train_samples_per_s"))
        print(f"    run {repeat + 1}: 1 worker {one[-1]:.0f} samples/s, 2 workers {two[repeat]:.0f} samples/s", flush=True)
    speedup = median(two) / median(one)
    print(f"train_scaling  1 worker median {median(one):.0f} samples/s  2 workers median {median(two):.0f} samples/s  "
          f"speedup {speedup:.2f}x  efficiency {speedup / 2:.0%}")


def train_overlap(bench, args, results):
    default = list(results.get("hidden_default", []))
    small = []
    for repeat in range(args.repeats):
        if len(default) <= repeat:
            _, out = bench.ddprun(2, args.epochs)
            default.append(value(out, "ddp_hidden_share"))
        _, out = bench.ddprun(2, args.epochs, ["--bucket-cap-mb", args.small_bucket_mb])
        small.append(value(out, "ddp_hidden_share"))
        print(f"    run {repeat + 1}: hidden share {default[repeat]:.3f} (default buckets), "
              f"{small[-1]:.3f} (--bucket-cap-mb {args.small_bucket_mb}), "
              f"{value(out, 'train_samples_per_s'):.0f} samples/s with small buckets", flush=True)
    print(f"train_overlap  share of all_reduce time hidden behind backward: default buckets median "
          f"{median(default):.3f}, --bucket-cap-mb {args.small_bucket_mb} median {median(small):.3f}")


def train_demo(bench, args, results):
    with tempfile.TemporaryDirectory() as checkpoints:
        cmd = [args.ddprun, "--standalone", "--nproc-per-node", 2, args.fashion, "--epochs", 2, "--log-every", 0,
               "--checkpoint-dir", checkpoints]
        wall, out = run_job(cmd, max(args.timeout, 600))
    accuracy = value(out, "test_accuracy")
    ok = accuracy >= 0.85 and wall < 300
    print(f"train_demo  2 epochs, 2 workers, default flags: test_accuracy {accuracy:.4f}, wall {wall:.1f} s "
          f"(target >= 0.85 in < 300 s: {'met' if ok else 'NOT met'}); "
          f"training {value(out, 'train_samples_per_s'):.0f} samples/s")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("filter", nargs="?", default="")
    parser.add_argument("--list", action="store_true", help="list the selected benchmarks; exit 1 when none")
    parser.add_argument("--ddprun", type=Path, default=REPO / "build/bin/ddprun")
    parser.add_argument("--fashion", type=Path, default=REPO / "build/bin/fashion_mnist")
    parser.add_argument("--anchor", type=Path, default=REPO.parent / "shared/tools/torchrun-anchor")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=1, help="epochs per throughput run")
    parser.add_argument("--train-limit", type=int, default=0, help="first N training images (0: all 60000)")
    parser.add_argument("--batch-size", type=int, default=64, help="per worker")
    parser.add_argument("--threads", type=int, default=1, help="per worker")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--sweep", type=lambda text: [int(b) for b in text.split(",")], default=[16, 32, 128],
                        help="train_batch_sweep's batch sizes per worker, comma-separated")
    parser.add_argument("--sweep-repeats", type=int, default=2)
    parser.add_argument("--small-bucket-mb", type=float, default=0.01, help="train_overlap's small buckets")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per job")
    args = parser.parse_args()
    selected = [name for name in NAMES if args.filter in name]
    if args.list:
        print("\n".join(selected))
        return 0 if selected else 1
    if not selected:
        print(f"no benchmark name contains {args.filter!r}; the names are: {', '.join(NAMES)}", file=sys.stderr)
        return 2
    for path in (args.ddprun, args.fashion, args.anchor):
        if not path.exists():
            print(f"train_bench: {path} does not exist (build first: scripts/build.sh)", file=sys.stderr)
            return 2

    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; {args.repeats} repeats, "
          f"{args.epochs} epoch(s) of {args.train_limit or 60000} images, batch {args.batch_size} per worker, "
          f"{args.threads} thread(s) per worker", flush=True)
    bench = Bench(args)
    results = {}
    status = 0
    for name in selected:
        try:
            globals()[name](bench, args, results)
        except BenchError as error:
            print(f"{name}: FAILED: {error}", flush=True)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Hang benchmarks: how long after the hang timeout ddprun's digest is on the console, with 8 local
ranks, and what torchrun (the anchor) and PyTorch 1.13 print in the same situation.

Usage: bench/hang_bench.py [FILTER] [options]       (stdlib only; see docs/performance.md)

  hang_digest_8x_python  PyTorch 1.13 gloo job, rank 1 sleeps before all_reduce, the others wait in
                         it; ddprun --hang-timeout T --hang-action stop
  hang_digest_8x_cpp     plain_sgd --stall-rank 1 (ddprun::runtime, gloo), the same
  hang_anchor_8x_python  the PyTorch job under torchrun-anchor: nothing is printed until the gloo
                         timeout; run with init_process_group(timeout=--anchor-gloo-timeout) to see
                         what comes then (PyTorch 1.13's default timeout is 1800 s)

Each worker prints a line just before it sleeps or enters all_reduce; the last such line is the
last thing any rank did (t0), so the hang timeout expires at t0 + T. Every line ddprun and the
workers print is timestamped as it arrives. Per run:
    detect   the "hang: no rank made progress" line - (t0 + T): the status sample's delay (<= 1 s)
    digest   the digest's last line - (t0 + T): what the issue asks to be < 2 s
    capture  the digest's last line - the detect line: signals, faulthandler, gdb where needed
    end      ddprun's exit - the digest's last line: gdb for every rank, stack files, stop
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench_common import BenchError, run_harness

REPO = Path(__file__).resolve().parent.parent
NPROC = 8

SCRIPT = """\
import datetime, os, sys, time
import torch, torch.distributed as dist
timeout = float(os.environ.get("HANG_BENCH_GLOO_TIMEOUT", "1800"))
dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=timeout))
rank = dist.get_rank()
t = torch.ones(1)
if rank == 1:
    print(f"rank {rank} sleeps", flush=True)
    time.sleep(3600)
print(f"rank {rank} enters all_reduce", flush=True)
dist.all_reduce(t)
print(f"rank {rank} done", flush=True)
"""


class Timed:
    """A launcher run whose stdout and stderr lines are timestamped (time.monotonic) as they come."""

    def __init__(self, cmd, env):
        self.lines = []  # (time, stream, text)
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True)
        self.readers = [threading.Thread(target=self._read, args=(self.proc.stdout, "out")),
                        threading.Thread(target=self._read, args=(self.proc.stderr, "err"))]
        for reader in self.readers:
            reader.start()

    def _read(self, stream, name):
        for raw in iter(stream.readline, b""):
            now = time.monotonic()
            with self.lock:
                self.lines.append((now, name, raw.decode(errors="replace").rstrip("\n")))

    def wait(self, timeout_s):
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
            raise BenchError(f"timed out after {timeout_s:g} s")
        ended = time.monotonic()
        for reader in self.readers:
            reader.join()
        return ended

    def first(self, predicate):
        with self.lock:
            return next(((t, text) for t, _, text in self.lines if predicate(text)), (None, None))

    def last(self, predicate):
        with self.lock:
            return next(((t, text) for t, _, text in reversed(self.lines) if predicate(text)), (None, None))


def worker_marker(text):
    return " sleeps" in text or " enters all_reduce" in text or "stalls for" in text


def measure_ddprun(a, tmp, command, env):
    """One hang under ddprun: the times above, in seconds."""
    cmd = [a.ddprun, "--standalone", "--nproc-per-node", str(NPROC), "--hang-timeout", str(a.hang_timeout),
           "--hang-action", "stop", "--log-dir", str(tmp / "logs")] + command
    run = Timed(cmd, env)
    ended = run.wait(300)
    t0, _ = run.last(worker_marker)
    detect, _ = run.first(lambda text: "hang: no rank made progress" in text)
    digest, _ = run.first(lambda text: "hang: every rank's stacks:" in text)
    if None in (t0, detect, digest):
        tail = "\n".join(text for _, _, text in run.lines[-20:])
        raise BenchError(f"no hang found or no digest (exit {run.proc.returncode}):\n{tail}")
    expiry = t0 + a.hang_timeout
    digest_lines = [text for _, _, text in run.lines if text.startswith("ddprun: hang: rank")]
    return {"detect": detect - expiry, "digest": digest - expiry, "capture": digest - detect,
            "end": ended - digest, "lines": digest_lines, "exit": run.proc.returncode}


def report(name, runs, goal):
    def median(key):
        return statistics.median(r[key] for r in runs)

    print(f"{name}  digest median {median('digest'):.2f} s after the timeout  (goal < {goal:g} s)  "
          f"detect {median('detect'):.2f} s  capture {median('capture'):.2f} s  end {median('end'):.2f} s")
    for key in ("digest", "detect", "capture", "end"):
        values = [r[key] for r in runs]
        print(f"    {key:8s} min {min(values):.2f}  max {max(values):.2f}  n {len(values)}")
    for line in runs[-1]["lines"]:
        print(f"    | {line}")
    print(f"    exit status {runs[-1]['exit']}", flush=True)


def bench_python(a, tmp):
    tmp = Path(tmp)
    script = tmp / "sleepy_rank.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHON_EXEC="/usr/bin/python3")
    runs = [measure_ddprun(a, tmp, [str(script)], env) for _ in range(a.runs)]
    report("hang_digest_8x_python", runs, 2)


def bench_cpp(a, tmp):
    tmp = Path(tmp)
    runs = [measure_ddprun(a, tmp, [a.plain_sgd, "--stall-rank", "1"], dict(os.environ)) for _ in range(a.runs)]
    report("hang_digest_8x_cpp", runs, 2)


def bench_anchor(a, tmp):
    tmp = Path(tmp)
    script = tmp / "sleepy_rank.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, HANG_BENCH_GLOO_TIMEOUT=str(a.anchor_gloo_timeout))
    cmd = ["/usr/bin/python3", a.anchor, "--standalone", "--nproc_per_node", str(NPROC), str(script)]
    run = Timed(cmd, env)
    ended = run.wait(a.anchor_gloo_timeout + 300)
    t0, _ = run.last(worker_marker)
    if t0 is None:
        tail = "\n".join(text for _, _, text in run.lines[-20:])
        raise BenchError(f"the workers never got to the all_reduce (exit {run.proc.returncode}):\n{tail}")
    after = [(t - t0, text) for t, _, text in run.lines if t > t0]
    first = after[0][0] if after else None
    print(f"hang_anchor_8x_python  torchrun-anchor: first line after the hang {first:.1f} s "
          f"(gloo timeout {a.anchor_gloo_timeout:g} s; PyTorch 1.13's default 1800 s), exit {run.proc.returncode} "
          f"{ended - t0:.1f} s after the hang")
    for offset, text in after[: a.anchor_lines]:
        print(f"    +{offset:6.1f} s | {text[:160]}")
    print(f"    ... {max(0, len(after) - a.anchor_lines)} more lines", flush=True)


BENCHMARKS = {
    "hang_digest_8x_python": bench_python,
    "hang_digest_8x_cpp": bench_cpp,
    "hang_anchor_8x_python": bench_anchor,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("filter", nargs="?", default="")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--ddprun", default=str(REPO / "build/bin/ddprun"))
    parser.add_argument("--plain-sgd", default=str(REPO / "build/bin/plain_sgd"))
    parser.add_argument("--anchor", default=str(REPO.parent / "shared/tools/torchrun-anchor"))
    parser.add_argument("--hang-timeout", type=float, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--anchor-gloo-timeout", type=float, default=60)
    parser.add_argument("--anchor-lines", type=int, default=12)
    a = parser.parse_args()

    def tools(chosen):
        needed = []
        if any("digest" in name for name in chosen):
            needed.append(a.ddprun)
        if "hang_digest_8x_cpp" in chosen:
            needed.append(a.plain_sgd)
        if "hang_anchor_8x_python" in chosen:
            needed.append(a.anchor)
        return needed

    return run_harness(BENCHMARKS, a, tools, tmp_prefix="hang_bench_")


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Progress-report cost benchmarks: what one report call costs a worker, in ns per call, against a
plain call of an empty function of the same signature in the same run (the anchor). Issue 13's goal:
< 100 ns per call.

Usage: bench/progress_bench.py [FILTER] [options]       (stdlib only; see docs/performance.md)

  progress_cost_cpp     ddprun::progress::report (worker_runtime) from C++: build/bin/progress_cost
  progress_cost_python  ddprun_progress.report (python/ddprun_progress.py) from /usr/bin/python3

Cases: unchanged (the last report's values again: compared, nothing written), unchanged_text (the
same with a 24-byte text), changed (a new step and samples each call: the seqlock write and a
CLOCK_MONOTONIC_COARSE read), changed_text (a new step and a new 24-byte text each call). Python
also shows a call of time.clock_gettime_ns(CLOCK_MONOTONIC_COARSE) alone, the floor of a changed
report. Each case is the best of --progress-rounds rounds of --progress-calls calls (the round the
rest of the machine disturbed least); "over" is that minus the empty call's.
"""
import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_common import BenchError, run_harness

REPO = Path(__file__).resolve().parent.parent
PYTHON = "/usr/bin/python3"

PYTHON_MEASURE = r"""
import sys, time
import ddprun_progress
calls, rounds = int(sys.argv[1]), int(sys.argv[2])
assert ddprun_progress.enabled(), "DDPRUN_PROGRESS_FILE is not usable"
report = ddprun_progress.report
clock = time.clock_gettime_ns
text_a = "epoch 3 loss 0.123456 aa"
text_b = "epoch 3 loss 0.123456 bb"

def empty_report(step, samples, text=None):
    return None

# One function per case, so that each loop is the same bytecode but for the call it makes.
def baseline(n):
    f = empty_report
    for i in range(n): f(i, i)
def unchanged(n):
    f = report
    for i in range(n): f(7, 224)
def unchanged_text(n):
    f = report; t = text_a
    for i in range(n): f(7, 224, t)
def changed(n):
    f = report
    for i in range(n): f(i, i)
def changed_text(n):
    f = report; a = text_a; b = text_b
    for i in range(n): f(i, i, a if i & 1 else b)
def baseline_text(n):
    f = empty_report; a = text_a; b = text_b
    for i in range(n): f(i, i, a if i & 1 else b)
def coarse_clock(n):
    c = clock
    for i in range(n): c(6)

def best(case):
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        case(calls)
        times.append((time.perf_counter_ns() - t0) / calls)
    return min(times)

base = best(baseline)
base_text = best(baseline_text)
print("baseline %.1f 0.0" % base)
for name, case, anchor in [("unchanged", unchanged, base), ("unchanged_text", unchanged_text, base),
                           ("changed", changed, base), ("changed_text", changed_text, base_text),
                           ("coarse_clock_alone", coarse_clock, base)]:
    ns = best(case)
    print("%s %.1f %.1f" % (name, ns, ns - anchor))
"""


def measure(cmd, env, what):
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        raise BenchError(f"{what} exited with {run.returncode}: {run.stderr.strip()[-400:]}")
    rows = []
    for line in run.stdout.split("\n"):
        if line.strip():
            name, ns, over = line.split()
            rows.append((name, float(ns), float(over)))
    return rows


def show(name, rows, goal_ns=100.0):
    print(f"{name}  (ns per call: best round; over = minus the empty call's)")
    for case, ns, over in rows:
        verdict = ""
        if case != "baseline" and not case.startswith("coarse_clock"):
            verdict = "  goal < 100 ns: " + ("met" if ns < goal_ns else "missed")
        print(f"  {case:<20} {ns:8.1f} ns   over {over:7.1f} ns{verdict}", flush=True)


def progress_env(tmp):
    env = dict(os.environ)
    env["DDPRUN_PROGRESS_FILE"] = str(Path(tmp) / "progress")
    return env


def bench_cpp(a, tmp):
    rows = measure([a.progress_cost, str(a.progress_calls), str(a.progress_rounds)], progress_env(tmp), "progress_cost")
    show("progress_cost_cpp", rows)


def bench_python(a, tmp):
    env = progress_env(tmp)
    env["PYTHONPATH"] = str(REPO / "python")
    calls = max(1, a.progress_calls // 5)  # Python is slower: fewer calls per round, the same rounds
    rows = measure([PYTHON, "-c", PYTHON_MEASURE, str(calls), str(a.progress_rounds)], env, "python")
    show("progress_cost_python", rows)


BENCHMARKS = {"progress_cost_cpp": bench_cpp, "progress_cost_python": bench_python}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("filter", nargs="?", default="")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--progress-cost", default=str(REPO / "build" / "bin" / "progress_cost"))
    parser.add_argument("--progress-calls", type=int, default=5_000_000)
    parser.add_argument("--progress-rounds", type=int, default=7)
    a = parser.parse_args()

    def tools(chosen):
        return [a.progress_cost] if "progress_cost_cpp" in chosen else []

    return run_harness(BENCHMARKS, a, tools, tmp_prefix="ddprun-progress-bench-")


if __name__ == "__main__":
    sys.exit(main())

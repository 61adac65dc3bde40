#!/usr/bin/python3
"""All-reduce benchmark: ddprun::runtime's gloo process group against PyTorch 1.13's, same run.

Usage: bench/allreduce_bench.py [FILTER] [options]      (stdlib only; see docs/performance.md)

One benchmark, `allreduce` (FILTER is a substring of that name; empty selects it). Bus bandwidth
as nccl-tests defines it, busbw = algbw x 2(n-1)/n with algbw = bytes / time, GB = 1e9 bytes, of a
float32 sum at --allreduce-nproc ranks (2) on this machine's CPUs, sizes 4 KiB .. 256 MiB:
  ddprun:  build/bin/ddprun --standalone --nproc-per-node 2 --no-python build/bin/allreduce ...
  pytorch: PYTHON_EXEC=/usr/bin/python3 build/bin/ddprun --standalone --nproc-per-node 2
           bench/allreduce_torch.py ...  (torch.distributed gloo, Debian's python3-torch 1.13;
           --allreduce-torch-launcher anchor: ../shared/tools/torchrun-anchor launches it instead)
Both workers take the same options and time the same way: one verified all_reduce per size
(rank-dependent values, every element checked, so a wrong result fails the run), warm-up, then
each timed all_reduce starts right after a barrier; an iteration's time is its slowest rank's, and a
run reports the median over iterations (--allreduce-method loop: the mean of one timed loop of
back-to-back operations instead). Both get GLOO_SOCKET_IFNAME=lo and OMP_NUM_THREADS=1.
Two ranks on two CPUs leave no slack: other load distorts the numbers (docs/performance/raw-allreduce.md).
So each run first waits (--allreduce-quiet-wait) for idle CPUs; a run during which other
processes used more than --allreduce-max-others cores is run again (--allreduce-reruns); each
run's line tells that CPU use and how many operations up to 256 KiB took over 2 ms (scheduler
stalls). A failed run is run again (--allreduce-retries) before the benchmark fails.
--allreduce-rounds runs alternate the two (ddprun first in odd rounds, pytorch first in even ones);
the table shows per size the median over rounds of the per-run medians, the busbw range over the
rounds, and ratio = pytorch time / ddprun time (> 1: ddprun faster), with its range over rounds.
Then the goals (at least 1.0x at every size from 1 MiB, at least 1.5x lower latency at 4 KiB) and
the ceiling: one core's memcpy bandwidth (build/bin/memcpy_ceiling, 256 MiB, read+write = 2 x bytes).

Every option starts with --allreduce- so that scripts/bench.sh can hand it here. Exits non-zero if
a run fails (a launcher or worker exits non-zero, a wrong result, a timeout); a missed goal is
reported, not a failure.
"""
import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_common import BenchError, compilers, run_harness

REPO = Path(__file__).resolve().parent.parent
KIB, MIB = 1 << 10, 1 << 20


def say(text=""):
    print(text, flush=True)


def human_bytes(n):
    if n >= MIB and n % MIB == 0:
        return f"{n // MIB} MiB"
    if n >= KIB and n % KIB == 0:
        return f"{n // KIB} KiB"
    return f"{n} B"


def loadavg():
    return open("/proc/loadavg").read().split()[0]


def cpu_busy_seconds():
    """CPU seconds all CPUs spent running tasks since boot (/proc/stat: user + nice + system; not
    irq and softirq time, which rusage does not charge to the processes that caused it)."""
    fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return (fields[0] + fields[1] + fields[2]) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def wait_for_quiet(max_wait, threshold=0.25):
    """Waits (up to max_wait s) until the CPUs were busy less than `threshold` cores over 1 s.
    Returns (seconds waited, cores busy in the last second)."""
    start = time.monotonic()
    while True:
        before = cpu_busy_seconds()
        time.sleep(1.0)
        busy = cpu_busy_seconds() - before
        waited = time.monotonic() - start
        if busy < threshold or waited >= max_wait:
            return waited, busy


def run_logged(cmd, env, timeout, log_path):
    """Runs cmd in its own session, output to log_path; kills its process group on timeout."""
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            return None


def worker_args(a, json_path):
    return ["--min-bytes", str(a.allreduce_min_bytes), "--max-bytes", str(a.allreduce_max_bytes),
            "--factor", str(a.allreduce_factor), "--iter-bytes", str(a.allreduce_iter_bytes),
            "--min-iters", str(a.allreduce_min_iters), "--max-iters", str(a.allreduce_max_iters),
            "--method", a.allreduce_method, "--json", str(json_path)]


def one_run(a, kind, tmp, round_index):
    json_path = Path(tmp) / f"{kind}-{round_index}.json"
    log_path = Path(tmp) / f"{kind}-{round_index}.log"
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"
    if a.allreduce_ifname:
        env["GLOO_SOCKET_IFNAME"] = a.allreduce_ifname
    nproc = str(a.allreduce_nproc)
    if kind == "ddprun":
        cmd = [a.allreduce_ddprun, "--standalone", "--nproc-per-node", nproc, "--no-python",
               a.allreduce_worker]
    elif a.allreduce_torch_launcher == "ddprun":
        env["PYTHON_EXEC"] = a.allreduce_python
        cmd = [a.allreduce_ddprun, "--standalone", "--nproc-per-node", nproc,
               str(REPO / "bench/allreduce_torch.py")]
    else:
        cmd = [a.allreduce_python, a.allreduce_anchor, "--standalone", "--nproc_per_node", nproc,
               str(REPO / "bench/allreduce_torch.py")]
    cmd += worker_args(a, json_path)
    failures = disturbed = 0
    while True:
        quiet = ""
        if a.allreduce_quiet_wait > 0:
            waited, busy = wait_for_quiet(a.allreduce_quiet_wait)
            quiet = (f", waited {waited:.0f} s for idle CPUs" if busy < 0.25 else
                     f", CPUs still busy ({busy:.2f} cores) after waiting {waited:.0f} s")
        json_path.unlink(missing_ok=True)
        load_before = loadavg()
        busy_before, ours_before = cpu_busy_seconds(), children_cpu_seconds()
        start = time.monotonic()
        rc = run_logged(cmd, env, a.allreduce_timeout, log_path)
        wall = time.monotonic() - start
        # CPU time that neither the benchmark's processes nor this script used, as average cores.
        others = max(0.0, (cpu_busy_seconds() - busy_before) - (children_cpu_seconds() - ours_before)) / wall
        output = log_path.read_text(errors="replace")
        if rc != 0 or not json_path.exists():
            tail = "\n".join(output.splitlines()[-40:])
            why = f"timed out after {a.allreduce_timeout:g} s" if rc is None else f"exited {rc}"
            failure = f"{kind} run {round_index + 1} {why}: {' '.join(cmd)}\n{tail}"
            failures += 1
            if failures > a.allreduce_retries:
                raise BenchError(failure)
            last = output.strip().splitlines()[-1:] or ["(no output)"]
            say(f"    round {round_index + 1} {kind}: FAILED ({why}; last line: {last[0][:160]}), running it again")
            continue
        if others > a.allreduce_max_others and disturbed < a.allreduce_reruns:
            disturbed += 1
            say(f"    round {round_index + 1} {kind}: other processes used {others:.2f} cores during the run, "
                f"over --allreduce-max-others {a.allreduce_max_others:g}; running it again")
            continue
        break
    result = json.loads(json_path.read_text())
    busy = compilers()
    # Operations up to 256 KiB take well under 2 ms here; slower ones waited on the scheduler.
    small = [r for r in result["results"] if r["bytes"] <= 256 * KIB and r.get("over_2ms", -1) >= 0]
    stalls = ""
    if small:
        fraction = sum(r["over_2ms"] * r["iters"] for r in small) / sum(r["iters"] for r in small)
        stalls = f"; {100 * fraction:.0f}% of timed operations <= 256 KiB over 2 ms"
    say(f"    round {round_index + 1} {kind:7s} {wall:6.1f} s wall, loadavg {load_before} -> {loadavg()}, "
        f"other processes {others:.2f} cores{quiet}{stalls}"
        f"{f', {len(busy)} compiler process(es) running at the end' if busy else ''}")
    result["others_cores"] = others
    result["command"] = cmd
    return result


def spread(values, digits=3):
    return f"{min(values):.{digits}f}-{max(values):.{digits}f}"


def bench_allreduce(a, tmp):
    mc_json = Path(tmp) / "memcpy.json"
    n = a.allreduce_nproc
    method = ("mean of one timed loop of back-to-back operations (slowest rank)"
              if a.allreduce_method == "loop" else
              "median over iterations of the slowest rank (barrier before each)")
    say(f"# allreduce: float32 sum at {n} ranks, gloo on CPU; ddprun::runtime vs PyTorch "
        f"torch.distributed (gloo), {a.allreduce_rounds} alternating rounds; time = {method}, "
        "then the median over rounds; busbw = bytes/time x 2(n-1)/n, GB = 1e9 B; "
        "ratio = pytorch time / ddprun time")
    runs = {"ddprun": [], "pytorch": []}
    for r in range(a.allreduce_rounds):
        order = ("ddprun", "pytorch") if r % 2 == 0 else ("pytorch", "ddprun")
        for kind in order:
            runs[kind].append(one_run(a, kind, tmp, r))
    if a.allreduce_quiet_wait > 0:
        wait_for_quiet(a.allreduce_quiet_wait)
    rc = run_logged([a.allreduce_memcpy, "--json", str(mc_json)], None, 300, Path(tmp) / "memcpy.log")
    if rc != 0 or not mc_json.exists():
        raise BenchError(f"{a.allreduce_memcpy} exited {rc}: "
                         f"{(Path(tmp) / 'memcpy.log').read_text(errors='replace')}")
    memcpy = json.loads(mc_json.read_text())

    disturbed = [f"{kind} round {i + 1} ({run['others_cores']:.2f} cores)" for kind in runs
                 for i, run in enumerate(runs[kind]) if run["others_cores"] > a.allreduce_max_others]
    sizes = [r["bytes"] for r in runs["ddprun"][0]["results"]]
    table = []
    for i, size in enumerate(sizes):
        row = {"bytes": size}
        for kind in runs:
            per_round = [run["results"][i] for run in runs[kind]]
            assert all(p["bytes"] == size for p in per_round)
            row[kind] = {"time_s": statistics.median(p["median_s"] for p in per_round),
                         "busbw": [p["busbw_GBps"] for p in per_round],
                         "iters": per_round[0]["iters"]}
            row[kind]["busbw_GBps"] = size / row[kind]["time_s"] / 1e9 * 2 * (n - 1) / n
        row["ratio"] = row["pytorch"]["time_s"] / row["ddprun"]["time_s"]
        row["ratio_rounds"] = [p["results"][i]["median_s"] / d["results"][i]["median_s"]
                               for d, p in zip(runs["ddprun"], runs["pytorch"])]
        table.append(row)

    say()
    say("| size | iters | ddprun time | ddprun busbw GB/s (range) | pytorch time | "
        "pytorch busbw GB/s (range) | ratio (range) |")
    say("|---:|---:|---:|---:|---:|---:|---:|")

    def show_time(t):
        return f"{t * 1e3:.3f} ms" if t < 1 else f"{t:.3f} s"
    for row in table:
        d, p = row["ddprun"], row["pytorch"]
        say(f"| {human_bytes(row['bytes'])} | {d['iters']} | {show_time(d['time_s'])} | "
            f"{d['busbw_GBps']:.3f} ({spread(d['busbw'])}) | {show_time(p['time_s'])} | "
            f"{p['busbw_GBps']:.3f} ({spread(p['busbw'])}) | {row['ratio']:.2f}x "
            f"({spread(row['ratio_rounds'], 2)}) |")
    say()

    if disturbed:
        say(f"NOTE: other processes used more than {a.allreduce_max_others:g} cores during "
            f"{len(disturbed)} of the {2 * a.allreduce_rounds} runs kept: {', '.join(disturbed)}")
    by_size = {row["bytes"]: row for row in table}
    if 4 * KIB in by_size:
        r = by_size[4 * KIB]
        say(f"goal 4 KiB latency >= 1.5x lower: ddprun {show_time(r['ddprun']['time_s'])}, pytorch "
            f"{show_time(r['pytorch']['time_s'])}, {r['ratio']:.2f}x "
            f"({spread(r['ratio_rounds'], 2)} over rounds): {'met' if r['ratio'] >= 1.5 else 'MISSED'}")
    else:
        say("goal 4 KiB latency >= 1.5x lower: not measured (4 KiB not among the sizes)")
    large = [row for row in table if row["bytes"] >= MIB]
    if large:
        missed = [human_bytes(row["bytes"]) for row in large if row["ratio"] < 1.0]
        worst = min(large, key=lambda row: row["ratio"])
        say(f"goal >= 1.0x at every size from 1 MiB: lowest {worst['ratio']:.2f}x at "
            f"{human_bytes(worst['bytes'])}: " + ("met" if not missed else f"MISSED at {', '.join(missed)}"))
    else:
        say("goal >= 1.0x at every size from 1 MiB: not measured (no size from 1 MiB)")
    if 64 * MIB in by_size:
        r = by_size[64 * MIB]
        say(f"(with a same-node shared-memory path the goal would be >= 3x at 64 MiB; ddprun's gloo "
            f"backend takes loopback TCP: {r['ratio']:.2f}x)")
    best = max(table, key=lambda row: row["ddprun"]["busbw_GBps"])
    say(f"ceiling: memcpy on one core, {human_bytes(memcpy['bytes'])}, read+write (2 x bytes): "
        f"{memcpy['median_GBps']:.2f} GB/s median, {memcpy['best_GBps']:.2f} best; ddprun's highest "
        f"busbw {best['ddprun']['busbw_GBps']:.3f} GB/s ({human_bytes(best['bytes'])}) is "
        f"{100 * best['ddprun']['busbw_GBps'] / memcpy['median_GBps']:.1f}% of it")
    say(f"    ddprun command:  {' '.join(runs['ddprun'][0]['command'])}")
    say(f"    pytorch command: {' '.join(runs['pytorch'][0]['command'])}")
    if a.allreduce_json:
        with open(a.allreduce_json, "w") as f:
            json.dump({"world_size": n, "table": table, "memcpy": memcpy, "runs": runs}, f, indent=1)


BENCHMARKS = {"allreduce": bench_allreduce}


def main():
    env = os.environ.get
    anchor = REPO.parent / "shared/tools/torchrun-anchor"
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("filter", nargs="?", default="", help="substring of benchmark names to run")
    p.add_argument("--allreduce-ddprun", default=env("DDPRUN", str(REPO / "build/bin/ddprun")),
                   help="the ddprun launcher")
    p.add_argument("--allreduce-worker", default=str(REPO / "build/bin/allreduce"),
                   help="the ddprun worker (bench/allreduce.cpp)")
    p.add_argument("--allreduce-memcpy", default=str(REPO / "build/bin/memcpy_ceiling"),
                   help="the ceiling program (bench/memcpy_ceiling.cpp)")
    p.add_argument("--allreduce-anchor", default=env("TORCHRUN_ANCHOR", str(anchor)),
                   help="torchrun-anchor, the PyTorch launcher")
    p.add_argument("--allreduce-python", default="/usr/bin/python3", help="a python3 with torch")
    p.add_argument("--allreduce-torch-launcher", choices=["ddprun", "anchor"], default="ddprun",
                   help="what launches the PyTorch workers: ddprun (as for ddprun's workers, so only "
                   "the workers differ) or torchrun-anchor (its agent sometimes loses its own c10d "
                   "store on a loaded machine, RendezvousConnectionError, and the run is retried)")
    p.add_argument("--allreduce-nproc", type=int, default=2, help="ranks")
    p.add_argument("--allreduce-min-bytes", type=int, default=4 * KIB)
    p.add_argument("--allreduce-max-bytes", type=int, default=256 * MIB)
    p.add_argument("--allreduce-factor", type=int, choices=[2, 4], default=4, help="size step")
    p.add_argument("--allreduce-iter-bytes", type=int, default=1 << 30,
                   help="iterations per size = this / size, clamped to [min-iters, max-iters]")
    p.add_argument("--allreduce-min-iters", type=int, default=10)
    p.add_argument("--allreduce-max-iters", type=int, default=1000)
    p.add_argument("--allreduce-method", choices=["barrier", "loop"], default="barrier",
                   help="barrier: median of per-iteration times, a barrier before each; loop: mean "
                   "of one timed loop of back-to-back operations")
    p.add_argument("--allreduce-rounds", type=int, default=3, help="runs of each, alternating")
    p.add_argument("--allreduce-ifname", default="lo",
                   help="GLOO_SOCKET_IFNAME for both; empty = leave the environment's")
    p.add_argument("--allreduce-timeout", type=float, default=1200.0, help="seconds per run")
    p.add_argument("--allreduce-retries", type=int, default=2,
                   help="a failed run is run again up to this many times before the benchmark fails")
    p.add_argument("--allreduce-max-others", type=float, default=0.2,
                   help="a run during which other processes used more CPU than this (cores, on "
                   "average) is run again, up to --allreduce-reruns times; its numbers are dropped")
    p.add_argument("--allreduce-reruns", type=int, default=3)
    p.add_argument("--allreduce-quiet-wait", type=float, default=120.0,
                   help="before each run, wait up to this many seconds for the CPUs to be idle "
                   "(under 0.25 cores busy over 1 s); 0 = do not wait")
    p.add_argument("--allreduce-json", help="write the table and every run's results here")
    p.add_argument("--list", action="store_true", help="print the benchmark names and exit")
    a = p.parse_args()

    def tools_for(chosen):
        if a.allreduce_rounds < 1 or a.allreduce_nproc < 2:
            p.error("need --allreduce-rounds >= 1 and --allreduce-nproc >= 2")
        tools = [a.allreduce_ddprun, a.allreduce_worker, a.allreduce_memcpy, a.allreduce_python]
        if a.allreduce_torch_launcher == "anchor":
            tools.append(a.allreduce_anchor)
        return tools

    return run_harness(BENCHMARKS, a, tools_for, tmp_prefix="ddprun-allreduce-bench-")

if __name__ == "__main__":
    sys.exit(main())

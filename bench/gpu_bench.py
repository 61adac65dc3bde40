#!/usr/bin/python3
"""GPU watch benchmarks (issue 27): what ddprun's NVML sampling and its check before every start
cost, measured against ddprun without them in the same run, variants interleaved.

Usage: bench/gpu_bench.py [FILTER] [options]       (stdlib only; see docs/performance.md)

No GPU here: NVML is the tests' stand-in (build/tests/nvml_standin/libnvidia-ml.so.1, selected with
DDPRUN_NVML_LIBRARY, 8 GPUs from a control file). The stand-in answers a call with a stat(2) of
its control file, about as fast as a real driver answers the cheap calls (the slow ones of a real
GPU, the power reading or the first handle of a GPU without persistence mode, are the GPU check's
to measure: ../shared/tools/gpu/). What these measure is ddprun's own work around the calls:
the sampler thread's requests, the reader, each rank's GPU fields, the status block.

  gpu_status_cpu_8x   Launcher CPU per 10 s (every thread of ddprun, schedstat) over a 10 s window
                      while 8 workers each report progress 1,000 times a second, status block on,
                      stdout on a pty (launcher_bench.py's status_cpu_8x_progress1000, the status
                      CPU figure):
                        gpu:     8 stand-in GPUs, --devices-per-worker 1 (each rank its own GPU),
                                 sampled once a second
                        all:     the same GPUs, CUDA_VISIBLE_DEVICES unset: every rank sees all 8
                                 (64 GPU fields a sample)
                        no NVML: DDPRUN_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 (a machine
                                 without an NVIDIA driver: the status CPU figure)
                      Also each variant's loop thread alone (the agent's supervising thread).
                      Goal: gpu - no NVML <= 2 ms per 10 s.
  gpu_restart_8x      Restart latency of 8 workers (bench/restart_probe.cpp, as
                      launcher_bench.py's restart_latency_8x: local rank 3 exits 1, --max-restarts 1;
                      the crash -> the last new worker running):
                        gate:    the stand-in's 8 GPUs, defaults: the health check and the wait for
                                 the stopped workers' GPU memory (nothing held: one NVML sample)
                        no gate: the same with --gpu-health off --gpu-release-timeout 0
                        no NVML: no driver (the gate asks nothing)
                      Goal: gate - no gate not measurable (inside the run-to-run spread).
  gpu_launch_8x       Launch + teardown of 8 /bin/true (a first start: the health check waits for
                      NVML's first answer), default against --gpu-health off, with the stand-in's
                      8 GPUs and with no driver (the machine of most CPU jobs).
"""
import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_common import BenchError, run_harness
from launcher_bench import details, fmt, on_a_terminal, restart_once

REPO = Path(__file__).resolve().parent.parent
NPROC = 8
GIB = 1 << 30


def standin_control(folder):
    """8 busy GPUs, one process of someone else on each (the process list is read every sample)."""
    path = Path(folder) / "nvml-standin.txt"
    lines = []
    for i in range(NPROC):
        lines.append(f"gpu {i} util={90 - i} mem_total={80 * GIB} mem_used={20 * GIB} temp={60 + i} "
                     f"power_mw=350000 throttle=0")
        lines.append(f"proc {i} pid={999000 + i} used={GIB}")
    path.write_text("\n".join(lines) + "\n")
    return path


def env_with(nvml, control):
    env = dict(os.environ, DDPRUN_NVML_LIBRARY=str(nvml), DDPRUN_NVML_STANDIN=str(control))
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


def bench_status_cpu(a, tmp):
    if not os.access(a.progress_worker, os.X_OK):
        raise BenchError(f"no progress worker at {a.progress_worker} (build it: scripts/build.sh)")
    control = standin_control(tmp)
    w = a.window
    work = [a.progress_worker, "--rate", "1000", "--seconds", f"{w + 4:g}", "--summary", "1"]
    base = [a.ddprun, "--standalone", "--nproc-per-node", str(NPROC), "--status", "on"]
    variants = [
        ("gpu", env_with(a.standin, control), base + ["--devices-per-worker", "1", "--no-python", *work]),
        ("all", env_with(a.standin, control), base + ["--no-python", *work]),
        ("no NVML", env_with("/nonexistent/libnvidia-ml.so.1", control), base + ["--no-python", *work]),
    ]
    comm = Path(a.progress_worker).name[:15]
    cpu = {label: [] for label, _, _ in variants}
    loop = {label: [] for label, _, _ in variants}
    for _ in range(a.runs):
        for label, env, cmd in variants:
            total, _, text, main = on_a_terminal(cmd, w, NPROC, comm, env=env)
            if label != "no NVML" and "%" not in text.split("gpu", 1)[-1]:
                raise BenchError(f"{label}: the status block shows no GPU column:\n{text[-1500:]}")
            cpu[label].append(total * 10.0 / w)
            loop[label].append(main * 10.0 / w)
    name = "gpu_status_cpu_8x"
    print(f"# {name}: launcher CPU per 10 s over a {w:g} s window, 8 workers x 1,000 progress reports/s, "
          f"status block on a pty (120x40); NVML: the stand-in's 8 GPUs", flush=True)
    g, none = statistics.median(cpu["gpu"]), statistics.median(cpu["no NVML"])
    print(f"{name}  GPU sampling median {fmt(g)} ms  no NVML median {fmt(none)} ms  "
          f"difference {g - none:+.2f} ms per 10 s (goal: <= +2 ms)", flush=True)
    for label, _, _ in variants:
        details(label, cpu[label], f"; the loop thread alone {fmt(statistics.median(loop[label]))} ms")


def take_turns(variants, runs, measure):
    """One unrecorded run of each variant, then `runs` rounds in which each runs once, in turn, so that
    slow drift on a shared machine hits all alike: {label: [measure(cmd, env), ...]}."""
    for _, env, cmd in variants:
        measure(cmd, env)
    results = {label: [] for label, _, _ in variants}
    for _ in range(runs):
        for label, env, cmd in variants:
            results[label].append(measure(cmd, env))
    return results


def bench_restart(a, tmp):
    if not os.access(a.probe, os.X_OK):
        raise BenchError(f"no restart probe at {a.probe} (build it: scripts/build.sh)")
    control = standin_control(tmp)
    base = [a.ddprun, "--standalone", "--nproc-per-node", str(NPROC), "--max-restarts", "1"]
    variants = [
        ("gate", env_with(a.standin, control), base + ["--no-python", a.probe]),
        ("no gate", env_with(a.standin, control),
         base + ["--gpu-health", "off", "--gpu-release-timeout", "0", "--no-python", a.probe]),
        ("no NVML", env_with("/nonexistent/libnvidia-ml.so.1", control), base + ["--no-python", a.probe]),
    ]
    results = take_turns(variants, a.restart_runs, restart_once)
    name = "gpu_restart_8x"
    gate, no_gate = statistics.median(results["gate"]), statistics.median(results["no gate"])
    print(f"{name}  with the GPU gate median {fmt(gate)} ms  without median {fmt(no_gate)} ms  "
          f"difference {gate - no_gate:+.2f} ms (goal: not measurable)", flush=True)
    for label, _, _ in variants:
        details(label, results[label])


def launch_once(cmd, env):
    t = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, timeout=120)
    if out.returncode != 0:
        raise BenchError(f"exit {out.returncode}: {' '.join(cmd)}\n{out.stderr.decode(errors='replace')[-1500:]}")
    return (time.perf_counter() - t) * 1000


def bench_launch(a, tmp):
    control = standin_control(tmp)
    base = [a.ddprun, "--standalone", "--nproc-per-node", str(NPROC)]
    variants = [
        ("stand-in, GPU check", env_with(a.standin, control), base + ["--no-python", "/bin/true"]),
        ("stand-in, --gpu-health off", env_with(a.standin, control), base + ["--gpu-health", "off", "--no-python", "/bin/true"]),
        ("no driver, GPU check", env_with("/nonexistent/libnvidia-ml.so.1", control), base + ["--no-python", "/bin/true"]),
        ("no driver, --gpu-health off", env_with("/nonexistent/libnvidia-ml.so.1", control),
         base + ["--gpu-health", "off", "--no-python", "/bin/true"]),
    ]
    results = take_turns(variants, a.launch_runs, launch_once)
    name = "gpu_launch_8x"
    m = {label: statistics.median(xs) for label, xs in results.items()}
    print(f"{name}  GPU check median {fmt(m['stand-in, GPU check'])} ms  --gpu-health off median "
          f"{fmt(m['stand-in, --gpu-health off'])} ms (stand-in); no driver {fmt(m['no driver, GPU check'])} "
          f"against {fmt(m['no driver, --gpu-health off'])} ms (goal: not measurable)", flush=True)
    for label, _, _ in variants:
        details(label, results[label])


BENCHMARKS = {
    "gpu_status_cpu_8x": bench_status_cpu,
    "gpu_restart_8x": bench_restart,
    "gpu_launch_8x": bench_launch,
}


def main():
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("filter", nargs="?", default="", help="substring of benchmark names to run")
    p.add_argument("--ddprun", default=env("DDPRUN", str(REPO / "build/bin/ddprun")))
    p.add_argument("--standin", default=str(REPO / "build/tests/nvml_standin/libnvidia-ml.so.1"),
                   help="the stand-in NVML (CMake target nvml_standin)")
    p.add_argument("--probe", default=env("RESTART_PROBE", str(REPO / "build/bin/restart_probe")))
    p.add_argument("--progress-worker", default=env("PROGRESS_WORKER", str(REPO / "build/tests/progress_worker")))
    p.add_argument("--window", type=float, default=10.0, help="seconds gpu_status_cpu_8x measures each run")
    p.add_argument("--runs", type=int, default=3, help="runs of each gpu_status_cpu_8x variant")
    p.add_argument("--restart-runs", type=int, default=9, help="runs of each gpu_restart_8x variant")
    p.add_argument("--launch-runs", type=int, default=15, help="runs of each gpu_launch_8x variant")
    p.add_argument("--list", action="store_true", help="print the benchmark names and exit")
    a = p.parse_args()
    return run_harness(BENCHMARKS, a, lambda chosen: (a.ddprun, a.standin), tmp_prefix="ddprun-gpu-bench-")


if __name__ == "__main__":
    sys.exit(main())

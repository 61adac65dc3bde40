"""What every benchmark harness shares: the machine header, its error type, and its main loop."""
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time


class BenchError(Exception):
    """A benchmark could not be measured: a run failed, timed out, or gave a wrong answer."""


def compilers():
    """PIDs of running C++ compilers: their load makes timings on this 2-core machine noisy."""
    return subprocess.run(["pgrep", "-f", "cc1plus"], capture_output=True, text=True).stdout.split()


def machine_header():
    """One comment line naming the machine, its kernel and load, and a warning while compilers run."""
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                  if line.startswith("model name")), "?")
    load = open("/proc/loadavg").read().split()[:3]
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S %Z')}  {os.cpu_count()} CPUs  {model}  "
          f"kernel {os.uname().release}  loadavg {' '.join(load)}", flush=True)
    busy = compilers()
    if busy:
        print(f"# WARNING: {len(busy)} compiler process(es) running; numbers will be noisy", flush=True)


def run_harness(benchmarks, a, tools_for, tmp_prefix=None):
    """The main loop of a *_bench.py harness; returns its exit status.

    Selects the benchmarks whose name contains a.filter (with a.list, or when none matches, prints
    the names instead: 0 or 2); checks that every tool of tools_for(chosen) is executable (2 when
    one is not); prints the machine header; runs each chosen benchmark as benchmarks[name](a), or
    benchmarks[name](a, tmp) in a fresh folder named after tmp_prefix. A BenchError is printed as
    "<name>  FAILED: ..." and the others still run; 1 when any failed, else 0."""
    chosen = [name for name in benchmarks if a.filter in name]
    if a.list or not chosen:
        print("\n".join(benchmarks))
        return 0 if chosen else 2
    for tool in tools_for(chosen):
        if not os.access(tool, os.X_OK):
            print(f"bench: {tool} is not executable (build it: scripts/build.sh)", file=sys.stderr)
            return 2
    machine_header()
    failed = 0
    folder = tempfile.TemporaryDirectory(prefix=tmp_prefix) if tmp_prefix else contextlib.nullcontext()
    with folder as tmp:
        for name in chosen:
            try:
                benchmarks[name](a, tmp) if tmp_prefix else benchmarks[name](a)
            except BenchError as e:
                print(f"{name}  FAILED: {e}", flush=True)
                failed += 1
    return 1 if failed else 0


def kill_all(procs):
    """SIGKILLs each still-running process's group (each started in a session of its own), then reaps them all."""
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for proc in procs:
        proc.wait()

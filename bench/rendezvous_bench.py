#!/usr/bin/python3
"""Rendezvous benchmarks: ddprun's multi-node (c10d) rendezvous against torchrun's, same run.

Usage: bench/rendezvous_bench.py [FILTER] [options]      (stdlib only; see docs/performance.md)

FILTER is a substring of a benchmark name (rdzv_startup, rdzv_sim_1024); empty runs both.

rdzv_startup: N agents on this machine (N = 2, 8, 32, 64 by default), 1 worker each, one dynamic
  round with MIN = MAX = N through a store on 127.0.0.1:<a free port> (the first agent to bind it
  hosts the store, the others connect):
    ddprun: build/bin/ddprun --nnodes N:N --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:PORT
            --rdzv-id bench --nproc-per-node 1 --no-python WORKER
    anchor: ../shared/tools/torchrun-anchor --nnodes N:N --rdzv_backend c10d
            --rdzv_endpoint 127.0.0.1:PORT --rdzv_id bench --nproc_per_node 1
            --monitor_interval 0.1 --no_python WORKER
  WORKER is a /bin/sh script that writes "$RANK $WORLD_SIZE" into a FIFO the harness holds open
  and exits 0. Time = from just before the harness spawns the first agent until it reads the Nth
  worker's line (time.monotonic; select() on the FIFO, no polling). The ranks must be 0..N-1 once
  each with WORLD_SIZE N, else the run fails. Then every agent must exit 0 within
  --rdzv-exit-timeout (ddprun; the anchor within its timeout): a run where one does not still
  counts for the startup time, but it is reported and fails the benchmark (ddprun). ddprun and
  the anchor alternate; each point is the median of --rdzv-repeat runs. ratio = anchor / ddprun.
  (--monitor_interval 0.1, 2.x's default, only makes torchrun's agents notice sooner that their
  worker ended, so that a run ends sooner; it happens after the time measured here.)

rdzv_sim_1024: build/bin/rendezvous_sim (bench/rendezvous_sim.cpp): 1024 simulated agents,
  threads of one process, each with its own store connection, form one round against an
  in-process ddprun store. Time = from the release of all threads (each already connected) until
  the last has its decision. No anchor forms a 1024-agent round in reasonable time, so the goal
  (< 3 s) is printed instead of a ratio. As a same-run reference at a small count
  (--rdzv-sim-anchor-threads, 64; 0 skips it): PyTorch 1.13's own c10d rendezvous handler (what
  torchrun's agents run) with that many threads in one python3 process, against rendezvous_sim
  with as many; ratio = pytorch / ddprun.

Every benchmark prints one summary line per comparison,
    <name>  ddprun median X ms  torchrun-anchor median Y ms  ratio Zx (goal ...)
followed by indented details. Every option starts with --rdzv- so that scripts/bench.sh can hand
it here (the binaries also as --ddprun, --anchor, --sim). Exits non-zero if a ddprun run fails
(an agent exits non-zero, a wrong rank, a timeout); the anchor timing out or failing is reported,
not a failure.
"""
import argparse
import json
import os
import select
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench_common import BenchError, kill_all, run_harness

REPO = Path(__file__).resolve().parent.parent
STARTUP_GOAL_NODES, STARTUP_GOAL_RATIO = 8, 20.0
SIM_GOAL_S = 3.0
ANCHOR_AGENT_MIB = 300  # one torchrun agent's RSS here (python + torch) is ~230 MiB, with margin

# The reference for rdzv_sim: PyTorch 1.13's own c10d rendezvous (DynamicRendezvousHandler over
# C10dRendezvousBackend, what torchrun's agents run), T handlers in one process, one TCPStore client
# each, MIN = MAX = T; timed like rendezvous_sim: from releasing the threads to the last decision.
PYTORCH_SIM = r"""
import datetime, json, os, resource, sys, threading, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
import torch
import torch.distributed as dist
from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import (DynamicRendezvousHandler,
                                                                   RendezvousTimeout)
T = int(sys.argv[1])
timeout = datetime.timedelta(seconds=float(sys.argv[2]))
master = dist.TCPStore("127.0.0.1", 0, None, True, timeout, wait_for_workers=False)
t_setup = time.monotonic()
handlers = []
for i in range(T):
    store = dist.TCPStore("127.0.0.1", master.port, None, False, timeout)
    backend = C10dRendezvousBackend(store, "sim")
    handlers.append(DynamicRendezvousHandler.from_backend("sim", store, backend, T, T,
                                                          RendezvousTimeout(join=timeout)))
setup_ms = (time.monotonic() - t_setup) * 1000
gate, results, errors, done_at = threading.Event(), [None] * T, [], [0.0] * T
def run(i):
    gate.wait()
    try:
        _, rank, world_size = handlers[i].next_rendezvous()
        results[i] = (rank, world_size)
    except Exception as e:
        errors.append(repr(e))
    done_at[i] = time.monotonic()
threads = [threading.Thread(target=run, args=(i,)) for i in range(T)]
for t in threads:
    t.start()
t0 = time.monotonic()
gate.set()
for t in threads:
    t.join()
ok = not errors and sorted(r[0] for r in results) == list(range(T)) and {r[1] for r in results} == {T}
print(json.dumps({"status": "ok" if ok else "error", "threads": T, "torch": torch.__version__,
                  "join_ms": (max(done_at) - t0) * 1000, "setup_ms": setup_ms,
                  "error": errors[0] if errors else ("wrong ranks" if not ok else None)}), flush=True)
os._exit(0)  # the handlers' keep-alive threads would keep the process
"""

WORKER = """#!/bin/sh
# A worker of rendezvous_bench.py: says it runs (one line, one write: atomic on a FIFO), exits 0.
printf '%s %s\\n' "$RANK" "$WORLD_SIZE" > "$RDZV_BENCH_FIFO"
"""


class TimedOut(Exception):
    """A run that did not finish in its time: a failure for ddprun, a note for the anchor."""


def say(text=""):
    print(text, flush=True)


def fmt(x):
    return f"{x:.3g}" if abs(x) < 100 else f"{x:.0f}"


def free_port():
    """A port the kernel says is free now on 127.0.0.1 (closed again: the first agent binds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mem_available_mib():
    for line in open("/proc/meminfo"):
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return float("inf")


def tail(f, limit=1500):
    f.seek(0)
    return f.read().decode(errors="replace")[-limit:]


# ---------------------------------------------------------------------------- rdzv_startup

def agent_cmd(kind, a, n, port, worker):
    endpoint = f"127.0.0.1:{port}"
    if kind == "ddprun":
        return [a.rdzv_ddprun, "--nnodes", f"{n}:{n}", "--rdzv-backend", "c10d",
                "--rdzv-endpoint", endpoint, "--rdzv-id", "bench", "--nproc-per-node", "1",
                "--no-python", worker]
    return [a.rdzv_anchor, "--nnodes", f"{n}:{n}", "--rdzv_backend", "c10d",
            "--rdzv_endpoint", endpoint, "--rdzv_id", "bench", "--nproc_per_node", "1",
            "--monitor_interval", "0.1", "--no_python", worker]


class Run:
    """One rdzv_startup run: when the workers were all up, and how the agents ended."""

    def __init__(self, up_ms, exit_ms, exit_problem):
        self.up_ms = up_ms                # spawn of the first agent -> the Nth worker's line
        self.exit_ms = exit_ms            # spawn of the first agent -> the last agent reaped
        self.exit_problem = exit_problem  # None when every agent exited 0 in time


def startup_once(kind, a, n, timeout_s, exit_timeout_s, tmp):
    """One run of N agents, after --rdzv-pause seconds (so that the last run's exits settle).

    Raises TimedOut when the workers are not all up in timeout_s, BenchError when an agent
    fails before that or the workers' ranks are wrong. Once the workers are all up, the agents get
    exit_timeout_s to exit (then they are killed); an agent that exits non-zero or too late is
    recorded in the returned Run's exit_problem.
    """
    run_dir = Path(tempfile.mkdtemp(prefix=f"{kind}-{n}-", dir=tmp))
    worker = run_dir / "worker.sh"
    worker.write_text(WORKER)
    worker.chmod(0o755)
    fifo = run_dir / "running.fifo"
    os.mkfifo(fifo)
    # O_RDWR: the FIFO always has a writer (us), so select() never reports EOF between workers.
    fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "TORCHELASTIC_"))}
    env["RDZV_BENCH_FIFO"] = str(fifo)
    env.setdefault("OMP_NUM_THREADS", "1")  # torchrun warns when it sets this itself
    port = free_port()
    cmd = agent_cmd(kind, a, n, port, str(worker))
    time.sleep(a.rdzv_pause)
    procs, errs = [], []
    try:
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        for i in range(n):
            err = open(run_dir / f"agent{i}.stderr", "w+b")
            errs.append(err)
            procs.append(subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=err,
                                          start_new_session=True))
        lines, pending = [], b""
        t_up = None
        while len(lines) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimedOut(f"timed out after {timeout_s:g} s with {len(lines)}/{n} "
                                    f"workers running")
            ready, _, _ = select.select([fd], [], [], min(0.1, left))
            if ready:
                data = os.read(fd, 65536)
                t_read = time.monotonic()
                pending += data
                *done, pending = pending.split(b"\n")
                lines += done
                if len(lines) >= n:
                    t_up = t_read
            elif all(p.poll() is not None for p in procs):
                break  # every agent is gone and not every worker ran
            else:
                bad = [(i, p.returncode) for i, p in enumerate(procs)
                       if p.poll() is not None and p.returncode != 0]
                if bad:
                    i, rc = bad[0]
                    raise BenchError(f"agent {i} exited {rc} after {len(lines)}/{n} workers ran: "
                                     f"{' '.join(cmd)}\n{tail(errs[i])}")
        if t_up is None:
            i = next((i for i, p in enumerate(procs) if p.returncode != 0), 0)
            raise BenchError(f"every agent exited with {len(lines)}/{n} workers run (agent {i} "
                             f"exited {procs[i].returncode}): {' '.join(cmd)}\n{tail(errs[i])}")

        # Let the agents finish: blocking waits under one watchdog, as launcher_bench.reap does.
        timed_out = threading.Event()

        def watchdog_fired():
            timed_out.set()
            kill_all_nowait(procs)

        watchdog = threading.Timer(exit_timeout_s, watchdog_fired)
        watchdog.start()
        try:
            for p in procs:
                p.wait()
        finally:
            watchdog.cancel()
        t_exit = time.monotonic()
        check_ranks(lines, n, cmd)
        problem = None
        killed = [i for i, p in enumerate(procs) if timed_out.is_set() and p.returncode == -signal.SIGKILL]
        bad = [i for i, p in enumerate(procs) if p.returncode != 0 and i not in killed]
        if killed or bad:
            i = (bad or killed)[0]
            parts = []
            if killed:
                parts.append(f"{len(killed)} of {n} agents had not exited {exit_timeout_s:g} s after "
                             f"the last worker started (killed)")
            if bad:
                parts.append(f"{len(bad)} of {n} exited non-zero")
            problem = (f"{'; '.join(parts)}; agent {i}: exit {procs[i].returncode}: "
                       f"{' '.join(cmd)}\n{tail(errs[i])}")
        return Run((t_up - t0) * 1000, (t_exit - t0) * 1000, problem)
    finally:
        kill_all(procs)
        os.close(fd)
        for err in errs:
            err.close()


def kill_all_nowait(procs):
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def check_ranks(lines, n, cmd):
    ranks, sizes = [], set()
    for line in lines:
        parts = line.decode(errors="replace").split()
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise BenchError(f"a worker wrote {line!r}, not 'RANK WORLD_SIZE': {' '.join(cmd)}")
        ranks.append(int(parts[0]))
        sizes.add(int(parts[1]))
    if sorted(ranks) != list(range(n)) or sizes != {n}:
        raise BenchError(f"workers' RANKs {sorted(ranks)} / WORLD_SIZEs {sorted(sizes)}, expected "
                         f"0..{n - 1} once each / {n}: {' '.join(cmd)}")


def anchor_plan(a, n, gave_up_at):
    """(run the anchor at n?, why not)."""
    if a.rdzv_only == "ddprun":
        return False, "skipped (--rdzv-only ddprun)"
    if n > a.rdzv_anchor_max_nodes:
        return False, f"skipped (--rdzv-anchor-max-nodes {a.rdzv_anchor_max_nodes})"
    if gave_up_at is not None:
        return False, f"skipped (timed out at {gave_up_at} agents)"
    if mem_available_mib() < n * ANCHOR_AGENT_MIB:
        return False, (f"skipped ({n} agents need ~{n * ANCHOR_AGENT_MIB / 1024:.0f} GiB, "
                       f"MemAvailable {mem_available_mib() / 1024:.1f} GiB)")
    return True, None


def side_line(label, runs, repeat):
    """'ddprun: all workers running: median ...' for the runs that got every worker up."""
    ups = [r.up_ms for r in runs]
    clean = [r.exit_ms for r in runs if r.exit_problem is None]
    exits = (f"all agents exited 0: median {fmt(statistics.median(clean))} ms"
             if clean else "no run where all agents exited 0")
    bad = len(runs) - len(clean)
    return (f"    {label}: all workers running: median {fmt(statistics.median(ups))}  "
            f"min {fmt(min(ups))}  max {fmt(max(ups))} ms  n={len(ups)}/{repeat}; {exits}"
            + (f"; {bad} run(s) with an agent that did not exit 0" if bad else ""))


def bench_startup(a, tmp):
    counts = a.rdzv_nodes
    say(f"# rdzv_startup: N agents x 1 worker on 127.0.0.1, --nnodes N:N, c10d; time from spawning "
        f"the first agent until the Nth worker wrote its line into a FIFO; median of "
        f"{a.rdzv_repeat} (ddprun and anchor alternating, {a.rdzv_pause:g} s rest before each); "
        f"then every agent must exit 0 within {a.rdzv_exit_timeout:g} s (ddprun); anchor timeout "
        f"{a.rdzv_anchor_timeout:g} s, anchor skipped above {a.rdzv_anchor_max_nodes} agents")
    for _ in range(a.rdzv_warmup):  # page cache, Python bytecode cache; not recorded
        for kind in ("ddprun", "anchor"):
            if a.rdzv_only not in (None, kind) or (kind == "anchor" and not anchor_plan(a, counts[0], None)[0]):
                continue
            timeout = a.rdzv_timeout if kind == "ddprun" else a.rdzv_anchor_timeout
            try:
                r = startup_once(kind, a, counts[0], timeout, a.rdzv_exit_timeout if kind == "ddprun"
                                 else timeout, tmp)
                if r.exit_problem:
                    say(f"    warm-up of {kind}: {r.exit_problem.splitlines()[0]}")
            except (TimedOut, BenchError) as e:
                say(f"    warm-up of {kind} failed: {str(e).splitlines()[0]}")
    rows, failed, anchor_gave_up = [], False, None
    for n in counts:
        ddp, anc, ddp_error = [], [], None
        run_anchor, anchor_note = anchor_plan(a, n, anchor_gave_up)
        run_ddprun = a.rdzv_only != "anchor"
        for run in range(a.rdzv_repeat):
            if run_ddprun:
                try:
                    ddp.append(startup_once("ddprun", a, n, a.rdzv_timeout, a.rdzv_exit_timeout, tmp))
                except (TimedOut, BenchError) as e:  # no point going on at this count
                    ddp_error, run_ddprun = f"(run {run + 1} of {a.rdzv_repeat}) {e}", False
            if run_anchor:
                try:
                    anc.append(startup_once("anchor", a, n, a.rdzv_anchor_timeout,
                                            a.rdzv_anchor_timeout, tmp))
                except TimedOut as e:
                    anchor_note, run_anchor, anchor_gave_up = str(e), False, n
                except BenchError as e:
                    anchor_note, run_anchor = f"FAILED: {e}", False
        name = f"rdzv_startup_{n}nodes"
        goal = (f" (goal >= {STARTUP_GOAL_RATIO:g}x at {STARTUP_GOAL_NODES} agents)"
                if n == STARTUP_GOAL_NODES else "")
        d = statistics.median(r.up_ms for r in ddp) if ddp else None
        t = statistics.median(r.up_ms for r in anc) if anc else None
        if d is None:
            ddp_text = "skipped (--rdzv-only anchor)" if a.rdzv_only == "anchor" else "FAILED"
        else:
            ddp_text = f"median {fmt(d)} ms"
        if t is not None:
            anc_text = f"median {fmt(t)} ms"
        else:
            anc_text = (anchor_note or "no run").splitlines()[0]
        if d is not None and t is not None:
            ratio = f"{t / d:.1f}x"
        elif d is not None and (anchor_note or "").startswith("timed out after"):
            ratio = f"> {a.rdzv_anchor_timeout * 1000 / d:.0f}x"
        else:
            ratio = "n/a"
        say(f"{name}  ddprun {ddp_text}  torchrun-anchor {anc_text}  ratio {ratio}{goal}")
        rows.append((n, d, t, anchor_note))
        if ddp:
            say(side_line("ddprun", ddp, a.rdzv_repeat))
        if anc:
            say(side_line("torchrun-anchor", anc, a.rdzv_repeat))
        problems = [r.exit_problem for r in ddp if r.exit_problem]
        if problems:
            failed = True
            say(f"    ddprun EXIT FAILURE in {len(problems)} of {len(ddp)} runs; the first: {problems[0]}")
        if ddp_error:
            failed = True
            say(f"    ddprun FAILED {ddp_error}")
        anchor_problems = [r.exit_problem for r in anc if r.exit_problem]
        if anchor_problems:
            say(f"    torchrun-anchor: an agent did not exit 0 in {len(anchor_problems)} runs; the "
                f"first: {anchor_problems[0]}")
        if anchor_note and anchor_note.startswith("FAILED"):
            say(f"    torchrun-anchor {anchor_note}")
    say(f"    table (medians, ms):  {'N':>3}  {'ddprun':>9}  {'torchrun-anchor':>16}  ratio")
    for n, d, t, note in rows:
        ds = fmt(d) if d is not None else ("skipped" if a.rdzv_only == "anchor" else "FAILED")
        ts = fmt(t) if t is not None else next(
            (w for w in ("skipped", "timed out", "FAILED") if (note or "").startswith(w)), "-")
        rs = f"{t / d:.1f}x" if d and t else "n/a"
        say(f"                          {n:>3}  {ds:>9}  {ts:>16}  {rs}")
    goal_row = next((r for r in rows if r[0] == STARTUP_GOAL_NODES), None)
    if goal_row and goal_row[1] and goal_row[2]:
        r = goal_row[2] / goal_row[1]
        say(f"    goal: >= {STARTUP_GOAL_RATIO:g}x at {STARTUP_GOAL_NODES} agents: "
            f"{'met' if r >= STARTUP_GOAL_RATIO else 'NOT met'} ({r:.1f}x)")
    elif goal_row:
        say(f"    goal: >= {STARTUP_GOAL_RATIO:g}x at {STARTUP_GOAL_NODES} agents: not measured")
    if failed:
        raise BenchError("a ddprun run failed or an agent did not exit 0 (see above)")


# ---------------------------------------------------------------------------- rdzv_sim_1024

def bench_sim(a, tmp):
    t = a.rdzv_sim_threads
    cmd = [a.rdzv_sim, "--threads", str(t), "--join-timeout", f"{a.rdzv_timeout:g}"]
    say(f"# rdzv_sim_{t}: {' '.join(['build/bin/rendezvous_sim', *cmd[1:]])}: {t} threads, each "
        f"an agent with its own store connection (connected and check_job() done before timing), "
        f"join one round with MIN = MAX = {t}; time from releasing them until the last has its "
        f"decision; median of {a.rdzv_sim_runs}")
    results = []
    for _ in range(a.rdzv_sim_runs):
        try:
            results.append(run_sim(cmd, a.rdzv_timeout + 60, "rendezvous_sim"))
        except TimedOut as e:
            raise BenchError(f"rendezvous_sim {e}: {' '.join(cmd)}")
    join = [r["join_ms"] for r in results]
    d = statistics.median(join)
    met = "met" if d < SIM_GOAL_S * 1000 else "NOT met"
    say(f"rdzv_sim_{t}  ddprun median {fmt(d)} ms  (no in-process anchor)  "
        f"goal < {SIM_GOAL_S:g} s: {met}")
    say(f"    join: median {fmt(d)}  min {fmt(min(join))}  max {fmt(max(join))} ms  n={len(join)}")
    for r in results:
        say(f"    run: join {fmt(r['join_ms'])} ms (first decision {fmt(r['first_decision_ms'])}, "
            f"median {fmt(r['median_decision_ms'])}); setup (connect + check_job) "
            f"{fmt(r['setup_ms'])} ms; round {r['round']}, world size {r['world_size']}")
    if a.rdzv_sim_anchor_threads > 0:
        sim_reference(a, tmp)


def run_sim(cmd, timeout_s, what):
    """Runs a simulation program once; returns its JSON line (status ok) or raises BenchError."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise TimedOut(f"timed out after {timeout_s:g} s")
    line = (done.stdout.strip().splitlines() or [""])[-1]
    try:
        r = json.loads(line)
    except json.JSONDecodeError:
        raise BenchError(f"{what} failed (exit {done.returncode}): {' '.join(cmd)}\n"
                         f"{done.stdout[-1000:]}{done.stderr[-2000:]}")
    if r.get("status") != "ok":
        raise BenchError(f"{what}: {r.get('error')} ({line}) {done.stderr[-1000:]}")
    return r


def sim_reference(a, tmp):
    """PyTorch's DynamicRendezvousHandler with T threads against rendezvous_sim with T threads.

    Only at a small T: PyTorch's handler took 3.9 s for 64 threads here and had not finished 256 in
    240 s, so the 1024 round has no same-run anchor.
    """
    t = a.rdzv_sim_anchor_threads
    script = Path(tmp) / "pytorch_rendezvous_sim.py"
    script.write_text(PYTORCH_SIM)
    ddp_cmd = [a.rdzv_sim, "--threads", str(t), "--join-timeout", f"{a.rdzv_timeout:g}"]
    pt_cmd = [a.rdzv_python, str(script), str(t), f"{a.rdzv_anchor_timeout:g}"]
    ddp, pt, note = [], [], None
    for _ in range(a.rdzv_sim_anchor_runs):  # alternating
        try:
            ddp.append(run_sim(ddp_cmd, a.rdzv_timeout + 60, "rendezvous_sim")["join_ms"])
        except TimedOut as e:
            raise BenchError(f"rendezvous_sim --threads {t}: {e}")
        if note is None:
            try:
                pt.append(run_sim(pt_cmd, a.rdzv_anchor_timeout + 60, "pytorch sim")["join_ms"])
            except (TimedOut, BenchError) as e:
                note = str(e)
    d = statistics.median(ddp)
    if pt:
        p = statistics.median(pt)
        say(f"rdzv_sim_{t}_reference  ddprun median {fmt(d)} ms  pytorch-c10d-handler median "
            f"{fmt(p)} ms  ratio {p / d:.1f}x  (same round at {t} agents; no goal)")
    else:
        say(f"rdzv_sim_{t}_reference  ddprun median {fmt(d)} ms  pytorch-c10d-handler {note}")
    say(f"    pytorch: {a.rdzv_python} <script> {t}: torch 1.13's DynamicRendezvousHandler + "
        f"C10dRendezvousBackend, {t} threads, one TCPStore client each, MIN = MAX = {t}; "
        f"runs: {', '.join(fmt(x) for x in pt) or 'none'} ms; ddprun runs: "
        f"{', '.join(fmt(x) for x in ddp)} ms")


BENCHMARKS = {
    "rdzv_startup": bench_startup,
    "rdzv_sim_1024": bench_sim,
}


# ---------------------------------------------------------------------------- main

def int_list(text):
    return [int(x) for x in text.split(",") if x.strip()]


def main():
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("filter", nargs="?", default="", help="substring of benchmark names to run")
    p.add_argument("--rdzv-ddprun", "--ddprun", default=env("DDPRUN", str(REPO / "build/bin/ddprun")))
    p.add_argument("--rdzv-anchor", "--anchor",
                   default=env("TORCHRUN_ANCHOR", str(REPO.parent / "shared/tools/torchrun-anchor")))
    p.add_argument("--rdzv-sim", "--sim", default=env("RENDEZVOUS_SIM", str(REPO / "build/bin/rendezvous_sim")),
                   help="bench/rendezvous_sim.cpp's binary")
    p.add_argument("--rdzv-nodes", type=int_list, default=[2, 8, 32, 64],
                   help="rdzv_startup: agent counts, comma-separated")
    p.add_argument("--rdzv-repeat", "--repeat", type=int, default=3,
                   help="rdzv_startup: runs of each launcher per count (median)")
    p.add_argument("--rdzv-warmup", type=int, default=1,
                   help="rdzv_startup: unrecorded runs of each at the smallest count first")
    p.add_argument("--rdzv-timeout", type=float, default=120.0,
                   help="seconds a ddprun run (or a rendezvous_sim round) may take")
    p.add_argument("--rdzv-pause", type=float, default=0.5,
                   help="rdzv_startup: seconds of rest before each run")
    p.add_argument("--rdzv-exit-timeout", type=float, default=30.0,
                   help="rdzv_startup: seconds ddprun's agents have to exit once the workers ran")
    p.add_argument("--rdzv-anchor-timeout", type=float, default=600.0,
                   help="seconds an anchor run may take; reported, not a failure")
    p.add_argument("--rdzv-anchor-max-nodes", type=int, default=64,
                   help="rdzv_startup: run the anchor only up to this many agents")
    p.add_argument("--rdzv-only", choices=["ddprun", "anchor"],
                   help="rdzv_startup: run only this side (no ratio)")
    p.add_argument("--rdzv-sim-threads", type=int, default=1024,
                   help="rdzv_sim: simulated agents (the benchmark's name says 1024 regardless)")
    p.add_argument("--rdzv-sim-runs", type=int, default=3)
    p.add_argument("--rdzv-sim-anchor-threads", type=int, default=64,
                   help="rdzv_sim: also run PyTorch's c10d handler and rendezvous_sim with this many\n"
                        "threads, as a same-run reference (0: skip; 1024 is far too slow for PyTorch)")
    p.add_argument("--rdzv-sim-anchor-runs", type=int, default=1)
    p.add_argument("--rdzv-python", default=env("RDZV_PYTHON", "/usr/bin/python3"),
                   help="a python3 with torch, for the rdzv_sim reference")
    p.add_argument("--list", action="store_true", help="print the benchmark names and exit")
    a = p.parse_args()

    def tools_for(chosen):
        tools = []
        if "rdzv_startup" in chosen:
            if a.rdzv_only != "anchor":
                tools.append(a.rdzv_ddprun)
            if a.rdzv_only != "ddprun" and a.rdzv_anchor_max_nodes >= min(a.rdzv_nodes, default=0):
                tools.append(a.rdzv_anchor)
        if "rdzv_sim_1024" in chosen:
            tools.append(a.rdzv_sim)
        return tools

    return run_harness(BENCHMARKS, a, tools_for, tmp_prefix="ddprun-rdzv-bench-")

if __name__ == "__main__":
    sys.exit(main())

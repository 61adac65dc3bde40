#!/usr/bin/python3
"""Store benchmarks: ddprun-store against PyTorch 1.13's own TCPStore server, same run, same load.

Usage: bench/store_bench.py [FILTER] [options]      (stdlib only; see docs/performance.md)

FILTER is a substring of a benchmark name (store_throughput, store_barrier, store_idle_memory,
store_attack_memory); empty runs all of them. The load comes from build/bin/store_load (bench/store_load.cpp), which
speaks the legacy (1.13) wire dialect, so the very same bytes drive both servers. torch is used
only to start PyTorch's server, in a separate `python3` process (--store-python, /usr/bin/python3).

Every benchmark prints one summary line per comparison,
    <name>  ddprun X  pytorch Y  ratio Zx (goal ...)
followed by indented details. Every option starts with --store- so that scripts/bench.sh can hand
it here and the launcher options to bench/launcher_bench.py. Exits non-zero if a benchmark cannot
run or ddprun-store fails one; PyTorch timing out is reported, not a failure.

store_attack_memory has no anchor: it measures what one hostile peer makes ddprun-store hold
(build/bin/store_attack, bench/store_attack.cpp), each attack against a fresh store whose address
space is capped (--store-attack-as-mib), so that a store without bounds fails fast instead of taking
the machine. Give --store-server an older build to see what the attacks did before.
"""
import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import BenchError, run_harness

REPO = Path(__file__).resolve().parent.parent

# PyTorch's server: a TCPStore master that no client waits for, on a port the kernel picks, with
# RLIMIT_NOFILE raised to the hard limit first (16384 connections need more than 1024 fds).
PYTORCH_SERVER = r"""
import datetime, os, resource, signal, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
import torch
import torch.distributed as dist
store = dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=3600),
                      wait_for_workers=False)
port_file = sys.argv[1]
with open(port_file + ".tmp", "w") as f:
    f.write(f"{store.port}\n")
os.rename(port_file + ".tmp", port_file)
print(f"pytorch {torch.__version__} TCPStore serving on 127.0.0.1:{store.port}", file=sys.stderr)
while True:
    signal.pause()  # SIGTERM ends the process
"""


# ---------------------------------------------------------------------------- servers

class Server:
    """One store server process, started fresh; its port is read from a port file."""

    def __init__(self, kind, args, tmp, extra=(), address_space_mib=None):
        self.kind = kind
        port_file = Path(tmp) / f"{kind}-{time.monotonic_ns()}.port"
        if kind == "ddprun":
            cmd = [args.store_server, "--host", "127.0.0.1", "--port", "0", "--port-file", str(port_file),
                   *extra]
        else:
            script = Path(tmp) / "pytorch_store_server.py"
            script.write_text(PYTORCH_SERVER)
            cmd = [args.store_python, str(script), str(port_file)]
        self.cmd = cmd
        self.log = tempfile.TemporaryFile(dir=tmp)
        def cap_address_space():
            limit = address_space_mib << 20
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     preexec_fn=cap_address_space if address_space_mib else None)
        deadline = time.monotonic() + 60
        while not port_file.exists():
            if self.proc.poll() is not None:
                raise BenchError(f"{kind} server exited {self.proc.returncode} before listening: "
                                 f"{' '.join(cmd)}\n{self.output()}")
            if time.monotonic() > deadline:
                self.stop()
                raise BenchError(f"{kind} server not listening after 60 s: {' '.join(cmd)}")
            time.sleep(0.02)
        self.port = int(port_file.read_text())
        self.pid = self.proc.pid

    def output(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-2000:]

    def check_alive(self):
        if self.proc.poll() is not None:
            raise BenchError(f"{self.kind} server died (exit {self.proc.returncode}):\n{self.output()}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


class Servers:
    """Both servers, started together, stopped on exit."""

    def __init__(self, args, tmp):
        self.args, self.tmp, self.running = args, tmp, {}

    def __enter__(self):
        for kind in ("ddprun", "pytorch"):
            self.running[kind] = Server(kind, self.args, self.tmp)
        return self.running

    def __exit__(self, *exc):
        for server in self.running.values():
            server.stop()


# ---------------------------------------------------------------------------- the generator

def set_affinity(pid, cpus):
    """Pins every thread of process `pid` to `cpus`."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            os.sched_setaffinity(int(task.name), cpus)
        except (ProcessLookupError, FileNotFoundError):
            pass  # the thread ended meanwhile


def load(args, server, mode, extra, timeout_s, cpu=None):
    """Runs store_load once against `server`; returns its JSON result.

    With `cpu`, the server and the generator both run pinned to that one CPU for this run.
    """
    server.check_alive()
    cmd = [args.store_load, mode, "--port", str(server.port), "--server-pid", str(server.pid),
           "--source-addrs", str(args.store_source_addrs), *map(str, extra)]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu), *cmd]
        set_affinity(server.pid, {cpu})
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s + 60)
    except subprocess.TimeoutExpired:
        raise BenchError(f"store_load did not end in {timeout_s + 60:g} s: {' '.join(cmd)}")
    finally:
        if cpu is not None:
            set_affinity(server.pid, os.sched_getaffinity(0))
    line = done.stdout.strip().splitlines()[-1:] or [""]
    try:
        result = json.loads(line[0])
    except json.JSONDecodeError:
        raise BenchError(f"store_load failed (exit {done.returncode}): {' '.join(cmd)}\n"
                         f"{done.stdout[-1000:]}{done.stderr[-2000:]}")
    result["cmd"] = cmd
    server.check_alive()
    time.sleep(args.store_pause)  # let the server finish closing the connections
    return result


def show_cmd(result):
    generic = [("--port", "PORT"), ("--server-pid", "PID")]
    cmd = ["build/bin/store_load" if c.endswith("/store_load") else c for c in result["cmd"]]
    for flag, placeholder in generic:
        if flag in cmd:
            cmd[cmd.index(flag) + 1] = placeholder
    return " ".join(cmd)


# ---------------------------------------------------------------------------- reporting

def fmt(x):
    if x is None:
        return "?"
    return f"{x:.3g}" if abs(x) < 100 else f"{x:.0f}"


def ratio(ddp, pt):
    return f"{ddp / pt:.1f}x" if ddp and pt else "n/a"


def say(line):
    print(line, flush=True)


# ---------------------------------------------------------------------------- the benchmarks

def other_cpu(r):
    """CPU% (of one CPU) that neither the server nor the generator used during a run."""
    keys = ("machine_busy_pct", "server_cpu_pct", "generator_cpu_pct")
    if any(r.get(k) is None for k in keys):
        return None
    return r["machine_busy_pct"] - r["server_cpu_pct"] - r["generator_cpu_pct"]


def bench_throughput(a, tmp):
    """Closed-loop SET+GET / ADD mix at 1, 64, 1024 connections."""
    say(f"# store_throughput: closed loop, each connection alternates [SET k + GET k'] and "
        f"[ADD c 1] (1/3 each of SET, GET, ADD; a 1.13 SET has no reply, so it rides with the GET); "
        f"{a.store_warmup:g} s warm-up then {a.store_duration:g} s measured; ops/s counts "
        f"every request; latency is per round trip")
    failed = False
    with Servers(a, tmp) as servers:
        for conns in a.store_conns:
            extra = ["--connections", conns, "--duration", a.store_duration, "--warmup",
                     a.store_warmup, "--timeout", a.store_timeout]
            if a.store_threads != 1:
                extra += ["--threads", a.store_threads]
            # One connection ping-pongs between two processes; on this VM a wake-up of the other
            # (idle) CPU costs ~35 us, so unpinned runs flip between ~7 and ~75 us per round
            # trip depending on where the scheduler puts the two. Pinned, it is stable.
            cpu = a.store_single_cpu if conns == 1 and a.store_single_cpu >= 0 else None
            runs = {"ddprun": [], "pytorch": []}
            for _ in range(a.store_runs):  # alternate, so drift on the machine hits both alike
                for kind in runs:
                    runs[kind].append(load(a, servers[kind], "throughput", extra, a.store_timeout,
                                           cpu))
            picked = {}
            for kind, rs in runs.items():  # the run with the median throughput
                rs.sort(key=lambda r: r.get("ops_per_s") or 0)
                picked[kind] = rs[len(rs) // 2]
            d, p = picked["ddprun"], picked["pytorch"]
            goal = "  (goal >= 3x)" if conns == 64 else ""

            def part(r):
                if r["status"] != "ok":
                    return f"{r['status'].upper()} ({r.get('error', '')})"
                return (f"{r['ops_per_s']:.0f} ops/s (p50 {fmt(r['p50_ms'])} ms "
                        f"p99 {fmt(r['p99_ms'])} ms)")
            pinned = f"  [server and generator pinned to CPU {cpu}]" if cpu is not None else ""
            say(f"store_throughput_{conns}conn  ddprun {part(d)}  pytorch {part(p)}  "
                f"ratio {ratio(d.get('ops_per_s'), p.get('ops_per_s'))}{goal}{pinned}")
            for kind, r in picked.items():
                all_runs = ", ".join(f"{x.get('ops_per_s') or 0:.0f}" for x in runs[kind])
                say(f"    {kind}: {r.get('round_trips_per_s', 0):.0f} round trips/s; "
                    f"SET+GET p50 {fmt(r.get('setget_p50_ms'))} p99 {fmt(r.get('setget_p99_ms'))} ms; "
                    f"ADD p50 {fmt(r.get('add_p50_ms'))} p99 {fmt(r.get('add_p99_ms'))} ms; "
                    f"max {fmt(r.get('max_ms'))} ms; CPU: server {fmt(r.get('server_cpu_pct'))}%, "
                    f"generator {fmt(r.get('generator_cpu_pct'))}%, whole machine "
                    f"{fmt(r.get('machine_busy_pct'))}% of {100 * (r.get('cpus') or 0)}% "
                    f"(steal {fmt(r.get('machine_steal_pct'))}%); ops/s of runs: {all_runs}")
            say(f"    command: {show_cmd(d)}")
            # Pinned runs leave the other CPUs to whoever wants them; only their own CPU counts.
            spare = 100 * ((os.cpu_count() or 1) - 1) if cpu is not None else 0
            noisy = [f"{kind} {o:.0f}%" for kind, rs in runs.items() for o in map(other_cpu, rs)
                     if o is not None and o > spare + 15]
            if noisy:
                say(f"    WARNING: other processes took CPU during runs ({', '.join(noisy)}); "
                    f"these numbers are not from a quiet machine")
            if d["status"] != "ok":
                failed = True
    if failed:
        raise BenchError("ddprun-store did not complete a throughput run")


def bench_barrier(a, tmp):
    """N connections ADD a counter then WAIT on a release key; released when the counter is N."""
    say(f"# store_barrier: N connections each ADD a counter then WAIT on a release key; the "
        f"generator SETs the key when an ADD reply says N. Times from the first connect; at most "
        f"{a.store_connect_window} connections connecting or awaiting their ADD reply at once; "
        f"timeout {a.store_timeout:g} s. Fresh servers for each N")
    failed = False
    for n in a.store_barrier_conns:
        extra = ["--connections", n, "--timeout", a.store_timeout,
                 "--connect-window", a.store_connect_window]
        results = {}
        for kind in ("ddprun", "pytorch"):
            server = Server(kind, a, tmp)
            try:
                results[kind] = load(a, server, "barrier", extra, a.store_timeout)
            finally:
                server.stop()
        d, p = results["ddprun"], results["pytorch"]

        def part(r):
            if r["status"] != "ok":
                return (f"{r['status'].upper()} after {r['stopped_ms'] / 1000:.3g} s (connected "
                        f"{r['connected']}/{n}, ADD replies {r['add_replies']}, woken {r['woken']}"
                        f"{', ' + r['error'] if r.get('error') else ''})")
            return (f"{r['total_ms'] / 1000:.3g} s (last ADD -> last wake "
                    f"{fmt(r['wake_after_last_add_ms'])} ms)")
        d_total = d["total_ms"] if d["status"] == "ok" else None
        p_total = p["total_ms"] if p["status"] == "ok" else None
        r = ratio(p_total, d_total)
        if d_total and p["status"] == "timeout":  # PyTorch took longer than it was given
            r = f"> {p['stopped_ms'] / d_total:.1f}x"
        goal = "  (goal ddprun < 2 s)" if n == 16384 else ""
        say(f"store_barrier_{n}conn  ddprun {part(d)}  pytorch {part(p)}  ratio {r}{goal}")
        for kind, r in results.items():
            say(f"    {kind}: all connected {fmt(r.get('all_connected_ms'))} ms, last ADD reply "
                f"{fmt(r.get('last_add_ms'))} ms, release SET {fmt(r.get('release_ms'))} ms, last "
                f"wake {fmt(r.get('last_wake_ms'))} ms; listen drops {r.get('listen_drops')}")
        say(f"    command: {show_cmd(d)}")
        if d["status"] != "ok":
            failed = True
    if failed:
        raise BenchError("ddprun-store did not complete a barrier")


def bench_idle(a, tmp):
    """Server RSS growth per idle connection."""
    n = a.store_idle_conns
    say(f"# store_idle_memory: {n} connections each send GETNUMKEYS, read the reply, then stay "
        f"idle; server VmRSS (/proc/PID/status) before and {a.store_settle:g} s after; fresh servers")
    extra = ["--connections", n, "--timeout", a.store_timeout, "--settle", a.store_settle,
             "--connect-window", a.store_connect_window]
    results = {}
    for kind in ("ddprun", "pytorch"):
        server = Server(kind, a, tmp)
        try:
            time.sleep(a.store_settle)  # PyTorch: let the interpreter settle after import torch
            results[kind] = load(a, server, "idle", extra, a.store_timeout)
        finally:
            server.stop()
    d, p = results["ddprun"], results["pytorch"]

    def part(r):
        if r["status"] != "ok":
            return f"{r['status'].upper()} ({r.get('replies')}/{n} replies; {r.get('error', '')})"
        return (f"{r['kib_per_conn']:.2f} KiB/conn (RSS {r['rss_before_kib'] / 1024:.1f} -> "
                f"{r['rss_after_kib'] / 1024:.1f} MiB)")
    say(f"store_idle_memory_{n}conn  ddprun {part(d)}  pytorch {part(p)}  (goal ddprun <= 16 KiB)")
    for kind, r in results.items():
        say(f"    {kind}: threads {r.get('threads_before')} -> {r.get('threads_after')}; "
            f"opened in {fmt(r.get('open_ms'))} ms")
    say(f"    command: {show_cmd(d)}")
    if d["status"] != "ok":
        raise BenchError("ddprun-store did not serve every idle connection")


# (attack, what it asks of the store), in the order they run; store_attack.cpp has the defaults.
ATTACKS = [
    ("multi_get", "one MULTI_GET naming an 8 MiB value 400 times (a 3.2 GB reply asked for)"),
    ("unread_gets", "64 pipelined GETs of an 8 MiB value, never read (512 MiB of replies)"),
    ("unread_watch", "a legacy WATCH_KEY watcher that never reads, while its key is SET 32 times to "
                     "8 MiB values (512 MiB of pushes)"),
    ("auth_flood", "VALIDATE then 1 MiB of AUTH_CHALLENGE bytes, never read, before authenticating "
                   "(40 MiB of nonces asked for)"),
]


def bench_attack(a, tmp):
    """Store RSS while one peer attacks: each attack against a fresh store."""
    say(f"# store_attack_memory: one attacker per fresh ddprun-store (address space capped at "
        f"{a.store_attack_as_mib} MiB); the store's VmRSS before, its peak while the attacker sends "
        f"and holds on unread for {a.store_attack_settle:g} s (max of VmHWM and VmRSS sampled every "
        f"10 ms), and what it holds once a fresh connection's PING is answered (by then it has run "
        f"all the attacker sent); whether it closed the attacker")
    token = Path(tmp) / "attack.token"
    token.write_text("bench-token\n")
    failed = []
    for attack, what in ATTACKS:
        extra = ["--token-file", str(token)] if attack == "auth_flood" else []
        server = Server("ddprun", a, tmp, extra, address_space_mib=a.store_attack_as_mib)
        try:
            server.check_alive()
            cmd = [a.store_attack, attack, "--port", str(server.port), "--server-pid", str(server.pid),
                   "--settle", str(a.store_attack_settle)]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            try:
                r = json.loads((done.stdout.strip().splitlines() or [""])[-1])
            except json.JSONDecodeError:
                raise BenchError(f"store_attack failed (exit {done.returncode}): {' '.join(cmd)}\n"
                                 f"{done.stdout[-1000:]}{done.stderr[-2000:]}")
            died = server.proc.poll() is not None
        finally:
            server.stop()
        mib = lambda kib: f"{kib / 1024:.1f}" if kib is not None and kib >= 0 else "?"
        peak = max(r["vm_hwm_kib"], r["rss_max_sampled_kib"])
        alive = r["store_alive"] and not died
        say(f"store_attack_{attack}  ddprun RSS {mib(r['rss_before_kib'])} MiB -> peak {mib(peak)} MiB, "
            f"held {mib(r['rss_during_kib']) if alive else 'n/a'} MiB; attacker "
            f"{'closed' if r['attacker_closed'] else 'kept'}; "
            f"{'serves a fresh client' if alive else 'STORE DIED'}")
        say(f"    {what}; sent {r['sent_bytes']} bytes in {r['attack_ms']:.0f} ms")
        say(f"    command: build/bin/store_attack {attack} --port PORT --server-pid PID "
            f"--settle {a.store_attack_settle:g}")
        if not alive:
            failed.append(attack)
    if failed:
        raise BenchError(f"the store died under {', '.join(failed)}")


BENCHMARKS = {
    "store_throughput": bench_throughput,
    "store_barrier": bench_barrier,
    "store_idle_memory": bench_idle,
    "store_attack_memory": bench_attack,
}


# ---------------------------------------------------------------------------- main

def int_list(text):
    return [int(x) for x in text.split(",") if x.strip()]


def main():
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("filter", nargs="?", default="", help="substring of benchmark names to run")
    p.add_argument("--store-server", default=env("DDPRUN_STORE", str(REPO / "build/bin/ddprun-store")),
                   help="the ddprun-store binary")
    p.add_argument("--store-load", default=env("STORE_LOAD", str(REPO / "build/bin/store_load")),
                   help="the load generator (bench/store_load.cpp)")
    p.add_argument("--store-attack", default=env("STORE_ATTACK"),
                   help="the attacker (bench/store_attack.cpp); default: store_attack beside --store-load")
    p.add_argument("--store-attack-settle", type=float, default=1.0,
                   help="attack: seconds the attacker holds on, unread, before the store is measured")
    p.add_argument("--store-attack-as-mib", type=int, default=4096,
                   help="attack: the store's address space cap (RLIMIT_AS), MiB")
    p.add_argument("--store-python", default=env("STORE_PYTHON", "/usr/bin/python3"),
                   help="a python3 with torch, for PyTorch's server")
    p.add_argument("--store-duration", type=float, default=3.0, help="measured seconds per point")
    p.add_argument("--store-warmup", type=float, default=0.5, help="unmeasured seconds before")
    p.add_argument("--store-runs", type=int, default=3, help="runs per throughput point (median)")
    p.add_argument("--store-conns", type=int_list, default=[1, 64, 1024],
                   help="throughput connection counts, comma-separated")
    p.add_argument("--store-threads", type=int, default=1,
                   help="throughput: generator threads (each with its share of the connections)")
    p.add_argument("--store-single-cpu", type=int, default=0,
                   help="pin server and generator to this CPU for 1-connection throughput; -1 = no")
    p.add_argument("--store-barrier-conns", type=int_list, default=[4096, 16384],
                   help="barrier sizes, comma-separated")
    p.add_argument("--store-idle-conns", type=int, default=10000)
    p.add_argument("--store-timeout", type=float, default=60.0,
                   help="a generator run gives up and reports after this many seconds")
    p.add_argument("--store-connect-window", type=int, default=1024,
                   help="connections connecting or awaiting their first reply at once; 0 = all")
    p.add_argument("--store-source-addrs", type=int, default=16,
                   help="spread client sockets over 127.0.0.1..127.0.0.N")
    p.add_argument("--store-settle", type=float, default=0.5, help="idle: seconds before RSS reads")
    p.add_argument("--store-pause", type=float, default=0.3, help="seconds between generator runs")
    p.add_argument("--list", action="store_true", help="print the benchmark names and exit")
    a = p.parse_args()
    a.store_attack = a.store_attack or str(Path(a.store_load).parent / "store_attack")

    def tools(chosen):
        needed = [a.store_server]
        if any(name != "store_attack_memory" for name in chosen):
            needed += [a.store_load, a.store_python]
        if "store_attack_memory" in chosen:
            needed.append(a.store_attack)
        return needed
    return run_harness(BENCHMARKS, a, tools, tmp_prefix="ddprun-store-bench-")

if __name__ == "__main__":
    sys.exit(main())

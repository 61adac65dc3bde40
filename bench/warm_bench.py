#!/usr/bin/python3
"""Warm start benchmarks (issue 26, ddprun --preload): ddprun with warm interpreters, ddprun cold and
torchrun-anchor, interleaved in one run; and the memory that each warm design costs.

Usage: bench/warm_bench.py [FILTER] [options]       (stdlib only; see docs/performance.md)

  warm_restart_4x            4 local PyTorch gloo ranks (bench/warm_restart_worker.py), --max-restarts 1;
                             on attempt 0 rank 1 fails --fail-after s after its all_reduce (so that
                             the next attempt's warm interpreters have finished importing). Measured:
                             max over ranks (first all_reduce of attempt 1) - the failure's time.
                               warm:   ddprun --preload torch --nproc-per-node 4 --max-restarts 1 W
                               cold:   ddprun --nproc-per-node 4 --max-restarts 1 W
                               anchor: torchrun-anchor --standalone --nproc_per_node 4 --max_restarts 1
                                       --monitor_interval 0.1 W
                             ddprun is static single-node (its default) with --master-port 0 (a free
                             port, so that a busy 29500 cannot fail a run).
  warm_first_start_2node     2 agents x 2 workers on 127.0.0.1, started at the same moment, elastic
                             c10d rendezvous --nnodes 2:3 --rdzv-conf last_call_timeout=L (the round
                             closes L s after the second join: a wait the warm interpreters can import
                             in). Measured: the agents' start -> max over the 4 ranks (first all_reduce).
  warm_first_start_2node_static  the same, static: --nnodes 2 --node-rank 0/1 --master-addr 127.0.0.1
                             --master-port P (the round closes as soon as both agents are in).
  warm_memory                /usr/bin/python3 + import torch, no launcher: (i) one warm interpreter per
                             rank (RSS, PSS, USS from /proc/PID/smaps_rollup), alone and 4 at once;
                             (ii) one template per node that forks 4 children: the template's RSS and
                             each child's USS/PSS right after fork and after a small torch workload,
                             the fork()'s time; and the threads `import torch` starts.

The three variants take turns within each repetition (--runs, default 5); every line of numbers is
a median with min/max/n below it. ratio = the other variant's median / warm's median. ddprun's own
moments (the failure seen, the restart, the workers started) come from its --events file.
"""
import argparse
import inspect
import json
import os
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import BenchError, kill_all, run_harness

REPO = Path(__file__).resolve().parent.parent
WORKER = REPO / "bench" / "warm_restart_worker.py"
VARIANTS = ("warm", "cold", "anchor")
LABEL = {"warm": "ddprun --preload torch", "cold": "ddprun cold", "anchor": "torchrun-anchor"}


def say(text=""):
    print(text, flush=True)


def loadavg():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def free_port():
    """A port the kernel says is free now on 127.0.0.1 (closed again: the agent binds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(a, folder):
    """The launchers' environment: no PET_/TORCHELASTIC_ leftovers, the worker's folder, and the
    Python that has torch for ddprun's workers (torchrun-anchor runs them with its own, the same)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "TORCHELASTIC_"))}
    env["WARM_BENCH_DIR"] = str(folder)
    env["PYTHON_EXEC"] = a.python
    env.setdefault("OMP_NUM_THREADS", "1")  # what both launchers set for nproc > 1 (they warn otherwise)
    return env


def tail(path, limit=2000):
    try:
        return Path(path).read_text(errors="replace")[-limit:]
    except OSError:
        return ""


def run_agents(cmds, env, folder, timeout_s):
    """Starts every command at once (each in its own session, output to a log); waits for all.
    Returns the wall-clock time just before the first start; BenchError when one fails or times out."""
    procs, logs = [], []
    try:
        t0 = time.time()
        for i, cmd in enumerate(cmds):
            log = open(folder / f"agent{i}.log", "wb")
            logs.append(log)
            procs.append(subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.monotonic() + timeout_s
        for i, proc in enumerate(procs):
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise BenchError(f"agent {i} still running after {timeout_s:g} s: {' '.join(cmds[i])}\n"
                                 f"{tail(folder / f'agent{i}.log')}")
            if proc.returncode != 0:
                raise BenchError(f"agent {i} exited {proc.returncode}: {' '.join(cmds[i])}\n"
                                 f"{tail(folder / f'agent{i}.log')}")
        return t0
    finally:
        kill_all(procs)
        for log in logs:
            log.close()


def read_ups(folder, attempt, world):
    ups = []
    for rank in range(world):
        path = folder / f"up.{attempt}.{rank}"
        if not path.exists():
            raise BenchError(f"rank {rank} of attempt {attempt} wrote no {path.name}")
        ups.append(json.loads(path.read_text()))
    return ups


def read_events(paths):
    events = []
    for path in paths:
        if path.exists():
            events += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return events


def preload_supported(ddprun):
    out = subprocess.run([ddprun, "--help"], capture_output=True, text=True).stdout
    return "--preload" in out


def median(values):
    return statistics.median(values) if values else float("nan")


def ms(x):
    return f"{x * 1000:.0f}" if x == x else "-"


def ratio(a, b):
    return f"{a / b:.1f}x" if b and a == a and b == b else "-"


def detail(label, runs, key):
    values = [r[key] for r in runs]
    return f"    {label:24s} min {ms(min(values))} ms  max {ms(max(values))} ms  n {len(values)}"


def phases_line(label, runs, keys):
    """Medians of the moments of one variant, each as seconds after the reference (ms)."""
    parts = []
    for key, name in keys:
        values = [r[key] for r in runs if r.get(key) is not None]
        if values:
            parts.append(f"{name} +{ms(median(values))}")
    return f"    {label:24s} " + "  ".join(parts) + " ms (medians)"


def variants_of(a):
    chosen = [v for v in a.variants.split(",") if v]
    unknown = [v for v in chosen if v not in VARIANTS]
    if unknown or not chosen:
        raise BenchError(f"--variants: {','.join(unknown) or '(none)'}: choose from {','.join(VARIANTS)}")
    if "warm" in chosen and not preload_supported(a.ddprun):
        raise BenchError(f"{a.ddprun} has no --preload (issue 26 not built yet); "
                         f"--variants cold,anchor runs the others")
    return chosen


def warm_options(a, variant):
    return ["--preload", a.preload] + shlex.split(a.warm_args) if variant == "warm" else []


def report(name, runs, goals, what):
    """The headline line (medians, ratios against warm), then min/max/n per variant."""
    med = {v: median([r["t"] for r in rs]) for v, rs in runs.items() if rs}
    parts = [f"{LABEL[v]} median {ms(m)} ms" for v, m in med.items()]
    ratios = []
    if "warm" in med:
        for other, goal in goals:
            if other in med:
                ratios.append(f"{other}/warm {ratio(med[other], med['warm'])}"
                              + (f" (goal >= {goal:g}x)" if goal else ""))
    say(f"{name}  {'  '.join(parts)}  " + ("ratio " + "  ".join(ratios) if ratios else "") + f"  [{what}]")
    for v, rs in runs.items():
        if rs:
            say(detail(LABEL[v], rs, "t"))


# ---------------------------------------------------------------------------- warm_restart

def restart_once(a, variant, tmp, index):
    folder = Path(tempfile.mkdtemp(prefix=f"restart-{variant}-{index}-", dir=tmp))
    env = clean_env(a, folder)
    env["WARM_BENCH_FAIL_RANK"] = "1"
    env["WARM_BENCH_FAIL_AFTER"] = f"{a.fail_after:g}"
    events = folder / "events.jsonl"
    if variant == "anchor":
        cmd = [a.anchor, "--standalone", "--nproc_per_node", "4", "--max_restarts", "1",
               "--monitor_interval", f"{a.monitor_interval:g}", str(WORKER)]
    else:
        cmd = [a.ddprun] + warm_options(a, variant) + \
              ["--nproc-per-node", "4", "--max-restarts", "1", "--master-port", "0",
               "--events", str(events), str(WORKER)]
    run_agents([cmd], env, folder, a.run_timeout)
    fail_path = folder / "fail"
    if not fail_path.exists():
        raise BenchError(f"{variant}: rank 1 never failed: {' '.join(cmd)}\n{tail(folder / 'agent0.log')}")
    failed = float(fail_path.read_text())
    ups = read_ups(folder, 1, 4)
    run = {"t": max(u["allreduce"] for u in ups) - failed,
           "script": max(u["start"] for u in ups) - failed,
           "import": max(u["import"] for u in ups) - failed,
           "init": max(u["init"] for u in ups) - failed,
           "preloaded": sum(bool(u["preloaded"]) for u in ups),
           "preloaded0": sum(bool(u["preloaded"]) for u in read_ups(folder, 0, 4))}
    evs = read_events([events])
    seen = [e["time"] for e in evs if e.get("event") == "worker_exited" and e.get("failed")]
    restart = [e["time"] for e in evs if e.get("event") == "restart"]
    started = [e["time"] for e in evs if e.get("event") == "worker_started" and e.get("attempt") == 1]
    if seen:
        run["seen"] = min(seen) - failed
    if restart:
        run["restart"] = min(restart) - failed
    if len(started) == 4:
        run["started"] = max(started) - failed
    run["folder"] = folder
    return run


def alternate(a, variants, once):
    """a.runs rounds, each running every variant once (a.pause before each): {variant: [once(variant, index)]}."""
    runs = {v: [] for v in variants}
    for index in range(a.runs):
        for variant in variants:
            time.sleep(a.pause)
            runs[variant].append(once(variant, index))
    return runs


def bench_restart(a, tmp):
    variants = variants_of(a)
    say(f"# warm_restart_4x: 4 ranks, rank 1 fails {a.fail_after:g} s after attempt 0's all_reduce; "
        f"failure -> last rank's first all_reduce of attempt 1; {a.runs} runs, variants alternating "
        f"({', '.join(LABEL[v] for v in variants)}); anchor --monitor_interval {a.monitor_interval:g}; "
        f"loadavg {loadavg()}")
    runs = alternate(a, variants, lambda variant, index: restart_once(a, variant, tmp, index))
    report("warm_restart_4x", runs, [("anchor", 10), ("cold", 3)], f"loadavg {loadavg()}")
    keys = [("seen", "exit seen"), ("restart", "restart"), ("started", "workers started"),
            ("script", "script's 1st line"), ("import", "torch imported"), ("init", "process group"),
            ("t", "all_reduce")]
    say("    from the failure (time.time() in rank 1 before its os._exit):")
    for v, rs in runs.items():
        say(phases_line(LABEL[v], rs, keys))
    for v, rs in runs.items():
        total = 4 * len(rs)
        say(f"    {LABEL[v]:24s} torch already imported at the script's 1st line: attempt 0 "
            f"{sum(r['preloaded0'] for r in rs)}/{total}, attempt 1 {sum(r['preloaded'] for r in rs)}/{total} ranks")


# ---------------------------------------------------------------------------- warm_first_start_2node

def first_start_once(a, variant, static, tmp, index):
    folder = Path(tempfile.mkdtemp(prefix=f"start-{'static' if static else 'c10d'}-{variant}-{index}-", dir=tmp))
    env = clean_env(a, folder)
    port = free_port()
    cmds = []
    for node in range(2):
        events = folder / f"events{node}.jsonl"
        if variant == "anchor":
            if static:
                shape = ["--nnodes", "2", "--node_rank", str(node), "--master_addr", "127.0.0.1",
                         "--master_port", str(port)]
            else:
                shape = ["--nnodes", "2:3", "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}",
                         "--rdzv_id", f"warm{index}", "--rdzv_conf", f"last_call_timeout={a.last_call:g}"]
            cmds.append([a.anchor] + shape + ["--nproc_per_node", "2", "--monitor_interval",
                                              f"{a.monitor_interval:g}", str(WORKER)])
        else:
            if static:
                shape = ["--nnodes", "2", "--node-rank", str(node), "--master-addr", "127.0.0.1",
                         "--master-port", str(port)]
            else:
                shape = ["--nnodes", "2:3", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
                         "--rdzv-id", f"warm{index}", "--rdzv-conf", f"last_call_timeout={a.last_call:g}"]
            cmds.append([a.ddprun] + warm_options(a, variant) + shape +
                        ["--nproc-per-node", "2", "--events", str(events), str(WORKER)])
    t0 = run_agents(cmds, env, folder, a.run_timeout)
    ups = read_ups(folder, 0, 4)
    if any(u["world"] != 4 for u in ups):
        raise BenchError(f"{variant}: world sizes {[u['world'] for u in ups]}, expected 4")
    run = {"t": max(u["allreduce"] for u in ups) - t0,
           "script": max(u["start"] for u in ups) - t0,
           "import": max(u["import"] for u in ups) - t0,
           "init": max(u["init"] for u in ups) - t0,
           "preloaded": sum(bool(u["preloaded"]) for u in ups)}
    evs = read_events([folder / "events0.jsonl", folder / "events1.jsonl"])
    started = [e["time"] for e in evs if e.get("event") == "worker_started"]
    if len(started) == 4:
        run["started"] = max(started) - t0
    return run


def bench_first_start(a, tmp, static):
    variants = variants_of(a)
    name = "warm_first_start_2node_static" if static else "warm_first_start_2node"
    shape = ("static --nnodes 2, --master-addr 127.0.0.1" if static else
             f"c10d --nnodes 2:3, last_call_timeout={a.last_call:g}")
    say(f"# {name}: 2 agents x 2 ranks on 127.0.0.1, {shape}; both agents started at once -> last rank's "
        f"first all_reduce; {a.runs} runs, variants alternating ({', '.join(LABEL[v] for v in variants)}); "
        f"loadavg {loadavg()}")
    runs = alternate(a, variants, lambda variant, index: first_start_once(a, variant, static, tmp, index))
    report(name, runs, [("anchor", None), ("cold", None)], f"loadavg {loadavg()}")
    keys = [("started", "workers started"), ("script", "script's 1st line"), ("import", "torch imported"),
            ("init", "process group"), ("t", "all_reduce")]
    say("    from the agents' start:")
    for v, rs in runs.items():
        say(phases_line(LABEL[v], rs, keys))
    for v, rs in runs.items():
        say(f"    {LABEL[v]:24s} torch already imported at the script's 1st line: "
            f"{sum(r['preloaded'] for r in rs)}/{4 * len(rs)} ranks")


# ---------------------------------------------------------------------------- warm_memory

def smaps(pid):
    m = {}
    for line in open(f"/proc/{pid}/smaps_rollup"):
        parts = line.split()
        if len(parts) == 3 and parts[2] == "kB":
            m[parts[0].rstrip(":")] = int(parts[1])
    return {"rss": m["Rss"], "pss": m["Pss"], "uss": m["Private_Clean"] + m["Private_Dirty"]}


# What every measuring subprocess shares: smaps() above, by its source.
MEM_COMMON = inspect.getsource(smaps) + """\
import gc, json, os, sys, time
def ntask():
    return len(os.listdir("/proc/self/task"))
def mem(pid="self"):
    return smaps(pid)
def workload(seed):
    import torch
    torch.manual_seed(seed)
    x = torch.randn(256, 256)
    for _ in range(20):
        x = x @ x
        x = x / x.norm()
    gc.collect()
    return float(x.sum())
"""

# (i): an interpreter that imported torch and waits (on stdin), as a warm interpreter does.
MEM_WAIT = MEM_COMMON + """\
before = ntask()
import torch
print(json.dumps({"threads_before": before, "threads_after_import": ntask()}), flush=True)
sys.stdin.read()
"""

# (ii): a template that imported torch and forks 4 children; it measures them from outside, all alive.
MEM_FORK = MEM_COMMON + """\
n = int(sys.argv[1])
out = {"threads_before": ntask()}
import torch
out["threads_after_import"] = ntask()
out["template_alone"] = mem()
children, fork_ms = [], []
for i in range(n):
    up_r, up_w = os.pipe()
    go_r, go_w = os.pipe()
    t = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.close(up_r); os.close(go_w)
        os.write(up_w, b"f")
        os.read(go_r, 1)
        value = workload(i)
        os.write(up_w, b"w")
        os.read(go_r, 1)
        os._exit(0 if value == value else 1)
    fork_ms.append((time.perf_counter() - t) * 1000)
    os.close(up_w); os.close(go_r)
    children.append((pid, up_r, go_w))
for pid, up_r, go_w in children:
    assert os.read(up_r, 1) == b"f"
out["fork_ms"] = fork_ms
out["after_fork"] = [mem(pid) for pid, _, _ in children]
out["template_with_children"] = mem()
for pid, up_r, go_w in children:
    os.write(go_w, b"g")
for pid, up_r, go_w in children:
    assert os.read(up_r, 1) == b"w"
out["after_workload"] = [mem(pid) for pid, _, _ in children]
out["template_after_workload"] = mem()
for pid, up_r, go_w in children:
    os.write(go_w, b"x")
out["exits"] = [os.waitpid(pid, 0)[1] for pid, _, _ in children]
print(json.dumps(out), flush=True)
"""

# A cold worker for comparison: its own import of torch, then the same workload.
MEM_COLD = MEM_COMMON + """\
import torch
workload(int(sys.argv[1]))
print("done", flush=True)
sys.stdin.read()
"""

# Threads: does import torch start any; does the first parallel op (OMP_NUM_THREADS as set).
MEM_THREADS = MEM_COMMON + """\
before = ntask()
import torch
after = ntask()
x = torch.randn(512, 512); (x @ x).sum()
print(json.dumps({"before": before, "after_import": after, "after_matmul": ntask(),
                  "num_threads": torch.get_num_threads()}), flush=True)
"""


def mib(kb):
    return f"{kb / 1024:.1f}"


def mem_line(m):
    return f"RSS {mib(m['rss'])}  PSS {mib(m['pss'])}  USS {mib(m['uss'])} MiB"


def spawn_waiting(a, script, args=(), ready_line=True):
    proc = subprocess.Popen([a.python, str(script), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env=dict(os.environ), text=True)
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        raise BenchError(f"{script.name} exited before it was ready ({proc.wait()})")
    return proc, line


def bench_memory(a, tmp):
    tmp = Path(tmp)
    n = 4
    scripts = {}
    for name, text in (("wait", MEM_WAIT), ("fork", MEM_FORK), ("cold", MEM_COLD), ("threads", MEM_THREADS)):
        scripts[name] = tmp / f"mem_{name}.py"
        scripts[name].write_text(text)
    say(f"# warm_memory: {a.python}, import torch; {n} ranks; from /proc/PID/smaps_rollup "
        f"(USS = Private_Clean + Private_Dirty); OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '(unset)')}; "
        f"loadavg {loadavg()}")

    # (i) one warm interpreter per rank: one alone, then n at once.
    procs = []
    try:
        proc, line = spawn_waiting(a, scripts["wait"])
        procs.append(proc)
        threads = json.loads(line)
        alone = smaps(proc.pid)
        for _ in range(n - 1):
            procs.append(spawn_waiting(a, scripts["wait"])[0])
        together = [smaps(p.pid) for p in procs]
    finally:
        for p in procs:
            p.stdin.close()
            p.wait()
    say(f"warm_memory_per_rank  one warm interpreter alone: {mem_line(alone)}")
    say(f"    {n} at once, each: PSS {mib(median([m['pss'] for m in together]))}  USS "
        f"{mib(median([m['uss'] for m in together]))} MiB (medians); all {n}: PSS "
        f"{mib(sum(m['pss'] for m in together))} MiB, USS {mib(sum(m['uss'] for m in together))} MiB")
    say(f"    threads: {threads['threads_before']} before import torch, {threads['threads_after_import']} after")

    # (ii) one template that forks n children.
    out = subprocess.run([a.python, str(scripts["fork"]), str(n)], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise BenchError(f"fork probe exited {out.returncode}:\n{out.stderr[-2000:]}")
    f = json.loads(out.stdout.strip().splitlines()[-1])
    if any(f["exits"]):
        raise BenchError(f"a forked child failed its workload: wait statuses {f['exits']}")
    say(f"warm_memory_fork_template  template alone: {mem_line(f['template_alone'])};  fork() "
        f"median {median(f['fork_ms']):.2f} ms (min {min(f['fork_ms']):.2f}, max {max(f['fork_ms']):.2f}, n {n})")
    for key, what in (("after_fork", "right after fork"), ("after_workload", "after the workload + gc.collect()")):
        kids = f[key]
        say(f"    {n} children {what}, each: RSS {mib(median([m['rss'] for m in kids]))}  PSS "
            f"{mib(median([m['pss'] for m in kids]))}  USS {mib(median([m['uss'] for m in kids]))} MiB (medians); "
            f"all {n}: USS {mib(sum(m['uss'] for m in kids))} MiB")
    say(f"    template with {n} children: {mem_line(f['template_with_children'])}; after their workload: "
        f"{mem_line(f['template_after_workload'])}")
    say(f"    threads in the template: {f['threads_before']} before import torch, {f['threads_after_import']} after")

    # For comparison: n cold workers that imported torch themselves and ran the same workload.
    procs = []
    try:
        for i in range(n):
            procs.append(spawn_waiting(a, scripts["cold"], [str(i)])[0])
        cold = [smaps(p.pid) for p in procs]
    finally:
        for p in procs:
            p.stdin.close()
            p.wait()
    say(f"warm_memory_cold_workers  {n} cold workers after the same workload, each: PSS "
        f"{mib(median([m['pss'] for m in cold]))}  USS {mib(median([m['uss'] for m in cold]))} MiB (medians); "
        f"all {n}: PSS {mib(sum(m['pss'] for m in cold))} MiB, USS {mib(sum(m['uss'] for m in cold))} MiB")

    # Threads: import torch, then a first parallel op, as the environment sets OMP_NUM_THREADS and at 2.
    for omp in (os.environ.get("OMP_NUM_THREADS"), "2"):
        env = dict(os.environ)
        if omp is None:
            env.pop("OMP_NUM_THREADS", None)
        else:
            env["OMP_NUM_THREADS"] = omp
        out = subprocess.run([a.python, str(scripts["threads"])], capture_output=True, text=True, env=env, timeout=120)
        if out.returncode != 0:
            raise BenchError(f"thread probe exited {out.returncode}:\n{out.stderr[-2000:]}")
        t = json.loads(out.stdout.strip().splitlines()[-1])
        say(f"warm_memory_threads  OMP_NUM_THREADS={omp or '(unset)'}: tasks {t['before']} before import torch, "
            f"{t['after_import']} after, {t['after_matmul']} after a 512x512 matmul "
            f"(torch.get_num_threads() {t['num_threads']})")
    say(f"    loadavg {loadavg()}")


BENCHMARKS = {
    "warm_restart_4x": bench_restart,
    "warm_first_start_2node": lambda a, tmp: bench_first_start(a, tmp, static=False),
    "warm_first_start_2node_static": lambda a, tmp: bench_first_start(a, tmp, static=True),
    "warm_memory": bench_memory,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("filter", nargs="?", default="")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--ddprun", default=str(REPO / "build/bin/ddprun"))
    parser.add_argument("--anchor", default=str(REPO.parent / "shared/tools/torchrun-anchor"))
    parser.add_argument("--python", default="/usr/bin/python3", help="the workers' Python (has torch)")
    parser.add_argument("--variants", default="warm,cold,anchor", help="which of warm,cold,anchor to run")
    parser.add_argument("--preload", default="torch", help="the modules of --preload (warm)")
    parser.add_argument("--warm-args", default="", help="more ddprun options for the warm variant only, "
                        "e.g. '--stdin none'")
    parser.add_argument("--runs", type=int, default=5, help="repetitions; the variants take turns in each")
    parser.add_argument("--fail-after", type=float, default=8, help="warm_restart: rank 1 fails after S s")
    parser.add_argument("--last-call", type=float, default=3, help="warm_first_start_2node: last_call_timeout")
    parser.add_argument("--monitor-interval", type=float, default=0.1, help="torchrun-anchor's --monitor_interval")
    parser.add_argument("--pause", type=float, default=1, help="seconds of rest before each run")
    parser.add_argument("--run-timeout", type=float, default=180)
    parser.add_argument("--keep", action="store_true", help="keep the runs' folders (logs, events) in /tmp")
    a = parser.parse_args()
    # Agents run in sessions of their own: a SIGTERM to the harness unwinds it, so that run_agents kills them.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    LABEL["warm"] = " ".join(["ddprun --preload", a.preload] + ([a.warm_args] if a.warm_args else []))

    def tools(chosen):
        needed = [a.python]
        if any(name != "warm_memory" for name in chosen):
            variants = a.variants.split(",")
            if "warm" in variants or "cold" in variants:
                needed.append(a.ddprun)
            if "anchor" in variants:
                needed.append(a.anchor)
        return needed

    if a.keep and not a.list:
        folder = tempfile.mkdtemp(prefix="warm_bench_")
        print(f"# runs kept in {folder}", flush=True)
        return run_harness({k: (lambda f: lambda a_: f(a_, folder))(f) for k, f in BENCHMARKS.items()}, a, tools)
    return run_harness(BENCHMARKS, a, tools, tmp_prefix="warm_bench_")


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Launcher benchmarks: ddprun against torchrun (the anchor), both measured in the same run.

Usage: bench/launcher_bench.py [FILTER] [options]       (stdlib only; see docs/performance.md)

FILTER is a substring of a benchmark name (launch, restart, cpu, status); empty runs all of them.
Every benchmark prints one summary line per comparison,
    <name>  ddprun median X ms  torchrun-anchor median Y ms  ratio Zx (goal ...)
followed by indented detail lines (min/max/n). Exits non-zero if any launcher run fails.
"""
import argparse
import fcntl
import os
import pty
import signal
import stat
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
import zipfile
from pathlib import Path

from bench_common import BenchError, run_harness

REPO = Path(__file__).resolve().parent.parent
NPROC = 8  # workers per launch, in every benchmark


# ---------------------------------------------------------------------------- running launchers

def start(cmd, env=None, stderr=None):
    # Own session, so a launcher that hangs can be killed together with its workers.
    return subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=stderr, start_new_session=True)


def reap(proc, cmd, timeout_s):
    """Waits for the launcher; kills it and its workers if it outlives timeout_s.

    A blocking wait plus a watchdog timer, because Popen.wait(timeout=...) polls with sleeps of
    up to 50 ms, which would be most of what we measure.
    """
    timed_out = threading.Event()

    def kill():
        timed_out.set()
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # it ended just now

    watchdog = threading.Timer(timeout_s, kill)
    watchdog.start()
    try:
        proc.wait()
    finally:
        watchdog.cancel()
    if timed_out.is_set():
        raise BenchError(f"timed out after {timeout_s:g} s: {' '.join(map(str, cmd))}")


def failure(proc, cmd, stderr_file, why):
    stderr_file.seek(0)
    tail = stderr_file.read().decode(errors="replace")[-2000:]
    return BenchError(f"{why} (exit {proc.returncode}): {' '.join(map(str, cmd))}\n{tail}")


def timed_run(cmd, env=None, timeout_s=120):
    """Wall time (ns) of one launcher run, from spawn to reaped exit."""
    with tempfile.TemporaryFile() as err:  # a file, not a pipe: nothing to drain while timing
        t0 = time.perf_counter_ns()
        proc = start(cmd, env, err)
        reap(proc, cmd, timeout_s)
        t1 = time.perf_counter_ns()
        if proc.returncode != 0:
            raise failure(proc, cmd, err, "launcher failed")
    return t1 - t0


# ---------------------------------------------------------------------------- /proc helpers

def thread_cpu_ns(pid, tid):
    """CPU time of one thread, in ns (its schedstat's first field)."""
    return int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])


def proc_cpu_ns(pid):
    """CPU time of a process's live threads, in ns: sum of the first schedstat field per task.

    Precise (ns, not clock ticks), but misses threads that already exited; cpu_ticks_ms() is the
    coarse cross-check that includes them.
    """
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            pass  # the thread ended between listing and reading
    return total


def cpu_ticks_ms(pid):
    """utime + stime of the whole process (dead threads included), in ms; clock-tick resolution."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")


def descendants(root):
    """{pid: comm} of every process below root (children of children too)."""
    children, comm = {}, {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        head, tail = stat.rsplit(")", 1)
        pid, ppid = int(d.name), int(tail.split()[1])
        comm[pid] = head.split("(", 1)[1]
        children.setdefault(ppid, []).append(pid)
    found, todo = {}, list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found[pid] = comm[pid]
        todo += children.get(pid, [])
    return found


# ---------------------------------------------------------------------------- reporting

def ms(ns):
    return ns / 1e6


def fmt(x):
    return f"{x:.3g}" if x < 100 else f"{x:.0f}"


def summary(name, ddp_ms, anchor_ms, anchor_label, goal):
    """The one-line comparison; ratio = anchor median / ddprun median."""
    d, a = statistics.median(ddp_ms), statistics.median(anchor_ms)
    ratio = a / d if d > 0 else float("inf")
    print(f"{name}  ddprun median {fmt(d)} ms  {anchor_label} median {fmt(a)} ms  "
          f"ratio {ratio:.1f}x ({goal})", flush=True)


def details(label, xs, extra=""):
    print(f"    {label}: median {fmt(statistics.median(xs))}  min {fmt(min(xs))}  "
          f"max {fmt(max(xs))} ms  n={len(xs)}{extra}", flush=True)


def interleaved(n_ddp, n_anchor, run_ddp, run_anchor):
    """Alternates the two launchers, so slow drift on a shared machine hits both alike."""
    ddp, anchor = [], []
    for i in range(max(n_ddp, n_anchor)):
        if i < n_ddp:
            ddp.append(run_ddp())
        if i < n_anchor:
            anchor.append(run_anchor())
    return ddp, anchor


# ---------------------------------------------------------------------------- the benchmarks

def bench_launch(a):
    """Launch and tear down 8 workers of /bin/true."""
    ddp = [a.ddprun, "--standalone", "--nproc-per-node", str(NPROC), "--no-python", "/bin/true"]
    anc = [a.anchor, "--standalone", "--monitor_interval", "0.05", "--nproc_per_node", str(NPROC),
           "--no_python", "/bin/true"]
    for _ in range(a.warmup):  # page cache, Python bytecode cache
        timed_run(ddp), timed_run(anc)
    d, t = interleaved(a.launch_runs, a.launch_anchor_runs,
                       lambda: ms(timed_run(ddp)), lambda: ms(timed_run(anc)))
    summary("launch_teardown_8x_true", d, t, "torchrun-anchor", "goal >= 50x")
    details("ddprun", d), details("torchrun-anchor", t)


def bench_launch_pty(a):
    """Launch and tear down 8 workers of /bin/true, each on two ptys (--pty on) or on pipes."""
    base = [a.ddprun, "--standalone", "--nproc-per-node", str(NPROC)]
    pty = base + ["--pty", "on", "--no-python", "/bin/true"]
    pipes = base + ["--pty", "off", "--no-python", "/bin/true"]
    anc = [a.anchor, "--standalone", "--monitor_interval", "0.05", "--nproc_per_node", str(NPROC),
           "--no_python", "/bin/true"]
    for _ in range(a.warmup):
        timed_run(pty), timed_run(pipes), timed_run(anc)
    p, t, o = [], [], []
    for i in range(max(a.launch_runs, a.launch_anchor_runs)):  # all three take turns
        if i < a.launch_runs:
            p.append(ms(timed_run(pty)))
            o.append(ms(timed_run(pipes)))
        if i < a.launch_anchor_runs:
            t.append(ms(timed_run(anc)))
    summary("launch_teardown_8x_true_pty", p, t, "torchrun-anchor", "goal >= 50x")
    cost = statistics.median(p) / statistics.median(o)
    print(f"    pty/pipes: ddprun --pty on median {fmt(statistics.median(p))} ms, --pty off "
          f"{fmt(statistics.median(o))} ms, ratio {cost:.2f}", flush=True)
    details("ddprun --pty on", p), details("ddprun --pty off", o), details("torchrun-anchor", t)


def restart_once(cmd, env=None):
    """Latency (ms) from local rank 3's crash until the last of the 8 new workers is running."""
    with tempfile.TemporaryDirectory(prefix="ddprun-restart-") as tmp:
        env = dict(env or os.environ, RESTART_PROBE_DIR=tmp)
        timed_run(cmd, env)
        stamps = Path(tmp)
        try:
            crash = int((stamps / "crash.ns").read_text())
            starts = [int((stamps / f"start.{r}.ns").read_text()) for r in range(NPROC)]
        except FileNotFoundError as e:
            raise BenchError(f"restart probe left no {Path(e.filename).name}: "
                             f"did {cmd[0]} restart the group? ({' '.join(cmd)})")
    return ms(max(starts) - crash)


def bench_restart(a):
    """Restart latency: one of 8 workers exits 1 on the first attempt, --max-restarts 1."""
    ddp = [a.ddprun, "--standalone", "--nproc-per-node", str(NPROC), "--max-restarts", "1",
           "--no-python", a.probe]
    anc = [a.anchor, "--standalone", "--max_restarts", "1", "--monitor_interval", "0.1",
           "--nproc_per_node", str(NPROC), "--no_python", a.probe]
    if not os.access(a.probe, os.X_OK):
        raise BenchError(f"no restart probe at {a.probe} (build it: scripts/build.sh)")
    for _ in range(a.warmup):
        restart_once(ddp), restart_once(anc)
    d, t = interleaved(a.restart_runs, a.restart_anchor_runs,
                       lambda: restart_once(ddp), lambda: restart_once(anc))
    summary("restart_latency_8x", d, t, "torchrun-anchor(mi=0.1)", "goal ddprun <= 30 ms")
    details("ddprun", d), details("torchrun-anchor(mi=0.1)", t)


def bench_baseline(a):
    """ddprun against an earlier ddprun (--baseline), launch and restart, interleaved in one run:
    what a change to the launcher costs. Also this ddprun without its job cgroup (DDPRUN_JOB_CGROUP=off)."""
    if not a.baseline:
        print("baseline: skipped (give --baseline PATH_TO_AN_EARLIER_DDPRUN)", flush=True)
        return
    def launch_cmd(binary):
        return [binary, "--standalone", "--nproc-per-node", str(NPROC), "--no-python", "/bin/true"]
    def restart_cmd(binary):
        return [binary, "--standalone", "--nproc-per-node", str(NPROC), "--max-restarts", "1", "--no-python",
                a.probe]
    no_cgroup = dict(os.environ, DDPRUN_JOB_CGROUP="off")
    for _ in range(a.warmup):
        timed_run(launch_cmd(a.ddprun)), timed_run(launch_cmd(a.baseline))
    runs = []
    for _ in range(a.baseline_runs):
        runs.append((ms(timed_run(launch_cmd(a.ddprun))), ms(timed_run(launch_cmd(a.baseline))),
                     ms(timed_run(launch_cmd(a.ddprun), no_cgroup))))
    now, before, off = (list(x) for x in zip(*runs))
    print(f"launch_8x_true_vs_baseline  ddprun median {fmt(statistics.median(now))} ms  baseline median "
          f"{fmt(statistics.median(before))} ms  difference {statistics.median(now) - statistics.median(before):+.2f} ms  "
          f"(without the job cgroup {fmt(statistics.median(off))} ms)", flush=True)
    details("ddprun", now), details("baseline", before), details("ddprun, DDPRUN_JOB_CGROUP=off", off)
    d, b = interleaved(a.restart_runs, a.restart_runs, lambda: restart_once(restart_cmd(a.ddprun)),
                       lambda: restart_once(restart_cmd(a.baseline)))
    print(f"restart_8x_vs_baseline  ddprun median {fmt(statistics.median(d))} ms  baseline median "
          f"{fmt(statistics.median(b))} ms  difference {statistics.median(d) - statistics.median(b):+.2f} ms", flush=True)
    details("ddprun", d), details("baseline", b)


def stop_latency_stalled_console(cmd):
    """ms from SIGTERM to the launcher's exit while nobody reads its stdout and the workers flood it."""
    r, w = os.pipe()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=w, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    os.close(w)
    try:
        time.sleep(1.5)  # the pipe is full long before: the launcher and the workers are stalled
        t0 = time.perf_counter_ns()
        proc.send_signal(signal.SIGTERM)
        reap(proc, cmd, 60)
        return ms(time.perf_counter_ns() - t0)
    finally:
        os.close(r)


def bench_stalled_console(a):
    """SIGTERM while the launcher's stdout is a pipe nobody reads and 2 workers print without end."""
    ddp = [a.ddprun, "--standalone", "--nproc-per-node", "2", "--no-python", "/usr/bin/yes"]
    anc = [a.anchor, "--standalone", "--nproc_per_node", "2", "--no_python", "/usr/bin/yes"]
    d, t = interleaved(a.stop_runs, a.stop_runs, lambda: stop_latency_stalled_console(ddp),
                       lambda: stop_latency_stalled_console(anc))
    summary("sigterm_stalled_console", d, t, "torchrun-anchor", "goal: acted on at once")
    details("ddprun", d), details("torchrun-anchor", t)


def running_with_argument(needle):
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                count += needle in Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                pass
    return count


def stop_latency_during_start(cmd, needle):
    """ms from SIGTERM (sent once 50 workers run) to the launcher's exit, while more are starting."""
    proc = start(cmd)
    deadline = time.monotonic() + 120
    while running_with_argument(needle) < 50:
        if proc.poll() is not None or time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise BenchError(f"workers did not start: {' '.join(cmd)}")
        time.sleep(0.01)
    t0 = time.perf_counter_ns()
    proc.send_signal(signal.SIGTERM)
    reap(proc, cmd, 120)
    took = ms(time.perf_counter_ns() - t0)
    for _ in range(500):  # let the workers' deaths settle before the next run counts its own
        if running_with_argument(needle) == 0:
            break
        time.sleep(0.01)
    return took


def bench_start_2000(a):
    """SIGTERM during the start of 2,000 workers (/bin/sleep), sent once 50 of them run."""
    needle = "2000.5"
    ddp = [a.ddprun, "--standalone", "--nproc-per-node", "2000", "--no-python", "/bin/sleep", needle]
    anc = [a.anchor, "--standalone", "--nproc_per_node", "2000", "--no_python", "/bin/sleep", needle]
    d, t = interleaved(a.stop_runs, a.stop_runs, lambda: stop_latency_during_start(ddp, needle.encode()),
                       lambda: stop_latency_during_start(anc, needle.encode()))
    summary("sigterm_during_start_2000", d, t, "torchrun-anchor", "goal: acted on at once")
    details("ddprun", d), details("torchrun-anchor", t)


def bench_guardian_cost(a):
    """What the no-orphans machinery adds to a launch, measured in process (build/bin/guardian_cost)."""
    tool = str(Path(a.ddprun).parent / "guardian_cost")
    if not os.access(tool, os.X_OK):
        raise BenchError(f"no {tool} (build it: scripts/build.sh)")
    out = subprocess.run([tool, "200"], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise BenchError(f"{tool} failed: {out.stderr[-2000:]}")
    print(out.stdout.strip() + "  (goal: guardian <= 1000 us)", flush=True)


def cpu_once(cmd, sleep_s):
    """The launcher's own CPU time (ms) from its start until just before its workers end.

    Returns (schedstat total, schedstat while all workers sleep, utime+stime by clock ticks).
    """
    margin_s = min(0.5, sleep_s / 4)
    with tempfile.TemporaryFile() as err:
        proc = start(cmd, stderr=err)
        try:
            deadline = time.monotonic() + 120
            while True:  # wait until all 8 workers have exec'd sleep
                if proc.poll() is not None:
                    raise failure(proc, cmd, err, "launcher ended before its workers were up")
                if time.monotonic() > deadline:
                    raise BenchError(f"workers not up after 120 s: {' '.join(cmd)}")
                if sum(c == "sleep" for c in descendants(proc.pid).values()) >= NPROC:
                    break
                time.sleep(0.01)
            t_up, cpu_up = time.monotonic(), proc_cpu_ns(proc.pid)
            time.sleep(max(0.0, t_up + sleep_s - margin_s - time.monotonic()))
            cpu_end, ticks = proc_cpu_ns(proc.pid), cpu_ticks_ms(proc.pid)
        except BaseException:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            raise
        reap(proc, cmd, sleep_s + 120)
        if proc.returncode != 0:
            raise failure(proc, cmd, err, "launcher failed")
    return ms(cpu_end), ms(cpu_end - cpu_up), ticks


def bench_cpu(a):
    """The launcher's own CPU time while 8 workers run `/bin/sleep S`."""
    s = a.cpu_sleep
    work = ["/bin/sleep", f"{s:g}"]
    ddp = [a.ddprun, "--standalone", "--nproc-per-node", str(NPROC), "--no-python", *work]
    anchors = [  # 1.13's default --monitor_interval is 5 s; 2.x's is 0.1 s, the fair anchor
        ("torchrun-anchor(mi=0.1)", ["--monitor_interval", "0.1"]),
        ("torchrun-anchor(mi=5)", []),
    ]
    name = f"idle_cpu_8x_sleep{s:g}"
    print(f"# {name}: launcher CPU (sum of /proc/<pid>/task/*/schedstat) from its start until "
          f"{min(0.5, s / 4):g} s before the workers end; also the part while all workers sleep, "
          f"and utime+stime (tick resolution, includes exited threads)", flush=True)
    results = []
    for label, extra in anchors:
        anc = [a.anchor, "--standalone", *extra, "--nproc_per_node", str(NPROC), "--no_python",
               *work]
        if not results:  # ddprun is measured once, interleaved with the first anchor
            ddp_runs, anc_runs = interleaved(a.cpu_runs, a.cpu_anchor_runs,
                                             lambda: cpu_once(ddp, s), lambda: cpu_once(anc, s))
            results.append(("ddprun", ddp_runs))
        else:
            anc_runs = [cpu_once(anc, s) for _ in range(a.cpu_anchor_runs)]
        results.append((label, anc_runs))
    for label, runs in results[1:]:
        summary(name, [r[0] for r in ddp_runs], [r[0] for r in runs], label, "goal ddprun < 10 ms")
    for label, runs in results:
        steady = statistics.median(r[1] for r in runs)
        ticks = statistics.median(r[2] for r in runs)
        details(label, [r[0] for r in runs],
                f"; while all workers sleep {fmt(steady)} ms; utime+stime {fmt(ticks)} ms")


def on_a_terminal(cmd, window_s, workers, worker_comm, env=None):
    """The launcher's own CPU (ms) over window_s seconds once `workers` processes named worker_comm
    run, with its stdout and stderr on a pty (a terminal, 120x40, read and thrown away as it comes).

    Returns (cpu ms over the window, the bytes it wrote to the terminal over the whole run, the text,
    the main thread's cpu ms over the window: the agent's loop, without the threads beside it).
    """
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = dict(env or os.environ, TERM="xterm")
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
                            start_new_session=True)
    os.close(slave)
    chunks = []

    def drain():
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer closed the pty
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 120
        while sum(c == worker_comm for c in descendants(proc.pid).values()) < workers:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise BenchError(f"workers not up: {' '.join(cmd)}\n{b''.join(chunks)[-2000:].decode(errors='replace')}")
            time.sleep(0.01)
        t_up, cpu_up, main_up = time.monotonic(), proc_cpu_ns(proc.pid), thread_cpu_ns(proc.pid, proc.pid)
        time.sleep(max(0.0, t_up + window_s - time.monotonic()))
        cpu = proc_cpu_ns(proc.pid) - cpu_up
        main = thread_cpu_ns(proc.pid, proc.pid) - main_up
    except BaseException:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        raise
    reap(proc, cmd, 120)
    reader.join(10)
    os.close(master)
    text = b"".join(chunks).decode(errors="replace")
    if proc.returncode != 0:
        raise BenchError(f"launcher failed (exit {proc.returncode}): {' '.join(cmd)}\n{text[-2000:]}")
    return ms(cpu), sum(map(len, chunks)), text, ms(main)


def bench_status_cpu(a):
    """Launcher CPU per 10 s with 8 workers each reporting progress 1,000 times a second, on a
    terminal: the status block on (--status on) against off (--status off), and status lines each
    second (--status-interval 1, block off), interleaved in one run."""
    if not os.access(a.progress_worker, os.X_OK):
        raise BenchError(f"no progress worker at {a.progress_worker} (build it: scripts/build.sh)")
    w = a.status_window
    work = [a.progress_worker, "--rate", "1000", "--seconds", f"{w + 4:g}", "--summary", "1"]
    base = [a.ddprun, "--standalone", "--nproc-per-node", str(NPROC)]
    variants = [
        ("status block on", base + ["--status", "on", "--no-python", *work]),
        ("status off", base + ["--status", "off", "--no-python", *work]),
        ("status lines each second", base + ["--status", "off", "--status-interval", "1", "--no-python", *work]),
    ]
    comm = Path(a.progress_worker).name[:15]  # /proc/PID/stat's comm: 15 characters at most
    results = {label: [] for label, _ in variants}
    written = {label: [] for label, _ in variants}
    reports = []
    for _ in range(a.status_runs):
        for label, cmd in variants:
            cpu, nbytes, text, _ = on_a_terminal(cmd, w, NPROC, comm)
            results[label].append(cpu * 10.0 / w)
            written[label].append(nbytes)
            for line in text.splitlines():
                if "progress_worker rank" in line and " reports in " in line:
                    n, secs = line.split(": ", 1)[1].split(" reports in ")
                    reports.append(int(n) / float(secs.split()[0]))
    name = "status_cpu_8x_progress1000"
    print(f"# {name}: launcher CPU (schedstat) per 10 s over a {w:g} s window while 8 workers each report "
          f"progress 1,000 times a second; stdout and stderr on a pty (120x40)", flush=True)
    on, off = statistics.median(results["status block on"]), statistics.median(results["status off"])
    print(f"{name}  status on median {fmt(on)} ms  status off median {fmt(off)} ms  "
          f"difference {on - off:+.2f} ms per 10 s (goal: status on < 10 ms)", flush=True)
    for label, _ in variants:
        details(label, results[label], f"; wrote {statistics.median(written[label]) / 1024:.0f} KiB to the terminal")
    if reports:
        print(f"    each worker's reports: median {statistics.median(reports):.0f}/s "
              f"(min {min(reports):.0f}/s, n={len(reports)})", flush=True)


def installed_prefix(wheel, into):
    """What `pip install WHEEL` puts under an env's prefix (bin/, share/ddprun/), unpacked into
    `into`: the same files, so the same start cost, without a venv."""
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if ".data/data/" not in info.filename or info.is_dir():
                continue
            target = Path(into) / info.filename.split(".data/data/", 1)[1]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(info))
            if (info.external_attr >> 16) & stat.S_IXUSR:
                target.chmod(0o755)
    return Path(into) / "bin" / "ddprun"


def bench_installed(a):
    """The wheel's binary (static but for glibc, stripped) against the build tree's (shared
    libraries) and torchrun-anchor: launch and teardown of 8 workers; and the process start alone
    (`--version`), where dynamic linking costs most."""
    wheels = sorted(REPO.glob("dist/ddprun-*.whl"), key=lambda w: w.stat().st_mtime)
    if not wheels:
        raise BenchError("no dist/ddprun-*.whl: build it with scripts/package.sh")
    with tempfile.TemporaryDirectory(prefix="ddprun-installed-") as tmp:
        installed = str(installed_prefix(wheels[-1], tmp))
        cmds = {label: [binary, "--standalone", "--nproc-per-node", str(NPROC), "--no-python", "/bin/true"]
                for label, binary in (("installed", installed), ("build tree", a.ddprun))}
        cmds["torchrun-anchor"] = [a.anchor, "--standalone", "--monitor_interval", "0.05", "--nproc_per_node",
                                   str(NPROC), "--no_python", "/bin/true"]
        for cmd in cmds.values():
            timed_run(cmd)
        results = {label: [] for label in cmds}
        for i in range(a.launch_runs):  # all three take turns
            for label, cmd in cmds.items():
                if label != "torchrun-anchor" or i < a.launch_anchor_runs:
                    results[label].append(ms(timed_run(cmd)))
        summary("installed_launch_8x_true", results["installed"], results["torchrun-anchor"], "torchrun-anchor",
                "the wheel's binary; goal >= 50x")
        i, b = statistics.median(results["installed"]), statistics.median(results["build tree"])
        print(f"    installed/build tree: {fmt(i)} ms against {fmt(b)} ms, ratio {i / b:.2f}", flush=True)
        for label, xs in results.items():
            details(label, xs)
        starts = {label: [] for label in ("installed", "build tree")}
        for _ in range(a.launch_runs * 4):
            for label, binary in (("installed", installed), ("build tree", a.ddprun)):
                starts[label].append(ms(timed_run([binary, "--version"])))
        i, b = statistics.median(starts["installed"]), statistics.median(starts["build tree"])
        print(f"installed_start_version  installed median {fmt(i)} ms  build tree median {fmt(b)} ms  "
              f"ratio {b / i:.2f}x (process start to exit, `ddprun --version`)", flush=True)
        for label, xs in starts.items():
            details(label, xs)
        print(f"    wheel: {wheels[-1].name}, {wheels[-1].stat().st_size / 1024:.0f} KiB; installed ddprun "
              f"{Path(installed).stat().st_size / 1024:.0f} KiB, build tree's {Path(a.ddprun).stat().st_size / 1024:.0f} KiB",
              flush=True)


BENCHMARKS = {
    "installed_launch_8x_true": bench_installed,
    "launch_teardown_8x_true": bench_launch,
    "launch_teardown_8x_true_pty": bench_launch_pty,
    "restart_latency_8x": bench_restart,
    "idle_cpu_8x_sleep": bench_cpu,
    "baseline_launch_restart": bench_baseline,
    "guardian_cost": bench_guardian_cost,
    "sigterm_stalled_console": bench_stalled_console,
    "sigterm_during_start_2000": bench_start_2000,
    "status_cpu_8x_progress1000": bench_status_cpu,
}


# ---------------------------------------------------------------------------- main

def main():
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("filter", nargs="?", default="", help="substring of benchmark names to run")
    p.add_argument("--ddprun", default=env("DDPRUN", str(REPO / "build/bin/ddprun")))
    p.add_argument("--anchor", default=env("TORCHRUN_ANCHOR",
                                           str(REPO.parent / "shared/tools/torchrun-anchor")))
    p.add_argument("--probe", default=env("RESTART_PROBE", str(REPO / "build/bin/restart_probe")))
    p.add_argument("--warmup", type=int, default=1, help="unrecorded runs of each launcher first")
    p.add_argument("--launch-runs", type=int, default=15)
    p.add_argument("--launch-anchor-runs", type=int, default=5)
    p.add_argument("--restart-runs", type=int, default=9)
    p.add_argument("--restart-anchor-runs", type=int, default=5)
    p.add_argument("--cpu-sleep", type=float, default=10.0, help="seconds each worker sleeps")
    p.add_argument("--cpu-runs", type=int, default=3)
    p.add_argument("--cpu-anchor-runs", type=int, default=2)
    p.add_argument("--baseline", default=env("DDPRUN_BASELINE", ""),
                   help="an earlier ddprun binary for the 'baseline' benchmark")
    p.add_argument("--baseline-runs", type=int, default=30)
    p.add_argument("--stop-runs", type=int, default=3, help="runs of each sigterm_* benchmark")
    p.add_argument("--progress-worker", default=env("PROGRESS_WORKER", str(REPO / "build/tests/progress_worker")),
                   help="the progress-reporting worker of status_cpu (tests/integration/progress_worker.cpp)")
    p.add_argument("--status-window", type=float, default=10.0, help="seconds status_cpu measures each run")
    p.add_argument("--status-runs", type=int, default=3, help="runs of each status_cpu variant")
    p.add_argument("--list", action="store_true", help="print the benchmark names and exit")
    a = p.parse_args()

    return run_harness(BENCHMARKS, a, lambda chosen: (a.ddprun, a.anchor))

if __name__ == "__main__":
    sys.exit(main())

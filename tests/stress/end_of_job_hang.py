#!/usr/bin/python3
"""A bounded stress test of the end of a job: PyTorch jobs under ddprun, run again and again under a
CPU hog, each with a watchdog. A job whose work is over (rank 0 printed its last line) but which has
not ended `--grace` seconds later, or which outlives `--job-timeout`, is a hang: the watchdog writes
down the job's process tree (`ps` with wchan), every thread's state, wchan and kernel stack
(/proc/PID/task/TID/stack, root only), the Python stacks of the workers (faulthandler, installed in
every worker by a sitecustomize on PYTHONPATH) and the native stacks of every process (gdb), then
kills the job.

Usage: end_of_job_hang.py --ddprun PATH [--scenario fashion|snapshot|all|watchdog] [--iterations N]
                          [--max-seconds T] [--hogs K] [--dump-dir DIR] (--help for the rest)
  fashion   examples/torch/fashion_mnist_ddp.py, 2 workers, --standalone (examples.fashion_python)
  snapshot  the multi-node tutorial's snapshot Trainer (snapshot_trainer.py): a static 2-node job on
            127.0.0.1, 1 or 2 workers per node, --max-restarts=1; one rank crashes once (which one,
            and how, changes from job to job: SNAPSHOT_VARIANTS)
  all       the two, alternately
  watchdog  the watchdog's own test: a job that hangs on purpose after its work (hang_after_work.py);
            passes when every job is caught and its dump shows the hung worker's and ddprun's stacks
Stops after N jobs or once T seconds have passed, whichever comes first (a job already started runs to
its end or its watchdog). Exit status: 0 every job ended and succeeded, 1 a job hung or failed,
77 a needed input is missing (python3-torch, or Fashion-MNIST for `fashion` alone).
Stdlib only; run it with Debian's /usr/bin/python3.
"""
import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PYTHON = "/usr/bin/python3"
DATA_DIR = Path(os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))
FASHION_ARGS = ["--data-dir", str(DATA_DIR), "--train-limit", "2000", "--test-limit", "1000", "--log-every", "8",
                "--epochs", "1"]

# Installed in every worker (PYTHONPATH): SIGUSR2 makes it write all its threads' Python stacks to
# $DDPRUN_STRESS_DUMP_DIR/py-<pid>.txt, without going through ddprun's pipes (which may be what is stuck).
# It shadows Debian's own sitecustomize, which only installs apport's exception hook.
SITECUSTOMIZE = '''
import faulthandler, os, signal
_dir = os.environ.get("DDPRUN_STRESS_DUMP_DIR")
if _dir:
    try:
        _file = open(os.path.join(_dir, "py-%d.txt" % os.getpid()), "w")
        faulthandler.register(signal.SIGUSR2, file=_file, all_threads=True, chain=False)
    except OSError:
        pass
'''


# Whatever this script starts is SIGKILLed should the script die (a CTest timeout): a hog would
# spin for ever, a hung job would stay (ddprun's guardian then ends its workers).
DIE_WITH_US = ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Job:
    """One launch: one or more ddprun processes, each in a session of its own, output read by threads
    (ddprun's console is a pipe, as under CTest), watched for the line that ends the work."""

    def __init__(self, name, commands, env, done_marker):
        self.name = name
        self.done_marker = done_marker
        self.done_at = None
        self.lines = []
        self.lock = threading.Lock()
        self.procs = []
        self.readers = []
        for tag, cmd in commands:
            proc = subprocess.Popen(DIE_WITH_US + cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
            self.procs.append((tag, proc))
            for stream, label in ((proc.stdout, "out"), (proc.stderr, "err")):
                reader = threading.Thread(target=self._read, args=(stream, f"{tag}:{label}"), daemon=True)
                reader.start()
                self.readers.append(reader)

    def _read(self, stream, label):
        for raw in iter(stream.readline, b""):
            line = raw.decode(errors="replace").rstrip("\n")
            with self.lock:
                self.lines.append(f"[{label}] {line}")
                if self.done_at is None and self.done_marker in line:
                    self.done_at = time.monotonic()

    def finished(self):
        return all(proc.poll() is not None for _, proc in self.procs)

    def statuses(self):
        return {tag: proc.returncode for tag, proc in self.procs}

    def output(self, last=None):
        with self.lock:
            return "\n".join(self.lines if last is None else self.lines[-last:])


def read(path, default=""):
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return default


def all_processes():
    """pid -> (ppid, sid, comm) of every process."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = read(f"/proc/{entry}/stat")
        if not stat:
            continue
        close = stat.rfind(")")
        fields = stat[close + 2:].split()
        table[int(entry)] = (int(fields[1]), int(fields[3]), stat[stat.find("(") + 1:close])
    return table


def job_tree(roots):
    """Every process descending from `roots`, or in their sessions (the guardian calls setsid but
    stays a child; a worker's escaped grandchild is reparented to ddprun, a subreaper)."""
    table = all_processes()
    sessions = {table[r][1] for r in roots if r in table}
    members = {pid for pid, (_, sid, _) in table.items() if sid in sessions} | {r for r in roots if r in table}
    changed = True
    while changed:
        changed = False
        for pid, (ppid, _, _) in table.items():
            if ppid in members and pid not in members:
                members.add(pid)
                changed = True
    return sorted(members), table


def run_capture(cmd, timeout):
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        return done.stdout + done.stderr
    except subprocess.TimeoutExpired as e:
        return f"(timed out after {timeout} s)\n{e.stdout or ''}"
    except OSError as e:
        return f"(cannot run {cmd[0]}: {e})"


def dump_hang(job, why, dump_dir, py_dump_dir, budget):
    """Writes everything the hang can tell into dump_dir/<job>-hang.txt; returns its path and the
    job's pids. gdb gets `budget` seconds in all, so that a dump never outlasts the test's timeout."""
    deadline = time.monotonic() + budget
    roots = [proc.pid for _, proc in job.procs if proc.poll() is None]
    pids, table = job_tree(roots)
    out = [f"== {job.name}: {why}", f"statuses so far: {job.statuses()}", f"live ddprun pids: {roots}", ""]
    out.append("== ps")
    ps = run_capture(["ps", "-o", "pid,ppid,pgid,sid,stat,wchan:32,etimes,cmd", "-p",
                      ",".join(map(str, pids)) or "1"], 30)
    out.append(ps)
    out.append("== threads: state, wchan, kernel stack")
    for pid in pids:
        for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int) if os.path.isdir(f"/proc/{pid}/task") else []:
            base = f"/proc/{pid}/task/{tid}"
            stat = read(f"{base}/stat")
            close = stat.rfind(")")
            state = stat[close + 2:close + 3] if close > 0 else "?"
            comm = read(f"{base}/comm").strip()
            out.append(f"-- pid {pid} tid {tid} ({comm}) state {state} wchan {read(f'{base}/wchan') or '?'}")
            stack = read(f"{base}/stack", "(unreadable)")
            out.append(stack.rstrip())
    # Python stacks first (gdb stops the process while attached).
    python_pids = [p for p in pids if "python" in table.get(p, (0, 0, ""))[2] or
                   "python" in read(f"/proc/{p}/cmdline").split("\0")[0]]
    for pid in python_pids:
        try:
            os.kill(pid, signal.SIGUSR2)
        except ProcessLookupError:
            pass
    time.sleep(1.0)
    for pid in python_pids:
        out.append(f"== python stacks of {pid} (faulthandler)")
        out.append(read(Path(py_dump_dir) / f"py-{pid}.txt", "(none written)").rstrip())
    # Workers first, then the agents: the workers' stacks say more, the agents' are quicker to take.
    for pid in python_pids + [p for p in pids if p not in python_pids]:
        left = deadline - time.monotonic()
        out.append(f"== gdb: {pid} {read(f'/proc/{pid}/cmdline').replace(chr(0), ' ').strip()}")
        if left < 2:
            out.append(f"(skipped: the dump's {budget:.0f} s for gdb are spent)")
            continue
        out.append(run_capture(["gdb", "-batch", "-nx", "-p", str(pid), "-ex", "set pagination off",
                                "-ex", "thread apply all bt"], min(left, 60)).rstrip())
    out.append("== job output (last 200 lines)")
    out.append(job.output(200))
    out.append("== every process (ps -eo), for what escaped the tree")
    out.append(run_capture(["ps", "-eo", "pid,ppid,pgid,stat,wchan:32,cmd"], 30))
    path = Path(dump_dir) / f"{job.name}-hang.txt"
    path.write_text("\n".join(out) + "\n")
    return path, pids


def kill_job(job, extra_pids=()):
    for _, proc in job.procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    for pid in extra_pids:
        if pid > 1:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    for _, proc in job.procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass


def fashion_job(args, index, env, work):
    cmd = [str(args.ddprun), "--standalone", "--nproc-per-node", "2", str(args.fashion_script), *FASHION_ARGS]
    return Job(f"{index:03d}-fashion", [("ddprun", cmd)], dict(env, PYTHON_EXEC=PYTHON), "test_accuracy=")


# The snapshot job's variants, one per job in turn: workers per node, the global rank that crashes
# (on node 0 or node 1, the store's host or not), and how.
SNAPSHOT_VARIANTS = [(2, 1, "exit"), (1, 1, "raise"), (2, 2, "kill"), (1, 0, "exit"), (2, 3, "raise"),
                     (2, 0, "kill")]


def snapshot_job(args, index, env, work):
    port = free_port()
    snapshot = Path(work) / f"snapshot-{index}.pt"
    nproc, crash_rank, how = SNAPSHOT_VARIANTS[(index // args.scenario_count) % len(SNAPSHOT_VARIANTS)]
    commands = []
    for node in (0, 1):
        commands.append((f"node{node}", [
            str(args.ddprun), "--nnodes=2", f"--node-rank={node}", "--master-addr=127.0.0.1",
            f"--master-port={port}", f"--nproc-per-node={nproc}", "--max-restarts=1", "--rdzv-conf=timeout=120",
            str(HERE / "snapshot_trainer.py"), str(args.epochs), "1", "--snapshot-path", str(snapshot),
            "--crash-at-epoch", str(args.epochs // 2), "--crash-rank", str(crash_rank), "--crash-how", how]))
    return Job(f"{index:03d}-snapshot-{nproc}x2-crash{crash_rank}-{how}", commands, dict(env, PYTHON_EXEC=PYTHON),
               "training done:")


def watchdog_job(args, index, env, work):
    cmd = [str(args.ddprun), "--standalone", "--nproc-per-node", "2", str(HERE / "hang_after_work.py")]
    return Job(f"{index:03d}-watchdog", [("ddprun", cmd)], dict(env, PYTHON_EXEC=PYTHON), "work done")


def dump_shows_the_hang(path):
    """--scenario watchdog: the dump has the hung worker's Python stack and gdb's stacks of ddprun."""
    text = Path(path).read_text(errors="replace")
    return "in hang_after_work" in text and "Agent::run" in text


JOBS = {"fashion": fashion_job, "snapshot": snapshot_job, "watchdog": watchdog_job}


def start_hogs(count):
    hogs = []
    for _ in range(count):
        hogs.append(subprocess.Popen(DIE_WITH_US + [sys.executable, "-c", "while True: pass"],
                                     stdin=subprocess.DEVNULL))
    return hogs


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ddprun", type=Path, required=True)
    parser.add_argument("--scenario", choices=["fashion", "snapshot", "all", "watchdog"], default="all")
    parser.add_argument("--iterations", type=int, default=10, help="jobs to run at most")
    parser.add_argument("--max-seconds", type=float, default=600, help="start no job after this long")
    parser.add_argument("--hogs", type=int, default=2, help="busy-loop processes running beside the jobs")
    parser.add_argument("--grace", type=float, default=30, help="seconds a job may take to end after its work")
    parser.add_argument("--job-timeout", type=float, default=240, help="seconds a job may take in all")
    parser.add_argument("--fashion-script", type=Path, default=REPO / "examples" / "torch" / "fashion_mnist_ddp.py",
                        help="fashion scenario: the trainer to run (e.g. an older version, to compare)")
    parser.add_argument("--epochs", type=int, default=6, help="snapshot scenario: epochs (rank 1 crashes at half)")
    parser.add_argument("--dump-seconds", type=float, default=120, help="seconds gdb may take in one dump")
    parser.add_argument("--nice", type=int, default=10, help="niceness of this script, the hogs and the jobs")
    parser.add_argument("--dump-dir", type=Path, help="where hang dumps go (default: a folder in /tmp, kept)")
    args = parser.parse_args()

    if subprocess.run([PYTHON, "-c", "import torch.distributed, numpy"], capture_output=True).returncode != 0:
        print(f"skipped: {PYTHON} has no torch (Debian python3-torch)")
        return 77
    if args.scenario == "watchdog" and not shutil.which("gdb"):
        print("skipped: no gdb, which the watchdog's dump needs (scripts/setup.sh --tests installs it)")
        return 77
    scenarios = ["fashion", "snapshot"] if args.scenario == "all" else [args.scenario]
    if "fashion" in scenarios and not (DATA_DIR / "train-images-idx3-ubyte.gz").is_file():
        if args.scenario == "fashion":
            print(f"skipped: no Fashion-MNIST in {DATA_DIR} (Debian's dataset-fashion-mnist)")
            return 77
        print(f"note: no Fashion-MNIST in {DATA_DIR}: running the snapshot scenario only")
        scenarios = ["snapshot"]
    args.scenario_count = len(scenarios)
    os.nice(args.nice)

    dump_dir = args.dump_dir or Path(tempfile.mkdtemp(prefix="ddprun-hang-"))
    dump_dir.mkdir(parents=True, exist_ok=True)
    work = tempfile.TemporaryDirectory(prefix="ddprun-stress-")
    py_dump_dir = Path(work.name) / "py"
    py_dump_dir.mkdir()
    site_dir = Path(work.name) / "site"
    site_dir.mkdir()
    (site_dir / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = dict(os.environ, DDPRUN_STRESS_DUMP_DIR=str(py_dump_dir),
               PYTHONPATH=os.pathsep.join(filter(None, [str(site_dir), os.environ.get("PYTHONPATH")])))

    hogs = start_hogs(args.hogs)
    started = time.monotonic()
    hangs, failures, ran = [], [], 0
    try:
        for index in range(args.iterations):
            if time.monotonic() - started > args.max_seconds:
                break
            scenario = scenarios[index % len(scenarios)]
            job = JOBS[scenario](args, index, env, work.name)
            ran += 1
            job_start = time.monotonic()
            why = None
            while not job.finished():
                now = time.monotonic()
                if job.done_at is not None and now - job.done_at > args.grace:
                    why = f"the work ended {now - job.done_at:.0f} s ago and the job has not"
                elif now - job_start > args.job_timeout:
                    why = f"still running after {args.job_timeout:.0f} s (work done: {job.done_at is not None})"
                if why:
                    break
                time.sleep(0.2)
            seconds = time.monotonic() - job_start
            if why:
                path, pids = dump_hang(job, why, dump_dir, py_dump_dir, args.dump_seconds)
                kill_job(job, pids)
                hangs.append((job.name, path))
                print(f"HANG {job.name}: {why}; dump in {path}", flush=True)
                continue
            for reader in job.readers:
                reader.join(timeout=10)
            statuses = job.statuses()
            if any(status != 0 for status in statuses.values()) or job.done_at is None:
                failures.append(job.name)
                path = dump_dir / f"{job.name}-failed.txt"
                path.write_text(job.output() + "\n")
                print(f"FAIL {job.name}: exit statuses {statuses}, work done: {job.done_at is not None}; "
                      f"output in {path}", flush=True)
                continue
            tail = time.monotonic() - job.done_at if job.done_at else float("nan")
            print(f"ok   {job.name}: {seconds:.1f} s, ended {tail:.1f} s after its work", flush=True)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
        work.cleanup()
    print(f"{ran} jobs in {time.monotonic() - started:.0f} s under {args.hogs} hog(s): "
          f"{len(hangs)} hung, {len(failures)} failed" + (f"; dumps in {dump_dir}" if hangs or failures else ""))
    if args.scenario == "watchdog":
        # The watchdog's own test: every job must hang, and every dump must show where.
        caught = [name for name, path in hangs if dump_shows_the_hang(path)]
        print(f"watchdog: {len(caught)} of {ran} hung jobs caught with their stacks")
        return 0 if ran and len(caught) == ran else 1
    if not hangs and not failures and args.dump_dir is None:
        dump_dir.rmdir()
    return 1 if hangs or failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""Workers get every variable torchrun gives its workers, with the same values where the value is
not a path or a random id: torchrun 2.11's as recorded (data/pytorch-2.11/torchrun-worker-env.json,
a byte-identical copy of ../shared/reference/pytorch-2.11/), and torchrun-anchor's (torchrun of
Debian's PyTorch 1.13) live.

Usage: env_parity.py DDPRUN_BINARY [TORCHRUN_ANCHOR]

What a launcher adds is the workers' environment minus the launcher's own; the test compares those
additions. torchrun 2.11 was recorded with `--no-python sh -c 'env > FILE'`, so ddprun runs the same
kind of worker (a shell, no Python) with the recorded run's flags; against the anchor, both launchers
run one command line whose Python workers dump os.environ (ddprun's sitecustomize has run by then).
Each variable only ddprun sets has its reason in DDPRUN_ONLY. The 1.13 half is skipped, saying
why, when the anchor or Debian's torch is missing; the 2.11 half needs neither.
"""

import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
RECORDED_211 = os.path.join(HERE, "data/pytorch-2.11/torchrun-worker-env.json")

# Added by ddprun only, each for a reason documented in docs/reference.md.
DDPRUN_ONLY = {
    "DDPRUN_PROGRESS_FILE": "the progress channel (torchrun has none)",
    "PYTHONUNBUFFERED": "workers without a terminal still print live (torchrun's inherit ddprun's)",
    "DDPRUN_GUARDIAN_MARK": "the no-cgroup orphan sweep's marker",
    "PYTHONPATH": "ddprun's Python folder first: its sitecustomize (faulthandler for --hang-timeout, "
    "PyTorch 1.x's NCCL_ASYNC_ERROR_HANDLING) and ddprun_progress",
    "DDPRUN_PYTHON_STACKS_FILE": "where a Python worker's faulthandler dumps its stacks (sitecustomize "
    "takes it out of a Python worker's environment; other programs see it)",
    "DDPRUN_STACKS_SIGNAL": "the signal of those dumps (the same)",
}
# Names PyTorch 2.x warns about ("Environment variable ... is deprecated"); none may reach a worker
# that does not run PyTorch 1.x.
WARNS_IN_2X = {"NCCL_ASYNC_ERROR_HANDLING", "NCCL_BLOCKING_WAIT", "NCCL_DESYNC_DEBUG", "NCCL_ENABLE_TIMING"}
# Paths and ids that differ by nature; compared by presence only (the ports: checked per run).
PRESENCE_ONLY = {"TORCHELASTIC_ERROR_FILE", "TORCHELASTIC_RUN_ID", "MASTER_PORT"}
# Set by the shell or Python itself in the child, not by the launcher's contract.
IGNORED = {"_", "PWD", "OLDPWD", "SHLVL", "LC_CTYPE"}

BASE_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": os.environ.get("HOME", "/root"),
    "PYTHON_EXEC": "/usr/bin/python3",
    "LANG": "C.UTF-8",
}

WORKER = """
import json, os, sys
with open(os.path.join(sys.argv[1], os.environ["RANK"] + ".json"), "w") as f:
    json.dump(dict(os.environ), f)
"""
SHELL_WORKER = 'env -0 > "$0/$LOCAL_RANK.env"'


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def is_loopback(host):
    try:
        return all(info[4][0] in ("127.0.0.1", "::1") or info[4][0].startswith("127.")
                   for info in socket.getaddrinfo(host, None))
    except socket.gaierror:
        return False


def added(env):
    return {k: v for k, v in env.items() if BASE_ENV.get(k) != v and k not in IGNORED}


def run(argv):
    result = subprocess.run(argv, env=BASE_ENV, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result


def ddprun_only_problems(where, theirs, mine, also_allowed=()):
    return [f"{where}: ddprun sets {name}={mine[name]!r}, torchrun does not (give it a reason in DDPRUN_ONLY)"
            for name in sorted(mine.keys() - theirs.keys() - DDPRUN_ONLY.keys() - set(also_allowed))]


def compare_with_211(ddprun, recording):
    """ddprun against each run recorded with torchrun 2.11, with that run's flags."""
    problems = []
    for title, run_record in recording["runs"].items():
        local_rank = int(run_record["env"]["LOCAL_RANK"])
        flags = shlex.split(run_record["flags"])
        port = None
        if "--master-port" in flags:  # the recorded port may be taken here: another, and the same check
            port = str(free_port())
            flags[flags.index("--master-port") + 1] = port
        with tempfile.TemporaryDirectory() as out:
            run([ddprun, "--pty", "off", *flags, "--no-python", "/bin/sh", "-c", SHELL_WORKER, out])
            with open(os.path.join(out, f"{local_rank}.env"), encoding="utf-8") as f:
                env = dict(entry.split("=", 1) for entry in f.read().split("\0") if entry)
        mine, theirs = added(env), run_record["env"]
        where = f"torchrun 2.11 {title} ({run_record['flags']})"
        for name in sorted(theirs.keys() - mine.keys()):
            problems.append(f"{where}: torchrun sets {name}={theirs[name]!r}, ddprun does not")
        # The store's address: checked below, by the run's flags. The run id: random with
        # --standalone, else --rdzv-id's default, "none", under both.
        by_value = theirs.keys() & mine.keys() - {"TORCHELASTIC_ERROR_FILE", "MASTER_ADDR", "MASTER_PORT"}
        if port is None:
            by_value.discard("TORCHELASTIC_RUN_ID")
        for name in sorted(by_value):
            if theirs[name] != mine[name]:
                problems.append(f"{where}: {name} is {mine[name]!r} under ddprun, {theirs[name]!r} under torchrun")
        if port is not None:  # the run's flags name the store: the same address and port as torchrun's
            if (mine.get("MASTER_ADDR"), mine.get("MASTER_PORT")) != (theirs["MASTER_ADDR"], port):
                problems.append(f"{where}: MASTER_ADDR:PORT is {mine.get('MASTER_ADDR')}:{mine.get('MASTER_PORT')}, "
                                f"not the flags' {theirs['MASTER_ADDR']}:{port}")
        else:  # --standalone: a store on this host (torchrun says "localhost", ddprun 127.0.0.1), any port
            if not (is_loopback(mine.get("MASTER_ADDR", "")) and is_loopback(theirs["MASTER_ADDR"])):
                problems.append(f"{where}: MASTER_ADDR {mine.get('MASTER_ADDR')!r} is not this host's loopback")
            if not mine.get("MASTER_PORT", "").isdigit() or int(mine["MASTER_PORT"]) <= 0:
                problems.append(f"{where}: MASTER_PORT {mine.get('MASTER_PORT')!r} is not a port")
        problems += ddprun_only_problems(where, theirs, mine)
        problems += [f"{where}: ddprun sets {name}, which PyTorch 2.x warns about" for name in sorted(WARNS_IN_2X & mine.keys())]
        print(f"torchrun 2.11 adds ({title}): {sorted(theirs)}")
        print(f"ddprun adds:{' ' * (len(title) + 7)}{sorted(mine)}")
    return problems


def python_added_by(launcher_argv, folder):
    script = os.path.join(folder, "dump_env.py")
    with open(script, "w") as f:
        f.write(WORKER)
    out = os.path.join(folder, "out")
    os.mkdir(out)
    port = str(free_port())
    argv = launcher_argv + ["--nproc_per_node", "2", "--master_port", port, script, out]
    run(argv)
    result = {}
    for rank in (0, 1):
        with open(os.path.join(out, f"{rank}.json")) as f:
            env = json.load(f)
        result[rank] = added(env)
        if env.get("MASTER_PORT") != port:
            raise SystemExit(f"{argv[0]}: rank {rank} got MASTER_PORT={env.get('MASTER_PORT')}, not --master_port {port}")
    return result


def compare_with_anchor(ddprun, anchor, torchrun_211_names):
    """ddprun against torchrun 1.13, both running Python workers of Debian's PyTorch 1.13."""
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        torchrun = python_added_by(["/usr/bin/python3", anchor], a)
        ours = python_added_by([ddprun, "--pty", "off"], b)
    problems = []
    for rank in (0, 1):
        theirs, mine = torchrun[rank], ours[rank]
        where = f"torchrun 1.13, rank {rank}"
        for name in sorted(theirs.keys() - mine.keys()):
            problems.append(f"{where}: torchrun sets {name}={theirs[name]!r}, ddprun does not")
        # torchrun 2.11's own (TORCH_NCCL_ASYNC_ERROR_HANDLING, TORCHELASTIC_SIGNALS_TO_HANDLE) need no reason.
        problems += ddprun_only_problems(where, theirs, mine, also_allowed=torchrun_211_names)
        for name in sorted(theirs.keys() & mine.keys() - PRESENCE_ONLY):
            # MASTER_ADDR: torchrun 1.13 resolves --master_addr's default to 127.0.0.1 too.
            if theirs[name] != mine[name]:
                problems.append(f"{where}: {name} is {mine[name]!r} under ddprun, {theirs[name]!r} under torchrun")
        # PyTorch 1.13 reads only the old name: its workers keep async error handling under ddprun.
        if mine.get("NCCL_ASYNC_ERROR_HANDLING") != "1":
            problems.append(f"{where}: a PyTorch 1.13 worker has NCCL_ASYNC_ERROR_HANDLING={mine.get('NCCL_ASYNC_ERROR_HANDLING')!r}, not '1'")
    print(f"torchrun-anchor adds: {sorted(torchrun[0])}")
    print(f"ddprun adds:          {sorted(ours[0])}")
    return problems


def main():
    ddprun = sys.argv[1]
    anchor = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "../../../shared/tools/torchrun-anchor")
    with open(RECORDED_211, encoding="utf-8") as f:  # in the repository: missing is a failure
        recording = json.load(f)
    torchrun_211_names = set().union(*(r["env"].keys() for r in recording["runs"].values()))

    problems = compare_with_211(ddprun, recording)
    if not os.path.exists(anchor):
        print(f"SKIPPED the torchrun 1.13 half: {anchor} is missing")
    elif subprocess.run(["/usr/bin/python3", "-c", "import torch.distributed"], capture_output=True).returncode:
        print("SKIPPED the torchrun 1.13 half: /usr/bin/python3 cannot import torch.distributed")
    else:
        problems += compare_with_anchor(ddprun, anchor, torchrun_211_names)
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

"""Workers get every variable torchrun-anchor (torchrun of Debian's PyTorch 1.13) gives its workers,
with the same values where the value is not a path or a random id.

Usage: env_parity.py DDPRUN_BINARY [TORCHRUN_ANCHOR]

Both launchers run the same command line, a two-worker job whose workers dump their environment
to JSON. What a launcher adds is the workers' environment minus the launcher's own; the test
compares those additions. Exit 77 (skipped) when torch or the anchor is missing.
"""

import json
import os
import socket
import subprocess
import sys
import tempfile

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))

# Added by ddprun only, each for a reason documented in docs/reference.md.
DDPRUN_ONLY = {
    "DDPRUN_PROGRESS_FILE",  # the progress channel (torchrun has none)
    "PYTHONUNBUFFERED",  # workers without a terminal still print live (torchrun's inherit ddprun's)
    "DDPRUN_GUARDIAN_MARK",  # the no-cgroup orphan sweep's marker
    "TORCH_NCCL_ASYNC_ERROR_HANDLING",  # PyTorch 2.x's name of NCCL_ASYNC_ERROR_HANDLING
    "PYTHONPATH",  # ddprun's Python folder first: faulthandler for --hang-timeout, ddprun_progress
}
# Paths and ids that differ by nature; compared by presence only.
PRESENCE_ONLY = {"TORCHELASTIC_ERROR_FILE", "TORCHELASTIC_RUN_ID", "MASTER_PORT"}  # port: checked per run
# Set by Python itself in the child (e.g. of the interpreter that runs the launcher), not by the
# launcher's contract.
IGNORED = {"_", "PWD", "OLDPWD", "SHLVL", "LC_CTYPE"}

WORKER = """
import json, os, sys
with open(os.path.join(sys.argv[1], os.environ["RANK"] + ".json"), "w") as f:
    json.dump(dict(os.environ), f)
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def added_by(launcher_argv, base_env, folder):
    script = os.path.join(folder, "dump_env.py")
    with open(script, "w") as f:
        f.write(WORKER)
    out = os.path.join(folder, "out")
    os.mkdir(out)
    port = str(free_port())
    argv = launcher_argv + ["--nproc_per_node", "2", "--master_port", port, script, out]
    result = subprocess.run(argv, env=base_env, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    added = {}
    for rank in (0, 1):
        with open(os.path.join(out, f"{rank}.json")) as f:
            env = json.load(f)
        added[rank] = {k: v for k, v in env.items() if base_env.get(k) != v and k not in IGNORED}
        if env.get("MASTER_PORT") != port:
            raise SystemExit(f"{argv[0]}: rank {rank} got MASTER_PORT={env.get('MASTER_PORT')}, not --master_port {port}")
    return added


def main():
    ddprun = sys.argv[1]
    anchor = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "../../../shared/tools/torchrun-anchor")
    if not os.path.exists(anchor):
        print(f"SKIP: {anchor} is missing")
        return SKIP
    if subprocess.run(["/usr/bin/python3", "-c", "import torch.distributed"], capture_output=True).returncode:
        print("SKIP: /usr/bin/python3 cannot import torch.distributed")
        return SKIP
    base_env = {
        "PATH": "/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "PYTHON_EXEC": "/usr/bin/python3",
        "LANG": "C.UTF-8",
    }
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        torchrun = added_by(["/usr/bin/python3", anchor], base_env, a)
        ours = added_by([ddprun, "--pty", "off"], base_env, b)
    problems = []
    for rank in (0, 1):
        theirs, mine = torchrun[rank], ours[rank]
        for name in sorted(theirs.keys() - mine.keys()):
            problems.append(f"rank {rank}: torchrun sets {name}={theirs[name]!r}, ddprun does not")
        for name in sorted(mine.keys() - theirs.keys() - DDPRUN_ONLY):
            problems.append(f"rank {rank}: ddprun sets {name}={mine[name]!r}, torchrun does not (add a reason)")
        for name in sorted(theirs.keys() & mine.keys() - PRESENCE_ONLY):
            # MASTER_ADDR: torchrun 1.13 resolves --master_addr's default to 127.0.0.1 too.
            if theirs[name] != mine[name]:
                problems.append(f"rank {rank}: {name} is {mine[name]!r} under ddprun, {theirs[name]!r} under torchrun")
    print(f"torchrun-anchor adds: {sorted(torchrun[0])}")
    print(f"ddprun adds:          {sorted(ours[0])}")
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

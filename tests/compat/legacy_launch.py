"""A torch.distributed.launch-style script (examples/python/legacy_launch_train.py: argparse
`--local_rank`, init_process_group from the environment) runs unchanged under ddprun with
--append-local-rank=underscore, as under `python -m torch.distributed.launch` (issue 11, item 5).
Without the flag the same script fails (it requires --local_rank): the flag is what makes it run.

Usage: legacy_launch.py DDPRUN_BINARY [--with-reference]
--with-reference also runs it under torch.distributed.launch itself (a self-check of the script).
Exit 77 (skipped) when /usr/bin/python3 cannot import torch.distributed.
"""

import os
import socket
import subprocess
import sys

SKIP = 77
PYTHON = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "examples", "python", "legacy_launch_train.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(argv):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PET_")}
    env["PYTHON_EXEC"] = PYTHON
    env["PYTHONWARNINGS"] = "ignore::FutureWarning"
    return subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=180)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    ddprun = os.path.abspath(sys.argv[1])
    if subprocess.run([PYTHON, "-c", "import torch.distributed"], capture_output=True).returncode != 0:
        print("SKIP: " + PYTHON + " cannot import torch.distributed")
        return SKIP
    failures = 0

    def expect(name, proc, ok, needles=()):
        nonlocal failures
        good = (proc.returncode == 0) == ok and all(n in proc.stdout for n in needles)
        print(("ok   " if good else "FAIL ") + name + " (rc %d)" % proc.returncode)
        if not good:
            failures += 1
            print(proc.stdout[-3000:])

    agree = ["local_rank=0 rank=0/2 steps=3 replicas agree", "local_rank=1 rank=1/2 steps=3 replicas agree"]
    expect("ddprun --append-local-rank=underscore",
           run([ddprun, "--append-local-rank=underscore", "--nproc_per_node", "2", "--master_port", str(free_port()),
                SCRIPT, "--steps", "3"]), True, agree)
    # --use_env: accepted, and it means no --local_rank (as without the flag), so this script,
    # which requires it, fails: the flag is what makes it run.
    expect("ddprun --use_env (no --local_rank passed)",
           run([ddprun, "--use_env", "--nproc_per_node", "2", "--master_port", str(free_port()), SCRIPT]), False,
           ["the following arguments are required: --local_rank"])
    if "--with-reference" in sys.argv:
        launch = ("import re,sys\nfrom torch.distributed.elastic.multiprocessing import api as a\n"
                  "o=a.Std.from_str\n"
                  "a.Std.from_str=staticmethod(lambda v: a.Std(int(v)) if re.fullmatch(r'\\s*\\d\\s*', v) else o(v))\n"
                  "from torch.distributed.launch import main\nmain()\n")
        expect("python -m torch.distributed.launch",
               run([PYTHON, "-c", launch, "--nproc_per_node", "2", "--master_port", str(free_port()), SCRIPT,
                    "--steps", "3"]), True, agree)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

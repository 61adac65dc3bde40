"""Which Python runs the workers (issue 11, item 3), with real processes under ddprun:

- an active virtual environment (a fake venv whose bin/python is a symlink to /usr/bin/python3)
  runs the workers, although another python3 comes first on PATH; PYTHON_EXEC wins over it;
- a console script without .py and with a `#!/usr/bin/python3` line runs as `python3 -u`: its
  output arrives while it runs (the test answers the first line before the worker goes on) and
  its command line is `/usr/bin/python3 -u /path/live-tool ARGS` (/proc/self/cmdline); a bash
  script without .py is exec'd as it is;
- a worker that dies of ModuleNotFoundError gets a summary naming the interpreter and PYTHON_EXEC.

Usage: python_choice.py DDPRUN_BINARY. Needs no torch. Exit 77 (skipped) without /usr/bin/python3.
"""

import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
PYTHON = "/usr/bin/python3"

PROBE = """
import sys
print("EXE=" + sys.executable, "CMD=" + "|".join(open("/proc/self/cmdline").read().split(chr(0))[:-1]))
"""

# Prints a line, then waits for the test to answer it (a file) before it ends: the line must
# arrive while the worker runs. Buffered output would hold it back until exit, after the wait.
LIVE_TOOL = """#!/usr/bin/python3
import os, sys, time
print("EXE=" + sys.executable, "CMD=" + "|".join(open("/proc/self/cmdline").read().split(chr(0))[:-1]))
print("waiting for the answer")
deadline = time.time() + 20
while not os.path.exists(sys.argv[1]):
    if time.time() > deadline:
        print("nobody answered: the output did not arrive while the worker ran")
        sys.exit(3)
    time.sleep(0.05)
print("answered")
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    if not os.path.exists(PYTHON):
        print("SKIP: no " + PYTHON)
        return SKIP
    ddprun = os.path.abspath(sys.argv[1])
    tmp = tempfile.mkdtemp(prefix="ddprun_python_choice_")
    failures = []

    def write(path, text, mode=0o644):
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)

    # A python3 first on PATH that is not the one to use (a wrapper that says so and fails).
    decoy = os.path.join(tmp, "decoy")
    os.mkdir(decoy)
    write(os.path.join(decoy, "python3"), "#!/bin/sh\necho DECOY-PYTHON-RAN; exit 42\n", 0o755)
    venv = os.path.join(tmp, "venv")
    os.makedirs(os.path.join(venv, "bin"))
    os.symlink(PYTHON, os.path.join(venv, "bin", "python"))
    tools = os.path.join(tmp, "tools")
    os.mkdir(tools)
    probe = os.path.join(tmp, "probe.py")
    write(probe, PROBE)

    base = {k: v for k, v in os.environ.items()
            if not k.startswith("PET_") and k not in ("PYTHON_EXEC", "VIRTUAL_ENV", "CONDA_PREFIX")}
    base["PATH"] = decoy + ":" + tools + ":/usr/bin:/bin"

    def ddprun_run(args, env_extra, timeout=60):
        env = dict(base, **env_extra)
        cmd = [ddprun, "--master_port", str(free_port())] + args
        return subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=timeout)

    def check(name, ok, detail):
        print(("ok   " if ok else "FAIL ") + name)
        if not ok:
            failures.append(name)
            print("      " + detail.replace("\n", "\n      "))

    venv_python = os.path.join(venv, "bin", "python")
    p = ddprun_run([probe], {"VIRTUAL_ENV": venv})
    check("VIRTUAL_ENV's bin/python runs the workers", p.returncode == 0 and "EXE=" + venv_python in p.stdout,
          p.stdout + p.stderr)
    p = ddprun_run([probe], {"VIRTUAL_ENV": venv, "CONDA_PREFIX": tmp, "PYTHON_EXEC": PYTHON})
    check("PYTHON_EXEC wins over VIRTUAL_ENV", p.returncode == 0 and "EXE=" + PYTHON + " " in p.stdout,
          p.stdout + p.stderr)
    p = ddprun_run([probe], {"CONDA_PREFIX": venv})
    check("CONDA_PREFIX's bin/python runs the workers", p.returncode == 0 and "EXE=" + venv_python in p.stdout,
          p.stdout + p.stderr)
    p = ddprun_run([probe], {})
    check("else python3 on PATH (here the decoy)", p.returncode != 0 and "DECOY-PYTHON-RAN" in p.stdout,
          p.stdout + p.stderr)

    # A console script: no .py, a Python #! line, found on PATH by name.
    write(os.path.join(tools, "live-tool"), LIVE_TOOL, 0o755)
    answer = os.path.join(tmp, "answer")
    env = dict(base, VIRTUAL_ENV=venv)
    proc = subprocess.Popen([ddprun, "--master_port", str(free_port()), "live-tool", answer], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Raw reads of the pipe: a buffered reader could hold the line select() already reported.
    seen, deadline = b"", time.time() + 30
    while b"waiting for the answer" not in seen and time.time() < deadline and proc.poll() is None:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            seen += os.read(proc.stdout.fileno(), 65536)
    live = b"waiting for the answer" in seen and proc.poll() is None
    write(answer, "")
    rest, err = proc.communicate(timeout=60)
    out, err = (seen + rest).decode(errors="replace"), err.decode(errors="replace")
    check("console script: output arrives while it runs", live and proc.returncode == 0 and "answered" in out,
          out + err)
    check("console script: run by its #! interpreter with -u",
          "EXE=/usr/bin/python3 CMD=/usr/bin/python3|-u|" + os.path.join(tools, "live-tool") + "|" + answer in out,
          out + err)

    write(os.path.join(tools, "bash-tool"), "#!/bin/bash\necho \"BASH-RAN $0 $1\"\n", 0o755)
    p = ddprun_run(["bash-tool", "x"], {"VIRTUAL_ENV": venv})
    check("a bash script without .py is exec'd as it is",
          p.returncode == 0 and "BASH-RAN " + os.path.join(tools, "bash-tool") + " x" in p.stdout, p.stdout + p.stderr)

    # ModuleNotFoundError: the summary names the interpreter and how to choose another.
    broken = os.path.join(tmp, "needs_module.py")
    write(broken, "import no_such_module_for_ddprun_test\n")
    p = ddprun_run([broken], {"VIRTUAL_ENV": venv})
    hint = ("no module named 'no_such_module_for_ddprun_test' in the workers' Python, " + venv_python +
            " (VIRTUAL_ENV=" + venv + ")")
    check("ModuleNotFoundError: the summary names the interpreter and PYTHON_EXEC",
          p.returncode == 1 and hint in p.stderr and "PYTHON_EXEC" in p.stderr, p.stderr)

    shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("FAILED: " + ", ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

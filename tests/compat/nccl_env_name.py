"""NCCL_ASYNC_ERROR_HANDLING, PyTorch 1.x's name, reaches a Python worker only when the torch it
would import is 1.x (ddprun's sitecustomize reads torch/version.py as text, without importing torch);
PyTorch 2.x warns about the name twice per rank. Real workers under ddprun, each with a torch package
of a chosen version first on its PYTHONPATH, dump their environment as the script sees it; then
sitecustomize's reading of version.py, by table.

Usage: nccl_env_name.py DDPRUN_BINARY
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SITECUSTOMIZE = os.path.join(HERE, "../../python/sitecustomize.py")
PYTHON = "/usr/bin/python3"

WORKER = """
import json, os, sys
import torch
with open(os.path.join(sys.argv[1], os.environ["RANK"] + ".json"), "w") as f:
    json.dump({"env": dict(os.environ), "torch": torch.__version__}, f)
"""
NO_TORCH_WORKER = """
import json, os, sys
with open(os.path.join(sys.argv[1], os.environ["RANK"] + ".json"), "w") as f:
    json.dump({"env": dict(os.environ), "torch": None}, f)
"""


def fake_torch(folder, version_py):
    """A package "torch" whose version.py is `version_py` and whose __init__ reads it, as torch's does."""
    package = os.path.join(folder, "torch")
    os.makedirs(package)
    with open(os.path.join(package, "version.py"), "w") as f:
        f.write(version_py)
    with open(os.path.join(package, "__init__.py"), "w") as f:
        f.write("from .version import __version__\n")
    return folder


def worker_sees(ddprun, python_path, extra_env=None, script=WORKER):
    """(NCCL_ASYNC_ERROR_HANDLING, torch.__version__) of rank 1 of a 2-worker job under ddprun."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "worker.py")
        with open(path, "w") as f:
            f.write(script)
        env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8",
               "PYTHON_EXEC": PYTHON, **(extra_env or {})}
        if python_path:
            env["PYTHONPATH"] = python_path
        result = subprocess.run([ddprun, "--pty", "off", "--standalone", "--nproc-per-node", "2", path, folder],
                                env=env, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise SystemExit(f"ddprun failed ({result.returncode}):\n{result.stderr[-3000:]}")
        with open(os.path.join(folder, "1.json")) as f:
            seen = json.load(f)
        return seen["env"].get("NCCL_ASYNC_ERROR_HANDLING"), seen["torch"], result.stderr


def has_torch(python):
    probe = "import importlib.util as u; print(u.find_spec('torch') is not None)"
    return subprocess.run([python, "-c", probe], capture_output=True, text=True).stdout.strip() == "True"


def sitecustomize_module():
    spec = importlib.util.spec_from_file_location("ddprun_sitecustomize_under_test", SITECUSTOMIZE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # under another name: it does nothing but define its functions
    return module


def main():
    ddprun = sys.argv[1]
    problems = []

    def expect(what, got, wanted):
        print(f"{what}: {got!r}")
        if got != wanted:
            problems.append(f"{what}: {got!r}, expected {wanted!r}")

    table = [
        ("__version__ = '1.13.0a0'\n", 1),  # Debian's
        ("__version__ = '2.11.0+cu130'\n", 2),  # pip's
        ("from typing import Optional\n__all__ = ['__version__']\n__version__: str = '2.5.1'\n", 2),
        ('__version__ = "1.8.1"\ndebug = False\n', 1),
        ("version = '1.13.0'\n", None),  # no __version__
        ("__version__ = 'unknown'\n", None),
        ("", None),
    ]
    major = sitecustomize_module()._torch_major
    for text, wanted in table:
        expect(f"_torch_major({text!r})", major(text), wanted)

    with tempfile.TemporaryDirectory() as folder:
        one = fake_torch(os.path.join(folder, "one"), "__version__ = '1.13.1'\n")
        two = fake_torch(os.path.join(folder, "two"), "__version__: str = '2.11.0+cu130'\n")
        value, version, _ = worker_sees(ddprun, one)
        expect("a worker whose torch is 1.13.1: NCCL_ASYNC_ERROR_HANDLING", (value, version), ("1", "1.13.1"))
        value, version, _ = worker_sees(ddprun, two)
        expect("a worker whose torch is 2.11.0: NCCL_ASYNC_ERROR_HANDLING", (value, version), (None, "2.11.0+cu130"))
        value, version, _ = worker_sees(ddprun, one, {"NCCL_ASYNC_ERROR_HANDLING": "0"})
        expect("a 1.13.1 worker, the user's NCCL_ASYNC_ERROR_HANDLING=0 kept", (value, version), ("0", "1.13.1"))
        # Debian's own torch (1.13), when /usr/bin/python3 has it; then an interpreter without any.
        if has_torch(PYTHON):
            value, version, _ = worker_sees(ddprun, None)
            expect("a worker of Debian's torch: NCCL_ASYNC_ERROR_HANDLING", (value, version.split(".")[0]), ("1", "1"))
        bare = shutil.which("python3", path=os.environ.get("PATH", ""))
        if bare and not has_torch(bare):
            value, _, _ = worker_sees(ddprun, None, {"PYTHON_EXEC": bare}, NO_TORCH_WORKER)
            expect(f"a worker of {bare}, which has no torch: NCCL_ASYNC_ERROR_HANDLING", value, None)
        else:
            print("not checked: a worker without torch (no python3 on PATH lacks torch)")

    for line in problems:
        print("FAILED:", line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

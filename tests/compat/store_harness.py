"""Shared helpers for the real-peer compatibility tests in tests/compat/.

Both test scripts talk to a store server through PyTorch's own TCPStore client (Debian's
python3-torch 1.13, i.e. the "legacy" wire dialect). The server is either ddprun-store or,
with --server torch, PyTorch's own 1.13 server running in a separate process (a self-check of
the tests: every assertion must pass against the real PyTorch server too).

This module is imported by the scripts (their directory is on sys.path), and it is also run
as a program by the --server torch mode:  python3 store_harness.py serve-torch PORT_FILE
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback

# ctest treats this exit status as "skipped" (SKIP_RETURN_CODE 77 in CMakeLists.txt).
SKIP = 77

HOST = "127.0.0.1"
HERE = os.path.dirname(os.path.abspath(__file__))


def import_torch_distributed_or_skip():
    """Returns the torch.distributed module, or exits 77 when this interpreter cannot provide it."""
    try:
        import torch.distributed as dist
    except Exception as error:  # ImportError, but also a broken install raising anything else
        print(f"SKIP: {sys.executable} cannot import torch.distributed ({error!r})", flush=True)
        sys.exit(SKIP)
    if not dist.is_available():
        print(f"SKIP: torch.distributed is not available in this build ({sys.executable})", flush=True)
        sys.exit(SKIP)
    return dist


def add_server_arguments(parser):
    parser.add_argument("store", nargs="?", default=os.environ.get("DDPRUN_STORE"),
                        help="path of the ddprun-store binary (default: $DDPRUN_STORE, "
                             "else build/bin/ddprun-store in this checkout)")
    parser.add_argument("--server", choices=("ddprun", "torch"), default="ddprun",
                        help="which server to test against: ddprun-store (default) or PyTorch's own "
                             "TCPStore server (a self-check of the test itself)")


def resolve_store_binary(args):
    if args.server != "ddprun":
        return None
    path = args.store or os.path.join(HERE, "..", "..", "build", "bin", "ddprun-store")
    path = os.path.abspath(path)
    if not os.access(path, os.X_OK):
        print(f"ERROR: ddprun-store not found or not executable: {path} "
              f"(pass its path as the first argument or set DDPRUN_STORE)", flush=True)
        sys.exit(2)
    return path


class Checks:
    """Counts and prints PASS/FAIL lines; the scripts exit non-zero if any check failed."""

    def __init__(self):
        self.failures = []

    def ok(self, name, condition, detail=""):
        if condition:
            print(f"PASS: {name}", flush=True)
        else:
            self.failures.append(name)
            print(f"FAIL: {name}" + (f": {detail}" if detail else ""), flush=True)
        return condition

    def equal(self, name, actual, expected):
        return self.ok(name, actual == expected, f"expected {short(expected)}, got {short(actual)}")

    def fail(self, name, detail):
        return self.ok(name, False, detail)

    def step(self, name, function, *args):
        """Runs one group of checks; an unexpected exception fails the group instead of the script."""
        print(f"--- {name}", flush=True)
        try:
            return function(*args)
        except Exception as error:
            self.fail(name, f"unexpected {type(error).__name__}: {error}")
            traceback.print_exc()
            return None

    @staticmethod
    def note(message):
        """An observation, not an assertion (e.g. a behaviour that differs by server and is allowed to)."""
        print(f"NOTE: {message}", flush=True)

    def summary(self):
        if self.failures:
            print(f"\n{len(self.failures)} check(s) FAILED:", flush=True)
            for name in self.failures:
                print(f"  - {name}", flush=True)
            return 1
        print("\nall checks passed", flush=True)
        return 0


def short(value, limit=80):
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(value) if hasattr(value, '__len__') else '?'} long)"


class StoreServer:
    """Runs the server under test in a child process and learns its port from a port file."""

    def __init__(self, kind, store_binary, workdir):
        self.kind = kind
        self.port_file = os.path.join(workdir, "port")
        self.log_path = os.path.join(workdir, "server.log")
        self.log = open(self.log_path, "wb")
        env = dict(os.environ)
        # A token in the environment would make ddprun-store demand authentication, which PyTorch
        # clients cannot provide.
        env.pop("DDPRUN_STORE_TOKEN", None)
        env.pop("DDPRUN_STORE_TOKEN_FILE", None)
        if kind == "ddprun":
            command = [store_binary, "--host", HOST, "--port", "0", "--port-file", self.port_file]
        else:
            command = [sys.executable, os.path.join(HERE, "store_harness.py"), "serve-torch", self.port_file]
        self.command = command
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=self.log,
                                        stderr=subprocess.STDOUT, env=env)
        self.port = self._wait_for_port(timeout=20.0)
        print(f"server: {kind} (pid {self.process.pid}) listening on {HOST}:{self.port}", flush=True)

    def _wait_for_port(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with status {self.process.returncode} before listening; "
                                   f"log:\n{self.log_text()}")
            try:
                with open(self.port_file) as f:
                    text = f.read().strip()
                if text:
                    return int(text)
            except FileNotFoundError:
                pass
            time.sleep(0.02)
        self.process.kill()
        raise RuntimeError(f"no port file after {timeout} s; log:\n{self.log_text()}")

    def log_text(self):
        self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def alive(self):
        return self.process.poll() is None

    def stop(self, grace=5.0):
        """SIGTERM, then wait up to `grace` seconds. Returns (exit status or None if it hung, seconds)."""
        if not self.alive():
            return self.process.returncode, 0.0
        start = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            status = self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            status = None
        return status, time.monotonic() - start

    def kill(self):
        if self.alive():
            self.process.kill()
            self.process.wait()


def serve_torch(port_file):
    """The --server torch mode: PyTorch's own TCPStore server on a free port, until SIGTERM (exit 0)."""
    import datetime

    dist = import_torch_distributed_or_skip()
    # Blocked and taken with sigwait: a handler setting a threading.Event could deadlock against
    # Event.wait holding the Event's lock in the same (main) thread.
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM, signal.SIGINT])
    # world_size=None and wait_for_workers=False: serve only, never wait for a worker count.
    server = dist.TCPStore(HOST, 0, None, True, datetime.timedelta(seconds=30), wait_for_workers=False)
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{server.port}\n")
    os.rename(tmp, port_file)  # atomic: a poller never sees half a number
    print(f"torch TCPStore server on {HOST}:{server.port}", flush=True)
    signal.sigwait([signal.SIGTERM, signal.SIGINT])
    return 0


def temp_workdir():
    return tempfile.TemporaryDirectory(prefix="ddprun-compat-")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("serve-torch",))
    parser.add_argument("port_file")
    arguments = parser.parse_args()
    sys.exit(serve_torch(arguments.port_file))

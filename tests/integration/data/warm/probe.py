# What a worker sees of its start, written as JSON to OUT/<RANK>.json: run warm (--preload) and cold,
# the two records must be the same but for sys.modules (tests/integration/warm_start_test.cpp).
# Usage: probe.py OUT [ok|exit3|raise|kill9] [stdin|nostdin]
_globals_at_start = sorted(globals())
import ctypes
import json
import os
import signal
import sys

out, action, stdin_mode = sys.argv[1], sys.argv[2], sys.argv[3]
rank = int(os.environ["RANK"])


def c_environ():
    libc = ctypes.CDLL(None)
    entries = ctypes.POINTER(ctypes.c_char_p).in_dll(libc, "environ")
    values, i = [], 0
    while entries[i] is not None:
        values.append(entries[i].decode("utf-8", "surrogateescape"))
        i += 1
    return values


def terminal(fd):
    import termios

    if not os.isatty(fd):
        return {"tty": False}
    attrs = termios.tcgetattr(fd)
    try:
        foreground = os.tcgetpgrp(fd) == os.getpgrp()
    except OSError as error:  # not this process's controlling terminal
        foreground = error.strerror
    return {"tty": True, "name": os.ttyname(fd), "foreground": foreground,
            "mode": attrs[:6], "chars": [c if isinstance(c, int) else c.hex() for c in attrs[6]],
            "size": list(os.get_terminal_size(fd))}


def descriptors():
    found = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink("/proc/self/fd/" + name)
        except OSError:
            continue  # listdir's own descriptor, closed since
        kind = target.split(":")[0] if ":[" in target else target
        found[name] = kind
    return found


def status_lines():
    keep = ("SigBlk", "SigIgn", "SigCgt", "Cpus_allowed_list", "NoNewPrivs", "Seccomp")
    with open("/proc/self/status") as f:
        return [line.strip() for line in f if line.startswith(keep)]


def handlers():
    named = {}
    for signo in sorted(signal.valid_signals()):
        try:
            handler = signal.getsignal(signo)
        except (ValueError, OSError):
            continue
        if handler in (signal.SIG_DFL, signal.SIG_IGN, None):
            named[str(int(signo))] = str(handler)
        else:
            named[str(int(signo))] = getattr(handler, "__qualname__", repr(handler))
    return named


import __main__

stdin_bytes = sys.stdin.buffer.read().decode("latin-1") if stdin_mode == "stdin" else None
umask = os.umask(0)
os.umask(umask)
ppid = os.getppid()
with open("/proc/%d/comm" % ppid) as f:
    parent = f.read().strip()
record = {
    "argv": sys.argv,
    "orig_argv": sys.orig_argv,
    "executable": sys.executable,
    "flags": repr(sys.flags),
    "name": __name__,
    "path0": sys.path[0],
    "path": sys.path,
    "main_file": getattr(__main__, "__file__", None),
    "main_spec": getattr(getattr(__main__, "__spec__", None), "name", None),
    "globals_at_start": _globals_at_start,
    "environ": dict(os.environ),
    "c_environ": sorted(c_environ()),
    "cwd": os.getcwd(),
    "terminals": [terminal(fd) for fd in (0, 1, 2)],
    "stdio": [[s.encoding, s.errors, s.line_buffering, getattr(s, "write_through", None)]
              for s in (sys.stdin, sys.stdout, sys.stderr)],
    "pgid_is_pid": os.getpgid(0) == os.getpid(),
    "sid_is_pid": os.getsid(0) == os.getpid(),
    "sid_is_parents": os.getsid(0) == os.getsid(ppid),
    "parent": parent,
    "descriptors": descriptors(),
    "status": status_lines(),
    "handlers": handlers(),
    "umask": umask,
    "nice": os.nice(0),
    "affinity": sorted(os.sched_getaffinity(0)),
    "rlimit_nofile": list(__import__("resource").getrlimit(__import__("resource").RLIMIT_NOFILE)),
    "stdin": stdin_bytes,
    "modules": sorted(sys.modules),
    "pid": os.getpid(),
}
with open("%s/%d.json.tmp" % (out, rank), "w") as f:
    json.dump(record, f, indent=1, sort_keys=True)
os.rename("%s/%d.json.tmp" % (out, rank), "%s/%d.json" % (out, rank))
print("rank %d wrote its record" % rank, flush=True)
print("rank %d to stderr" % rank, file=sys.stderr, flush=True)

if rank == 1 and action != "ok":
    # Fails once rank 0 has ended, so that the failure summary is the same every run.
    import time

    while not os.path.exists("%s/0.json" % out):
        time.sleep(0.01)
    with open("%s/0.json" % out) as f:
        first = json.load(f)["pid"]
    while os.path.exists("/proc/%d" % first):
        time.sleep(0.01)
    if action == "exit3":
        sys.exit(3)
    if action == "raise":
        raise ValueError("probe failed on purpose")
    if action == "kill9":
        os.kill(os.getpid(), signal.SIGKILL)

"""ddprun's warm interpreter (--preload): imports the modules before the worker exists, then becomes it.

ddprun starts a warm interpreter with the worker's own command line (`python -u train.py ARGS`), in the
worker's own process set-up (process group or session, pty, cgroup, CPU binding, death with ddprun),
with the environment every rank shares and three more variables: DDPRUN_WARM_FD, the descriptor of
a socket to ddprun, DDPRUN_PRELOAD, the modules, and DDPRUN_WARM_PROTOCOL, the version of what
follows that this ddprun speaks (an upgrade while a job runs gives its interpreters a newer file).
ddprun's sitecustomize calls become_worker() while Python starts (site.py imports sitecustomize
before the script runs). On that socket:

    interpreter -> ddprun   "hello\\n"                 at once: this interpreter is ours and waits
                            "ready\\n"                 the modules are imported
                            "failed TEXT\\n"           an import failed (TEXT: the exception, one line)
                            "cuda TEXT\\n"             an import initialised CUDA (cuInit ran)
    ddprun -> interpreter   "go N STDIN\\n" + N bytes: NUL-terminated strings: the executable, the
                            number of arguments, the arguments, then every NAME=VALUE of the worker's
                            environment; exactly what a cold worker is exec'd with. STDIN: "keep", or
                            "null": the worker does not read ddprun's stdin, reopen it on /dev/null.

On "go" the socket is closed and the interpreter takes the worker's environment (os.environ and the C
environment both), then returns: Python goes on to run the script (or -m module) exactly as a cold
worker, sys.argv, sys.path[0] and __main__ made by Python itself. After a failed or refused preload it
execs the cold command instead (same pid, process group, terminal, cgroup): a fresh interpreter. A
go it cannot read, or a ddprun of another protocol, ends it with exit 1 and a line on its stderr:
never does the script run with the shared environment.
"""
import os
import sys

_READ_CHUNK = 1 << 16
PROTOCOL = "1"  # launcher/workers/warm_plan.hpp's kWarmProtocol

# True while the modules are imported: ddprun_progress, imported then, waits for the worker's
# DDPRUN_PROGRESS_FILE instead of reading an environment that has none.
preloading = False


def _send(fd, line):
    data = line.encode("utf-8", "replace")
    while data:
        data = data[os.write(fd, data):]


def _read_exactly(fd, count):
    parts = []
    while count > 0:
        chunk = os.read(fd, min(count, _READ_CHUNK))
        if not chunk:
            return None
        parts.append(chunk)
        count -= len(chunk)
    return b"".join(parts)


def _read_go(fd):
    """(executable, argv, env as a bytes dict, null_stdin) from the go message; None when ddprun
    closed the socket; ValueError when the message is not one."""
    header = b""
    while not header.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            return None
        header += byte
        if len(header) > 64:
            raise ValueError(f"a header of more than 64 bytes: {header[:64]!r}")
    words = header.split()
    if len(words) != 3 or words[0] != b"go" or not words[1].isdigit() or words[2] not in (b"keep", b"null"):
        raise ValueError(f"the header {header!r}")
    size = words[1]
    payload = _read_exactly(fd, int(size))
    if payload is None:
        return None
    fields = payload.split(b"\0")[:-1]
    if len(fields) < 2 or not fields[1].isdigit() or len(fields) < 2 + int(fields[1]):
        raise ValueError("a payload without its executable and arguments")
    argc = int(fields[1])
    argv = fields[2:2 + argc]
    env = {}
    for entry in fields[2 + argc:]:
        name, _, value = entry.partition(b"=")
        env[name] = value
    return fields[0], argv, env, words[2] == b"null"


def _path0():
    """What Python will put first on sys.path for this command line (the script's folder, symlinks
    resolved; the working folder for -m), so that a preloaded module is the one the script would
    import; None where Python adds nothing (-P, PYTHONSAFEPATH)."""
    if getattr(sys.flags, "safe_path", False):
        return None
    argv0 = sys.argv[0] if sys.argv else ""
    if argv0 == "-m":
        return os.getcwd()
    if argv0 in ("", "-c", "-"):
        return ""
    return os.path.dirname(os.path.realpath(argv0))


def _one_line(error):
    text = " ".join(str(error).split())
    name = type(error).__name__
    return f"{name}: {text}" if text else name


def _preload(modules):
    """None when every module imported; ("failed", text) otherwise."""
    global preloading
    import importlib

    preloading = True
    path0 = _path0()
    if path0 is not None:
        sys.path.insert(0, path0)
    try:
        for name in modules:
            try:
                importlib.import_module(name)
            except BaseException as error:  # SystemExit and KeyboardInterrupt at import are failures too
                return "failed", f"{name}: {_one_line(error)}"
    finally:
        preloading = False
        if path0 is not None and sys.path and sys.path[0] == path0:
            del sys.path[0]
    return None


def _mapped_libcuda():
    """The path of the CUDA driver library when it is mapped into this process, else None."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                path = line.rstrip("\n").split(" ", 5)[-1].strip()
                if os.path.basename(path).startswith("libcuda.so"):
                    return path
    except OSError:
        return None
    return None


_CUDA_ERROR_NOT_INITIALIZED = 3


def _cuda_initialised():
    """Whether cuInit has run in this process: then CUDA_VISIBLE_DEVICES has been read, and a worker
    given other devices would not see them. torch.cuda.is_initialized() for torch's own context;
    for any library (torch.cuda.is_available() too), the driver itself: every driver call but cuInit
    returns CUDA_ERROR_NOT_INITIALIZED until cuInit has been called (CUDA Driver API, Initialization)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_initialized():
                return True
        except Exception:
            pass
    path = _mapped_libcuda()
    if path is None:
        return False
    import ctypes

    try:
        driver = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        count = ctypes.c_int(0)
        return driver.cuDeviceGetCount(ctypes.byref(count)) != _CUDA_ERROR_NOT_INITIALIZED
    except (OSError, AttributeError):
        return False


def _take_environment(env):
    """The worker's environment, exactly: os.environ, and the C environment (what getenv and a
    library's own reads see), with nothing of the warm interpreter's left in either."""
    import ctypes

    os.environb.clear()
    ctypes.CDLL(None).clearenv()  # also what a preloaded library set behind os.environ's back
    os.environb.update(env)


def _stop(why):
    """This interpreter cannot become its worker: a failure of that worker, said on its stderr."""
    print(f"ddprun: warm interpreter: {why}", file=sys.stderr, flush=True)
    os._exit(1)


def become_worker():
    fd = int(os.environ.pop("DDPRUN_WARM_FD"))
    modules = [name for name in os.environ.pop("DDPRUN_PRELOAD", "").split(",") if name]
    protocol = os.environ.pop("DDPRUN_WARM_PROTOCOL", "")
    if protocol != PROTOCOL:
        why = (f"{__file__} speaks protocol {PROTOCOL}, the ddprun that started it {protocol or 'none'} "
               "(was ddprun changed while the job ran?)")
        _send(fd, f"failed {why}\n")
        _stop(why)
    _send(fd, "hello\n")
    problem = _preload(modules)
    if problem is None and _cuda_initialised():
        problem = "cuda", ",".join(modules)
    _send(fd, "ready\n" if problem is None else f"{problem[0]} {problem[1]}\n")
    try:
        go = _read_go(fd)
    except ValueError as error:
        _stop(f"ddprun's go message cannot be read: {error}")
    os.close(fd)
    if go is None:  # ddprun is gone or gave this interpreter up (and kills it): nothing to become
        os._exit(1)
    executable, argv, env, null_stdin = go
    if null_stdin:  # as a worker that does not read ddprun's stdin is started: on /dev/null
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
    if problem is not None:
        os.execve(executable, argv, env)  # cold: a fresh interpreter, in this same process
    _take_environment(env)
    progress = sys.modules.get("ddprun_progress")
    if progress is not None:  # imported by the preload: its file is this worker's
        progress._resolve()

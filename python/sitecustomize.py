"""ddprun's sitecustomize: lets ddprun see a Python worker's stack, with no change to the script.

ddprun puts this folder first on its workers' PYTHONPATH, so Python imports this module at start-up
(site.py imports "sitecustomize"). It is never installed into a user's environment. It does these
things and nothing else:

1. When DDPRUN_PYTHON_STACKS_FILE and DDPRUN_STACKS_SIGNAL are set (ddprun sets them for each
   worker), it registers faulthandler for that signal (SIGURG), writing every thread's Python
   frames to that file (appended: ddprun reads what each dump adds). faulthandler's handler is C
   code that runs in the signal handler itself, so the dump comes even while the main thread is
   blocked in C (a collective, time.sleep). The two variables are then removed from the
   environment, so that processes this worker starts (DataLoader workers, subprocesses) neither
   register nor write to the same file. SIGURG's default action is to ignore it: a process that
   has not registered, or that exec'd since (its new image has the default action again), drops
   ddprun's signal rather than dying of it. chain=False: the previous action is that default.
2. When the torch this interpreter would import is PyTorch 1.x, it sets NCCL_ASYNC_ERROR_HANDLING=1
   (unless it is set), as torchrun 1.x does: PyTorch 1.x reads that name, while 2.x reads
   TORCH_NCCL_ASYNC_ERROR_HANDLING (which ddprun sets for every worker) and warns, twice per rank,
   when the old name is set. Only here can the worker's own torch be known: the interpreter and its
   sys.path decide which torch a worker imports. torch is found without being imported
   (importlib.util.find_spec's walk of sys.meta_path, then torch/version.py read as text), before the worker imports it, so
   its NCCL process groups see the variable; no torch, or no readable version, sets nothing.
0. With --preload (DDPRUN_WARM_FD set), before the rest: this interpreter was started ahead of its
   worker; ddprun_warm imports the modules, waits for the worker's environment and takes it, so that
   what follows sees the worker's variables, as in a cold worker (ddprun_warm.py says how).
3. It then runs the sitecustomize this one shadows (the user's, a virtual environment's, the
   distribution's), if any, exactly as Python would have, so a user's own sitecustomize still runs
   and is the module "sitecustomize" afterwards.
"""
import os as _os
import sys as _sys


def _register_stack_dump():
    path = _os.environ.pop("DDPRUN_PYTHON_STACKS_FILE", None)
    signo = _os.environ.pop("DDPRUN_STACKS_SIGNAL", None)
    if not path or not signo:
        return
    try:
        import faulthandler

        stream = open(path, "a", encoding="utf-8")
        faulthandler.register(int(signo), file=stream, all_threads=True, chain=False)
        # faulthandler keeps a reference to the file; keep one too, for clarity.
        globals()["_ddprun_stacks_file"] = stream
    except Exception as error:  # never stop a worker over a diagnostic aid
        print(f"ddprun sitecustomize: no stack dumps: {error}", file=_sys.stderr)


def _torch_major(version_py_text):
    """The major version in the text of torch/version.py ("__version__ = '1.13.0a0'" -> 1; PyTorch
    2.x may annotate it: "__version__: str = '2.11.0+cu130'"); None when the text names none."""
    for line in version_py_text.splitlines():
        name, equals, value = line.partition("=")
        if equals and name.split(":")[0].strip() == "__version__":
            major = value.strip().strip("'\"").split(".")[0]
            return int(major) if major.isdigit() else None
    return None


def _find_spec(name):
    """importlib.util.find_spec(name) for a top-level name, without importing importlib.util (which
    costs a worker that never imports torch several milliseconds: contextlib, functools, ...): the
    same walk over sys.meta_path, so path entries, zip files and editable installs' finders count."""
    for finder in _sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        spec = find_spec(name, None) if find_spec is not None else None
        if spec is not None:
            return spec
    return None


def _set_legacy_nccl_name():
    if "NCCL_ASYNC_ERROR_HANDLING" in _os.environ:
        return
    try:
        spec = _find_spec("torch")
        if spec is None or not spec.submodule_search_locations:
            return
        for folder in spec.submodule_search_locations:
            path = _os.path.join(folder, "version.py")
            if _os.path.isfile(path):
                with open(path, encoding="utf-8") as f:
                    if _torch_major(f.read()) == 1:
                        _os.environ["NCCL_ASYNC_ERROR_HANDLING"] = "1"
                return
    except Exception:  # a broken torch install is the worker's to report, when it imports torch
        return


def _run_shadowed_sitecustomize():
    here = _os.path.dirname(_os.path.abspath(__file__))

    def ours(entry):
        return _os.path.abspath(entry or _os.curdir) == here

    saved = [(index, entry) for index, entry in enumerate(_sys.path) if ours(entry)]
    this_module = _sys.modules.pop("sitecustomize", None)
    _sys.path[:] = [entry for entry in _sys.path if not ours(entry)]
    try:
        import importlib

        importlib.import_module("sitecustomize")
    except ImportError as error:
        if error.name != "sitecustomize":
            raise
        if this_module is not None:
            _sys.modules["sitecustomize"] = this_module
    finally:
        # Back where it was (ddprun_progress is imported from here too), keeping what the other
        # sitecustomize may have added.
        for index, entry in saved:
            _sys.path.insert(index, entry)


def _become_worker_when_warm():
    """--preload: this interpreter was started ahead of its worker (ddprun_warm.py): import the
    modules, wait for the worker's environment, take it. Nothing may go on with the shared
    environment of a warm interpreter: any failure here ends this process."""
    if "DDPRUN_WARM_FD" not in _os.environ:
        return
    try:
        import ddprun_warm

        ddprun_warm.become_worker()
    except BaseException as error:
        print(f"ddprun: warm interpreter: {type(error).__name__}: {error}", file=_sys.stderr)
        _os._exit(1)


# Loaded under another name (tests/compat/nccl_env_name.py reads _torch_major), it does nothing.
if __name__ == "sitecustomize":
    _become_worker_when_warm()
    _register_stack_dump()
    _set_legacy_nccl_name()
    _run_shadowed_sitecustomize()

"""ddprun's sitecustomize: lets ddprun see a Python worker's stack, with no change to the script.

ddprun puts this folder first on its workers' PYTHONPATH, so Python imports this module at start-up
(site.py imports "sitecustomize"). It does two things and nothing else:

1. When DDPRUN_PYTHON_STACKS_FILE and DDPRUN_STACKS_SIGNAL are set (ddprun sets them for each
   worker), it registers faulthandler for that signal (a real-time one, SIGRTMAX-3), writing every
   thread's Python frames to that file (appended: ddprun reads what each dump adds). faulthandler's
   handler is C code that runs in the signal handler itself, so the dump comes even while the main
   thread is blocked in C (a collective, time.sleep). The two variables are then removed from the
   environment, so that processes this worker starts (DataLoader workers, subprocesses) neither
   register nor write to the same file. chain=False: the signal's previous action is the default
   one, which would end the process; ddprun only sends the signal to a process whose
   /proc/PID/status shows it caught.
2. It then runs the sitecustomize this one shadows (the user's, a virtual environment's, the
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


_register_stack_dump()
_run_shadowed_sitecustomize()

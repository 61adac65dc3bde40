"""gdb script (gdb -batch -iex 'set non-stop on' -p PID -x THIS) for examples_test.py's
fashion_python_late_thread case: makes one of PyTorch's gloo worker threads late, as a loaded
machine can, at the worst moment, and lets it go once the main thread is done with the process group.

Once $DDPRUN_LATE_THREAD_DIR/armed exists, the next ProcessGroupGloo::AsyncWork::execute is followed
to its return: the collective has run and its waiter was woken, but this thread still holds the
work (and so the tensors it was given). Only this thread is stopped (non-stop mode); the trainer goes
on. The thread is let go when the trainer has called destroy_process_group and its main thread has
then been asleep for a second (blocked: in PyTorch's join of the gloo threads), or after 90 s.
Writes gdb-ready (attached, breakpoint set), held, released or no-symbol into that folder."""
import os
import time
from pathlib import Path

import gdb

folder = Path(os.environ["DDPRUN_LATE_THREAD_DIR"])
pid = gdb.selected_inferior().pid
state = {"entry": None, "held": False}


def main_thread_state():
    try:
        stat = Path(f"/proc/{pid}/task/{pid}/stat").read_text()
    except OSError:
        return "gone"
    return stat[stat.rfind(")") + 2]


class Execute(gdb.Breakpoint):
    """The entry of AsyncWork::execute, once armed: stop this thread to follow it to its return."""

    def stop(self):
        if state["entry"] is not None or not (folder / "armed").exists():
            return False
        state["entry"] = (gdb.selected_thread().num, gdb.newest_frame().older().pc())
        return True


class Late(gdb.Breakpoint):
    """Just after AsyncWork::execute returned, in the thread followed."""

    def stop(self):
        (folder / "held").write_text(str(gdb.selected_thread().ptid))
        deadline = time.monotonic() + 90
        asleep_since = None
        while time.monotonic() < deadline:
            if (folder / "destroying").exists():
                if main_thread_state() in ("S", "D", "gone"):
                    asleep_since = asleep_since or time.monotonic()
                    if time.monotonic() - asleep_since >= 1.0:
                        break
                else:
                    asleep_since = None
            time.sleep(0.05)
        state["held"] = True
        return True


execute = Execute("c10d::ProcessGroupGloo::AsyncWork::execute")
if execute.pending or not execute.locations:
    (folder / "no-symbol").touch()
else:
    (folder / "gdb-ready").touch()
    late = None
    for _ in range(1000):
        if state["held"]:
            break
        if state["entry"] is not None and late is None:
            thread, return_pc = state["entry"]
            execute.enabled = False
            late = Late(f"*{return_pc:#x}", internal=True)
            late.thread = thread
        try:
            gdb.execute("continue -a")
        except gdb.error as error:  # the process is gone
            print(f"hold_gloo_thread: {error}")
            break
    (folder / "released").touch()
gdb.execute("detach")

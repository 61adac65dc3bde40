"""Runs a Python trainer unchanged (argv[1], with its arguments) as a worker, for examples_test.py's
fashion_python_late_thread case. On rank 0 it first waits for gdb (hold_gloo_thread_gdb.py) to be
attached, then marks two moments in $DDPRUN_LATE_THREAD_DIR, which gdb watches:
  armed       just before test_accuracy's all_reduce of `counts` (an int64 tensor of 2 elements):
              gdb holds the gloo thread that runs it once it has run it, before it drops the work
  destroying  when the trainer calls dist.destroy_process_group()
Other ranks run the trainer as it is."""
import os
import runpy
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

folder = Path(os.environ["DDPRUN_LATE_THREAD_DIR"])
script = sys.argv[1]
sys.argv = sys.argv[1:]
if os.environ.get("RANK") == "0":
    (folder / "rank0.pid").write_text(str(os.getpid()))
    deadline = time.monotonic() + 120
    while not (folder / "gdb-ready").exists() and time.monotonic() < deadline:
        time.sleep(0.05)

    all_reduce, destroy_process_group = dist.all_reduce, dist.destroy_process_group

    def armed_all_reduce(tensor, *args, **kwargs):
        if tensor.dtype == torch.int64 and tensor.numel() == 2:
            (folder / "armed").touch()
        return all_reduce(tensor, *args, **kwargs)

    def marked_destroy_process_group(*args, **kwargs):
        (folder / "destroying").touch()
        return destroy_process_group(*args, **kwargs)

    dist.all_reduce, dist.destroy_process_group = armed_all_reduce, marked_destroy_process_group
runpy.run_path(script, run_name="__main__")

"""The worker of bench/warm_bench.py (stdlib + torch): a PyTorch gloo rank that records its moments.

Each rank: init_process_group("gloo") (env://), one all_reduce, then writes
$WARM_BENCH_DIR/up.<attempt>.<rank> as JSON: the wall-clock time (time.time()) at the script's first
line, after `import torch`, after init_process_group and after the all_reduce; its pid; and whether
torch was already imported when the script began (a warm interpreter, ddprun --preload torch).

With WARM_BENCH_FAIL_RANK=R set, on attempt 0 (TORCHELASTIC_RESTART_COUNT == "0") rank R sleeps
WARM_BENCH_FAIL_AFTER seconds (default 8), writes time.time() to $WARM_BENCH_DIR/fail and calls
os._exit(1); the other ranks of attempt 0 sleep until the launcher stops them. Every other run exits 0
right after writing its file.
"""
import json
import os
import sys
import time

t_start = time.time()
preloaded = "torch" in sys.modules

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

t_import = time.time()
dist.init_process_group("gloo", init_method="env://")
t_init = time.time()
tensor = torch.ones(1)
dist.all_reduce(tensor)
t_allreduce = time.time()

rank = dist.get_rank()
world = dist.get_world_size()
attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
folder = os.environ["WARM_BENCH_DIR"]
if tensor.item() != world:
    print(f"rank {rank}: all_reduce gave {tensor.item()}, expected {world}", file=sys.stderr, flush=True)
    os._exit(3)
record = {"start": t_start, "import": t_import, "init": t_init, "allreduce": t_allreduce,
          "pid": os.getpid(), "preloaded": preloaded, "world": world}
path = os.path.join(folder, f"up.{attempt}.{rank}")
with open(path + ".tmp", "w") as f:
    json.dump(record, f)
os.rename(path + ".tmp", path)

fail_rank = os.environ.get("WARM_BENCH_FAIL_RANK")
if fail_rank is not None and attempt == "0":
    if rank == int(fail_rank):
        time.sleep(float(os.environ.get("WARM_BENCH_FAIL_AFTER", "8")))
        failed_at = time.time()
        with open(os.path.join(folder, "fail.tmp"), "w") as f:
            f.write(repr(failed_at))
        os.rename(os.path.join(folder, "fail.tmp"), os.path.join(folder, "fail"))
        os._exit(1)
    time.sleep(3600)

# Under --pty on, with a restart (tests/integration/warm_start_test.cpp). Each worker records itself
# in OUT/attempt<A>_rank<R>.json (pid, whether it started warm, the sizes of its stdout's and
# stderr's terminals). Attempt 0: rank 1 exits 7 once OUT/fail exists, rank 0 waits to be stopped.
# Attempt 1: rank 0 says "ready", reads a line from its terminal and says what it got; rank 1 exits 0.
# Usage: terminal_restart.py OUT
import sys

warm = sorted(name for name in ("ddprun_warm", "json") if name in sys.modules)
import json
import os
import time

out = sys.argv[1]
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
rank = int(os.environ["RANK"])
record = {"pid": os.getpid(), "warm": warm, "size": [list(os.get_terminal_size(fd)) for fd in (1, 2)]}
path = "%s/attempt%d_rank%d.json" % (out, attempt, rank)
with open(path + ".tmp", "w") as f:
    json.dump(record, f)
os.rename(path + ".tmp", path)
if attempt == 0:
    while not (rank == 1 and os.path.exists(out + "/fail")):
        time.sleep(0.02)
    sys.exit(7)
if rank == 0:
    print("ready", flush=True)
    print("rank 0 got", input(), flush=True)

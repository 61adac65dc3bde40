# A worker whose attempts the test drives (tests/integration/warm_start_test.cpp). Each records itself
# in OUT/attempt<A>_rank<R>.json (pid, ranks, the restart count, and which of ddprun_warm and json
# it found imported at its first line: a warm worker has both), then waits: it exits 0 once OUT/end
# exists; in attempt 0, rank 1 exits 7 once OUT/fail exists (the test's failure, for a restart).
# Usage: restart.py OUT
import sys

warm = sorted(name for name in ("ddprun_warm", "json") if name in sys.modules)

import json
import os
import time

out = sys.argv[1]
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
rank = int(os.environ["RANK"])
record = {
    "pid": os.getpid(),
    "rank": rank,
    "local_rank": int(os.environ["LOCAL_RANK"]),
    "restart_count": os.environ["TORCHELASTIC_RESTART_COUNT"],
    "world_size": int(os.environ["WORLD_SIZE"]),
    "warm": warm,
    "modules": sorted(sys.modules),
}
path = "%s/attempt%d_rank%d.json" % (out, attempt, rank)
with open(path + ".tmp", "w") as f:
    json.dump(record, f)
os.rename(path + ".tmp", path)
while True:
    if os.path.exists(out + "/end"):
        sys.exit(0)
    if attempt == 0 and rank == 1 and os.path.exists(out + "/fail"):
        sys.exit(7)
    time.sleep(0.02)

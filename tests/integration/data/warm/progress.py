# A worker that reports progress through ddprun_progress (step 10 + RANK, samples 100 * step, a
# text), records itself (OUT/<RANK>.json: pid, whether it started warm, what it imported), then
# waits for OUT/end (tests/integration/warm_start_test.cpp).
# Usage: progress.py OUT
import sys

warm = sorted(name for name in ("ddprun_warm", "json") if name in sys.modules)
import json
import os
import time

import ddprun_progress

out, rank = sys.argv[1], int(os.environ["RANK"])
step = 10 + rank
ddprun_progress.report(step, 100 * step, "rank %d at step %d" % (rank, step))
with open("%s/%d.json.tmp" % (out, rank), "w") as f:
    json.dump({"pid": os.getpid(), "warm": warm, "modules": sorted(sys.modules),
               "progress_enabled": ddprun_progress.enabled()}, f)
os.rename("%s/%d.json.tmp" % (out, rank), "%s/%d.json" % (out, rank))
while not os.path.exists(out + "/end"):
    time.sleep(0.02)

# A worker that records whether it started warm (OUT/<RANK>.json), then sleeps in sleep_here (line 15):
# a hang for --hang-timeout, and a stack for `ddprun stacks` (tests/integration/warm_start_test.cpp).
# Usage: sleepy.py OUT
import sys

warm = sorted(name for name in ("ddprun_warm", "json") if name in sys.modules)
import json
import os
import time

out, rank = sys.argv[1], int(os.environ["RANK"])


def sleep_here():
    time.sleep(600)


with open("%s/%d.json.tmp" % (out, rank), "w") as f:
    json.dump({"pid": os.getpid(), "warm": warm}, f)
os.rename("%s/%d.json.tmp" % (out, rank), "%s/%d.json" % (out, rank))
sleep_here()

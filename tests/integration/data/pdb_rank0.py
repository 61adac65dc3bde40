# Rank 0 stops in pdb (the usual way to debug a DDP script); the others finish at once.
import os
import sys

x = 41
if os.environ["RANK"] == "0":
    breakpoint()
print("rank", os.environ["RANK"], "done", flush=True)
sys.exit(0)

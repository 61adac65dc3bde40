# Attempt 0: rank 0 fails before reading anything. Attempt 1: rank 0 reads a line of its stdin.
import os
import sys

if os.environ["RANK"] == "0":
    if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
        sys.exit(3)
    print("ready", flush=True)
    print("rank 0 got", input(), flush=True)

# Each rank reads one line of its stdin and says what it got, or that its input had ended.
import os

rank = os.environ["RANK"]
try:
    answer = input()
    print(f"rank {rank} got {answer}", flush=True)
except EOFError:
    print(f"rank {rank} EOF", flush=True)

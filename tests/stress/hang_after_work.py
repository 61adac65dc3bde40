"""A job that does its work and then never ends: the test of end_of_job_hang.py's own watchdog
(--scenario watchdog). Rank 0 prints `work done` and exits; every other rank prints nothing more
and sleeps for ever in hang_after_work(), which the watchdog's dump must show."""
import os
import time


def hang_after_work():
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    if os.environ.get("RANK") == "0":
        print("work done", flush=True)
    else:
        hang_after_work()

#!/usr/bin/python3
"""Launch over ssh (issue 14): a job of 3 hosts x 2 workers started from one machine, in the same
run two ways: `ddprun --hostfile` (one command) against the way users do it today, one ssh per host
running torchrun-anchor with static rendezvous. The hosts are network namespaces running OpenSSH's
sshd; the launching machine is a fourth (build/bin/ssh_launch sets them up; needs root).

Usage: bench/ssh_bench.py [FILTER] [options]       (stdlib only; see docs/performance.md)

  ssh_launch_3x2  per run and way: from the command to all 6 workers running, and to its exit;
                  the medians and their ratios (anchor / ddprun: above 1, ddprun is faster)
"""
import argparse
import subprocess
import sys
from pathlib import Path

from bench_common import BenchError, run_harness

REPO = Path(__file__).resolve().parent.parent


def bench_launch(a):
    done = subprocess.run([a.ssh_launch, "--ddprun", a.ddprun, "--anchor", a.anchor, "--runs", str(a.ssh_runs)],
                          capture_output=True, text=True, timeout=60 * (a.ssh_runs + 2))
    sys.stdout.write(done.stdout)
    if done.returncode != 0:
        raise BenchError(f"ssh_launch exited {done.returncode}: {done.stderr.strip()}")


BENCHMARKS = {"ssh_launch_3x2": bench_launch}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("filter", nargs="?", default="")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--ssh-launch", default=str(REPO / "build" / "bin" / "ssh_launch"))
    parser.add_argument("--ddprun", default=str(REPO / "build" / "bin" / "ddprun"))
    parser.add_argument("--anchor", default=str((REPO / ".." / "shared" / "tools" / "torchrun-anchor").resolve()))
    parser.add_argument("--ssh-runs", type=int, default=5)
    a = parser.parse_args()
    return run_harness(BENCHMARKS, a, lambda chosen: [a.ssh_launch, a.ddprun, a.anchor])


if __name__ == "__main__":
    sys.exit(main())

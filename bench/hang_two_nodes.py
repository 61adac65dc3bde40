#!/usr/bin/env python3
"""Two agents on loopback (a static job of 2 nodes x 4 plain_sgd workers, rank 1 stalled before its
first all-reduce, --hang-timeout 3): the time from node 0's "hang: no rank made progress" line to its
own digest, and to the whole job's digest (node 1's stacks through the job board). Issue 13.

    /usr/bin/python3 bench/hang_two_nodes.py [PLAIN_SGD] [--ddprun DDPRUN] [--runs N]
"""
import argparse
import os
import socket
import subprocess
import time

parser = argparse.ArgumentParser()
parser.add_argument("plain_sgd", nargs="?", default="build/bin/plain_sgd")
parser.add_argument("--ddprun", default="build/bin/ddprun")
parser.add_argument("--runs", type=int, default=3)
args = parser.parse_args()
ddprun, sgd = args.ddprun, args.plain_sgd


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(node_rank, port, run):
    return subprocess.Popen(
        [ddprun, "--nnodes=2", f"--node_rank={node_rank}", "--master_addr=127.0.0.1", f"--master_port={port}",
         "--nproc_per_node=4", f"--rdzv_id=hang2-{os.getpid()}-{run}", "--hang-timeout", "3",
         "--log-dir", f"/tmp/ddprun-hang2-{os.getpid()}/logs{node_rank}", sgd, "--stall-rank", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def run_once(run):
    port = free_port()
    node0, node1 = start(0, port, run), start(1, port, run)
    detect = local = whole = None
    for line in node0.stderr:  # node 0's console, each line timed as it comes
        now = time.monotonic()
        if detect is None and "hang: no rank made progress" in line:
            detect = now
        elif local is None and line.startswith("ddprun: hang: rank"):
            local = now  # this node's own digest
        elif line.startswith("ddprun: hang:   "):
            whole = now  # the first line of the whole job's digest
            break
    for node in (node0, node1):
        node.terminate()
    for node in (node0, node1):
        node.wait()
    if None in (detect, local, whole):
        print("no whole-job digest: the run failed")
        return
    print(f"hang found -> this node's digest {local - detect:.2f} s, -> the whole job's digest {whole - detect:.2f} s")


for run in range(args.runs):
    run_once(run)

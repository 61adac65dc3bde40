#!/usr/bin/python3
"""Real-peer compatibility test: PyTorch workers rendezvous through ddprun-store as the *agent store*.

This is what torchrun's workers do: with TORCHELASTIC_USE_AGENT_STORE=True, every rank's
init_process_group(init_method="env://") makes a TCPStore *client* (is_master=False) to
MASTER_ADDR:MASTER_PORT, wrapped in PrefixStore("/worker/attempt_<TORCHELASTIC_RESTART_COUNT>"),
and gloo exchanges its addresses and runs its barriers through it.

The script starts the store, launches --nproc worker processes (default 3) for restart attempt 0,
then again for attempt 1 against the same store (a restarted job: same store, new key prefix);
each worker checks an all_reduce, a broadcast and an all_gather, and must exit 0. Then the store is
stopped with SIGTERM and must exit 0.

Usage:
    /usr/bin/python3 agent_store_allreduce.py [PATH/TO/ddprun-store] [--nproc N]   # or DDPRUN_STORE=...
    /usr/bin/python3 agent_store_allreduce.py --server torch                       # self-check

Exit status: 0 passed, 1 failed, 2 usage error, 77 torch.distributed unavailable (ctest: skipped).
"""

import argparse
import datetime
import faulthandler
import os
import subprocess
import sys
import time

from store_harness import HOST, Checks, StoreServer, add_server_arguments, \
    import_torch_distributed_or_skip, resolve_store_binary, temp_workdir

WORKER_TIMEOUT = 45  # seconds for one attempt's workers, all together


def worker():
    """One rank, configured only through the environment, as torchrun would."""
    import torch
    dist = import_torch_distributed_or_skip()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    tag = f"[attempt {os.environ['TORCHELASTIC_RESTART_COUNT']} rank {rank}/{world}]"
    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=30))
    failures = 0

    def check(name, condition, detail):
        nonlocal failures
        print(f"{tag} {'PASS' if condition else 'FAIL'}: {name}" + ("" if condition else f": {detail}"),
              flush=True)
        failures += 0 if condition else 1

    check("rank and world size from env://", (dist.get_rank(), dist.get_world_size()) == (rank, world),
          f"{dist.get_rank()}, {dist.get_world_size()}")
    tensor = torch.tensor([float(rank + 1), 10.0 * (rank + 1)])
    dist.all_reduce(tensor)  # SUM
    expected = world * (world + 1) / 2
    check("all_reduce sum", tensor.tolist() == [expected, 10.0 * expected], f"{tensor.tolist()}")
    value = torch.tensor([42.0 if rank == 0 else -1.0])
    dist.broadcast(value, src=0)
    check("broadcast from rank 0", value.item() == 42.0, f"{value.item()}")
    gathered = [torch.zeros(1) for _ in range(world)]
    dist.all_gather(gathered, torch.tensor([float(rank)]))
    check("all_gather", [t.item() for t in gathered] == [float(r) for r in range(world)],
          f"{[t.item() for t in gathered]}")
    dist.barrier()
    dist.destroy_process_group()
    return 1 if failures else 0


def run_attempt(checks, port, nproc, attempt):
    env = dict(os.environ)
    env.update({
        "WORLD_SIZE": str(nproc),
        "LOCAL_WORLD_SIZE": str(nproc),
        "MASTER_ADDR": HOST,
        "MASTER_PORT": str(port),
        "TORCHELASTIC_USE_AGENT_STORE": "True",
        "TORCHELASTIC_RESTART_COUNT": str(attempt),
        "GLOO_SOCKET_IFNAME": "lo",  # gloo's own connections: loopback, whatever the host's interfaces
        "OMP_NUM_THREADS": "1",
    })
    processes = []
    for rank in range(nproc):
        env_rank = dict(env, RANK=str(rank), LOCAL_RANK=str(rank), GROUP_RANK="0")
        processes.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"], env=env_rank,
                                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT))
    deadline = time.monotonic() + WORKER_TIMEOUT
    statuses = []
    for rank, process in enumerate(processes):
        try:
            output, _ = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
            output += f"\n(killed after {WORKER_TIMEOUT} s)\n".encode()
        statuses.append(process.returncode)
        print(output.decode(errors="replace").rstrip(), flush=True)
    checks.ok(f"attempt {attempt}: {nproc} workers rendezvous through the store and exit 0",
              all(status == 0 for status in statuses), f"exit statuses {statuses}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_server_arguments(parser)
    parser.add_argument("--nproc", type=int, default=3, help="workers per attempt (default 3)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker()
    dist = import_torch_distributed_or_skip()
    if not dist.is_gloo_available():
        print("SKIP: this torch has no gloo backend", flush=True)
        return 77
    store_binary = resolve_store_binary(args)
    faulthandler.dump_traceback_later(110, exit=True)  # never hang ctest

    checks = Checks()
    with temp_workdir() as workdir:
        try:
            server = StoreServer(args.server, store_binary, workdir)
        except Exception as error:
            print(f"FAIL: starting the {args.server} server: {error}", flush=True)
            return 1
        try:
            for attempt in (0, 1):
                checks.step(f"attempt {attempt}", run_attempt, checks, server.port, args.nproc, attempt)
                if not server.alive():
                    checks.fail(f"server alive after attempt {attempt}",
                                f"exited with status {server.process.returncode}\n{server.log_text()}")
                    return checks.summary()
            # The workers left their keys under the attempts' prefixes, plus the unprefixed "init/"
            # that every TCPStore client with a world size adds to.
            probe = dist.TCPStore(host_name=HOST, port=server.port, world_size=None, is_master=False,
                                  timeout=datetime.timedelta(seconds=10))
            keys = probe.num_keys()
            checks.ok(f"the store holds the workers' keys (num_keys = {keys})", keys > 1, f"num_keys = {keys}")
            del probe
            status, took = server.stop(grace=5.0)
            checks.ok(f"SIGTERM stops the store with exit status 0 ({took:.2f} s)", status == 0,
                      f"exit status {status} (None: still running after 5 s)\nserver log:\n{server.log_text()}")
        finally:
            server.kill()
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main())

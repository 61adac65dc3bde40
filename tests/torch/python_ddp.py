"""Real PyTorch DDP (torch.nn.parallel.DistributedDataParallel on gloo, env://) as a Python user
runs it under torchrun: here under ddprun. Every rank starts from different weights and trains on
different data; DDP must keep them identical. Each rank writes the SHA-256 of its parameters to
OUT_DIR/rank<R>.txt (the C++ test compares the files) and exits 1 when the ranks disagree.

Usage: ddprun --nproc-per-node 2 python_ddp.py OUT_DIR
"""
import hashlib
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn


def main() -> int:
    out_dir = sys.argv[1]
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)

    torch.manual_seed(rank)  # different initial weights: DDP broadcasts rank 0's
    model = nn.Sequential(nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 5))
    ddp = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    for step in range(10):
        generator = torch.Generator().manual_seed(1000 * rank + step)
        inputs = torch.randn(20, 10, generator=generator)
        targets = torch.randn(20, 5, generator=generator)
        optimizer.zero_grad()
        nn.functional.mse_loss(ddp(inputs), targets).backward()
        optimizer.step()

    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(gathered, flat)
    identical = all(torch.equal(gathered[0], other) for other in gathered)
    digest = hashlib.sha256(flat.numpy().tobytes()).hexdigest()
    with open(os.path.join(out_dir, f"rank{rank}.txt"), "w") as out:
        out.write(digest + "\n")
    print(f"rank {rank} of {world}: parameters sha256 {digest}, identical across ranks: {identical}", flush=True)
    del ddp  # first, or PyTorch 1.13 can deadlock at exit (docs/usage.md: a job that does not end)
    dist.destroy_process_group()
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())

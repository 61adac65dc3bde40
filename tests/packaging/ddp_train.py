"""A gloo DDP script as torchrun runs it: a linear model, 5 steps on data that differs per rank;
DDP averages the gradients, so every rank ends with the same weights. Prints which interpreter
runs it and whether ddprun's helpers are importable (ddprun puts them on its workers' PYTHONPATH).
Run: ddprun --nproc-per-node 2 ddp_train.py"""
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(100 + rank)
    for _ in range(5):
        x = torch.randn(16, 8, generator=generator)
        loss = (model(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    weights = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = [torch.zeros_like(weights) for _ in range(world)]
    dist.all_gather(gathered, weights)
    assert all(torch.equal(gathered[0], w) for w in gathered), f"rank {rank}: the ranks' weights differ"
    try:
        import ddprun_progress  # noqa: F401  (ddprun's helper, found on the workers' PYTHONPATH only)
        helpers = "found"
    except ImportError:
        helpers = "missing"
    print(f"DDP_OK rank={rank} world={world} python={sys.executable} torch={torch.__version__}"
          f" helpers={helpers} local_rank={os.environ['LOCAL_RANK']}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

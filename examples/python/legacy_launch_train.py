"""A training script written for `python -m torch.distributed.launch` (PyTorch before torchrun):
it takes its local rank from a `--local_rank` argument, which that launcher appended, and joins
the process group from the environment (init_method="env://").

Unchanged under ddprun with the flag that appends the argument:

    python -m torch.distributed.launch --nproc_per_node 2 legacy_launch_train.py --steps 3
    ddprun --append-local-rank=underscore --nproc_per_node 2 legacy_launch_train.py --steps 3

(`--append-local-rank=dash` gives `--local-rank=N`, which torch 2.x's launcher passes.)
"""

import argparse
import os

import torch
import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, required=True)  # required: the launcher must pass it
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()

    dist.init_process_group(backend="gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    # The argument and the environment tell the same story.
    assert args.local_rank == int(os.environ["LOCAL_RANK"]), (args.local_rank, os.environ["LOCAL_RANK"])

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    for step in range(args.steps):
        x = torch.full((8, 4), float(rank + step))
        loss = ddp(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    # Every rank ends with the same weights: the gradients were averaged.
    weights = model.weight.detach().clone()
    gathered = [torch.zeros_like(weights) for _ in range(world)]
    dist.all_gather(gathered, weights)
    assert all(torch.equal(w, weights) for w in gathered), "replicas diverged"
    print(f"local_rank={args.local_rank} rank={rank}/{world} steps={args.steps} replicas agree", flush=True)
    del ddp
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

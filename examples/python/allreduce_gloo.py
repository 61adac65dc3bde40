"""A plain PyTorch script, unchanged from what torchrun runs: join the job through env://,
all-reduce a tensor over Gloo, and check the sum. Run: ddprun --nproc-per-node 2 allreduce_gloo.py"""
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert rank == int(os.environ["RANK"]) and world == int(os.environ["WORLD_SIZE"])
    tensor = torch.tensor([float(rank + 1)])
    dist.all_reduce(tensor)
    expected = world * (world + 1) / 2
    assert tensor.item() == expected, f"rank {rank}: all_reduce gave {tensor.item()}, expected {expected}"
    print(f"rank {rank}/{world}: all_reduce sum = {tensor.item():.0f} (expected {expected:.0f})", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""The Python twin of examples/torch/fashion_mnist.cpp: the same CNN, data, batch, optimizer and
threads, trained with PyTorch's own torch.nn.parallel.DistributedDataParallel on gloo, the way the
PyTorch tutorials write it (DistributedSampler + DataLoader). It is the anchor of the training
benchmark (bench/train_bench.py), and runs under torchrun or ddprun alike:

    shared/tools/torchrun-anchor --standalone --nproc_per_node 2 examples/torch/fashion_mnist_ddp.py
    PYTHON_EXEC=/usr/bin/python3 build/bin/ddprun --standalone --nproc-per-node 2 examples/torch/fashion_mnist_ddp.py

Needs Debian's python3-torch (run by /usr/bin/python3). Rank 0 prints a progress line every
--log-every steps and one per epoch, then
    train_samples_per_s=<all ranks' samples / training seconds> train_cpu_ms_per_sample=<...>
and, last, `test_accuracy=<value>`, as the C++ example does.
"""
import argparse
import gzip
import os
import struct
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

# Mean and standard deviation of Fashion-MNIST's training pixels (scaled to [0, 1]); fashion_cnn.hpp.
MEAN, STD = 0.2860, 0.3530


class FashionCNN(nn.Module):
    """examples/torch/fashion_cnn.hpp, layer for layer."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.dropout = nn.Dropout(0.25)
        self.fc = nn.Linear(32 * 7 * 7, 10)
        self.to(memory_format=torch.channels_last)  # as fashion_cnn.hpp: NHWC convolutions, same math

    def forward(self, x):
        x = x.contiguous(memory_format=torch.channels_last)
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)  # 16 x 14 x 14
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # 32 x 7 x 7
        x = self.dropout(torch.flatten(x, 1))
        return self.fc(x)


def read_idx(path, limit=None):
    """A gzipped IDX file (big-endian header: 0, 0, type 0x08 = ubyte, rank; then the sizes)."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    zero, kind, rank = struct.unpack_from(">HBB", data)
    if zero != 0 or kind != 0x08:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes")
    dims = list(struct.unpack_from(f">{rank}I", data, 4))
    array = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)
    return array[:limit] if limit else array


def load(data_dir, split, limit):
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"), limit)
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"), limit)
    x = (torch.from_numpy(images.copy()).float().div_(255).sub_(MEAN).div_(STD)).unsqueeze(1)
    return TensorDataset(x, torch.from_numpy(labels.astype(np.int64)))


def test_accuracy(model, test, rank, world):
    """Each rank scores its strided share of the test set (no padding); the counts are summed."""
    model.eval()
    counts = torch.zeros(2, dtype=torch.int64)
    with torch.no_grad():
        x, y = test.tensors[0][rank::world], test.tensors[1][rank::world]
        for i in range(0, len(x), 1000):
            counts[0] += (model.module(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum().item()
        counts[1] = len(x)
    model.train()
    dist.all_reduce(counts)
    return counts[0].item() / max(counts[1].item(), 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64, help="per rank")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--train-limit", type=int, default=0, help="use the first N training images (0: all)")
    parser.add_argument("--test-limit", type=int, default=0, help="use the first N test images (0: all)")
    parser.add_argument("--log-every", type=int, default=100, help="steps between progress lines")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()

    train = load(args.data_dir, "train", args.train_limit if args.train_limit > 0 else None)
    test = load(args.data_dir, "test", args.test_limit if args.test_limit > 0 else None)
    sampler = DistributedSampler(train, world, rank, shuffle=True, seed=args.seed)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler)

    model = DistributedDataParallel(FashionCNN())
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    trained, train_seconds, train_cpu_seconds, accuracy = 0, 0.0, 0.0, None
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        dist.barrier()
        start = window_start = time.perf_counter()
        cpu_start = time.process_time()
        window_samples = 0
        for step, (x, y) in enumerate(loader):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            trained += x.shape[0] * world
            window_samples += x.shape[0] * world
            if rank == 0 and args.log_every > 0 and (step + 1) % args.log_every == 0:
                now = time.perf_counter()
                print(f"epoch {epoch + 1}/{args.epochs} step {step + 1}/{len(loader)} loss {loss.item():.4f} "
                      f"{window_samples / (now - window_start):.0f} samples/s", flush=True)
                window_start, window_samples = now, 0
        dist.barrier()
        epoch_seconds = time.perf_counter() - start
        train_seconds += epoch_seconds
        train_cpu_seconds += time.process_time() - cpu_start
        accuracy = test_accuracy(model, test, rank, world)
        if rank == 0:
            print(f"epoch {epoch + 1}/{args.epochs} done in {epoch_seconds:.1f} s: test accuracy {accuracy:.4f}",
                  flush=True)

    if accuracy is None:
        accuracy = test_accuracy(model, test, rank, world)
    cpu = torch.tensor([train_cpu_seconds], dtype=torch.float64)  # every rank's CPU time, summed
    dist.all_reduce(cpu)
    if rank == 0:
        if trained:
            print(f"train_samples_per_s={trained / train_seconds:.1f} "
                  f"train_cpu_ms_per_sample={cpu.item() * 1e3 / trained:.4f}", flush=True)
        print(f"test_accuracy={accuracy:.4f}", flush=True)
    # The DDP module goes first, so that the process group's last reference is destroy_process_group's,
    # which releases the GIL while PyTorch joins its gloo threads. Were the module's Reducer the last,
    # it would join them holding the GIL, and a gloo thread still freeing a tensor of an earlier
    # collective (test_accuracy's counts, on a loaded machine) waits for the GIL: deadlock at exit
    # (PyTorch 1.13; docs/usage.md, tests/examples: fashion_python_late_thread).
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

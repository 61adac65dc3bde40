"""The snapshot Trainer of PyTorch's multi-node DDP tutorial (ddp-tutorial-series/multinode.py), on
CPU with gloo, so that it runs on any machine under ddprun or torchrun:

    ddprun --nnodes=2 --node-rank=0 --master-addr=127.0.0.1 --master-port=29500 --nproc-per-node=2 \
        --max-restarts=1 snapshot_trainer.py 6 1 --snapshot-path /tmp/s.pt --crash-at-epoch 3

As in the tutorial: a Linear(20, 1) on 2048 random samples, SGD, a DistributedSampler, and every
node's local rank 0 saving a snapshot each `save_every` epochs, loaded by the next attempt. Additions
for the end-of-job stress test (tests/stress/end_of_job_hang.py):
  --crash-at-epoch E  global rank --crash-rank (1) fails at the start of epoch E, on the first
                      attempt only (TORCHELASTIC_RESTART_COUNT=0), so the job restarts once;
                      --crash-how: exit (os._exit(1)), raise (an exception), kill (SIGKILL itself)
  --snapshot-path     one file per node (the tutorial's nodes have their own disks; on loopback
                      two nodes would share one), suffixed with GROUP_RANK
Rank 0's last line before destroy_process_group() is `training done: <epochs> epochs`.

The end keeps the tutorial's order: destroy_process_group(), then the Trainer and its DDP module go
when main() returns, so the module's Reducer destroys the process group holding the GIL. That is the
order of PyTorch 1.13's exit deadlock (docs/usage.md, "A job that does not end"); this trainer hands
no tensor of its own to a collective, so no gloo thread should ever need the GIL then. Should the
watchdog catch ~Reducer -> ~ProcessGroupGloo and a gloo thread in PyEval_AcquireThread here, it is
that race, not ddprun.
"""
import argparse
import os
import signal

import torch
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class MyTrainDataset(Dataset):
    """The tutorial's datautils.MyTrainDataset: `size` random (20 features, 1 target) pairs."""

    def __init__(self, size):
        self.size = size
        self.data = [(torch.rand(20), torch.rand(1)) for _ in range(size)]

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        return self.data[index]


class Trainer:
    def __init__(self, model, train_data, optimizer, save_every, snapshot_path, crash):
        self.local_rank = int(os.environ["LOCAL_RANK"])
        self.global_rank = int(os.environ["RANK"])
        self.model = model
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.epochs_run = 0
        self.snapshot_path = snapshot_path
        self.crash = crash  # (epoch, global rank, how)
        if os.path.exists(snapshot_path):
            print("Loading snapshot", flush=True)
            self._load_snapshot(snapshot_path)
        self.model = DDP(self.model)

    def _load_snapshot(self, snapshot_path):
        snapshot = torch.load(snapshot_path, map_location="cpu")
        self.model.load_state_dict(snapshot["MODEL_STATE"])
        self.epochs_run = snapshot["EPOCHS_RUN"]
        print(f"Resuming training from snapshot at Epoch {self.epochs_run}", flush=True)

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = F.cross_entropy(output, targets)
        loss.backward()
        self.optimizer.step()

    def _run_epoch(self, epoch):
        crash_epoch, crash_rank, how = self.crash
        if (epoch == crash_epoch and self.global_rank == crash_rank
                and os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"):
            print(f"[GPU{self.global_rank}] crashing at epoch {epoch} ({how}, first attempt only)", flush=True)
            if how == "raise":
                raise RuntimeError(f"rank {crash_rank} crashes on purpose at epoch {epoch}")
            if how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(1)
        b_sz = len(next(iter(self.train_data))[0])
        print(f"[GPU{self.global_rank}] Epoch {epoch} | Batchsize: {b_sz} | Steps: {len(self.train_data)}",
              flush=True)
        self.train_data.sampler.set_epoch(epoch)
        for source, targets in self.train_data:
            self._run_batch(source, targets)

    def _save_snapshot(self, epoch):
        snapshot = {"MODEL_STATE": self.model.module.state_dict(), "EPOCHS_RUN": epoch}
        tmp = f"{self.snapshot_path}.tmp"
        torch.save(snapshot, tmp)
        os.replace(tmp, self.snapshot_path)  # a crash mid-save never leaves half a snapshot
        print(f"Epoch {epoch} | Training snapshot saved at {self.snapshot_path}", flush=True)

    def train(self, max_epochs):
        for epoch in range(self.epochs_run, max_epochs):
            self._run_epoch(epoch)
            if self.local_rank == 0 and epoch % self.save_every == 0:
                self._save_snapshot(epoch)


def main():
    parser = argparse.ArgumentParser(description="simple distributed training job")
    parser.add_argument("total_epochs", type=int, help="Total epochs to train the model")
    parser.add_argument("save_every", type=int, help="How often to save a snapshot")
    parser.add_argument("--batch_size", default=32, type=int, help="Input batch size on each device")
    parser.add_argument("--snapshot-path", default="snapshot.pt")
    parser.add_argument("--crash-at-epoch", type=int, default=-1)
    parser.add_argument("--crash-rank", type=int, default=1)
    parser.add_argument("--crash-how", choices=["exit", "raise", "kill"], default="exit")
    args = parser.parse_args()

    torch.set_num_threads(1)
    init_process_group(backend="gloo")
    torch.manual_seed(0)  # the same data on every rank, as the tutorial's seedless run intends
    dataset = MyTrainDataset(2048)
    model = torch.nn.Linear(20, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=False, sampler=DistributedSampler(dataset))
    path = f"{args.snapshot_path}.node{os.environ.get('GROUP_RANK', '0')}"
    trainer = Trainer(model, loader, optimizer, args.save_every, path,
                      (args.crash_at_epoch, args.crash_rank, args.crash_how))
    trainer.train(args.total_epochs)
    if trainer.global_rank == 0:
        print(f"training done: {args.total_epochs} epochs", flush=True)
    destroy_process_group()


if __name__ == "__main__":
    main()

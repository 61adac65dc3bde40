#!/usr/bin/python3
"""Tests of the LibTorch examples (examples/torch) under ddprun, 2 workers each.

Usage: examples_test.py CASE --ddprun PATH --bin-dir DIR [--examples-dir DIR]
  demo_basic       demo_basic exits 0 and every rank reports identical parameters
  demo_checkpoint  demo_checkpoint exits 0: every rank loaded rank 0's save and stays identical
  fashion_smoke    fashion_mnist on 2000 images, 1 epoch: exits 0, last line test_accuracy=<value>
  fashion_resume   issue 6 (c): rank 1 SIGKILLs itself mid-epoch 2 with --max-restarts=1; the job
                   restarts, resumes from the epoch-1 checkpoint and ends within 1 accuracy point
                   of the same job uninterrupted
  bad_data_dir     fashion_mnist with a missing --data-dir: exits 1 naming the missing file
  fashion_python   examples/torch/fashion_mnist_ddp.py (PyTorch's own DDP on gloo, env://) under
                   ddprun: exits 0 with test_accuracy=<value> (needs Debian's python3-torch)
  fashion_python_late_thread
                   the same job, with one of rank 0's gloo threads made late by gdb at the worst
                   moment (a loaded machine's doing): the job still ends. PyTorch 1.13 deadlocks
                   when a process group's last reference goes with the GIL held (by the DDP
                   module's Reducer, after destroy_process_group) while a gloo thread still has to
                   free a tensor Python let go of; the trainer must free its DDP module first
                   (docs/usage.md). Needs gdb and ptrace (skipped without them).
Stdlib only. Exit status 0 on success, 1 on failure, 77 when a needed input is missing (skipped).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DATA_DIR = Path(os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))
TIMEOUT_S = 150  # per launcher run; each case stays under ~2 minutes on a loaded 2-core machine
SUBSET = ["--data-dir", str(DATA_DIR), "--train-limit", "2000", "--test-limit", "1000", "--log-every", "8"]


class Failure(Exception):
    pass


def run(cmd, env=None):
    """Runs a launcher; returns (status, stdout, stderr). Fails the test when it times out."""
    print("$", " ".join(map(str, cmd)), flush=True)
    try:
        done = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, timeout=TIMEOUT_S,
                              env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        raise Failure(f"timed out after {TIMEOUT_S} s; output so far:\n{e.stdout}\n{e.stderr}")
    print(done.stdout, end="")
    print(done.stderr, end="", file=sys.stderr, flush=True)
    return done.returncode, done.stdout, done.stderr


def expect(condition, message):
    if not condition:
        raise Failure(message)


def accuracy_of(stdout):
    """The value of the last line, which must be test_accuracy=<value>."""
    lines = stdout.strip().splitlines()
    expect(lines, "no output on stdout")
    match = re.fullmatch(r"test_accuracy=([0-9.]+)", lines[-1].strip())
    expect(match, f"the last line is not test_accuracy=<value>: {lines[-1]!r}")
    value = float(match.group(1))
    expect(0.0 <= value <= 1.0, f"test accuracy {value} is not in [0, 1]")
    return value


def demo_basic(args):
    status, out, _ = run([args.ddprun, "--standalone", "--nproc-per-node", "2", args.bin_dir / "demo_basic"])
    expect(status == 0, f"demo_basic: ddprun exited {status}")
    for rank in (0, 1):
        expect(f"rank {rank}: parameters identical on all 2 ranks" in out, f"rank {rank} did not report identical parameters")
        expect(re.search(rf"^rank {rank}: step 5 loss [0-9.]+$", out, re.M), f"rank {rank} printed no loss for step 5")


def demo_checkpoint(args):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.checkpoint"
        status, out, _ = run([args.ddprun, "--standalone", "--nproc-per-node", "2", args.bin_dir / "demo_checkpoint",
                              "--path", path])
        expect(status == 0, f"demo_checkpoint: ddprun exited {status}")
        for rank in (0, 1):
            expect(f"rank {rank}: loaded {path}: parameters equal what rank 0 saved" in out, f"rank {rank} did not load")
            expect(f"rank {rank}: parameters identical on all 2 ranks" in out, f"rank {rank} diverged after loading")
        expect(not path.exists(), f"rank 0 left {path} behind")


def fashion(args, checkpoint_dir, extra=(), launcher_flags=()):
    cmd = [args.ddprun, "--standalone", "--nproc-per-node", "2", *launcher_flags, args.bin_dir / "fashion_mnist",
           *SUBSET, "--checkpoint-dir", checkpoint_dir, *extra]
    return run(cmd)


def fashion_smoke(args):
    with tempfile.TemporaryDirectory() as tmp:
        status, out, _ = fashion(args, tmp, ["--epochs", "1"])
        expect(status == 0, f"fashion_mnist: ddprun exited {status}")
        accuracy = accuracy_of(out)
        expect(re.search(r"^train_samples_per_s=[0-9.]+ train_cpu_ms_per_sample=[0-9.]+$", out, re.M),
               "no train_samples_per_s line")
        expect(re.search(r"^epoch 1/1 step 8/16 loss [0-9.]+ [0-9]+ samples/s$", out, re.M), "no progress line")
        expect((Path(tmp) / "checkpoint.pt").is_file(), "no checkpoint.pt after the epoch")
        # 1 epoch of 2000 images: far from the full run's 0.88, but well above chance (0.1).
        expect(accuracy > 0.5, f"test accuracy {accuracy} after 1 epoch on 2000 images: training did not work")


def fashion_resume(args):
    # 2000 images: 1000 per rank, 16 steps per epoch; step 20 is in the middle of epoch 2.
    with tempfile.TemporaryDirectory() as plain_dir, tempfile.TemporaryDirectory() as killed_dir:
        status, out, _ = fashion(args, plain_dir, ["--epochs", "2"])
        expect(status == 0, f"the uninterrupted run: ddprun exited {status}")
        uninterrupted = accuracy_of(out)

        status, out, err = fashion(args, killed_dir, ["--epochs", "2", "--die-at-step", "20"],
                                   ["--max-restarts", "1"])
        expect(status == 0, f"the interrupted run: ddprun exited {status} (the restart should have succeeded)")
        expect("rank 1 kills itself with SIGKILL" in err, "rank 1 did not kill itself at step 20")
        expect(re.search(r"attempt 1: resumed from .*checkpoint\.pt: 1 of 2 epochs done, step 16", err),
               "the restarted job did not resume from the epoch-1 checkpoint")
        resumed = accuracy_of(out)
        print(f"uninterrupted test_accuracy={uninterrupted:.4f}, killed and resumed test_accuracy={resumed:.4f}")
        expect(abs(resumed - uninterrupted) <= 0.01,
               f"resumed accuracy {resumed} is more than 1 point from the uninterrupted {uninterrupted}")


def bad_data_dir(args):
    with tempfile.TemporaryDirectory() as tmp:
        status, out, err = run([args.ddprun, "--standalone", "--nproc-per-node", "1", args.bin_dir / "fashion_mnist",
                                "--data-dir", Path(tmp) / "absent", "--checkpoint-dir", tmp])
    expect(status == 1, f"ddprun exited {status}, expected 1 (the job failed)")
    message = f"{tmp}/absent/train-images-idx3-ubyte.gz: cannot open: No such file or directory"
    expect(message in err, f"stderr does not say {message!r}")
    # The error file reaches ddprun's failure summary (ddprun::record_exception).
    expect("std::runtime_error" in out + err, "the failure summary does not show the exception")


def fashion_python(args):
    script = args.examples_dir / "fashion_mnist_ddp.py"
    python = "/usr/bin/python3"
    if subprocess.run([python, "-c", "import torch, numpy"], capture_output=True).returncode != 0:
        print("skipped: /usr/bin/python3 has no torch (Debian python3-torch)")
        sys.exit(77)
    env = dict(os.environ, PYTHON_EXEC=python)
    status, out, _ = run([args.ddprun, "--standalone", "--nproc-per-node", "2", script, *SUBSET, "--epochs", "1"], env)
    expect(status == 0, f"fashion_mnist_ddp.py: ddprun exited {status}")
    expect(accuracy_of(out) > 0.5, "fashion_mnist_ddp.py did not learn")


def fashion_python_late_thread(args):
    script = args.examples_dir / "fashion_mnist_ddp.py"
    python = "/usr/bin/python3"
    here = Path(__file__).resolve().parent
    if subprocess.run([python, "-c", "import torch, numpy"], capture_output=True).returncode != 0:
        print("skipped: /usr/bin/python3 has no torch (Debian python3-torch)")
        sys.exit(77)
    if not shutil.which("gdb"):
        print("skipped: no gdb (scripts/setup.sh --tests installs it)")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env = dict(os.environ, PYTHON_EXEC=python, DDPRUN_LATE_THREAD_DIR=tmp)
        cmd = [args.ddprun, "--standalone", "--nproc-per-node", "2", here / "late_gloo_thread.py", script, *SUBSET,
               "--epochs", "1"]
        print("$", " ".join(map(str, cmd)), flush=True)
        job = subprocess.Popen(list(map(str, cmd)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env, stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while not (folder / "rank0.pid").exists() and time.monotonic() < deadline and job.poll() is None:
                time.sleep(0.05)
            expect((folder / "rank0.pid").exists(), "rank 0 did not start")
            pid = (folder / "rank0.pid").read_text()
            gdb = subprocess.run(["gdb", "-batch", "-nx", "-iex", "set non-stop on", "-iex", "set pagination off",
                                  "-p", pid, "-x", str(here / "hold_gloo_thread_gdb.py")],
                                 env=env, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
            if not (folder / "gdb-ready").exists():
                reason = "no symbol c10d::ProcessGroupGloo::AsyncWork::execute in this PyTorch" \
                    if (folder / "no-symbol").exists() else "gdb could not attach (ptrace not permitted?)"
                print(f"skipped: {reason}\n{gdb.stdout[-2000:]}{gdb.stderr[-2000:]}")
                sys.exit(77)
            expect((folder / "held").exists(), "gdb never held a gloo thread: the test proved nothing\n" +
                   gdb.stdout[-3000:] + gdb.stderr[-3000:])
            try:
                out, err = job.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                stacks = subprocess.run(["gdb", "-batch", "-nx", "-p", pid, "-ex", "thread apply all bt 14"],
                                        capture_output=True, text=True, timeout=120).stdout
                raise Failure("the job did not end within 60 s of the late gloo thread's release (rank 0 "
                              "deadlocked at its exit?); rank 0's stacks:\n" + stacks[-12000:])
        finally:
            if job.poll() is None:
                job.kill()
                job.communicate()
        print(out, end="")
        print(err, end="", file=sys.stderr, flush=True)
        expect(job.returncode == 0, f"fashion_mnist_ddp.py with a late gloo thread: ddprun exited {job.returncode}")
        expect(accuracy_of(out) > 0.5, "fashion_mnist_ddp.py did not learn")


CASES = {f.__name__: f for f in (demo_basic, demo_checkpoint, fashion_smoke, fashion_resume, bad_data_dir,
                                  fashion_python, fashion_python_late_thread)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("case", choices=sorted(CASES))
    parser.add_argument("--ddprun", type=Path, required=True)
    parser.add_argument("--bin-dir", type=Path, required=True, help="where demo_basic, fashion_mnist, ... are")
    parser.add_argument("--examples-dir", type=Path, default=Path(__file__).resolve().parents[2] / "examples" / "torch")
    args = parser.parse_args()
    if args.case.startswith("fashion") and not (DATA_DIR / "train-images-idx3-ubyte.gz").is_file():
        print(f"skipped: no Fashion-MNIST in {DATA_DIR} (Debian's dataset-fashion-mnist)")
        return 77
    try:
        CASES[args.case](args)
    except Failure as failure:
        print(f"FAIL {args.case}: {failure}", file=sys.stderr)
        return 1
    print(f"PASS {args.case}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

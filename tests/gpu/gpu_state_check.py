#!/usr/bin/env python3
"""Issue 27 on a real GPU (run by tests/gpu/checks.sh on the GPU machine, after ../shared/tools/gpu/run.sh
built ddprun): what the stand-in NVML of the tests cannot show.

  metrics   a PyTorch 2.x job on CUDA (one worker per GPU, matmuls for a few seconds) under
            `ddprun --status-port 0`: /api/status's GPU fields and /metrics's ddprun_rank_gpu_* series
            while it runs; utilisation and the worker's own memory must be above 0.
  release   a worker that holds most of its GPU's memory is SIGKILLed (--max-restarts 1); the
            restarted worker allocates the same amount. With the release wait (the default) it must
            succeed, and the log says whether and how long ddprun waited; with --gpu-release-timeout 0
            it is told how the new worker fared (the driver may free the memory first anyway).
  startcost launch + teardown of 8 /bin/true with the GPU check (NVML's first answer) against
            --gpu-health off: what the health check costs a first start on this machine.

Usage: gpu_state_check.py DDPRUN [metrics|release|startcost ...]   (prints PASS/FAIL lines)
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

PY = sys.executable

BUSY = r'''
import os, sys, time, torch
torch.cuda.set_device(0)
x = torch.randn(4096, 4096, device="cuda")
hold = torch.empty(int(2 * 2**30), dtype=torch.uint8, device="cuda")  # 2 GiB of its own
print("busy", os.environ["RANK"], flush=True)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for _ in range(20):
        y = x @ x
    torch.cuda.synchronize()
'''

HOG = r'''
import os, signal, sys, time, torch
free, total = torch.cuda.mem_get_info()
size = int(total * 0.6)  # two of these do not fit: the restarted worker needs the dead one's memory freed
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
t = time.time()
try:
    block = torch.empty(size, dtype=torch.uint8, device="cuda")
    block.fill_(1)
    torch.cuda.synchronize()
except RuntimeError as e:
    print(f"attempt {attempt}: allocation of {size >> 20} MiB FAILED: {str(e).splitlines()[0]}", flush=True)
    sys.exit(3)
print(f"attempt {attempt}: allocated {size >> 20} MiB in {time.time() - t:.2f} s", flush=True)
if attempt == 0:
    os.kill(os.getpid(), signal.SIGKILL)
'''


def verdict(ok, what):
    print(("PASS " if ok else "FAIL ") + what, flush=True)


def check_metrics(ddprun):
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(BUSY)
    proc = subprocess.Popen([ddprun, "--standalone", "--nproc-per-node", "gpu", "--devices-per-worker", "1",
                             "--status-port", "0", "--status-interval", "1", "--no-python", PY, f.name, "12"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    port, lines, status, metrics = None, [], None, ""
    deadline = time.time() + 60
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip())
        m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        if m and port is None:
            port = int(m.group(1))
        if port and "busy" in line and status is None:
            time.sleep(4)  # a few samples of the busy GPU
            status = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=5))
            metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    proc.wait(60)
    print("\n".join(lines[-12:]))
    gpus = [g for node in (status or {}).get("nodes", []) for r in node.get("ranks", []) for g in r.get("gpus", [])]
    print(json.dumps(gpus, indent=1)[:3000])
    print("\n".join(l for l in metrics.splitlines() if l.startswith("ddprun_rank_gpu"))[:3000])
    verdict(proc.returncode == 0, f"metrics: the job ended with {proc.returncode}")
    verdict(bool(gpus) and all((g.get("utilisation_percent") or 0) > 0 for g in gpus),
            "metrics: every rank's GPU utilisation > 0 while it works")
    verdict(bool(gpus) and all((g.get("own_memory_bytes") or 0) >= 2 * 2**30 for g in gpus),
            "metrics: every rank's own GPU memory >= the 2 GiB it holds")
    verdict("ddprun_rank_gpu_utilization_ratio{" in metrics and "ddprun_rank_gpu_memory_used_bytes{" in metrics,
            "metrics: /metrics has ddprun_rank_gpu_* series")


def run_hog(ddprun, extra):
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(HOG)
    t = time.time()
    out = subprocess.run([ddprun, "--standalone", "--nproc-per-node", "1", "--max-restarts", "1", *extra,
                          "--no-python", PY, f.name], capture_output=True, text=True, timeout=180)
    text = (out.stdout + out.stderr).strip()
    return out.returncode, text, time.time() - t


def check_release(ddprun):
    code, text, took = run_hog(ddprun, [])
    print(text[-2500:])
    verdict(code == 0, f"release: with the wait, the restarted worker got the memory (exit {code}, {took:.1f} s)")
    waited = re.search(r"freed after ([0-9.]+) s", text)
    print(f"INFO release: ddprun {'waited ' + waited.group(1) + ' s' if waited else 'found nothing held'}")
    code0, text0, took0 = run_hog(ddprun, ["--gpu-release-timeout", "0"])
    print(text0[-1500:])
    print(f"INFO release: without the wait the job ended with {code0} ({took0:.1f} s)"
          f"{': the new worker ran out of memory' if 'FAILED' in text0 else ''}")


def check_startcost(ddprun, runs=7):
    def once(extra):
        t = time.perf_counter()
        subprocess.run([ddprun, "--standalone", "--nproc-per-node", "8", *extra, "--no-python", "/bin/true"],
                       check=True, capture_output=True, timeout=120)
        return (time.perf_counter() - t) * 1000
    on, off = [], []
    for _ in range(runs):
        on.append(once([]))
        off.append(once(["--gpu-health", "off"]))
    on.sort(), off.sort()
    print(f"INFO startcost: launch of 8 /bin/true, median {on[runs // 2]:.1f} ms with the GPU check, "
          f"{off[runs // 2]:.1f} ms with --gpu-health off")


def main():
    ddprun = sys.argv[1]
    checks = sys.argv[2:] or ["metrics", "release", "startcost"]
    for name in checks:
        print(f"--- gpu_state: {name}", flush=True)
        try:
            {"metrics": check_metrics, "release": check_release, "startcost": check_startcost}[name](ddprun)
        except Exception as e:  # one check's failure must not hide the others
            verdict(False, f"{name}: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()

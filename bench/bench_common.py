"""What every benchmark harness prints first: the machine and how busy it is."""
import os
import subprocess
import time


def compilers():
    """PIDs of running C++ compilers: their load makes timings on this 2-core machine noisy."""
    return subprocess.run(["pgrep", "-f", "cc1plus"], capture_output=True, text=True).stdout.split()


def machine_header():
    """One comment line naming the machine, its kernel and load, and a warning while compilers run."""
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                  if line.startswith("model name")), "?")
    load = open("/proc/loadavg").read().split()[:3]
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S %Z')}  {os.cpu_count()} CPUs  {model}  "
          f"kernel {os.uname().release}  loadavg {' '.join(load)}", flush=True)
    busy = compilers()
    if busy:
        print(f"# WARNING: {len(busy)} compiler process(es) running; numbers will be noisy", flush=True)

#!/usr/bin/python3
"""etcd-v3 rendezvous benchmarks (issue 15): etcd-v3 against ddprun's c10d and torchrun-anchor's
c10d, in the same run, and how long failovers take.

Usage: bench/etcd_bench.py [FILTER] [options]      (stdlib only; see docs/performance.md)

etcd_startup: N agents on this machine (N = 8, 64 by default), 1 worker each, one round with
  MIN = MAX = N, timed as rendezvous_bench.py's rdzv_startup (from spawning the first agent until
  the Nth worker wrote its line into a FIFO; the same code runs it), for three launchers in turn:
    etcd-v3: ddprun --rdzv-backend etcd-v3 --rdzv-endpoint 127.0.0.1:<etcd> (a single etcd
             member of this harness's own, on loopback; a fresh key_prefix per run)
    etcd-v3 TLS: the same against a second member that speaks only TLS and wants client
             certificates (--client-cert-auth; certificates made here with the openssl command)
    c10d:    ddprun --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:<free port>
    anchor:  torchrun-anchor --rdzv_backend c10d (run with /usr/bin/python3 by its own #!)
  ratios: c10d / etcd-v3 and anchor / etcd-v3 (> 1: etcd-v3 is faster), and TLS / etcd-v3 (what
  TLS costs).

etcd_failover_leader: a 3-member etcd cluster on loopback, 2 agents of an elastic 2:3 job
  (lease_ttl 3, keep_alive_interval 1) whose workers wait. At t0 the etcd leader is SIGKILLed and a
  third agent is started at once (it makes the job's next round); time = t0 until the 3 workers of
  that round have written their lines. The same without killing the leader, in the same run, is
  the baseline: failover cost = the difference.

etcd_failover_agent: 3 agents of an elastic 2:3 job with workers that wait; at t0 one agent is
  SIGKILLed; time = t0 until the 2 survivors' workers of the new round wrote their lines. etcd-v3
  (lease_ttl 3: its heartbeat vanishes with its lease) against c10d (keep_alive_interval 1 x
  keep_alive_max_attempt 3: its heartbeat stops changing), same settings, same run. For c10d the
  agent killed is one that does not host the store (which would end the job).

Every benchmark prints one summary line, then indented details. Options start with --etcd- so that
scripts/bench.sh can hand them here. Exits non-zero when a ddprun run fails.
"""
import argparse
import json
import os
import re
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import BenchError, run_harness
import rendezvous_bench as rb

REPO = Path(__file__).resolve().parent.parent
ETCD = shutil.which("etcd") or "/usr/bin/etcd"
ETCDCTL = shutil.which("etcdctl") or "/usr/bin/etcdctl"
OPENSSL = shutil.which("openssl") or "/usr/bin/openssl"


def say(text=""):
    print(text, flush=True)


fmt = rb.fmt
free_port = rb.free_port


class Certificates:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, as PEM files in `dir`."""

    def __init__(self, tmp):
        self.dir = Path(tempfile.mkdtemp(prefix="tls-", dir=tmp))
        d = self.dir

        def openssl(*args):
            r = subprocess.run([OPENSSL, *map(str, args)], capture_output=True, text=True)
            if r.returncode != 0:
                raise BenchError(f"openssl {' '.join(map(str, args))} failed: {r.stderr.strip()}")

        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        openssl("req", "-x509", *ec, "-keyout", d / "ca.key", "-out", d / "ca.pem", "-days", "2", "-subj", "/CN=bench CA")
        for name, ext in (("server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth"),
                          ("client", "extendedKeyUsage=clientAuth")):
            (d / f"{name}.ext").write_text(ext + "\n")
            openssl("req", *ec, "-keyout", d / f"{name}.key", "-out", d / f"{name}.csr", "-subj", f"/CN={name}")
            openssl("x509", "-req", "-in", d / f"{name}.csr", "-CA", d / "ca.pem", "-CAkey", d / "ca.key",
                    "-CAcreateserial", "-out", d / f"{name}.pem", "-days", "2", "-extfile", d / f"{name}.ext")

    def conf(self):
        """--rdzv-conf's TLS keys for the client."""
        d = self.dir
        return f"cacert={d / 'ca.pem'},cert={d / 'client.pem'},key={d / 'client.key'}"


class Etcd:
    """etcd members on 127.0.0.1 of this harness's own (data under `tmp`), stopped by stop(); with
    `certificates`, clients must speak TLS and show a certificate of their CA."""

    def __init__(self, tmp, members=1, certificates=None):
        self.ports = [(free_port(), free_port()) for _ in range(members)]
        cluster = ",".join(f"m{i}=http://127.0.0.1:{peer}" for i, (_, peer) in enumerate(self.ports))
        scheme = "https" if certificates else "http"
        tls = []
        if certificates:
            d = certificates.dir
            tls = ["--cert-file", d / "server.pem", "--key-file", d / "server.key", "--client-cert-auth",
                   "--trusted-ca-file", d / "ca.pem"]
        self.procs = []
        for i, (client, peer) in enumerate(self.ports):
            data = Path(tempfile.mkdtemp(prefix=f"etcd-m{i}-", dir=tmp))
            self.procs.append(subprocess.Popen(
                [ETCD, "--name", f"m{i}", "--data-dir", str(data),
                 "--listen-client-urls", f"{scheme}://127.0.0.1:{client}",
                 "--advertise-client-urls", f"{scheme}://127.0.0.1:{client}",
                 "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                 "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                 "--initial-cluster", cluster, "--initial-cluster-state", "new",
                 "--heartbeat-interval", "100", "--election-timeout", "1000", "--log-level", "error", *map(str, tls)],
                stdout=subprocess.DEVNULL, stderr=open(data / "log", "w"), start_new_session=True))
        self.endpoints = [f"{scheme}://127.0.0.1:{c}" for c, _ in self.ports]
        self.tls_flags = []
        if certificates:
            d = certificates.dir
            self.tls_flags = [f"--cacert={d / 'ca.pem'}", f"--cert={d / 'client.pem'}", f"--key={d / 'client.key'}"]
        deadline = time.monotonic() + 30
        while self.leader() is None:
            if time.monotonic() > deadline:
                self.stop()
                raise BenchError("the etcd cluster elected no leader within 30 s")
            time.sleep(0.1)

    def leader(self):
        """Index of the member that leads, or None."""
        for i, endpoint in enumerate(self.endpoints):
            if self.procs[i].poll() is not None:
                continue
            r = subprocess.run([ETCDCTL, f"--endpoints={endpoint}", *self.tls_flags, "--command-timeout=1s", "endpoint",
                                "status", "-w", "json"], capture_output=True, text=True, env={**os.environ, "ETCDCTL_API": "3"})
            m, l = re.search(r'"member_id":(\d+)', r.stdout), re.search(r'"leader":(\d+)', r.stdout)
            if r.returncode == 0 and m and l and m.group(1) == l.group(1):
                return i
        return None

    def kill(self, i):
        self.procs[i].kill()
        self.procs[i].wait()

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


# ---------------------------------------------------------------------------- etcd_startup

_prefix = [0]


def agent_cmd(kind, a, n, port, worker):
    if kind in ("etcd", "etcd-tls"):
        _prefix[0] += 1
        tls = kind == "etcd-tls"
        return [a.rdzv_ddprun, "--nnodes", f"{n}:{n}", "--rdzv-backend", "etcd-v3",
                "--rdzv-endpoint", a.etcd_tls_endpoint if tls else a.etcd_endpoint, "--rdzv-id", "bench",
                "--rdzv-conf", f"key_prefix=/bench-{os.getpid()}-{_prefix[0]}" + ("," + a.etcd_tls_conf if tls else ""),
                "--nproc-per-node", "1", "--no-python", worker]
    if kind == "c10d":
        kind = "ddprun"
    return rb_agent_cmd(kind, a, n, port, worker)


rb_agent_cmd = rb.agent_cmd
rb.agent_cmd = agent_cmd  # startup_once (rendezvous_bench.py) builds its agents' commands here


def bench_startup(a, tmp):
    certificates = Certificates(tmp)
    etcd = Etcd(tmp)
    etcd_tls = Etcd(tmp, certificates=certificates)
    a.etcd_endpoint = etcd.endpoints[0]
    a.etcd_tls_endpoint, a.etcd_tls_conf = etcd_tls.endpoints[0], certificates.conf()
    try:
        say(f"# etcd_startup: N agents x 1 worker on 127.0.0.1, --nnodes N:N; etcd-v3 (one etcd 3.4 member on "
            f"loopback) vs etcd-v3 over TLS with client certificates (another member) vs ddprun c10d vs "
            f"torchrun-anchor c10d; time from spawning the first agent until the Nth worker wrote its line "
            f"(rendezvous_bench.py's startup_once); median of {a.etcd_repeat}, the four alternating")
        rows, failed = [], False
        for n in a.etcd_nodes:
            times = {"etcd": [], "etcd-tls": [], "c10d": [], "anchor": []}
            notes = {}
            for _ in range(a.etcd_repeat):
                for kind in ("etcd", "etcd-tls", "c10d", "anchor"):
                    if kind == "anchor":
                        ok, why = rb.anchor_plan(a, n, None)
                        if not ok:
                            notes[kind] = why
                            continue
                    try:
                        r = rb.startup_once(kind, a, n, a.rdzv_timeout if kind != "anchor" else a.rdzv_anchor_timeout,
                                            a.rdzv_exit_timeout if kind != "anchor" else a.rdzv_anchor_timeout, tmp)
                        times[kind].append(r.up_ms)
                        if r.exit_problem and kind != "anchor":
                            failed = True
                            notes[kind] = "EXIT FAILURE: " + r.exit_problem.splitlines()[0]
                    except (rb.TimedOut, BenchError) as e:
                        notes[kind] = f"FAILED: {str(e).splitlines()[0]}"
                        if kind != "anchor":
                            failed = True
            med = {k: statistics.median(v) if v else None for k, v in times.items()}
            e, s, c, t = med["etcd"], med["etcd-tls"], med["c10d"], med["anchor"]
            ratio = lambda x: f"{x / e:.2f}x" if x and e else "n/a"
            say(f"etcd_startup_{n}nodes  etcd-v3 {fmt(e) if e else 'FAILED'} ms  etcd-v3-tls {fmt(s) if s else 'FAILED'} ms  "
                f"ddprun-c10d {fmt(c) if c else 'FAILED'} ms  "
                f"torchrun-anchor-c10d {fmt(t) if t else notes.get('anchor', 'n/a')} ms  "
                f"ratio c10d/etcd {ratio(c)}  anchor/etcd {ratio(t)}  tls/etcd {ratio(s)}")
            for kind, v in times.items():
                if v:
                    say(f"    {kind}: median {fmt(statistics.median(v))}  min {fmt(min(v))}  max {fmt(max(v))} ms  "
                        f"n={len(v)}")
            for kind, note in notes.items():
                say(f"    {kind}: {note}")
            rows.append((n, e, c, t))
        if failed:
            raise BenchError("a ddprun run failed (see above)")
    finally:
        etcd.stop()
        etcd_tls.stop()


# ---------------------------------------------------------------------------- failovers

WAIT_WORKER = """#!/bin/sh
# A worker of etcd_bench.py: says it runs ("RANK WORLD_SIZE" into the FIFO), then waits for GO.
printf '%s %s\\n' "$RANK" "$WORLD_SIZE" > "$RDZV_BENCH_FIFO"
while [ ! -e "$RDZV_BENCH_GO" ]; do sleep 0.05; done
"""


class Job:
    """Agents of one elastic job whose workers report to a FIFO and wait for a file."""

    def __init__(self, a, tmp, cmd):
        self.dir = Path(tempfile.mkdtemp(prefix="failover-", dir=tmp))
        worker = self.dir / "worker.sh"
        worker.write_text(WAIT_WORKER)
        worker.chmod(0o755)
        fifo = self.dir / "fifo"
        os.mkfifo(fifo)
        self.fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "TORCHELASTIC_"))}
        self.env.update(RDZV_BENCH_FIFO=str(fifo), RDZV_BENCH_GO=str(self.dir / "go"))
        self.cmd = cmd + ["--no-python", str(worker)]
        self.procs, self.pending, self.lines = [], b"", []

    def start_agent(self):
        err = open(self.dir / f"agent{len(self.procs)}.stderr", "w+b")
        self.procs.append(subprocess.Popen(self.cmd, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                           stderr=err, start_new_session=True))

    def wait_lines(self, count, world, timeout):
        """Waits until `count` more lines of WORLD_SIZE `world` came; returns when (monotonic)."""
        deadline, seen = time.monotonic() + timeout, 0
        while seen < count:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BenchError(f"timed out after {timeout:g} s waiting for {count} workers of world {world} "
                                 f"({seen} came): {' '.join(self.cmd)}\n{self.stderr_tail()}")
            ready, _, _ = select.select([self.fd], [], [], min(0.1, left))
            if ready:
                at = time.monotonic()
                self.pending += os.read(self.fd, 65536)
                *done, self.pending = self.pending.split(b"\n")
                for line in done:
                    parts = line.split()
                    if len(parts) == 2 and int(parts[1]) == world:
                        seen += 1
        return at

    def stderr_tail(self):
        out = []
        for i in range(len(self.procs)):
            out.append(f"agent {i}: " + (self.dir / f"agent{i}.stderr").read_text(errors="replace")[-600:])
        return "\n".join(out)

    def finish(self):
        (self.dir / "go").touch()
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                pass
        rb.kill_all(self.procs)
        os.close(self.fd)


def failover_leader_once(a, tmp, kill_leader):
    etcd = Etcd(tmp, members=3)
    try:
        job = Job(a, tmp, [a.rdzv_ddprun, "--nnodes", "2:3", "--rdzv-backend", "etcd-v3",
                           "--rdzv-endpoint", ",".join(etcd.endpoints), "--rdzv-id", "failover",
                           "--rdzv-conf", "lease_ttl=3,keep_alive_interval=1,last_call_timeout=1,join_timeout=60",
                           "--nproc-per-node", "1"])
        try:
            job.start_agent()
            job.start_agent()
            job.wait_lines(2, 2, 60)
            time.sleep(1)
            leader = etcd.leader()
            t0 = time.monotonic()
            if kill_leader:
                etcd.kill(leader)
            job.start_agent()
            t1 = job.wait_lines(3, 3, 60)
            return (t1 - t0) * 1000
        finally:
            job.finish()
    finally:
        etcd.stop()


def bench_failover_leader(a, tmp):
    say("# etcd_failover_leader: 3 etcd members on loopback, an elastic 2:3 job of 2 agents running; at t0 "
        "the etcd leader is SIGKILLed (baseline: not) and a third agent starts; time to the 3 workers of the "
        f"next round; median of {a.etcd_failover_repeat}, alternating")
    killed, base = [], []
    for _ in range(a.etcd_failover_repeat):
        killed.append(failover_leader_once(a, tmp, True))
        base.append(failover_leader_once(a, tmp, False))
    k, b = statistics.median(killed), statistics.median(base)
    say(f"etcd_failover_leader  leader SIGKILLed: next round after {fmt(k)} ms  baseline (no kill) {fmt(b)} ms  "
        f"failover cost {fmt(k - b)} ms")
    say(f"    killed: {', '.join(fmt(x) for x in killed)} ms; baseline: {', '.join(fmt(x) for x in base)} ms")


def failover_agent_once(a, tmp, backend, endpoint):
    conf = "keep_alive_interval=1,keep_alive_max_attempt=3,last_call_timeout=1,join_timeout=60"
    if backend == "etcd-v3":
        conf += ",lease_ttl=3,key_prefix=/failover-" + str(time.monotonic_ns())
    job = Job(a, tmp, [a.rdzv_ddprun, "--nnodes", "2:3", "--rdzv-backend", backend, "--rdzv-endpoint", endpoint,
                       "--rdzv-id", "agentfail", "--rdzv-conf", conf, "--nproc-per-node", "1"])
    try:
        job.start_agent()
        time.sleep(0.3)  # c10d: the first agent binds the port and hosts the store
        job.start_agent()
        job.start_agent()
        job.wait_lines(3, 3, 60)
        time.sleep(1)
        victim = job.procs[2]
        t0 = time.monotonic()
        os.killpg(victim.pid, signal.SIGKILL)
        t1 = job.wait_lines(2, 2, 60)
        return (t1 - t0) * 1000
    finally:
        job.finish()


def bench_failover_agent(a, tmp):
    etcd = Etcd(tmp)
    try:
        say("# etcd_failover_agent: an elastic 2:3 job of 3 agents running; at t0 one agent (not the c10d store's "
            "host) is SIGKILLed; time to the 2 survivors' workers of the new round; etcd-v3 (lease_ttl 3) vs c10d "
            f"(keep_alive_interval 1 x max_attempt 3); median of {a.etcd_failover_repeat}, alternating")
        e_runs, c_runs = [], []
        for _ in range(a.etcd_failover_repeat):
            e_runs.append(failover_agent_once(a, tmp, "etcd-v3", etcd.endpoints[0]))
            c_runs.append(failover_agent_once(a, tmp, "c10d", f"127.0.0.1:{free_port()}"))
        e, c = statistics.median(e_runs), statistics.median(c_runs)
        say(f"etcd_failover_agent  etcd-v3 {fmt(e)} ms  ddprun-c10d {fmt(c)} ms  ratio c10d/etcd {c / e:.2f}x")
        say(f"    etcd-v3: {', '.join(fmt(x) for x in e_runs)} ms; c10d: {', '.join(fmt(x) for x in c_runs)} ms")
    finally:
        etcd.stop()


BENCHMARKS = {
    "etcd_startup": bench_startup,
    "etcd_failover_leader": bench_failover_leader,
    "etcd_failover_agent": bench_failover_agent,
}


def main():
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("filter", nargs="?", default="", help="substring of benchmark names to run")
    p.add_argument("--etcd-ddprun", "--ddprun", dest="rdzv_ddprun", default=env("DDPRUN", str(REPO / "build/bin/ddprun")))
    p.add_argument("--etcd-anchor", "--anchor", dest="rdzv_anchor",
                   default=env("TORCHRUN_ANCHOR", str(REPO.parent / "shared/tools/torchrun-anchor")))
    p.add_argument("--etcd-nodes", type=lambda s: [int(x) for x in s.split(",")], default=[8, 64])
    p.add_argument("--etcd-repeat", type=int, default=3, help="etcd_startup: runs of each per count (median)")
    p.add_argument("--etcd-failover-repeat", type=int, default=3)
    p.add_argument("--list", action="store_true", help="print the benchmark names and exit")
    a = p.parse_args()
    # What rendezvous_bench.startup_once reads.
    a.rdzv_timeout, a.rdzv_anchor_timeout, a.rdzv_exit_timeout, a.rdzv_pause = 120.0, 600.0, 30.0, 0.5
    a.rdzv_only, a.rdzv_anchor_max_nodes = None, 64

    def tools_for(chosen):
        return [a.rdzv_ddprun, ETCD, ETCDCTL] + ([a.rdzv_anchor, OPENSSL] if "etcd_startup" in chosen else [])

    return run_harness(BENCHMARKS, a, tools_for, tmp_prefix="ddprun-etcd-bench-")


if __name__ == "__main__":
    sys.exit(main())

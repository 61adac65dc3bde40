"""torchrun's argument habits (issue 11, item 4) and torch.distributed.launch's --local_rank
(item 5): the SAME command lines through torchrun-anchor (Debian's PyTorch 1.13) and ddprun.
Both must accept them, or both refuse them; where both accept, the workers must see the same
arguments and the same identity variables.

Usage: args_parity.py DDPRUN_BINARY [TORCHRUN_ANCHOR]

Each torchrun run costs about 1.5 s (importing torch), so the habits are packed into a few
command lines. Exit 77 (skipped) when /usr/bin/python3 has no torch or the anchor is missing.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile

SKIP = 77
PYTHON = "/usr/bin/python3"
ANCHOR_DEFAULT = "/work/shared/tools/torchrun-anchor"

# The worker: its arguments and identity, one JSON file per local rank.
PROBE = """
import json, os, sys
keys = ["LOCAL_RANK", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_NAME",
        "ROLE_RANK", "TORCHELASTIC_RUN_ID"]
with open(os.path.join(os.environ["PROBE_OUT"], os.environ["LOCAL_RANK"] + ".json"), "w") as f:
    json.dump({"argv": sys.argv[1:], "env": {k: os.environ.get(k) for k in keys}}, f)
"""


# `python -m torch.distributed.launch` with the one fix torchrun-anchor applies on Python 3.11
# (Std.from_str("0") gives None there; Std(int) is what 1.13 meant).
LEGACY_LAUNCH = """
import re, sys
from torch.distributed.elastic.multiprocessing import api as _api
_orig = _api.Std.from_str
def _from_str(vm):
    if re.fullmatch(r"\\s*\\d\\s*", vm):
        return _api.Std(int(vm))
    r = _orig(vm)
    return {k: _api.Std(int(v)) if v is None else v for k, v in r.items()} if isinstance(r, dict) else r
_api.Std.from_str = staticmethod(_from_str)
from torch.distributed.launch import main
main()
"""


def free_port(family=socket.AF_INET, host="127.0.0.1"):
    with socket.socket(family) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def ipv6_loopback():
    try:
        free_port(socket.AF_INET6, "::1")
        return True
    except OSError:
        return False


class Runner:
    def __init__(self, ddprun, anchor, folder):
        self.ddprun = ddprun
        self.anchor = anchor
        self.folder = folder
        self.probe = os.path.join(folder, "probe.py")
        with open(self.probe, "w") as f:
            f.write(PROBE)
        self.count = 0

    def run(self, launcher, args):
        """Runs launcher + args (PROBE for "{probe}"); returns (rc, outputs by local rank, stderr)."""
        self.count += 1
        out = os.path.join(self.folder, "out%d" % self.count)
        os.mkdir(out)
        env = dict(os.environ, PROBE_OUT=out, PYTHON_EXEC=PYTHON)
        for name in list(env):
            if name.startswith("PET_") or name in ("TORCHELASTIC_RUN_ID", "LOCAL_RANK", "RANK"):
                del env[name]
        argv = launcher + [self.probe if a == "{probe}" else a for a in args]
        proc = subprocess.run(argv, env=env, cwd=self.folder, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=120)
        outputs = {}
        for name in os.listdir(out):
            with open(os.path.join(out, name)) as f:
                outputs[int(name.split(".")[0])] = json.load(f)
        return proc.returncode, outputs, proc.stderr


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    ddprun = os.path.abspath(sys.argv[1])
    anchor = sys.argv[2] if len(sys.argv) > 2 else ANCHOR_DEFAULT
    if not os.path.exists(anchor):
        print("SKIP: no torchrun-anchor at " + anchor)
        return SKIP
    if subprocess.run([PYTHON, "-c", "import torch.distributed.run"], capture_output=True).returncode != 0:
        print("SKIP: " + PYTHON + " cannot import torch.distributed.run")
        return SKIP

    failures = []
    folder = tempfile.mkdtemp(prefix="ddprun_args_parity_")
    runner = Runner(ddprun, anchor, folder)

    def check(name, args, accept, torchrun=None, ddprun_args=None, same_env=True, run_id=None):
        """`args` through both launchers (or `torchrun` for the reference and `ddprun_args` for ddprun)."""
        ref_argv = torchrun if torchrun is not None else [anchor]
        ref_rc, ref_out, ref_err = runner.run(ref_argv, args)
        rc, out, err = runner.run([ddprun], ddprun_args if ddprun_args is not None else args)
        problems = []
        if accept:
            if ref_rc != 0:
                problems.append("torchrun refused it (rc %d): %s" % (ref_rc, ref_err.strip().splitlines()[-1:]))
            if rc != 0:
                problems.append("ddprun refused it (rc %d): %s" % (rc, err.strip()))
            if not problems:
                if sorted(out) != sorted(ref_out) or not out:
                    problems.append("workers differ: ddprun %s, torchrun %s" % (sorted(out), sorted(ref_out)))
                for rank in sorted(ref_out):
                    if rank not in out:
                        continue
                    mine, theirs = out[rank], ref_out[rank]
                    if mine["argv"] != theirs["argv"]:
                        problems.append("local rank %d argv: ddprun %r, torchrun %r" % (rank, mine["argv"], theirs["argv"]))
                    if same_env:
                        for key, value in theirs["env"].items():
                            if key == "TORCHELASTIC_RUN_ID" and run_id is not None:
                                continue
                            if mine["env"].get(key) != value:
                                problems.append("local rank %d %s: ddprun %r, torchrun %r" % (
                                    rank, key, mine["env"].get(key), value))
                    if run_id is not None:
                        for who, rid in (("ddprun", mine["env"]["TORCHELASTIC_RUN_ID"]),
                                         ("torchrun", theirs["env"]["TORCHELASTIC_RUN_ID"])):
                            if not run_id(rid):
                                problems.append("%s's run id %r is not as expected" % (who, rid))
        else:
            if ref_rc == 0:
                problems.append("torchrun accepted it")
            if rc != 2:
                problems.append("ddprun did not refuse it as a usage error (rc %d): %s" % (rc, err.strip()))
            if out:
                problems.append("ddprun started workers")
        print("%s %s: %s" % ("ok  " if not problems else "FAIL", name, " ".join(args)))
        for p in problems:
            print("      " + p)
        if problems:
            failures.append(name)
        return err

    port = free_port()
    # Prefixes (both separators), empty template values, --start_method, $local_rank and its
    # string.Template company, all in one job of two workers.
    check("prefixes-empty-values-substitution",
          ["--nproc=2", "--nnod", "1", "--rdzv_conf=", "--log_dir=", "--rdzv_endpoint=", "--role=worker",
           "--start_method=fork", "--master_p=%d" % port, "--max_r", "0", "{probe}",
           "a", "$local_rank", "--out=/ckpt/${local_rank}/x", "$$", "$$local_rank", "$local_rankx", "$LOCAL_RANK",
           "${rank}", "--nproc=9"],
          accept=True)
    # An ambiguous prefix: argparse's error, and ddprun's usage error.
    err = check("ambiguous-prefix", ["--no", "{probe}"], accept=False)
    if "could match" not in err:
        failures.append("ambiguous-message")
        print("FAIL ambiguous-prefix: ddprun's message names no candidates: " + err.strip())
    # Empty values torchrun refuses: both refuse.
    check("empty-nnodes", ["--nnodes=", "{probe}"], accept=False)
    check("empty-max-restarts", ["--max_restarts=", "{probe}"], accept=False)
    # An empty run id: torchrun makes up a random decimal one, so does ddprun. And an IPv6 endpoint
    # without brackets, split at its last ':'.
    if ipv6_loopback():
        port6 = free_port(socket.AF_INET6, "::1")
        check("ipv6-endpoint-empty-run-id",
              ["--rdzv_backend=c10d", "--rdzv_endpoint=::1:%d" % port6, "--rdzv_id=", "--nproc_per_node=1",
               "{probe}", "x"],
              accept=True, run_id=lambda rid: bool(rid) and rid.isdigit())
    else:
        print("skip ipv6-endpoint-empty-run-id: no IPv6 loopback here")
    # torch.distributed.launch: --local_rank=N right after the script; ddprun with
    # --append-local-rank=underscore. And --use_env: no --local_rank, the environment only.
    launch_py = os.path.join(folder, "legacy_launch.py")
    with open(launch_py, "w") as f:
        f.write(LEGACY_LAUNCH)
    launch = [PYTHON, "-W", "ignore::FutureWarning", launch_py]
    port = free_port()
    common = ["--nproc_per_node", "2", "--master_port", str(port), "{probe}", "--lr", "0.1"]
    check("legacy-launch-local-rank", common, accept=True, torchrun=launch,
          ddprun_args=["--append-local-rank=underscore"] + common)
    port = free_port()
    common = ["--use_env", "--nproc_per_node", "2", "--master_port", str(port), "{probe}", "--lr", "0.1"]
    check("legacy-launch-use-env", common, accept=True, torchrun=launch)

    shutil.rmtree(folder, ignore_errors=True)
    if failures:
        print("FAILED: " + ", ".join(failures))
        return 1
    print("all %d command lines behave as under torchrun" % (runner.count // 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# Installs the Debian packages ddprun needs.
#   scripts/setup.sh          what the build, the demo and scripts/package.sh need (demo.sh)
#   scripts/setup.sh --tests  also what the test suite and the benchmarks start (test.sh, bench.sh):
#                             sshd, Slurm, etcd, Chromium, Prometheus, tmux, gdb, clang, mpirun...
# Idempotent: packages already present are skipped without touching apt.
set -euo pipefail

build_packages=(
  build-essential g++ cmake ninja-build pkg-config
  libboost1.74-dev libboost-filesystem1.74-dev   # Asio (event loop, sockets), Process (spawning)
  libcli11-dev libfmt-dev nlohmann-json3-dev
  libssl-dev                                     # HMAC-SHA256 for store authentication; TLS to etcd
  libgloo-dev libspdlog-dev                      # ddprun::runtime: CPU collectives, rank-aware logging
  libtorch-dev zlib1g-dev                        # ddprun::torch and the LibTorch examples
  libunwind-dev liblzma-dev                      # ddprun-unwind: native stacks of --hang-timeout
  dataset-fashion-mnist                          # the training demo's data
  python3 python3-torch                          # the demo's PyTorch script; Python workers
  python3-build python3-hatchling python3-venv   # scripts/package.sh: the wheel (PEP 517), a venv to try it
)
test_packages=(
  libgtest-dev
  clang-14 libclang-rt-14-dev                    # libFuzzer for the wire decoder's fuzz test
  openmpi-bin                                    # mpirun, a launcher the runtime must work under
  openssl                                        # the etcd benchmark makes its TLS certificates
  hyperfine procps iproute2
  gdb                                            # native stacks in tests/stress's hang dumps
  chromium                                       # the status page rendered headless in tests (status_endpoint)
  prometheus                                     # promtool check metrics on /metrics in tests
  tmux                                           # the terminal status block under a real terminal in tests
  openssh-server openssh-client                  # --hostfile over ssh: sshd in network namespaces in tests
  slurmctld slurmd slurm-client munge            # srun inside a real Slurm allocation in tests
  etcd-server etcd-client                        # the etcd-v3 rendezvous against a real etcd in tests
)

packages=("${build_packages[@]}")
case "${1:-}" in
  "") ;;
  --tests) packages+=("${test_packages[@]}") ;;
  *) echo "usage: scripts/setup.sh [--tests]" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [[ $(id -u) != 0 ]]; then sudo="sudo"; fi
echo "setup: installing ${missing[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"

#!/usr/bin/env bash
# How long a new user waits, on a fresh Debian 12, from `./scripts/demo.sh` to its first line of
# training: a minimal Debian 12 (debootstrap, the machine's own mirror) in a folder, a clone of
# this repository's HEAD in it, and demo.sh run there as root, each output line stamped with the
# seconds since the start. Prints the time to setup.sh's end, the build's end, and the first
# "epoch 1/N step" line; the whole log stays in WORK/demo.log.
#   bench/fresh_demo.sh [WORK]     (default /tmp/ddprun-fresh; needs root; about 1 GiB of disk)
# The chroot shares this machine's kernel and cores; what it does not share is every package and
# build output, which is what "fresh" is about. debootstrap itself is not counted (a new machine
# comes with its base system).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/tmp/ddprun-fresh}
[[ $(id -u) == 0 ]] || { echo "fresh_demo.sh: needs root (debootstrap, chroot)" >&2; exit 2; }
command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null
root=$work/root
cleanup() { for m in dev/pts dev proc sys; do umount "$root/$m" 2>/dev/null || true; done; }
trap cleanup EXIT
if [[ ! -x $root/usr/bin/apt-get ]]; then
  rm -rf "$root"
  mkdir -p "$root"
  debootstrap --variant=minbase --include=ca-certificates,git,sudo bookworm "$root" http://deb.debian.org/debian >"$work/debootstrap.log"
fi
for m in proc sys dev dev/pts; do mount --bind "/$m" "$root/$m"; done
cp /etc/resolv.conf "$root/etc/resolv.conf"
rm -rf "$root/ddprun"
git clone -q "$repo" "$root/ddprun"
start=${EPOCHREALTIME/./}  # microseconds
chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
  bash -c 'cd /ddprun && ./scripts/demo.sh' 2>&1 | while IFS= read -r line; do
    elapsed=$(( (${EPOCHREALTIME/./} - start) / 100000 ))  # tenths of a second
    printf '%6d.%d %s\n' $((elapsed / 10)) $((elapsed % 10)) "$line"
  done >"$work/demo.log" || true
at() { awk -v pattern="$1" 'index($0, pattern) { print $1; exit }' "$work/demo.log"; }
echo "fresh Debian 12 chroot, $(nproc) cores: demo.sh"
echo "  setup.sh done (the build's configure starts): $(at '-- The CXX compiler identification') s"
echo "  build done: $(at '== Fashion-MNIST') s"
echo "  first line of training: $(at 'epoch 1/') s"
echo "  demo done: $(at 'demo: done') s (log: $work/demo.log)"

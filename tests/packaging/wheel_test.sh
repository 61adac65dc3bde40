#!/usr/bin/env bash
# The wheel as a user gets it (issue 23): scripts/package.sh builds it; it is pip-installed into a
# fresh `python3 -m venv --system-site-packages` in a folder outside the repository, and
# that-venv/bin/ddprun runs a gloo DDP script from another folder, with the venv not activated and
# a python3 without torch first on PATH: the workers must run with the venv's interpreter.
#   wheel_test.sh SOURCE_DIR PORTABLE_BUILD_DIR
# Checks, each failing with a line that says what was wrong:
# - the wheel's name and contents: py3-none-manylinux_*; bin/ddprun, bin/ddprun-store,
#   bin/ddprun-unwind (executable) and share/ddprun/python/ as shared data; nothing else, so nothing
#   lands in site-packages but ddprun's .dist-info;
# - the installed binaries need glibc alone (packaging/glibc_only.py);
# - the job: exit 0, every rank's DDP_OK line names the venv's interpreter and finds ddprun's
#   helpers, and `-v` says the interpreter was chosen because it sits beside ddprun;
# - a bad flag is one line and exit 2 (a C++ exception thrown and caught in the static binary);
# - the installed ddprun finds its Python helpers: --hang-timeout's Python stacks need them.
set -euo pipefail
source_dir=$(cd "${1:?usage: wheel_test.sh SOURCE_DIR PORTABLE_BUILD_DIR}" && pwd)
build_dir=${2:?usage: wheel_test.sh SOURCE_DIR PORTABLE_BUILD_DIR}
python=/usr/bin/python3
fail() { echo "FAIL: $*" >&2; exit 1; }

if ! "$python" -c 'import torch.distributed' 2>/dev/null; then
  echo "SKIP: $python cannot import torch.distributed (Debian's python3-torch)"
  exit 77
fi
outside=$(mktemp -d /tmp/ddprun-wheel-test.XXXXXX)  # outside the repository, whatever its place
trap 'rm -rf "$outside"' EXIT

DDPRUN_PORTABLE_BUILD_DIR=$build_dir "$source_dir/scripts/package.sh" "$outside/dist"
wheels=("$outside"/dist/ddprun-*.whl)
[[ ${#wheels[@]} == 1 && -f ${wheels[0]} ]] || fail "package.sh made ${#wheels[@]} wheels: ${wheels[*]}"
wheel=${wheels[0]}
[[ $(basename "$wheel") =~ ^ddprun-[0-9.]+-py3-none-manylinux_2_[0-9]+_x86_64\.whl$ ]] || fail "wheel name: $(basename "$wheel")"

"$python" - "$wheel" <<'PY'
import re, stat, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    names = wheel.namelist()
    data = [n for n in names if ".data/" in n]
    other = [n for n in names if ".data/" not in n and ".dist-info/" not in n]
    assert not other, f"files outside the shared data and .dist-info (they would land in site-packages): {other}"
    for binary in ("ddprun", "ddprun-store", "ddprun-unwind"):
        member = next((n for n in data if n.endswith(f".data/data/bin/{binary}")), None)
        assert member, f"no bin/{binary} in the wheel: {data}"
        mode = wheel.getinfo(member).external_attr >> 16
        assert mode & stat.S_IXUSR, f"bin/{binary} is not executable in the wheel (mode {oct(mode)})"
    assert any(n.endswith("/share/ddprun/python/sitecustomize.py") for n in data), f"no Python helpers: {data}"
    wheel_meta = wheel.read(next(n for n in names if n.endswith(".dist-info/WHEEL"))).decode()
    assert "Root-Is-Purelib: false" in wheel_meta, wheel_meta
    assert re.search(r"^Tag: py3-none-manylinux_2_\d+_x86_64$", wheel_meta, re.M), wheel_meta
print(f"wheel contents: {len(names)} files, all shared data or metadata")
PY

venv=$outside/venv
"$python" -m venv --system-site-packages "$venv"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
before=$(ls "$site")
"$venv/bin/python" -m pip install --no-index --no-deps --disable-pip-version-check -q "$wheel"
added=$(comm -13 <(echo "$before") <(ls "$site"))
[[ $added =~ ^ddprun-[0-9.]+\.dist-info$ ]] || fail "site-packages gained more than ddprun's .dist-info: $added"
for binary in ddprun ddprun-store ddprun-unwind; do
  [[ -x $venv/bin/$binary ]] || fail "$venv/bin/$binary is not an executable after pip install"
done
[[ -f $venv/share/ddprun/python/sitecustomize.py ]] || fail "no $venv/share/ddprun/python/sitecustomize.py"
"$python" "$source_dir/packaging/glibc_only.py" "$venv"/bin/ddprun "$venv"/bin/ddprun-store "$venv"/bin/ddprun-unwind >/dev/null \
  || fail "the installed binaries need more than glibc (above)"

# A python3 without torch, first on PATH; the venv is not activated.
"$python" -m venv --without-pip "$outside/notorch"
if "$outside/notorch/bin/python3" -c 'import torch' 2>/dev/null; then fail "the stand-in python3 can import torch"; fi
mkdir "$outside/elsewhere"
cp "$source_dir/tests/packaging/ddp_train.py" "$outside/elsewhere/train.py"
clean_env=(env -i "HOME=${HOME:-/root}" "LANG=C.UTF-8" "PATH=$outside/notorch/bin:/usr/bin:/bin")
set +e
(cd "$outside/elsewhere" && "${clean_env[@]}" "$venv/bin/ddprun" -v --standalone --nproc-per-node 2 train.py) >"$outside/job.out" 2>&1
status=$?
set -e
cat "$outside/job.out"
[[ $status == 0 ]] || fail "that-venv/bin/ddprun --nproc-per-node 2 train.py exited $status"
for rank in 0 1; do
  grep -q "DDP_OK rank=$rank world=2 python=$venv/bin/python3 .* helpers=found" "$outside/job.out" \
    || fail "rank $rank did not report DDP_OK with the venv's interpreter and ddprun's helpers"
done
grep -q "beside ddprun in $venv/bin" "$outside/job.out" || fail "-v does not say the interpreter sits beside ddprun"

set +e
"${clean_env[@]}" "$venv/bin/ddprun" --nproc-per-node 2 --no-such-flag train.py >"$outside/usage.out" 2>&1
status=$?
set -e
[[ $status == 2 && $(wc -l <"$outside/usage.out") == 1 ]] || { cat "$outside/usage.out"; fail "a bad flag: exit $status, not 2 with one line"; }
"$venv/bin/ddprun-store" --help >/dev/null || fail "ddprun-store --help failed"
echo "PASS: $(basename "$wheel") installs into a venv and runs a gloo DDP job with the venv's interpreter"

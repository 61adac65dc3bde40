#!/usr/bin/env bash
# Builds the wire decoder's libFuzzer target in build-fuzz/ and fuzzes it for N seconds.
#
#   tests/fuzz/run_fuzz.sh [seconds]      (default 30)
#
# Needs Debian's clang-14 and libclang-rt-14-dev (libFuzzer and the sanitizer runtimes). Exit
# status: 0 no crash; 1 a crash, leak, timeout or failed invariant (the input that did it is saved
# in build-fuzz/artifacts/); 77 skipped because clang or libFuzzer is missing (for CTest's
# SKIP_RETURN_CODE). The corpus grows in build-fuzz/corpus/ and is reused by later runs.
# Overrides: FUZZ_CXX (compiler), FUZZ_BUILD_DIR, FUZZ_JOBS (parallel fuzzing processes).
set -euo pipefail

seconds=${1:-30}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
cxx=${FUZZ_CXX:-clang++-14}
jobs=${FUZZ_JOBS:-1}

if ! command -v "$cxx" >/dev/null; then
  echo "run_fuzz: $cxx not found; install it with: apt-get install -y clang-14 libclang-rt-14-dev" >&2
  exit 77
fi
# libFuzzer's runtime comes from libclang-rt-14-dev, not from clang-14 itself.
if ! "$cxx" -print-file-name=libclang_rt.fuzzer-x86_64.a | grep -q /; then
  echo "run_fuzz: libFuzzer runtime missing; install it with: apt-get install -y libclang-rt-14-dev" >&2
  exit 77
fi

generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "$root/tests/fuzz" -B "$build" "${generator[@]}" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target wire_fuzz

# Seeds: one well-formed request of each dialect, so the fuzzer starts past the code byte.
seeds=$build/seeds
mkdir -p "$seeds" "$build/corpus" "$build/artifacts"
u64() { printf "\\x$(printf %02x "$1")\\x00\\x00\\x00\\x00\\x00\\x00\\x00"; }
{ printf '\x00'; u64 4; printf '/foo'; u64 3; printf 'bar'; } >"$seeds/legacy_set"
{ printf '\x03'; u64 5; printf 'init/'; u64 1; } >"$seeds/legacy_add"
{ printf '\x05'; u64 2; u64 2; printf '/a'; u64 2; printf '/b'; } >"$seeds/legacy_wait"
{ printf '\x00\xce\xf7\x85\x3c\x0d\x01\x02\x03\x04'; } >"$seeds/current_validate_ping"
{ printf '\x0b'; u64 1; u64 2; printf '/k'; u64 1; printf 'v'; } >"$seeds/current_multi_set"
{ printf '\x02'; u64 2; printf '/k'; u64 0; u64 1; printf 'x'; } >"$seeds/current_compare_set"
{ printf '\x41'; u64 2; printf 'pp'; u64 2; printf 'nn'; } >"$seeds/current_auth_response"

parallel=()
if ((jobs > 1)); then parallel=(-jobs="$jobs" -workers="$jobs"); fi
cd "$build"
set +e
./wire_fuzz corpus seeds -max_total_time="$seconds" -rss_limit_mb=512 -max_len=4096 -timeout=10 \
  -error_exitcode=1 -timeout_exitcode=1 -artifact_prefix=artifacts/ -print_final_stats=1 \
  "${parallel[@]}" >fuzz.log 2>&1
status=$?
set -e
if ((status != 0)); then
  tail -n 120 fuzz.log >&2
  echo "run_fuzz: FAILED (status $status; log $build/fuzz.log)." \
    "Reproduce with: $build/wire_fuzz $build/artifacts/<file>" >&2
  exit 1
fi
tail -n 12 fuzz.log
echo "run_fuzz: no crash in ${seconds}s"

#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/fuzz_*.cc) with clang, ASan and
# UBSan in their own build directory, and runs each for a bounded time
# against its committed seed corpus (tests/fuzz/corpus/<target>/). New
# inputs go to a scratch corpus, not the repository; a crash leaves its
# input in <build>/artifacts/ and fails the script.
#
#   scripts/fuzz.sh [seconds-per-target]     (default 60)
#
# FUZZ_BUILD=dir overrides the build directory (default build-fuzz/),
# FUZZ_TARGETS="fuzz_a fuzz_b" runs only those, JOBS=N limits ninja.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-60}
build=${FUZZ_BUILD:-$root/build-fuzz}
cc=$(command -v clang-14 || command -v clang)
cxx=$(command -v clang++-14 || command -v clang++)

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DWEFT_BUILD_FUZZ=ON -DWEFT_SANITIZE=address,undefined \
  -DWEFT_BUILD_TESTS=OFF -DWEFT_BUILD_PERF=OFF -DWEFT_WERROR=OFF >/dev/null

targets=${FUZZ_TARGETS:-}
if [[ -z $targets ]]; then
  for src in "$root"/tests/fuzz/fuzz_*.cc; do
    targets+=" $(basename "$src" .cc)"
  done
fi
# shellcheck disable=SC2086
ninja -C "$build" ${JOBS:+-j "$JOBS"} $targets

mkdir -p "$build/artifacts"
failed=()
for t in $targets; do
  seeds="$root/tests/fuzz/corpus/${t#fuzz_}"
  scratch="$build/corpus/${t#fuzz_}"
  mkdir -p "$seeds" "$scratch"
  echo "== $t: ${seconds}s (seeds: ${seeds#"$root"/})"
  if ! "$build/bin/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" "$scratch" "$seeds" \
    >"$build/$t.log" 2>&1; then
    failed+=("$t")
    tail -n 40 "$build/$t.log"
  else
    grep -E "stat::number_of_executed_units|Done [0-9]+ runs" "$build/$t.log" | tail -n 2
  fi
done

if ((${#failed[@]})); then
  echo "fuzz: FAILED: ${failed[*]} (inputs in $build/artifacts/)" >&2
  exit 1
fi
echo "fuzz: all targets ran ${seconds}s without a finding"

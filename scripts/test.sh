#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test; then the same tests
# again in an AddressSanitizer + UndefinedBehaviorSanitizer build, the
# threaded tests under ThreadSanitizer, the libFuzzer targets
# (WEFT_FUZZ_SECONDS each, default 60) and a soak (WEFT_SOAK_SECONDS,
# default 120). Exits non-zero on any failure.
#
#   scripts/test.sh [--quick]
#
#   --quick   Release tests only: no sanitizers, fuzzing or soak
#
# Build trees: build/ (Release), build-asan/ (RelWithDebInfo, no perf),
# build-tsan/ (engine, async, reliability, TCP wire and channel, compression
# tests under ThreadSanitizer) and build-fuzz/ (clang, libFuzzer).
set -euo pipefail

usage() { sed -n '2,11s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }

quick=0
for arg in "$@"; do
  case $arg in
    --quick) quick=1 ;;
    -h | --help)
      usage
      exit 0
      ;;
    *)
      echo "test.sh: unknown argument '$arg'" >&2
      usage >&2
      exit 2
      ;;
  esac
done

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# Parallel tests (ctest -j); JOBS, when set, also limits ninja.
jobs=${JOBS:-2}
# A hung test fails after this many seconds instead of stalling CI.
test_timeout=${WEFT_TEST_TIMEOUT:-600}

step() { printf '\n=== %s (%ds elapsed)\n' "$*" "$SECONDS"; }

run_ctest() {
  ctest --test-dir "$1" --output-on-failure --no-tests=error -j "$jobs" --timeout "$test_timeout"
}

# The perf binaries must run and validate at small sizes (seconds).
perf_smoke() {
  local bin=$1/bin name
  for name in all_reduce_perf all_gather_perf reduce_scatter_perf alltoall_perf; do
    [[ -x $bin/$name ]] || continue
    step "smoke: weftrun -n 2 $name"
    "$bin/weftrun" -n 2 --timeout 120 "$bin/$name" -b 8 -e 1M -f 8 -n 3 -w 1
  done
}

step "setup"
scripts/setup.sh

step "build: build/ (Release)"
scripts/build.sh "$root/build"
step "tests: build/"
run_ctest "$root/build"
perf_smoke "$root/build"

if ((quick == 0)); then
  step "build: build-asan/ (address,undefined)"
  scripts/build.sh "$root/build-asan" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_SANITIZE=address,undefined -DWEFT_BUILD_PERF=OFF
  step "tests: build-asan/"
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:check_initialization_order=1:strict_init_order=1} \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    run_ctest "$root/build-asan"

  # Where threads meet: the progress engine's unit test, and the multi-rank
  # tests whose ranks run an engine thread beside the caller (async work,
  # timeouts, the flight recorder's signal thread) and the compression worker
  # pool (compression_threads_test) under ThreadSanitizer. A
  # report in a rank fails that rank, which fails the test.
  # (algorithms_test is left out: it takes many minutes under TSan.)
  tsan_tests=(engine_test async_test reliability_test tcp_wire_test tcp_channel_test compression_comm_test compression_threads_test)
  step "build: build-tsan/ (thread: ${tsan_tests[*]})"
  cmake -S "$root" -B "$root/build-tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DWEFT_SANITIZE=thread -DWEFT_BUILD_PERF=OFF
  ninja -C "$root/build-tsan" ${JOBS:+-j "$JOBS"} "${tsan_tests[@]}"
  for t in "${tsan_tests[@]}"; do
    step "tests: build-tsan/ $t"
    TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1} "$root/build-tsan/bin/$t"
  done
fi

if ((quick == 0)); then
  # Every parser of bytes from outside, under libFuzzer (clang, ASan+UBSan),
  # for a bounded time each from the committed corpus.
  step "fuzz: scripts/fuzz.sh ${WEFT_FUZZ_SECONDS:-60}"
  scripts/fuzz.sh "${WEFT_FUZZ_SECONDS:-60}"
  # A short soak: a seeded random mix on 4 ranks, results checked, RSS and
  # fds required flat (the 30-minute run is scripts/soak.sh 1800).
  step "soak: scripts/soak.sh ${WEFT_SOAK_SECONDS:-120}"
  BUILD="$root/build" scripts/soak.sh "${WEFT_SOAK_SECONDS:-120}"
fi

step "all tests passed"

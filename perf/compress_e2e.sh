#!/usr/bin/env bash
# End-to-end compressed vs plain allreduce: time of all_reduce_perf with
# each -Z compressor against the plain allreduce on the same buffer, printed
# as a speed-up ratio next to the bar it should reach.
#
#   perf/compress_e2e.sh [options]
#     --build DIR        build directory (default: build)
#     --mode netns|local netns (default): two network namespaces joined by a
#                        veth pair throttled with tc to --rate; ranks talk TCP
#                        across it (needs root, iproute2, and weft's TCP
#                        transport). local: ranks on this host via weftrun
#                        (shared memory): checks the pipeline, not the bars.
#     --rate R           veth rate for tc tbf (default 1gbit)
#     --ranks-per-ns K   ranks in each namespace (default 1: 2 ranks in all)
#     --ranks N          local mode: number of ranks (default 2)
#     --bytes B          fp32 gradient size (default 64M = 4096 x 4096)
#     --iters N          timed iterations per run (default 5; 2 warm-up)
#     --codecs LIST      space-separated -Z specs (default below)
#
# Bars (issue 4), for a 64 MiB fp32 gradient at 1 Gbit/s:
#   onebit >= 10x, powersgd rank 4 on 4096x4096 >= 20x, fp16 >= 1.8x.
# Each run is one all_reduce_perf process per rank; the time taken is the
# out-of-place time column (average over ranks, -a 1) with checking off
# (-c 0: the check is all_reduce_perf's job in the test runs).
# Namespaces and the veth pair are removed on exit, whatever happens.
set -euo pipefail

build=build
mode=netns
rate=1gbit
rpn=1
nlocal=2
bytes=64M
iters=5
codecs="onebit powersgd:rank=4 topk:ratio=0.01 fp16 bf16"

while (($#)); do
  case $1 in
    --build) build=$2; shift 2 ;;
    --mode) mode=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --ranks-per-ns) rpn=$2; shift 2 ;;
    --ranks) nlocal=$2; shift 2 ;;
    --bytes) bytes=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --codecs) codecs=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed 's/^# \{0,1\}//;$d'; exit 0 ;;
    *) echo "compress_e2e: unknown option $1" >&2; exit 2 ;;
  esac
done

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[[ $build = /* ]] || build="$root/$build"
perf="$build/bin/all_reduce_perf"
[[ -x $perf ]] || { echo "compress_e2e: $perf not built" >&2; exit 2; }
args=(-b "$bytes" -e "$bytes" -n "$iters" -w 2 -c 0 -o avg -d float -a 1)

tag="wz$$"
ns0="${tag}a" ns1="${tag}b"
cleanup() {
  if [[ $mode == netns ]]; then
    ip netns del "$ns0" 2>/dev/null || true
    ip netns del "$ns1" 2>/dev/null || true
  fi
}
trap cleanup EXIT INT TERM

setup_netns() {
  [[ $(id -u) -eq 0 ]] || { echo "compress_e2e: netns mode needs root" >&2; exit 2; }
  ip netns add "$ns0"
  ip netns add "$ns1"
  ip link add "${tag}0" type veth peer name "${tag}1"
  ip link set "${tag}0" netns "$ns0"
  ip link set "${tag}1" netns "$ns1"
  ip -n "$ns0" addr add 10.231.0.1/24 dev "${tag}0"
  ip -n "$ns1" addr add 10.231.0.2/24 dev "${tag}1"
  for ns in "$ns0" "$ns1"; do ip -n "$ns" link set lo up; done
  ip -n "$ns0" link set "${tag}0" up
  ip -n "$ns1" link set "${tag}1" up
  # Token bucket on each side's egress: both directions run at $rate.
  ip netns exec "$ns0" tc qdisc add dev "${tag}0" root tbf rate "$rate" burst 256kb latency 100ms
  ip netns exec "$ns1" tc qdisc add dev "${tag}1" root tbf rate "$rate" burst 256kb latency 100ms
}

# Runs all_reduce_perf with extra args; prints rank 0's output.
run_perf() {
  if [[ $mode == local ]]; then
    "$build/bin/weftrun" -n "$nlocal" "$perf" "${args[@]}" "$@"
    return
  fi
  local world=$((2 * rpn)) port=$((20000 + RANDOM % 20000)) secret=$RANDOM$RANDOM
  local pids=() out
  out=$(mktemp)
  for ((r = 0; r < world; ++r)); do
    local side=$((r / rpn)) ns ip
    ns=$([[ $side == 0 ]] && echo "$ns0" || echo "$ns1")
    ip=$([[ $side == 0 ]] && echo 10.231.0.1 || echo 10.231.0.2)
    ip netns exec "$ns" env WEFT_RANK=$r WEFT_WORLD_SIZE=$world \
      WEFT_LOCAL_RANK=$((r % rpn)) WEFT_LOCAL_SIZE=$rpn \
      WEFT_ADDR=10.231.0.1:$port WEFT_SECRET="$secret" WEFT_BOOTSTRAP_ADDR=$ip \
      WEFT_HOSTID="$ns" "$perf" "${args[@]}" "$@" >"$out.$r" 2>&1 &
    pids+=($!)
  done
  local rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  cat "$out.0"
  if ((rc != 0)); then
    for ((r = 1; r < world; ++r)); do sed "s/^/[rank $r] /" "$out.$r" >&2; done
  fi
  rm -f "$out" "$out".*
  return $rc
}

# The out-of-place time (us) of the data row.
time_of() { awk '/^ +[0-9]/ { print $6; exit }'; }

[[ $mode == netns ]] && setup_netns
echo "# compress_e2e: mode $mode, $bytes fp32, $([[ $mode == netns ]] && echo "rate $rate, $((2 * rpn)) ranks" || echo "$nlocal ranks")"
plain_out=$(run_perf) || { echo "$plain_out"; echo "compress_e2e: plain allreduce failed" >&2; exit 1; }
plain=$(time_of <<<"$plain_out")
printf '%-40s %12s %10s %8s %s\n' "# allreduce" "time (us)" "speed-up" "bar" "wire/ratio"
printf '%-40s %12s %10s\n' "plain" "$plain" "1.00"
status=0
for z in $codecs; do
  out=$(run_perf -Z "$z") || { echo "$out"; echo "compress_e2e: -Z $z failed" >&2; status=1; continue; }
  t=$(time_of <<<"$out")
  wire=$(awk '/^ +[0-9]/ { print $(NF-1) "B/" $NF "x"; exit }' <<<"$out")
  bar=""
  case $z in
    onebit*) bar=10 ;;
    powersgd:rank=4) [[ $bytes == 64M ]] && bar=20 ;;  # reshaped to 4096 x 4096
    fp16*) bar=1.8 ;;
  esac
  speed=$(awk -v a="$plain" -v b="$t" 'BEGIN { printf "%.2f", a / b }')
  verdict=""
  if [[ -n $bar && $mode == netns ]]; then
    verdict=$(awk -v s="$speed" -v b="$bar" 'BEGIN { print (s >= b) ? "PASS" : "FAIL" }')
  fi
  printf '%-40s %12s %10s %8s %s %s\n' "$z" "$t" "$speed" "${bar:+>=$bar}" "$wire" "$verdict"
done
exit $status

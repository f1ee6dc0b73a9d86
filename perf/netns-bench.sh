#!/usr/bin/env bash
# Two "hosts" (network namespaces) joined by one veth pair: raw TCP
# throughput (iperf3, several streams, large writes; one direction, and both
# directions at once; and tcp_stream, both directions with buffers of the
# message size) against weft's
# sendrecv_perf and all_reduce_perf busbw at one size, in one run, and the
# ratios. Optionally with the veth throttled (tc tbf) to given rates.
#
#   perf/netns-bench.sh [build-dir]
#
# Environment:
#   SIZE=64M        message size for the weft runs
#   RATES="none 10gbit 1gbit"   link rates to test ("none": unthrottled veth)
#   STREAMS=4       iperf3 parallel streams;  SECONDS_IPERF=5  iperf3 duration
#   ITERS=20 WARMUP=5           weft iterations
#   REPS=3          rounds of all four measurements per rate; medians printed
#   SHOW_ROUNDS=1   also print each round's figures and ratios (# round lines),
#                   to pool rounds of several runs
#   PER_HOST=1      weft ranks per namespace (2: shm inside each "host", TCP
#                   between them; the tuner then runs hier allreduce). busbw
#                   is nccl-tests' (2(n-1)/n * algbw for allreduce), so with
#                   n = 4 it counts more than what crosses the veth.
#   WEFT_*          passed to the ranks (e.g. WEFT_NSOCKS_PERTHREAD=4)
#
# Needs root, iproute2, iperf3 (scripts/setup.sh installs it). Ranks are
# started PER_HOST per namespace with WEFT_RANK/WEFT_WORLD_SIZE/WEFT_ADDR, as a
# multi-host launcher would. Everything is removed on exit, also on failure.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
bin=$build/bin
SIZE=${SIZE:-64M}
RATES=${RATES:-none 10gbit 1gbit}
STREAMS=${STREAMS:-4}
SECONDS_IPERF=${SECONDS_IPERF:-5}
ITERS=${ITERS:-20}
REPS=${REPS:-3}
WARMUP=${WARMUP:-5}
PER_HOST=${PER_HOST:-1}

[[ $(id -u) -eq 0 ]] || { echo "netns-bench: needs root (ip netns)" >&2; exit 1; }
command -v iperf3 >/dev/null || { echo "netns-bench: iperf3 missing (scripts/setup.sh)" >&2; exit 1; }
for b in sendrecv_perf all_reduce_perf tcp_stream; do
  [[ -x $bin/$b ]] || { echo "netns-bench: $bin/$b not built" >&2; exit 1; }
done

tag=wfb$$
nsA=${tag}a
nsB=${tag}b
ipA=10.99.0.1
ipB=10.99.0.2
tmp=$(mktemp -d)
cleanup() {
  ip netns pids "$nsA" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  ip netns pids "$nsB" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  ip netns del "$nsA" 2>/dev/null || true
  ip netns del "$nsB" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

ip netns add "$nsA"
ip netns add "$nsB"
ip -n "$nsA" link add vA type veth peer name vB netns "$nsB"
ip -n "$nsA" addr add $ipA/24 dev vA
ip -n "$nsB" addr add $ipB/24 dev vB
for ns in "$nsA" "$nsB"; do ip -n "$ns" link set lo up; done
ip -n "$nsA" link set vA up
ip -n "$nsB" link set vB up

throttle() {  # rate or "none"
  for pair in "$nsA vA" "$nsB vB"; do
    set -- $pair
    tc -n "$1" qdisc del dev "$2" root 2>/dev/null || true
    if [[ $rate != none ]]; then
      # burst: enough for the rate at a 1 ms timer; latency bounds the queue.
      tc -n "$1" qdisc add dev "$2" root tbf rate "$rate" burst 4mb latency 20ms
    fi
  done
}

# iperf3 throughput in GB/s (1e9 bytes/s): A -> B alone, or with "bidir"
# A -> B and B -> A at once, by two iperf3 pairs (Debian's iperf3 runs one
# thread per process, so its own --bidir would put both directions on one
# core), printing the mean of the two directions: what each direction of a
# sendrecv or allreduce, which send both ways at once, can get.
iperf_gbs() {  # [bidir]
  # The congestion control weft's sockets run (WEFT_SOCKET_CC, cubic by
  # default; "system" keeps the kernel's): iperf3 otherwise runs the host's
  # default (BBR on some hosts), and the ratio would compare two algorithms.
  local cc=()
  [[ ${WEFT_SOCKET_CC:-cubic} != system ]] && cc=(-C "${WEFT_SOCKET_CC:-cubic}")
  local dirs=("$nsA $nsB $ipB 5201")
  [[ ${1:-} == bidir ]] && dirs+=("$nsB $nsA $ipA 5202")
  local pids=() i=0
  for d in "${dirs[@]}"; do
    set -- $d
    # Bounded: a one-off server whose client never got through would
    # otherwise hold the final wait forever.
    ip netns exec "$2" timeout $((SECONDS_IPERF + 30)) iperf3 -s -1 -B "$3" -p "$4" >/dev/null 2>&1 &
  done
  for d in "${dirs[@]}"; do
    set -- $d
    (for _ in $(seq 50); do
       # A refused connection (the server not listening yet) can still exit
       # 0 with -J: only a report without an error ends the retries.
       ip netns exec "$1" iperf3 -c "$3" -p "$4" -P "$STREAMS" -l 1M -t "$SECONDS_IPERF" "${cc[@]}" -J \
         >"$tmp/iperf$i.json" 2>/dev/null && ! grep -q '"error"' "$tmp/iperf$i.json" && break
       sleep 0.1
     done) &
    pids+=($!)
    i=$((i + 1))
  done
  wait "${pids[@]}" || true
  wait 2>/dev/null || true
  python3 -c '
import json, sys
runs = []
try:
    runs = [json.load(open(f)) for f in sys.argv[1:]]
    rates = [r["end"]["sum_received"]["bits_per_second"] for r in runs]
    print("%.3f" % (sum(rates) / len(rates) / 8e9))
except (OSError, ValueError, KeyError) as e:  # iperf3 failed: say so, keep going
    why = "; ".join(str(r["error"]) for r in runs if "error" in r)
    print("netns-bench: iperf3 gave no result (%r%s)" % (e, ": " + why if why else ""),
          file=sys.stderr)
    print("nan")' "$tmp"/iperf[0-9].json
  rm -f "$tmp"/iperf[0-9].json
}

# Raw TCP with SIZE-byte buffers (build/bin/tcp_stream): one process in each
# namespace sends from one buffer and receives into another over STREAMS
# sockets, both directions at once, as a 2-rank sendrecv does. GB/s per
# direction (the mean of the two, which the kernel need not share evenly):
# what TCP gives a sender and a receiver that stream their data through
# memory, where iperf3 resends 1 MiB from cache.
stream_gbs() {
  local cc=()
  [[ ${WEFT_SOCKET_CC:-cubic} != system ]] && cc=(--cc "${WEFT_SOCKET_CC:-cubic}")
  local opts=(--streams "$STREAMS" --size "$SIZE" "${cc[@]}")
  ip netns exec "$nsB" timeout $((SECONDS_IPERF + 30)) "$bin/tcp_stream" listen $ipB 5203 \
    "${opts[@]}" >"$tmp/stream0.txt" 2>&1 &
  local listener=$!
  ip netns exec "$nsA" timeout $((SECONDS_IPERF + 30)) "$bin/tcp_stream" connect $ipB 5203 \
    "${opts[@]}" --seconds "$SECONDS_IPERF" >"$tmp/stream1.txt" 2>&1 || true
  wait "$listener" || true
  python3 -c '
import sys
try:
    rates = [float(open(f).read().split()[-1]) for f in sys.argv[1:]]
    print("%.3f" % (sum(rates) / len(rates)))
except (OSError, ValueError, IndexError) as e:
    print("netns-bench: tcp_stream gave no result (%r)" % e, file=sys.stderr)
    print("nan")' "$tmp"/stream[01].txt
  rm -f "$tmp"/stream[01].txt
}

# busbw (GB/s) of a weft perf binary, rank 0 in A and rank 1 in B.
weft_busbw() {  # program, rendezvous port
  local prog=$1 port=$2
  local env=(WEFT_WORLD_SIZE=$((2 * PER_HOST)) WEFT_ADDR=$ipA:$port WEFT_SECRET=netns-bench-$$)
  while IFS='=' read -r k v; do env+=("$k=$v"); done < <(env | grep '^WEFT_' | grep -v -e '^WEFT_RANK=' -e '^WEFT_WORLD_SIZE=' -e '^WEFT_ADDR=' || true)
  local pids=() r ns
  for ((r = 2 * PER_HOST - 1; r >= 1; r--)); do
    ns=$nsA; ((r >= PER_HOST)) && ns=$nsB
    ip netns exec "$ns" env "${env[@]}" WEFT_RANK=$r WEFT_LOCAL_RANK=$((r % PER_HOST)) WEFT_LOCAL_SIZE=$PER_HOST \
      "$bin/$prog" -b "$SIZE" -e "$SIZE" -n "$ITERS" -w "$WARMUP" >"$tmp/r$r.txt" 2>&1 &
    pids+=($!)
  done
  ip netns exec "$nsA" env "${env[@]}" WEFT_RANK=0 WEFT_LOCAL_RANK=0 WEFT_LOCAL_SIZE=$PER_HOST \
    "$bin/$prog" -b "$SIZE" -e "$SIZE" -n "$ITERS" -w "$WARMUP" >"$tmp/r0.txt" 2>&1 || {
    echo "netns-bench: $prog failed:" >&2; cat "$tmp"/r*.txt >&2; return 1; }
  wait "${pids[@]}"
  # The out-of-place busbw of the table's row (as perf/compare takes it),
  # then the in-place one ("nan" where the collective has none): an in-place
  # sendrecv (send and receive buffer the same) first stages its send, which
  # "Avg bus bandwidth" would average in.
  awk '$1 ~ /^[0-9]+$/ && NF >= 8 {print $8 "," ($12 ~ /^[0-9.]+$/ ? $12 : "nan"); exit}' "$tmp/r0.txt"
}

printf '# weft over TCP between two network namespaces (veth), size %s, %s iperf3 streams, %s rank(s) per namespace\n' "$SIZE" "$STREAMS" "$PER_HOST"
printf '# iperf3: one direction; iperf3_bidir: per direction with both at once. weft busbw counts one direction\n'
printf '# congestion control: %s, iperf3 and weft alike (WEFT_SOCKET_CC)\n' "${WEFT_SOCKET_CC:-cubic}"
printf '# of each link while both carry data, so /bidir is the like-for-like ratio; /uni the strict one.\n'
printf '# weft figures: out-of-place busbw (GB/s); allreduce_ip: in-place. Medians of %s rounds;\n' "$REPS"
printf '# ratios: medians of the ratios within each round (its runs are back to back).\n'
printf '# iperf3 resends one small buffer from cache; a %s allreduce works in memory, over one\n' "$SIZE"
printf '# buffer of that size in-place and two out-of-place, whose output lines are read before written.\n'
printf '# stream: raw TCP both ways at once with %s buffers (tcp_stream), per direction: /stream\n' "$SIZE"
printf '# compares weft with TCP moving the same bytes through memory.\n'
printf '%-8s %8s %8s %8s %10s %8s %8s %8s %11s %8s %8s %12s %8s %8s\n' rate iperf3 bidir stream sendrecv /uni /bidir /stream allreduce /uni /bidir allreduce_ip /bidir /stream
runs=0
for rate in $RATES; do
  throttle
  # REPS rounds of the five measurements, interleaved, so that a slow
  # minute of the host weighs on all of them alike; the medians are printed.
  figures=()
  for ((rep = 0; rep < REPS; rep++)); do
    # Seven fields: iperf3, iperf3 bidir, sendrecv (out-of-place, in-place),
    # allreduce (out-of-place, in-place), tcp_stream bidir; sendrecv's
    # in-place one is unused.
    # A fresh rendezvous port per run; counted here, since a command
    # substitution's arithmetic would not reach this shell.
    runs=$((runs + 2))
    figures+=("$(iperf_gbs),$(iperf_gbs bidir),$(weft_busbw sendrecv_perf $((29499 + runs))),$(weft_busbw all_reduce_perf $((29500 + runs))),$(stream_gbs)")
  done
  SHOW_ROUNDS=${SHOW_ROUNDS:-0} python3 - "$rate" "${figures[@]}" <<'PY'
import math, os, statistics, sys
rate, rounds = sys.argv[1], [list(map(float, r.split(","))) for r in sys.argv[2:]]
if os.environ["SHOW_ROUNDS"] == "1":
    for i, r in enumerate(rounds):
        b = r[1] if r[1] > 0 else float("nan")
        print("# round %d %s: iperf3 %.3f bidir %.3f stream %.3f sendrecv %.3f (%.2f) allreduce %.3f (%.2f) "
              "allreduce_ip %.3f (%.2f)" % (i, rate, r[0], r[1], r[6], r[2], r[2] / b, r[4], r[4] / b,
                                             r[5], r[5] / b))
def median(i):
    xs = [r[i] for r in rounds if not math.isnan(r[i])]
    return statistics.median(xs) if xs else float("nan")
RAW, BIDIR, SR, AR, IP, STREAM = 0, 1, 2, 4, 5, 6
def ratio(i, ref):
    # Within each round, then the median: iperf3 and weft of one round ran
    # back to back, in the same state of the host.
    xs = [r[i] / r[ref] for r in rounds
          if not math.isnan(r[i]) and not math.isnan(r[ref]) and r[ref] > 0]
    return statistics.median(xs) if xs else float("nan")
print("%-8s %8.3f %8.3f %8.3f %10.3f %8.2f %8.2f %8.2f %11.3f %8.2f %8.2f %12.3f %8.2f %8.2f" % (
    rate, median(RAW), median(BIDIR), median(STREAM), median(SR), ratio(SR, RAW),
    ratio(SR, BIDIR), ratio(SR, STREAM), median(AR), ratio(AR, RAW), ratio(AR, BIDIR), median(IP),
    ratio(IP, BIDIR), ratio(IP, STREAM)))
PY
done

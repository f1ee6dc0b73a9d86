#!/usr/bin/env bash
# Soak run: a seeded random mix of collectives on N ranks (default 4) for a
# while, every result checked against a serial reference, RSS and open file
# descriptors per rank sampled and required not to grow after warm-up
# (tools/weft_soak.cc).
#
#   scripts/soak.sh [seconds] [extra weft-soak args...]   (default 120 s)
#   SEED=42 scripts/soak.sh 1800      replays / fixes the sequence
#   RANKS=8 BUILD=build scripts/soak.sh 60
#
# The seed is printed first; the run fails on any wrong result, error, or
# growth, and names the collective and seed to replay.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD:-$root/build}
seconds=${1:-120}
shift || true
ranks=${RANKS:-4}
seed=${SEED:-$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')}

for bin in weftrun weft-soak; do
  if [[ ! -x $build/bin/$bin ]]; then
    echo "soak: $build/bin/$bin is missing; build first (scripts/build.sh)" >&2
    exit 2
  fi
done

echo "soak: $ranks ranks, ${seconds}s, seed $seed"
exec "$build/bin/weftrun" -n "$ranks" --timeout $((${seconds%.*} + 300)) \
  "$build/bin/weft-soak" --seconds "$seconds" --seed "$seed" "$@"

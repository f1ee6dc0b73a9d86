#!/usr/bin/env bash
# Installs what is missing, builds, and runs the 2-rank allreduce benchmark.
#
#   scripts/run-perf.sh [more all_reduce_perf args...]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$root/build"
exec "$root/build/bin/weftrun" -n 2 "$root/build/bin/all_reduce_perf" -b 8 -e 64M -f 2 "$@"

#!/usr/bin/env bash
# Configures and builds weft with CMake + Ninja (Release unless overridden).
#
#   scripts/build.sh [build-dir] [extra cmake args...]
#
# build-dir defaults to build/ in the repository. Extra arguments go to cmake
# after the defaults, so they win: e.g.
#   scripts/build.sh build-asan -DWEFT_SANITIZE=address,undefined
# JOBS=N limits ninja's parallelism.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$root/build"
if (($# > 0)) && [[ $1 != -* ]]; then
  build=$1
  shift
fi

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
ninja -C "$build" ${JOBS:+-j "$JOBS"}

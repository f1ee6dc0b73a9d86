#!/usr/bin/env bash
# Installs the Debian 12 packages that weft needs to build, test and
# benchmark. Idempotent: apt-get runs only when a package is missing.
# Runs as root, or through sudo otherwise.
#
#   scripts/setup.sh
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config    # toolchain
  googletest libgtest-dev libgmock-dev            # tests
  libbenchmark-dev                                # micro-benchmarks
  libopenblas-dev libopenblas0-serial             # BLAS for PowerSGD (src/compression: the serial build)
  openmpi-bin libopenmpi-dev                      # mpirun, Open MPI peer benchmark
  libpmix-dev                                     # rendezvous under mpirun/srun (PMIx headers)
  libgloo-dev                                     # Gloo peer benchmark (TCP)
  python3                                         # perf/compare
  clang-format                                    # formatting
  clang-14 libclang-rt-14-dev                     # libFuzzer targets (scripts/fuzz.sh)
  iproute2 procps                                 # ip netns (multi-host tests), ps/pgrep
  iperf3                                          # raw TCP baseline (perf/netns-bench.sh)
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ $status == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "setup: need root or sudo to install: ${missing[*]}" >&2
  exit 1
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -q --no-install-recommends "${missing[@]}"

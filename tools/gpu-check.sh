#!/usr/bin/env bash
# The GPU checks, in one run that fits in 8 minutes on a GPU machine:
#
#   1. builds weft with CUDA (only the targets below) in $BUILD (build-gpu/)
#   2. gpu_kernels_test   GPU kernels vs the host kernels, every dtype x op
#   3. gpu_nccl_test      libnccl.so.2 on device memory, every collective x
#                         dtype x op, 2 and 4 ranks on one GPU
#   4. nccl_c_test        the C NCCL program on host memory (4 ranks)
#   5. cuda_kernel_bench  reduction/copy GB/s and % of peak memory bandwidth
#   6. gpu_all_reduce_perf  4 ranks on one GPU through libnccl.so.2
#   7. 3 and 6 again with WEFT_CUDA_IPC=1 (the opt-in CUDA IPC all-reduce),
#      and gpu_cuda_ipc_test (two processes opening each other's buffers)
#
# and prints a summary. Without a GPU (no nvidia-smi, or it lists none) it
# prints "SKIP: no GPU" and exits 0. Exit status: 0 when every step passed.
#
#   tools/gpu-check.sh            BUILD=dir JOBS=n CUDA_ARCH=90 override
set -uo pipefail

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "SKIP: no GPU"
  exit 0
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD:-$root/build-gpu}
jobs=${JOBS:-$(nproc)}
arch=${CUDA_ARCH:-90}
log=$build/gpu-check-logs
start=$SECONDS
declare -a names results times

nvidia-smi -L
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

step() { # name timeout-seconds command...
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS rc
  echo "=== $name: $*"
  timeout --kill-after=10 "$limit" "$@" >"$log/$name.log" 2>&1
  rc=$?
  tail -n 40 "$log/$name.log"
  names+=("$name")
  times+=($((SECONDS - t0)))
  if ((rc == 0)); then results+=(PASS); elif ((rc == 124 || rc == 137)); then results+=(TIMEOUT); else results+=("FAIL($rc)"); fi
}

mkdir -p "$log"
targets=(weft_nccl gpu_kernels_test gpu_nccl_test gpu_cuda_ipc_test nccl_c_test cuda_kernel_bench
  gpu_all_reduce_perf)
step build 300 bash -c "cmake -S '$root' -B '$build' -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DWEFT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=$arch -DWEFT_BUILD_TESTS=ON -DWEFT_BUILD_PERF=ON \
  && ninja -C '$build' -j $jobs ${targets[*]}"

if [[ ${results[0]} == PASS ]]; then
  bin=$build/bin
  step gpu_kernels_test 120 "$bin/gpu_kernels_test"
  step gpu_nccl_test 180 "$bin/gpu_nccl_test"
  step nccl_c_test 60 "$bin/nccl_c_test" 4
  step cuda_kernel_bench 60 "$bin/cuda_kernel_bench" -b $((1 << 20)) -e $((256 << 20)) -i 20
  step gpu_all_reduce_perf 120 "$bin/gpu_all_reduce_perf" -n 4 -b 8 -e $((64 << 20)) -f 4 -w 3 -i 10
  # The opt-in CUDA IPC all-reduce (GPU kernels on peers' buffers, no staging).
  step gpu_nccl_test_ipc 180 env WEFT_CUDA_IPC=1 "$bin/gpu_nccl_test"
  step gpu_all_reduce_perf_ipc 120 env WEFT_CUDA_IPC=1 "$bin/gpu_all_reduce_perf" -n 4 -b 8 -e $((32 << 20)) -f 4 -w 3 -i 10
  step gpu_cuda_ipc_test 60 "$bin/gpu_cuda_ipc_test"
fi

echo
echo "=== gpu-check summary ($((SECONDS - start)) s; logs in $log)"
failed=0
for i in "${!names[@]}"; do
  printf '  %-24s %-10s %4d s\n' "${names[$i]}" "${results[$i]}" "${times[$i]}"
  [[ ${results[$i]} == PASS ]] || failed=1
done
if [[ -f $log/cuda_kernel_bench.log ]]; then
  echo "  kernel bandwidth at 256 MiB:"
  grep -E "^ +(reduce|copy) .* 268435456 " "$log/cuda_kernel_bench.log" | sed 's/^/    /'
fi
for f in gpu_all_reduce_perf gpu_all_reduce_perf_ipc; do
  [[ -f $log/$f.log ]] && grep "Avg bus bandwidth" "$log/$f.log" | sed "s/^/  $f, 4 ranks on one GPU: /"
done
((failed == 0)) && echo "gpu-check: PASS" || echo "gpu-check: FAIL"
exit $failed

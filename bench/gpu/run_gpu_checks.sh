#!/usr/bin/env bash
# Everything braid owes on a GPU machine, in one go (bench/gpu/README.md):
#   1. the GPU tests (ctest -L cuda): kernels vs CPU reference for every dtype x op; device
#      collectives for every collective x dtype x op x algorithm, 1..8 ranks on one GPU as threads
#      and as processes, in place and out of place, odd counts; errors and stream ordering;
#      once with the driver stream wait (cuStreamWaitValue32) and once with the wait kernel;
#      the transport conformance suite over cuda_ipc;
#   2. compute-sanitizer (memcheck, racecheck) over small all-reduces;
#   3. the reduce-copy kernel's GB/s vs cudaMemcpy D2D at 256 MiB float32 and bfloat16;
#   4. all_reduce_perf --device cuda -b 8 -e 1G -f 4 with 2 and 4 ranks on the GPU.
# Usage: bench/gpu/run_gpu_checks.sh [BUILD_DIR] [OUT_DIR]   (from the repository root)
# Exit status: 0 when every step passed; the failing steps are listed at the end.
set -u
BUILD=${1:-build-gpu}
OUT=${2:-gpu-results}
mkdir -p "$OUT"
JOBS=${JOBS:-$(nproc)}
failed=()

cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBRAID_WITH_CUDA=ON >"$OUT/configure.log" 2>&1 ||
  { echo "configure failed (see $OUT/configure.log)"; exit 1; }
cmake --build "$BUILD" -j"$JOBS" --target cuda_cpu_test cuda_gpu_test cuda_proc_test \
  conformance_test gpu_kernels_bench all_reduce_perf braidrun >"$OUT/build.log" 2>&1 ||
  { echo "build failed (see $OUT/build.log)"; tail -30 "$OUT/build.log"; exit 1; }
nvidia-smi >"$OUT/nvidia-smi.log" 2>&1 || true

BRAIDRUN=$(ls "$BUILD"/tools/braidrun "$BUILD"/bin/braidrun 2>/dev/null | head -1)
PERF=$BUILD/bench/all_reduce_perf
export BRAID_TIMEOUT=${BRAID_TIMEOUT:-60}

check_status() {  # name, command...: like step but judges by the command's own status
  local name=$1
  shift
  echo "=== $name: $*"
  "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  tail -25 "$OUT/$name.log"
  [ $rc -eq 0 ] || failed+=("$name (rc $rc)")
}

# 1. Tests (threads and processes), with each stream-wait mode.
check_status ctest-driver-wait env BRAID_CUDA_WAIT=auto \
  ctest --test-dir "$BUILD" -L cuda --output-on-failure --timeout 900
check_status ctest-kernel-wait env BRAID_CUDA_WAIT=kernel \
  ctest --test-dir "$BUILD" -L cuda -R 'DeviceThreads|DeviceProcesses' --output-on-failure --timeout 900
# The transport conformance suite over cuda_ipc (device slots; threads and forked ranks).
check_status ctest-conformance-cuda-ipc \
  ctest --test-dir "$BUILD" -R 'cuda_ipc' --output-on-failure --timeout 600
# No test may have skipped on a GPU machine.
if grep -q "Skipped\|SKIPPED" "$OUT/ctest-driver-wait.log" "$OUT/ctest-conformance-cuda-ipc.log"; then
  failed+=("tests skipped on a GPU")
fi

# 2. compute-sanitizer over small all-reduces (threads: raw pointers; processes: IPC handles).
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$SAN" ]; then
  check_status sanitizer-memcheck-threads "$SAN" --tool memcheck --error-exitcode 9 \
    "$BUILD/tests/cuda/cuda_gpu_test" --gtest_filter='DeviceThreadsOrdering.*:CudaKernels.InPlace*'
  check_status sanitizer-racecheck-kernels "$SAN" --tool racecheck --error-exitcode 9 \
    "$BUILD/tests/cuda/cuda_gpu_test" --gtest_filter='CudaKernels.CopyToOneAndTwoDestinations'
  check_status sanitizer-memcheck-processes "$BRAIDRUN" -n 2 "$SAN" --tool memcheck \
    --error-exitcode 9 "$PERF" -b 8 -e 4M -f 8 -n 2 -w 1
else
  failed+=("compute-sanitizer not found")
fi

# 3. Kernel bandwidth vs cudaMemcpy, after validating every dtype x op against the reference.
check_status kernels-validate-all "$BUILD/bench/gpu.dir/gpu_kernels_bench" --bytes 16M \
  --iters 3 --types all --ops all
check_status kernels-256M "$BUILD/bench/gpu.dir/gpu_kernels_bench" --bytes 256M --iters 20 \
  --types float,bfloat16 --ops sum

# 4. all_reduce_perf, 2 and 4 ranks on the GPU(s), each algorithm.
for n in 2 4; do
  check_status "all_reduce_perf-${n}ranks" "$BRAIDRUN" -n "$n" "$PERF" --device cuda -b 8 -e 1G -f 4
  for algo in ring oneshot; do
    check_status "all_reduce_perf-${n}ranks-$algo" "$BRAIDRUN" -n "$n" "$PERF" --device cuda \
      -b 8 -e 64M -f 4 \
      --algo "$algo"
  done
done

echo
if [ ${#failed[@]} -eq 0 ]; then
  echo "ALL GPU CHECKS PASSED (logs in $OUT)"
  exit 0
fi
echo "FAILED: ${failed[*]} (logs in $OUT)"
exit 1

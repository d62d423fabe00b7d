#!/usr/bin/env bash
# Everything braid owes on a GPU machine, in one go (bench/gpu/README.md):
#   1. the GPU tests: kernels vs CPU reference for every dtype x op; device collectives for every
#      collective x dtype x op x algorithm, 1..8 ranks on one GPU as threads and as processes, in
#      place and out of place, odd counts; errors and stream ordering; once with the driver stream
#      wait (cuStreamWaitValue32) and once with the wait kernel; the transport conformance suite
#      over cuda_ipc;
#   2. compute-sanitizer (memcheck, racecheck) over small all-reduces and the kernels;
#   3. the reduce-copy kernel's GB/s vs cudaMemcpy D2D at 256 MiB float32 and bfloat16;
#   4. the all-reduce on device buffers with ranks as threads of one process
#      (gpu_device_threads_bench, 2 and 4 ranks), then as processes (all_reduce_perf --device cuda
#      -b 8 -e 1G -f 4, 2 ranks; once more with CUDA_MODULE_LOADING=EAGER to 8 MiB);
#   5. braid_torch built against the machine's PyTorch (needs DEPS, below) and its tests run, CUDA
#      tensors included (tests/python/test_cuda.py at 2 and 3 ranks: every op with a device path,
#      all-to-all, gather and scatter too, each element against a single-process reference);
#   6. the machine: nvidia-smi, ibv_devices, compilers;
#   7. when the packed binaries include them: the trainer's CUDA layer checks (trainer_cuda_test),
#      braid-train --device cuda (MLP and ResNet, 1 and 2 ranks, fp32 and fp16) and PyTorch on the same ResNet
#      (train_torch_reference.py), one at a time.
# BRAID_GPU_QUICK=1 leaves out the full process table and the sanitizers; BRAID_GPU_ALL=1 adds
# the 4-process table, alltoall_perf, the wait-kernel variants and memcheck over processes.
# BRAID_GPU_TORCH_TESTS names the torch2_ tests to run (default: all of them);
# BRAID_GPU_DATA is the Fashion-MNIST folder for step 7; BRAID_GPU_STEPS, a regular expression,
# runs only the steps whose names it matches (a later call on the same lease re-runs what failed);
# BRAID_GPU_TEST_FILTER is a gtest filter for cuda_gpu_test.
# Usage: bench/gpu/run_gpu_checks.sh [BUILD_OR_BIN] [OUT_DIR] [DEPS]   (from the repository root)
#   BUILD_OR_BIN: a folder of prebuilt binaries (bench/gpu/pack_prebuilt.sh's DEST/bin), used as it
#   is; otherwise a build folder, configured and built here. DEPS: a prefix holding fmt, GoogleTest
#   and nlohmann-json for the braid_torch build (pack_prebuilt.sh's DEST/deps/usr); without it that
#   step uses the system's.
# Every step has a time limit (it fails at it). Exit status 0 when every step passed; the failing
# steps are listed at the end.
set -u
BIN=${1:-build-gpu}
OUT=${2:-gpu-results}
DEPS=${3:-}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
JOBS=${JOBS:-$(nproc)}
failed=()
SRC=$(pwd)

TARGETS=(cuda_cpu_test cuda_gpu_test cuda_proc_test conformance_test gpu_kernels_bench
  all_reduce_perf alltoall_perf braidrun nccl_device_test gpu_device_threads_bench gpu_bus_latency)
if [ -x "$BIN/cuda_gpu_test" ]; then
  export LD_LIBRARY_PATH="$(cd "$BIN" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  cmake -S . -B "$BIN" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBRAID_WITH_CUDA=ON \
    >"$OUT/configure.log" 2>&1 || { echo "configure failed (see $OUT/configure.log)"; exit 1; }
  cmake --build "$BIN" -j"$JOBS" --target "${TARGETS[@]}" >"$OUT/build.log" 2>&1 ||
    { echo "build failed (see $OUT/build.log)"; tail -30 "$OUT/build.log"; exit 1; }
fi
bin() { find "$BIN" -name "$1" -type f -perm -u+x | head -1; }
GPU_TEST=$(bin cuda_gpu_test) PROC_TEST=$(bin cuda_proc_test) CPU_TEST=$(bin cuda_cpu_test)
CONF_TEST=$(bin conformance_test) KBENCH=$(bin gpu_kernels_bench) PERF=$(bin all_reduce_perf)
BRAIDRUN=$(bin braidrun)
export BRAID_TIMEOUT=${BRAID_TIMEOUT:-30}
# Tests run ranks as threads with two streams each: past the default 8 hardware queues streams
# share queues, and a stream wait holds whatever is queued behind it (see comm/device/README.md).
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-32}

{ nvidia-smi; nvidia-smi -q | grep -i -A3 "clocks\b" | head -20; echo "RDMA devices (/sys/class/infiniband): [$(ls /sys/class/infiniband 2>&1 | tr '\n' ' ')]";
  command -v ibv_devices && ibv_devices; nvcc --version; g++ --version | head -1;
  cmake --version | head -1; python3 -c 'import torch; print("torch", torch.__version__,
  torch.version.cuda, torch.cuda.get_device_name(0))'; nproc; free -g; df -h /dev/shm; } \
  >"$OUT/machine.log" 2>&1

# Every thread's stack of every process under PID (cuda-gdb attaches to host code too), so a
# hang says where it hangs. Appended to FILE.
dump_stacks() {
  local pid=$1 file=$2 gdb p kids
  gdb=$(command -v cuda-gdb || echo /usr/local/cuda/bin/cuda-gdb)
  local pids=($pid)
  for ((i = 0; i < ${#pids[@]}; i++)); do
    kids=$(pgrep -P "${pids[$i]}" | tr '\n' ' ')
    pids+=($kids)
  done
  for p in "${pids[@]:0:9}"; do
    echo "===== stacks of pid $p: $(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null | cut -c1-200)"
    timeout 25 "$gdb" -batch -p "$p" -ex "thread apply all bt 25" 2>&1 | grep -E "^#|^Thread" |
      grep -v "in ?? ()" | head -150
  done >>"$file" 2>&1
}

# step NAME LIMIT_S COMMAND...: runs it with a time limit, its output in OUT/NAME.log; at the
# limit the stacks of its processes go to OUT/NAME.stacks before it is killed.
step() {
  local name=$1 limit=$2
  shift 2
  if [ -n "${BRAID_GPU_STEPS:-}" ] && ! [[ $name =~ ^(${BRAID_GPU_STEPS})$ ]]; then return 0; fi
  local t0=$SECONDS
  setsid "$@" >"$OUT/$name.log" 2>&1 &
  local pid=$! rc
  while kill -0 "$pid" 2>/dev/null && [ $((SECONDS - t0)) -lt "$limit" ]; do sleep 0.5; done
  if kill -0 "$pid" 2>/dev/null; then
    dump_stacks "$pid" "$OUT/$name.stacks"
    kill -TERM -- -"$pid" 2>/dev/null
    sleep 2
    kill -KILL -- -"$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    rc=124
  else
    wait "$pid"
    rc=$?
  fi
  echo "=== $name: rc $rc, $((SECONDS - t0)) s: $*" | tee -a "$OUT/steps.log"
  [ $rc -eq 0 ] || failed+=("$name (rc $rc)")
}
# bg NAME LIMIT_S COMMAND...: the same in the background (collected by `wait`).
bg() { step "$@" >/dev/null & }

# 5 (started first, on the CPU): braid_torch against this machine's PyTorch, then its tests.
torch_build() {  # DIR CMAKE_ARGS...: configures and builds braid_torch2 there
  local tb=$1
  shift
  cmake -S "$SRC" -B "$tb" -G Ninja -DCMAKE_BUILD_TYPE=Release ${DEPS:+-DCMAKE_PREFIX_PATH=$DEPS} \
    -DBRAID_WITH_TORCH=OFF -DBRAID_WITH_TORCH2=ON -DBRAID_TORCH2_PYTHON="$(command -v python3)" \
    -DBRAID_WITH_MPI=OFF -DBRAID_WITH_UCX=OFF -DBRAID_WITH_HWLOC=OFF -DBRAID_WITH_FUZZ=OFF \
    -DBRAID_WITH_TRAINER=OFF "$@" && cmake --build "$tb" -j6 --target braid_torch2
}
torch_test() {  # DIR NAME: one torch2_ test; a crash prints every rank's Python and C++ stacks
  echo "--- $2 ($1)"
  PYTHONFAULTHANDLER=1 TORCH_SHOW_CPP_STACKTRACES=1 ctest --test-dir "$1" -R "^torch2_$2\$" \
    -FA '.*' --output-on-failure --timeout 120
}
torch_step() {
  local tb=$SRC/build-torch-gpu rc=0 t
  torch_build "$tb" -DBRAID_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 || return 1
  for t in ${BRAID_GPU_TORCH_TESTS:-collectives_2 ops_2 p2p_2 ddp cuda_2 cuda_3}; do
    [ -f "$SRC/tests/python/test_${t%_[0-9]}.py" ] || continue
    torch_test "$tb" "$t" || rc=1
  done
  # test_ops crashed with a module built on an H100 machine and passed with one built elsewhere
  # (bench/RESULTS.md, 2026-11-27): when it fails, which build difference is it?
  if [ $rc -ne 0 ] && [[ " ${BRAID_GPU_TORCH_TESTS:-ops_2} " == *" ops_2 "* ]]; then
    torch_build "$tb-nonative" -DBRAID_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DBRAID_NATIVE=OFF && torch_test "$tb-nonative" ops_2
    torch_build "$tb-nocuda" -DBRAID_WITH_CUDA=OFF && torch_test "$tb-nocuda" ops_2
  fi
  return $rc
}
if [ -n "${BRAID_GPU_SKIP_TORCH:-}" ]; then :; else
  export -f torch_build torch_test torch_step; export SRC DEPS BRAID_GPU_TORCH_TESTS
  bg torch 300 bash -c torch_step
fi

# 7 (set up here; its steps below). The trainer's CUDA path, when its binaries are here.
TRAIN=$(bin braid-train) TRAIN_TEST=$(bin trainer_cuda_test)
DATA=${BRAID_GPU_DATA:-/usr/share/datasets/fashion-mnist}
[ -z "${BRAID_GPU_DATA:-}" ] && [ -d "$BIN/../data" ] && DATA=$(cd "$BIN/../data" && pwd)
if [ -n "$TRAIN" ] && [ -n "$TRAIN_TEST" ]; then
  # cuBLAS and cuDNN from the machine's pip packages (PyTorch's); the Debian libraries packed
  # beside the binaries only for the trainer's own processes.
  NVLIBS=$(python3 -c 'import glob, os, nvidia
print(":".join(sorted({os.path.dirname(p) for r in nvidia.__path__
                       for p in glob.glob(os.path.join(r, "*", "lib", "lib*.so*"))})))' 2>/dev/null)
  TLIBS=$(cd "$(dirname "$TRAIN")" && pwd)/trainer-libs
  TENV=(env LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$TLIBS${NVLIBS:+:$NVLIBS}")
  "${TENV[@]}" ldd "$TRAIN" "$TRAIN_TEST" >"$OUT/trainer-ldd.log" 2>&1
  T=("${TENV[@]}" "$TRAIN" --device cuda --data "$DATA")
  RESNET=(--model resnet --optimizer sgd --lr 0.05 --batch 128)
fi

# 1. Correctness, concurrently (they share the GPU; no timing here).
bg cpu-tests 60 "$CPU_TEST"
bg gpu-tests 100 env BRAID_CUDA_WAIT=auto "$GPU_TEST" ${BRAID_GPU_TEST_FILTER:+--gtest_filter="$BRAID_GPU_TEST_FILTER"}
bg proc-tests 100 env BRAID_CUDA_WAIT=auto "$PROC_TEST"
# Each case in a process of its own (as under ctest): the forked-rank cases need a parent that
# never initialised CUDA.
conformance_cases() {
  local suite="" line rc=0
  while IFS= read -r line; do
    case "$line" in
      " "*) [[ "$line" == *cuda_ipc* ]] || continue
            "$CONF_TEST" --gtest_filter="$suite${line#  }" || rc=1 ;;
      *) suite=$line ;;
    esac
  done < <("$CONF_TEST" --gtest_list_tests | sed 's/ *#.*//; s/ *$//')
  return $rc
}
export -f conformance_cases; export CONF_TEST
bg conformance-cuda-ipc 90 bash -c conformance_cases
bg kernels-validate-all 60 "$KBENCH" --bytes 16M --iters 3 --types all --ops all
# 5 (the NCCL API on device buffers): every collective (all-to-all, gather, scatter too),
# send/recv, PreMulSum, 2 ranks on the GPU.
bg nccl-device 90 "$(bin nccl_device_test)"
# 7's layer, step and gradient-sync checks.
[ -n "$TRAIN" ] && [ -n "$TRAIN_TEST" ] && bg trainer-cuda-test 90 "${TENV[@]}" "$TRAIN_TEST"
wait_fg() { while [ "$(jobs -r | wc -l)" -gt "$1" ]; do sleep 1; done; }
wait_fg 1   # all but the torch build

# 3. Timings, one at a time. Ranks as threads of one process (one CUDA context) first, then as
# processes (a context each, which the GPU time-slices), once with every kernel loaded eagerly.
step kernels-256M 30 "$KBENCH" --bytes 256M --iters 20 --types float,bfloat16 --ops sum
# What crossing the bus costs (the executor engine reads host memory per command).
step bus-latency 20 "$(bin gpu_bus_latency)"
# 7. The trainer's CUDA path: braid-train and PyTorch on the same model, batch and precision, one
# at a time (epoch 2 of the ResNet is the steady state to hold against PyTorch's timed steps).
# Before the collective timings: it has never run on a GPU, they have.
if [ -n "$TRAIN" ] && [ -n "$TRAIN_TEST" ]; then
  TORCH_REF=(python3 "$SRC/bench/gpu/train_torch_reference.py" --device cuda "${RESNET[@]}"
    --steps 500 --timing-warmup 50 --epochs 1 --data "$DATA")
  step train-mlp-1rank 30 "${T[@]}" --model mlp --optimizer adam --epochs 1 --log "$OUT/mlp-1rank.json"
  step train-resnet-1rank 60 "${T[@]}" "${RESNET[@]}" --epochs 2 --log "$OUT/resnet-1rank.json"
  step torch-resnet-fp32 60 "${TORCH_REF[@]}" --precision fp32
  step train-resnet-1rank-fp16 45 "${T[@]}" "${RESNET[@]}" --precision fp16 --epochs 2 \
    --log "$OUT/resnet-1rank-fp16.json"
  step torch-resnet-fp16 60 "${TORCH_REF[@]}" --precision fp16
  step train-resnet-2ranks 60 "$BRAIDRUN" -n 2 "${T[@]}" "${RESNET[@]}" --epochs 1 \
    --log "$OUT/resnet-2ranks.json"
  # The same through the executor engine (its hang with the launch engine: bench/RESULTS.md).
  step train-resnet-2ranks-executor 90 env BRAID_CUDA_ENGINE=executor "$BRAIDRUN" -n 2 "${T[@]}" \
    "${RESNET[@]}" --epochs 1 --log "$OUT/resnet-2ranks-executor.json"
fi

THREADS_BENCH=$(bin gpu_device_threads_bench)
step threads-all_reduce-2ranks 30 "$THREADS_BENCH" --ranks 2 --min 8 --max 1G --factor 4
step threads-all_reduce-4ranks 30 "$THREADS_BENCH" --ranks 4 --min 8 --max 256M --factor 4
# The executor kernel's engine (BRAID_CUDA_ENGINE=executor, opt-in) in the same run.
step threads-all_reduce-2ranks-executor 30 env BRAID_CUDA_ENGINE=executor "$THREADS_BENCH" \
  --ranks 2 --min 8 --max 1G --factor 4
# The same through the one driver's thread ranks (nccl-tests' -t; never run on a GPU before).
step all_reduce_perf-t2 30 "$PERF" -t 2 --device cuda -b 8 -e 1G -f 4
step all_reduce_perf-t4 30 "$PERF" -t 4 --device cuda -b 8 -e 256M -f 4
step all_reduce_perf-2ranks-eager 20 env CUDA_MODULE_LOADING=EAGER "$BRAIDRUN" -n 2 "$PERF" \
  --device cuda -b 8 -e 8M -f 32 -w 2 -n 10
step all_reduce_perf-2ranks-quick 30 "$BRAIDRUN" -n 2 "$PERF" --device cuda -b 8 -e 64M -f 8 -w 2 -n 10
if [ -z "${BRAID_GPU_QUICK:-}" ]; then
  step all_reduce_perf-2ranks 40 "$BRAIDRUN" -n 2 "$PERF" --device cuda -b 8 -e 1G -f 4
fi
if [ -n "${BRAID_GPU_ALL:-}" ]; then
  step all_reduce_perf-4ranks 60 "$BRAIDRUN" -n 4 "$PERF" --device cuda -b 8 -e 1G -f 4
  step alltoall_perf-2ranks 45 "$BRAIDRUN" -n 2 "$(bin alltoall_perf)" --device cuda -b 8 -e 256M -f 16
fi

# 2: compute-sanitizer (slow), beside the trainer's checks.
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
[ -n "${BRAID_GPU_QUICK:-}" ] || bg sanitizer-memcheck-threads 90 "$SAN" --tool memcheck --error-exitcode 9 "$GPU_TEST" \
  --gtest_filter='DeviceThreadsOrdering.*:CudaKernels.InPlace*:CudaKernels.Copy*'
[ -n "${BRAID_GPU_QUICK:-}" ] || bg sanitizer-racecheck-kernels 90 "$SAN" --tool racecheck --error-exitcode 9 "$GPU_TEST" \
  --gtest_filter='CudaKernels.CopyToOneAndTwoDestinations:CudaKernels.ReduceMany*'
if [ -n "${BRAID_GPU_ALL:-}" ]; then
  bg gpu-tests-kernel-wait 90 env BRAID_CUDA_WAIT=kernel "$GPU_TEST" --gtest_filter='*DeviceThreads*'
  bg proc-tests-kernel-wait 90 env BRAID_CUDA_WAIT=kernel "$PROC_TEST"
  bg sanitizer-memcheck-processes 90 "$BRAIDRUN" -n 2 "$SAN" --tool memcheck --error-exitcode 9 \
    "$PERF" --device cuda -b 8 -e 4M -f 8 -n 2 -w 1
fi

wait
# The background steps' failures were recorded in their subshells: read them from steps.log.
mapfile -t failed < <(grep -v ': rc 0,' "$OUT/steps.log" | sed 's/^=== //; s/,.*//')
if grep -l "SKIPPED\|\[  SKIPPED" "$OUT"/*tests*.log "$OUT"/conformance*.log 2>/dev/null; then
  failed+=("tests skipped on a GPU")
fi
echo
if [ ${#failed[@]} -eq 0 ]; then
  echo "ALL GPU CHECKS PASSED (logs in $OUT)"
  exit 0
fi
echo "FAILED: ${failed[*]} (logs in $OUT)"
exit 1

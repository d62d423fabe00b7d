#!/usr/bin/env bash
# Builds the GPU checks here (where nvcc exists but no GPU does) and packs what a bare GPU machine
# needs to run them into one folder that travels with the working tree (git ignores it):
#   DEST/bin   the test and bench binaries, stripped, plus libfmt (their one non-system library)
#   DEST/deps  headers, libraries and CMake configs of fmt, GoogleTest and nlohmann-json, so the
#              GPU machine (which has nvcc, CMake and PyTorch but no Debian packages) can configure
#              braid itself, e.g. to build braid_torch against its own PyTorch.
#   with BRAID_GPU_TRAINER=1 also braid-train and trainer_cuda_test in DEST/bin, with the
#              libraries they need that a bare Ubuntu lacks (OpenBLAS, oneDNN, OpenMP and theirs;
#              cuBLAS and cuDNN come from the GPU machine's pip packages), and Fashion-MNIST in
#              DEST/data;
#   with BRAID_GPU_XZ=1 all of it as one DEST/pack.tar.xz instead (the working tree that travels
#              is limited to 64 MiB): unpack there with `tar xJf DEST/pack.tar.xz -C DEST`.
# Usage: bench/gpu/pack_prebuilt.sh [BUILD_DIR] [DEST]   (from the repository root)
set -euo pipefail
BUILD=${1:-build-gpu}
DEST=${2:-.gpu}
ARCH=${BRAID_GPU_ARCH:-90}   # H100/H200
TRAINER=${BRAID_GPU_TRAINER:-0}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBRAID_WITH_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DBRAID_WITH_MPI=OFF -DBRAID_WITH_UCX=OFF \
  -DBRAID_WITH_HWLOC=OFF -DBRAID_WITH_TORCH=OFF -DBRAID_WITH_TORCH2=OFF -DBRAID_WITH_FUZZ=OFF \
  -DBRAID_WITH_TRAINER=$([ "$TRAINER" = 1 ] && echo ON || echo OFF) >/dev/null
TARGETS=(cuda_cpu_test cuda_gpu_test cuda_proc_test conformance_test gpu_kernels_bench
  all_reduce_perf alltoall_perf braidrun nccl_device_test gpu_device_threads_bench gpu_bus_latency)
[ "$TRAINER" = 1 ] && TARGETS+=(braid-train trainer_cuda_test)
cmake --build "$BUILD" --target "${TARGETS[@]}"
rm -rf "$DEST/bin" "$DEST/deps" "$DEST/data" "$DEST/pack.tar.xz"
mkdir -p "$DEST/bin"
for t in "${TARGETS[@]}"; do
  f=$(find "$BUILD" -name "$t" -type f -perm -u+x | head -1)
  [ -n "$f" ] || { echo "pack_prebuilt: $t was not built" >&2; exit 1; }
  strip --strip-debug -o "$DEST/bin/$t" "$f"  # symbols kept: stacks of a hang name functions
done
LIB=/usr/lib/x86_64-linux-gnu
cp -a "$LIB"/libfmt.so* "$DEST/bin/"
# The NCCL API's test loads libnccl.so.2, which loads libbraid.so (both found on LD_LIBRARY_PATH).
cp -a "$BUILD"/lib/libnccl.so* "$BUILD"/lib/libbraid.so* "$DEST/bin/"

D="$DEST/deps/usr"
mkdir -p "$D/include" "$D/lib/x86_64-linux-gnu/cmake" "$D/share/cmake"
cp -a /usr/include/{fmt,gtest,gmock,nlohmann} "$D/include/"
cp -a "$LIB"/libfmt.so* "$LIB"/libgtest*.a "$LIB"/libgmock*.a "$D/lib/x86_64-linux-gnu/"
cp -a "$LIB"/cmake/{fmt,GTest} "$D/lib/x86_64-linux-gnu/cmake/"
cp -a /usr/share/cmake/nlohmann_json "$D/share/cmake/"
if [ "$TRAINER" = 1 ]; then
  # Every library the trainer's binaries load that a bare Ubuntu may lack, followed through
  # symlinks; not the C/C++ runtime (the machine's own, newer) nor CUDA's (cuBLAS and cuDNN come
  # from its pip packages, run_gpu_checks.sh finds them).
  mkdir -p "$DEST/bin/trainer-libs" "$DEST/data"
  for b in braid-train trainer_cuda_test; do
    ldd "$DEST/bin/$b" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r name path; do
      case "$name" in
        libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | libstdc++.so* | \
          libgcc_s.so* | ld-linux* | libz.so* | libcublas* | libcudnn* | libcuda.so*) continue ;;
      esac
      [ -e "$DEST/bin/trainer-libs/$name" ] || cp -L "$path" "$DEST/bin/trainer-libs/$name"
    done
  done
  cp /usr/share/datasets/fashion-mnist/*.gz "$DEST/data/"
fi
if [ "${BRAID_GPU_XZ:-0}" = 1 ]; then
  parts=(bin deps)
  [ -d "$DEST/data" ] && parts+=(data)
  # -9: with the trainer's libraries and data, -6 came to 63 MB on 2026-11-27, over the limit
  # together with the tracked files; -9 saves about a fifth (a minute more here).
  tar cf - -C "$DEST" "${parts[@]}" | xz -9 -T0 >"$DEST/pack.tar.xz.part"
  rm -rf "$DEST/bin" "$DEST/deps" "$DEST/data"
  mv "$DEST/pack.tar.xz.part" "$DEST/pack.tar.xz"
  # What travels: the tracked files, the untracked ones git does not ignore, and this pack.
  tree=$(git ls-files -co --exclude-standard -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
  pack=$(du -b "$DEST/pack.tar.xz" | cut -f1)
  if [ $((tree + pack)) -gt $((62 * 1024 * 1024)) ]; then
    echo "pack_prebuilt: the pack ($pack B) and the working tree ($tree B) come near the device" \
      "tool's 64 MiB; leave targets out (alltoall_perf, conformance_test) or data" >&2
  fi
fi
du -sh "$DEST"

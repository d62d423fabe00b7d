#!/usr/bin/env bash
# braid-train vs PyTorch DDP (Gloo), measured alternately in one sitting.
# Same model (MODEL=mlp: 784-256-128-10; MODEL=resnet: the bundled small ResNet), Adam lr 1e-3,
# global batch 128, fp32, 2 ranks, one math thread per rank on both sides; each side's samples/s
# is from its last epoch (training loop only). LIMIT=N trains on the first N samples only.
#
# Usage: bench/trainer/compare.sh   (env: BUILD_DIR, MODEL=mlp, RUNS=3, EPOCHS=2, LIMIT=0, RANKS=2,
#                                     PYTHON)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
if [[ -z "${BUILD_DIR:-}" ]]; then
  if [[ -x "$root/build/trainer/braid-train" ]]; then BUILD_DIR=$root/build; else BUILD_DIR=$root/build-lead; fi
fi
MODEL=${MODEL:-mlp}
LIMIT=${LIMIT:-0}
RUNS=${RUNS:-3}
EPOCHS=${EPOCHS:-2}
RANKS=${RANKS:-2}
PYTHON=${PYTHON:-/usr/bin/python3}  # Debian's python3-torch, not the pyenv python3 on the PATH
threads=$(($(nproc) / RANKS))
((threads >= 1)) || threads=1

braidrun=$BUILD_DIR/tools/braidrun
train=$BUILD_DIR/trainer/braid-train
for f in "$braidrun" "$train"; do
  [[ -x $f ]] || { echo "compare.sh: $f not found; build it or set BUILD_DIR" >&2; exit 1; }
done
"$PYTHON" -c 'import torch' 2>/dev/null ||
  { echo "compare.sh: $PYTHON cannot import torch (apt-get install python3-torch)" >&2; exit 1; }

# Keep every library from starting its own thread pool beyond the per-rank count.
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads MKL_NUM_THREADS=$threads

braid_cmd=("$braidrun" -n "$RANKS" "$train" --model "$MODEL" --optimizer adam --precision fp32
  --batch 128 --epochs "$EPOCHS" --limit-train "$LIMIT" --threads "$threads" --quiet)
torch_cmd=("$PYTHON" "$root/bench/trainer/torch_ddp.py" --model "$MODEL" --ranks "$RANKS"
  --batch 128 --epochs "$EPOCHS" --limit-train "$LIMIT" --threads "$threads")

# The samples/s figure of the last "epoch" line of a run's output.
last_rate() { grep 'epoch ' | tail -n 1 | sed -E 's/.*samples\/s ([0-9.]+).*/\1/'; }
last_acc() { grep 'epoch ' | tail -n 1 | sed -E 's/.*test acc ([0-9.]+)%.*/\1/'; }
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {
  print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "braid: ${braid_cmd[*]}"
echo "torch: ${torch_cmd[*]}"
braid_rates=() torch_rates=() braid_accs=() torch_accs=()
for ((i = 1; i <= RUNS; ++i)); do
  out=$("${braid_cmd[@]}" 2>&1) || { echo "$out"; echo "compare.sh: braid-train failed" >&2; exit 1; }
  braid_rates+=("$(last_rate <<<"$out")") braid_accs+=("$(last_acc <<<"$out")")
  echo "run $i braid: ${braid_rates[-1]} samples/s, test acc ${braid_accs[-1]}%"
  out=$("${torch_cmd[@]}" 2>&1) || { echo "$out"; echo "compare.sh: torch script failed" >&2; exit 1; }
  torch_rates+=("$(last_rate <<<"$out")") torch_accs+=("$(last_acc <<<"$out")")
  echo "run $i torch: ${torch_rates[-1]} samples/s, test acc ${torch_accs[-1]}%"
done

b=$(median "${braid_rates[@]}")
t=$(median "${torch_rates[@]}")
echo "median samples/s (epoch $EPOCHS of $EPOCHS, $RUNS runs each): braid $b  torch $t"
echo "median test acc after $EPOCHS epochs: braid $(median "${braid_accs[@]}")%  torch $(median "${torch_accs[@]}")%"
awk -v b="$b" -v t="$t" 'BEGIN { printf "ratio braid/torch: %.2fx\n", b / t }'

#!/usr/bin/env bash
# remd on a GPU machine (one H100 with 16 cores, or more GPUs): in about 5 minutes,
#   1. builds src/remd if BUILD_DIR has no remd binary (standalone, CUDA, -j16),
#   2. GPU vs CPU reference over one interval (100 steps): every kernel, 256 and 2,048 atoms,
#   3. the speed benchmark: 14,336 replicas x 2,048 atoms, one exchange interval, the
#      faithful, shared and fast kernels (fast at 2, 4 and 8 atoms per thread), and 256 atoms,
#   4. local multi-GPU runs for n = 1, 2, 4, 8 up to the GPUs present (fast kernel),
#   5. ctest's remd tests and P003's model fitted to the local runs.
# Every program's JSON lines go to $OUT/<name>.jsonl, its stderr to <name>.err; summary.txt
# lists each step with its exit status.  Usage (repository root):
#   OUT=/tmp/out src/remd/bench/device-run.sh [BUILD_DIR]     (default build/device-remd)
set -u
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
BUILD=${1:-$ROOT/build/device-remd}
OUT=${OUT:?set OUT to the directory for the results}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }

BIN=$BUILD/remd/remd
[ -x "$BIN" ] || BIN=$BUILD/remd
if [ ! -x "$BIN" ]; then
  note "building src/remd in $BUILD"
  command -v nvcc > /dev/null || [ ! -x /usr/local/cuda/bin/nvcc ] || export CUDACXX=/usr/local/cuda/bin/nvcc
  cmake -S "$ROOT/src/remd" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DUMSTUDY_CUDA=ON \
        -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCH:-90} > "$OUT/cmake.log" 2>&1 &&
    cmake --build "$BUILD" -j "$(nproc)" >> "$OUT/cmake.log" 2>&1 || { note "build failed (cmake.log)"; exit 1; }
  BIN=$BUILD/remd
fi
nvidia-smi --query-gpu=index,name,clocks.max.sm,memory.total --format=csv > "$OUT/gpus.csv" 2>&1
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
# FP32 peak (systems/gpus.yaml): H100 SXM and H200 66.9, H100 PCIe 51.2 TFLOPS.
case "$NAME" in
  *"H100 PCIe"*) PEAK=51.2 ;; *H100*|*H200*|*GH200*) PEAK=66.9 ;; *) PEAK=0 ;;
esac
PEAK=${FP32_PEAK_TFLOPS:-$PEAK}
note "$NGPU GPU(s): $NAME; FP32 peak $PEAK TFLOPS; binary $BIN"
export OMP_NUM_THREADS=$(nproc)

run() { # run NAME LIMIT_S ARGS...: one remd run, JSON to NAME.jsonl
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s%N)
  timeout "$limit" "$BIN" "$@" --fp32-peak-tflops "$PEAK" > "$OUT/$name.jsonl" 2> "$OUT/$name.err"
  local rc=$? ms=$((($(date +%s%N) - t0) / 1000000))
  note "$(printf '%-22s rc=%-3s %4d.%03d s  %s' "$name" "$rc" $((ms / 1000)) $((ms % 1000)) "$(tail -1 "$OUT/$name.err")")"
}

# 2. agreement with the CPU reference (first interval, Berendsen on, 50-250 K ladder)
for k in faithful shared fast; do
  run verify-256-$k 60 --kernel $k --cells 4 --replicas 16 --exchange-steps 100 --iterations 2 --verify-replicas 4 --gpus 1
  run verify-2048-$k 60 --kernel $k --cells 8 --replicas 8 --exchange-steps 100 --iterations 1 --verify-replicas 2 --gpus 1
done
# 3. speed: P003's full replica set, one exchange interval (100 steps)
run speed-2048-fast 120 --kernel fast --cells 8 --replicas 14336 --iterations 1 --gpus 1
run speed-2048-fast-k8 60 --kernel fast --threads 256 --cells 8 --replicas 14336 --iterations 1 --gpus 1
run speed-2048-fast-k2 60 --kernel fast --threads 1024 --cells 8 --replicas 14336 --iterations 1 --gpus 1
run speed-2048-shared 90 --kernel shared --cells 8 --replicas 14336 --iterations 1 --gpus 1
run speed-256-fast 60 --kernel fast --cells 4 --replicas 14336 --iterations 5 --gpus 1
run speed-256-faithful 60 --kernel faithful --cells 4 --replicas 14336 --iterations 5 --gpus 1
run speed-2048-faithful 150 --kernel faithful --cells 8 --replicas 14336 --iterations 1 --gpus 1
# 4. local multi-GPU scaling (one host thread over n GPUs), P003's sizes, fast kernel
n=2
while [ "$n" -le "$NGPU" ]; do
  run local-2048-n$n 120 --kernel fast --cells 8 --replicas 14336 --iterations 2 --gpus $n
  run local-256-n$n 60 --kernel fast --cells 4 --replicas 14336 --iterations 5 --gpus $n
  n=$((n * 2))
done
# 5. ctest (GPU-vs-CPU tests included) and the model on the local runs
if [ -f "$BUILD/CTestTestfile.cmake" ]; then
  (cd "$BUILD" && timeout 120 ctest -R '^remd\.' --output-on-failure) > "$OUT/ctest.log" 2>&1
  note "ctest remd.*: rc=$? ($(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1))"
fi
python3 "$ROOT/analysis/remd_model.py" --remd "$OUT"/speed-2048-fast.jsonl "$OUT"/speed-256-fast.jsonl \
  $(ls "$OUT"/local-*.jsonl 2>/dev/null) --json "$OUT/model.json" > "$OUT/model.txt" 2>&1
note "model fit: rc=$? (model.txt); total $SECONDS s"

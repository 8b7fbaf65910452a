#!/usr/bin/env bash
# remd on a GPU machine (one H100 with 16 cores, or more GPUs): in about 5 minutes,
#   1. builds src/remd if BUILD_DIR has no remd binary (standalone, CUDA, -j16),
#   2. GPU vs CPU reference over one interval (100 steps): every kernel, 256 and 2,048 atoms,
#   3. the speed benchmark: 14,336 replicas x 2,048 atoms, one exchange interval, the
#      faithful, shared and fast kernels (fast at 2, 4 and 8 atoms per thread), and 256 atoms,
#   4. local multi-GPU runs for n = 1, 2, 4, 8 up to the GPUs present (fast kernel),
#   5. through vcuda (src/vcuda's vcuda-run: one server per GPU on loopback): vcuda-bench's
#      fit of BH, BD, LH, LD, LK and remd on n = 1, 2, 4, 8 servers (VCUDA_BUILD, else a
#      standalone build of src/vcuda; skipped if that fails),
#   6. ctest's remd tests and P003's model fitted to the local runs (+ the vcuda fit).
# Steps that would start after BUDGET_S seconds (default 450) are skipped and say so.
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
unset VCUDA_SERVERS # local runs are local; vcuda-run sets it for the remote ones

over_budget() { [ "$SECONDS" -gt "${BUDGET_S:-450}" ] && note "$1: skipped, ${SECONDS} s used (BUDGET_S=${BUDGET_S:-450})"; }
run() { # run NAME LIMIT_S ARGS...: one remd run, JSON to NAME.jsonl (WRAP: a command in front)
  local name=$1 limit=$2; shift 2
  over_budget "$name" && return
  local t0=$(date +%s%N)
  timeout "$limit" ${WRAP:-} "$BIN" "$@" --fp32-peak-tflops "$PEAK" > "$OUT/$name.jsonl" 2> "$OUT/$name.err"
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
# 4. local multi-GPU scaling (one host thread over n GPUs), P003's sizes, fast kernel.
# Every n runs the same intervals as the n = 1 speed run above (one at 2,048 atoms, five at
# 256): later intervals cost more as the lattice melts (2x H200, 2,048 atoms: the second
# interval 3.5% longer than the first at n = 1), so R(n) compares like with like.
n=2
while [ "$n" -le "$NGPU" ]; do
  run local-2048-n$n 120 --kernel fast --cells 8 --replicas 14336 --iterations 1 --gpus $n
  run local-256-n$n 60 --kernel fast --cells 4 --replicas 14336 --iterations 5 --gpus $n
  n=$((n * 2))
done
# 5. through vcuda: the network fit, then remd on n servers (one per GPU)
VB=${VCUDA_BUILD:-$BUILD-vcuda}
if [ ! -x "$VB/vcuda-run" ] && [ -x "$VB/vcuda/vcuda-run" ]; then VB=$VB/vcuda; fi
if [ ! -x "$VB/vcuda-run" ] && ! over_budget vcuda-build; then
  cmake -S "$ROOT/src/vcuda" -B "$VB" -DCMAKE_BUILD_TYPE=Release -DUMSTUDY_CUDA=ON -DBUILD_TESTING=OFF \
        -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCH:-90} > "$OUT/vcuda-cmake.log" 2>&1 &&
    cmake --build "$VB" -j "$(nproc)" >> "$OUT/vcuda-cmake.log" 2>&1 || note "vcuda build failed (vcuda-cmake.log)"
fi
if [ -x "$VB/vcuda-run" ] && [ -x "$VB/vcuda-bench" ]; then
  if ! over_budget vcuda-fit; then
    timeout 120 "$VB/vcuda-run" --log-dir "$OUT/vcuda-logs-fit" -- "$VB/vcuda-bench" --reps 20 --no-intervals \
      > "$OUT/vcuda-fit.jsonl" 2> "$OUT/vcuda-fit.err"
    note "vcuda-fit              rc=$? $(grep -h 'n=1:' "$OUT/vcuda-fit.err" | head -1)"
  fi
  n=1
  while [ "$n" -le "$NGPU" ]; do
    WRAP="env VCUDA_KEEPALIVE_MS=2 $VB/vcuda-run --gpus $n --log-dir $OUT/vcuda-logs-n$n --" \
      run vcuda-2048-n$n 150 --kernel fast --cells 8 --replicas 14336 --iterations 1 --gpus $n
    WRAP="env VCUDA_KEEPALIVE_MS=2 $VB/vcuda-run --gpus $n --log-dir $OUT/vcuda-logs-n$n --" \
      run vcuda-256-n$n 90 --kernel fast --cells 4 --replicas 14336 --iterations 5 --gpus $n
    n=$((n * 2))
  done
  n=$((n / 2)) # the most servers run above: the same without P003's keep-alive
  [ "$n" -gt 0 ] && WRAP="$VB/vcuda-run --gpus $n --log-dir $OUT/vcuda-logs-nokeepalive --" \
    run vcuda-256-n$n-nokeepalive 90 --kernel fast --cells 4 --replicas 14336 --iterations 5 --gpus $n
else
  note "vcuda: no vcuda-run/vcuda-bench in $VB: remd through vcuda not run"
fi
# 6. ctest (GPU-vs-CPU tests included) and the model on the local runs
if [ -f "$BUILD/CTestTestfile.cmake" ]; then
  (cd "$BUILD" && timeout 120 ctest -R '^remd\.' --output-on-failure) > "$OUT/ctest.log" 2>&1
  note "ctest remd.*: rc=$? ($(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1))"
fi
python3 "$ROOT/analysis/remd_model.py" --remd "$OUT"/speed-2048-fast.jsonl "$OUT"/speed-256-fast.jsonl \
  $(ls "$OUT"/local-*.jsonl 2>/dev/null) --json "$OUT/model.json" > "$OUT/model.txt" 2>&1
note "model fit (local runs, P003's network): rc=$? (model.txt)"
if [ -s "$OUT/vcuda-fit.jsonl" ]; then
  python3 "$ROOT/analysis/remd_model.py" --remd "$OUT"/speed-2048-fast.jsonl "$OUT"/speed-256-fast.jsonl \
    $(ls "$OUT"/local-*.jsonl "$OUT"/vcuda-*-n*.jsonl 2>/dev/null) --vcuda "$OUT/vcuda-fit.jsonl" --json "$OUT/model-vcuda.json" > "$OUT/model-vcuda.txt" 2>&1
  note "model fit (local runs, vcuda fit): rc=$? (model-vcuda.txt; measured vcuda-*.jsonl beside it)"
fi
note "total $SECONDS s"

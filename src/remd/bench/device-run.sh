#!/usr/bin/env bash
# remd and vcuda on a GPU machine (1 or 2 GPUs; a step needing 2 skips on 1), in about
# 9 minutes with the builds, every timing the median of REPS (default 3) runs:
#   1. builds src/remd (BUILD_DIR) and src/vcuda (VCUDA_BUILD) unless built there;
#   2. correctness: every kernel against the CPU reference over one interval (256 atoms,
#      fast also 2,048), and on 2 GPUs each placement and host loop, with the same swaps
#      and energies as on one;
#   3. one GPU, P003's 14,336 replicas, fast kernel, threads per block by a sweep on this
#      GPU (--tune) and the balance model's one-GPU profile (--profile-segments 8):
#      2,048 atoms (one interval) and 256 atoms (five);
#   4. two GPUs: interleaved placement + a host thread per GPU (remd's default) and P003's
#      arrangement (contiguous + serial list 1), REPS each; the two mixed ones once each;
#   5. vcuda-bench's copy fits, on the local runtime and through vcuda;
#   6. round trips per server per interval (VCUDA_STATS): remd through 2 vcuda servers,
#      2 and 5 intervals, each host loop;
#   7. remd through vcuda (one server per GPU, 2 ms keep-alive): 256 atoms on 1 and 2
#      servers, each host loop; 2,048 atoms on 2 servers;
#   8. the idle jump (VCUDA-T4) split into its parts: D2H latency after 0, 2, 10, 50 ms
#      idle on the local runtime (sleeping, spinning, with a local 4-byte keep-alive) and
#      through vcuda (no keep-alive; 2 ms keep-alive with the naps off as before, on as
#      now, the server spinning, the client spinning, both), and each server's CPU time;
#   9. ctest remd.*; P003's model and the balance model on these runs.
# Steps that would start after BUDGET_S seconds (default 480) are skipped and say so.
# $OUT receives at most 8 files: summary.txt (each step: exit status, time), medians.json
# (per configuration: median/min/max of every metric over the repeats, R(n), round trips,
# idle latencies, server CPU), model-balance-local.json, model-balance-vcuda.json,
# model-p003.txt, ctest.log, raw.tar.gz (every run's JSON lines and stderr, server logs,
# build logs).  Usage (repository root):
#   OUT=/tmp/out src/remd/bench/device-run.sh [BUILD_DIR]   (default build/device-remd)
# BUILD_ONLY=1 stops after the builds, so that a first call builds and a second, on the
# same machine, has the whole budget for the measurements.
set -u
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
BUILD=${1:-$ROOT/build/device-remd}
VB=${VCUDA_BUILD:-$BUILD-vcuda}
OUT=${OUT:?set OUT to the directory for the results}
REPS=${REPS:-3}
BUDGET_S=${BUDGET_S:-480}
WORK=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/remd-device.XXXXXX")}
mkdir -p "$OUT" "$WORK"
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
JOBS=$(nproc)

# ---- 1. builds --------------------------------------------------------------------
command -v nvcc > /dev/null || [ ! -x /usr/local/cuda/bin/nvcc ] || export CUDACXX=/usr/local/cuda/bin/nvcc
BIN=$BUILD/remd/remd
[ -x "$BIN" ] || BIN=$BUILD/remd
if [ ! -x "$BIN" ] || [ -n "${REBUILD:-}" ]; then
  note "building src/remd in $BUILD"
  cmake -S "$ROOT/src/remd" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DUMSTUDY_CUDA=ON \
        -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCH:-90} > "$WORK/cmake-remd.log" 2>&1 &&
    cmake --build "$BUILD" -j "$JOBS" >> "$WORK/cmake-remd.log" 2>&1 || { note "remd build failed"; tail -20 "$WORK/cmake-remd.log" >> "$SUMMARY"; }
  BIN=$BUILD/remd
fi
[ -x "$VB/vcuda-run" ] || [ ! -x "$VB/vcuda/vcuda-run" ] || VB=$VB/vcuda
if [ ! -x "$VB/vcuda-run" ] || [ -n "${REBUILD:-}" ]; then
  note "building src/vcuda in $VB"
  cmake -S "$ROOT/src/vcuda" -B "$VB" -DCMAKE_BUILD_TYPE=Release -DUMSTUDY_CUDA=ON -DBUILD_TESTING=OFF \
        -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCH:-90} > "$WORK/cmake-vcuda.log" 2>&1 &&
    cmake --build "$VB" -j "$JOBS" >> "$WORK/cmake-vcuda.log" 2>&1 || { note "vcuda build failed"; tail -20 "$WORK/cmake-vcuda.log" >> "$SUMMARY"; }
fi
note "builds done at ${SECONDS} s"
if [ -n "${BUILD_ONLY:-}" ]; then # a first call that only builds (the next one measures)
  tar czf "$OUT/raw.tar.gz" -C "$WORK" . 2>/dev/null
  exit 0
fi
nvidia-smi --query-gpu=index,name,clocks.max.sm,memory.total --format=csv > "$WORK/gpus.csv" 2>&1
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
case "$NAME" in # FP32 peak (systems/gpus.yaml)
  *"H100 PCIe"*) PEAK=51.2 ;; *H100*|*H200*|*GH200*) PEAK=66.9 ;; *) PEAK=0 ;;
esac
note "$NGPU GPU(s): $NAME; binary $BIN; vcuda $VB; raw files in $WORK"
export OMP_NUM_THREADS=$JOBS
unset VCUDA_SERVERS VCUDA_KEEPALIVE_MS VCUDA_NAP_US VCUDA_STATS # local runs are local

over_budget() { [ "$SECONDS" -gt "$BUDGET_S" ] && note "$1: skipped, ${SECONDS} s used (BUDGET_S=$BUDGET_S)"; }
# once NAME K LIMIT CMD...: one run of a program, stdout to WORK/NAME.rK.jsonl, stderr to .err
once() {
  local name=$1 k=$2 limit=$3; shift 3
  local t0=$(date +%s%N)
  timeout "$limit" "$@" > "$WORK/$name.r$k.jsonl" 2> "$WORK/$name.r$k.err"
  local rc=$? ms=$((($(date +%s%N) - t0) / 1000000))
  note "$(printf '%-34s r%d rc=%-3s %5d.%03d s  %s' "$name" "$k" "$rc" $((ms / 1000)) $((ms % 1000)) \
          "$(grep -v '^{' "$WORK/$name.r$k.err" | tail -1 | cut -c1-110)")"
}
# reps NAME N LIMIT CMD...: N repeats of one configuration, each after the budget check;
# @K@ in CMD becomes the repeat's number (a log directory of its own)
reps() {
  local name=$1 n=$2 limit=$3; shift 3
  for ((k = 1; k <= n; k++)); do over_budget "$name" && return; once "$name" "$k" "$limit" "${@//@K@/$k}"; done
}
R=("$BIN" --fp32-peak-tflops "$PEAK")
# vr N NAME: VR = vcuda-run with one server per GPU on N GPUs, the servers' logs kept per repeat
vr() { VR=("$VB/vcuda-run" --gpus "$1" --log-dir "$WORK/$2.r@K@.logs"); }
P2048=(--kernel fast --cells 8 --replicas 14336 --iterations 1)
P256=(--kernel fast --cells 4 --replicas 14336 --iterations 5)

# ---- 2. correctness ---------------------------------------------------------------
for k in faithful shared fast; do
  once verify-256-$k 1 60 "${R[@]}" --kernel $k --cells 4 --replicas 16 --exchange-steps 100 --iterations 2 \
    --verify-replicas 4 --gpus 1
done
once verify-2048-fast 1 60 "${R[@]}" --kernel fast --cells 8 --replicas 8 --exchange-steps 100 --iterations 1 \
  --verify-replicas 2 --gpus 1
# the same run on 1 GPU and on 2 in every arrangement: medians.json's same_physics says
# whether every interval's swaps and mean energy came out the same
SAME=(--kernel fast --cells 4 --replicas 16 --exchange-steps 100 --iterations 3 --tmin 100 --tmax 110 --verify-replicas 4)
once verify-256-n1 1 60 "${R[@]}" "${SAME[@]}" --gpus 1
if [ "$NGPU" -ge 2 ]; then
  for pl in interleaved contiguous; do for hl in threads serial; do
    once verify-256-n2-$pl-$hl 1 60 "${R[@]}" "${SAME[@]}" --gpus 2 --placement $pl --host-loop $hl
  done; done
fi

# ---- 3. one GPU: tuned, profiled ----------------------------------------------------
reps prof-2048 "$REPS" 120 "${R[@]}" "${P2048[@]}" --gpus 1 --tune --profile-segments 8
reps prof-256 "$REPS" 60 "${R[@]}" "${P256[@]}" --gpus 1 --tune --profile-segments 8

# ---- 4. two GPUs locally ----------------------------------------------------------
if [ "$NGPU" -ge 2 ]; then
  for a in 2048 256; do
    if [ $a = 2048 ]; then P=("${P2048[@]}"); else P=("${P256[@]}"); fi
    reps local-$a-n2-interleaved-threads "$REPS" 120 "${R[@]}" "${P[@]}" --gpus 2 --tune
    reps local-$a-n2-contiguous-serial "$REPS" 120 "${R[@]}" "${P[@]}" --gpus 2 --tune --placement contiguous \
      --host-loop serial
    reps local-$a-n2-contiguous-threads 1 120 "${R[@]}" "${P[@]}" --gpus 2 --tune --placement contiguous
    reps local-$a-n2-interleaved-serial 1 120 "${R[@]}" "${P[@]}" --gpus 2 --tune --host-loop serial
  done
else
  note "one GPU: no runs on 2 GPUs"
fi

if [ -x "$VB/vcuda-run" ] && [ -x "$VB/vcuda-bench" ]; then
  # ---- 5. copy fits -------------------------------------------------------------------
  reps fit-local 1 120 "$VB/vcuda-bench" --reps 20 --no-intervals
  vr 1 fit-vcuda; reps fit-vcuda 1 120 "${VR[@]}" -- "$VB/vcuda-bench" --reps 20 --no-intervals
  cat "$WORK"/fit-local.r1.jsonl "$WORK"/fit-vcuda.r1.jsonl > "$WORK/fits.jsonl" 2>/dev/null

  # ---- 6. round trips per server per interval -----------------------------------------
  if [ "$NGPU" -ge 2 ]; then
    for hl in threads serial; do for it in 2 5; do
      vr 2 rt-$hl-i$it; reps rt-$hl-i$it 1 60 env VCUDA_STATS=1 VCUDA_KEEPALIVE_MS=2 "${VR[@]}" -- \
        "${R[@]}" --kernel fast --cells 4 --replicas 1792 --iterations $it --gpus 2 --host-loop $hl
    done; done
  fi

  # ---- 7. remd through vcuda (2 ms keep-alive) ------------------------------------------
  vr 1 vcuda-256-n1-threads; reps vcuda-256-n1-threads "$REPS" 90 env VCUDA_KEEPALIVE_MS=2 "${VR[@]}" -- \
    "${R[@]}" "${P256[@]}" --gpus 1 --tune
  if [ "$NGPU" -ge 2 ]; then
    for hl in threads serial; do
      vr 2 vcuda-256-n2-$hl; reps vcuda-256-n2-$hl "$REPS" 90 env VCUDA_KEEPALIVE_MS=2 "${VR[@]}" -- \
        "${R[@]}" "${P256[@]}" --gpus 2 --tune --host-loop $hl
    done
    vr 2 vcuda-2048-n2-threads; reps vcuda-2048-n2-threads "$REPS" 150 env VCUDA_KEEPALIVE_MS=2 "${VR[@]}" -- \
      "${R[@]}" "${P2048[@]}" --gpus 2 --tune
    vr 2 vcuda-2048-n2-serial; reps vcuda-2048-n2-serial 1 150 env VCUDA_KEEPALIVE_MS=2 "${VR[@]}" -- \
      "${R[@]}" "${P2048[@]}" --gpus 2 --tune --host-loop serial
  fi

  # ---- 8. the idle jump, part by part -----------------------------------------------------
  # (every vcuda-bench run fits copies first: kept small here, the sweep is what counts)
  IDLE=(--reps 3 --min-bytes 512 --max-bytes 4K --large 1M --large-reps 1 --max-devices 1
        --intervals 0,2,10,50 --interval-calls 30)
  B=("$VB/vcuda-bench" "${IDLE[@]}")
  reps idle-local-sleep "$REPS" 60 "${B[@]}"
  reps idle-local-spin "$REPS" 60 "${B[@]}" --gap-wait spin
  reps idle-local-keepalive2 "$REPS" 60 "${B[@]}" --local-keepalive-ms 2
  vr 1 idle-vcuda-ka0; reps idle-vcuda-ka0 "$REPS" 60 env VCUDA_KEEPALIVE_MS=0 "${VR[@]}" -- "${B[@]}"
  vr 1 idle-vcuda-ka2-nonap; reps idle-vcuda-ka2-nonap "$REPS" 60 env VCUDA_KEEPALIVE_MS=2 VCUDA_NAP_US=0 \
    "${VR[@]}" --server-opts "--nap-us 0" -- "${B[@]}"
  vr 1 idle-vcuda-ka2; reps idle-vcuda-ka2 "$REPS" 60 env VCUDA_KEEPALIVE_MS=2 "${VR[@]}" -- "${B[@]}"
  vr 1 idle-vcuda-ka2-serverspin; reps idle-vcuda-ka2-serverspin "$REPS" 60 env VCUDA_KEEPALIVE_MS=2 VCUDA_NAP_US=0 \
    "${VR[@]}" --server-opts "--spin-us 100000 --nap-us 0" -- "${B[@]}"
  vr 1 idle-vcuda-ka2-clientspin; reps idle-vcuda-ka2-clientspin "$REPS" 60 env VCUDA_KEEPALIVE_MS=2 VCUDA_NAP_US=0 \
    "${VR[@]}" --server-opts "--nap-us 0" -- "${B[@]}" --gap-wait spin
  # neither end sleeps: what is left is the GPU's and the path's own
  vr 1 idle-vcuda-ka2-bothspin; reps idle-vcuda-ka2-bothspin "$REPS" 60 env VCUDA_KEEPALIVE_MS=2 VCUDA_NAP_US=0 \
    "${VR[@]}" --server-opts "--spin-us 100000 --nap-us 0" -- "${B[@]}" --gap-wait spin
else
  note "vcuda: no vcuda-run/vcuda-bench in $VB: steps 5-8 not run"
fi

# ---- 9. tests, medians, models --------------------------------------------------------
if [ -f "$BUILD/CTestTestfile.cmake" ] && ! over_budget ctest; then
  (cd "$BUILD" && timeout 90 ctest -R '^remd\.' --output-on-failure) > "$OUT/ctest.log" 2>&1
  note "ctest remd.*: rc=$? ($(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1))"
fi
python3 "$ROOT/src/remd/bench/device_summary.py" "$WORK" "$OUT/medians.json" --median-copies >> "$SUMMARY" 2>&1
note "medians: rc=$? (medians.json)"
ONE=$(ls "$WORK"/prof-2048.median.jsonl "$WORK"/prof-256.median.jsonl 2>/dev/null)
if [ -n "$ONE" ]; then
  LOCAL_RUNS=$(ls "$WORK"/local-*.r*.jsonl 2>/dev/null)
  VCUDA_RUNS=$(ls "$WORK"/vcuda-*.r*.jsonl 2>/dev/null)
  # shellcheck disable=SC2086
  python3 "$ROOT/analysis/remd_balance_model.py" --one-gpu $ONE --measured $LOCAL_RUNS --comm "$WORK/fits.jsonl" \
    --transport local --curve --json "$OUT/model-balance-local.json" >> "$SUMMARY" 2>&1
  note "balance model, local runs: rc=$?"
  # shellcheck disable=SC2086
  [ -n "$VCUDA_RUNS" ] && python3 "$ROOT/analysis/remd_balance_model.py" --one-gpu $ONE --measured $VCUDA_RUNS \
    --comm "$WORK/fits.jsonl" --transport vcuda --curve --json "$OUT/model-balance-vcuda.json" >> "$SUMMARY" 2>&1 &&
    note "balance model, vcuda runs: rc=0"
  # shellcheck disable=SC2086
  python3 "$ROOT/analysis/remd_model.py" --remd $ONE $LOCAL_RUNS $VCUDA_RUNS \
    $( [ -s "$WORK/fits.jsonl" ] && echo --vcuda "$WORK/fits.jsonl") > "$OUT/model-p003.txt" 2>&1
  note "P003's model: rc=$? (model-p003.txt)"
fi
note "total $SECONDS s"
tar czf "$OUT/raw.tar.gz" -C "$WORK" . 2>/dev/null
cp "$SUMMARY" "$WORK/summary.txt"

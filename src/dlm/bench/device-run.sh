#!/bin/bash
# The P004 speed experiments on one 16-core machine (memory ranks are local
# processes), in under 8 minutes including the build:
#   env          machine, MPI, userfaultfd and max_map_count settings
#   integrity    the CI integrity test once per engine (this kernel, this MPI)
#   micro        fig. 2.2 at the paper's size: 2^28 unsigned longs (2 GiB), 800 MiB
#                compute capacity, 1 memory rank, 1 MiB pages; threads 1..16, every
#                engine (R58: 1 and 12); uffd again with 12 workers (fault
#                throughput vs threads)
#   stencil      7-point stencil, 12 threads, 1 MiB pages, 3 memory ranks, problem /
#                capacity 0.5, 1, 2, 4 (capacity 512 MiB: 256 MiB .. 2 GiB)
#   stream       STREAM, 12 threads, 8 MiB pages, 4 memory ranks, arrays / capacity
#                0.5, 1, 2, 4 (capacity 512 MiB), with the MPI p2p bandwidth of the run
# Every program writes JSON lines: $OUT/<experiment>.jsonl (stderr: .log); summary.txt
# (summarize.py) tabulates the numbers ARTIFACT.md C.6 quotes.
#
#   src/dlm/bench/device-run.sh [BUILD_DIR]     (default: build-dlm; configured if new)
# Environment: OUT (default ./dlm-out), DLM_DEVICE_BUDGET seconds (default 460),
# DLM_DEVICE_QUICK=1: the same runs at toy sizes (a smoke test of the script).
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:-build-dlm}
OUT=${OUT:-$PWD/dlm-out}
budget=${DLM_DEVICE_BUDGET:-460}
mkdir -p "$OUT"
start=$(date +%s)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Idle OpenMP threads sleep instead of spinning: they share the cores with DLM's
# threads and the memory ranks.
export OMP_WAIT_POLICY=PASSIVE
export DLM_TIMEOUT=60

left() { echo $((budget - ($(date +%s) - start))); }
# run NAME LIMIT RANKS COMMAND...: one MPI job, bounded by LIMIT and the time left.
run() {
  local name=$1 limit=$2 ranks=$3
  shift 3
  local l=$(left)
  [ "$l" -lt "$limit" ] && limit=$l
  if [ "$limit" -le 5 ]; then
    echo "device-run: $name skipped, the time budget is spent" | tee -a "$OUT/skipped.txt" >&2
    return
  fi
  echo "device-run: $name (<= ${limit}s)" >&2
  timeout -k 5 "$limit" mpirun -n "$ranks" --oversubscribe --bind-to none "$@" \
    >>"$OUT/$name.jsonl" 2>>"$OUT/$name.log"
  local rc=$?
  echo "{\"experiment\":\"$name\",\"rc\":$rc,\"command\":\"$*\",\"elapsed_total_s\":$(( $(date +%s) - start ))}" >>"$OUT/runs.jsonl"
  [ $rc -ne 0 ] && echo "device-run: $name exited $rc (see $OUT/$name.log)" >&2
}

{
  echo "date: $(date -u)"; uname -a; nproc; free -g | head -2
  echo "max_map_count: $(cat /proc/sys/vm/max_map_count)"
  echo "unprivileged_userfaultfd: $(cat /proc/sys/vm/unprivileged_userfaultfd 2>/dev/null || echo absent)"
  echo "uid: $(id -u)"; mpirun --version | head -1; cc --version | head -1
  lscpu | grep -E 'Model name|Socket|Thread|NUMA node\(s\)'
} >"$OUT/env.txt" 2>&1

# A fresh build dir gets dlm alone; an existing one (any components) is brought up to
# date for the dlm targets only.
echo "device-run: building dlm in $build" >&2
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$src" -B "$build" -DUMSTUDY_COMPONENTS=dlm -DUMSTUDY_CUDA=OFF -DCMAKE_BUILD_TYPE=Release \
    >"$OUT/build.log" 2>&1 || { echo "device-run: configure failed, see $OUT/build.log" >&2; exit 1; }
fi
cmake --build "$build" -j "$(nproc)" --target dlm-micro dlm-stencil dlm-stream dlm_test_integrity \
  >>"$OUT/build.log" 2>&1 || { echo "device-run: build failed, see $OUT/build.log" >&2; exit 1; }
bin=$build/dlm

# The sizes above (DLM_DEVICE_QUICK=1: the same runs at the checks' quick sizes).
if [ "${DLM_DEVICE_QUICK:-0}" = 1 ]; then
  paper_micro=(--elements 1048576 --capacity 3M --mem-capacity 32M --page-size 64K)
  stencil_size=(--nx 64 --ny 64 --capacity 4M --mem-capacity 8M --page-size 64K)
  stream_size=(--capacity 8M --mem-capacity 12M --page-size 512K)
else
  paper_micro=(--elements 268435456 --capacity 800M --mem-capacity 6000M --page-size 1M)
  # 256x256 planes; at 4x, 2 GiB over 3 memory ranks (STREAM: 4)
  stencil_size=(--nx 256 --ny 256 --capacity 512M --mem-capacity 1G --page-size 1M)
  stream_size=(--capacity 512M --mem-capacity 640M --page-size 8M)
fi

for e in r3 r58 r77 uffd; do
  DLM_ENGINE=$e DLM_PAGE_SIZE=16K DLM_CAPACITY=256K DLM_MEM_CAPACITY=4M \
    run integrity 60 3 "$bin/tests/dlm_test_integrity" --elements 262144 --ops 4000 --threads 4
done

# In order of importance, so a run cut short loses the least;
# a run cut by its limit keeps the records of the thread counts / sizes it finished.
# micro: R58 is the slow one (P004: 2.75x R3), so it gets the fewest thread counts;
# uffd with 12 workers shows whether fault throughput keeps growing with threads.
run micro 45 2 "$bin/dlm-micro" --engine r77 --threads 1,2,4,8,12,16 "${paper_micro[@]}"
run micro 45 2 "$bin/dlm-micro" --engine r3 --threads 1,2,4,8,12,16 "${paper_micro[@]}"
run micro 45 2 "$bin/dlm-micro" --engine uffd --threads 1,2,4,8,12,16 "${paper_micro[@]}"
run micro 45 2 "$bin/dlm-micro" --engine r58 --threads 1,12 "${paper_micro[@]}"
run micro 45 2 "$bin/dlm-micro" --engine uffd --uffd-workers 12 --threads 1,4,12 "${paper_micro[@]}"

stencil=("${stencil_size[@]}" --threads 12 --ratios 0.5,1,2,4 --slab 16 --tblock 4 --steps 8)
for e in r77 r3 uffd r58; do
  run stencil 45 4 "$bin/dlm-stencil" --engine $e "${stencil[@]}"
done

stream=("${stream_size[@]}" --threads 12 --ratios 0.5,1,2,4 --ntimes 3)
for e in r77 uffd r3 r58; do
  run stream 45 5 "$bin/dlm-stream" --engine $e "${stream[@]}"
done

python3 "$here/summarize.py" "$OUT" >"$OUT/summary.txt" 2>&1 && cat "$OUT/summary.txt" >&2
echo "device-run: done in $(( $(date +%s) - start )) s; results in $OUT (summary.txt: the numbers ARTIFACT.md C.6 quotes)" >&2

#!/bin/bash
# P004's per-fault timing points (figs. 2.4 / 3.2) for every engine at the ReFrame
# checks' quick sizes, one compute thread, REPS runs each (engines interleaved, so a
# drifting machine load spreads over all of them), then the table (breakdown.py):
#   micro      --fault-timing, the DlmMicro quick size (2^20 unsigned longs over 3 MiB,
#              64 KiB pages, 1 memory rank)
#   stencil    --fault-timing, the DlmStencil quick size (64x64 planes over 4 MiB, 64 KiB
#              pages, 3 memory ranks), ratios 0.5, 1, 2, 4
#   plain      the same two runs without the option: the times the claims use, and
#              beside them what timing every fault costs
#   overhead   the instrumentation's own cost: dlm-timing-cost (stamps and recording per
#              fault, no MPI), and the microbenchmark at 4x the quick size, 5 arrays per
#              run, with and without --fault-timing back to back
#   host       dlm-host-probe on rank 0's machine: what a page copy (into warm memory and
#              into a page just given back), UFFDIO_COPY, an mprotect pair and a futex
#              hand-off cost here, the steps the points are made of
#
#   src/dlm/bench/fault-breakdown.sh BUILD_DIR     (the dlm programs in BUILD_DIR/dlm)
# Environment:
#   OUT      results (default ./dlm-breakdown): <experiment>/<engine>-<rep>.jsonl, env.txt,
#            table.txt
#   REPS     runs per engine and experiment (default 3)
#   ENGINES  default "r3 r58 r77 uffd"
#   LAUNCH   the MPI launcher without the rank count, which is appended as "-n N"
#            (default: mpirun --oversubscribe --bind-to none).  Across nodes, one
#            memory rank per node, e.g.
#              LAUNCH="mpirun --hostfile H --map-by ppr:1:node --bind-to none -x OMP_WAIT_POLICY"
#              LAUNCH="srun --ntasks-per-node=1 --cpus-per-task=16"
#            Rank 0 (the first node) computes; nothing assumes one host: DLM's options go
#            on the command line, every time stamp is taken on rank 0, and the host probe
#            runs where rank 0 runs (through LAUNCH).
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: fault-breakdown.sh BUILD_DIR}
bin=$build/dlm
OUT=${OUT:-$PWD/dlm-breakdown}
REPS=${REPS:-3}
ENGINES=${ENGINES:-r3 r58 r77 uffd}
LAUNCH=${LAUNCH:-mpirun --oversubscribe --bind-to none}
for p in dlm-micro dlm-stencil dlm-timing-cost dlm-host-probe; do
  [ -x "$bin/$p" ] || { echo "fault-breakdown: no $bin/$p (build the dlm component first)" >&2; exit 2; }
done
case "$REPS" in ''|*[!0-9]*|0) echo "fault-breakdown: REPS=$REPS is not a positive count" >&2; exit 2;; esac
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=PASSIVE
timeout_s=${DLM_TIMEOUT:-60}

# The checks' quick sizes (reframe/dlm.py SIZES) and their --uffd-workers.
common=(--page-size 64K --uffd-workers 12 --timeout "$timeout_s")
micro=(--elements 1048576 --capacity 3M --mem-capacity 32M --threads 1 "${common[@]}")
stencil=(--nx 64 --ny 64 --capacity 4M --mem-capacity 8M --steps 8 --tblock 4 --ratios 0.5,1,2,4 --threads 1
         "${common[@]}")
overhead=(--elements 4194304 --capacity 3M --mem-capacity 64M --threads 1,1,1,1,1 "${common[@]}")

{
  echo "date: $(date -u)"; uname -r; nproc; echo "load: $(cat /proc/loadavg)"
  lscpu | grep -E 'Model name|^CPU\(s\)|Thread|Core|Socket|Hypervisor|MHz'
  echo "launch: $LAUNCH"; $LAUNCH --version 2>/dev/null | head -1
} >"$OUT/env.txt" 2>&1

# one EXPERIMENT ENGINE REP RANKS PROGRAM ARGS...: one MPI job, bounded (120 s).
one() {
  local exp=$1 engine=$2 rep=$3 ranks=$4
  shift 4
  mkdir -p "$OUT/$exp"
  timeout -k 5 120 $LAUNCH -n "$ranks" "$@" --engine "$engine" \
    >"$OUT/$exp/$engine-$rep.jsonl" 2>>"$OUT/$exp/$engine.log"
  local rc=$?
  [ $rc -eq 0 ] || echo "fault-breakdown: $exp $engine run $rep exited $rc (see $OUT/$exp/$engine.log)" >&2
}

for rep in $(seq 1 "$REPS"); do
  for e in $ENGINES; do
    echo "fault-breakdown: run $rep/$REPS, $e" >&2
    one micro "$e" "$rep" 2 "$bin/dlm-micro" "${micro[@]}" --fault-timing
    one micro-plain "$e" "$rep" 2 "$bin/dlm-micro" "${micro[@]}"
    one stencil "$e" "$rep" 4 "$bin/dlm-stencil" "${stencil[@]}" --fault-timing
    one stencil-plain "$e" "$rep" 4 "$bin/dlm-stencil" "${stencil[@]}"
    one overhead-on "$e" "$rep" 2 "$bin/dlm-micro" "${overhead[@]}" --fault-timing
    one overhead-off "$e" "$rep" 2 "$bin/dlm-micro" "${overhead[@]}"
  done
done
for p in timing-cost host-probe; do
  for rep in $(seq 1 "$REPS"); do
    timeout -k 5 120 $LAUNCH -n 1 "$bin/dlm-$p" >"$OUT/$p-$rep.jsonl" 2>>"$OUT/$p.log" ||
      echo "fault-breakdown: dlm-$p failed (see $OUT/$p.log)" >&2
  done
done
echo "load at the end: $(cat /proc/loadavg)" >>"$OUT/env.txt"
python3 "$here/breakdown.py" "$OUT" | tee "$OUT/table.txt"

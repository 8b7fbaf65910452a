#!/usr/bin/env bash
# vcuda on a GPU machine, end to end: one vcuda-server per GPU on loopback, the
# unmodified sample and vcuda-bench locally and through vcuda (keep-alive off and on),
# the himeno/umbench explicit-copy programs through vcuda where they were built, and
# the failure paths (no token, bad device, server killed mid-run).
#
#   device-run.sh BUILD_DIR OUT_DIR [QUICK=1]
#
# BUILD_DIR is a top-level build (src/) with vcuda (himeno, umbench optional).  Results:
# OUT_DIR/*.jsonl and *.log; a summary line per step on stdout, exit 1 if any step failed.
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
quick=${3:-0}
mkdir -p "$out"
lib="$build/vcuda/lib"
server="$build/vcuda/vcuda-server"
bench="$build/vcuda/vcuda-bench"
sample="$build/vcuda/vcuda-sample-vector-add"
fails=0
step() { # name, then the command; its stdout+stderr go to OUT/name.log
  local name=$1; shift
  local t0=$(date +%s%N)
  "$@" >"$out/$name.log" 2>&1
  local rc=$?
  printf '%-34s rc=%-3s %6d ms\n' "$name" "$rc" $((($(date +%s%N) - t0) / 1000000))
  return $rc
}
expect() { # name, expected rc, command...
  local name=$1 want=$2; shift 2
  step "$name" "$@"; local rc=$?
  [ "$rc" = "$want" ] || { echo "  FAILED: $name exited $rc, expected $want"; tail -5 "$out/$name.log"; fails=$((fails + 1)); }
}

export VCUDA_TOKEN="device-run-$RANDOM-$RANDOM"
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU') || ngpu=0
[ "$ngpu" -gt 0 ] || { echo "no GPU: nothing to run"; exit 77; }
base_port=$((20000 + RANDOM % 20000))
servers=""
pids=()
for ((g = 0; g < ngpu; g++)); do
  port=$((base_port + g))
  "$server" --device $g --listen 127.0.0.1:$port 2>"$out/server-$g.log" &
  pids+=($!)
  servers+="${servers:+,}127.0.0.1:$port"
done
for ((g = 0; g < ngpu; g++)); do # each server says when it listens
  for _ in $(seq 100); do grep -q listening "$out/server-$g.log" && break; sleep 0.1; done
done
export VCUDA_SERVERS=$servers
echo "servers: $VCUDA_SERVERS ($ngpu GPUs)"
remote=(env LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
preload=(env LD_PRELOAD="$lib/libcudart.so.$(ls "$lib" | sed -n 's/^libcudart\.so\.\([0-9]*\)$/\1/p')")

expect sample-local 0 "$sample"
expect sample-vcuda 0 "${remote[@]}" "$sample"
expect sample-vcuda-preload 0 "${preload[@]}" "$sample" 10000000

expect launch-errors-local 0 "$build/vcuda/vcuda-launch-errors"
expect launch-errors-vcuda 0 "${remote[@]}" "$build/vcuda/vcuda-launch-errors"
expect launch-errors-vcuda-sync 0 env VCUDA_LAUNCH=sync "${remote[@]}" "$build/vcuda/vcuda-launch-errors"

reps=50; [ "$quick" = 1 ] && reps=10
expect bench-local 0 "$bench" --reps $reps --no-intervals
expect bench-vcuda 0 "${remote[@]}" "$bench" --reps $reps
expect bench-vcuda-keepalive 0 env VCUDA_KEEPALIVE_MS=2 "${remote[@]}" "$bench" --reps $reps --max-devices 1 --large 8M
# UCX where this build has it (exit 77 and the reason otherwise)
step bench-vcuda-ucx "$build/vcuda/vcuda-run" --ucx --log-dir "$out/ucx" -- "$bench" --reps $reps --no-intervals
echo "  (rc 77: no UCX in this build: $(grep -o 'built without UCX' "$out/bench-vcuda-ucx.log" | head -1))"
for b in bench-local bench-vcuda bench-vcuda-keepalive bench-vcuda-ucx; do grep '^{' "$out/$b.log" >"$out/$b.jsonl"; done

if [ -x "$build/himeno/himeno-cuda" ]; then
  expect himeno-local 0 "$build/himeno/himeno-cuda" --size S --iterations 200 --alloc explicit --verify
  expect himeno-vcuda 0 "${remote[@]}" "$build/himeno/himeno-cuda" --size S --iterations 200 --alloc explicit --verify
fi
if [ -x "$build/umbench/umb-baseline" ]; then
  expect umb-baseline-vcuda 0 "${remote[@]}" "$build/umbench/umb-baseline" --size 256M --reps 5 --trials 1 --ops h2d,d2h
fi

# failure paths
expect server-no-token 2 env -u VCUDA_TOKEN "$server" --device 0 --listen 127.0.0.1:1
expect server-bad-device 77 "$server" --device 63 --listen 127.0.0.1:1
# a server killed mid-run: the client reports cudaErrorDevicesUnavailable, bounded
spare_port=$((base_port + 100))
"$server" --device 0 --listen 127.0.0.1:$spare_port 2>"$out/server-victim.log" &
victim=$!
for _ in $(seq 100); do grep -q listening "$out/server-victim.log" && break; sleep 0.1; done
( sleep 2; kill -9 $victim ) &
expect killed-server-mid-run 1 env VCUDA_SERVERS=127.0.0.1:$spare_port VCUDA_TIMEOUT_MS=2000 "${remote[@]}" \
  "$bench" --reps 100000 --no-intervals --max-bytes 4M
grep -E "lost|unavailable" "$out/killed-server-mid-run.log" | head -3
cat "$out"/launch-errors-*.log

for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
wait 2>/dev/null
grep -h "released\|exiting\|invalid" "$out"/server-*.log | sort | uniq -c | head -20
echo "device-run: $fails failed step(s)"
[ "$fails" = 0 ]

#!/usr/bin/env bash
# vcuda-server with several tenants on a GPU machine: what one client may do to the next.
#
#   tenancy-run.sh BUILD_DIR OUT_DIR [BASELINE_BUILD_DIR]
#
# BUILD_DIR is a vcuda build (cmake -S src/vcuda) with the CUDA samples and tests.
#   real-cubin     a real sm_90 cubin with one ELF header field patched, five ways: each
#                  refused by name, the server serving on (vcuda_server_test real_cubin)
#   device-state   two runs of one program on one server: each sees its own __device__ state
#   sticky-710     a device-side assert (710) in one client; the next clients get a
#                  working context (vector add, device-state)
#   long-kernel    a kernel of 3x VCUDA_TIMEOUT_MS, 64 MiB H2D behind it, a synchronize: ok
#   killed/stopped the server SIGKILLed / SIGSTOPped during that wait: the program fails,
#                  reported within VCUDA_TIMEOUT_MS of the signal
#   quota-global   a module of a few KiB declaring a 1 GiB __device__ array, 4 clients at
#                  once: refused under a 256 MiB quota with the free memory unchanged;
#                  without a quota, loaded (the free memory it takes, measured)
#   quota-stack    cudaLimitStackSize 64 KiB: refused under 256 MiB; without a quota,
#                  set (the memory it reserves, measured), and back to the default for the
#                  next client once the first has left
#   quota-local    (measured, not checked) a kernel with 64 KiB of local memory per thread
#                  under a 256 MiB quota: the free memory its launch takes (not charged)
#   quota-conns    8 clients of one tenant holding 64 MiB each under 256 MiB: 4 served;
#                  a tenant of MAX_CONNS 4 (--tenants): 4 of 8 connect
#   latency        1 KiB H2D and launch+synchronize, medians of 3000 calls, 3 runs each,
#                  local, through this build and (given) through BASELINE_BUILD_DIR
# Results: OUT_DIR/*.log and tenancy.jsonl; one line per step on stdout; exit 1 if any failed.
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
out=${2:?output dir}
base=${3:-}
mkdir -p "$out"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
lib=$build/lib server=$build/vcuda-server app=$build/vcuda-tenancy global=$build/vcuda-tenancy-global
export VCUDA_TOKEN="tenancy-$RANDOM-$RANDOM"
fails=0
note() { echo "$*"; }
check() { # name, condition result (0 ok)
  if [ "$2" = 0 ]; then note "ok   $1"; else note "FAIL $1"; fails=$((fails + 1)); fi
}
start_server() { # build, log, [server options] -> sets port, spid
  local b=$1 log=$2
  # shellcheck disable=SC2086 # options are words
  "$b/vcuda-server" --device 0 --listen 127.0.0.1:0 ${3:-} 2>"$log" &
  spid=$!
  port=""
  for _ in $(seq 200); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$log")
    [ -n "$port" ] && return 0
    sleep 0.05
  done
  return 1
}
remote() { env LD_LIBRARY_PATH="$1/lib" VCUDA_SERVERS=127.0.0.1:$port "${@:2}"; }

# patched cubins, against the real driver (empty stand-in directory)
nvcc -arch=sm_90 -cubin -o "$out/tenancy.cubin" "$here/samples/tenancy.cu" 2>"$out/nvcc.log"
"$build/tests/vcuda_server_test" real_cubin "$server" "" "$out/tenancy.cubin" >"$out/real-cubin.log" 2>&1
check real-cubin $?
grep '^{' "$out/real-cubin.log" >>"$out/tenancy.jsonl"

start_server "$build" "$out/server.log" || { echo "server did not start"; exit 1; }
remote "$build" "$app" device-state >"$out/device-state-1.log" 2>&1; r1=$?
remote "$build" "$app" device-state >"$out/device-state-2.log" 2>&1; r2=$?
check "device-state (two clients, each counter 1)" $((r1 + r2))
cat "$out"/device-state-*.log | grep '^{' >>"$out/tenancy.jsonl"

remote "$build" "$app" assert >"$out/assert.log" 2>&1
check "sticky-710 reported to its client" $?
sleep 0.5
remote "$build" "$build/vcuda-sample-vector-add" >"$out/after-710-vector-add.log" 2>&1; r1=$?
remote "$build" "$app" device-state >"$out/after-710-device-state.log" 2>&1; r2=$?
check "sticky-710: next clients get a working context" $((r1 + r2))
grep -h '^{' "$out/assert.log" "$out/after-710-device-state.log" >>"$out/tenancy.jsonl"
grep -E "rebuilt|unusable" "$out/server.log"

remote "$build" env VCUDA_TIMEOUT_MS=2000 "$app" spin 6000 >"$out/long-kernel.log" 2>&1
check "long kernel (6 s, VCUDA_TIMEOUT_MS=2000) + 64 MiB H2D behind it + synchronize" $?
grep '^{' "$out/long-kernel.log" >>"$out/tenancy.jsonl"
kill -TERM $spid; wait $spid 2>/dev/null

for sig in KILL STOP; do
  start_server "$build" "$out/server-$sig.log" || { echo "server did not start"; exit 1; }
  # the supervisor and its serving process (SIGKILL alone would take both)
  ( sleep 3; kill -$sig $(pgrep -P $spid) $spid; date +%s%N >"$out/signal-$sig.t" ) &
  sigpid=$!
  remote "$build" env VCUDA_TIMEOUT_MS=2000 "$app" spin 20000 >"$out/lost-$sig.log" 2>&1; rc=$?
  t1=$(date +%s%N); wait $sigpid # (not the stopped server)
  ms=$(( (t1 - $(cat "$out/signal-$sig.t")) / 1000000 ))
  echo "{\"bench\":\"vcuda-tenancy\",\"mode\":\"server-$sig-during-wait\",\"rc\":$rc,\"reported_after_ms\":$ms,\"timeout_ms\":2000}" >>"$out/tenancy.jsonl"
  [ "$rc" != 0 ] && [ "$ms" -lt 3000 ]; check "server SIG$sig during a long wait: reported after $ms ms (timeout 2000)" $?
  kill -CONT $(pgrep -P $spid) $spid 2>/dev/null; kill -KILL $spid 2>/dev/null; wait $spid 2>/dev/null
done

# --isolation context: the same checks with a context per client, and what it costs
start_server "$build" "$out/server-ctx.log" "--isolation context" || { echo "server did not start"; exit 1; }
remote "$build" "$app" device-state >"$out/ctx-device-state.log" 2>&1; r1=$?
remote "$build" "$app" assert >"$out/ctx-assert.log" 2>&1; r2=$?
remote "$build" "$app" device-state >"$out/ctx-after-710.log" 2>&1; r3=$?
check "isolation context: device-state, 710, next client works" $((r1 + r2 + r3))
t0=$(date +%s%N); remote "$build" "$app" device-state >/dev/null 2>&1; t1=$(date +%s%N)
echo "{\"bench\":\"vcuda-tenancy\",\"mode\":\"client-run-ms\",\"isolation\":\"context\",\"ms\":$(( (t1 - t0) / 1000000 ))}" >>"$out/tenancy.jsonl"
kill -TERM $spid; wait $spid 2>/dev/null

# tenant quotas: what clients make the GPU hold, counted against their tenant
jq_field() { sed -n "s/.*\"$2\":\"\{0,1\}\([^,\"}]*\).*/\1/p" "$1" | head -1; }
for quota in 256 0; do
  start_server "$build" "$out/server-quota-$quota.log" "--client-mem-mib $quota" || { echo "server did not start"; exit 1; }
  remote "$build" "$app" limits >"$out/quota-$quota-before.log" 2>&1
  pids=()
  for i in 1 2 3 4; do remote "$build" "$global" 4000 >"$out/quota-$quota-global-$i.log" 2>&1 & pids+=($!); done
  sleep 2 # (all four hold what they got)
  remote "$build" "$app" limits >"$out/quota-$quota-during.log" 2>&1
  ok=0; for p in "${pids[@]}"; do wait "$p" && ok=$((ok + 1)); done
  f0=$(jq_field "$out/quota-$quota-before.log" free_mib) f1=$(jq_field "$out/quota-$quota-during.log" free_mib)
  echo "{\"bench\":\"vcuda-tenancy\",\"mode\":\"quota-global\",\"quota_mib\":$quota,\"clients\":4,\"loaded\":$ok,\"free_before_mib\":${f0:-null},\"free_during_mib\":${f1:-null}}" >>"$out/tenancy.jsonl"
  if [ "$quota" = 256 ]; then
    n=$(grep -l "cudaErrorMemoryAllocation" "$out"/quota-256-global-*.log | wc -l)
    [ "$ok" = 0 ] && [ "$n" = 4 ] && [ -n "$f0" ] && [ $((f0 - f1)) -lt 512 ]
    check "quota-global: 4 x 1 GiB __device__ under 256 MiB: all refused, free $f0 -> $f1 MiB" $?
  else
    [ "$ok" = 4 ]; check "quota-global: 4 x 1 GiB __device__ without a quota: loaded, free $f0 -> $f1 MiB" $?
  fi
  sleep 0.5 # (the server lets those sessions go: a limit is set by the context's only client)
  remote "$build" "$app" limit-stack 64 >"$out/quota-$quota-stack.log" 2>&1; rs=$?
  sleep 0.5 # (the server lets the session go)
  remote "$build" "$app" limits >"$out/quota-$quota-after.log" 2>&1
  grep -h '^{' "$out/quota-$quota-stack.log" "$out/quota-$quota-after.log" | sed "s/}\$/,\"quota_mib\":$quota}/" >>"$out/tenancy.jsonl"
  s0=$(jq_field "$out/quota-$quota-before.log" stack) s2=$(jq_field "$out/quota-$quota-after.log" stack)
  f2=$(jq_field "$out/quota-$quota-after.log" free_mib)
  if [ "$quota" = 256 ]; then
    [ "$rs" != 0 ] && grep -q cudaErrorMemoryAllocation "$out/quota-$quota-stack.log"
    check "quota-stack: 64 KiB stack under 256 MiB refused" $?
  else
    [ "$rs" = 0 ]; check "quota-stack: 64 KiB stack without a quota set ($(jq_field "$out/quota-0-stack.log" free_before_mib) -> $(jq_field "$out/quota-0-stack.log" free_after_mib) MiB free)" $?
  fi
  [ -n "$s0" ] && [ "$s2" = "$s0" ] && [ -n "$f2" ] && [ $((f0 - f2)) -lt 512 ]
  check "quota-stack: the next client finds stack $s2 (was $s0), free $f2 MiB (was $f0)" $?
  if [ "$quota" = 256 ]; then
    remote "$build" "$app" local >"$out/quota-local.log" 2>&1
    grep -h '^{' "$out/quota-local.log" | sed 's/}$/,"quota_mib":256,"charged":false}/' >>"$out/tenancy.jsonl"
    note "info quota-local: $(grep -h '^{' "$out/quota-local.log")"
    sleep 0.5
    pids=()
    for i in $(seq 8); do remote "$build" "$app" hold 64 3000 >"$out/quota-conns-$i.log" 2>&1 & pids+=($!); done
    ok=0; for p in "${pids[@]}"; do wait "$p" && ok=$((ok + 1)); done
    echo "{\"bench\":\"vcuda-tenancy\",\"mode\":\"quota-conns\",\"quota_mib\":256,\"clients\":8,\"mib_each\":64,\"served\":$ok}" >>"$out/tenancy.jsonl"
    [ "$ok" = 4 ]; check "quota-conns: 8 connections of one tenant x 64 MiB under 256 MiB: $ok served (4 expected)" $?
  fi
  kill -TERM $spid; wait $spid 2>/dev/null
done
tdir=$(mktemp -d); chmod 700 "$tdir"
(umask 077; echo "capped 0 4 $VCUDA_TOKEN" >"$tdir/tenants")
start_server "$build" "$out/server-tenants.log" "--tenants $tdir/tenants" || { echo "server did not start"; exit 1; }
pids=()
for i in $(seq 8); do remote "$build" env VCUDA_TENANT=capped "$app" hold 64 3000 >"$out/tenant-conns-$i.log" 2>&1 & pids+=($!); done
ok=0; for p in "${pids[@]}"; do wait "$p" && ok=$((ok + 1)); done
refused=$(grep -c "tenant capped: connection limit 4 reached" "$out/server-tenants.log")
echo "{\"bench\":\"vcuda-tenancy\",\"mode\":\"tenant-conns\",\"max_conns\":4,\"clients\":8,\"served\":$ok,\"refused_by_name\":$refused}" >>"$out/tenancy.jsonl"
[ "$ok" = 4 ] && [ "$refused" = 4 ]; check "tenant-conns: MAX_CONNS 4, 8 clients at once: $ok served, $refused refused by name" $?
kill -TERM $spid; wait $spid 2>/dev/null
rm -rf "$tdir"

# per-call latency: local, this build (shared, context), baseline (alternating, 3 runs each)
for rep in 1 2 3; do
  "$app" latency 3000 | sed 's/}$/,"via":"local"}/' >>"$out/tenancy.jsonl"
  for cfg in "$build|vcuda|" "$build|vcuda-isolation-context|--isolation context" ${base:+"$base|vcuda-baseline|"}; do
    IFS='|' read -r b via opts <<<"$cfg"
    start_server "$b" "$out/server-lat.log" "$opts" || continue
    t0=$(date +%s%N); remote "$b" "$app" device-state >/dev/null 2>&1; t1=$(date +%s%N)
    echo "{\"bench\":\"vcuda-tenancy\",\"mode\":\"client-run-ms\",\"via\":\"$via\",\"ms\":$(( (t1 - t0) / 1000000 ))}" >>"$out/tenancy.jsonl"
    remote "$b" "$app" latency 3000 | sed "s/}\$/,\"via\":\"$via\"}/" >>"$out/tenancy.jsonl"
    kill -TERM $spid; wait $spid 2>/dev/null
  done
done
grep -h '^{' "$out"/lost-*.log >>"$out/tenancy.jsonl"
cat "$out/tenancy.jsonl"
echo "tenancy-run: $fails failed step(s)"
[ "$fails" = 0 ]

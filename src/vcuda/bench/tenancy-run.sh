#!/usr/bin/env bash
# vcuda-server with several clients and tenants on a GPU machine: what one client may do
# to another, in each isolation mode of the server.
#
#   tenancy-run.sh BUILD_DIR OUT_DIR [MODE] [BASELINE_BUILD_DIR]
#
# MODE: shared, context, process (the server's --isolation) or all (the default).
# BUILD_DIR is a vcuda build (cmake -S src/vcuda) with the CUDA samples and tests.
# The servers serve tenants from a tenants file the script writes (mode 600, --tenants):
#   A, B      no quota, no connection limit, each its own secret: clients A and B
#   quota     a 256 MiB quota
#   capped    MAX_CONNS 4
# TENANCY_SERVER_OPTS (server options, default "--tenants FILE") and TENANCY_ENV_A /
# TENANCY_ENV_B (each client's environment, default tenant A's and tenant B's
# VCUDA_TENANT and VCUDA_TOKEN), set together, replace what clients A and B are; the
# quota steps always use the script's own tenants.
# Once:
#   real-cubin     a real sm_90 cubin with one ELF header field patched, five ways: each
#                  refused by name, the server serving on (vcuda_server_test real_cubin)
# For each MODE:
#   device-state   a run of one program as A, then as B: each sees its own __device__ state
#   cross-client   client A fills 256 MiB and waits; client B's kernel reads 4 KiB at A's
#                  pointer and overwrites them; then A checks every word and runs a kernel.
#                  Expected where A and B share a serving process (shared and context: all
#                  tenants in one process): B reads A's words and A finds them changed (one
#                  address space: what the docs say these modes do not protect).  Expected
#                  for the two tenants under process: two serving processes (their pids
#                  from the server's log), B's kernel faults (cudaErrorIllegalAddress) and
#                  only B's serving process ends, A is intact and runs on
#   (process)      cross-client-one-tenant: the same with A and B both tenant A: one
#                  serving process, B reads A (clients of a tenant share its process)
#   two-servers    the same with A and B on two servers (two processes) on the same GPU:
#                  B cannot read A, A intact: the process boundary that process mode uses
#   sticky-710     a device-side assert in B; the next clients (A) get a working context
#   long-kernel    a kernel of 3x VCUDA_TIMEOUT_MS, 64 MiB H2D behind it, a synchronize: ok
#   killed/stopped the whole server SIGKILLed / SIGSTOPped during that wait: the program
#                  fails, reported within VCUDA_TIMEOUT_MS of the signal
#   (process)      loop-no-driver: the network-loop process (and the supervisor above it)
#                  has no libcuda mapped, the tenant's serving process has;
#                  serving-killed: the serving process alone SIGKILLed during a client's
#                  wait: that client fails at once, the loop serves the next client with
#                  a fresh serving process
#   quota-global   a module of a few KiB declaring a 1 GiB __device__ array, 4 clients of
#                  tenant quota at once: refused under its 256 MiB with the free memory
#                  unchanged; 4 clients of tenant A (no quota): loaded (the memory taken)
#   quota-stack    cudaLimitStackSize 64 KiB: refused for tenant quota; set for tenant A
#                  (the memory it reserves, measured), and back to what it was for the
#                  tenant's next client once the first has left (with process: in the
#                  tenant's serving process, which lingers)
#   quota-local    (measured, not checked) a kernel with 64 KiB of local memory per thread
#                  as tenant quota: the free memory its launch takes (not charged)
#   quota-conns    8 clients of tenant quota holding 64 MiB each: 4 served
#   tenant-conns   8 clients of tenant capped (MAX_CONNS 4) at once: 4 served, 4 refused
#                  by name
# Then latency: 1 KiB H2D and launch + synchronize, medians of 3000 calls (vcuda-tenancy)
# and vcuda-bench's h2d_1k_time / d2h_1k_time / launch_sync_time, 3 rounds, each round
# local, then each mode asked (and shared, always) and, given, BASELINE_BUILD_DIR's server
# (shared, its single token); with the time of a whole short client run, a server's
# first and second.
# Output: JSON lines on stdout (also OUT_DIR/tenancy.jsonl), progress on stderr, logs in
# OUT_DIR; exit 1 if a check failed, 77 without a GPU.
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
out=${2:?output dir}
modes=${3:-all}
base=${4:-}
case $modes in
  all) modes="shared context process" ;;
  shared | context | process) ;;
  *) echo "tenancy-run.sh: MODE $modes: expected shared, context, process or all" >&2; exit 2 ;;
esac
mkdir -p "$out"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
app=$build/vcuda-tenancy bench=$build/vcuda-bench global=$build/vcuda-tenancy-global
jsonl=$out/tenancy.jsonl
: >"$jsonl"
# (a baseline server, which knows no tenants, serves the single token)
export VCUDA_TOKEN=${VCUDA_TOKEN:-tenancy-$RANDOM-$RANDOM-$RANDOM}
secret() { echo "tenancy-$1-$RANDOM$RANDOM-$RANDOM$RANDOM-$RANDOM$RANDOM"; }
sec_a=$(secret a) sec_b=$(secret b) sec_quota=$(secret quota) sec_capped=$(secret capped)
tdir=$(mktemp -d)
tfile=$tdir/tenants
(
  umask 077
  printf '# NAME MEM_MIB MAX_CONNS SECRET\nA 0 0 %s\nB 0 0 %s\nquota 256 0 %s\ncapped 0 4 %s\n' \
    "$sec_a" "$sec_b" "$sec_quota" "$sec_capped" >"$tfile"
)
chmod 600 "$tfile"
server_opts=${TENANCY_SERVER_OPTS-"--tenants $tfile"}
env_a=${TENANCY_ENV_A-"VCUDA_TENANT=A VCUDA_TOKEN=$sec_a"}
env_b=${TENANCY_ENV_B-"VCUDA_TENANT=B VCUDA_TOKEN=$sec_b"}
two_tenants=0
[ -n "$env_b" ] && [ "$env_a" != "$env_b" ] && two_tenants=1
fails=0
servers=()

note() { echo "$*" >&2; }
emit() { echo "$1" | tee -a "$jsonl"; }
ms_now() { echo $(($(date +%s%N) / 1000000)); }
# The JSON lines of files (or stdin), with KEY=VALUE fields added (numbers stay numbers),
# to stdout and the jsonl.
tag_json() {
  python3 -c '
import json, sys
extra = {}
for kv in sys.argv[1:]:
    k, v = kv.split("=", 1)
    try:
        extra[k] = int(v)
    except ValueError:
        extra[k] = v
for line in sys.stdin:
    if line.startswith("{"):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        r.update(extra)
        print(json.dumps(r, separators=(",", ":")))
' "$@" | tee -a "$jsonl"
}
# a sample's JSON lines from files, tagged with the mode and path
tag() { cat "$@" | tag_json "isolation=$cur" "via=$via"; }
# check name, 0 = ok, then extra JSON fields
record() {
  local b=true
  [ "$2" = 0 ] || { b=false; fails=$((fails + 1)); }
  emit "{\"bench\":\"vcuda-tenancy\",\"check\":\"$1\",\"isolation\":\"$cur\",\"ok\":$b${3:+,$3}}"
  note "$([ $b = true ] && echo 'ok  ' || echo 'FAIL') [$cur] $1"
}
cleanup() {
  for p in "${servers[@]}"; do stop_server "$p"; done
  rm -rf "$tdir"
}
source "$(dirname "${BASH_SOURCE[0]}")/vcuda-server-start.sh"
stop_server() { vcuda_stop_group "$1" 15; }
trap cleanup EXIT
trap 'exit 143' TERM INT
# build dir, log, then server options -> spid, port
start_server() {
  local b=$1 log=$2 i
  shift 2
  : >"$log"
  setsid "$b/vcuda-server" --device 0 --listen 127.0.0.1:0 "$@" 2>"$log" &
  spid=$! port=""
  servers+=("$spid")
  for ((i = 0; i < 400; i++)); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$log" | head -1)
    [ -n "$port" ] && return 0
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.05
  done
  note "server did not start: $(tail -2 "$log")"
  return 1
}
# the mode's server: --isolation and the server options (TENANCY_SERVER_OPTS)
start_mode() {
  # shellcheck disable=SC2086 # options are words
  start_server "$build" "$1" --isolation "$cur" $server_opts
}
# port, seconds, then the program through vcuda, as client A (TENANCY_ENV_A) or B
remote() {
  local p=$1 secs=$2
  shift 2
  # shellcheck disable=SC2086 # K=V words
  timeout -k 5 "$secs" env LD_LIBRARY_PATH="$build/lib" VCUDA_SERVERS=127.0.0.1:$p $env_a "$@"
}
remote_b() {
  local p=$1 secs=$2
  shift 2
  # shellcheck disable=SC2086
  timeout -k 5 "$secs" env LD_LIBRARY_PATH="$build/lib" VCUDA_SERVERS=127.0.0.1:$p $env_b "$@"
}
# tenant, port, seconds, then the program through vcuda as one of the script's tenants
as_tenant() {
  local t=$1 p=$2 secs=$3 sec
  shift 3
  case $t in A) sec=$sec_a ;; B) sec=$sec_b ;; quota) sec=$sec_quota ;; capped) sec=$sec_capped ;; esac
  timeout -k 5 "$secs" env LD_LIBRARY_PATH="$build/lib" VCUDA_SERVERS="127.0.0.1:$p" VCUDA_TENANT="$t" VCUDA_TOKEN="$sec" "$@"
}
# 8 clients of TENANT at once, each asking 64 MiB for 3 s (logs OUT/NAME-MODE-i.log):
# prints how many were served.
eight_clients() {
  local tenant=$1 name=$2 i p ok=0 pids=()
  for i in $(seq 8); do
    as_tenant "$tenant" "$port" 60 "$app" alloc 64 3000 >"$out/$name-$cur-$i.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" && ok=$((ok + 1)); done
  echo "$ok"
}
field() { sed -n "s/.*\"$1\":\"\{0,1\}\([^\",}]*\).*/\1/p" "$2" | head -1; }

if ! nvidia-smi -L >/dev/null 2>&1; then
  emit '{"bench":"vcuda-tenancy","status":"unsupported","reason":"no GPU (nvidia-smi -L failed)"}'
  exit 77
fi
nvidia-smi -L | head -1 >"$out/gpu.txt"
cur=none via=vcuda

# ---- patched cubins, against the real driver (empty stand-in directory) ---------------
if [ -x "$build/tests/vcuda_server_test" ]; then
  nvcc -arch=sm_90 -cubin -o "$out/tenancy.cubin" "$here/samples/tenancy.cu" 2>"$out/nvcc.log"
  "$build/tests/vcuda_server_test" real_cubin "$build/vcuda-server" "" "$out/tenancy.cubin" >"$out/real-cubin.log" 2>&1
  rc=$?
  tag "$out/real-cubin.log"
  record real-cubin $rc
else
  note "real-cubin skipped: $build/tests/vcuda_server_test not built"
fi

# A holds, B peeks at A's pointer and overwrites it, A checks.  name, port A, port B,
# 1 if A and B are in one serving process, then B's runner (remote_b unless given).
cross() {
  local name=$1 pa=$2 pb=$3 shared_proc=$4 run_b=${5:-remote_b}
  local go=$out/$1-$cur.go la=$out/$1-$cur-a.log lb=$out/$1-$cur-b.log log=$out/server-$cur.log
  local ptr="" seed="" i ra rb
  rm -f "$go"
  remote "$pa" 400 "$app" hold "$go" >"$la" 2>&1 &
  local apid=$!
  for ((i = 0; i < 1200; i++)); do
    ptr=$(field ptr "$la")
    [ -n "$ptr" ] && break
    kill -0 "$apid" 2>/dev/null || break
    sleep 0.05
  done
  seed=$(field seed "$la")
  if [ -z "$ptr" ] || [ -z "$seed" ]; then
    touch "$go"
    wait "$apid"
    record "$name" 1 "\"reason\":\"client A did not report its pointer\""
    return
  fi
  local ended_b0 ended_a0
  ended_b0=$(grep -c 'tenant B: serving process [0-9]* ended after a sticky error' "$log")
  ended_a0=$(grep -c 'tenant A: serving process [0-9]* ended after a sticky error' "$log")
  "$run_b" "$pb" 60 "$app" peek "$ptr" "$seed" write >"$lb" 2>&1
  rb=$?
  touch "$go"
  wait "$apid"
  ra=$?
  tag "$la" "$lb"
  local read_other sync intact
  read_other=$(field read_other "$lb") sync=$(field sync "$lb") intact=$(field intact "$la")
  local extra
  extra="\"same_process\":$([ "$shared_proc" = 1 ] && echo true || echo false),\"b_rc\":$rb,\"b_sync\":\"${sync:-none}\",\"b_words_of_a\":$(field words_of_other "$lb" | grep . || echo null),\"a_rc\":$ra,\"a_intact\":${intact:-null}"
  if [ "$shared_proc" = 1 ]; then # the documented limit: B reads A and overwrites it
    [ $rb = 0 ] && [ "$read_other" = true ] && [ "$intact" = false ]
  elif [ "$cur" = process ] && [ "$pa" = "$pb" ] && [ "$run_b" = remote_b ] && [ -z "${TENANCY_ENV_B+set}" ]; then
    # the script's tenants A and B under process: a serving process each (from the log),
    # B's kernel faults and ends B's serving process alone; A intact, runs on
    sleep 0.5 # (the loop logs a serving process's end at its next turn)
    local pid_a pid_b ended_a ended_b
    pid_a=$(sed -n 's/.*tenant A: serving process \([0-9]*\) started.*/\1/p' "$log" | tail -1)
    pid_b=$(sed -n 's/.*tenant B: serving process \([0-9]*\) started.*/\1/p' "$log" | tail -1)
    ended_a=$(($(grep -c 'tenant A: serving process [0-9]* ended after a sticky error' "$log") - ended_a0))
    ended_b=$(($(grep -c 'tenant B: serving process [0-9]* ended after a sticky error' "$log") - ended_b0))
    extra="$extra,\"a_serving_pid\":${pid_a:-null},\"b_serving_pid\":${pid_b:-null},\"a_process_ended\":$ended_a,\"b_process_ended\":$ended_b"
    [ $rb = 0 ] && [ "$sync" = cudaErrorIllegalAddress ] && [ "$read_other" = false ] && [ $ra = 0 ] &&
      [ "$intact" = true ] && [ -n "$pid_a" ] && [ -n "$pid_b" ] && [ "$pid_a" != "$pid_b" ] &&
      [ "$ended_b" -ge 1 ] && [ "$ended_a" = 0 ]
  else # B cannot reach A; A's data and context are fine
    [ $rb = 0 ] && [ "$read_other" = false ] && [ $ra = 0 ] && [ "$intact" = true ]
  fi
  record "$name" $? "$extra"
}
# Quotas from the script's tenants file, on a server of this mode: counted for a tenant
# wherever its connections are served (with process: in its own serving process).
quota_steps() {
  local log=$out/server-quota-$cur.log t qm i p ok n
  start_server "$build" "$log" --isolation "$cur" --tenants "$tfile" || { record quota-server 1; return; }
  for t in quota A; do
    qm=0
    [ $t = quota ] && qm=256
    local pre=$out/quota-$cur-$t
    as_tenant $t "$port" 60 "$app" limits >"$pre-before.log" 2>&1
    local pids=()
    for i in 1 2 3 4; do
      as_tenant $t "$port" 120 "$global" 4000 >"$pre-global-$i.log" 2>&1 &
      pids+=($!)
    done
    sleep 2 # (all four hold what they got)
    as_tenant $t "$port" 60 "$app" limits >"$pre-during.log" 2>&1
    ok=0
    for p in "${pids[@]}"; do wait "$p" && ok=$((ok + 1)); done
    local f0 f1 f2 s0 s2
    f0=$(field free_mib "$pre-before.log") f1=$(field free_mib "$pre-during.log")
    emit "{\"bench\":\"vcuda-tenancy\",\"mode\":\"quota-global\",\"isolation\":\"$cur\",\"tenant\":\"$t\",\"quota_mib\":$qm,\"clients\":4,\"loaded\":$ok,\"free_before_mib\":${f0:-null},\"free_during_mib\":${f1:-null}}"
    if [ $t = quota ]; then
      n=$(grep -l "cudaErrorMemoryAllocation" "$pre"-global-*.log | wc -l)
      [ "$ok" = 0 ] && [ "$n" = 4 ] && [ -n "$f0" ] && [ -n "$f1" ] && [ $((f0 - f1)) -lt 512 ]
      record quota-global-refused $? "\"tenant\":\"$t\",\"refused_by_name\":$n,\"free_before_mib\":${f0:-null},\"free_during_mib\":${f1:-null}"
    else
      [ "$ok" = 4 ]
      record quota-global-unlimited $? "\"tenant\":\"$t\",\"loaded\":$ok,\"free_before_mib\":${f0:-null},\"free_during_mib\":${f1:-null}"
    fi
    sleep 0.5 # (the server lets those sessions go: a limit is set by the context's only client)
    as_tenant $t "$port" 60 "$app" limit-stack 64 >"$pre-stack.log" 2>&1
    local rs=$?
    sleep 0.5 # (the session goes, and with it the tenant's limits)
    as_tenant $t "$port" 60 "$app" limits >"$pre-after.log" 2>&1
    cat "$pre-stack.log" "$pre-after.log" | tag_json "isolation=$cur" "tenant=$t" "quota_mib=$qm"
    s0=$(field stack "$pre-before.log") s2=$(field stack "$pre-after.log") f2=$(field free_mib "$pre-after.log")
    if [ $t = quota ]; then
      [ "$rs" != 0 ] && grep -q cudaErrorMemoryAllocation "$pre-stack.log"
      record quota-stack-refused $? "\"tenant\":\"$t\""
    else
      [ "$rs" = 0 ]
      record quota-stack-unlimited $? "\"tenant\":\"$t\",\"free_before_mib\":$(field free_before_mib "$pre-stack.log" | grep . || echo null),\"free_after_mib\":$(field free_after_mib "$pre-stack.log" | grep . || echo null)"
    fi
    [ -n "$s0" ] && [ "$s2" = "$s0" ] && [ -n "$f2" ] && [ $((f0 - f2)) -lt 512 ]
    record "limits-restored-$t" $? "\"tenant\":\"$t\",\"stack_before\":${s0:-null},\"stack_after\":${s2:-null},\"free_before_mib\":${f0:-null},\"free_after_mib\":${f2:-null}"
  done
  as_tenant quota "$port" 60 "$app" local >"$out/quota-local-$cur.log" 2>&1
  tag_json "isolation=$cur" "tenant=quota" "quota_mib=256" "charged=false" <"$out/quota-local-$cur.log"
  sleep 0.5
  ok=$(eight_clients quota quota-conns)
  [ "$ok" = 4 ]
  record quota-conns $? "\"tenant\":\"quota\",\"quota_mib\":256,\"clients\":8,\"mib_each\":64,\"served\":$ok"
  ok=$(eight_clients capped tenant-conns)
  n=$(grep -c "tenant capped: connection limit 4 reached" "$log")
  [ "$ok" = 4 ] && [ "$n" = 4 ]
  record tenant-conns $? "\"tenant\":\"capped\",\"max_conns\":4,\"clients\":8,\"served\":$ok,\"refused_by_name\":$n"
  stop_server "$spid"
}

for cur in $modes; do
  via=vcuda
  note "---- --isolation $cur"
  start_mode "$out/server-$cur.log" || { record server-start 1; continue; }
  remote "$port" 60 "$app" device-state >"$out/device-state-$cur-1.log" 2>&1; r1=$?
  remote_b "$port" 60 "$app" device-state >"$out/device-state-$cur-2.log" 2>&1; r2=$?
  tag "$out"/device-state-"$cur"-*.log
  record device-state $((r1 + r2))

  same=1
  [ "$cur" = process ] && [ $two_tenants = 1 ] && same=0
  cross cross-client "$port" "$port" $same
  # (B as client A's tenant: A's serving process)
  [ "$cur" = process ] && cross cross-client-one-tenant "$port" "$port" 1 remote

  if [ "$cur" = process ]; then
    # the loop process never loads the driver; a client's serving process does
    remote "$port" 60 "$app" spin 3000 >"$out/spin-maps.log" 2>&1 &
    cpid=$!
    sleep 1.5
    # (the server's first process supervises the network loop, its child; the tenants'
    # serving processes are the loop's children)
    loop=$(pgrep -P "$spid" | head -1)
    kids=$(pgrep -P "$loop" | tr '\n' ' ')
    loop_maps=$(cat "/proc/$spid/maps" "/proc/$loop/maps" | grep -c libcuda)
    kid_maps=0
    for k in $kids; do
      n=$(grep -c libcuda "/proc/$k/maps" 2>/dev/null)
      kid_maps=$((kid_maps + ${n:-0}))
    done
    wait $cpid
    [ "$loop_maps" = 0 ] && [ "$kid_maps" -gt 0 ]
    record loop-no-driver $? "\"supervisor_pid\":$spid,\"loop_pid\":$loop,\"serving_pids\":\"${kids% }\",\"loop_libcuda_maps\":$loop_maps,\"serving_libcuda_maps\":$kid_maps"
  fi

  remote_b "$port" 60 "$app" assert >"$out/assert-$cur.log" 2>&1; ra=$?
  sleep 0.5
  remote "$port" 60 "$build/vcuda-sample-vector-add" >"$out/after-710-vector-add-$cur.log" 2>&1; r1=$?
  remote "$port" 60 "$app" device-state >"$out/after-710-device-state-$cur.log" 2>&1; r2=$?
  tag "$out/assert-$cur.log" "$out/after-710-device-state-$cur.log"
  alive=0
  kill -0 "$spid" 2>/dev/null || alive=1
  restarts=$(grep -c 'starting a fresh' "$out/server-$cur.log")
  ended=$(grep -c 'ended after a sticky error' "$out/server-$cur.log")
  ok=$((ra + r1 + r2 + alive))
  [ "$cur" = process ] && { [ "$restarts" = 0 ] && [ "$ended" -ge 1 ] || ok=1; }
  record sticky-710 $ok "\"rc_assert\":$ra,\"rc_next_vector_add\":$r1,\"rc_next_device_state\":$r2,\"supervisor_restarts\":$restarts,\"serving_process_ended\":$ended"

  remote "$port" 60 env VCUDA_TIMEOUT_MS=2000 "$app" spin 6000 >"$out/long-kernel-$cur.log" 2>&1; rc=$?
  el=$(field elapsed_ms "$out/long-kernel-$cur.log")
  tag "$out/long-kernel-$cur.log"
  [ $rc = 0 ] && [ "${el:-0}" -ge 6000 ]
  record long-kernel $? "\"kernel_ms\":6000,\"elapsed_ms\":${el:-null},\"timeout_ms\":2000"

  if [ "$cur" = process ]; then
    # the serving process alone killed during a client's wait: that client fails at once,
    # the loop serves on with a fresh serving process
    (sleep 3; kill -KILL $(pgrep -P "$(pgrep -P "$spid" | head -1)"); ms_now >"$out/serving-killed.t") &
    sigpid=$!
    remote "$port" 40 env VCUDA_TIMEOUT_MS=2000 "$app" spin 20000 >"$out/serving-killed.log" 2>&1; rc=$?
    t1=$(ms_now)
    wait $sigpid
    ms=$((t1 - $(cat "$out/serving-killed.t")))
    sleep 0.5
    remote "$port" 60 "$app" device-state >"$out/after-kill-device-state.log" 2>&1; rn=$?
    killed=$(grep -c 'serving process [0-9]* was killed by SIGKILL' "$out/server-$cur.log")
    [ $rc != 0 ] && [ $ms -lt 2000 ] && [ $rn = 0 ] && [ "$killed" -ge 1 ] && kill -0 "$spid" 2>/dev/null
    record serving-killed $? "\"rc\":$rc,\"reported_after_ms\":$ms,\"rc_next_client\":$rn,\"loop_logged_kill\":$killed"
  fi

  # A and B on two servers of this mode: two processes
  p1=$port s1=$spid
  if start_mode "$out/server-$cur-second.log"; then
    cross two-servers "$p1" "$port" 0
    stop_server "$spid"
  else
    record two-servers 1 "\"reason\":\"second server did not start\""
  fi
  stop_server "$s1"

  for sig in KILL STOP; do
    start_mode "$out/server-$cur-$sig.log" || { record "server-$sig-during-wait" 1; continue; }
    (sleep 3; kill -$sig -- "-$spid"; ms_now >"$out/signal-$cur-$sig.t") &
    sigpid=$!
    remote "$port" 40 env VCUDA_TIMEOUT_MS=2000 "$app" spin 20000 >"$out/lost-$cur-$sig.log" 2>&1; rc=$?
    t1=$(ms_now)
    wait $sigpid
    ms=$((t1 - $(cat "$out/signal-$cur-$sig.t")))
    [ "$rc" != 0 ] && [ "$ms" -lt 3000 ]
    record "server-$sig-during-wait" $? "\"rc\":$rc,\"reported_after_ms\":$ms,\"timeout_ms\":2000"
    stop_server "$spid"
  done

  quota_steps
done

# ---- latency: every mode asked, shared always, baseline; 3 rounds ---------------------
lat_modes=$modes
case " $modes " in *" shared "*) ;; *) lat_modes="shared $modes" ;; esac
bench_args=(--reps 50 --no-intervals --max-bytes 8K --large 1M --large-reps 1 --max-devices 1)
# vcuda-bench's per-call metrics of a log, tagged
bench_lines() { grep -hE '"metric":"(h2d_1k_time|d2h_1k_time|launch_sync_time)"' "$1" | tag_json "isolation=$cur" "via=$via" "round=$rep"; }
for rep in 1 2 3; do
  cur=none via=local
  timeout -k 5 120 "$app" latency 3000 >"$out/lat-local-$rep.log" 2>&1
  timeout -k 5 120 "$bench" "${bench_args[@]}" >"$out/bench-local-$rep.log" 2>&1
  tag_json "isolation=$cur" "via=$via" "round=$rep" <"$out/lat-local-$rep.log"
  bench_lines "$out/bench-local-$rep.log"
  for cfg in $lat_modes ${base:+baseline}; do
    # shellcheck disable=SC2206 # options are words
    b=$build cur=$cfg via=vcuda opts=(--isolation "$cfg" $server_opts) who=$env_a
    [ "$cfg" = baseline ] && b=$base cur=shared via=vcuda-baseline opts=() who=""
    start_server "$b" "$out/server-lat.log" ${opts[@]+"${opts[@]}"} || { record "latency-server-$via" 1; continue; }
    # shellcheck disable=SC2206 # K=V words
    run=(timeout -k 5 120 env LD_LIBRARY_PATH="$b/lib" VCUDA_SERVERS="127.0.0.1:$port" $who)
    for k in first second; do # (process: the first starts the tenant's serving process)
      t0=$(ms_now)
      "${run[@]}" "$app" device-state >/dev/null 2>&1
      echo "{\"bench\":\"vcuda-tenancy\",\"mode\":\"client-run-ms\",\"client\":\"$k\",\"ms\":$(($(ms_now) - t0))}" |
        tag_json "isolation=$cur" "via=$via" "round=$rep"
    done
    "${run[@]}" "$app" latency 3000 >"$out/lat-$via-$cur-$rep.log" 2>&1
    "${run[@]}" "$bench" "${bench_args[@]}" >"$out/bench-$via-$cur-$rep.log" 2>&1
    tag_json "isolation=$cur" "via=$via" "round=$rep" <"$out/lat-$via-$cur-$rep.log"
    bench_lines "$out/bench-$via-$cur-$rep.log"
    stop_server "$spid"
  done
done
# medians (min..max) over the rounds, per path and metric
python3 - "$jsonl" <<'EOF' | tee -a "$jsonl"
import json, statistics, sys
vals = {}
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    if "round" not in r:
        continue
    key = (r.get("via"), r.get("isolation"))
    if r.get("mode") == "latency":
        for m in ("h2d_1k_us", "launch_sync_us"):
            vals.setdefault(key + ("vcuda-tenancy " + m,), []).append(float(r[m]))
    elif r.get("mode") == "client-run-ms":
        vals.setdefault(key + ("client-run-ms " + r["client"],), []).append(float(r["ms"]))
    else:
        name = r.get("metric") or r.get("name")
        if name and "value" in r:
            vals.setdefault(key + ("vcuda-bench " + name,), []).append(float(r["value"]))
for (via, iso, metric), v in sorted(vals.items()):
    print(json.dumps({"bench": "vcuda-tenancy", "summary": metric, "via": via, "isolation": iso, "runs": len(v),
                      "median": round(statistics.median(v), 2), "min": round(min(v), 2), "max": round(max(v), 2)},
                     separators=(",", ":")))
EOF
emit "{\"bench\":\"vcuda-tenancy\",\"failed_checks\":$fails,\"modes\":\"$modes\",\"two_tenants\":$([ $two_tenants = 1 ] && echo true || echo false)}"
[ "$fails" = 0 ]

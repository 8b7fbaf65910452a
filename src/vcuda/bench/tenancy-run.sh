#!/usr/bin/env bash
# vcuda-server with several clients on a GPU machine: what one client may do to another,
# in each isolation mode of the server.
#
#   tenancy-run.sh BUILD_DIR OUT_DIR [MODE] [BASELINE_BUILD_DIR]
#
# MODE: shared, context, process (the server's --isolation) or all (the default).
# BUILD_DIR is a vcuda build (cmake -S src/vcuda) with the CUDA samples and tests.
# Once:
#   real-cubin     a real sm_90 cubin with one ELF header field patched, five ways: each
#                  refused by name, the server serving on (vcuda_server_test real_cubin)
# For each MODE:
#   device-state   two runs of one program on one server: each sees its own __device__ state
#   cross-client   client A fills 256 MiB and waits; client B's kernel reads 4 KiB at A's
#                  pointer and overwrites them; then A checks every word and runs a kernel.
#                  Expected where A and B share a serving process (shared and context, and
#                  process with one tenant): B reads A's words and A finds them changed
#                  (one address space: what the docs say these modes do not protect).
#                  Expected for different tenants under process: B's kernel fails (or finds
#                  its own memory), A is intact and runs on.  The server's single token
#                  makes every client the same tenant; for a server that tells tenants
#                  apart, TENANCY_SERVER_OPTS (server options) and TENANCY_ENV_A /
#                  TENANCY_ENV_B (each client's environment, e.g. VCUDA_TOKEN=...) make A
#                  and B two tenants
#   two-servers    the same with A and B on two servers (two processes) on the same GPU:
#                  B cannot read A, A intact: the process boundary that process mode uses
#   sticky-710     a device-side assert in one client; the next clients get a working context
#   long-kernel    a kernel of 3x VCUDA_TIMEOUT_MS, 64 MiB H2D behind it, a synchronize: ok
#   killed/stopped the whole server SIGKILLed / SIGSTOPped during that wait: the program
#                  fails, reported within VCUDA_TIMEOUT_MS of the signal
#   (process)      loop-no-driver: the network-loop process (and the supervisor above it)
#                  has no libcuda mapped, the tenant's serving process has;
#                  serving-killed: the serving process alone SIGKILLed during a client's
#                  wait: that client fails at once, the loop serves the next client with
#                  a fresh serving process
# Then latency: 1 KiB H2D and launch + synchronize, medians of 3000 calls (vcuda-tenancy)
# and vcuda-bench's h2d_1k_time / d2h_1k_time / launch_sync_time, 3 rounds, each round
# local, then each mode asked (and shared, always) and, given, BASELINE_BUILD_DIR's server
# (shared); with the time of a whole short client run, a server's first and second.
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
app=$build/vcuda-tenancy bench=$build/vcuda-bench
jsonl=$out/tenancy.jsonl
: >"$jsonl"
export VCUDA_TOKEN=${VCUDA_TOKEN:-tenancy-$RANDOM-$RANDOM-$RANDOM}
env_a=${TENANCY_ENV_A:-} env_b=${TENANCY_ENV_B:-}
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
# Waits up to $2 s for pid $1, then kills it and its process group.
reap() {
  local pid=$1 secs=$2 i
  for ((i = 0; i < secs * 10; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -CONT -- "-$pid" "$pid" 2>/dev/null
    kill -KILL -- "-$pid" "$pid" 2>/dev/null
  fi
  wait "$pid" 2>/dev/null
}
# a server is a process group of its own (setsid): supervisor or loop, and serving processes
stop_server() {
  kill -CONT -- "-$1" 2>/dev/null
  kill -TERM -- "-$1" 2>/dev/null
  reap "$1" 15
}
cleanup() { for p in "${servers[@]}"; do stop_server "$p"; done; }
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
# the mode's server: --isolation and TENANCY_SERVER_OPTS
start_mode() {
  # shellcheck disable=SC2086 # options are words
  start_server "$build" "$1" --isolation "$cur" ${TENANCY_SERVER_OPTS:-}
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
# 1 if A and B are in one serving process.
cross() {
  local name=$1 pa=$2 pb=$3 shared_proc=$4 go=$out/$1-$cur.go la=$out/$1-$cur-a.log lb=$out/$1-$cur-b.log
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
  remote_b "$pb" 60 "$app" peek "$ptr" "$seed" write >"$lb" 2>&1
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
  else # B cannot reach A; A's data and context are fine
    [ $rb = 0 ] && [ "$read_other" = false ] && [ $ra = 0 ] && [ "$intact" = true ]
  fi
  record "$name" $? "$extra"
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
    b=$build cur=$cfg via=vcuda opts=(--isolation "$cfg" ${TENANCY_SERVER_OPTS:-})
    [ "$cfg" = baseline ] && b=$base cur=shared via=vcuda-baseline opts=()
    start_server "$b" "$out/server-lat.log" ${opts[@]+"${opts[@]}"} || { record "latency-server-$via" 1; continue; }
    # shellcheck disable=SC2206 # K=V words
    run=(timeout -k 5 120 env LD_LIBRARY_PATH="$b/lib" VCUDA_SERVERS="127.0.0.1:$port" $env_a)
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

#!/usr/bin/env bash
# One pass on a GPU machine over what the whole runtime surface and the many-tenant
# server promise together (a fresh Release build of vcuda only, then):
#   runtime-families  samples/runtime_families.cu through vcuda prints exactly what it
#                     prints on the real runtime (stdout, device printf included: one
#                     client on its server, so its printf output is shipped to it)
#   long-kernel       a kernel of 3x VCUDA_TIMEOUT_MS, 64 MiB H2D behind it, a synchronize
#   sticky-710        a device-side assert in one client (it gets 710), then the next
#                     clients of the same listening socket get a working context (the
#                     supervisor's fresh serving process)
#   device-state      two clients of one program on one server: each sees its own
#                     __device__ counter (1 both times)
#   latency           vcuda-bench 1 KiB H2D and launch + cudaDeviceSynchronize, medians
#                     of 500 calls, 3 runs interleaved with the local runtime, against the
#                     reference machine's (20.4 / 23.9 us, target: within 10%; the 1 KiB
#                     H2D includes the copy's completion, which a cudaMemcpy from pinned
#                     memory waits for as on the real runtime: 17.1 us before it did)
#   stopped-wait      a server SIGSTOPped during a long wait: the client fails, and says
#                     so within VCUDA_TIMEOUT_MS (+1 s of slack) of the signal
#
#   merged-device-check.sh [OUT_DIR]        (run from anywhere; OUT_DIR defaults to $OUT)
#   e.g. from a copy of the repository on the GPU machine:
#     bash src/vcuda/bench/merged-device-check.sh "$OUT"
#
# Environment: MDC_BUILD (build dir, default build/mdc under the repository root),
# MDC_JOBS (build parallelism, default nproc), MDC_SKIP_BUILD=1 (use MDC_BUILD as it is).  Results: OUT_DIR/merged-check.jsonl (one
# JSON line per check, "ok" true/false), OUT_DIR/summary.txt and *.log; exit 0 when
# every check passed, 1 otherwise, 77 with no GPU.  Every process it starts is waited
# for with a time limit and every server is killed on exit.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
out=${1:-${OUT:?give OUT_DIR or set OUT}}
mkdir -p "$out" && out=$(cd "$out" && pwd)
build=${MDC_BUILD:-$root/build/mdc}
jobs=${MDC_JOBS:-$(nproc)}
jsonl=$out/merged-check.jsonl
: >"$jsonl"
t_start=$(date +%s)
fails=0
servers=()

ms_now() { echo $(( $(date +%s%N) / 1000000 )); }
cleanup() { for p in "${servers[@]}"; do stop_server "$p"; done; }
source "$(dirname "${BASH_SOURCE[0]}")/vcuda-server-start.sh"
stop_server() { vcuda_stop_group "$1" 5; }
trap cleanup EXIT
trap 'exit 143' TERM INT
# name, ok (0/1), then extra JSON fields ("k":v,...)
record() {
  local name=$1 ok=$2 extra=${3:-}
  local b=true; [ "$ok" = 0 ] || { b=false; fails=$((fails + 1)); }
  echo "{\"bench\":\"vcuda-merged-check\",\"check\":\"$name\",\"ok\":$b${extra:+,$extra}}" >>"$jsonl"
  printf '%-18s %s  %s\n' "$name" "$([ "$b" = true ] && echo ok || echo FAIL)" "$extra" | tee -a "$out/summary.txt"
}
# log file, [server options] -> sets spid, port
start_server() {
  local log=$1 i
  # shellcheck disable=SC2086 # options are words
  setsid "$build/vcuda/vcuda-server" --device 0 --listen 127.0.0.1:0 ${2:-} 2>"$log" &
  spid=$! port=""
  servers+=("$spid")
  for ((i = 0; i < 200; i++)); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$log" | head -1)
    [ -n "$port" ] && return 0
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.05
  done
  echo "server did not start: $(tail -2 "$log")" >&2
  return 1
}
# seconds, then the program through vcuda (the server at $port)
remote() {
  local secs=$1; shift
  timeout -k 5 "$secs" env LD_LIBRARY_PATH="$build/vcuda/lib" VCUDA_SERVERS=127.0.0.1:$port "$@"
}

export VCUDA_TOKEN="mdc-$RANDOM-$RANDOM-$RANDOM"
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU') || ngpu=0
if [ "$ngpu" = 0 ]; then
  echo '{"bench":"vcuda-merged-check","status":"unsupported","reason":"no GPU"}' | tee -a "$jsonl"
  exit 77
fi
nvidia-smi -L | head -1 >"$out/gpu.txt"
git -C "$root" rev-parse HEAD >"$out/commit.txt" 2>/dev/null

# ---- build ------------------------------------------------------------------------
t0=$(ms_now)
if [ "${MDC_SKIP_BUILD:-0}" = 1 ]; then
  echo "MDC_SKIP_BUILD=1: using $build as it is" >"$out/build.log"
  rc=0
else
  { timeout -k 5 120 cmake -S "$root/src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DUMSTUDY_COMPONENTS=vcuda \
      -DBUILD_TESTING=OFF &&
    timeout -k 5 180 cmake --build "$build" -j"$jobs" --target vcuda-server vcuda_cudart vcuda-tenancy \
      vcuda-sample-runtime-families vcuda-sample-vector-add vcuda-bench; } >"$out/build.log" 2>&1
  rc=$?
fi
ok=1; [ $rc = 0 ] && ok=0
record build $ok "\"rc\":$rc,\"ms\":$(( $(ms_now) - t0 ))"
[ $rc = 0 ] || { tail -20 "$out/build.log"; exit 1; }
app=$build/vcuda/vcuda-tenancy fam=$build/vcuda/vcuda-sample-runtime-families

# ---- runtime families: identical output ----------------------------------------------
timeout -k 5 60 "$fam" >"$out/families-real.out" 2>"$out/families-real.err"; r1=$?
start_server "$out/server-families.log" || exit 1
remote 90 "$fam" >"$out/families-vcuda.out" 2>"$out/families-vcuda.err"; r2=$?
stop_server "$spid"
diff "$out/families-real.out" "$out/families-vcuda.out" >"$out/families.diff"; d=$?
ndiff=$(grep -c '^[<>]' "$out/families.diff")
nlines=$(wc -l <"$out/families-real.out")
nprintf=$(grep -c 'device says hello' "$out/families-vcuda.out")
ok=1; [ $r1 = 0 ] && [ $r2 = 0 ] && [ $d = 0 ] && [ "$nlines" -gt 0 ] && ok=0
record runtime-families $ok "\"rc_real\":$r1,\"rc_vcuda\":$r2,\"lines\":$nlines,\"differing_lines\":$ndiff,\"device_printf_lines\":$nprintf"

# ---- one shared server for long kernel, device state ----------------------------------
start_server "$out/server-shared.log" || exit 1
t0=$(ms_now)
remote 60 env VCUDA_TIMEOUT_MS=2000 "$app" spin 6000 >"$out/long-kernel.log" 2>&1; rc=$?
# (the kernel must really have run that long: a launch that failed unnoticed is no pass)
el=$(sed -n 's/.*"elapsed_ms":\([0-9]*\).*/\1/p' "$out/long-kernel.log" | head -1)
ok=1; [ $rc = 0 ] && [ "${el:-0}" -ge 6000 ] && ok=0
record long-kernel $ok "\"rc\":$rc,\"kernel_ms\":6000,\"elapsed_ms\":${el:-null},\"timeout_ms\":2000,\"ms\":$(( $(ms_now) - t0 ))"

remote 30 "$app" device-state >"$out/device-state-1.log" 2>&1; r1=$?
remote 30 "$app" device-state >"$out/device-state-2.log" 2>&1; r2=$?
c1=$(sed -n 's/.*"counter":\(-\{0,1\}[0-9]*\).*/\1/p' "$out/device-state-1.log")
c2=$(sed -n 's/.*"counter":\(-\{0,1\}[0-9]*\).*/\1/p' "$out/device-state-2.log")
record device-state $((r1 + r2)) "\"counter_first\":${c1:-null},\"counter_second\":${c2:-null}"

# ---- sticky 710: the next clients get a working context --------------------------------
remote 30 "$app" assert >"$out/assert.log" 2>&1; ra=$?
sup_alive=1; kill -0 "$spid" 2>/dev/null && sup_alive=0
# the supervisor starts a fresh serving process on the same socket; clients wait in its
# backlog meanwhile
remote 60 "$build/vcuda/vcuda-sample-vector-add" >"$out/after-710-vector-add.log" 2>&1; rv=$?
remote 30 "$app" device-state >"$out/after-710-device-state.log" 2>&1; rd=$?
replaced=$(grep -c 'stopping it for a fresh one\|replacing the server process' "$out/server-shared.log")
ok=1; [ $ra = 0 ] && [ $rv = 0 ] && [ $rd = 0 ] && [ $sup_alive = 0 ] && ok=0
record sticky-710 $ok "\"rc_assert\":$ra,\"rc_next_vector_add\":$rv,\"rc_next_device_state\":$rd,\"supervisor_alive\":$([ $sup_alive = 0 ] && echo true || echo false),\"replacement_log_lines\":$replaced"
stop_server "$spid"

# ---- latency: 1 KiB H2D, launch + synchronize --------------------------------------------
bench=$build/vcuda/vcuda-bench
start_server "$out/server-bench.log" || exit 1
for rep in 1 2 3; do
  timeout -k 5 60 "$bench" --reps 50 --no-intervals --max-bytes 8K --large 1M --large-reps 1 \
    >"$out/bench-local-$rep.log" 2>&1
  remote 90 "$bench" --reps 50 --no-intervals --max-bytes 8K --large 1M --large-reps 1 \
    >"$out/bench-vcuda-$rep.log" 2>&1
done
stop_server "$spid"
grep -h '^{' "$out"/bench-*.log >"$out/bench.jsonl"
python3 - "$out" >>"$jsonl" <<'EOF' || fails=$((fails + 1))
import glob, json, statistics, sys
out = sys.argv[1]
before = {"h2d_1k_time": 20.4, "launch_sync_time": 23.9}
for via in ("local", "vcuda"):
    vals = {k: [] for k in before}
    for f in sorted(glob.glob(f"{out}/bench-{via}-*.log")):
        for line in open(f):
            if not line.startswith("{"):
                continue
            try:
                r = json.loads(line)
            except ValueError:
                continue
            name = r.get("metric") or r.get("name")
            if name in vals and "value" in r:
                vals[name].append(float(r["value"]))
    for k, v in vals.items():
        rec = {"bench": "vcuda-merged-check", "check": f"latency-{k}", "via": via, "runs": len(v),
               "median_us": round(statistics.median(v), 2) if v else None,
               "min_us": round(min(v), 2) if v else None, "max_us": round(max(v), 2) if v else None}
        if via == "vcuda":
            rec["before_us"] = before[k]
            rec["ok"] = bool(v) and statistics.median(v) <= before[k] * 1.10
        print(json.dumps(rec, separators=(",", ":")))
EOF
grep '"check":"latency-' "$jsonl" | tee -a "$out/summary.txt"
fails=$((fails + $(grep -c '"check":"latency-.*"ok":false' "$jsonl")))

# ---- server stopped during a long wait (last: the killed server's 20 s kernel may
# still be torn down on the GPU afterwards) --------------------------------------------
start_server "$out/server-stop.log" || exit 1
( sleep 3; kill -STOP -- "-$spid"; ms_now >"$out/signal-stop.t" ) &
sigpid=$!
remote 40 env VCUDA_TIMEOUT_MS=2000 "$app" spin 20000 >"$out/stopped-wait.log" 2>&1; rc=$?
t1=$(ms_now)
vcuda_reap "$sigpid" 10
ts=$(cat "$out/signal-stop.t" 2>/dev/null || echo 0)
after=$((t1 - ts))
ok=1; [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$ts" != 0 ] && [ "$after" -le 3000 ] && ok=0
record stopped-wait $ok "\"rc\":$rc,\"reported_after_ms\":$after,\"timeout_ms\":2000"
stop_server "$spid"

echo "merged-device-check: $fails failed check(s), $(( $(date +%s) - t_start )) s; $(cat "$out/gpu.txt")" | tee -a "$out/summary.txt"
[ "$fails" = 0 ]

#!/usr/bin/env bash
# CUDA graphs executed on the vcuda server, checked and measured on one GPU:
#
#   graphs-device-check.sh OUT_DIR      (run from anywhere; a fresh build of this tree)
#
#   build             vcuda (Release), its server, the stand-in, runtime_families and
#                     vcuda-graph-bench (GRAPHS_BUILD: build dir, default
#                     /tmp/vcuda-graphs-build; GRAPHS_JOBS: parallelism, default nproc)
#   families-*        samples/runtime_families.cu on the real runtime, through vcuda with
#                     graphs on the server (default), and through vcuda with every graph
#                     replayed by the client (VCUDA_GRAPHS=client, as all graphs were
#                     before they ran on the server):
#                     stdout must be identical in all three
#   bench-*           vcuda-graph-bench (a 20-kernel captured graph launched 1,000 times
#                     back to back, the same 20 kernels as stream launches, and launch +
#                     synchronize of one graph), 3 rounds interleaved: local, vcuda with
#                     server graphs, vcuda with client replay; 7 timed loops per round
# Prints a short summary; OUT_DIR/summary.jsonl has one line per check and per
# measurement, *.log/*.out the rest.  Exit 0 when every check passed, 1 otherwise, 77
# without a GPU.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
out=${1:?usage: graphs-device-check.sh OUT_DIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
build=${GRAPHS_BUILD:-/tmp/vcuda-graphs-build}
jsonl=$out/summary.jsonl
: >"$jsonl"
fails=0
spid=""
ms_now() { echo $(( $(date +%s%N) / 1000000 )); }
stop_server() {
  [ -n "$spid" ] || return 0
  kill -CONT -- "-$spid" 2>/dev/null; kill -TERM -- "-$spid" 2>/dev/null
  for _ in $(seq 50); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL -- "-$spid" 2>/dev/null; wait "$spid" 2>/dev/null; spid=""
}
trap stop_server EXIT
trap 'exit 143' TERM INT
record() { # name, ok (0 good), extra JSON fields
  local b=true; [ "$2" = 0 ] || { b=false; fails=$((fails + 1)); }
  echo "{\"bench\":\"vcuda-graphs-device\",\"check\":\"$1\",\"ok\":$b${3:+,$3}}" >>"$jsonl"
  printf '%-22s %s  %s\n' "$1" "$([ "$b" = true ] && echo ok || echo FAIL)" "${3:-}"
}

nvidia-smi -L >"$out/gpu.txt" 2>&1 || { echo "no GPU"; exit 77; }
head -1 "$out/gpu.txt"
export VCUDA_TOKEN="graphs-$RANDOM-$RANDOM-$RANDOM"

t0=$(ms_now)
{ timeout -k 5 150 cmake -S "$root/src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DUMSTUDY_COMPONENTS=vcuda -DBUILD_TESTING=OFF &&
  timeout -k 5 200 cmake --build "$build" -j"${GRAPHS_JOBS:-$(nproc)}" --target vcuda-server vcuda_cudart vcuda-sample-runtime-families \
    vcuda-graph-bench; } >"$out/build.log" 2>&1
rc=$?
record build $rc "\"rc\":$rc,\"ms\":$(( $(ms_now) - t0 ))"
[ $rc = 0 ] || { tail -30 "$out/build.log"; exit 1; }
v=$build/vcuda

setsid "$v/vcuda-server" --device 0 --listen 127.0.0.1:0 2>"$out/server.log" &
spid=$! port=""
for _ in $(seq 200); do
  port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$out/server.log" | head -1)
  [ -n "$port" ] && break; sleep 0.05
done
[ -n "$port" ] || { echo "server did not start: $(tail -3 "$out/server.log")"; exit 1; }
remote() { timeout -k 5 "$1" env LD_LIBRARY_PATH="$v/lib" VCUDA_SERVERS=127.0.0.1:$port "${@:2}"; }

# ---- runtime_families: identical stdout, graphs on the server and replayed ------------
timeout -k 5 60 "$v/vcuda-sample-runtime-families" >"$out/families-local.out" 2>"$out/families-local.err"; rl=$?
remote 90 env VCUDA_GRAPHS=server "$v/vcuda-sample-runtime-families" >"$out/families-server.out" 2>"$out/families-server.err"; rs=$?
remote 90 env VCUDA_GRAPHS=client "$v/vcuda-sample-runtime-families" >"$out/families-client.out" 2>"$out/families-client.err"; rc=$?
for m in server client; do
  diff "$out/families-local.out" "$out/families-$m.out" >"$out/families-$m.diff"; d=$?
  r=$rs; [ $m = client ] && r=$rc
  ok=1; [ $rl = 0 ] && [ $r = 0 ] && [ $d = 0 ] && [ -s "$out/families-local.out" ] && ok=0
  record "families-$m" $ok "\"rc_local\":$rl,\"rc_vcuda\":$r,\"lines\":$(wc -l <"$out/families-local.out"),\"differing_lines\":$(grep -c '^[<>]' "$out/families-$m.diff")"
done
grep -h "graph" "$out/families-local.out" | sed 's/^/  /'

# ---- graph launch cost ------------------------------------------------------------------
for round in 1 2 3; do
  timeout -k 5 60 "$v/vcuda-graph-bench" >"$out/bench-local-$round.log" 2>&1 || fails=$((fails + 1))
  remote 90 env VCUDA_GRAPHS=server "$v/vcuda-graph-bench" >"$out/bench-server-$round.log" 2>&1 || fails=$((fails + 1))
  remote 90 env VCUDA_GRAPHS=client "$v/vcuda-graph-bench" >"$out/bench-client-$round.log" 2>&1 || fails=$((fails + 1))
done
stop_server
grep -h '^{' "$out"/bench-*.log >"$out/bench.jsonl"
python3 - "$out/bench.jsonl" "$jsonl" <<'PY'
import json, statistics, sys
rows, bad = {}, []
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "value" in r:
        rows.setdefault((r["metric"], r["via"]), []).append(r)
    else:
        bad.append(r)
with open(sys.argv[2], "a") as out:
    for r in bad:
        out.write(json.dumps({"bench": "vcuda-graphs-device", "check": "bench-run", "ok": False, "record": r}) + "\n")
    for (metric, via), rs in sorted(rows.items()):
        rec = {"bench": "vcuda-graphs-device", "measure": metric, "via": via, "unit": "us", "rounds": len(rs),
               "reps_per_round": rs[0]["reps"],
               "median_of_round_medians": round(statistics.median(r["value"] for r in rs), 2),
               "round_medians": [round(r["value"], 2) for r in rs],
               "min": round(min(r["min"] for r in rs), 2), "max": round(max(r["max"] for r in rs), 2)}
        out.write(json.dumps(rec, separators=(",", ":")) + "\n")
        print(f"  {metric:<20} {via:<20} median {rec['median_of_round_medians']:>9} us  "
              f"(round medians {rec['round_medians']}, min {rec['min']}, max {rec['max']})")
for r in bad:
    print(f"  bench run without a result: {r.get('status')}: {r.get('reason', '')}")
PY
grep -q '"check":"bench-run"' "$jsonl" && fails=$((fails + 1))
echo "failures: $fails (details: $out)"
exit $((fails > 0))

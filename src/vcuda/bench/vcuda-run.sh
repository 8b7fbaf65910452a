#!/usr/bin/env bash
# vcuda-run: run an unmodified CUDA program (-cudart shared) on this node's GPUs
# through vcuda: one vcuda-server per GPU on loopback (ephemeral ports, a fresh random
# token), the program with the libcudart stand-in preloaded, the servers stopped after.
# The program alone (never the servers, which need the real driver) also has the
# stand-in's directory first on LD_LIBRARY_PATH, where it finds the refusing libcuda.so.1:
# a library with a CUDA runtime of its own inside (cuBLAS, cuSPARSE, cuFFT) or a
# driver-API program is told by name that vcuda cannot run it (src/driver_refuse.c).
#
#   vcuda-run [--gpus N] [--ucx] [--lib DIR] [--server PATH] [--server-opts "OPTS"]
#             [--log-dir DIR] [--] PROGRAM [ARGS...]
#
# N defaults to every GPU nvidia-smi lists.  --ucx: the servers listen on ucx:// (UCX
# picks RDMA, shared memory or TCP); the default is TCP.  The stand-in is looked for in DIR, then
# next to this script (build tree: lib/), then ../lib/vcuda and ../lib64/vcuda (install).
# Server logs go to DIR (default: a new directory under $TMPDIR), vcuda-server-<gpu>.log.
# Exit status: the program's; 77 if there is no GPU or no server could start.
set -uo pipefail
# "Cannot run here" is exit 77 and, for the JSON-reading harness (ReFrame), one status
# line on stdout in the umstudy programs' format, named after the program.
unsupported() {
  echo "vcuda-run: $1" >&2
  printf '{"bench":"%s","status":"unsupported","reason":"vcuda-run: %s"}\n' "$(basename "${prog:-vcuda-run}")" "$1"
  exit 77
}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=vcuda-server-start.sh
. "$here/vcuda-server-start.sh"
gpus="" lib="" server="" logdir="" server_opts="" scheme=""
while [ $# -gt 0 ]; do
  case $1 in
    --gpus) gpus=$2; shift 2 ;;
    --lib) lib=$2; shift 2 ;;
    --server) server=$2; shift 2 ;;
    --log-dir) logdir=$2; shift 2 ;;
    --server-opts) server_opts=$2; shift 2 ;;
    --ucx) scheme=ucx://; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    -*) echo "vcuda-run: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "vcuda-run: no program given (vcuda-run --help)" >&2; exit 2; }
prog=$1
if [ -z "$lib" ]; then
  for d in "$here/lib" "$here/../lib/vcuda" "$here/../lib64/vcuda"; do
    ls "$d"/libcudart.so.[0-9]* >/dev/null 2>&1 && { lib=$d; break; }
  done
fi
stand_in=$(ls "$lib"/libcudart.so.[0-9]* 2>/dev/null | grep -E 'libcudart\.so\.[0-9]+$' | head -1)
[ -n "$stand_in" ] || { echo "vcuda-run: no libcudart stand-in found (--lib DIR)" >&2; exit 2; }
lib=$(cd "$lib" && pwd)
[ -n "$server" ] || server=$here/vcuda-server
[ -x "$server" ] || { echo "vcuda-run: no vcuda-server at $server (--server PATH)" >&2; exit 2; }
if [ -z "$gpus" ]; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU') || gpus=0
fi
[[ "$gpus" =~ ^[0-9]+$ ]] || { echo "vcuda-run: --gpus '$gpus' is not a number" >&2; exit 2; }
[ "$gpus" -gt 0 ] || unsupported "no GPU on this node: nothing to serve"

[ -n "$logdir" ] || logdir=$(mktemp -d "${TMPDIR:-/tmp}/vcuda-run.XXXXXX")
mkdir -p "$logdir"
# A fresh token in a file only we can read, named by VCUDA_TOKEN_FILE: the token itself
# is never in the program's environment (where its children and /proc/PID/environ would
# show it), and it never crosses the network (challenge-response); removed at exit.
unset VCUDA_TOKEN
tokdir=$(mktemp -d "${TMPDIR:-/tmp}/vcuda-token.XXXXXX") && chmod 700 "$tokdir"
( umask 077; od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$tokdir/token" )
export VCUDA_TOKEN_FILE=$tokdir/token
pids=()
stop() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done; wait "${pids[@]}" 2>/dev/null; rm -rf "$tokdir"; }
trap stop EXIT
trap 'exit 143' TERM INT
servers=""
for ((g = 0; g < gpus; g++)); do
  log="$logdir/vcuda-server-$g.log"
  # shellcheck disable=SC2086 # server options are words
  vcuda_start_server "$log" 200 "$server" --device $g --listen ${scheme}127.0.0.1:0 $server_opts
  port=$server_port
  if [ -z "$port" ]; then
    why=$(tail -1 "$log" | tr -d '"\\')
    echo "vcuda-run: server for GPU $g did not start: $why" >&2
    continue
  fi
  servers+="${servers:+,}${scheme}127.0.0.1:$port"
done
[ -n "$servers" ] || unsupported "no server started (${why:-see the server logs in $logdir})"
export VCUDA_SERVERS=$servers
started=$(tr ',' '\n' <<<"$servers" | wc -l)
echo "vcuda-run: $started of $gpus server(s) at $VCUDA_SERVERS (logs in $logdir), stand-in $stand_in" >&2
LD_PRELOAD="$stand_in${LD_PRELOAD:+:$LD_PRELOAD}" LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"

#!/usr/bin/env bash
# vcuda-launch: servers on every node of a job, the client on this one (P003's layout:
# one client node, GPUs on many server nodes).  Run it on the job's first node:
#
#   vcuda-launch [--launcher srun|mpirun|mpiexec|local|netns] [--nodes N] [--ranks-per-node R]
#                [--gpus-per-node G] [--remote-only] [--ucx] [--iface NAME | --bind ADDR]
#                [--server PATH] [--lib DIR] [--launcher-opts "OPTS"] [--server-opts "OPTS"]
#                [--run-dir DIR] [--start-timeout S] [--keep] [--] PROGRAM [ARGS...]
#
# 1. A fresh random token is written (mode 0600) to a new run directory, which every
#    node must see (default: under the current directory, the job's shared working
#    directory; --run-dir or VCUDA_LAUNCH_DIR elsewhere).
# 2. The site's launcher starts N*R tasks (srun: one per node by default; mpirun/mpiexec
#    with a per-node map; local: N*R processes here, for testing; netns: R processes in
#    each of the network namespaces VCUDA_LAUNCH_NETNS names, comma-separated, one per
#    node, each with its own hostname, node k serving GPUs k*G.. of this machine, as
#    vcuda-netns sets up); each task starts one
#    vcuda-server per GPU it serves (G per task, default: the node's GPUs / R), listening
#    on its own node's address (the first of `hostname -I` there; --iface NAME: that
#    interface's IPv4 address on each node, e.g. ib0; --bind ADDR: this one address for
#    every task, so for one host only), and writes its endpoints to the run directory.
#    --remote-only: tasks on this (the client's) node start no server, so the client has
#    its node to itself and every GPU it uses is on another node (P003's layout).
# 3. Once every endpoint is there (or --start-timeout, default 120 s, has passed: missing
#    ones are named and left out), one JSON line per task says where it ran
#    ({"bench":"placement","rank":T,"host":...,"gpus":[UUIDs it serves]}, on stdout, for the
#    check that compares the job's layout with the one it needs), then PROGRAM runs here
#    with the libcudart stand-in and VCUDA_SERVERS = every endpoint, ordered by task, then GPU.
# 4. The servers are stopped and the run directory removed (--keep keeps it, with the
#    server logs, less the token).  Exit status: PROGRAM's; 77 if no server started; 2 usage.
#
# Inside a task (started by the launcher, not by hand): vcuda-launch --serve-task DIR ...
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=vcuda-server-start.sh
. "$here/vcuda-server-start.sh"
self="$here/$(basename "${BASH_SOURCE[0]}")"
launcher=local nodes="" rpn=1 gpn="" scheme="" bind="" iface="" server="" lib="" launcher_opts=""
server_opts="" rundir="" start_timeout=120 keep=0 task_dir="" remote_only=0 client_host=""
usage() { echo "vcuda-launch: $1 (vcuda-launch --help)" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --launcher) launcher=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --ranks-per-node) rpn=$2; shift 2 ;;
    --gpus-per-node) gpn=$2; shift 2 ;;
    --ucx) scheme=ucx://; shift ;;
    --bind) bind=$2; shift 2 ;;
    --iface) iface=$2; shift 2 ;;
    --remote-only) remote_only=1; shift ;;
    --server) server=$2; shift 2 ;;
    --lib) lib=$2; shift 2 ;;
    --launcher-opts) launcher_opts=$2; shift 2 ;;
    --server-opts) server_opts=$2; shift 2 ;;
    --run-dir) rundir=$2; shift 2 ;;
    --start-timeout) start_timeout=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --serve-task) task_dir=$2; shift 2 ;;
    --client-host) client_host=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    -*) usage "unknown option $1" ;;
    *) break ;;
  esac
done
for v in rpn start_timeout ${nodes:+nodes} ${gpn:+gpn}; do
  [[ "${!v}" =~ ^[0-9]+$ ]] && [ "${!v}" -gt 0 ] || usage "--${v} '${!v}' is not a positive number"
done
[ -n "$server" ] || server=$here/vcuda-server
[ -x "$server" ] || usage "no vcuda-server at $server (--server PATH)"
[ -z "$bind" ] || [ -z "$iface" ] || usage "--bind and --iface: one or the other"

# ---- one task: this node's servers, until the client is done ------------------------
if [ -n "$task_dir" ]; then
  # Who this task is, from the launcher that started it: the job's own variables may be
  # in every task's environment too (mpirun inside a Slurm job: SLURM_PROCID=0 in all).
  case $launcher in
    srun) task=${SLURM_PROCID:-} local_task=${SLURM_LOCALID:-} ;;
    mpirun|mpiexec)
      task=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-${PALS_RANKID:-}}}}
      local_task=${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-${PALS_LOCAL_RANKID:-}}} ;;
    *) task=${VCUDA_LAUNCH_TASK:-} local_task=${VCUDA_LAUNCH_LOCAL_TASK:-} ;;
  esac
  if [ -z "$task" ]; then
    echo "vcuda-launch: $launcher set no task rank on $(hostname)" >&2; exit 2
  fi
  local_task=${local_task:-0}
  # This node's own address (every task resolves it where it runs).
  if [ -n "$iface" ]; then
    bind=$(ip -4 -o addr show dev "$iface" 2>/dev/null | awk '{sub(/\/.*/, "", $4); print $4; exit}')
  elif [ -z "$bind" ]; then
    bind=$(hostname -I 2>/dev/null | awk '{print $1}')
    [ -n "$bind" ] || bind=127.0.0.1
  fi
  node_gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU') || node_gpus=0
  [ -n "$gpn" ] || gpn=$((node_gpus / rpn))
  # where this task runs and the GPUs its servers will use (none on the client's node
  # under --remote-only), before it says how many servers it starts (gpus.T): once
  # every gpus.T is there, every where.T is too
  all_uuids=$(nvidia-smi -L 2>/dev/null | sed -n 's/.*(UUID: \([^)]*\)).*/\1/p')
  uuids=""
  if [ "$node_gpus" -gt 0 ] && { [ -z "$client_host" ] || [ "$(hostname)" != "$client_host" ]; }; then
    for ((g = 0; g < gpn; g++)); do
      u=$(sed -n "$(((local_task * gpn + g) % node_gpus + 1))p" <<<"$all_uuids")
      uuids+="${uuids:+,}\"$u\""
    done
  fi
  printf '{"bench":"placement","rank":%s,"host":"%s","gpus":[%s]}\n' "$task" "$(hostname)" "$uuids" \
    >"$task_dir/.where.$task" && mv "$task_dir/.where.$task" "$task_dir/where.$task"
  export VCUDA_TOKEN_FILE="$task_dir/token"
  unset VCUDA_TOKEN
  pids=()
  trap 'for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done; wait' EXIT
  trap 'exit 143' TERM INT
  if [ -n "$client_host" ] && [ "$(hostname)" = "$client_host" ]; then
    gpn=0; echo 0 >"$task_dir/gpus.$task"   # the client's node: no server (--remote-only)
  elif [ -z "$bind" ]; then
    echo "$(hostname): no IPv4 address on interface $iface" >"$task_dir/failed.$task.0"; echo 1 >"$task_dir/gpus.$task"; gpn=0
  elif [ "$gpn" -gt 0 ]; then echo "$gpn" >"$task_dir/gpus.$task"
  else echo "no GPU on $(hostname): nothing to serve" >"$task_dir/failed.$task.0"; echo 1 >"$task_dir/gpus.$task"; fi
  for ((g = 0; g < gpn; g++)); do
    # tasks sharing a node take its GPUs in turn (more servers than GPUs share them);
    # the placement line above names the same ones
    dev=$(((local_task * gpn + g) % (node_gpus > 0 ? node_gpus : 1)))
    log="$task_dir/server.$task.$g.log"
    # shellcheck disable=SC2086 # server options are words
    vcuda_start_server "$log" 400 "$server" --device $dev --listen "$scheme$bind:0" $server_opts
    port=$server_port
    if [ -n "$port" ]; then
      echo "$scheme$bind:$port" >"$task_dir/.ep.$task.$g" && mv "$task_dir/.ep.$task.$g" "$task_dir/ep.$task.$g"
    else
      echo "$(hostname) GPU $dev: $(tail -1 "$log")" >"$task_dir/failed.$task.$g"
    fi
  done
  while [ ! -e "$task_dir/stop" ]; do sleep 0.2; done
  exit 0
fi

# ---- the client node ---------------------------------------------------------------
[ $# -gt 0 ] || usage "no program given"
if [ -z "$lib" ]; then
  for d in "$here/lib" "$here/../lib/vcuda" "$here/../lib64/vcuda"; do
    ls "$d"/libcudart.so.[0-9]* >/dev/null 2>&1 && { lib=$d; break; }
  done
fi
ls "$lib"/libcudart.so.[0-9]* >/dev/null 2>&1 || usage "no libcudart stand-in found (--lib DIR)"
if [ -z "$nodes" ] && [ "$launcher" = netns ]; then
  nodes=$(tr ',' '\n' <<<"${VCUDA_LAUNCH_NETNS:-}" | grep -c .)
  [ "$nodes" -gt 0 ] || usage "--launcher netns: VCUDA_LAUNCH_NETNS names no network namespace"
fi
if [ -z "$nodes" ]; then
  nodes=${SLURM_JOB_NUM_NODES:-${SLURM_NNODES:-}}
  [ -z "$nodes" ] && [ -n "${PBS_NODEFILE:-}" ] && nodes=$(sort -u "$PBS_NODEFILE" | wc -l)
  [ -n "$nodes" ] || nodes=1
fi
ntasks=$((nodes * rpn))
# shellcheck disable=SC2206 # launcher options are words
lopts=($launcher_opts)
case $launcher in
  srun) launch=(srun --nodes="$nodes" --ntasks="$ntasks" --ntasks-per-node="$rpn" --kill-on-bad-exit=0 "${lopts[@]}") ;;
  mpirun|mpiexec)
    if "$launcher" --version 2>&1 | grep -q "Open MPI"; then
      launch=("$launcher" -np "$ntasks" --map-by "ppr:$rpn:node" "${lopts[@]}")
    else # MPICH / Intel MPI (Hydra)
      launch=("$launcher" -n "$ntasks" -ppn "$rpn" "${lopts[@]}")
    fi ;;
  local) launch=() ;;
  netns)
    IFS=, read -r -a netns <<<"${VCUDA_LAUNCH_NETNS:-}"
    [ "${#netns[@]}" -gt 0 ] || usage "--launcher netns: VCUDA_LAUNCH_NETNS names no network namespace"
    [ "$nodes" -le "${#netns[@]}" ] || usage "--nodes $nodes: VCUDA_LAUNCH_NETNS names ${#netns[@]} namespace(s)"
    for ns in "${netns[@]:0:$nodes}"; do
      ip netns exec "$ns" true 2>/dev/null || usage "--launcher netns: no network namespace '$ns' (or no right to enter it)"
    done
    launch=() ;;
  *) usage "--launcher $launcher: srun, mpirun, mpiexec, local or netns" ;;
esac
[ -n "$rundir" ] || rundir=$(mktemp -d "${VCUDA_LAUNCH_DIR:-$PWD}/.vcuda-launch.XXXXXX") || usage "cannot create a run directory"
mkdir -p "$rundir" && chmod 700 "$rundir" || usage "cannot use run directory $rundir"
(umask 077; od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$rundir/token")
task_args=(--serve-task "$rundir" --launcher "$launcher" --ranks-per-node "$rpn" --server "$server"
           --start-timeout "$start_timeout")
[ -n "$bind" ] && task_args+=(--bind "$bind")
[ -n "$iface" ] && task_args+=(--iface "$iface")
[ "$remote_only" = 1 ] && task_args+=(--client-host "$(hostname)")
[ -n "$gpn" ] && task_args+=(--gpus-per-node "$gpn")
[ -n "$scheme" ] && task_args+=(--ucx)
[ -n "$server_opts" ] && task_args+=(--server-opts "$server_opts")
tpids=()
if [ "$launcher" = local ]; then
  for ((t = 0; t < ntasks; t++)); do
    VCUDA_LAUNCH_TASK=$t VCUDA_LAUNCH_LOCAL_TASK=$((t % rpn)) "$self" "${task_args[@]}" >"$rundir/task.$t.out" 2>&1 &
    tpids+=($!)
  done
elif [ "$launcher" = netns ]; then
  # Node k is namespace k with a UTS namespace named after it; the machine's GPUs are
  # shared out by node (local task = the global task number), so no two nodes serve
  # the same GPU while there are enough.
  for ((t = 0; t < ntasks; t++)); do
    ns=${netns[t / rpn]}
    VCUDA_LAUNCH_TASK=$t VCUDA_LAUNCH_LOCAL_TASK=$t ip netns exec "$ns" unshare --uts \
      sh -c 'hostname "$0" && exec "$@"' "$ns" "$self" "${task_args[@]}" >"$rundir/task.$t.out" 2>&1 &
    tpids+=($!)
  done
else
  "${launch[@]}" "$self" "${task_args[@]}" >"$rundir/launcher.out" 2>&1 &
  tpids+=($!)
fi
finish() {
  touch "$rundir/stop"
  for _ in $(seq 100); do kill -0 "${tpids[@]}" 2>/dev/null || break; sleep 0.1; done
  kill -TERM "${tpids[@]}" 2>/dev/null
  wait "${tpids[@]}" 2>/dev/null
  if [ "$keep" = 1 ]; then
    rm -f "$rundir/token"   # the servers are gone; the logs stay, the secret does not
    echo "vcuda-launch: run directory kept: $rundir" >&2
  else rm -rf "$rundir"; fi
}
trap finish EXIT
trap 'exit 143' TERM INT
deadline=$((SECONDS + start_timeout))
want="?"
while :; do
  # each task says how many servers it starts (gpus.T), then reports each (ep.T.G or failed.T.G)
  have=$(cd "$rundir" && ls | grep -cE '^(ep|failed)\.') || have=0
  if [ "$(cd "$rundir" && ls | grep -c '^gpus\.')" -ge "$ntasks" ]; then
    want=$(( $(cat "$rundir"/gpus.* | paste -sd+ -) ))
    [ "$have" -ge "$want" ] && break
  fi
  alive=0; for p in "${tpids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
  [ "$alive" = 1 ] || { echo "vcuda-launch: the launcher ended before every server reported:" >&2; cat "$rundir"/launcher.out "$rundir"/task.*.out 2>/dev/null | tail -5 >&2; break; }
  [ $SECONDS -lt $deadline ] || { echo "vcuda-launch: $have of $want servers reported within ${start_timeout} s" >&2; break; }
  sleep 0.1
done
for f in "$rundir"/failed.*; do [ -e "$f" ] && echo "vcuda-launch: server not started: $(cat "$f")" >&2; done
(cd "$rundir" && ls | grep '^where\.' | sort -t. -k2,2n | xargs -r cat)
servers=$(cd "$rundir" && ls | grep '^ep\.' | sort -t. -k2,2n -k3,3n | xargs -r cat | paste -sd, -)
if [ -z "$servers" ]; then
  why="no server started"
  [ "$remote_only" = 1 ] && [ "$want" = 0 ] && why="no server started: every task ran on the client's node $(hostname) (--remote-only; the job needs other nodes)"
  echo "vcuda-launch: $why" >&2
  printf '{"bench":"%s","status":"unsupported","reason":"vcuda-launch: %s"}\n' "$(basename "$1")" "$why"
  exit 77
fi
echo "vcuda-launch: $(echo "$servers" | tr , '\n' | wc -l) server(s) on $nodes node(s) via $launcher: $servers" >&2
# the job's token, not one the caller's environment may hold (VCUDA_TOKEN would win)
unset VCUDA_TOKEN
VCUDA_SERVERS=$servers VCUDA_TOKEN_FILE="$rundir/token" LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"

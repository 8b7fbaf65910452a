# shellcheck shell=bash
# Shell pieces shared by the scripts that start real daemons for tests
# (.ci/slurm-local.sh, .ci/cluster.sh).  Sourced, not run; the caller sets PROG (its name
# in messages) first.  Exit status 3 means "cannot run here" (not root, packages
# missing): callers' tests turn it into a skip that names the reason.
export PATH=$PATH:/usr/sbin:/sbin

cannot() { echo "$PROG: cannot start: $*" >&2; exit 3; }

need_root() { [ "$(id -u)" = 0 ] || cannot "needs root ($1)"; }

# need_cmds HINT CMD... : every CMD on PATH, or exit 3 naming the first missing one.
need_cmds() {
  local hint=$1 b; shift
  for b in "$@"; do command -v "$b" >/dev/null 2>&1 || cannot "$b not found ($hint)"; done
}

# free_ports N [ADDR]: N TCP ports free on ADDR (default 127.0.0.1), space-separated.
free_ports() {
  python3 - "$1" "${2:-127.0.0.1}" <<'PY'
import socket, sys
n, addr = int(sys.argv[1]), sys.argv[2]
s = [socket.socket() for _ in range(n)]
for x in s:
    x.bind((addr, 0))
print(*[x.getsockname()[1] for x in s])
PY
}

# Job ids unique across instances: Open MPI's shared-memory segments and Slurm's PMIx
# directories (/dev/shm, /tmp) are named by job id, and a killed job's are left behind.
first_job_id() { echo $(( ($(date +%s) % 600000) * 100 + RANDOM % 100 + 1 )); }

# start_munged DIR: munged with its own key and socket under DIR/munge, log in DIR/log.
# A unix socket on the filesystem is reachable from every network namespace.
start_munged() {
  local d=$1
  mkdir -p "$d/munge" "$d/log"
  dd if=/dev/urandom of="$d/munge/munge.key" bs=1024 count=1 status=none
  chmod 700 "$d/munge"; chmod 400 "$d/munge/munge.key"
  munged --force --key-file="$d/munge/munge.key" --socket="$d/munge/socket" \
    --pid-file="$d/munge/munged.pid" --log-file="$d/log/munged.log" --seed-file="$d/munge/seed" ||
    cannot "munged did not start (see $d/log/munged.log)"
}

# slurm_conf_common DIR CTLHOST CTLADDR CTLPORT SLURMDPORT: the slurm.conf lines every
# Slurm started here shares.  Why: proctrack/linuxproc and task/none need no cgroups
# (containers, CI); config_overrides lets a node declare more CPUs than the box has, so
# multi-rank MPI checks fit on a 2-core machine; no accounting database.
slurm_conf_common() {
  local d=$1 host=$2 addr=$3 p1=$4 p2=$5
  cat <<CONF
ClusterName=umstudy
SlurmctldHost=$host($addr)
SlurmctldPort=$p1
SlurmdPort=$p2
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$d/munge/socket
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool/%n
SlurmctldPidFile=$d/slurmctld.pid
SlurmctldLogFile=$d/log/slurmctld.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=600
FirstJobId=$(first_job_id)
SchedulerType=sched/backfill
CONF
}

# slurm_cancel_all CONF: cancel every job and wait (bounded) until none is left; a
# running job's slurmstepd outlives slurmd, so jobs go before daemons.
slurm_cancel_all() {
  SLURM_CONF=$1 scancel --quiet --user "$(id -un)" 2>/dev/null || true
  for _ in $(seq 20); do
    [ -z "$(SLURM_CONF=$1 squeue -h 2>/dev/null)" ] && break; sleep 0.5
  done
}

# stop_pidfiles [-w SECONDS] FILE...: TERM every process the FILEs name (all at once, so
# their shutdowns overlap), wait up to SECONDS (default 10) for them, KILL what is left,
# remove the FILEs.
stop_pidfiles() {
  local wait=10 f pid pids=()
  [ "${1:-}" = -w ] && { wait=$2; shift 2; }
  for f in "$@"; do
    [ -f "$f" ] || continue
    pid=$(cat "$f" 2>/dev/null || true)
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && pids+=("$pid")
    rm -f "$f"
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  for _ in $(seq $((wait * 5))); do
    kill -0 "${pids[@]}" 2>/dev/null || return 0   # kill -0 succeeds while any is alive
    sleep 0.2
  done
  kill -9 "${pids[@]}" 2>/dev/null || true
}

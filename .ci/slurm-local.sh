#!/usr/bin/env bash
# A real single-host Slurm (Debian's slurmctld + slurmd + munge) for tests, configured and
# run entirely under DIR, so it touches nothing system-wide and several can coexist.
#   .ci/slurm-local.sh start DIR   start munged, slurmctld, slurmd; print `export SLURM_CONF=...`
#   .ci/slurm-local.sh stop DIR    stop what `start DIR` started (by the pids it recorded)
#   .ci/slurm-local.sh run DIR -- CMD...   start, run CMD with SLURM_CONF set, stop; CMD's status
# Exit 3 with "slurm-local: cannot start: <reason>" where it cannot run (not root, packages
# missing): callers turn that into a skip that names the reason.
# Why these settings: proctrack/linuxproc and task/none need no cgroups (containers, CI);
# the node declares at least 8 CPUs (config_overrides) so that the 4- and 5-rank MPI
# checks fit on a 2-core box, as `local` oversubscribes them with mpirun.
set -euo pipefail
cmd=${1:-}; dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop|run DIR [-- CMD...]" >&2; exit 2; }
cannot() { echo "slurm-local: cannot start: $*" >&2; exit 3; }

start() {
  [ "$(id -u)" = 0 ] || cannot "needs root (slurmd runs jobs as their owner and must be root)"
  for b in munged slurmctld slurmd sbatch srun squeue scontrol; do
    command -v "$b" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin command -v "$b" >/dev/null 2>&1 ||
      cannot "$b not found (Debian: apt-get install slurmctld slurmd slurm-client munge; .ci/setup-system.sh does)"
  done
  export PATH=$PATH:/usr/sbin
  mkdir -p "$dir"/{munge,state,spool,log}
  dir=$(cd "$dir" && pwd)
  host=$(hostname -s)
  # munge: its own key and socket under DIR
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 700 "$dir/munge"; chmod 400 "$dir/munge/munge.key"
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/socket" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed" ||
    cannot "munged did not start (see $dir/log/munged.log)"
  # two free TCP ports (other Slurm instances may run beside this one)
  read -r p1 p2 < <(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1", 0)) for x in s]; print(*[x.getsockname()[1] for x in s])')
  cpus=$(nproc); [ "$cpus" -ge 8 ] || cpus=8
  # Job ids unique across instances: Open MPI's shared-memory segments and Slurm's PMIx
  # directories (/dev/shm, /tmp) are named by job id, and a killed job's are left behind.
  first_id=$(( ($(date +%s) % 600000) * 100 + RANDOM % 100 + 1 ))
  mem=$(awk '/MemTotal/ {print int($2/1024*0.8)}' /proc/meminfo)
  cat > "$dir/slurm.conf" <<CONF
ClusterName=umstudy
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$p1
SlurmdPort=$p2
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
MinJobAge=600
FirstJobId=$first_id
SchedulerType=sched/backfill
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
  export SLURM_CONF=$dir/slurm.conf
  slurmctld -f "$SLURM_CONF" || cannot "slurmctld did not start (see $dir/log/slurmctld.log)"
  slurmd -f "$SLURM_CONF" || cannot "slurmd did not start (see $dir/log/slurmd.log)"
  for _ in $(seq 60); do
    state=$(sinfo -h -n "$host" -o %t 2>/dev/null || true)
    case "$state" in idle*|mix*|alloc*) echo "export SLURM_CONF=$SLURM_CONF"; return 0;; esac
    sleep 1
  done
  tail -5 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
  stop; cannot "node $host not idle after 60 s (state: ${state:-none})"
}

stop() {
  # jobs first (a running job's slurmstepd outlives slurmd), then the daemons
  if [ -f "$dir/slurm.conf" ] && [ -f "$dir/slurmctld.pid" ]; then
    SLURM_CONF=$dir/slurm.conf scancel --quiet --user "$(id -un)" 2>/dev/null || true
    for _ in $(seq 20); do
      [ -z "$(SLURM_CONF=$dir/slurm.conf squeue -h 2>/dev/null)" ] && break; sleep 0.5
    done
  fi
  for f in slurmd.pid slurmctld.pid munge/munged.pid; do
    [ -f "$dir/$f" ] || continue
    pid=$(cat "$dir/$f"); kill "$pid" 2>/dev/null || true
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    rm -f "$dir/$f"
  done
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  run)
    shift 2; [ "${1:-}" = -- ] && shift
    start >/dev/null
    export SLURM_CONF=$dir/slurm.conf
    trap stop EXIT
    rc=0; "$@" || rc=$?
    exit $rc ;;
  *) echo "usage: $0 start|stop|run DIR [-- CMD...]" >&2; exit 2 ;;
esac

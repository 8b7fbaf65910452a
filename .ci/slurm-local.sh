#!/usr/bin/env bash
# A real single-host Slurm (Debian's slurmctld + slurmd + munge) for tests, configured and
# run entirely under DIR, so it touches nothing system-wide and several can coexist.
#   .ci/slurm-local.sh start DIR   start munged, slurmctld, slurmd; print `export SLURM_CONF=...`
#   .ci/slurm-local.sh stop DIR    stop what `start DIR` started (by the pids it recorded)
#   .ci/slurm-local.sh run DIR -- CMD...   start, run CMD with SLURM_CONF set, stop; CMD's status
# Exit 3 with "slurm-local: cannot start: <reason>" where it cannot run (not root, packages
# missing): callers turn that into a skip that names the reason.
# The settings every Slurm started here shares, and why, are in .ci/lib.sh; the node
# declares at least 8 CPUs so that the 4- and 5-rank MPI checks fit on a 2-core box, as
# `local` oversubscribes them with mpirun.
set -euo pipefail
cmd=${1:-}; dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop|run DIR [-- CMD...]" >&2; exit 2; }
PROG=slurm-local
. "$(dirname "$0")/lib.sh"

start() {
  need_root "slurmd runs jobs as their owner and must be root"
  need_cmds "Debian: apt-get install slurmctld slurmd slurm-client munge; .ci/setup-system.sh does" \
    munged slurmctld slurmd sbatch srun squeue scontrol python3
  mkdir -p "$dir"/{state,spool,log}
  dir=$(cd "$dir" && pwd)
  host=$(hostname -s)
  start_munged "$dir"
  # two free TCP ports (other Slurm instances may run beside this one)
  read -r p1 p2 < <(free_ports 2)
  cpus=$(nproc); [ "$cpus" -ge 8 ] || cpus=8
  mem=$(awk '/MemTotal/ {print int($2/1024*0.8)}' /proc/meminfo)
  { slurm_conf_common "$dir" "$host" 127.0.0.1 "$p1" "$p2"
    cat <<CONF
SlurmdPidFile=$dir/slurmd.pid
SlurmdLogFile=$dir/log/slurmd.log
MpiDefault=none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
  } > "$dir/slurm.conf"
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
    slurm_cancel_all "$dir/slurm.conf"
  fi
  stop_pidfiles "$dir/slurmd.pid" "$dir/slurmctld.pid"
  stop_pidfiles "$dir/munge/munged.pid"
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

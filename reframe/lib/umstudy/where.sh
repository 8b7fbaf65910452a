#!/bin/sh
# where.sh [--gpus] -- PROGRAM [ARGS...]
#
# Started by the launcher as each rank of a multi-rank check (checks.UmstudyRunBase puts
# it before the program): prints one JSON line saying which rank this is and which node
# it runs on (and, with --gpus, the GPUs that node shows and CUDA_VISIBLE_DEVICES), then
# becomes PROGRAM, so the layout recorded is the measured run's own.  The check compares
# the lines of all ranks with the layout its experiment needs (umstudy.placement).
gpus=0
case ${1:-} in --gpus) gpus=1; shift ;; esac
[ "${1:-}" = -- ] && shift
if [ $# -eq 0 ]; then
  echo "where.sh: no program given (where.sh [--gpus] -- PROGRAM [ARGS...])" >&2
  exit 2
fi
# The rank as the launcher that started this process numbers it (mpirun inside a Slurm
# job leaves SLURM_PROCID=0 in every rank, so the MPI's own variables come first).
rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-${PALS_RANKID:-${SLURM_PROCID:-}}}}}
size=${OMPI_COMM_WORLD_SIZE:-${PMI_SIZE:-${PALS_SIZE:-${SLURM_NTASKS:-}}}}
case $rank in ''|*[!0-9]*) rank=null ;; esac
case $size in ''|*[!0-9]*) size=null ;; esac
host=$(hostname 2>/dev/null || uname -n)
extra=
if [ "$gpus" = 1 ]; then
  # UUIDs only: names hold spaces and parentheses, the UUID says which device it is.
  list=$(nvidia-smi -L 2>/dev/null | sed -n 's/.*(UUID: \([^)]*\)).*/"\1"/p' | paste -sd, -)
  extra=",\"cuda_visible_devices\":\"${CUDA_VISIBLE_DEVICES:-}\",\"gpus\":[${list}]"
fi
printf '{"bench":"placement","rank":%s,"size":%s,"host":"%s"%s}\n' "$rank" "$size" "$host" "$extra"
exec "$@"

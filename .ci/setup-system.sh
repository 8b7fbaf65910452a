#!/usr/bin/env bash
# Installs what umstudy needs from the distribution (as root on Debian/Ubuntu), or says
# exactly what is missing and how to get it (elsewhere: load the modules named).
set -euo pipefail
need=()
have() { command -v "$1" >/dev/null 2>&1; }
have cmake   || need+=(cmake)
have g++     || need+=(g++)
have make    || need+=(make)
have python3 || need+=(python3)
# MPI: the halo stencil, the coarray runtime and DLM (on a site: the MPI module).
have mpicc   || need+=(libopenmpi-dev openmpi-bin)
# The venv module only matters where make creates .venv (not with PYTHON=...).
[ "${UMSTUDY_NEED_VENV:-0}" = 1 ] && ! python3 -c 'import venv, ensurepip' 2>/dev/null && need+=(python3-venv)
# Optional, installed where we can: GCC's OpenACC offloading (the himeno-acc build) and
# ARMCI-MPI (the xmp-coarray armci backend), Chromium (renders the report in a test).
optional=()
if have apt-get && [ "$(id -u)" = 0 ]; then
  dpkg -s gcc-12-offload-nvptx >/dev/null 2>&1 || optional+=(gcc-12-offload-nvptx)
  dpkg -s libarmci-mpi-dev >/dev/null 2>&1 || optional+=(libarmci-mpi-dev)
  # headless Chromium: the report's rendering test (skipped, saying so, without it)
  have chromium || dpkg -s chromium >/dev/null 2>&1 || optional+=(chromium)
  # UCX: vcuda's ucx:// transport (and its tests)
  dpkg -s libucx-dev >/dev/null 2>&1 || optional+=(libucx-dev)
  # Slurm + munge: the single-host Slurm `make test` starts (.ci/slurm-local.sh)
  for p in slurmctld slurmd slurm-client munge; do dpkg -s $p >/dev/null 2>&1 || optional+=($p); done
  # Grid Engine: the second scheduler of the cluster in a box (.ci/cluster.sh runs a cell
  # of its own; the packages' default cell is set up for this host, as Debian asks)
  for p in gridengine-master gridengine-exec gridengine-client; do dpkg -s $p >/dev/null 2>&1 || optional+=($p); done
fi
if [ ${#need[@]} -eq 0 ] && [ ${#optional[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" = 0 ] && have apt-get; then
  echo "setup: apt-get install ${need[*]} ${optional[*]}"
  # Without network (air-gapped sites) only a missing required package is fatal.
  DEBIAN_FRONTEND=noninteractive apt-get update -qq || [ ${#need[@]} -eq 0 ]
  [ ${#need[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  # Grid Engine's packages ask for the master host and whether to set up a cell: answered
  # here, so that an install without a terminal neither stops nor fails.
  if [[ " ${optional[*]} " == *" gridengine-"* ]] && have debconf-set-selections; then
    for p in gridengine-common gridengine-master gridengine-exec gridengine-client; do
      printf '%s shared/gridenginemaster string %s\n%s shared/gridenginecell string default\n%s shared/gridengineconfig boolean true\n' \
        "$p" "$(hostname)" "$p" "$p"
    done | debconf-set-selections
  fi
  [ ${#optional[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${optional[@]}" >/dev/null 2>&1 ||
    echo "setup: optional ${optional[*]} not installed: the OpenACC variant / armci backend / vcuda UCX transport will not be built, the Slurm and cluster tests will skip" >&2
else
  echo "setup: missing: ${need[*]}" >&2
  echo "  Debian/Ubuntu: sudo apt-get install ${need[*]}" >&2
  echo "  HPC site: load modules providing them, e.g. 'module load cmake gcc python openmpi'" >&2
  exit 1
fi

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
# The venv module only matters where make creates .venv (not with PYTHON=...).
[ "${UMSTUDY_NEED_VENV:-0}" = 1 ] && ! python3 -c 'import venv, ensurepip' 2>/dev/null && need+=(python3-venv)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && have apt-get; then
  echo "setup: apt-get install ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
else
  echo "setup: missing: ${need[*]}" >&2
  echo "  Debian/Ubuntu: sudo apt-get install ${need[*]}" >&2
  echo "  HPC site: load modules providing them, e.g. 'module load cmake gcc python'" >&2
  exit 1
fi

# Source this file (from anywhere) to use umstudy's ReFrame setup:
#   . reframe/env.sh && reframe -c reframe/ -r --system miyabi
_umstudy_here=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)
export UMSTUDY_ROOT=$(dirname "$_umstudy_here")
export RFM_CONFIG_FILES="$_umstudy_here/config/umstudy.py"
export PYTHONPATH="$_umstudy_here/lib${PYTHONPATH:+:$PYTHONPATH}"
if [ -z "${VIRTUAL_ENV:-}" ] && [ -f "$UMSTUDY_ROOT/.venv/bin/activate" ]; then
  . "$UMSTUDY_ROOT/.venv/bin/activate"
fi
unset _umstudy_here

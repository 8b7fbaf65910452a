#!/usr/bin/env bash
# Integration run on a GPU machine: the whole suite through `make run`, with its
# provenance bundle and the full report, then each claim's verdict as a short table.
#   OUT=/tmp/out .ci/device-integ.sh quick            # every component's quick checks (~5 min with the build)
#   OUT=/tmp/out .ci/device-integ.sh paper 'REGEX'     # paper size for the checks REGEX names
# Each step stays under 10 minutes; run paper sizes in slices (see ARTIFACT.md E), e.g.
#   'Himeno'  'UmbModes|UmbFraction|UmbStride'  'UmbHalo'  'UmbBaseline|UmbPatterns|UmbMigration'
# and the report judges every run report present (a later run of a case replaces an earlier
# one), so call it on one warm machine.  Python: $PYTHON if it has ReFrame, else .venv made
# from the wheels in .whl/ (carry it), else from the network.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:?set OUT to the directory for the results}
STEP=${1:?usage: device-integ.sh quick | paper REGEX}
mkdir -p "$OUT"
cd "$ROOT"

PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
if ! "$PYTHON" -c 'import reframe, yaml' 2>/dev/null; then
  python3 -m venv "$ROOT/.venv" && PYTHON=$ROOT/.venv/bin/python
  if [ -d "$ROOT/.whl" ]; then
    "$PYTHON" -m pip install -q --no-index -f "$ROOT/.whl" -r reframe/requirements.txt
  else
    "$PYTHON" -m pip install -q -r reframe/requirements.txt
  fi
fi

rc=0
case "$STEP" in
  quick) make run PYTHON="$PYTHON" JOBS="$(nproc)" > "$OUT/make-run-quick.log" 2>&1 || rc=$? ;;
  paper) make run PYTHON="$PYTHON" JOBS="$(nproc)" SIZE=paper CHECKS="${2:?paper needs a check regex}" \
           RFMFLAGS="${RFMFLAGS:--S trials=1}" > "$OUT/make-run-paper.log" 2>&1 || rc=$? ;;
  *) echo "unknown step $STEP" >&2; exit 2 ;;
esac
echo "make run ($STEP): exit $rc" | tee "$OUT/summary.txt"

# every bundle must verify against its own hash
for b in output/provenance/*/; do
  [ -d "$b" ] || continue
  h=$("$PYTHON" analysis/provenance.py --verify "$b") && echo "provenance $(basename "$b") $h" >> "$OUT/summary.txt" ||
    { echo "provenance $(basename "$b") DOES NOT VERIFY" >> "$OUT/summary.txt"; rc=1; }
done

cp -r output/report "$OUT/report" 2>/dev/null
mkdir -p "$OUT/reports" && cp output/reports/*.json output/reports/*.provenance "$OUT/reports/" 2>/dev/null
tar -C output -czf "$OUT/provenance.tar.gz" provenance 2>/dev/null

# a short table: claim x system, verdict, measured vs expected
"$PYTHON" - "$OUT" <<'EOF' >> "$OUT/summary.txt"
import json, os, sys
v = json.load(open('output/report/verdicts.json'))
print('counts:', v['counts'])
for r in v['verdicts']:
    print(f"{r['id']:10} {r['system']:8} {r['verdict']:20} measured={r['measured']} expected={r['expected']}"
          f"  ({r['reason'][:100]})")
EOF
cat "$OUT/summary.txt"
exit $rc

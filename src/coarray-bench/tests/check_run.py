"""Runs one coarray-bench program and judges it by its exit status and its JSON lines.

    check_run.py [--status N] [--expect METRIC]... [--stderr REGEX] -- COMMAND...

Passes when the exit status is N (default 0), every stdout line is a JSON record of a
cab-* bench, each --expect metric is among them, and (status 0) every record that
carries `verified` says true: a verification failure fails the test twice over (the
program exits 1, and its records say verified: false).  --stderr REGEX must match stderr.
"""
import argparse
import json
import re
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument('--status', type=int, default=0)
ap.add_argument('--expect', action='append', default=[])
ap.add_argument('--stderr')
ap.add_argument('command', nargs=argparse.REMAINDER)
a = ap.parse_args()
cmd = a.command[1:] if a.command[:1] == ['--'] else a.command

r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
sys.stdout.write(r.stdout)
sys.stderr.write(r.stderr)
failures = []
if r.returncode != a.status:
    failures.append(f'exit status {r.returncode}, expected {a.status}')
records = []
for line in r.stdout.splitlines():
    try:
        records.append(json.loads(line))
    except json.JSONDecodeError:
        failures.append(f'stdout line is not JSON: {line[:120]!r}')
if not all(str(rec.get('bench', '')).startswith('cab-') for rec in records):
    failures.append('a stdout record is not from a cab-* bench')
metrics = {rec.get('metric') for rec in records}
for m in a.expect:
    if m not in metrics:
        failures.append(f'no "{m}" record')
if a.status == 0:
    bad = [rec for rec in records if rec.get('verified') is not True and 'verified' in rec]
    if bad:
        failures.append(f'{len(bad)} record(s) not verified, e.g. {bad[0]}')
    if not any('metric' in rec for rec in records):
        failures.append('no measurement records')
if a.stderr and not re.search(a.stderr, r.stderr):
    failures.append(f'stderr does not match {a.stderr!r}')
for f in failures:
    print('check_run: FAIL:', f)
sys.exit(1 if failures else 0)

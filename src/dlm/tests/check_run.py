"""Runs one command and judges its exit status, stderr and stdout.

    check_run.py [--status N] [--stderr REGEX] [--stdout REGEX] [--stdout-empty]
                 [--probe SHELL-COMMAND] -- COMMAND...

With --probe, a probe that fails makes the test a skip (exit 77: what it needs is not
there, e.g. a build tree another user cannot enter).  Passes when the exit status is N (default 0), stderr and stdout match their REGEX (if
given) and, with --stdout-empty, nothing reached stdout (bad input must not look like
results)."""
import argparse
import re
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument('--status', type=int, default=0)
ap.add_argument('--stderr')
ap.add_argument('--stdout')
ap.add_argument('--stdout-empty', action='store_true')
ap.add_argument('--probe')
ap.add_argument('command', nargs=argparse.REMAINDER)
a = ap.parse_args()
cmd = a.command[1:] if a.command[:1] == ['--'] else a.command
if a.probe and subprocess.run(['sh', '-c', a.probe]).returncode != 0:
    print(f'skipped: the probe failed: {a.probe}')
    sys.exit(77)
r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
sys.stdout.write(r.stdout)
sys.stderr.write(r.stderr)
failures = []
if r.returncode != a.status:
    failures.append(f'exit status {r.returncode}, expected {a.status}')
if a.stderr and not re.search(a.stderr, r.stderr):
    failures.append(f'stderr does not match {a.stderr!r}')
if a.stdout and not re.search(a.stdout, r.stdout):
    failures.append(f'stdout does not match {a.stdout!r}')
if a.stdout_empty and r.stdout.strip():
    failures.append('something reached stdout')
for f in failures:
    print('check_run: FAIL:', f)
sys.exit(1 if failures else 0)

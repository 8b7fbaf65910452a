"""The CLI contract every umstudy program keeps (src/support/include/umstudy/support.h),
checked the same way for each component's binaries:
  --help exits 0 and lists options; bad input exits 2 with a message on stderr and
  nothing on stdout; a small run exits 0 (or 77 with an `unsupported` line and its
  reason, where allowed) and prints only JSON records of its bench.
A component's test_cli.py passes its own bad inputs and small run, then adds checks on
the records this returns."""
import json
import os
import subprocess

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1')
COMMON_BAD = [['--bogus'], ['stray']]


class Contract:
    def __init__(self, exe, launcher=()):
        self.exe, self.launcher = exe, list(launcher)
        self.name = os.path.basename(exe)
        self.failures = []

    def run(self, *args):
        return subprocess.run([*self.launcher, self.exe, *args], capture_output=True, text=True,
                              timeout=600, env=ENV)

    def expect(self, cond, what):
        if not cond:
            self.failures.append(what)
            print('FAIL:', self.name, what)

    def check(self, bad, small, allow_unsupported=False, bench_prefix=None):
        """Runs the contract; returns (exit status of the small run, its JSON records)."""
        r = self.run('--help')
        self.expect(r.returncode == 0 and '--' in r.stdout, f'--help exits 0 and lists options (rc={r.returncode})')
        for args in bad + COMMON_BAD:
            r = self.run(*args)
            self.expect(r.returncode == 2 and 'error' in r.stderr.lower() and r.stdout.strip() == '',
                        f'{args} exits 2 with a message and no results (rc={r.returncode}, out={r.stdout[:200]!r})')
        r = self.run(*small)
        ok = (0, 77) if allow_unsupported else (0,)
        self.expect(r.returncode in ok, f'a small run exits {" or ".join(map(str, ok))} '
                                        f'(rc={r.returncode}: {r.stderr[-400:]})')
        records = []
        for line in r.stdout.splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                self.expect(False, f'stdout line is not JSON: {line[:120]!r}')
        prefix = bench_prefix or self.name
        self.expect(records and all(str(l.get('bench', '')).startswith(prefix) for l in records),
                    f'every stdout line is a {prefix} JSON record')
        if r.returncode == 77:
            self.expect(any(l.get('status') == 'unsupported' and l.get('reason') for l in records),
                        'exit 77 comes with an unsupported line and its reason')
            print(f'{self.name}: cannot run here, checked the exit-77 path:',
                  next((l['reason'] for l in records if l.get('reason')), '?'))
        else:
            self.expect(not any(l.get('status') in ('error', 'mismatch') for l in records),
                        'no error or mismatch lines')
            self.expect(any('metric' in l and 'unit' in l for l in records),
                        'at least one measurement with a unit')
        return r.returncode, records

    def exit(self):
        raise SystemExit(1 if self.failures else 0)

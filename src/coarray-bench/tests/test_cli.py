"""CLI contract of every coarray-bench binary (src/support/tests/cli_contract.py), plus:
every record verified and carrying the backend and image count.

    test_cli.py BINARY [LAUNCHER ARGS...]   (the program runs under the launcher)
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'support', 'tests'))
from cli_contract import Contract  # noqa: E402

c = Contract(sys.argv[1], sys.argv[2:])
kind = c.name.split('-', 1)[1]       # cab-<kind>
SMALL = {
    'pingpong': ['--min', '1', '--max', '1K', '--loop', '5'],
    'is': ['--class', 'S'],
    'cg': ['--class', 'S'],
}
BAD = {
    'pingpong': [['--loop', '0'], ['--min', '3'], ['--min', '64', '--max', '8'],
                 ['--ops', 'teleport'], ['--ops', ','], ['--max', 'x'],
                 ['--protocol', 'teleport'], ['--protocol', ','], ['--check-rounds', '-1']],
    'is': [['--class', 'Z'], ['--variant', 'telepathy'], ['--class'], ['--trials', '0']],
    'cg': [['--class', 'D'], ['--variant', 'allreduce'], ['--variant'], ['--trials', '1001']],
}
rc, records = c.check(BAD[kind], SMALL[kind])
c.expect(all(r.get('verified', True) is True for r in records), 'every record is verified')
c.expect(all('backend' in r.get('params', {}) and 'images' in r.get('params', {}) for r in records),
         'records carry the backend and image count')
c.exit()

"""CLI contract of every dlm benchmark (src/support/tests/cli_contract.py), plus: each
record carries the engine and capacities, and every check that ran says verified.

    test_cli.py BINARY LAUNCHER ARGS...   (the program runs under the launcher)
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'support', 'tests'))
from cli_contract import Contract  # noqa: E402

c = Contract(sys.argv[1], sys.argv[2:])
kind = c.name.split('-', 1)[1]  # dlm-<kind>
DLM = ['--page-size', '16K', '--capacity', '1M', '--mem-capacity', '16M', '--threads', '2']
SMALL = {
    'micro': ['--elements', '300000', '--threads', '1,2'] + DLM[:6],
    'stencil': ['--nx', '16', '--ny', '16', '--ratios', '0.5,2', '--check'] + DLM,
    'stream': ['--ratios', '0.5,2', '--ntimes', '2', '--bw-reps', '2'] + DLM,
}
# Each case starts an MPI job (~1 s): the configuration errors have tests of their
# own (dlm.config.*); here, one of each kind per program.
COMMON_BAD = [['--engine', 'r99'], ['--threads', '1,,2']]
BAD = {
    'micro': [['--elements', '100000000000'] + DLM],
    'stencil': [['--steps', '6', '--tblock', '4'], ['--ratios', '0.5,0.0001'] + DLM],
    'stream': [['--ratios', 'a'], ['--ratios', '0.5,64'] + DLM],
}
rc, records = c.check(BAD[kind] + COMMON_BAD, SMALL[kind])
c.expect(all({'engine', 'page_size', 'capacity', 'memory_ranks'} <= set(r.get('params', {})) for r in records),
         'records carry the engine, page size, capacity and memory ranks')
c.expect(all(r.get('verified', True) is True for r in records), 'every checked record is verified')
c.exit()

"""CLI contract of every umbench binary (src/support/tests/cli_contract.py): a small
run either succeeds or, with no GPU here, exits 77 with an `unsupported` line and its
reason.

    test_cli.py BINARY [MPIEXEC ARGS...]   (the halo programs run under MPIEXEC)
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'support', 'tests'))
from cli_contract import Contract  # noqa: E402

c = Contract(sys.argv[1], sys.argv[2:])
kind = c.name.split('-')[1]          # umb-<kind>[-acc-<mode>]
SMALL = {
    'modes': ['--size', '1M'],
    'fraction': ['--size', '1M', '--step', '25'],
    'stride': ['--size', '1M', '--min', '4K', '--max', '16K', '--step', '4K'],
    'halo': ['--n', '64', '--iterations', '2', '--verify'],
    'baseline': ['--size', '1M', '--reps', '3', '--trials', '2'],
    'patterns': ['--size', '1M', '--reps', '3', '--trials', '1', '--alloc', 'managed'],
    'migration': ['--size', '1M', '--reps', '2', '--trials', '1', '--alloc', 'managed'],
}
BAD = {
    'modes': [['--size', '0'], ['--size', '1Q'], ['--modes', 'telepathy'], ['--size', '1001']],
    'fraction': [['--step', '0'], ['--step', 'x']],
    'stride': [['--min', '12'], ['--min', '64K', '--max', '4K']],
    'halo': [['--n', '63'], ['--packs', 'fpga'], ['--modes', 'psychic'], ['--n', '4096', '--verify']],
    'baseline': [['--reps', '0'], ['--trials', '-3']],
    'patterns': [['--alloc', 'magic'], ['--reps', '0']],
    'migration': [['--alloc', 'magic'], ['--reps', 'x']],
}
# Every umbench binary shares the P000/P001 option `--device`, which needs a value.
c.check(BAD[kind] + [['--device']], SMALL[kind], allow_unsupported=True, bench_prefix='umb-')
c.exit()

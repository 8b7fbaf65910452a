"""coarray checks (P002): XMP coarray ping-pong and NPB IS/CG over the runtime's
backends (mpi3 | armci | gasnet), beside two-sided MPI and raw MPI-3 RMA baselines.

A backend the build lacks is skipped before any rank starts (the build's runtime lists
its backends; the program itself would exit 77 saying so).  Ranks
are one per node on clusters, as the paper ran them; on `local` all ranks share the
machine (mpirun --oversubscribe), and rank counts above max(4, cores) are skipped.
Sizes: quick = NPB class S at 2 and 4 ranks, one trial, ping-pong LOOP 30; paper =
class C at 2..32 ranks, best of 5 trials, LOOP 1000 (the paper's).  `-S npb_class=A`
runs another class, `-S trials=N` another trial count.
"""
import os
import sys

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, run_before, sanity_function, variable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'lib'))
from umstudy.checks import UmstudyMetricTest, cmake_cache, mpirun_on_local, one_node, size  # noqa: E402

MODE = size()
SIZES = {
    # quick: 30 round trips per size, 1 B .. 4 MiB as in the paper; a receiver waiting 3 s
    # (not 10) calls the racy protocol hung, so a deadlocked run costs seconds, not tens.
    'pingpong': {'quick': ['--loop', '30', '--hang-timeout', '3'], 'paper': ['--loop', '1000']},
    'class': {'quick': 'S', 'paper': 'C'},
    'ranks': {'quick': [2, 4], 'paper': [2, 4, 8, 16, 32]},
    'trials': {'quick': 1, 'paper': 5},      # P002: best of 5 trials
}
BACKENDS = ['mpi3', 'armci', 'gasnet']


class CabBase(UmstudyMetricTest):
    component = 'coarray-bench'
    keep_records = True
    cpu_only = True
    trials = variable(int, value=SIZES['trials'][MODE])   # the best is reported
    # Subclasses define `backend` (none for the two-sided MPI baselines) and `ranks`
    # (2 for the ping-pong), as parameters or plain values.

    @run_after('setup')
    def set_tasks(self):
        self.ranks = getattr(self, 'ranks', 2)
        self.num_tasks = self.ranks
        part = self.current_partition
        if one_node(part):
            self.num_tasks_per_node = self.ranks
        else:
            self.num_tasks_per_node = 1   # one image per node, as P002
        self.num_cpus_per_task = 1
        self.env_vars = {'OMP_NUM_THREADS': '1'}
        if getattr(self, 'backend', ''):
            self.env_vars['XMPC_BACKEND'] = self.backend

    @run_before('run')
    def fit_partition(self):
        part = self.current_partition
        self.skip_unless('mpi' in part.features, 'no MPI on this partition')
        if one_node(part):
            cores = part.extras.get('facts', {}).get('cpu', {}).get('cores', 1)
            self.skip_unless(self.ranks <= max(4, cores),
                             f'{self.ranks} ranks on {cores} cores of one machine would say nothing')
        built = self.xmpc_backends()
        if getattr(self, 'backend', '') and built is not None:
            # Known from the build: no launch of N ranks only to hear each exit 77.
            self.skip_unless(self.backend in built,
                             f'XMPC_BACKEND={self.backend}: backend not built (this build has: '
                             f"{', '.join(built) or 'none'}; the build's 'umstudy: xmpc-{self.backend}' line says why)")
        if getattr(self, 'backend', '') == 'gasnet' and self.gasnet_conduit() == 'smp':
            # GASNet's smp conduit starts its images itself (one process forks the rest).
            self.num_tasks = self.num_tasks_per_node = 1
            self.env_vars['GASNET_PSHM_NODES'] = str(self.ranks)
        else:
            mpirun_on_local(self)

    def xmpc_backends(self):
        """The backends the build fixture's runtime has (its xmpcConfig.cmake), or None
        where that file is not there; None in a dry run too, whose job scripts show every
        backend whatever this machine built (the program says so itself on the site)."""
        if self.is_dry_run():
            return None
        path = os.path.join(self.build.builddir, 'xmp-coarray', 'xmpcConfig.cmake')
        if os.path.exists(path):
            for line in open(path):
                if line.startswith('set(XMPC_BACKENDS '):
                    return [b for b in line.split('"')[1].split(';') if b]
        return None

    def gasnet_conduit(self):
        """The conduit the build fixture linked (from its CMake cache), if any; none in a
        dry run, whose scripts do not depend on what this machine built."""
        if self.is_dry_run():
            return None
        return cmake_cache(self.build.builddir).get('XMPC_GASNET_CONDUIT')


@rfm.simple_test
class CabPingPong(CabBase):
    descr = ('P002 figs. 2/3: coarray put/get ping-pong, 1 B..4 MB, race-free (flag) and the '
             "paper's racy protocol, with the raw MPI-3 RMA baseline")
    valid_systems = ['+mpi']
    bench = 'cab-pingpong'
    backend = parameter(BACKENDS)

    @run_after('setup')
    def set_command(self):
        self.executable = self.program('cab-pingpong')
        # flag: the race-free default (ops put, raw-put); paper: P002 fig. 2's protocol,
        # which races (ops put-paper, raw-put-paper), kept so the paper's numbers compare.
        # --stream-count: P002-C2's put vs get transfer capability, no flags or barriers.
        self.executable_opts = (SIZES['pingpong'][self.size] + ['--trials', str(self.trials),
                                                                '--protocol', 'flag,paper',
                                                                '--stream-count', '32'] +
                                (['--raw'] if self.backend != 'gasnet' else []))

    def named_metrics(self):
        out = {}
        raw = self.backend != 'gasnet'
        ops = ('put', 'put-paper', 'get') + (('raw-put', 'raw-put-paper', 'raw-get') if raw else ())
        # The paper protocol's race can deadlock it: the program then reports a `hung`
        # record for that op and size (a race-free op that hangs fails the run instead),
        # and that size's paper variables are left out rather than failing the check.
        hung = set() if self.is_dry_run() else {  # a dry run has no output to read
            (r.get('op'), r.get('bytes')) for r in self.records().evaluate()
            if r.get('metric') == 'hung' and r.get('racy') is True}
        for op in ops:
            key = op.replace('-', '_')
            if (op, 8) not in hung:
                out[f'{key}_lat8_us'] = ('latency', 'us', {'op': op, 'bytes': 8})
            if (op, 4 << 20) not in hung:
                out[f'{key}_bw4m'] = ('bandwidth', 'MB/s', {'op': op, 'bytes': 4 << 20})
            if 'put' in op:  # rounds whose payload was not the one sent (every byte checked)
                out[f'{key}_torn_rounds'] = ('torn_rounds', 'rounds', {'op': op})
        for op in ('put', 'get'):  # one-way streams of 4 MB transfers (P002-C2)
            out[f'{op}_stream_bw4m'] = ('stream_bandwidth', 'MB/s', {'op': op, 'bytes': 4 << 20})
        if raw:  # same protocol on both sides of each ratio
            out['put_lat8_over_raw'] = ('put_lat8_over_raw', 'ratio', {})
            out['put_bw4m_over_raw'] = ('put_bw4m_over_raw', 'ratio', {})
            if not any(op.endswith('put-paper') and size == 8 for op, size in hung):
                out['put_lat8_over_raw_paper'] = ('put_lat8_over_raw_paper', 'ratio', {})
        return out


class CabNpb(CabBase):
    """One NPB kernel run: class, ranks, variant (set by each subclass)."""
    ranks = parameter(SIZES['ranks'][MODE])
    npb_class = variable(str, value=SIZES['class'][MODE])

    @run_after('setup')
    def set_command(self):
        self.executable = self.program(self.bench)
        self.executable_opts = ['--class', self.npb_class, '--variant', self.variant,
                                '--trials', str(self.trials)]

    def named_metrics(self):
        return {'mops': ('mops', 'Mop/s', {}), 'time': ('time', 's', {}),
                'comm_share': ('comm_share', '%', {})}

    @sanity_function
    def verified(self):
        # A clean exit and NPB's own verification: the result line must say so.
        recs = self.records()
        return sn.all([
            sn.assert_eq(self.job.exitcode, 0, msg='exit code {0}, expected {1}'),
            sn.assert_true(sn.any(r.get('metric') == 'mops' and r.get('verified') is True
                                  for r in recs.evaluate()), msg='NPB verification did not pass'),
        ])


@rfm.simple_test
class CabIs(CabNpb):
    descr = 'P002 IS: key exchange by coarray puts (+ the displacement gmove)'
    valid_systems = ['+mpi']
    bench = 'cab-is'
    variant = 'coarray'
    backend = parameter(BACKENDS)


@rfm.simple_test
class CabIsMpi(CabNpb):
    descr = 'P002 IS baseline: the original MPI_Alltoallv key exchange'
    valid_systems = ['+mpi']
    bench = 'cab-is'
    variant = 'mpi'


@rfm.simple_test
class CabCg(CabNpb):
    descr = 'P002 CG local view: q reduced by coarray gets (fig. 7) or put-accumulate (sec. 5.2)'
    valid_systems = ['+mpi']
    bench = 'cab-cg'
    backend = parameter(BACKENDS)
    variant = parameter(['get', 'putacc'])


@rfm.simple_test
class CabCgMpi(CabNpb):
    descr = 'P002 CG baseline: two-sided MPI reduction'
    valid_systems = ['+mpi']
    bench = 'cab-cg'
    variant = 'mpi'

"""dlm checks (P004): remote paging over MPI with the engines r3 | r58 | r77 | uffd, on
the paper's three benchmarks.  Everything is CPU + MPI, so every check runs on `local`.

One MPI job per check: rank 0 computes (OpenMP threads), ranks 1.. are memory ranks
(one per node on clusters, as P004's memory nodes; local processes on `local`).  Each
program sweeps inside one run (thread counts, problem/capacity ratios), and the checks
turn the sweep points the claims need into performance variables; the figures use all
of them (keep_records).

Sizes (UMSTUDY_SIZE):
  quick  micro 2^20 elements (8 MiB) over a 3 MiB capacity, 64 KiB pages, threads
         1,2,4; stencil 64x64 planes over 4 MiB; STREAM over 8 MiB, 512 KiB pages.
         Every ratio above 1 pages with every engine; seconds per case.
  paper  micro as fig. 2.2: 2^28 elements (2 GiB), 800 MiB capacity, 1 MiB pages,
         threads 1..16; stencil 1024x1024 planes over 16 GiB (3 memory ranks; the
         paper: 120 GiB); STREAM 8 MiB pages over 8 GiB (4 memory ranks; paper: 56 GiB).
  Ratios problem/capacity 0.5, 1, 2, 4 in both: the paper's curve on any machine.
A uffd run where userfaultfd is not permitted exits 77 with the reason: a skip.

Per-fault timing (P004 figs. 2.4 and 3.2): with `-S fault_timing=1` (make run
RFMFLAGS='-S fault_timing=1') the programs time every fault, and DlmMicro (at one thread
and at the most threads) and DlmStencil (at the largest ratio) add the mean of each
timing point an engine observes as `fault_<point>_us_<where>` (a, b, q, c, d, wake, stall:
src/dlm/include/dlm/dlm.h) and `fault_q_share_<where>`, q's share of a+b+q+c+d in %
(P004 fig. 2.4, R58: 7% at 1 thread, about 80% at 12).  Off by default: the claims'
times are measured without it.
"""
import os
import sys

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, run_before, variable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'lib'))
from umstudy.checks import UmstudyMetricTest, mpirun_on_local, one_node, size  # noqa: E402

MODE = size()
# src/dlm/include/dlm/dlm.h: the points of an exchange, and those reported as variables
EXCHANGE_POINTS = ('a', 'b', 'q', 'c', 'd')
TIMING_POINTS = EXCHANGE_POINTS + ('wake', 'stall')
ENGINES = ['r3', 'r58', 'r77', 'uffd']
RATIOS = [0.5, 1, 2, 4]
SIZES = {
    'micro': {'quick': ['--elements', str(1 << 20), '--capacity', '3M', '--mem-capacity', '32M',
                        '--page-size', '64K'],
              'paper': ['--capacity', '800M', '--mem-capacity', '6000M', '--page-size', '1M']},
    'micro_threads': {'quick': [1, 2, 4], 'paper': [1, 2, 4, 8, 12, 16]},
    'stencil': {'quick': ['--nx', '64', '--ny', '64', '--capacity', '4M', '--mem-capacity', '8M',
                          '--page-size', '64K', '--steps', '8', '--tblock', '4'],
                'paper': ['--nx', '1024', '--ny', '1024', '--capacity', '16G', '--mem-capacity', '24G',
                          '--page-size', '1M', '--steps', '8', '--tblock', '4']},
    # Quick STREAM: 16 half-MiB pages resident, enough for 4 threads x 3 arrays at once
    # (16 threads on 32 pages thrashed: ARTIFACT.md E).
    'stream': {'quick': ['--capacity', '8M', '--mem-capacity', '12M', '--page-size', '512K', '--ntimes', '3'],
               'paper': ['--capacity', '8G', '--mem-capacity', '12G', '--page-size', '8M', '--ntimes', '4']},
    # memory ranks: P004 fig. 2.2 one, the stencil three (up to 256 GiB), STREAM four
    'memory_ranks': {'micro': 1, 'stencil': 3, 'stream': 4},
}


@sn.deferrable
def field(records, metric_name, key, scale=1.0, **match):
    """A field of the first record of `metric_name` whose fields match (the sweeps put
    what the claims need, e.g. a fault rate or a retention, in fields)."""
    for r in records:
        if r.get('metric') == metric_name and all(r.get(k) == v for k, v in match.items()):
            return scale * r[key]
    raise sn.SanityError(f'no {metric_name} record with {match} carrying {key!r}')


@sn.deferrable
def ratio(a, b):
    return a / b if b else float('nan')


class DlmBase(UmstudyMetricTest):
    component = 'dlm'
    keep_records = True
    cpu_only = True
    valid_systems = ['+mpi']
    engine = parameter(ENGINES)
    # OpenMP threads of the compute rank (0: the partition's cores, at most 16)
    threads = variable(int, value=0)
    # --fault-timing: P004's per-fault timing points as performance variables
    fault_timing = variable(bool, value=False)
    kind = ''

    def compute_threads(self):
        if self.threads:
            return self.threads
        cores = self.current_partition.processor.num_cpus or \
            self.current_partition.extras.get('facts', {}).get('cpu', {}).get('cores', 1)
        # Quick: at most 4, as the quick micro sweep (16 threads on STREAM's 32 one-MiB
        # pages thrash: 64 s per engine on a 16-core machine, ARTIFACT.md E).
        return max(1, min(16 if self.size == 'paper' else 4, int(cores)))

    @run_after('setup')
    def set_job(self):
        memory_ranks = SIZES['memory_ranks'][self.kind]
        self.num_tasks = 1 + memory_ranks
        local = one_node(self.current_partition)
        self.num_tasks_per_node = self.num_tasks if local else 1
        self.num_cpus_per_task = 1 if local else self.compute_threads()
        self.executable = self.program(self.bench)
        self.env_vars = {'OMP_WAIT_POLICY': 'PASSIVE', 'DLM_TIMEOUT': '120'}
        self.executable_opts = ['--engine', self.engine, '--uffd-workers', '12'] + SIZES[self.kind][self.size]
        if self.fault_timing:
            self.executable_opts += ['--fault-timing']

    @run_before('run')
    def fit_partition(self):
        self.skip_unless('mpi' in self.current_partition.features, 'no MPI on this partition')
        mpirun_on_local(self)

    def fault_time_variables(self, where, **match):
        """The mean of every timing point the engine observes in the phase `match`
        selects, and q's share of the exchange (a+b+q+c+d), as fault_<point>_us_<where>
        and fault_q_share_<where>."""
        if not self.fault_timing or self.is_dry_run():
            return
        lines = {r['point']: r for r in self.records().evaluate()
                 if r.get('metric') == 'fault_time' and all(r.get(k) == v for k, v in match.items())}
        if not lines:
            raise sn.SanityError(f'--fault-timing gave no fault_time lines for {match}')
        recs = self.records()
        for point in TIMING_POINTS:
            r = lines.get(point)
            if r and r.get('observable') and r.get('n'):
                self.perf_variables[f'fault_{point}_us_{where}'] = sn.make_performance_function(
                    field(recs, 'fault_time', 'value', point=point, **match), 'us')
        parts = sum(lines[p]['sum_s'] for p in EXCHANGE_POINTS if p in lines)
        if parts > 0 and 'q' in lines:
            self.perf_variables[f'fault_q_share_{where}'] = sn.make_performance_function(
                ratio(field(recs, 'fault_time', 'sum_s', 100.0, point='q', **match), parts), '%')

    def busy_cpus(self, ranks, threads):
        # The memory ranks, the compute rank's most OpenMP threads and DLM's own
        # communication thread, all polling.
        most = max(getattr(self, 'thread_counts', None) or [self.compute_threads()])
        return (ranks - 1) + most + 1


@rfm.simple_test
class DlmMicro(DlmBase):
    descr = 'P004 fig. 2.2: parallel write a[i]=i over a DLM array, read one element per page; time vs threads'
    bench = 'dlm-micro'
    kind = 'micro'

    @run_after('setup')
    def set_threads(self):
        counts = SIZES['micro_threads'][self.size]
        self.thread_counts = [t for t in counts if t <= max(counts[0], self.compute_threads())] \
            if self.size == 'paper' else counts
        self.executable_opts += ['--threads', ','.join(map(str, self.thread_counts))]

    def named_metrics(self):
        return {f'time_t{t}': ('time', 's', {'threads': t}) for t in self.thread_counts}

    @run_before('performance')
    def fault_rates(self):
        # Faults per second (a field of the faults lines), and its growth from 1 to 12
        # threads (DLM-T5: uffd keeps growing, R77 is bounded by its receive thread).
        recs = self.records()
        rates = {t: field(recs, 'faults', 'fault_rate', threads=t) for t in self.thread_counts}
        for t, rate in rates.items():
            self.perf_variables[f'fault_rate_t{t}'] = sn.make_performance_function(rate, 'faults/s')
        if 1 in rates and 12 in rates:
            self.perf_variables['rate_t12_over_t1'] = sn.make_performance_function(
                ratio(rates[12], rates[1]), 'ratio')
        for t in sorted({self.thread_counts[0], self.thread_counts[-1]}):
            self.fault_time_variables(f't{t}', threads=t)


class DlmSweep(DlmBase):
    """Stencil and STREAM: one run over the problem/capacity ratios."""
    ratios = variable(list, value=RATIOS)

    @run_after('setup')
    def set_ratios(self):
        self.executable_opts += ['--ratios', ','.join(f'{r:g}' for r in self.ratios),
                                 '--threads', str(self.compute_threads())]


@rfm.simple_test
class DlmStencil(DlmSweep):
    descr = 'P004 §4.1: 7-point stencil with spatial + temporal blocking, Effective MFLOPS vs problem/capacity'
    bench = 'dlm-stencil'
    kind = 'stencil'

    def named_metrics(self):
        first, last = self.ratios[0], self.ratios[-1]
        return {'mflops_in_memory': ('mflops', 'MFLOPS', {'ratio': first}),
                'mflops_4x': ('mflops', 'MFLOPS', {'ratio': last})}

    @run_before('performance')
    def retention(self):
        self.perf_variables['retention_4x'] = sn.make_performance_function(
            field(self.records(), 'mflops', 'retention', 100.0, ratio=self.ratios[-1]), '%')
        self.fault_time_variables(f'{self.ratios[-1]:g}x', ratio=self.ratios[-1])


@rfm.simple_test
class DlmStream(DlmSweep):
    descr = 'P004 §4.2: STREAM on DLM arrays vs size, beside the MPI p2p bandwidth of the same ranks'
    bench = 'dlm-stream'
    kind = 'stream'

    def named_metrics(self):
        first, last = self.ratios[0], self.ratios[-1]
        out = {'mpi_p2p_bw': ('mpi_p2p_bw', 'MB/s', {})}
        for k in ('copy', 'triad'):
            out[f'{k}_in_memory'] = ('bandwidth', 'MB/s', {'kernel': k, 'ratio': first})
            out[f'{k}_4x'] = ('bandwidth', 'MB/s', {'kernel': k, 'ratio': last})
        return out

    @run_before('performance')
    def over_mpi(self):
        self.perf_variables['triad_4x_over_mpi'] = sn.make_performance_function(
            field(self.records(), 'bandwidth', 'stream_over_mpi', kernel='triad', ratio=self.ratios[-1]), 'ratio')

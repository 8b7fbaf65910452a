"""Himeno checks: correctness of every variant against the CPU reference, and
performance of the CPU and CUDA (explicit | managed | system) variants."""
import os
import sys

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, run_before, sanity_function

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'lib'))
from umstudy.checks import (UmstudyRunTest, metric, skip_without_gpu,  # noqa: E402
                            skip_without_openacc)

# Problem sizes per mode: (size, iterations, repeats).  Paper: P001's 512x512x1024
# (RIKEN XL) with 3000 iterations and no rehearsal.  Quick runs L (257x257x513: 1.9 GB of
# fields, still 40x the H100's L2, so the sweep is as memory-bound as at XL, where most
# of a case is pinning and filling 15 GB) with 300 iterations and one timed run per case
# (`make run` repeats every case): the whole quick suite must fit 5 minutes (ARTIFACT.md E).
SIZES = {
    'perf': {'quick': ('L', 300, 1), 'paper': ('XL', 3000, 3)},
    'cpu': {'quick': ('S', 20, 3), 'paper': ('L', 100, 3)},
    'verify': {'quick': ('S', 20, 1), 'paper': ('L', 50, 1)},
}


class HimenoBase(UmstudyRunTest):
    bench = 'himeno'
    component = 'himeno'
    kind = 'perf'

    def himeno_args(self, extra=()):
        size, iterations, repeat = SIZES[self.kind][self.size]
        return ['--size', size, '--iterations', str(iterations), '--repeat', str(repeat), *extra]

    # Performance variables: (JSON metric, unit); references come from claims.yaml.
    perf_metrics = [('gflops', 'GFLOPS'), ('gflops_loop', 'GFLOPS'), ('pct_roofline', '%'),
                    ('copy_bandwidth', 'GB/s'), ('time', 's'), ('gosa', '1')]

    @run_before('performance')
    def set_perf_variables(self):
        self.perf_variables = {name: sn.make_performance_function(metric(self.records(), name), unit)
                               for name, unit in self.perf_metrics}
        self.perf_variables.update(self.extra_perf_variables())

    def extra_perf_variables(self):
        return {}


@rfm.simple_test
class HimenoCpuPerf(HimenoBase):
    descr = 'Himeno, CPU (OpenMP) variant'
    valid_systems = ['+cpu']
    kind = 'cpu'
    cpu_only = True

    @run_after('setup')
    def set_command(self):
        self.executable = self.program('himeno-cpu')
        self.executable_opts = self.himeno_args()
        self.num_tasks = 1
        self.num_cpus_per_task = self.current_partition.processor.num_cpus or 1
        self.env_vars = {'OMP_NUM_THREADS': str(self.num_cpus_per_task), 'OMP_PROC_BIND': 'true'}


@rfm.simple_test
class HimenoCudaPerf(HimenoBase):
    descr = 'Himeno, CUDA variant: explicit copies vs managed vs system-allocated memory'
    valid_systems = ['+cuda']
    alloc = parameter(['explicit', 'managed', 'system'])

    @run_after('setup')
    def set_command(self):
        self.executable = self.program('himeno-cuda')
        self.executable_opts = self.himeno_args(['--alloc', self.alloc])
        self.num_tasks = 1
        self.num_gpus_per_node = 1

    @run_before('run')
    def skip_without_hardware(self):
        skip_without_gpu(self, system_memory=self.alloc == 'system')


@rfm.simple_test
class HimenoAccPerf(HimenoBase):
    descr = 'Himeno, OpenACC variant (data directives)'
    valid_systems = ['+openacc']

    def uses_openacc(self):
        return True

    @run_after('setup')
    def set_command(self):
        self.executable = self.program('himeno-acc')
        self.executable_opts = self.himeno_args()
        self.num_tasks = 1
        self.num_gpus_per_node = 1

    @run_before('run')
    def skip_without_hardware(self):
        skip_without_openacc(self)


@rfm.simple_test
class HimenoVerify(HimenoBase):
    descr = 'Himeno: gosa and p of every variant match the CPU reference'
    valid_systems = ['+cpu']
    variant = parameter(['cpu', 'cuda-explicit', 'cuda-managed', 'cuda-system', 'openacc'])
    kind = 'verify'

    def is_cpu_only(self):
        return self.variant == 'cpu'

    def uses_openacc(self):
        return self.variant == 'openacc'

    @run_after('setup')
    def set_command(self):
        extra = ['--verify']
        if self.variant.startswith('cuda'):
            self.executable = self.program('himeno-cuda')
            extra += ['--alloc', self.variant.split('-', 1)[1]]
            self.num_gpus_per_node = 1
        elif self.variant == 'openacc':
            self.executable = self.program('himeno-acc')
            # GCC's nvptx code has plain mul/add that ptxas fuses into FMAs (measured on
            # an H100: max |dp| 1.3e-6, gosa 1.2e-4 relative at M/50), so p is close,
            # not bit-identical; gosa, a sum of squared small residuals, amplifies it.
            extra += ['--gosa-rtol', '1e-3', '--p-atol', '1e-5']
            self.num_gpus_per_node = 1
        else:
            self.executable = self.program('himeno-cpu')
        self.executable_opts = self.himeno_args(extra)
        self.num_tasks = 1

    @run_before('run')
    def skip_without_hardware(self):
        if self.variant.startswith('cuda'):
            skip_without_gpu(self, system_memory=self.variant == 'cuda-system')
        elif self.variant == 'openacc':
            skip_without_openacc(self)

    def verification(self):
        recs = [r for r in self.records().evaluate() if r.get('status') in ('verified', 'mismatch')]
        if not recs:
            raise sn.SanityError('no verification line in the output')
        return recs[0]

    @sanity_function
    def verified(self):
        return sn.all([self.ran_cleanly(),
                       sn.assert_true(verification_field(self, 'pass'),
                                      msg='gosa or p differ from the CPU reference')])

    def extra_perf_variables(self):
        return {name: sn.make_performance_function(verification_field(self, name), '1')
                for name in ('gosa_rel_err', 'p_max_abs_diff')}


@sn.deferrable
def verification_field(test, name):
    # Deferred: the output exists only after the run (and never in --dry-run).
    return test.verification()[name]

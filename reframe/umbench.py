"""umbench checks: P000 (OpenACC/CUDA UM vs explicit copies, Cygnus) and P001 (GH200
SAM/UM vs H100 PCIe).  Each check runs one src/umbench program; the programs do the
analysis (crossovers, ratios, settled bandwidths) and the checks expose it as
performance variables, which analysis/claims.yaml turns into references and verdicts.

Sizes: UMSTUDY_SIZE=quick (minutes on one GPU) or paper (the papers' sizes).  The
repetition counts of the P001 checks are variables, e.g. `-S UmbPatterns.trials=1`
for a paper-size run that keeps the array sizes and reps but not all ten trials.
"""
import os
import sys

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, run_before, variable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'lib'))
from umstudy.checks import (UmstudyMetricTest, metric, mpirun_on_local,  # noqa: E402
                            one_node, size, skip_without_gpu, skip_without_openacc)

# Per check and size mode: the program's options.  Paper sizes: P000 8 GiB arrays,
# 4 KB..396 KB strides, 30720^2 / 61440^2 halo grids, 20 iterations; P001 4 GB and
# 8 GB arrays, 200 reps x 10 trials (100 reps per migration phase).
SIZES = {
    'modes': {'quick': ['--size', '1G'], 'paper': ['--size', '8G']},
    'fraction': {'quick': ['--size', '1G', '--step', '10'], 'paper': ['--size', '8G', '--step', '5']},
    'stride': {'quick': ['--size', '512M', '--min', '4K', '--max', '388K', '--step', '32K', '--beyond', '4M'],
               'paper': ['--size', '8G', '--min', '4K', '--max', '396K', '--step', '4K', '--beyond', '4M']},
    'halo': {'quick': {'small': 5120, 'large': 10240}, 'paper': {'small': 30720, 'large': 61440}},
    'halo_iterations': {'quick': 10, 'paper': 20},
    'arrays': {'quick': ['512M'], 'paper': ['4G', '8G']},
    'reps': {'quick': (20, 1), 'paper': (200, 10)},
}
MODE = size()  # at import: class bodies below see `size` as the ReFrame variable


class UmbBase(UmstudyMetricTest):
    component = 'umbench'
    keep_records = True  # the report plots every sweep point and per-rep trace

    def one_gpu(self, name, opts, system_memory=False):
        self.executable = self.program(name)
        self.executable_opts = opts
        self.num_tasks = 1
        self.num_gpus_per_node = 1
        cpus = self.current_partition.processor.num_cpus or 1
        self.num_cpus_per_task = cpus
        self.env_vars = {'OMP_NUM_THREADS': str(cpus), 'OMP_PROC_BIND': 'true'}
        self.system_memory = system_memory

    @run_before('run')
    def skip_without_hardware(self):
        skip_without_gpu(self, system_memory=getattr(self, 'system_memory', False))


# ---- P000 -------------------------------------------------------------------------

class UmbP000Cuda(UmbBase):
    """One P000 CUDA program on one GPU, with the options of SIZES[<program>][size]."""
    valid_systems = ['+cuda']

    @run_after('setup')
    def set_command(self):
        self.one_gpu(self.bench, SIZES[self.bench[len('umb-'):]][self.size])


@rfm.simple_test
class UmbModes(UmbP000Cuda):
    descr = 'P000 exp. 1 in CUDA: whole-array GPU pass, explicit | managed | both | prefetch'
    bench = 'umb-modes'

    def named_metrics(self):
        out = {f'{m}_ms': ('time', 'ms', {'mode': m}) for m in ('explicit', 'managed', 'both', 'prefetch')}
        for r in ('both_over_managed', 'both_over_explicit', 'managed_over_explicit', 'prefetch_over_explicit'):
            out[r] = (r, 'ratio', {})
        return out


@rfm.simple_test
class UmbAcc(UmbBase):
    """P000 exp. 1-3 in the paper's own form: OpenACC data directives, one binary per
    compile mode (NVHPC: explicit, managed = -gpu=managed without directives, both =
    with them; GCC: explicit only), run one after the other in one job.  The mode
    ratios exist where the compiler built more than one mode."""
    descr = 'P000 exp. 1-3 in OpenACC: every compile mode the compiler could build'
    valid_systems = ['+openacc']
    program_name = parameter(['modes', 'fraction', 'stride'])
    modes = ('explicit', 'managed', 'both')

    @run_after('init')
    def set_bench(self):
        self.bench = f'umb-{self.program_name}'

    def uses_openacc(self):
        return True

    @run_after('setup')
    def set_command(self):
        bindir = self.build.bindir(self.component)
        exe = {m: os.path.join(bindir, f'umb-{self.program_name}-acc-{m}') for m in self.modes}
        # A dry run shows the job of every mode, whatever this machine could build: its
        # script is for the site's compiler, not for this one.
        self.built = list(self.modes) if self.is_dry_run() else \
            [m for m in self.modes if os.path.exists(exe[m])]
        opts = ' '.join(SIZES[self.program_name][self.size])
        self.executable = 'sh'
        self.executable_opts = ['-c', "'" + ' && '.join(f'{exe[m]} {opts}' for m in self.built) + "'"]
        self.num_tasks = 1
        self.num_gpus_per_node = 1

    @run_before('run')
    def skip_without_hardware(self):
        skip_without_openacc(self)
        self.skip_unless(self.built, f'no umb-{self.program_name}-acc-* binary was built (see the CMake report)')

    def named_metrics(self):
        if self.program_name == 'modes':
            return {f'{m}_ms': ('time', 'ms', {'mode': m}) for m in self.built}
        # Sweeps: the first point's time per mode; the curves are in the report.
        return {f'{m}_first_ms': ('time', 'ms', {'mode': m}) for m in self.built}

    @run_before('performance')
    def add_ratios(self):
        if self.program_name != 'modes':
            return
        have = set(self.built)
        for a, b in (('both', 'managed'), ('both', 'explicit'), ('managed', 'explicit')):
            if {a, b} <= have:
                self.perf_variables[f'{a}_over_{b}'] = sn.make_performance_function(
                    metric(self.records(), 'time', mode=a) / metric(self.records(), 'time', mode=b), 'ratio')


@rfm.simple_test
class UmbFraction(UmbP000Cuda):
    descr = 'P000 exp. 2: contiguous-fraction sweep, explicit vs managed (CUDA)'
    bench = 'umb-fraction'
    perf_metrics = [('crossover_pct', '%'), ('managed_over_explicit_full', 'ratio')]


@rfm.simple_test
class UmbStride(UmbP000Cuda):
    descr = 'P000 exp. 3: stride sweep, explicit vs managed (CUDA)'
    bench = 'umb-stride'
    perf_metrics = [('crossover_kib', 'KiB'), ('granule_kib', 'KiB'), ('flat_managed_ms', 'ms'),
                    ('explicit_mean_ms', 'ms')]


@rfm.simple_test
class UmbHalo(UmbBase):
    descr = 'P000 exp. 4: 2-rank halo-exchange stencil, CPU vs GPU pack, explicit vs managed'
    valid_systems = ['+cuda +mpi']
    bench = 'umb-halo'
    problem = parameter(['small', 'large'])
    perf_metrics = [('ratio_cpu_pack', 'ratio'), ('ratio_gpu_pack', 'ratio')]

    @run_after('setup')
    def set_command(self):
        n = SIZES['halo'][self.size][self.problem]
        self.executable = self.program('umb-halo')
        self.executable_opts = ['--n', str(n), '--iterations', str(SIZES['halo_iterations'][self.size])]
        # One rank and one GPU per half, as P000 ran it on two of a Cygnus node's GPUs:
        # both ranks on one node where it has two GPUs, one on each of two nodes where a
        # node has one (Miyabi-G, Pegasus); on one machine (local) they share what it has.
        self.num_tasks = 2
        gpus = self.current_partition.extras.get('facts', {}).get('gpu', {}).get('count', 1)
        self.num_tasks_per_node = 2 if one_node(self.current_partition) else min(2, max(1, gpus))
        self.num_gpus_per_node = min(self.num_tasks_per_node, gpus)
        cpus = self.current_partition.processor.num_cpus or 2
        self.num_cpus_per_task = max(1, cpus // self.num_tasks_per_node)
        self.env_vars = {'OMP_NUM_THREADS': str(self.num_cpus_per_task)}

    @run_before('run')
    def local_mpi(self):
        mpirun_on_local(self)

    def named_metrics(self):
        out = {m: (m, u, {}) for m, u in self.perf_metrics}
        for pack in ('cpu', 'gpu'):
            for mode in ('explicit', 'managed'):
                out[f'{pack}_pack_{mode}_ms'] = ('time', 'ms', {'pack': pack, 'mode': mode})
        return out


@rfm.simple_test
class UmbHaloAcc(UmbHalo):
    """The halo stencil in OpenACC, one compile mode per case (NVHPC builds explicit,
    managed and both; GCC explicit): the per-mode times, CPU and GPU pack."""
    descr = 'P000 exp. 4 in OpenACC: halo stencil, one compile mode per case'
    valid_systems = ['+openacc +mpi']
    acc_mode = parameter(['explicit', 'managed', 'both'])

    def uses_openacc(self):
        return True

    @run_after('setup')
    def use_acc_binary(self):
        self.executable = self.program(f'umb-halo-acc-{self.acc_mode}')

    @run_before('run')
    def skip_without_hardware(self):
        skip_without_openacc(self)
        # (a dry run writes the job script of a mode this machine did not build)
        self.skip_unless(self.is_dry_run() or os.path.exists(self.executable),
                         f'umb-halo-acc-{self.acc_mode} was not built (see the CMake report: '
                         'only NVHPC builds the managed and both modes)')

    def named_metrics(self):
        return {f'{pack}_pack_ms': ('time', 'ms', {'pack': pack}) for pack in ('cpu', 'gpu')}


# ---- P001 -------------------------------------------------------------------------

class UmbP001(UmbBase):
    array = parameter(SIZES['arrays'][MODE])
    reps = variable(int, value=SIZES['reps'][MODE][0])
    trials = variable(int, value=SIZES['reps'][MODE][1])

    def p001_opts(self, *extra):
        return ['--size', self.array, '--reps', str(self.reps), '--trials', str(self.trials), *extra]


@rfm.simple_test
class UmbBaseline(UmbP001):
    descr = 'P001 baselines: CPU copy, GPU copy, HtoD, DtoH, DtoD (per-rep traces)'
    valid_systems = ['+cuda']
    bench = 'umb-baseline'
    perf_metrics = [(m, 'GB/s') for m in ('cpu_copy', 'gpu_copy', 'h2d', 'd2h', 'd2d')] + [
        ('gpu_over_d2d', 'ratio')]

    @run_after('setup')
    def set_command(self):
        self.one_gpu('umb-baseline', self.p001_opts())


@rfm.simple_test
class UmbPatterns(UmbP001):
    descr = 'P001 8 placement patterns (first touch HM/DM, copy by CPU or GPU)'
    valid_systems = ['+cuda']
    bench = 'umb-patterns'
    alloc = parameter(['system', 'managed'])
    perf_metrics = [(f'p{k}{s}', u) for k in range(1, 9)
                    for s, u in (('_settled', 'GB/s'), ('_first', 'GB/s'), ('_ramp', 'ratio'))]

    @run_after('setup')
    def set_command(self):
        self.one_gpu('umb-patterns', self.p001_opts('--alloc', self.alloc), self.alloc == 'system')


@rfm.simple_test
class UmbMigration(UmbP001):
    descr = 'P001 migration: GPU, CPU, GPU phases over host-placed Src'
    valid_systems = ['+cuda']
    bench = 'umb-migration'
    alloc = parameter(['system', 'managed'])

    @run_after('init')
    def half_reps(self):
        # The thesis ran 100 reps per phase against 200 per pattern.
        if self.reps == SIZES['reps'][MODE][0]:
            self.reps //= 2
    perf_metrics = [(f'phase{k}{s}', u) for k in (1, 2, 3)
                    for s, u in (('_settled', 'GB/s'), ('_first', 'GB/s'), ('_ramp', 'ratio'))]

    @run_after('setup')
    def set_command(self):
        self.one_gpu('umb-migration', self.p001_opts('--alloc', self.alloc), self.alloc == 'system')

"""remd checks (P003: replica-exchange MD of argon over many GPUs through DS-CUDA).

- RemdLocal: src/remd on n local GPUs, 256 or 2,048 atoms, 14,336 replicas, the faithful
  (P003's) or the fast kernel; replicas interleaved along the ladder over the GPUs and one
  host thread per GPU (remd's defaults; P003's list 1 is --host-loop serial).  The fast
  kernel's threads per block are picked by a sweep on the machine (--tune, records
  tune_time); the one-GPU fast runs also time the ladder in 8 segments and one wave per
  residency (--profile-segments), the inputs of analysis/remd_balance_model.py (REMD-T8/T9).
  The 256-atom runs also check the GPU against the CPU reference over the first interval.
- RemdVcuda: the same binary, unmodified, through vcuda (`vcuda-run`: one `vcuda-server`
  per GPU on 127.0.0.1, started before the run and stopped after it, the libcudart
  stand-in preloaded), with and without P003's 2 ms keep-alive.
- RemdVcudaNodes: the same across nodes, as P003 ran it: the client alone on the job's
  first node, one vcuda-server per GPU on the other nodes, started by `vcuda-launch`
  through the site's own launcher (srun; mpirun/mpiexec one task per node, with the
  options the site's batch system prepares, e.g. NQSV's ${NQSV_MPIOPTS}).  Skips where
  every job of the partition runs on one node (`local`, the single-host Slurm of CI).
- RemdModelFit: P003's efficiency model (analysis/remd_model.py) with the paper's
  inputs, or with this system's vcuda-bench fit (UMSTUDY_VCUDA_FIT=<fit JSON lines>).

R(n) = T(1) / (n T(n)) combines two runs (claims.yaml `over` selectors on gpu_seconds =
n T(n)); analysis/remd_model.py fits and draws the model next to the measured points.
"""
import os
import sys

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, run_before, variable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'lib'))
from reframe.core.backends import getlauncher  # noqa: E402

from umstudy import data  # noqa: E402
from umstudy import jobs as jobs_data  # noqa: E402
from umstudy.checks import (UmstudyMetricTest, UmstudyRunBase, metric,  # noqa: E402
                            one_node, size, skip_without_gpu)

NREP = 14336  # P003: 14 SMX x 1,024; a multiple of every GPU count checked
PROFILE_SEGMENTS = 8  # ladder segments of the one-GPU profile (each 1,792 replicas)
# Exchange intervals (Miter) per atom count: P003 ran 1,800 (256) and 100 (2,048).
ITERATIONS = {'quick': {256: 5, 2048: 1}, 'paper': {256: 1800, 2048: 100}}
CELLS = {256: 4, 2048: 8}
GPU_COUNTS = [1, 2, 4, 8]
# Across nodes (RemdVcudaNodes): GPUs in all, on server nodes beside the client's node.
# P003 went to 1,024 GPUs on 342 nodes; quick is the smallest such job (one server node).
MODE = size()  # (a class body sees the checks' `size` variable, not this function)
NODE_GPU_COUNTS = {'quick': [1], 'paper': [1, 2, 4, 8, 16, 32]}
LAUNCHERS = ('srun', 'mpirun', 'mpiexec')   # the ones vcuda-launch starts its tasks through


def node_layout(gpus, gpus_per_node):
    """(server nodes, servers per server node) for `gpus` GPUs on nodes of `gpus_per_node`:
    the fewest nodes, the GPUs spread evenly (P003: 3 per node, fewer on the last).  Where
    they do not divide, the nodes start up to one server each beyond `gpus`, idle (remd
    takes the first `gpus` devices: every server of the first nodes)."""
    nodes = -(-gpus // gpus_per_node)
    return nodes, -(-gpus // nodes)


class RemdBase(UmstudyMetricTest):
    component = 'remd'
    bench = 'remd'
    keep_records = True  # per-interval split and per-temperature energies for the report
    atoms = parameter([256, 2048])
    perf_metrics = [('interval_time', 's'), ('t_gpu', 's'), ('t_com', 's'), ('t_clt', 's'),
                    ('t_gpu0', 's'), ('gpu_seconds', 's'), ('pair_evals_per_s', 'pairs/s'),
                    ('kernel_pair_evals_per_s', 'pairs/s'), ('gflops', 'GFLOPS'), ('acceptance_mean', '1'),
                    ('t_gpu_imbalance', '1'), ('blocks_per_sm', '1'), ('threads_per_block', '1')]

    def gpu_count(self):
        return self.current_partition.extras.get('facts', {}).get('gpu', {}).get('count', 0)

    def fp32_peak(self):
        return self.current_partition.extras.get('facts', {}).get('gpu', {}).get('fp32_tflops')

    def remd_args(self, ngpus, kernel):
        args = ['--cells', str(CELLS[self.atoms]), '--replicas', str(NREP),
                '--iterations', str(ITERATIONS[self.size][self.atoms]), '--kernel', kernel, '--gpus', str(ngpus)]
        if self.fp32_peak():
            args += ['--fp32-peak-tflops', str(self.fp32_peak())]
        if kernel == 'fast':  # threads per block by measurement (P003's kernel keeps its own)
            args += ['--tune']
        return args

    def skip_unless_gpus(self, n):
        skip_without_gpu(self)
        # Quick size keeps to what the targets judge at 2,048 atoms (REMD-T1/T2: the fast
        # kernel; through vcuda P003's modified DS-CUDA, a 2 ms keep-alive): one interval of
        # the all-pairs kernel alone takes 10 s on an H100.  256 atoms runs every
        # configuration at both sizes, 2,048 atoms every one at paper size.
        judged = getattr(self, 'kernel', 'fast') == 'fast' and getattr(self, 'keepalive_ms', 2) == 2
        self.skip_unless(self.size != 'quick' or self.atoms != 2048 or judged,
                         'at quick size 2,048 atoms runs only the judged configuration (fast kernel, '
                         '2 ms keep-alive); this one runs at 256 atoms and at paper size')
        have = self.gpu_count()
        self.skip_unless(have >= n, f'this case needs {n} GPUs; the partition has {have}')

    def skip_without_vcuda(self, script):
        """Skips where src/vcuda's `script` (vcuda-run, vcuda-launch) or the libcudart
        stand-in beside it was not built."""
        lib = os.path.join(os.path.dirname(script), 'lib')
        self.skip_unless(os.path.exists(script), f'no {os.path.basename(script)} at {script}: src/vcuda was not built')
        self.skip_unless(os.path.isdir(lib) and any(f.startswith('libcudart.so.') for f in os.listdir(lib)),
                         'the vcuda libcudart stand-in was not built (it needs the CUDA toolkit)')

    def named_metrics(self):
        out = super().named_metrics()
        if self.fp32_peak():
            out['fp32_peak_fraction'] = ('fp32_peak_fraction', '1', {})
        return out

    @run_before('performance')
    def add_millisecond_variables(self):
        # P003 states tGPU0 and tCLT in ms (claim P003-C2).
        for name in ('t_gpu0', 't_clt'):
            self.perf_variables[f'{name}_ms'] = sn.make_performance_function(
                metric(self.records(), name) * 1e3, 'ms')


@rfm.simple_test
class RemdLocal(RemdBase):
    descr = 'P003 REMD on n local GPUs (replicas interleaved along the ladder, a host thread per GPU)'
    valid_systems = ['+cuda']
    gpus = parameter(GPU_COUNTS)
    kernel = parameter(['faithful', 'fast'])

    @run_after('setup')
    def set_command(self):
        self.executable = self.program('remd')
        self.executable_opts = self.remd_args(self.gpus, self.kernel)
        if self.atoms == 256:  # the CPU reference of 2 replicas costs < 1 s at 256 atoms
            self.executable_opts += ['--verify-replicas', '2']
        if self.gpus == 1 and self.kernel == 'fast':  # the balance model's inputs (about one interval more)
            self.executable_opts += ['--profile-segments', str(PROFILE_SEGMENTS)]
        self.num_tasks = 1
        self.num_gpus_per_node = self.gpus
        self.num_cpus_per_task = self.current_partition.processor.num_cpus or 1
        self.env_vars = {'OMP_NUM_THREADS': str(self.num_cpus_per_task)}

    @run_before('run')
    def skip_without_hardware(self):
        self.skip_unless_gpus(self.gpus)

    def verification(self):
        return next((r for r in self.records().evaluate() if r.get('status') in ('verified', 'mismatch')), None)

    @run_before('performance')
    def add_verification_variables(self):
        if self.atoms == 256:
            self.perf_variables['max_dx_nm'] = sn.make_performance_function(_verified(self, 'max_dx_nm'), 'nm')


@sn.deferrable
def _verified(test, field):
    rec = test.verification()
    if rec is None:
        raise sn.SanityError('no GPU-vs-CPU verification line')
    return rec[field]


@rfm.simple_test
class RemdVcuda(RemdBase):
    """The unmodified remd binary through vcuda-run (src/vcuda): one vcuda-server per GPU
    on loopback with a fresh token, the libcudart stand-in preloaded, the servers
    stopped after the run (their logs stay in the stage directory).  keepalive_ms = 2 is
    P003's "modified" DS-CUDA (a dummy transfer every 2 ms), 0 its "not modified"."""
    descr = 'P003 REMD through vcuda: one vcuda-server per GPU of this node, the unmodified binary as client'
    valid_systems = ['+cuda']
    servers = parameter(GPU_COUNTS)
    keepalive_ms = parameter([2, 0])
    kernel = variable(str, value='fast')
    also_needs = ('vcuda',)  # vcuda-run and the stand-in

    @run_after('setup')
    def set_command(self):
        self.vcuda_run = os.path.join(self.build.bindir('vcuda'), 'vcuda-run')
        self.executable = self.vcuda_run
        self.executable_opts = ['--gpus', str(self.servers), '--log-dir', '.', '--', self.program('remd'),
                                *self.remd_args(self.servers, self.kernel)]
        self.num_tasks = 1
        self.num_gpus_per_node = self.servers
        self.env_vars = {'OMP_NUM_THREADS': str(self.current_partition.processor.num_cpus or 1)}
        if self.keepalive_ms:
            self.env_vars['VCUDA_KEEPALIVE_MS'] = str(self.keepalive_ms)

    @run_before('run')
    def skip_without_hardware(self):
        self.skip_unless_gpus(self.servers)
        if self.is_dry_run():
            return  # nothing is built in a dry run; its job script still shows the command
        self.skip_without_vcuda(self.vcuda_run)


@rfm.simple_test
class RemdModelFit(UmstudyRunBase):
    descr = "P003's efficiency model (eq. 3-6): R(n), latency share, table 2 error"
    valid_systems = ['*']
    bench = 'remd-model'
    component = 'analysis'
    # A few seconds of Python on the submitting node; set before setup, where ReFrame
    # picks the job's scheduler (set later, a batch job would be polled as a local one).
    local = True

    @run_after('setup')
    def set_command(self):
        self.executable = sys.executable
        self.executable_opts = [os.path.join(data.REPO, 'analysis', 'remd_model.py'), '--summary']
        fit = os.environ.get('UMSTUDY_VCUDA_FIT')
        if fit:
            self.executable_opts += ['--vcuda', os.path.abspath(fit)]
        self.num_tasks = 1

    @run_before('performance')
    def set_perf_variables(self):
        names = [('R_256_64', '1'), ('R_256_1024', '1'), ('R_2048_64', '1'), ('R_2048_1024', '1'),
                 ('T0_256_1024_ms', 'ms'), ('T0_2048_1024_ms', 'ms'), ('latency_share_1024', '%'),
                 ('p003_max_r_err_pts', '%'), ('vcuda_fit', '1')]
        self.perf_variables = {n: sn.make_performance_function(metric(self.records(), n), u) for n, u in names}
        # The copy and launch constants: measured by vcuda-bench where UMSTUDY_VCUDA_FIT
        # names its fit, else P003's own, and then named so (p003_*), never shown as measured.
        prefix = '' if '--vcuda' in self.executable_opts else 'p003_'
        for n, u in (('BH_GBps', 'GB/s'), ('BD_GBps', 'GB/s'), ('LH_us', 'us'), ('LD_us', 'us'), ('LK_us', 'us')):
            self.perf_variables[prefix + n] = sn.make_performance_function(metric(self.records(), n), u)


@rfm.simple_test
class RemdVcudaNodes(RemdBase):
    """The unmodified remd binary through vcuda across nodes, P003's layout: the job has
    one client node plus server nodes; `vcuda-launch` (run by the job script on the first
    node) starts one task per node through the partition's launcher, each task one
    vcuda-server per GPU of its node (none on the client's node: --remote-only), hands
    them a fresh token, and runs remd here with the libcudart stand-in and every server.
    The run directory with the server logs stays in the stage directory (--keep).
    transport=ucx (-S RemdVcudaNodes.transport=ucx) listens on ucx:// (RDMA where the
    network has it, as P003's InfiniBand); the default is TCP."""
    descr = ('P003 REMD through vcuda across nodes: the client alone on the first node, '
             'one vcuda-server per GPU on server nodes, started by vcuda-launch through the site launcher')
    valid_systems = ['+cuda']
    servers = parameter(NODE_GPU_COUNTS[MODE])
    keepalive_ms = parameter([2, 0])
    kernel = variable(str, value='fast')
    transport = variable(str, value='tcp')
    also_needs = ('vcuda',)

    @run_after('setup')
    def set_job(self):
        gpn = max(1, self.gpu_count())
        server_nodes, self.per_node = node_layout(self.servers, gpn)
        self.num_tasks = 1 + server_nodes      # the client's node first
        self.num_tasks_per_node = 1
        self.num_gpus_per_node = self.per_node
        self.num_cpus_per_task = self.current_partition.processor.num_cpus or \
            self.current_partition.extras.get('facts', {}).get('cpu', {}).get('cores') or 1
        self.env_vars = {'OMP_NUM_THREADS': str(self.num_cpus_per_task)}
        if self.keepalive_ms:
            self.env_vars['VCUDA_KEEPALIVE_MS'] = str(self.keepalive_ms)
        self.vcuda_launch = os.path.join(self.build.bindir('vcuda'), 'vcuda-launch')
        self.executable = self.vcuda_launch

    @run_before('run')
    def launch_through_the_site(self):
        # After the base's resources_from_data: the partition's launcher options go to
        # vcuda-launch, which runs on the first node by itself (no launcher before it).
        part = self.current_partition
        launcher = part.launcher_type.registered_name
        opts = ['--launcher', launcher, '--nodes', str(self.num_tasks), '--ranks-per-node', '1',
                '--gpus-per-node', str(self.per_node), '--remote-only', '--keep']
        site = jobs_data.job_block(part.extras).get('launcher_options', [])
        if site:
            opts += ['--launcher-opts', '"{}"'.format(' '.join(site))]
        if self.transport == 'ucx':
            opts += ['--ucx']
        self.executable_opts = opts + ['--', self.program('remd'), *self.remd_args(self.servers, self.kernel)]
        self.job.launcher = getlauncher('local')()

    @run_before('run')
    def skip_without_nodes(self):
        self.skip_unless_gpus(self.per_node)
        part = self.current_partition
        self.skip_unless(self.transport in ('tcp', 'ucx'), f"transport={self.transport!r}: 'tcp' or 'ucx'")
        # (not in a dry run: its job script shows what a multi-node partition of this
        # system gets, e.g. the generic `slurm` profile, which CI runs on one host)
        self.skip_unless(self.is_dry_run() or not one_node(part),
                         "P003's layout needs a client node plus server nodes; every job of this partition "
                         "runs on one node (RemdVcuda runs the servers on the client's node)")
        launcher = part.launcher_type.registered_name
        self.skip_unless(launcher in LAUNCHERS, f"vcuda-launch starts servers on other nodes through "
                                                f"{', '.join(LAUNCHERS)}; this partition's launcher is {launcher}")
        if not self.is_dry_run():   # nothing is built in a dry run
            self.skip_without_vcuda(self.vcuda_launch)

"""vcuda checks (P003 §4.2): CUDA API remoting measured like the paper.

Every check runs an ordinary CUDA program (-cudart shared) through `vcuda-run`, which
starts one vcuda-server per GPU of the node on loopback with a fresh token and
preloads the libcudart stand-in; VcudaBench %transport=local runs the same binary on
the real runtime for the side-by-side.  Servers on other nodes (P003's layout) are
started the same way on each node by a site's own launcher; these checks keep to one
node.  Sizes: quick = 20 sweeps per point; paper = 100 (512 B .. 4 MiB either way).
"""
import os
import sys

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, run_before, sanity_function

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'lib'))
from umstudy.checks import UmstudyMetricTest, size, skip_without_gpu  # noqa: E402

MODE = size()
REPS = {'quick': 20, 'paper': 100}
# D2H calls per idle interval of the keep-alive sweep (median of these per interval)
INTERVAL_CALLS = {'quick': 15, 'paper': 30}


class VcudaBase(UmstudyMetricTest):
    component = 'vcuda'
    valid_systems = ['+cuda']
    num_tasks = 1

    @run_before('run')
    def need_gpu(self):
        skip_without_gpu(self)

    def through_vcuda(self, program, opts, server_opts='', ucx=False):
        """vcuda-run around `program` (server logs kept in the stage directory)."""
        self.executable = self.program('vcuda-run')
        self.executable_opts = (['--log-dir', '.'] + (['--ucx'] if ucx else []) +
                                (['--server-opts', f"'{server_opts}'"] if server_opts else []) +
                                ['--', self.program(program)] + opts)


@rfm.simple_test
class VcudaSample(VcudaBase):
    descr = 'An unmodified CUDA sample (vector add, checked) through vcuda'
    bench = 'vcuda-sample'

    @run_after('setup')
    def set_command(self):
        self.through_vcuda('vcuda-sample-vector-add', ['4000000'])

    @sanity_function
    def passed(self):
        return sn.all([sn.assert_eq(self.job.exitcode, 0),
                       sn.assert_found(r'vector_add: \d+ elements on .*: PASSED', self.stdout)])

    def named_metrics(self):
        return {}


@rfm.simple_test
class VcudaBench(VcudaBase):
    descr = 'P003 figs. 4-7: T = S/B + L for H2D/D2H (512 B..4 MiB), LK, 64 MiB copies vs the transport'
    bench = 'vcuda-bench'
    transport = parameter(['vcuda', 'vcuda-ucx', 'local'])
    keep_records = True

    @run_after('setup')
    def set_command(self):
        opts = ['--reps', str(REPS[self.size])]
        if self.transport.startswith('vcuda'):
            # the idle sweep is VcudaKeepalive's part; a build without UCX skips (exit 77)
            self.through_vcuda('vcuda-bench', opts + ['--no-intervals'], ucx=self.transport == 'vcuda-ucx')
        else:
            # the idle sweep on the local runtime tells the GPU's share of P003's jump
            self.executable, self.executable_opts = self.program('vcuda-bench'), opts

    def named_metrics(self):
        out = {k: (k, unit, {'servers': 1, 'kind': 'fit'})
               for k, unit in (('BH', 'MB/s'), ('BD', 'MB/s'), ('LH', 'us'), ('LD', 'us'), ('LK', 'us'))}
        out['h2d_1k_us'] = ('h2d_1k_time', 'us', {})
        out['h2d_64m'] = ('copy_bandwidth', 'GB/s', {'dir': 'H2D'})
        out['d2h_64m'] = ('copy_bandwidth', 'GB/s', {'dir': 'D2H'})
        if self.transport.startswith('vcuda'):
            out['transport_64m'] = ('transport_bandwidth', 'GB/s', {})
            out['large_vs_transport'] = ('large_copy_vs_transport', 'ratio', {})
        else:
            out.update(d2h_idle0_us=('d2h_after_idle', 'us', {'interval_ms': 0}),
                       d2h_idle50_us=('d2h_after_idle', 'us', {'interval_ms': 50}),
                       idle_jump=('d2h_idle_jump', 'ratio', {}))
        return out


@rfm.simple_test
class VcudaKeepalive(VcudaBase):
    """The paper's fix is a dummy transfer every 2 ms (keepalive_ms=2).  Where the idle
    cost is the server's wake-up from poll() (a virtual machine's halted vCPU, a deep
    C-state), only a server that keeps polling through the gaps removes it:
    server_spin_us=100000 is that variant, measured beside the paper's."""
    descr = 'P003 figs. 8/9: D2H latency vs idle time between calls, without and with a keep-alive'
    bench = 'vcuda-bench'
    keepalive_ms = parameter([0, 2])
    server_spin_us = parameter([200, 100000])
    keep_records = True

    @run_after('setup')
    def set_command(self):
        if self.keepalive_ms:
            self.env_vars['VCUDA_KEEPALIVE_MS'] = str(self.keepalive_ms)
        self.through_vcuda('vcuda-bench', ['--max-devices', '1', '--reps', '10', '--max-bytes', '64K',
                                           '--large', '8M', '--large-reps', '2',
                                           '--intervals', '0,1,2,5,10,20,50',
                                           '--interval-calls', str(INTERVAL_CALLS[self.size])],
                           f'--spin-us {self.server_spin_us}')

    @run_before('run')
    def judged_at_quick(self):
        # no claim or target reads the polling server: at quick size only what is judged
        self.skip_unless(self.size != 'quick' or self.server_spin_us == 200,
                         'the polling-server variant explains, is not judged: it runs at paper size')

    def named_metrics(self):
        return {'d2h_idle0_us': ('d2h_after_idle', 'us', {'interval_ms': 0}),
                'd2h_idle50_us': ('d2h_after_idle', 'us', {'interval_ms': 50}),
                'idle_jump': ('d2h_idle_jump', 'ratio', {})}

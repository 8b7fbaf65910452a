"""Shared pieces of every umstudy check.

- UmstudyBuild: one CMake build of src/ per partition and environment (a fixture), with
  the partition's CUDA architectures and features; every run check of that partition
  uses its binaries ("build once, run many").
- UmstudyRunTest: base of run-only checks: size selection (quick | paper), JSON-lines
  parsing, skip on "unsupported" (exit 77) with the program's own reason, and
  references derived from analysis/claims.yaml + the system's facts.
"""
import json
import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.backends import getlauncher
from reframe.core.builtins import (fixture, run_after, run_before, sanity_function,
                                   variable)

from . import data, verdicts

EXIT_UNSUPPORTED = 77  # umstudy/support.h: UMS_EXIT_UNSUPPORTED


def size():
    """quick (default; minutes on one node) or paper (the papers' sizes)."""
    value = os.environ.get('UMSTUDY_SIZE', 'quick')
    if value not in ('quick', 'paper'):
        raise ValueError(f"UMSTUDY_SIZE must be 'quick' or 'paper', not {value!r}")
    return value


class UmstudyBuild(rfm.CompileOnlyRegressionTest):
    """CMake build of src/ (all components) for one partition + environment."""
    descr = 'Build umstudy (src/) with CMake'
    build_system = 'CMake'
    sourcesdir = os.path.join(data.REPO, 'src')
    valid_systems = ['*']
    valid_prog_environs = ['*']
    build_locally = True
    maintainers = ['umstudy']

    @run_before('compile')
    def configure(self):
        extras = self.current_partition.extras
        feats = self.current_partition.features
        bs = self.build_system
        bs.builddir = 'build'
        bs.config_opts = ['-DCMAKE_BUILD_TYPE=Release', '-DBUILD_TESTING=OFF']
        # UMSTUDY_COMPONENTS="himeno;umbench" builds a subset (a site without MPI, say).
        if os.environ.get('UMSTUDY_COMPONENTS'):
            bs.config_opts += [f'"-DUMSTUDY_COMPONENTS={os.environ["UMSTUDY_COMPONENTS"]}"']  # ; is a list, not a shell separator
        if 'cuda' in feats:
            archs = str(extras.get('build', {}).get('cuda_archs', '90')).replace(',', ';')
            bs.config_opts += ['-DUMSTUDY_CUDA=ON', f'-DCMAKE_CUDA_ARCHITECTURES={archs}']
            if not os.environ.get('CUDACXX') and os.path.exists('/usr/local/cuda/bin/nvcc'):
                bs.config_opts += ['-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc']
        else:
            bs.config_opts += ['-DUMSTUDY_CUDA=OFF']
        bs.max_concurrency = max(1, os.cpu_count() or 1)
        bs.flags_from_environ = False

    def bindir(self, component):
        return os.path.join(self.stagedir, 'build', component)

    @sanity_function
    def built(self):
        return sn.assert_true(os.path.isdir(os.path.join(self.stagedir, 'build')))


@sn.deferrable
def json_records(path, bench=None):
    """Every JSON object line of a program's stdout (other lines are ignored)."""
    records = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith('{'):
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if bench is None or rec.get('bench') == bench:
                records.append(rec)
    return records


@sn.deferrable
def metric(records, name, **match):
    """The value of the summary line (no `rep`) of metric `name` whose fields match."""
    for rec in records:
        if rec.get('metric') == name and 'rep' not in rec and all(
                rec.get(k, rec.get('params', {}).get(k)) == v for k, v in match.items()):
            return rec['value']
    raise sn.SanityError(f'no JSON result line for metric {name!r} {match or ""}')


class UmstudyRunBase(rfm.RunOnlyRegressionTest):
    """Run-check logic without a build: JSON parsing, skips, references."""
    bench = variable(str)
    component = variable(str)
    size = variable(str, value=size())
    valid_prog_environs = ['*']
    maintainers = ['umstudy']
    # Recorded in ReFrame's run report for analysis/: why a case was skipped, and the
    # partition's features and facts as they were when it ran.
    skip_reason = variable(str, value='')
    partition_info = variable(dict, value={})
    # Checks whose figures need every point (sweeps, per-rep traces) set keep_records;
    # the program's measurement lines then travel in the run report as `records`
    # (without the repeated bench name and params; `record_params` holds those once).
    keep_records = variable(bool, value=False)
    records_kept = variable(list, value=[])
    record_params = variable(dict, value={})
    # Ranks x threads against the cores of one node: a run that oversubscribes the
    # machine is shown as indicative, never judged (umstudy.verdicts).
    placement = variable(dict, value={})

    @run_after('setup')
    def record_partition(self):
        part = self.current_partition
        self.partition_info = {'features': list(part.features),
                               'facts': part.extras.get('facts', {}),
                               'system': part.extras.get('system', self.current_system.name)}

    @run_before('run')
    def record_placement(self):
        part = self.current_partition
        cores = (part.processor.num_cpus or
                 part.extras.get('facts', {}).get('cpu', {}).get('cores') or
                 (os.cpu_count() if part.scheduler.registered_name == 'local' else None))
        per_node = self.num_tasks_per_node or self.num_tasks or 1
        if self.env_vars.get('GASNET_PSHM_NODES'):  # GASNet's smp conduit forks its images
            per_node = int(self.env_vars['GASNET_PSHM_NODES'])
        threads = int(self.env_vars.get('OMP_NUM_THREADS') or self.num_cpus_per_task or 1)
        self.placement = {'ranks': per_node, 'threads': threads, 'cores': cores,
                          'cpus': self.busy_cpus(per_node, threads)}

    def busy_cpus(self, ranks, threads):
        """CPUs of one node the run keeps busy (checks whose ranks differ override it)."""
        return ranks * threads

    def skip_with(self, reason):
        self.skip_reason = reason
        self.skip(reason)

    def skip_unless(self, condition, reason):
        if not condition:
            self.skip_with(reason)

    def records(self):
        return json_records(os.path.join(self.stagedir, self.stdout.evaluate()), self.bench)

    def check_params(self):
        """Parameters claims match on (the check's ReFrame parameters)."""
        return {name: getattr(self, name) for name in type(self).param_space.params}

    @run_before('sanity')
    def skip_if_unsupported(self):
        # The program knows best what the hardware can do: exit 77 + its reason -> skip.
        # (Before sanity, not after run: ReFrame 4.10 keeps a partition's job slot
        # when a test skips in its run stage, which stalls max_jobs=1 partitions.)
        if self.job.exitcode == EXIT_UNSUPPORTED:
            reasons = [r.get('reason', '') for r in self.records().evaluate()
                       if r.get('status') == 'unsupported']
            self.skip_with(reasons[0] if reasons else 'program reported unsupported (exit 77)')

    @sanity_function
    def ran_cleanly(self):
        recs = self.records()
        return sn.all([
            sn.assert_eq(self.job.exitcode, 0, msg='exit code {0}, expected {1}'),
            sn.assert_true(sn.len(recs) > 0, msg=f'no JSON result lines from {self.bench}'),
            sn.assert_false(sn.any(r.get('status') in ('error', 'mismatch') for r in recs.evaluate()),
                            msg='the program reported an error or a mismatch'),
        ])

    @run_before('performance')
    def keep_result_records(self):
        if not self.keep_records or self.is_dry_run():  # a dry run has no output to keep
            return
        recs = [r for r in self.records().evaluate() if 'metric' in r]
        self.record_params = recs[0].get('params', {}) if recs else {}
        self.records_kept = [{k: v for k, v in r.items() if k not in ('bench', 'params')} for r in recs]

    @run_before('performance')
    def set_references(self):
        part = self.current_partition
        refs = verdicts.references(type(self).__name__, self.check_params(),
                               part.extras.get('system', self.current_system.name),
                               {'features': part.features}, self.size)
        if refs:
            self.reference = {part.fullname: refs}


class UmstudyRunTest(UmstudyRunBase):
    """Base of run checks of src/ programs: subclasses set `bench`, `component`,
    executable and options; the binaries come from the build fixture."""
    build = fixture(UmstudyBuild, scope='environment')

    def program(self, name):
        return os.path.join(self.build.bindir(self.component), name)

    @run_after('setup')
    def skip_components_left_out(self):
        # UMSTUDY_COMPONENTS builds a subset: the other components' checks have nothing
        # to run.  (Without a subset a missing binary is a build problem and fails.)
        chosen = [c for c in os.environ.get('UMSTUDY_COMPONENTS', '').split(';') if c]
        needs = {self.component} | set(getattr(self, 'also_needs', ()))
        missing = sorted(needs - set(chosen)) if chosen else []
        self.skip_unless(not missing, f"component(s) {', '.join(missing)} not in this build "
                                      f"(UMSTUDY_COMPONENTS={';'.join(chosen)})")


class UmstudyMetricTest(UmstudyRunTest):
    """A run check whose performance variables are the program's summary lines:
    `named_metrics()` maps each variable to (metric, unit, fields to match); by default
    the (metric, unit) pairs of `perf_metrics`, each under its own name."""
    perf_metrics = []

    def named_metrics(self):
        return {m: (m, unit, {}) for m, unit in self.perf_metrics}

    @run_before('performance')
    def set_perf_variables(self):
        self.perf_variables = {
            name: sn.make_performance_function(metric(self.records(), m, **match), unit)
            for name, (m, unit, match) in self.named_metrics().items()}


def skip_without_gpu(test, system_memory=False):
    """Skips (with the reason) a GPU run where the partition has no GPU, no CUDA build,
    or, for system-allocated memory, no pageable memory access (HMM/ATS)."""
    feats = test.current_partition.features
    facts = test.current_partition.extras.get('facts', {})
    test.skip_unless('cuda' in feats, 'no CUDA toolchain on this partition')
    test.skip_unless('gpu' in feats, 'no GPU on this partition: ' +
                     facts.get('gpu_reason', 'none detected'))
    if system_memory:
        test.skip_unless('sam' in feats,
                         'the GPU reports no pageable memory access (no HMM/ATS), so '
                         'system-allocated memory (plain malloc) cannot be used')


def skip_without_openacc(test):
    feats = test.current_partition.features
    test.skip_unless('openacc' in feats, 'no OpenACC compiler on this partition')
    test.skip_unless('gpu' in feats, 'no GPU on this partition: ' +
                     test.current_partition.extras.get('facts', {}).get('gpu_reason', 'none detected'))


def mpirun_on_local(test):
    """The local system has no launcher of its own: MPI programs start under mpirun,
    oversubscribing where there are fewer cores than ranks (small classes, CI)."""
    if test.current_partition.launcher_type.registered_name == 'local':
        test.job.launcher = getlauncher('mpirun')()
        test.job.launcher.options = ['--oversubscribe', '--bind-to', 'none']
        if os.getuid() == 0:  # containers and CI run as root
            test.env_vars.update(OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1')

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
import shutil

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.backends import getlauncher
from reframe.core.builtins import (fixture, run_after, run_before, sanity_function,
                                   variable)

from reframe.core.logging import getlogger
from reframe.core.runtime import runtime

from . import data, launch, verdicts
from . import jobs as jobs_data
from .placement import check_layout

EXIT_UNSUPPORTED = 77  # umstudy/support.h: UMS_EXIT_UNSUPPORTED
# Started by the launcher before each rank's program: says where the rank runs.
WHERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'where.sh')


def size():
    """quick (default; minutes on one node) or paper (the papers' sizes)."""
    value = os.environ.get('UMSTUDY_SIZE', 'quick')
    if value not in ('quick', 'paper'):
        raise ValueError(f"UMSTUDY_SIZE must be 'quick' or 'paper', not {value!r}")
    return value


def skip_if_retired(test):
    """Skips a job on a system that no longer exists (its `retired:` reason); listing and
    --dry-run still show what it would run."""
    why = test.current_partition.extras.get('retired')
    if why and not test.is_dry_run():
        if hasattr(test, 'skip_reason'):
            test.skip_reason = why
        test.skip(why)


def cmake_cache(builddir):
    """{variable: value} of a build tree's CMakeCache.txt ({} where there is none)."""
    cache = {}
    path = os.path.join(builddir, 'CMakeCache.txt')
    if os.path.exists(path):
        for line in open(path):
            if ':' in line and '=' in line and not line.startswith(('#', '//')):
                key, value = line.rstrip('\n').split('=', 1)
                cache[key.split(':', 1)[0]] = value
    return cache


class UmstudyBuild(rfm.CompileOnlyRegressionTest):
    """CMake build of src/ (all components) for one partition + environment.

    Built once: `make build`'s build/default is used as it is when it was configured as
    this partition needs (same CUDA choice and architectures, same component subset), so
    `make run` compiles nothing twice; otherwise the build lives in
    build/rfm-<system>-<partition>-<environ> and later runs rebuild only what changed.
    A partition whose nodes have another instruction set than this machine (its
    `facts.cpu.arch`) is built by a job on its own nodes, never from build/default."""
    descr = 'Build umstudy (src/) with CMake'
    build_system = 'CustomBuild'
    sourcesdir = None
    valid_systems = ['*']
    valid_prog_environs = ['*']
    build_locally = True
    maintainers = ['umstudy']
    builddir = variable(str, value='')

    @run_after('init')
    def build_where_it_runs(self):
        # One fixture instance per partition (valid_systems: its full name).  Nodes of
        # another instruction set than this machine build as a job on themselves.
        part = next((p for p in runtime().system.partitions if p.fullname in self.valid_systems), None)
        if part is not None:
            self.build_locally = jobs_data.builds_here(part.extras)

    @run_after('setup')
    def nothing_to_build_for_a_retired_system(self):
        skip_if_retired(self)

    def wanted_options(self):
        extras = self.current_partition.extras
        opts = {'CMAKE_BUILD_TYPE': 'Release',
                # UMSTUDY_COMPONENTS="himeno;umbench" builds a subset (a site without MPI, say).
                'UMSTUDY_COMPONENTS': os.environ.get('UMSTUDY_COMPONENTS', '')}
        if 'cuda' in self.current_partition.features:
            opts['UMSTUDY_CUDA'] = 'ON'
            opts['CMAKE_CUDA_ARCHITECTURES'] = str(
                extras.get('build', {}).get('cuda_archs', '90')).replace(',', ';')
            if self.build_locally and not os.environ.get('CUDACXX') and \
                    os.path.exists('/usr/local/cuda/bin/nvcc'):
                opts['CMAKE_CUDA_COMPILER'] = '/usr/local/cuda/bin/nvcc'
        else:
            opts['UMSTUDY_CUDA'] = 'OFF'
        # the environment's compilers (nvc on an NVHPC environment, say)
        env = self.current_environ
        for key, exe in (('CMAKE_C_COMPILER', env.cc), ('CMAKE_CXX_COMPILER', env.cxx),
                         ('CMAKE_Fortran_COMPILER', env.ftn)):
            if exe:
                opts[key] = exe
        return opts

    @staticmethod
    def not_reusable(cache, opts):
        """Why a configured build tree lacks what these options ask for ('' if it has it)."""
        if not cache:
            return 'no build/default (make build) yet'
        for key in ('UMSTUDY_COMPONENTS', 'CMAKE_BUILD_TYPE'):
            if cache.get(key, '') != opts[key]:
                return f'{key} is {cache.get(key, "")!r} there, {opts[key]!r} here'
        for key in ('CMAKE_C_COMPILER', 'CMAKE_CXX_COMPILER'):
            want, have = shutil.which(opts.get(key, '')), cache.get(key)
            if not want or not have or os.path.realpath(want) != os.path.realpath(have):
                return f'{key} is {have} there, {opts.get(key)} ({want}) here'
        if opts['UMSTUDY_CUDA'] == 'OFF':
            return ''   # CPU programs are the same with or without the CUDA variants
        if cache.get('UMSTUDY_CUDA') == 'OFF' or cache.get('CMAKE_CUDA_COMPILER', 'NOTFOUND') in ('', 'NOTFOUND') \
                or cache.get('CMAKE_CUDA_COMPILER', '').endswith('-NOTFOUND'):
            return 'built without CUDA'
        if cache.get('CMAKE_CUDA_ARCHITECTURES') != opts['CMAKE_CUDA_ARCHITECTURES']:
            return (f"CUDA architectures {cache.get('CMAKE_CUDA_ARCHITECTURES')} there, "
                    f"{opts['CMAKE_CUDA_ARCHITECTURES']} here")
        return ''

    @classmethod
    def reusable(cls, cache, opts):
        return not cls.not_reusable(cache, opts)

    @run_before('compile')
    def configure(self):
        opts = self.wanted_options()
        default = os.path.join(data.REPO, 'build', 'default')
        part = self.current_partition
        why_not = 'built on the partition\'s own nodes' if not self.build_locally else \
            self.not_reusable(cmake_cache(default), opts)
        if not why_not:
            self.builddir = default
            configure = []
            why = 'reusing make build (build/default)'
        else:
            self.builddir = os.path.join(data.REPO, 'build', f'rfm-{part.fullname.replace(":", "-")}-'
                                                             f'{self.current_environ.name}')
            # quoted: `;` separates CMake list items, not shell commands
            configure = ['cmake -S {} -B {} -DBUILD_TESTING=OFF {}'.format(
                os.path.join(data.REPO, 'src'), self.builddir,
                ' '.join(f'"-D{k}={v}"' for k, v in opts.items()))]
            why = f'building in {os.path.relpath(self.builddir, data.REPO)} (build/default: {why_not})'
        getlogger().info(f'umstudy: {part.fullname}+{self.current_environ.name}: {why}')
        jobs = max(1, (os.cpu_count() if self.build_locally else part.processor.num_cpus) or 1)
        self.build_system.commands = configure + [f'cmake --build {self.builddir} -j {jobs}']
        self.time_limit = self.build_time_limit = jobs_data.time_limit('UmstudyBuild', size())
        if not self.build_locally:   # a job in the partition's quick queue, on a whole node
            sched = part.scheduler.registered_name
            self.build_job.num_cpus_per_task = jobs
            self.build_job.options += jobs_data.queue_options(part.extras, sched, 'quick')
            self.build_job.options += launch.node_request(sched, jobs_data.job_block(part.extras), 1, 1)

    def bindir(self, component):
        return os.path.join(self.builddir, component)

    @sanity_function
    def built(self):
        return sn.assert_true(os.path.isdir(self.builddir),
                              msg=f'no build directory {self.builddir}')


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


def hosts_by_rank(lines, ranks):
    """([host of rank 0, 1, ...], '') from where.sh's lines, or ([], why) when the
    ranks cannot be told apart (no rank number, one rank twice, a rank out of range)."""
    hosts = [None] * ranks
    for line in lines:
        rank = line.get('rank')
        if not isinstance(rank, int) or not 0 <= rank < ranks:
            return [], f'a rank reported rank {rank!r} (host {line.get("host")}); the job has ranks 0..{ranks - 1}'
        if hosts[rank] is not None:
            return [], f'rank {rank} reported twice ({hosts[rank]}, {line.get("host")})'
        hosts[rank] = line.get('host') or ''
    return hosts, ''


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
    valid_prog_environs = [f'+{jobs_data.RUN_ENV}']
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
    # CPU-only checks go to a CPU partition (feature `cpuonly`) where the system has one,
    # and GPU checks stay off it.
    cpu_only = variable(bool, value=False)
    # The layout a multi-rank run needs ({'nodes': N, 'per_node': P}), where each rank
    # ran ({'rank', 'host'[, 'gpus']} lines), and why that was not the layout: a case
    # with a placement failure is never a measurement (umstudy.verdicts).
    layout = variable(dict, value={})
    rank_hosts = variable(list, value=[])
    placement_failure = variable(str, value='')
    # Ranks per node asked of the scheduler and launcher in place of the layout above (0:
    # that layout).  A wrong layout on purpose (-S request_per_node=2): the run must end
    # as a placement failure, which is how CI shows the check catches a packed job.
    request_per_node = variable(int, value=0)

    def is_cpu_only(self):
        return self.cpu_only

    def uses_openacc(self):
        """True for a check of an OpenACC program (it runs under an OpenACC environment)."""
        return False

    @run_after('init')
    def one_environment(self):
        # One programming environment per check, unless UMSTUDY_ENVIRONS (or -p) asks for
        # more: the configuration marks the chosen ones (umstudy.jobs.run_environs).
        self.valid_prog_environs = [f'+{jobs_data.RUN_ACC if self.uses_openacc() else jobs_data.RUN_ENV}']

    @run_after('init')
    def route_by_need(self):
        if not any('cpuonly' in p.features for p in runtime().system.partitions):
            return
        extra = '+cpuonly' if self.is_cpu_only() else '-cpuonly'
        self.valid_systems = [extra if v == '*' else f'{v} {extra}' for v in self.valid_systems]

    @run_after('setup')
    def job_from_data(self):
        """Walltime, queue and resource requests from reframe/times.yaml and the partition's
        `job:` block (systems/<name>/system.yaml)."""
        part = self.current_partition
        sched = part.scheduler.registered_name
        self.time_limit = jobs_data.time_limit(type(self).__name__, self.size)
        self.job.options += jobs_data.queue_options(part.extras, sched, self.size)

    @run_before('run')
    def resources_from_data(self):
        # After the checks' own setup hooks: they set the tasks and GPUs asked for here.
        part = self.current_partition
        sched = part.scheduler.registered_name
        if sched == 'pbs':
            self.job.options += jobs_data.select_fields(part.extras, self.num_gpus_per_node)
        self.job.options += jobs_data.gpu_options(part.extras, sched, self.num_gpus_per_node)
        block = jobs_data.job_block(part.extras)
        self.env_vars.update(block.get('env', {}))
        opts = block.get('launcher_options', [])
        if opts and part.launcher_type.registered_name != 'local':
            self.job.launcher.options += opts

    @run_before('run', always_last=True)
    def place_ranks(self):
        """The job's nodes, one layout for scheduler and launcher, and the check's
        environment on every rank (umstudy.launch), once every other hook has set the
        tasks, the launcher and the environment."""
        part = self.current_partition
        sched = part.scheduler.registered_name
        job, facts = jobs_data.job_block(part.extras), part.extras.get('facts', {})
        ranks = self.num_tasks or 1
        per_node = self.num_tasks_per_node or 1
        nodes = max(1, ranks // per_node)
        ask_per_node = min(ranks, self.request_per_node or per_node)
        ask_nodes = max(1, ranks // ask_per_node)
        self.job.options += launch.node_request(sched, job, ask_nodes, ask_per_node)
        if ranks <= 1:
            return
        self.num_tasks_per_node = ask_per_node
        self.layout = {'nodes': nodes, 'per_node': per_node}
        launcher = type(self.job.launcher).registered_name
        if sched != 'local':   # local: one machine, nothing to ask for
            job_opts, launch_opts = launch.placement(sched, launcher, facts, job, ask_nodes, ask_per_node)
            env_job, env_launch = launch.forwarding(sched, launcher, facts, self.env_vars)
            self.job.options += job_opts + env_job
            if launcher != 'local':
                self.job.launcher.options += launch_opts + env_launch
        if launcher in launch.MPI_LAUNCHERS + ('srun',):
            # (a check whose program starts its own tasks, vcuda-launch, reports them itself)
            self.executable_opts = [*(['--gpus'] if self.num_gpus_per_node else []), '--',
                                    self.executable, *self.executable_opts]
            self.executable = WHERE

    @run_after('setup')
    def no_jobs_on_a_retired_system(self):
        if not self.local:   # P003's model computes on the submitting machine
            skip_if_retired(self)

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

    @run_before('sanity')
    def check_placement(self):
        # After skip_if_unsupported: a program that cannot run here says so first.
        if not self.layout or self.is_dry_run():
            return
        lines = json_records(os.path.join(self.stagedir, self.stdout.evaluate()), 'placement').evaluate()
        if not lines and self.job.exitcode != 0:
            return   # nothing started: the exit code says why (ran_cleanly)
        self.rank_hosts = [{k: v for k, v in r.items() if k != 'bench'} for r in lines]
        hosts, why = hosts_by_rank(lines, self.num_tasks)
        ok, reason = (False, why) if why else check_layout(hosts, **self.layout)
        if not ok:
            self.placement_failure = reason
            raise sn.SanityError(f'placement failure: {reason}')

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
                               {'features': part.features, 'facts': part.extras.get('facts', {})},
                               self.size)
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


def one_node(partition):
    """True where all ranks of a job share one node: `local`, or a partition whose `job:`
    block says it has one node (the single-host Slurm of CI)."""
    return (partition.scheduler.registered_name == 'local' or
            jobs_data.job_block(partition.extras).get('nodes') == 1)


def mpirun_on_local(test):
    """The local system has no launcher of its own: MPI programs start under mpirun,
    oversubscribing where there are fewer cores than ranks (small classes, CI)."""
    if test.current_partition.launcher_type.registered_name == 'local':
        test.job.launcher = getlauncher('mpirun')()
        test.job.launcher.options = ['--oversubscribe', '--bind-to', 'none']
        if os.getuid() == 0:  # containers and CI run as root
            test.env_vars.update(OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1')

"""ReFrame scheduler `ge`: (Altair/Univa/Son of) Grid Engine, TSUBAME4.0's batch system.

ReFrame's own `sge` backend drops a partition's access options and never learns a job's
exit code, which the checks judge (0 passes, 77 is a skip with the program's reason).
This one
- gives the access options to qsub on its command line: TSUBAME4.0 charges a job to the
  group named by `qsub -g GROUP` (without it the job is a trial run of at most ten
  minutes); the script says so in a comment, so a dry run shows what is submitted;
- reads the exit status of a job that has left the queue from `qacct -j` (ReFrame's
  `sge` polls `qstat`, which forgets a finished job).
The nodes a job asks for (`-l node_f=N` on TSUBAME4.0) come from the partition's
`job: nodes_option` (umstudy.launch).  Tried for real in the cluster in a box
(.ci/cluster.sh: Grid Engine 8.1.9, TSUBAME4.0's resource types as consumables).
"""
import re
import time

from reframe.core.backends import register_scheduler
from reframe.core.exceptions import JobSchedulerError
from reframe.core.schedulers.sge import SgeJobScheduler
from reframe.utility import osext

ACCOUNTING_WAIT_S = 60


def submit_command(job):
    """The qsub command line of a job: the partition access first, then the script."""
    return ['qsub', *job.sched_access, '-o', job.stdout, '-e', job.stderr, job.script_filename]


class GridEngineJobScheduler(SgeJobScheduler):
    def emit_preamble(self, job):
        preamble = super().emit_preamble(job)
        if job.sched_access:
            preamble.insert(0, f"# submitted as: qsub {' '.join(job.sched_access)} {job.script_filename}")
        return preamble

    def submit(self, job):
        completed = osext.run_command(' '.join(submit_command(job)), check=True,
                                      timeout=self._submit_timeout)
        m = re.search(r'^Your job (?P<jobid>\d+)', completed.stdout, re.M)
        if not m:
            raise JobSchedulerError(f'could not read the job id from qsub: {completed.stdout!r}')
        job._jobid = m.group('jobid')
        job._submit_time = time.time()

    def poll(self, *jobs):
        jobs = [j for j in jobs if j is not None]
        super().poll(*jobs)
        for job in jobs:
            if job.state != 'COMPLETED' or job.exitcode is not None:
                continue
            out = osext.run_command(f'qacct -j {job.jobid}').stdout
            code = re.search(r'^exit_status\s+(\d+)', out, re.M)
            if code:
                job._exitcode = int(code.group(1))
                continue
            # Accounting is written as the job ends: wait for it a while, then leave
            # the exit code unknown (the check fails saying so, it never guesses 0).
            first = getattr(job, '_umstudy_gone_at', None) or time.time()
            job._umstudy_gone_at = first
            if time.time() - first < ACCOUNTING_WAIT_S:
                job._state = 'COMPLETING'


try:
    register_scheduler('ge')(GridEngineJobScheduler)
except Exception as e:  # noqa: BLE001 - already registered by an earlier import
    if 'already registered' not in str(e):
        raise

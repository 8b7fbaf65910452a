"""ReFrame scheduler `scontrol`: Slurm without an accounting database.

ReFrame's `slurm` backend asks `sacct` for a job's state and exit code, which needs
slurmdbd; its `squeue` backend needs neither but never learns the exit code, and the
checks judge it (0 passes, 77 is a skip with the program's reason).  This one polls
like `squeue` and, once a job has left the queue, reads its state and exit code from
`scontrol show job` (kept for MinJobAge seconds after the end).  The single-host Slurm
of `make test` (.ci/slurm-local.sh) and clusters without accounting use it.
"""
import re

from reframe.core.backends import register_scheduler
from reframe.core.schedulers.slurm import SqueueJobScheduler
from reframe.utility import osext


class ScontrolJobScheduler(SqueueJobScheduler):
    def poll(self, *jobs):
        jobs = [j for j in jobs if j is not None]
        super().poll(*jobs)
        for job in jobs:
            if job.state not in ('COMPLETED', 'CANCELLED') or job.exitcode is not None:
                continue
            out = osext.run_command(f'scontrol show job -o {job.jobid}').stdout
            state = re.search(r'JobState=(\S+)', out)
            code = re.search(r'\bExitCode=(\d+):(\d+)', out)
            if state:
                job._state = state.group(1)
            if code:
                # A signal (second field) reads as 128 + signal, as a shell reports it.
                status, signal = int(code.group(1)), int(code.group(2))
                job._exitcode = 128 + signal if signal else status


try:
    register_scheduler('scontrol')(ScontrolJobScheduler)
except Exception as e:  # noqa: BLE001 - already registered by an earlier import
    if 'already registered' not in str(e):
        raise

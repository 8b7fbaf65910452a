"""ReFrame scheduler `nqsv`: NEC NQSV, the batch system of CCS Cygnus and Pegasus.

NQSV takes qsub's PBS-style `#PBS` lines but not PBS Pro's resource syntax: nodes are
`-b N` (not `-l select=`), the MPI flavour is a job type (`-T openmpi`, from the
partition's access options) and the time limit is `-l elapstim_req=`.  Submission and
polling are PBS's (`qsub`, `qstat -f`); they were not tried on a live NQSV.
"""
from reframe.core.backends import register_scheduler
from reframe.core.schedulers.pbs import PbsJobScheduler
from reframe.utility import seconds_to_hms, toalphanum


def _registered():
    try:
        return register_scheduler('nqsv')(NqsvJobScheduler)
    except Exception as e:  # noqa: BLE001 - already registered by an earlier import
        if 'already registered' not in str(e):
            raise
        return None


class NqsvJobScheduler(PbsJobScheduler):
    def emit_preamble(self, job):
        preamble = [self._format_option(f'-N {toalphanum(job.name)[:15]}'),
                    self._format_option(f'-o {job.stdout}'),
                    self._format_option(f'-e {job.stderr}')]
        if job.time_limit is not None:
            h, m, s = (int(x) for x in seconds_to_hms(job.time_limit))
            preamble.append(self._format_option(f'-l elapstim_req={h:02d}:{m:02d}:{s:02d}'))
        if job.num_tasks is not None:
            per_node = job.num_tasks_per_node or 1
            preamble.append(self._format_option(f'-b {max(1, job.num_tasks // per_node)}'))
        opts = (*job.options, *job.cli_options) if self._sched_access_in_submit else \
            (*job.sched_access, *job.options, *job.cli_options)
        preamble += [self._format_option(o) if o.startswith('-') else o for o in opts]
        preamble.append(f'cd {job.workdir}')
        return preamble


_registered()

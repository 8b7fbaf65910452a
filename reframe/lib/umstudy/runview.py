"""What `make run` shows while it runs: one line per phase.  ReFrame's own output, and the
chatter of the set-up and the build, go to the run's logs under output/logs/.

  python3 -m umstudy.runview progress LABEL      reads ReFrame's output; on a terminal,
                                                 one line counting the cases done, rewritten
                                                 in place; ends with LABEL, for the summary
  python3 -m umstudy.runview summary REPORT SECONDS
                                                 the rest of that line, from the run report:
                                                 cases passed, performance references missed
                                                 (measurements: the report judges them),
                                                 skipped, failed (named), aborted
  python3 -m umstudy.runview verdicts FILE       the verdicts the report counted
                                                 (analysis/report.py's verdicts.json)
"""
import collections
import json
import re
import signal
import sys

# ReFrame's line for a finished case: `[       OK ] ( 12/304) Name ...`
_DONE = re.compile(r'^\[\s*(OK|FAIL|SKIP|ABORT\w*|ERROR)\s*\]\s*\(\s*(\d+)/(\d+)\)')
LABEL_WIDTH = 12  # as the Makefile's printf '%-12s'


def label(text):
    return f'{text:<{LABEL_WIDTH}}'


def progress(lines, out, name, tty):
    """Counts the cases ReFrame reports done; on a terminal shows `name  done/total` in
    place.  Always leaves `name` at the start of the line, for the summary after it."""
    done = total = 0
    for line in lines:
        m = _DONE.match(line)
        if not m:
            continue
        done, total = done + 1, int(m.group(3))
        if tty:
            out.write(f'\r{label(name)}{done}/{total} cases')
            out.flush()
    if tty:
        out.write('\r' + ' ' * (LABEL_WIDTH + 40) + '\r')
    out.write(label(name))
    out.flush()
    return done


def summary(report, seconds):
    """One line: what the run's cases came to."""
    tcs = [tc for run in report.get('runs', []) for tc in run.get('testcases', [])]
    results = collections.Counter(tc.get('result') for tc in tcs)
    failed = [tc for tc in tcs if tc.get('result') == 'fail']
    perf = [tc for tc in failed if tc.get('fail_phase') == 'performance']
    other = sorted({tc['display_name'].split()[0] for tc in failed if tc.get('fail_phase') != 'performance'})
    parts = [f"{results['pass']} passed"]
    if perf:
        parts.append(f'{len(perf)} missed a performance reference (measurements: the report judges them)')
    parts.append(f"{results['skip']} skipped")
    if other:
        parts.append(f"{len(failed) - len(perf)} failed ({', '.join(other)})")
    if results['abort']:
        parts.append(f"{results['abort']} aborted")
    return f"{', '.join(parts)}; {len(tcs)} cases in {seconds:.0f} s"


def verdicts(path):
    with open(path) as f:
        counts = json.load(f).get('counts', {})
    return ', '.join(f'{n} {v}' for v, n in counts.items() if n) or 'none'


def main(argv):
    if len(argv) == 2 and argv[0] == 'progress':
        # Ctrl-C reaches ReFrame and this filter alike: keep reading, so ReFrame can stop
        # cleanly and the run's handling of the interruption follows.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        progress(sys.stdin, sys.stdout, argv[1], sys.stdout.isatty())
    elif len(argv) == 3 and argv[0] == 'summary':
        with open(argv[1]) as f:
            print(summary(json.load(f), float(argv[2])))
    elif len(argv) == 2 and argv[0] == 'verdicts':
        print(label('verdicts') + verdicts(argv[1]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))

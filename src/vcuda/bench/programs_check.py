#!/usr/bin/env python3
"""Unmodified CUDA programs, built by their user, on the real runtime and through vcuda,
compared.

    programs_check.py --vcuda-build DIR (--programs LIST ... | [--name NAME] -- PROGRAM [ARGS...])
                      [--cwd DIR] [--out DIR] [--run-jobs N] [--only NAME,...]
                      [--timeout-s S] [--budget-s S] [--strict] [--list-only]

(--vcuda-build: the vcuda directory of a build tree, build/default/vcuda after `make`.)

This script builds nothing.  Build the programs yourself against the shared CUDA
runtime, which is what vcuda stands in for: `nvcc -cudart shared ...` (CMake:
-DCMAKE_CUDA_RUNTIME_LIBRARY=Shared; a Makefile: add `-cudart shared` to its nvcc
flags), e.g. `nvcc -cudart shared -arch=sm_90 -o vectorAdd vectorAdd.cu`.  nvcc's
default, the static runtime, cannot be remoted: such a program is reported
"not-remotable" and not run through vcuda.  Then list them, one command a line:

    # blank lines and comments are ignored; quoting as in a shell (shlex)
    vectorAdd: cwd=/home/me/build ./vectorAdd
    matrixMul: cwd=/home/me/build timeout=120 ./matrixMul -wA=320 -hA=320
    seeded: cwd=/home/me/build src=/home/me/src/seeded.cu ./seeded --n "1 2"
    /home/me/bin/stream -s 33554432 -n 20

A line: [NAME:] [cwd=DIR] [timeout=S] [src=PATH] PROGRAM [ARGS...].  NAME (letters,
digits, _ . + -; default: the program's file name, made unique) names the program in
the results and logs.  cwd=: the directory both runs start in (default --cwd, itself
the current directory).  A PROGRAM with a slash is taken relative to that directory,
one without is looked up on PATH, as a shell does; it is run as given, with no shell.
timeout=: seconds for its runs instead of --timeout-s.  src=: its sources (a file or a
directory), read only to see whether it seeds its data from the clock (see
varies-locally).  A relative cwd= or src= is taken from --cwd.  A word that starts
with `#` outside quotes starts a comment, as in a shell.  A program whose name ends with
':' or starts with cwd=, timeout= or src= is given as ./NAME.  --programs - reads the
list from stdin; or check one program: `[--name NAME] -- PROGRAM ARGS`.

For each program: run it on the real runtime, then through vcuda (`vcuda-run --gpus
1`: one fresh local server per program), and compare exit status and normalised output
(NORMALISE below, the only place the rules live).  Both runs start in the same
directory: what a program writes there, it writes on each run.  One JSON line per
program goes to OUT/programs.jsonl (name, at: LIST:LINE, command, cwd, program: the
executable found, linkage: shared, static or none (see not-remotable), note, local_rc, vcuda_rc, local_s, vcuda_s, same_output,
unsupported: the calls vcuda refused by name, vcuda_said: the stand-in's other
messages, verdict, reason; a program that prints a STREAM-style table (a `Function
MBytes/sec ...` header and Copy, Mul, Add, Triad, Dot rows, as STREAM-style benchmarks print) also
its bandwidths and whether its own check of the results passed each way), a short
table to stdout and OUT/programs.txt, every program's output and server log under
OUT/logs/.  Programs run --run-jobs at a time (default 1: the GPU to itself; more
shortens the check, and the table says how it was run).  --list-only reads the list
and looks at each program (found? linked against the shared runtime?) without running
anything: no GPU needed.

Verdicts (one per program):
  identical        same exit status, same normalised stdout and stderr, line for line
  same-as-set      same exit status, the same normalised lines in another order (the
                   reason says why the order may vary; see UNORDERED)
  varies-locally   the outputs differ, and two runs on the real runtime differ as well
                   (timing-dependent paths), or the program seeds its data from the
                   clock (srand(time(...)) in the sources src= names) and the outputs
                   agree with every number masked: not a vcuda difference
  refused-by-name  vcuda refused a zero-copy or managed-memory call by name
                   ("vcuda: NAME is not supported remotely", or a kernel given pinned
                   host memory: "vcuda: CALL: kernel argument I points into host memory
                   ..."), and the run then differed
  adapts-to-capability
                   the program printed that the device lacks mapped host or managed memory
                   (what vcuda reports: such memory cannot be remoted) and went on without
                   it; where the outputs align, no other line differs beyond what varies
                   between two real-runtime runs
  waived-needs-managed, waived-needs-zero-copy
                   through vcuda the program waived itself (its own message, exit status
                   2 or 0, where the real runtime ran it) after testing the device
                   attribute that vcuda reports absent: managedMemory, canMapHostMemory
  differs          anything else that is not the same (reason: what differs)
  fails-both       the program failed on the real runtime and through vcuda
  not-found        the program (or its cwd) does not exist or is not executable (reason)
  not-remotable    it does not use the shared CUDA runtime: its executable has no
                   libcudart.so.N among its ELF NEEDED entries and carries the runtime's
                   own functions or device code (linked statically: not run at all), or,
                   with neither (a script, an interpreter), through vcuda it never
                   connected to the server
  not-run          the time budget was spent before it ran
Exit status: 1 when a program differs (or, with --strict, was not found, not remotable
or not run), else 0; 2 on bad usage or a bad list.
"""
import argparse
import concurrent.futures as cf
import json
import mmap
import os
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

# ---- normalisation: the one place where outputs are made comparable --------------------
# Applied line by line to stdout and stderr of both runs.  Each rule: (pattern, replacement,
# why).  Only values that legitimately differ between two runs of the same program are
# masked; everything else must match.
NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
NORMALISE = [
    # a number followed by a time unit: run time is not a result
    (re.compile(NUM + r"\s*(?:ms|msec|msecs|milliseconds?|s|sec|secs|seconds?|us|usec|microseconds?|ns|"
                      r"nanoseconds?|cycles|clocks)\b", re.I), "<t>", "timings"),
    # a number followed by a rate unit: throughput depends on timings
    (re.compile(NUM + r"\s*(?:[KMGT]i?B/s|[KMGT]?bytes/s|[KMGTP]?FLOP/?s|[KMGT]?flops|GOPS|"
                      r"[KMGT]?(?:elements|pixels|options|samples|bodies|interactions|updates|"
                      r"ops|keys|values|rays)(?:/s|/sec| per second)|[KMG]?Hz)\b", re.I), "<r>", "rates"),
    # every number on a line that names a timing or a rate (a value printed before its
    # unit, "Time = 1.23", "Throughput = 4.5 GB/s, Time = 0.1 s, Size = 1024")
    (re.compile(r"^.*\b(?:time|timing|elapsed|throughput|bandwidth|performance|perf|speed|speedup|"
                r"gflops|gb/s|mb/s|msec|usec|seconds?|duration|latency|rate)\b.*$", re.I), None, "timing lines"),
    # pointers and handles printed as hex
    (re.compile(r"0x[0-9a-fA-F]{6,}"), "<addr>", "addresses"),
    # runs of blanks: a masked value printed in a fixed-width column moves its neighbours
    (re.compile(r"\s+"), " ", "column alignment"),
]
NUMBER = re.compile(NUM)
# stderr lines that are vcuda's own (the launcher's banner, the stand-in's refusals):
# removed before comparing, the refusals kept as unsupported-call names
OWN_LINE = re.compile(r"^vcuda(?:-run)?: ")
REFUSED = re.compile(r"^vcuda: (\w+) is not supported remotely(?:: (.*))?$")
# a kernel launch refused because an argument points into pinned host memory
REFUSED_ARG = re.compile(r"^vcuda: (\w+): (kernel argument \d+ points into host memory .*), which is not supported remotely$")
# a refusal for these reasons is by design: such memory needs coherence across the network
BY_DESIGN = re.compile(r"managed memory|zero-copy|mapped")
# a program's own message when it waives itself for want of a device attribute that vcuda
# reports absent (such memory cannot be remoted): (verdict, attribute, message)
WAIVED = [
    ("waived-needs-managed", "managedMemory",
     re.compile(r"Unified Memory not supported|(?:managed|unified) memory (?:is )?not supported|"
                r"does not support (?:managed|unified) memory", re.I)),
    ("waived-needs-zero-copy", "canMapHostMemory",
     re.compile(r"does not support mapping CPU host memory|(?:mapped|zero.copy) (?:host )?memory (?:is )?not supported",
                re.I)),
]
# a line in which a program states a device attribute that vcuda reports absent (mapped
# host memory, managed memory), where the program then goes on without it
CAPABILITY = re.compile(r"canMapHostMemory:\s*No|host page-locked memory mapping:\s*No|"
                        r"does not support mapping of generic host memory|Managed Memory:\s*No|"
                        r"managedMemory:\s*No", re.I)


def normalise(text, timing_lines=None):
    """Lines made comparable; timing_lines: a program's own pattern for lines that are
    all timings without saying so (a STREAM-style result table)."""
    out = []
    for line in text.splitlines():
        line = line.rstrip()
        if timing_lines and timing_lines.match(line):
            line = NUMBER.sub("<n>", line)
        for pat, repl, _ in NORMALISE:
            if repl is None:
                if pat.match(line):
                    line = NUMBER.sub("<n>", line)
            else:
                line = pat.sub(repl, line)
        out.append(line)
    while out and not out[-1]:
        out.pop()
    return out


def split_own(stderr):
    """(stderr without vcuda's own lines, [refused call names], [their reasons], [the
    stand-in's other lines: why a call failed, for the record])."""
    kept, names, reasons, other = [], [], [], []
    for line in stderr.splitlines():
        m = REFUSED.match(line.rstrip()) or REFUSED_ARG.match(line.rstrip())
        if m:
            if m.group(1) not in names:
                names.append(m.group(1))
                reasons.append(m.group(2) or "")
        elif not OWN_LINE.match(line):
            kept.append(line)
        elif line.startswith("vcuda: ") and len(other) < 5:
            other.append(line.rstrip()[:200])
    return "\n".join(kept), names, reasons, other


# programs (by name: the label, else the executable's file name) whose output order
# legitimately varies: accepted as same-as-set, with why
UNORDERED = {
    "simplePrintf": "device printf from several blocks: the blocks print in any order",
    "cdpSimplePrint": "device printf from parent and child grids in any order",
    "simpleAssert": "device assertion messages from several threads in any order",
}
# a program whose data is seeded from the clock: its results legitimately differ between
# any two runs, so beyond the masks it is compared with every number masked
CLOCK_SEED = re.compile(r"\bsrand\s*\(\s*(?:\([^()]*\)\s*)?time\s*\(")
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"", re.S)  # and string literals
SOURCE_EXT = (".cu", ".cpp", ".cc", ".c", ".cxx", ".h", ".hpp", ".cuh", ".inl")


# ---- the list of programs -------------------------------------------------------------
NAME = r"[A-Za-z0-9_][\w.+-]*"
LABEL = re.compile(r"^\s*(" + NAME + r"):(?=\s|$)")
OPTION = re.compile(r"^(cwd|timeout|src)=(.*)$", re.S)
SAFE_NAME = re.compile(r"[^\w.+-]")


def parse_list(text, where, cwd):
    """The programs of a list, in its order (where: its name, for messages; cwd: the
    directory relative cwd= and src= are taken from).  A bad line raises
    ValueError('WHERE:LINE: why')."""
    progs = []
    for n, line in enumerate(text.splitlines(), 1):
        at = f"{where}:{n}"
        m = LABEL.match(line)
        label, rest = (m.group(1), line[m.end():]) if m else (None, line)
        try:
            words = shlex.split(uncommented(rest))
        except ValueError as e:  # an unclosed quote
            raise ValueError(f"{at}: {e}") from None
        if not words and not label:
            continue
        progs.append(program(label, words, at, cwd))
    return progs


def uncommented(line):
    """The line up to a # that starts a word outside quotes, as a shell reads it (shlex
    would also end a word at a # inside it)."""
    quote, escaped, in_word = None, False, False
    for i, c in enumerate(line):
        if escaped:
            escaped = False
        elif quote:
            if c == quote:
                quote = None
            elif c == "\\" and quote == '"':
                escaped = True
        elif c == "\\":
            escaped, in_word = True, True
        elif c in "'\"":
            quote, in_word = c, True
        elif c.isspace():
            in_word = False
        elif c == "#" and not in_word:
            return line[:i]
        else:
            in_word = True
    return line


def program(label, words, at, cwd):
    """One program from its label (or None) and its words: options, then the command."""
    p = {"name": label, "labelled": bool(label), "at": at, "cwd": Path(cwd), "timeout": None, "src": None}
    words = list(words)
    while words and OPTION.match(words[0]):
        key, val = OPTION.match(words.pop(0)).groups()
        if not val:
            raise ValueError(f"{at}: {key}= needs a value")
        if key == "cwd":
            p["cwd"] = Path(cwd) / os.path.expanduser(val)
        elif key == "src":
            p["src"] = Path(cwd) / os.path.expanduser(val)
        else:
            try:
                p["timeout"] = float(val)
            except ValueError:
                p["timeout"] = -1
            if not p["timeout"] > 0:
                raise ValueError(f"{at}: timeout={val}: give seconds, a number above 0")
    if not words:
        raise ValueError(f"{at}: no command" + (f" after the label {label}:" if label else ""))
    p["argv"] = words
    return p


def name_all(progs):
    """Every program a unique name: a label given twice is an error (ValueError); an
    unlabelled program is named after its executable's file name, -2, -3 ... on repeats."""
    seen = {}
    for p in progs:
        if p["labelled"]:
            if p["name"] in seen:
                raise ValueError(f"{p['at']}: the name {p['name']} is already taken at {seen[p['name']]}")
            seen[p["name"]] = p["at"]
    for p in progs:
        if not p["labelled"]:
            base = SAFE_NAME.sub("_", os.path.basename(p["argv"][0].rstrip("/"))) or "program"
            name, k = base, 1
            while name in seen:
                k += 1
                name = f"{base}-{k}"
            p["name"] = name
            seen[name] = p["at"]
    return progs


def locate(p):
    """(the executable the command starts, '') or (None, why it cannot start): a path
    with a slash from the program's cwd, a bare name from PATH, as execvp finds it."""
    cwd, cmd = p["cwd"], p["argv"][0]
    if not cwd.is_dir():
        return None, f"cwd {cwd}: not a directory"
    if "/" in cmd:
        exe = cwd / cmd
        if not exe.exists():
            return None, f"{exe}: no such file"
        if exe.is_dir():
            return None, f"{exe}: a directory"
        if not os.access(exe, os.X_OK):
            return None, f"{exe}: not executable"
        return exe, ""
    found = shutil.which(cmd)
    return (Path(found), "") if found else (None, f"{cmd}: not found on PATH ({os.environ.get('PATH', '')})")


def clock_seeded(src):
    """The first source file under src (a file or a directory) that seeds srand() from
    the clock, outside comments and string literals; None if none does."""
    files = [src] if src.is_file() else sorted(f for f in src.rglob("*") if f.suffix in SOURCE_EXT and f.is_file())
    for f in files:
        try:
            if CLOCK_SEED.search(COMMENT.sub(" ", f.read_text(errors="replace"))):
                return f
        except OSError:
            pass
    return None


# ---- is it linked against the shared CUDA runtime? -------------------------------------
# vcuda-run preloads the stand-in for libcudart.so.N; a program linked statically against
# the runtime (nvcc's default) calls its own copy, which drives the local GPU, so through
# vcuda it would run locally and look "identical".  Its ELF file tells: no libcudart.so.N
# among its NEEDED entries, and the runtime's functions (the names the stand-in exports,
# src/cudart_exports.txt) defined in it, or device code (.nv_fatbin) to register.
SHARED_CUDART = re.compile(r"^libcudart\.so(?:\.\d+)*$")
EXPORTS = Path(__file__).resolve().parent.parent / "src" / "cudart_exports.txt"


def runtime_names():
    return {x.strip() for x in EXPORTS.read_text().splitlines() if x.strip() and not x.startswith("#")}


def elf_facts(path):
    """(NEEDED entries, names its symbol tables define, section names) of an ELF file, or
    None where it is not one (a script)."""
    with open(path, "rb") as f:
        if f.read(4) != b"\x7fELF":
            return None
        f.seek(0)
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        wide, end = m[4] == 2, "<" if m[5] == 1 else ">"
        u = lambda fmt, off: struct.unpack_from(end + fmt, m, off)  # noqa: E731
        shoff, = u("Q" if wide else "I", 0x28 if wide else 0x20)
        shentsize, shnum, shstrndx = u("HHH", 0x3A if wide else 0x2E)
        sh = [u("IIQQQQIIQQ" if wide else "IIIIIIIIII", shoff + i * shentsize) for i in range(shnum)]
        # (name, type, flags, addr, offset, size, link, info, addralign, entsize)

        def cstr(sec, off):
            start = sh[sec][4] + off
            return m[start:m.find(b"\0", start)].decode(errors="replace")
        sections = [cstr(shstrndx, s[0]) for s in sh] if shstrndx < shnum else []
        needed, defined = [], set()
        for s in sh:
            if s[1] == 6:  # SHT_DYNAMIC: (tag, value) pairs, strings in the linked section
                fmt, size = ("qQ", 16) if wide else ("iI", 8)
                for k in range(s[5] // size):
                    tag, val = u(fmt, s[4] + k * size)
                    if tag == 0:
                        break
                    if tag == 1:  # DT_NEEDED
                        needed.append(cstr(s[6], val))
            elif s[1] in (2, 11) and s[9]:  # SHT_SYMTAB, SHT_DYNSYM
                for k in range(s[5] // s[9]):
                    if wide:
                        name, _, _, shndx, _, _ = u("IBBHQQ", s[4] + k * s[9])
                    else:
                        name, _, _, _, _, shndx = u("IIIBBH", s[4] + k * s[9])
                    if shndx and name:  # defined here (not SHN_UNDEF)
                        defined.add(cstr(s[6], name))
        return needed, defined, sections
    except (struct.error, IndexError, ValueError) as e:
        raise ValueError(f"{path}: a malformed ELF file ({e})") from None
    finally:
        m.close()


def linkage(exe):
    """('shared' | 'static' | 'none', why): libcudart.so.N among its NEEDED; none there
    but the runtime's own functions or device code in it (linked statically, or through
    the driver API: either way not through the runtime vcuda stands in for); neither (a
    script, an interpreter: whether it reaches vcuda shows only when it runs)."""
    try:
        facts = elf_facts(exe)
    except (OSError, ValueError) as e:
        return "none", f"its ELF file could not be read ({e})"
    if facts is None:
        with open(exe, "rb") as f:
            first = f.readline(200).decode(errors="replace").strip()
        return "none", "a script" + (f" ({first})" if first.startswith("#!") else "")
    needed, defined, sections = facts
    shared = [n for n in needed if SHARED_CUDART.match(n)]
    if shared:
        return "shared", "NEEDED " + ", ".join(shared)
    has = f"no libcudart.so.N among its NEEDED ({', '.join(needed) or 'none'})"
    runtime = sorted(defined & runtime_names(), key=lambda n: (n.startswith("_"), n))  # cudaX first
    if runtime:
        return "static", (f"{has}, and it defines the CUDA runtime's own {', '.join(runtime[:3])}"
                          f"{' ...' if len(runtime) > 3 else ''}: linked statically against the runtime "
                          "(nvcc's default), which vcuda cannot stand in for; build it with `nvcc -cudart shared`")
    if ".nv_fatbin" in sections:
        return "static", (f"{has}, and it carries device code (.nv_fatbin): linked statically against the CUDA "
                          "runtime (nvcc's default) or driving the GPU through the driver API, neither of which "
                          "vcuda can stand in for; build it with `nvcc -cudart shared`")
    return "none", has


# ---- run, compare ---------------------------------------------------------------------
LIVE = set()  # process groups of the runs under way, killed if the check itself is stopped
LIVE_LOCK = threading.Lock()


def stop_runs(sig, _frame):
    with LIVE_LOCK:
        for pgid in LIVE:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except OSError:
                pass
    # at once: the pools would otherwise go on with the programs still queued (the
    # results so far are in programs.partial.jsonl)
    os._exit(128 + sig)




def run_one(p, mode, launcher, logs, tag, timeout):
    """Runs the command as given in its cwd; a run that outlives its timeout is killed with
    its process group."""
    cmd = list(p["argv"])
    if mode == "vcuda":
        cmd = [str(launcher), "--gpus", "1", "--log-dir", str(server_logs(logs, p)), "--"] + cmd
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=p["cwd"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    with LIVE_LOCK:
        LIVE.add(proc.pid)
    try:
        out, err = proc.communicate(timeout=p["timeout"] or timeout)
        rc, hung = proc.returncode, False
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:  # (it ended meanwhile)
            pass
        out, err = proc.communicate()
        rc, hung = "timeout", True
    finally:
        with LIVE_LOCK:
            LIVE.discard(proc.pid)
    secs = time.monotonic() - t0
    out, err = out.decode(errors="replace"), err.decode(errors="replace")
    (logs / f"{p['name']}.{tag}.out").write_text(out)
    (logs / f"{p['name']}.{tag}.err").write_text(err)
    return {"rc": rc, "hung": hung, "secs": round(secs, 2), "out": out, "err": err}


def server_logs(logs, p):
    return logs / f"{p['name']}.server"


def reached_server(d):
    """Whether a client authenticated with the server whose log is in d (None: no server
    started, so nothing can be said)."""
    texts = [f.read_text(errors="replace") for f in sorted(d.glob("*.log"))] if d.is_dir() else []
    if not any(" listening on " in t for t in texts):
        return None
    # "peer ADDR: authenticated (connection N, tenant NAME)"
    return any(re.search(r": authenticated \(connection \d+(, tenant [^)]*)?\)", t) for t in texts)


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"line {i + 1}: real {x[:120]!r} / vcuda {y[:120]!r}"
    return f"{len(a)} vs {len(b)} lines"


STREAM_ROW = re.compile(r"^(?:Copy|Mul|Add|Triad|Dot|Nstream)\s")
STREAM_FAILED = re.compile(r"FAILED validation|Validation failed")
# a STREAM-style table's header: its rows (STREAM_ROW) are all timings without saying so
STREAM_HEAD = re.compile(r"^Function\s+[KMGT]?i?Bytes/sec\b", re.M)


def bandwidths(text):
    """A STREAM-style table: function -> its bandwidth column (the unit its header says)."""
    bw = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 2 and STREAM_ROW.match(line):
            try:
                bw[f[0]] = float(f[1])
            except ValueError:
                pass
    return bw


def waived_for(loc, vc, verr):
    """(verdict, reason) where the run through vcuda ended with the program's own waive
    message for an attribute vcuda reports absent (exit status 2, EXIT_WAIVED, or 0) and
    the real runtime's run neither said it nor failed; else None."""
    if loc["rc"] != 0 or vc["rc"] not in (0, 2):
        return None
    lines = [x.strip() for x in (vc["out"] + "\n" + verr).splitlines() if x.strip()]
    for verdict, attr, pat in WAIVED:
        said = [x for x in lines if pat.search(x)]
        if said and not pat.search(loc["out"] + loc["err"]):
            return verdict, (f"waived itself through vcuda (exit status {vc['rc']}): '{said[0][:120]}' -- "
                             f"it tested {attr}, which vcuda reports 0 (such memory cannot be remoted)")
    return None


def judge(p, loc, vc, rerun):
    """Verdict and reason for one program (rerun: a second run on the real runtime)."""
    verr, names, reasons, said = split_own(vc["err"])
    tl = p.get("timing_lines")
    l_out, v_out = normalise(loc["out"], tl), normalise(vc["out"], tl)
    l_err, v_err = normalise(loc["err"], tl), normalise(verr, tl)
    same_rc = loc["rc"] == vc["rc"]
    same = l_out == v_out and l_err == v_err
    as_set = sorted(l_out) == sorted(v_out) and sorted(l_err) == sorted(v_err)
    res = {"same_output": same, "unsupported": names, "vcuda_said": said}
    local_ok = loc["rc"] == 0
    if not local_ok and vc["rc"] != 0 and not same:
        return dict(res, verdict="fails-both", reason=f"real runtime rc {loc['rc']}, vcuda rc {vc['rc']}")
    if same_rc and same:
        why = "same exit status and output" + (" (fails the same way on both)" if not local_ok else "")
        return dict(res, verdict="identical", reason=why)
    if same_rc and as_set:
        why = UNORDERED.get(p["name"], "no reason known why the order should vary")
        return dict(res, verdict="same-as-set", reason="same lines in another order: " + why)
    masked = lambda lines: [NUMBER.sub("<n>", x) for x in lines]
    if p.get("clock_seeded") and same_rc and masked(l_out) == masked(v_out) and masked(l_err) == masked(v_err):
        return dict(res, verdict="varies-locally",
                    reason="seeds its data from the clock (srand(time(...))): equal with every number masked")
    waived = waived_for(loc, vc, verr)
    if waived:
        return dict(res, verdict=waived[0], reason=waived[1])
    by_design = [n for n, r in zip(names, reasons) if BY_DESIGN.search(r)]
    if by_design:
        return dict(res, verdict="refused-by-name", reason="refused: " + ", ".join(by_design))
    diff = first_diff(l_out, v_out) if l_out != v_out else "stderr " + first_diff(l_err, v_err)
    if not same_rc:
        diff = f"exit status {loc['rc']} vs {vc['rc']}; {diff}"
    if names:
        diff += "; refused: " + ", ".join(names)
    r2 = rerun()
    if r2 and same_rc:
        r_out, r_err = normalise(r2["out"], tl), normalise(r2["err"], tl)
        if r_out != l_out or r_err != l_err:
            hows = [within_local_variation(l_out, r_out, v_out), within_local_variation(l_err, r_err, v_err)]
            how = all(hows) and "; ".join(h for h in hows if h != "the same")
            if how:
                return dict(res, verdict="varies-locally", reason=f"two runs on the real runtime differ too ({how}); {diff}")
            diff += "; beyond what varies between two runs on the real runtime"
    adapted = adapts(loc, vc, l_out, v_out, normalise(r2["out"], tl) if r2 else l_out)
    if adapted:
        return dict(res, verdict="adapts-to-capability", reason=adapted)
    return dict(res, verdict="differs", reason=diff)


def adapts(loc, vc, first, vc_out, second):
    """Why the run through vcuda differs only because the program read an attribute vcuda
    reports absent and went on without it ('' if not): it printed so (CAPABILITY) where
    the real runtime's run did not, both ended well, and, where the outputs align line by
    line, every other differing line also differs between two real-runtime runs."""
    said = [x for x in vc_out if CAPABILITY.search(x) and x not in first]
    if not said or loc["rc"] != 0 or vc["rc"] != 0:
        return ""
    same = lambda a, b, v: a == v or a != b or CAPABILITY.search(v)  # noqa: E731
    if len(first) == len(vc_out) == len(second) and all(map(same, first, second, vc_out)):
        return f"prints what vcuda reports, '{said[0].strip()[:100]}'; every other line as on the real runtime"
    # another path from that line on: the lines before it as on the real runtime, and the
    # same last line (where the two real runs agree on it)
    k = vc_out.index(said[0])
    if k <= min(len(first), len(second)) and all(map(same, first[:k], second[:k], vc_out[:k])) \
            and first and second and vc_out and first[-1] == second[-1] == vc_out[-1]:
        return (f"reads what vcuda reports, '{said[0].strip()[:100]}', and takes its path for it (such "
                f"memory cannot be remoted): the {k} lines before it and the last line as on the real runtime")
    return ""


def within_local_variation(first, second, vc):
    """How vcuda's lines differ from the first real-runtime run only where that run and a
    second one differ too ('' if they differ elsewhere): line by line where all three have
    as many lines; where the two real runs do not, only that can be said."""
    if first == vc:
        return "the same"
    if len(first) == len(second) == len(vc):
        if all(a == v or a != b for a, b, v in zip(first, second, vc)):
            return "only on lines that vary between them"
        return ""
    if len(first) != len(second):
        return "their line counts vary; not compared line by line"
    return ""


def read_programs(a, ap, command):
    """Every program of the lists and the command line, named, with its executable,
    linkage and clock seeding looked at; a bad list ends the check (exit status 2)."""
    progs = []
    try:
        for f in a.programs:
            try:
                text = sys.stdin.read() if str(f) == "-" else f.read_text()
            except OSError as e:
                ap.error(f"--programs {f}: {e.strerror}")
            progs += parse_list(text, str(f), a.cwd)
        if command:
            progs.append(program(a.name, command, "command line", a.cwd))
        name_all(progs)
    except ValueError as e:
        ap.error(str(e))
    for p in progs:
        if p["src"] and not p["src"].exists():
            ap.error(f"{p['at']}: src={p['src']}: no such file or directory")
        exe, why = locate(p)
        p["program"], p["linkage"], p["why"], note = exe, None, why, []
        if exe:
            p["linkage"], p["why"] = linkage(exe)
            if p["linkage"] == "none":
                note.append(p["why"] + ": whether it reaches vcuda shows when it runs")
        seeded = p["src"] and clock_seeded(p["src"])
        p["clock_seeded"] = bool(seeded)
        if seeded:
            note.append(f"seeds its data from the clock ({seeded})")
        p["note"] = "; ".join(note)
    return progs


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    command = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(
        usage="%(prog)s --vcuda-build DIR (--programs LIST ... | [--name NAME] -- PROGRAM [ARGS...]) [options]",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", type=Path, action="append", default=[],
                    help="a list of commands, one a line (- for stdin); again for another list")
    ap.add_argument("--name", help="the name of the program given after --")
    ap.add_argument("--cwd", type=Path, default=Path.cwd(),
                    help="where the programs run and relative cwd= are taken from (default: here)")
    ap.add_argument("--vcuda-build", type=Path, help="vcuda build directory (vcuda-run, vcuda-server, lib/)")
    ap.add_argument("--out", type=Path, default=Path("programs-out"), help="programs.jsonl, programs.txt, logs/")
    ap.add_argument("--run-jobs", type=int, default=1,
                    help="programs run at a time on the GPU (each with its own server); 1 unless time is short")
    ap.add_argument("--only", default="", help="comma-separated program names")
    ap.add_argument("--strict", action="store_true",
                    help="a program not found, not remotable or not run fails the check too")
    ap.add_argument("--timeout-s", type=float, default=60, help="a run taking longer is killed (default 60)")
    ap.add_argument("--budget-s", type=float, default=0, help="stop starting programs after this many seconds")
    ap.add_argument("--list-only", action="store_true",
                    help="read the list and look at each program, run nothing (no GPU needed)")
    a = ap.parse_args(argv)
    if a.name and not command:
        ap.error("--name names the program given after --")
    if not a.programs and not command:
        ap.error("nothing to check: give --programs LIST and/or -- PROGRAM [ARGS...]")
    if a.name and not re.fullmatch(NAME, a.name):
        ap.error(f"--name {a.name!r}: letters, digits, _ . + - only")
    a.cwd = a.cwd.resolve()
    launcher = a.vcuda_build / "vcuda-run" if a.vcuda_build else None
    if not a.list_only and not (launcher and launcher.is_file()):
        ap.error("--vcuda-build DIR with vcuda-run in it is needed to run")
    progs = read_programs(a, ap, command)
    if a.only:
        want = set(a.only.split(","))
        unknown = want - {p["name"] for p in progs}
        if unknown:
            ap.error(f"--only: no program is named {', '.join(sorted(unknown))}")
        progs = [p for p in progs if p["name"] in want]

    def row_of(p):
        return {"name": p["name"], "at": p["at"], "command": p["argv"], "cwd": str(p["cwd"]),
                "program": str(p["program"]) if p["program"] else None, "linkage": p["linkage"], "note": p["note"]}

    def decided(p):  # the verdict a program gets without running, if it has one
        if not p["program"]:
            return {"verdict": "not-found", "reason": p["why"]}
        if p["linkage"] == "static":
            return {"verdict": "not-remotable", "reason": p["why"]}
        return None

    if a.list_only:
        for p in progs:
            print(json.dumps(dict(row_of(p), **(decided(p) or {"reason": p["why"]}))))
        return 0
    t0 = time.monotonic()
    for sig in (signal.SIGTERM, signal.SIGINT):  # a stopped check leaves no program running
        signal.signal(sig, stop_runs)
    a.out = a.out.resolve()
    logs = a.out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    results = []
    partial = open(a.out / "programs.partial.jsonl", "w")  # as results come: a killed check leaves them
    lock = threading.Lock()

    def record(row):
        with lock:
            results.append(row)
            partial.write(json.dumps(row) + "\n")
            partial.flush()
            print(f"{row['name']}: {row['verdict']} ({row['reason'][:150]})", flush=True)

    def check(p, row):
        try:
            record(check_one(p, row))
        except Exception as e:  # one program's trouble must not stop the others
            record(dict(row, verdict="not-run", reason=f"programs_check failed on it: {e!r}"))

    def check_one(p, row):
        if a.budget_s and time.monotonic() - t0 > a.budget_s:
            return dict(row, verdict="not-run", reason=f"time budget of {a.budget_s:.0f} s spent")
        shutil.rmtree(server_logs(logs, p), ignore_errors=True)  # (an earlier check's)
        loc = run_one(p, "local", launcher, logs, "local", a.timeout_s)
        vc = run_one(p, "vcuda", launcher, logs, "vcuda", a.timeout_s)
        row = dict(row, local_rc=loc["rc"], vcuda_rc=vc["rc"], local_s=loc["secs"], vcuda_s=vc["secs"])
        # (a run killed for its time may have been killed before its first CUDA call)
        if p["linkage"] == "none" and not vc["hung"] and reached_server(server_logs(logs, p)) is False:
            return dict(row, verdict="not-remotable",
                        reason=f"through vcuda it never connected to the server ({p['why']}): it does not use "
                               "the shared CUDA runtime vcuda stands in for (linked statically, or no CUDA at all)")
        stream = any(STREAM_HEAD.search(r["out"]) for r in (loc, vc))
        if stream:
            p = dict(p, timing_lines=STREAM_ROW)
        rerun = lambda: run_one(p, "local", launcher, logs, "local2", a.timeout_s) \
            if loc["rc"] == vc["rc"] else None
        row = dict(row, **judge(p, loc, vc, rerun))
        if stream:
            row["bandwidth"] = {"local": bandwidths(loc["out"]), "vcuda": bandwidths(vc["out"])}
            # its check of the results: such a program says "FAILED validation" and exits 1,
            # or only says "Validation failed" (on stderr), depending on its version
            row["own_check_passed"] = {m: r["rc"] == 0 and not STREAM_FAILED.search(r["err"])
                                       for m, r in (("local", loc), ("vcuda", vc))}
        return row

    runs = []
    with cf.ThreadPoolExecutor(max(1, a.run_jobs)) as gpu:
        for p in progs:
            early = decided(p)
            if early:
                record(dict(row_of(p), **early))
            else:
                runs.append(gpu.submit(check, p, row_of(p)))
        for r in runs:
            r.result()
    partial.close()
    order = {p["name"]: i for i, p in enumerate(progs)}
    results.sort(key=lambda r: order[r["name"]])
    with open(a.out / "programs.jsonl", "w") as f:
        for r in results:
            f.write(json.dumps(r) + "\n")
    os.unlink(a.out / "programs.partial.jsonl")
    counts = {}
    for r in results:
        counts.setdefault(r["verdict"], []).append(r["name"])
    lines = [f"{'verdict':<21} {'n':>3}  programs"]
    for v, names in sorted(counts.items()):
        lines.append(f"{v:<21} {len(names):>3}  {', '.join(names)}")
    for r in results:  # the bandwidths, local vs vcuda, where a program reports them
        bw = r.get("bandwidth")
        if bw:
            lines.append(f"{r['name']}: its own check passed: {r['own_check_passed']}; bandwidth (its unit) "
                         "local / vcuda: " + ", ".join(f"{f} {v:.1f} / {bw['vcuda'].get(f, float('nan')):.1f}"
                                                       for f, v in bw["local"].items()))
    own = {p["name"]: p["timeout"] for p in progs if p["timeout"]}
    lines.append(f"({a.run_jobs} program(s) at a time on the GPU, each run killed after {a.timeout_s:.0f} s"
                 f"{', ' + ', '.join(f'{n} after {s:.0f} s' for n, s in own.items()) if own else ''})")
    (a.out / "programs.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    bad = [r["name"] for r in results if r["verdict"] == "differs"]
    missing = [r["name"] for r in results if r["verdict"] in ("not-found", "not-remotable", "not-run")]
    print(f"programs_check: {len(results)} programs, {len(bad)} differ{': ' + ', '.join(bad) if bad else ''}; "
          f"{len(missing)} not found, not remotable or not run ({time.monotonic() - t0:.0f} s)")
    return 1 if bad or (a.strict and missing) else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The release tarball the Spack recipes pin, made reproducibly from this checkout.

    python3 spack-repo/dist.py [--out DIR]     writes DIR/umstudy-<version>.tar.gz (default
                                               output/dist), prints its sha256 and path
    python3 spack-repo/dist.py --check         exit 1 unless the recipes pin this tarball
    python3 spack-repo/dist.py --pin           write this tarball's sha256 into the recipes
    python3 spack-repo/dist.py --mirror DIR    also put it in the Spack mirror DIR, in the
                                               layout Spack 1.x reads (_source-cache/archive/)

The tarball holds what Spack builds: every file git tracks under src/, and LICENSE, under
umstudy-<version>/.  Only file contents and the executable bit go in: names sorted, owner
root, one fixed time stamp, gzip without a name or time, so the same checkout gives the
same bytes (and sha256) on any machine, whatever its clock, umask or user.  The version
and its sha256 live once, as RELEASE in the recipes' shared base (build_systems/component.py).
"""
import argparse
import gzip
import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BASE = os.path.join(HERE, 'spack_repo', 'umstudy', 'build_systems', 'component.py')
CONTENTS = ['src', 'LICENSE']
# Any fixed time works; this one (2026-01-01T00:00:00Z) is not 0, which some tools
# treat as "no time".
MTIME = 1767225600
RELEASE_RE = re.compile(r'^RELEASE = \("(?P<version>[^"]+)", "(?P<sha256>[0-9a-f]*)"\)$', re.M)


def release():
    """(version, sha256) pinned in the recipes."""
    m = RELEASE_RE.search(open(BASE).read())
    if not m:
        raise SystemExit(f'dist: no RELEASE = ("<version>", "<sha256>") line in {BASE}')
    return m.group('version'), m.group('sha256')


def tracked_files():
    try:
        out = subprocess.run(['git', '-C', ROOT, 'ls-files', '-z', '--'] + CONTENTS,
                             capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit(f'dist: needs a git checkout of umstudy (git ls-files failed: {e})')
    files = sorted(p for p in out.decode().split('\0') if p)
    missing = [p for p in files if not os.path.isfile(os.path.join(ROOT, p))]
    if missing:
        raise SystemExit('dist: tracked files missing from the working tree: ' + ', '.join(missing[:5]))
    return files


def _info(name, mode, size=0, kind=tarfile.REGTYPE):
    ti = tarfile.TarInfo(name)
    ti.type, ti.mode, ti.size, ti.mtime = kind, mode, size, MTIME
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = 'root'
    return ti


def tarball(version):
    """The tarball's bytes."""
    prefix = f'umstudy-{version}'
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode='w', format=tarfile.GNU_FORMAT) as tar:
        dirs = set()
        for path in tracked_files():
            parts = path.split('/')
            for i in range(1, len(parts)):
                d = '/'.join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    tar.addfile(_info(f'{prefix}/{d}', 0o755, kind=tarfile.DIRTYPE))
            full = os.path.join(ROOT, path)
            data = open(full, 'rb').read()
            mode = 0o755 if os.stat(full).st_mode & 0o111 else 0o644
            tar.addfile(_info(f'{prefix}/{path}', mode, len(data)), io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(filename='', mode='wb', fileobj=out, compresslevel=9, mtime=0) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def mirror_path(sha256):
    """Where Spack 1.x looks for this archive in a mirror: by its checksum."""
    return os.path.join('_source-cache', 'archive', sha256[:2], f'{sha256}.tar.gz')


def put_in_mirror(mirror, data, sha256, version):
    """The archive by checksum, and (as `spack mirror create` does) a link to it per
    package and version, <package>/<package>-<version>.tar.gz, for people."""
    dest = os.path.join(mirror, mirror_path(sha256))
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    with open(dest, 'wb') as f:
        f.write(data)
    for pkg in packages():
        link = os.path.join(mirror, pkg, f'{pkg}-{version}.tar.gz')
        os.makedirs(os.path.dirname(link), exist_ok=True)
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(os.path.relpath(dest, os.path.dirname(link)), link)
    return dest


def packages():
    pkgs = os.path.join(HERE, 'spack_repo', 'umstudy', 'packages')
    return sorted(d.replace('_', '-') for d in os.listdir(pkgs)
                  if d != 'umstudy' and os.path.isfile(os.path.join(pkgs, d, 'package.py')))


def pin(sha256):
    text = open(BASE).read()
    new = RELEASE_RE.sub(lambda m: f'RELEASE = ("{m.group("version")}", "{sha256}")', text, count=1)
    if new != text:
        with open(BASE, 'w') as f:
            f.write(new)
    return new != text


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--out', default=os.path.join(ROOT, 'output', 'dist'), help='directory of the tarball')
    ap.add_argument('--mirror', help='also lay the tarball out in this Spack mirror directory')
    ap.add_argument('--check', action='store_true', help='exit 1 unless the recipes pin this tarball')
    ap.add_argument('--pin', action='store_true', help="write this tarball's sha256 into the recipes")
    args = ap.parse_args(argv)
    version, pinned = release()
    data = tarball(version)
    sha256 = hashlib.sha256(data).hexdigest()
    if args.check:
        if sha256 != pinned:
            print(f'dist: the recipes pin umstudy@{version} sha256 {pinned or "(none)"}, but this checkout '
                  f'makes {sha256}: after changing src/ or LICENSE, run `make spack-pin` '
                  '(python3 spack-repo/dist.py --pin) and commit', file=sys.stderr)
            return 1
        print(f'dist: the recipes pin this checkout (umstudy@{version}, sha256 {sha256})')
        return 0
    if args.pin:
        print(('pinned' if pin(sha256) else 'already pinned') + f': umstudy@{version} sha256 {sha256}')
    name = f'umstudy-{version}.tar.gz'
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, name)
    with open(path, 'wb') as f:
        f.write(data)
    print(f'{sha256}  {path}')
    if args.mirror:
        print(f'mirror: {put_in_mirror(args.mirror, data, sha256, version)}')
    if not args.pin and sha256 != pinned:
        print(f'dist: note: the recipes pin {pinned or "no sha256"} (run `make spack-pin`)', file=sys.stderr)
    return 0


if __name__ == '__main__':
    sys.exit(main())

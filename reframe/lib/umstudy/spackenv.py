"""Spack environments (systems/<name>/spack.yaml) from each system's `spack:` section.

    python3 -m umstudy.spackenv            writes every systems/<name>/spack.yaml
    python3 -m umstudy.spackenv --check    exits 1 when one is out of date

The environment builds this checkout: the umstudy repository and one `develop` entry per
component recipe found in spack-repo (so a new component is picked up by regenerating,
not by editing five files).  Every entry's path is the checkout; each recipe reinstalls
only when what it builds from changed (UmstudyComponent.detect_dev_src_change).  `arch` (platform-os-target) becomes a requirement on every
package, so the environment refuses to concretise for the wrong machine.
"""
import argparse
import copy
import os
import sys

import yaml

from . import data

RECIPES = os.path.join(data.REPO, 'spack-repo', 'spack_repo', 'umstudy', 'packages')
BUNDLE = 'umstudy'
FAMILY = {'neoverse_v2': 'aarch64', 'neoverse_v1': 'aarch64', 'a64fx': 'aarch64'}
HEADER = ('# GENERATED from systems/{name}/system.yaml (`spack:`) by\n'
          '#   PYTHONPATH=reframe/lib python3 -m umstudy.spackenv\n'
          '# Edit system.yaml, not this file.  Use: spack -e systems/{name} concretize; install\n')


def components():
    """Component recipes (package names, dashes) in the umstudy repository, bundle excluded."""
    return sorted(d.replace('_', '-') for d in os.listdir(RECIPES)
                  if d != BUNDLE and not d.startswith(('_', '.'))
                  and os.path.isfile(os.path.join(RECIPES, d, 'package.py')))


def environment(name):
    """The `spack:` mapping of systems/<name>/spack.yaml."""
    site = copy.deepcopy(data.system(name).get('spack') or {})
    if not site:
        raise KeyError(f'systems/{name}/system.yaml has no spack: section')
    arch = site.pop('arch', None)
    packages = site.pop('packages', {})
    if arch:
        # Built packages at the site's microarchitecture, externals at its family (Spack
        # gives externals the family target).  Spack detects a compiler's libc by running
        # it, so these environments concretise on their site, not on another machine.
        platform, os_, target = arch.split('-', 2)
        packages.setdefault('all', {})['require'] = [
            f'platform={platform} os={os_} target={FAMILY.get(target, "x86_64")}:']
        packages['all']['target'] = [target]
    # The GPU architecture of every CUDA component: a preference for all packages, since
    # propagating it from the bundle (umstudy cuda_arch==90) is refused by Spack's
    # concretizer (a multi-valued variant with a disjoint `none`: spack/spack#39168).
    archs = str(data.system(name).get('build', {}).get('cuda_archs', '')).replace(';', ',')
    if archs:
        packages.setdefault('all', {})['variants'] = f'cuda_arch={archs}'
    env = {}
    if 'include' in site:
        # Untracked files of this machine's externals and compilers; prefer_modify makes
        # `spack -e systems/<name> external find` (and compiler find) write there, never
        # into this generated, tracked file.
        env['include'] = [{'path': p, 'optional': True, 'prefer_modify': True}
                          for p in site.pop('include')]
    env['repos'] = {BUNDLE: '../../spack-repo/spack_repo/umstudy'}
    env['specs'] = site.pop('specs')
    env['develop'] = {c: {'spec': f'{c}@=main', 'path': '../..'} for c in components()}
    env['concretizer'] = {'unify': True}
    env['view'] = False
    env['packages'] = packages
    env.update(site)
    return env


def render(name):
    return HEADER.format(name=name) + yaml.safe_dump({'spack': environment(name)},
                                                     sort_keys=False, width=100)


def path(name):
    return os.path.join(data.SYSTEMS_DIR, name, 'spack.yaml')


def with_spack():
    return [n for n in data.system_names() if data.system(n).get('spack')]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--check', action='store_true', help='only report stale files (exit 1)')
    args = ap.parse_args(argv)
    stale = []
    for name in with_spack():
        text = render(name)
        old = open(path(name)).read() if os.path.isfile(path(name)) else None
        if old == text:
            continue
        stale.append(name)
        if not args.check:
            with open(path(name), 'w') as f:
                f.write(text)
            print(f'wrote {os.path.relpath(path(name), data.REPO)}')
    if args.check and stale:
        print('out of date (run python3 -m umstudy.spackenv): ' +
              ', '.join(os.path.relpath(path(n), data.REPO) for n in stale), file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())

"""Detects what this machine has, for the `local` system.

GPUs through the CUDA driver API (ctypes on libcuda, so nothing needs building first):
count, name, compute capability, managed memory, concurrent managed access and
pageable memory access (HMM/ATS - what system-allocated memory needs).  MPI and
OpenACC compilers from PATH.  The result becomes ReFrame partition features, so checks
select or skip themselves; `python3 -m umstudy.detect` prints it as JSON.
"""
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile

# CUdevice_attribute values from cuda.h (stable across CUDA releases).
_ATTR = {
    'cc_major': 75,
    'cc_minor': 76,
    'managed_memory': 83,
    'pageable_memory_access': 88,
    'concurrent_managed_access': 89,
    'pageable_uses_host_page_tables': 100,
}


def cuda_devices():
    """List of dicts, one per visible GPU; [] with a reason when there are none."""
    try:
        cuda = ctypes.CDLL('libcuda.so.1')
    except OSError as e:
        return [], f'no CUDA driver (libcuda.so.1: {e})'
    if cuda.cuInit(0) != 0:
        return [], 'cuInit failed (no usable GPU or driver)'
    count = ctypes.c_int(0)
    if cuda.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return [], 'the CUDA driver reports no devices'
    devices = []
    for ordinal in range(count.value):
        dev = ctypes.c_int(0)
        cuda.cuDeviceGet(ctypes.byref(dev), ordinal)
        name = ctypes.create_string_buffer(256)
        cuda.cuDeviceGetName(name, 256, dev)
        mem = ctypes.c_size_t(0)
        cuda.cuDeviceTotalMem_v2(ctypes.byref(mem), dev)
        info = {'ordinal': ordinal, 'name': name.value.decode(), 'memory_gib': mem.value / 2**30}
        for key, attr in _ATTR.items():
            val = ctypes.c_int(0)
            cuda.cuDeviceGetAttribute(ctypes.byref(val), attr, dev)
            info[key] = val.value
        info['arch'] = f"{info['cc_major']}{info['cc_minor']}"
        info['pcie'] = pcie_link(ordinal)
        devices.append(info)
    return devices, ''


# Usable PCIe bandwidth per lane and direction after line encoding, GB/s (1e9 B/s).
_PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def pcie_link(ordinal=0):
    """(generation, width) the GPU's link can run at in this system, from NVML's
    max-link queries (not the current ones: an idle link trains down), or None."""
    try:
        nvml = ctypes.CDLL('libnvidia-ml.so.1')
        if nvml.nvmlInit_v2() != 0:
            return None
        dev = ctypes.c_void_p()
        gen, width = ctypes.c_uint(0), ctypes.c_uint(0)
        if (nvml.nvmlDeviceGetHandleByIndex_v2(ordinal, ctypes.byref(dev)) != 0 or
                nvml.nvmlDeviceGetMaxPcieLinkGeneration(dev, ctypes.byref(gen)) != 0 or
                nvml.nvmlDeviceGetMaxPcieLinkWidth(dev, ctypes.byref(width)) != 0):
            return None
        return gen.value, width.value
    except (OSError, AttributeError):
        return None


def _openacc_compilers():
    """OpenACC-capable compilers: NVHPC's nvc, or GCC with nvptx offloading."""
    found = []
    if shutil.which('nvc'):
        found.append('nvhpc')
    gcc = shutil.which('gcc')
    if gcc:
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, 't.c')
            with open(src, 'w') as f:
                f.write('int main(void){int x=0;\n#pragma acc parallel copy(x)\nx=1;\nreturn !x;}\n')
            # The flags src/cmake/UmstudyCommon.cmake uses (sm_80: GCC 12's newest ISA).
            r = subprocess.run([gcc, '-fopenacc', '-foffload=nvptx-none',
                                '-foffload-options=-misa=sm_80', src, '-o',
                                os.path.join(tmp, 't')], capture_output=True)
            if r.returncode == 0:
                found.append('gcc-nvptx')
    return found


def cpu_model():
    """The CPU's model name as the kernel reports it (lscpu's 'Model name'), or None."""
    try:
        out = subprocess.run(['lscpu'], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        out = ''
    for line in out.splitlines():
        if line.strip().startswith('Model name:'):
            return line.split(':', 1)[1].strip() or None
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    return line.split(':', 1)[1].strip() or None
    except OSError:
        pass
    return None


def memory_gib():
    """Installed memory (MemTotal) in GiB, or None."""
    try:
        with open('/proc/meminfo') as f:
            for line in f:
                if line.startswith('MemTotal:'):
                    return round(int(line.split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def probe():
    devices, why = cuda_devices()
    return {
        'gpus': devices,
        'gpu_reason': why,
        'nvcc': shutil.which('nvcc') or (os.path.exists('/usr/local/cuda/bin/nvcc') and
                                         '/usr/local/cuda/bin/nvcc') or None,
        'mpi': bool(shutil.which('mpicc') and (shutil.which('mpirun') or shutil.which('mpiexec'))),
        'openacc': _openacc_compilers(),
        'cores': os.cpu_count(),
        # what the report's first screen says the machine was
        'cpu_model': cpu_model(),
        'memory_gib': memory_gib(),
    }


def complete(desc):
    """Fills the `local` system's facts and partition features from a probe.

    The probe runs once per process; UMSTUDY_LOCAL_PROBE may hold a saved probe (JSON)
    so that a configuration can be reproduced elsewhere (e.g. listing GPU checks)."""
    from . import data
    saved = os.environ.get('UMSTUDY_LOCAL_PROBE')
    if saved:
        with open(saved) as f:
            p = json.load(f)
    else:
        p = probe()
    feats = ['cpu', 'openmp']
    facts = {'cpu': {'cores': p['cores'], **({'model': p['cpu_model']} if p.get('cpu_model') else {})},
             'probe': p}
    if p.get('memory_gib'):
        facts['host_memory'] = {'gib': p['memory_gib']}
    if p['nvcc']:
        feats.append('cuda')  # CUDA code can be built here
    if p['gpus']:
        g = p['gpus'][0]
        feats.append('gpu')
        if len(p['gpus']) > 1:
            feats.append('multigpu')
        if g['managed_memory']:
            feats.append('um')
        if g['pageable_memory_access']:
            feats.append('sam')
            # ATS: the GPU walks the host's page tables over a coherent link (GH200's
            # NVLink-C2C); HMM on PCIe migrates through the driver instead.
            if g.get('pageable_uses_host_page_tables'):
                feats.append('ats')
        cat = data.gpu_by_name(g['name']) or {}
        facts['gpu'] = {**cat, 'model': cat.get('model', g['name']), 'name': g['name'],
                        'count': len(p['gpus']), 'arch': g['arch'],
                        'memory_gib': round(g['memory_gib'], 1)}
        # A PCIe GPU's link peak (the bound pinned copies are held to); a GPU that uses
        # the host's page tables sits on a coherent link (NVLink-C2C), not on PCIe.
        if g.get('pcie') and not g.get('pageable_uses_host_page_tables'):
            gen, width = g['pcie']
            gbps = round(_PCIE_LANE_GBPS.get(gen, 0.0) * width, 1)
            if gbps:
                facts['link'] = {'type': f'PCIe Gen{gen} x{width}', 'h2d_gbps': gbps,
                                 'd2h_gbps': gbps, 'coherent': False}
        facts['pageable_memory_access'] = bool(g['pageable_memory_access'])
        facts['concurrent_managed_access'] = bool(g['concurrent_managed_access'])
        desc['build'] = dict(desc.get('build', {}), cuda_archs=g['arch'])
    else:
        facts['gpu_reason'] = p['gpu_reason']
    if p['mpi']:
        feats.append('mpi')
    if p['openacc']:
        feats.append('openacc')
    # What the system file states (an emulated network, say) stays; the probe adds.
    desc['facts'] = {**desc.get('facts', {}), **facts}
    for part in desc['partitions']:
        part['features'] = sorted(set(part.get('features', [])) | set(feats))
        if desc.get('scheduler') == 'local':
            part['max_jobs'] = 1  # one GPU and few cores: runs must not disturb each other
    return desc


if __name__ == '__main__':
    json.dump(probe(), sys.stdout, indent=2)
    print()

#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "umb_cuda.h"
#include "umstudy/support.h"

namespace {

// NUMA nodes with memory and no CPUs: on GH200 in NUMA mode the HBM shows up as one.
int cpuless_numa_nodes()
{
    DIR *dir = opendir("/sys/devices/system/node");
    if (!dir) return -1;
    int count = 0;
    while (struct dirent *e = readdir(dir)) {
        if (strncmp(e->d_name, "node", 4) != 0 || !e->d_name[4]) continue;
        char path[512], buf[256] = "";
        snprintf(path, sizeof path, "/sys/devices/system/node/%s/cpulist", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        const bool no_cpus = !fgets(buf, sizeof buf, f) || buf[0] == '\n' || buf[0] == '\0';
        fclose(f);
        if (no_cpus) ++count;
    }
    closedir(dir);
    return count;
}

// nvmlDeviceGetAddressingMode (NVML 12.9+ / driver 575+): HMM, ATS or none.  Looked up
// at run time so the program builds and runs with any driver; "unknown" otherwise.
const char *addressing_mode(int ordinal)
{
    void *nvml = dlopen("libnvidia-ml.so.1", RTLD_LAZY);
    if (!nvml) return "unknown (no NVML)";
    typedef int (*init_t)(void);
    typedef int (*by_bus_t)(const char *, void **);
    typedef int (*mode_t)(void *, void *);
    init_t init = (init_t)dlsym(nvml, "nvmlInit_v2");
    by_bus_t by_bus = (by_bus_t)dlsym(nvml, "nvmlDeviceGetHandleByPciBusId_v2");
    mode_t get_mode = (mode_t)dlsym(nvml, "nvmlDeviceGetAddressingMode");
    const char *result = "unknown (driver has no nvmlDeviceGetAddressingMode)";
    char bus[32];
    void *dev = nullptr;
    if (init && by_bus && get_mode && init() == 0 &&
        cudaDeviceGetPCIBusId(bus, sizeof bus, ordinal) == cudaSuccess && by_bus(bus, &dev) == 0) {
        struct { unsigned version, value; } mode = {(unsigned)(sizeof mode | (1u << 24)), 0};
        if (get_mode(dev, &mode) == 0)
            result = mode.value == 1 ? "HMM" : mode.value == 2 ? "ATS" : "none";
    }
    return result; // NVML stays loaded: the strings above are static
}

__global__ void copy_kernel(double *__restrict__ dst, const double *__restrict__ src, size_t n)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    // Two doubles per thread per step when both pointers are 16-byte aligned.
    if ((((uintptr_t)dst | (uintptr_t)src) & 15) == 0) {
        const size_t n2 = n / 2;
        for (size_t k = i; k < n2; k += stride)
            reinterpret_cast<double2 *>(dst)[k] = reinterpret_cast<const double2 *>(src)[k];
        if (i == 0 && (n & 1)) dst[n - 1] = src[n - 1];
    } else {
        for (; i < n; i += stride) dst[i] = src[i];
    }
}

unsigned grid_for(size_t n)
{
    int dev = 0, sms = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    const size_t want = (n + 511) / 512;
    const size_t cap = (size_t)sms * 8; // enough blocks in flight to saturate HBM
    return (unsigned)(want < cap ? (want ? want : 1) : cap);
}

} // namespace

UmbDevice umb_cuda_device(int ordinal)
{
    int ndev = 0;
    cudaError_t err = cudaGetDeviceCount(&ndev);
    if (err != cudaSuccess || ndev == 0)
        ums_unsupported("no CUDA device available (%s)", err == cudaSuccess ? "0 devices" : cudaGetErrorString(err));
    if (ordinal < 0 || ordinal >= ndev) ums_fail("--device %d but %d CUDA devices are visible", ordinal, ndev);
    UMS_CUDA_CHECK(cudaSetDevice(ordinal));
    UmbDevice d = {};
    d.ordinal = ordinal;
    cudaDeviceProp prop;
    UMS_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
    UMS_CUDA_CHECK(cudaDeviceGetAttribute(&d.pageable, cudaDevAttrPageableMemoryAccess, ordinal));
    UMS_CUDA_CHECK(cudaDeviceGetAttribute(&d.host_tables, cudaDevAttrPageableMemoryAccessUsesHostPageTables, ordinal));
    UMS_CUDA_CHECK(cudaDeviceGetAttribute(&d.concurrent, cudaDevAttrConcurrentManagedAccess, ordinal));
    size_t total = 0;
    UMS_CUDA_CHECK(cudaMemGetInfo(&d.free_bytes, &total));
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    ums_param_str("gpu", prop.name);
    ums_param_int("device", ordinal);
    ums_param_int("cuda_driver", driver);
    ums_param_int("cuda_runtime", runtime);
    ums_param_int("pageable_memory_access", d.pageable);
    ums_param_int("pageable_uses_host_page_tables", d.host_tables);
    ums_param_int("concurrent_managed_access", d.concurrent);
    ums_param_str("addressing_mode", addressing_mode(ordinal));
    ums_param_int("cpuless_numa_nodes", cpuless_numa_nodes());
    return d;
}

void umb_cuda_require(const UmbDevice &d, size_t bytes, const char *what)
{
    if ((double)bytes > 0.95 * (double)d.free_bytes)
        ums_unsupported("%s needs %.1f GiB of GPU memory but %.1f GiB are free", what,
                        bytes / 1073741824.0, d.free_bytes / 1073741824.0);
}

void umb_gpu_copy(double *dst, const double *src, size_t n, cudaStream_t s)
{
    if (n == 0) return;
    copy_kernel<<<grid_for(n / 2 + 1), 512, 0, s>>>(dst, src, n);
    UMS_CUDA_CHECK_LAUNCH(0);
}

void umb_prefetch(const void *p, size_t bytes, int device_or_cpu, cudaStream_t s)
{
#if CUDART_VERSION >= 13000
    cudaMemLocation loc = {};
    loc.type = device_or_cpu == kUmbCpu ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    loc.id = device_or_cpu == kUmbCpu ? 0 : device_or_cpu;
    UMS_CUDA_CHECK(cudaMemPrefetchAsync(p, bytes, loc, 0, s));
#else
    UMS_CUDA_CHECK(cudaMemPrefetchAsync(p, bytes, device_or_cpu == kUmbCpu ? cudaCpuDeviceId : device_or_cpu, s));
#endif
}

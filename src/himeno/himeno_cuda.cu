// himeno-cuda: the Jacobi sweep on the GPU with three ways to get the data there.
//   explicit: cudaMalloc + cudaMemcpy from pinned host arrays (the copies are inside
//             `time`, as a program that owns its data movement pays them; `time_loop`
//             is the iterations alone, like public ports that time only the loop);
//   managed:  cudaMallocManaged, initialised by the CPU, migrated on GPU touch;
//   system:   plain malloc reached through HMM/ATS (only if the device says it can).
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <vector>

#include "himeno.h"
#include "umstudy/cuda_check.h"
#include "umstudy/support.h"

namespace {

// Each thread updates a (j, k) column over `ichunk` consecutive i-planes (ichunk = 1:
// one point per thread, maximum parallelism).  Marching keeps the centre column of p
// in registers (p[i-1], p[i], p[i+1] rotate); the other neighbours hit in L1/L2.
// Index is int where the grid has < 2^31 points: 32-bit address arithmetic needs
// half the registers, which is occupancy on a memory-bound kernel.  With hints the
// twelve coefficient streams, read once per sweep, are marked evict-first.
constexpr int kGosaSlots = 64; // spreads the per-block atomics over 64 addresses

template <typename Index, bool kHints>
__global__ void jacobi_sweep(HimenoFields f, const float *__restrict__ p, float *__restrict__ wrk2,
                             int imax, int jmax, int kmax, int ichunk, double *gosa)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x + 1;
    const int j = blockIdx.y * blockDim.y + threadIdx.y + 1;
    const int i0 = blockIdx.z * ichunk + 1;
    const int i1 = min(i0 + ichunk, imax - 1);
    const Index sj = kmax, si = (Index)jmax * kmax;
    double g = 0.0;
    if (k < kmax - 1 && j < jmax - 1) {
        Index x = (Index)i0 * si + (Index)j * sj + k;
        float p_lo = __ldg(p + x - si), p_mid = __ldg(p + x);
        for (int i = i0; i < i1; ++i, x += si) {
            const float p_hi = __ldg(p + x + si);
            auto ld = [&](const float *a) { return kHints ? __ldcs(a + x) : __ldg(a + x); };
            const HimenoCoef q = {ld(f.a0), ld(f.a1), ld(f.a2), ld(f.a3), ld(f.b0), ld(f.b1),
                                  ld(f.b2), ld(f.c0), ld(f.c1), ld(f.c2), ld(f.wrk1), ld(f.bnd)};
            const float *pc = p + x;
            auto at = [&](int di, int dj, int dk) -> float {
                if (dj == 0 && dk == 0) return di < 0 ? p_lo : (di > 0 ? p_hi : p_mid);
                return __ldg(pc + di * si + dj * sj + dk);
            };
            const float ss = himeno_residual(q, at);
            g += (double)HM_MUL(ss, ss);
            wrk2[x] = himeno_update(p_mid, ss);
            p_lo = p_mid;
            p_mid = p_hi;
        }
    }
    // Block reduction of gosa: warp shuffles, then one atomic per block into one of
    // kGosaSlots partial sums (the host adds the slots up).
    for (int off = 16; off > 0; off >>= 1) g += __shfl_down_sync(0xffffffffu, g, off);
    __shared__ double warp_sum[32];
    const int tid = threadIdx.y * blockDim.x + threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5;
    if (lane == 0) warp_sum[warp] = g;
    __syncthreads();
    if (warp == 0) {
        const int nwarps = (blockDim.x * blockDim.y + 31) >> 5;
        g = lane < nwarps ? warp_sum[lane] : 0.0;
        for (int off = 16; off > 0; off >>= 1) g += __shfl_down_sync(0xffffffffu, g, off);
        const unsigned block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
        if (lane == 0) atomicAdd(gosa + block % kGosaSlots, g);
    }
}

void *cuda_managed_alloc(size_t bytes)
{
    void *ptr = nullptr;
    return cudaMallocManaged(&ptr, bytes) == cudaSuccess ? ptr : nullptr;
}
void *cuda_device_alloc(size_t bytes)
{
    void *ptr = nullptr;
    return cudaMalloc(&ptr, bytes) == cudaSuccess ? ptr : nullptr;
}
void *cuda_host_alloc(size_t bytes)
{
    void *ptr = nullptr;
    return cudaMallocHost(&ptr, bytes) == cudaSuccess ? ptr : nullptr;
}
void cuda_free(void *ptr) { cudaFree(ptr); }
void cuda_host_free(void *ptr) { cudaFreeHost(ptr); }

// Device-to-device copy bandwidth (read + write bytes per second), median of 10.
double d2d_copy_bandwidth(size_t bytes)
{
    void *a, *b;
    UMS_CUDA_CHECK(cudaMalloc(&a, bytes));
    UMS_CUDA_CHECK(cudaMalloc(&b, bytes));
    UMS_CUDA_CHECK(cudaMemset(b, 1, bytes));
    cudaEvent_t e0, e1;
    UMS_CUDA_CHECK(cudaEventCreate(&e0));
    UMS_CUDA_CHECK(cudaEventCreate(&e1));
    enum { kSamples = 10 };
    double t[kSamples];
    for (int s = 0; s <= kSamples; ++s) { // sample 0 is the warm-up
        UMS_CUDA_CHECK(cudaEventRecord(e0));
        UMS_CUDA_CHECK(cudaMemcpy(a, b, bytes, cudaMemcpyDeviceToDevice));
        UMS_CUDA_CHECK(cudaEventRecord(e1));
        UMS_CUDA_CHECK(cudaEventSynchronize(e1));
        float ms;
        UMS_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (s) t[s - 1] = ms * 1e-3;
    }
    unsigned char probe[2];
    UMS_CUDA_CHECK(cudaMemcpy(probe, (char *)a + bytes - 2, 2, cudaMemcpyDeviceToHost));
    if (probe[0] != 1 || probe[1] != 1) ums_fail("device copy benchmark produced wrong bytes");
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    return 2.0 * (double)bytes / ums_median(t, kSamples);
}

double sum_slots(const double *dev_slots)
{
    double h[kGosaSlots], sum = 0.0;
    UMS_CUDA_CHECK(cudaMemcpy(h, dev_slots, sizeof h, cudaMemcpyDeviceToHost));
    for (double v : h) sum += v;
    return sum;
}

struct Sweeper {
    dim3 block, grid;
    int ichunk;
    bool hints;
    double *gosa; // kGosaSlots per iteration, so no per-iteration memset is needed
};

// Runs `iterations` sweeps on fields whose pointers the GPU can dereference; p and
// wrk2 swap as on the CPU.  Returns the loop time (events) and the last/first gosa.
double run_sweeps(const Sweeper &s, HimenoFields *f, HimenoGrid g, long long iterations,
                  double *gosa_last, double *gosa_first)
{
    UMS_CUDA_CHECK(cudaMemset(s.gosa, 0, sizeof(double) * kGosaSlots * iterations));
    cudaEvent_t e0, e1;
    UMS_CUDA_CHECK(cudaEventCreate(&e0));
    UMS_CUDA_CHECK(cudaEventCreate(&e1));
    UMS_CUDA_CHECK(cudaEventRecord(e0));
    const bool narrow = himeno_points(g) < (size_t)INT_MAX;
    for (long long n = 0; n < iterations; ++n) {
        double *slot = s.gosa + n * kGosaSlots;
        if (narrow && s.hints)
            jacobi_sweep<int, true><<<s.grid, s.block>>>(*f, f->p, f->wrk2, g.imax, g.jmax, g.kmax, s.ichunk, slot);
        else if (narrow)
            jacobi_sweep<int, false><<<s.grid, s.block>>>(*f, f->p, f->wrk2, g.imax, g.jmax, g.kmax, s.ichunk, slot);
        else if (s.hints)
            jacobi_sweep<long, true><<<s.grid, s.block>>>(*f, f->p, f->wrk2, g.imax, g.jmax, g.kmax, s.ichunk, slot);
        else
            jacobi_sweep<long, false><<<s.grid, s.block>>>(*f, f->p, f->wrk2, g.imax, g.jmax, g.kmax, s.ichunk, slot);
        UMS_CUDA_CHECK_LAUNCH(0);
        float *t = f->p;
        f->p = f->wrk2;
        f->wrk2 = t;
    }
    UMS_CUDA_CHECK(cudaEventRecord(e1));
    UMS_CUDA_CHECK(cudaEventSynchronize(e1));
    UMS_CUDA_CHECK_LAUNCH(1);
    float ms;
    UMS_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    *gosa_first = sum_slots(s.gosa);
    *gosa_last = sum_slots(s.gosa + (iterations - 1) * kGosaSlots);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return ms * 1e-3;
}

} // namespace

int main(int argc, char **argv)
{
    HimenoOptions o = himeno_parse(argc, argv, "cuda");
    const HimenoGrid g = o.grid;
    int ndev = 0;
    cudaError_t err = cudaGetDeviceCount(&ndev);
    if (err != cudaSuccess || ndev == 0)
        ums_unsupported("no CUDA device available (%s)", err == cudaSuccess ? "0 devices" : cudaGetErrorString(err));
    if (o.device >= ndev) ums_fail("--device %lld but only %d CUDA devices are visible", o.device, ndev);
    UMS_CUDA_CHECK(cudaSetDevice((int)o.device));
    cudaDeviceProp prop;
    UMS_CUDA_CHECK(cudaGetDeviceProperties(&prop, (int)o.device));
    int pageable = 0, concurrent = 0;
    UMS_CUDA_CHECK(cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, (int)o.device));
    UMS_CUDA_CHECK(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, (int)o.device));
    ums_param_str("gpu", prop.name);
    ums_param_int("pageable_memory_access", pageable);
    ums_param_int("concurrent_managed_access", concurrent);
    const bool is_explicit = strcmp(o.alloc, "explicit") == 0;
    const bool is_system = strcmp(o.alloc, "system") == 0;
    if (is_system && !pageable)
        ums_unsupported("%s reports cudaDevAttrPageableMemoryAccess=0 (no HMM/ATS): the GPU cannot "
                        "dereference malloc'd memory, so --alloc system is unsupported on this device",
                        prop.name);
    const size_t field_bytes = himeno_points(g) * sizeof(float);
    if (!is_system) {
        size_t free_b, total_b;
        UMS_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
        // Managed memory beyond what the GPU has free would oversubscribe (and can hang
        // some drivers); explicit would fail allocation anyway.  Say so up front.
        if (HIMENO_NFIELDS * field_bytes > free_b)
            ums_unsupported("%dx%dx%d needs %.1f GiB on the GPU but only %.1f GiB are free",
                            g.imax, g.jmax, g.kmax, HIMENO_NFIELDS * field_bytes / 1073741824.0,
                            free_b / 1073741824.0);
    }

    HimenoRun r = {};
    std::vector<double> t_total(o.repeat), t_loop(o.repeat);
    r.time_total = t_total.data();
    r.time_loop = t_loop.data();
    r.copy_bw = d2d_copy_bandwidth((size_t)1 << 30);

    Sweeper s;
    s.block = dim3((unsigned)o.block_k, (unsigned)o.block_j, 1);
    s.ichunk = (int)o.ichunk;
    s.grid = dim3((unsigned)((g.kmax - 2 + o.block_k - 1) / o.block_k),
                  (unsigned)((g.jmax - 2 + o.block_j - 1) / o.block_j),
                  (unsigned)((g.imax - 2 + o.ichunk - 1) / o.ichunk));
    s.hints = o.cache_hints;
    UMS_CUDA_CHECK(cudaMalloc(&s.gosa, sizeof(double) * kGosaSlots * o.iterations));
    ums_param_str("block", (std::to_string(o.block_k) + "x" + std::to_string(o.block_j)).c_str());
    ums_param_int("ichunk", o.ichunk);
    ums_param_int("cache_hints", o.cache_hints);

    // Host-visible fields: pinned for explicit (what a tuned explicit-copy program
    // uses: copies at link speed), cudaMallocManaged for managed, malloc for system.
    HimenoFields host = himeno_fields_alloc(g, is_explicit ? cuda_host_alloc : is_system ? malloc : cuda_managed_alloc);
    HimenoFields dev = is_explicit ? himeno_fields_alloc(g, cuda_device_alloc) : host;
    for (long long rep = 0; rep < o.repeat; ++rep) {
        himeno_init(&host, g); // CPU first touch: managed/system pages start on the host
        UMS_CUDA_CHECK(cudaDeviceSynchronize());
        const double t0 = ums_now();
        if (is_explicit) {
            float **hs = &host.a0, **ds = &dev.a0;
            for (int n = 0; n < HIMENO_NFIELDS; ++n)
                if (ds + n != &dev.wrk2) UMS_CUDA_CHECK(cudaMemcpy(ds[n], hs[n], field_bytes, cudaMemcpyHostToDevice));
            UMS_CUDA_CHECK(cudaMemcpy(dev.wrk2, dev.p, field_bytes, cudaMemcpyDeviceToDevice));
        }
        t_loop[rep] = run_sweeps(s, &dev, g, o.iterations, &r.gosa, &r.gosa_first);
        if (is_explicit) {
            UMS_CUDA_CHECK(cudaMemcpy(host.p, dev.p, field_bytes, cudaMemcpyDeviceToHost));
        } else {
            host = dev; // the swapped pointers
        }
        t_total[rep] = ums_now() - t0;
    }
    r.checksum = himeno_checksum(host.p, g);
    himeno_report(&o, &r);
    const int rc = o.verify ? himeno_verify(&o, &r, host.p) : 0;
    if (is_explicit) himeno_fields_free(&dev, cuda_free);
    himeno_fields_free(&host, is_explicit ? cuda_host_free : is_system ? free : cuda_free);
    cudaFree(s.gosa);
    return rc;
}

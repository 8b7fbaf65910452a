#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>

#include "umb_p001.h"
#include "umstudy/support.h"

namespace {
__global__ void fill_kernel(double *a, size_t n, bool source)
{
    const size_t step = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
        a[i] = source ? (double)(i % 10) : 0.0;
}
} // namespace

void umb_cpu_copy(double *dst, const double *src, size_t n)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) dst[i] = src[i];
}

double umb_time_copy(Proc who, double *dst, const double *src, size_t n)
{
    const double t0 = ums_now();
    if (who == Proc::Cpu) {
        umb_cpu_copy(dst, src, n);
    } else {
        umb_gpu_copy(dst, src, n);
        UMS_CUDA_CHECK(cudaDeviceSynchronize());
    }
    return ums_now() - t0;
}

void umb_fill(Proc who, double *a, size_t n, bool source)
{
    if (who == Proc::Cpu) {
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; ++i) a[i] = source ? (double)(i % 10) : 0.0;
    } else {
        fill_kernel<<<1024, 512>>>(a, n, source);
        UMS_CUDA_CHECK_LAUNCH(1);
    }
}

void umb_check_copy(const double *dst, size_t n, const char *what)
{
    // 4097 elements spread over the array: cheap, and it does not migrate the array.
    for (size_t k = 0; k <= 4096; ++k) {
        const size_t i = k == 4096 ? n - 1 : (n / 4096) * k;
        if (dst[i] != (double)(i % 10))
            ums_fail("%s: Dst[%zu] = %g after the copy, expected %g", what, i, dst[i], (double)(i % 10));
    }
}

double *umb_alloc(const std::string &alloc, size_t bytes, const UmbDevice &dev)
{
    double *p = nullptr;
    if (alloc == "system") {
        if (!dev.pageable)
            ums_unsupported("the GPU reports cudaDevAttrPageableMemoryAccess=0 (no HMM/ATS), so it "
                            "cannot use malloc'd memory: --alloc system is unsupported here");
        p = (double *)malloc(bytes);
        if (!p) ums_unsupported("malloc(%.1f GiB) failed", bytes / 1073741824.0);
    } else if (alloc == "managed") {
        if (cudaMallocManaged(&p, bytes) != cudaSuccess) {
            cudaGetLastError();
            ums_unsupported("cudaMallocManaged(%.1f GiB) failed", bytes / 1073741824.0);
        }
    } else if (alloc == "device") {
        umb_cuda_require(dev, bytes, "a device array");
        UMS_CUDA_CHECK(cudaMalloc(&p, bytes));
    } else if (alloc == "pinned") {
        if (cudaMallocHost(&p, bytes) != cudaSuccess) {
            cudaGetLastError();
            ums_unsupported("cudaMallocHost(%.1f GiB) failed", bytes / 1073741824.0);
        }
    } else {
        ums_fail("unknown allocator '%s' (system|managed)", alloc.c_str());
    }
    return p;
}

void umb_free(const std::string &alloc, double *p)
{
    if (alloc == "system") free(p);
    else if (alloc == "pinned") cudaFreeHost(p);
    else cudaFree(p);
}

void umb_emit_rep(const char *series, int trial, int rep, double gbps, const char *phase)
{
    ums_rec r;
    ums_rec_begin(&r, "bandwidth", gbps, "GB/s");
    ums_rec_str(&r, "series", series);
    if (phase) ums_rec_str(&r, "phase", phase);
    ums_rec_int(&r, "trial", trial);
    ums_rec_int(&r, "rep", rep);
    ums_rec_emit(&r);
}

double umb_median_of(std::vector<double> v)
{
    return v.empty() ? 0.0 : ums_median(v.data(), v.size());
}

double umb_settled(const std::vector<double> &reps)
{
    const size_t tail = std::max<size_t>(1, reps.size() / 10);
    return umb_median_of(std::vector<double>(reps.end() - tail, reps.end()));
}

void umb_emit_summary(const UmbSeries &s)
{
    std::vector<double> first, settled, all;
    for (const auto &t : s.trials) {
        if (t.empty()) continue;
        first.push_back(t.front());
        settled.push_back(umb_settled(t));
        all.insert(all.end(), t.begin(), t.end());
    }
    const std::string f = s.name + "_first", st = s.name + "_settled";
    ums_result(s.name.c_str(), umb_median_of(all), "GB/s");
    ums_result(f.c_str(), umb_median_of(first), "GB/s");
    ums_result(st.c_str(), umb_median_of(settled), "GB/s");
    const double f0 = umb_median_of(first);
    ums_result((s.name + "_ramp").c_str(), f0 > 0 ? umb_median_of(settled) / f0 : 0.0, "ratio");
}

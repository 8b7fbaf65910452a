// CUDA pieces shared by the umbench programs: device selection with the memory-mode
// facts that decide UM/SAM results, and the copy kernels.
#pragma once
#include <stddef.h>

#include "umstudy/cuda_check.h"

struct UmbDevice {
    int ordinal;
    int pageable;       // cudaDevAttrPageableMemoryAccess: GPU can use malloc'd memory (HMM/ATS)
    int host_tables;    // ...UsesHostPageTables: ATS (hardware coherence, e.g. GH200)
    int concurrent;     // cudaDevAttrConcurrentManagedAccess: fault-driven migration
    size_t free_bytes;
};

// Selects `ordinal` (exits 77 with the reason when there is no usable GPU) and records
// in every JSON line: GPU name, driver and runtime versions, the attributes above, the
// addressing mode (NVML, where the driver has it) and whether GPU memory is exposed as
// a CPU-less NUMA node (GH200 "NUMA" mode; absent in CDMM mode or on PCIe GPUs).
UmbDevice umb_cuda_device(int ordinal);

// Exits 77 unless `bytes` more fit in free GPU memory (with a 5% margin), naming `what`.
void umb_cuda_require(const UmbDevice &d, size_t bytes, const char *what);

// Dst[i] = Src[i], grid-stride (the thesis' list 4.7 kernel, vectorised when aligned).
void umb_gpu_copy(double *dst, const double *src, size_t n, cudaStream_t s = 0);

// Elapsed seconds of `fn` measured by events on the default stream.
template <typename F>
double umb_event_time(F fn)
{
    cudaEvent_t e0, e1;
    UMS_CUDA_CHECK(cudaEventCreate(&e0));
    UMS_CUDA_CHECK(cudaEventCreate(&e1));
    UMS_CUDA_CHECK(cudaEventRecord(e0));
    fn();
    UMS_CUDA_CHECK(cudaEventRecord(e1));
    UMS_CUDA_CHECK(cudaEventSynchronize(e1));
    UMS_CUDA_CHECK_LAUNCH(0);
    float ms = 0.f;
    UMS_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return ms * 1e-3;
}

// CUDA 13 changed cudaMemPrefetchAsync to take a location; one call for both.
void umb_prefetch(const void *p, size_t bytes, int device_or_cpu, cudaStream_t s = 0);
constexpr int kUmbCpu = -1;

// P000's program with CUDA moving the data (see umbench.h for the modes).
#include <stdlib.h>
#include <string.h>

#include "umb_cuda.h"
#include "umbench.h"
#include "umstudy/support.h"

struct umb_p000_buf {
    enum Mode { kExplicit, kManaged, kBoth, kPrefetch } mode;
    size_t n;
    double *host; // what the CPU initialises and sums
    double *dev;  // what the kernel touches (== host for managed and prefetch)
};

namespace {

UmbDevice g_dev;

__global__ void touch_kernel(double *a, size_t count, size_t stride)
{
    const size_t step = (size_t)gridDim.x * blockDim.x;
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < count; k += step)
        a[k * stride] += 1.0;
}

void touch(double *a, umb_touch t)
{
    const size_t count = umb_touch_count(t);
    if (count == 0) return;
    const size_t blocks = (count + 255) / 256;
    touch_kernel<<<(unsigned)(blocks < 65535u * 16 ? blocks : 65535u * 16), 256>>>(a, count, t.stride);
    UMS_CUDA_CHECK_LAUNCH(1);
}

double *managed(size_t bytes)
{
    double *p = nullptr;
    if (cudaMallocManaged(&p, bytes) != cudaSuccess) {
        cudaGetLastError();
        ums_unsupported("cudaMallocManaged(%.1f GiB) failed", bytes / 1073741824.0);
    }
    return p;
}

} // namespace

extern "C" {

const char *umb_p000_backend(void) { return "cuda"; }
const char *umb_p000_modes(void) { return UMB_P000_MODES; }

void umb_p000_device(int device) { g_dev = umb_cuda_device(device); }

umb_p000_buf *umb_p000_alloc(const char *mode, size_t n)
{
    umb_p000_buf *b = (umb_p000_buf *)calloc(1, sizeof *b);
    if (!b) ums_fail("out of host memory");
    b->n = n;
    const size_t bytes = n * sizeof(double);
    if (!strcmp(mode, "explicit")) {
        b->mode = umb_p000_buf::kExplicit;
        umb_cuda_require(g_dev, bytes, "the device copy of the array");
        // Pinned host memory: the copies run at link speed, as a program that owns its
        // data movement would arrange (PGI stages pageable copies through pinned buffers).
        if (cudaMallocHost(&b->host, bytes) != cudaSuccess)
            ums_unsupported("cudaMallocHost(%.1f GiB) failed", bytes / 1073741824.0);
        UMS_CUDA_CHECK(cudaMalloc(&b->dev, bytes));
    } else if (!strcmp(mode, "both")) {
        b->mode = umb_p000_buf::kBoth;
        umb_cuda_require(g_dev, bytes, "the managed 'device' array");
        b->host = managed(bytes);
        b->dev = managed(bytes);
    } else if (!strcmp(mode, "managed") || !strcmp(mode, "prefetch")) {
        b->mode = !strcmp(mode, "managed") ? umb_p000_buf::kManaged : umb_p000_buf::kPrefetch;
        b->host = b->dev = managed(bytes);
    } else {
        ums_fail("unknown mode '%s' (expected %s)", mode, UMB_P000_MODES);
    }
    return b;
}

void umb_p000_run(umb_p000_buf *b, umb_touch t, umb_p000_times *out)
{
    const size_t bytes = b->n * sizeof(double);
    const double t0 = ums_now();
    umb_p000_init(b->host, b->n);
    const double t1 = ums_now();
    switch (b->mode) {
    case umb_p000_buf::kExplicit:
    case umb_p000_buf::kBoth: // the same calls; on managed buffers in `both`
        UMS_CUDA_CHECK(cudaMemcpy(b->dev, b->host, bytes, cudaMemcpyDefault));
        touch(b->dev, t);
        break;
    case umb_p000_buf::kPrefetch:
        umb_prefetch(b->dev, bytes, g_dev.ordinal);
        touch(b->dev, t);
        break;
    case umb_p000_buf::kManaged:
        touch(b->dev, t);
        break;
    }
    const double t2 = ums_now();
    if (b->mode == umb_p000_buf::kExplicit || b->mode == umb_p000_buf::kBoth)
        UMS_CUDA_CHECK(cudaMemcpy(b->host, b->dev, bytes, cudaMemcpyDefault));
    else if (b->mode == umb_p000_buf::kPrefetch) {
        umb_prefetch(b->host, bytes, kUmbCpu);
        UMS_CUDA_CHECK(cudaDeviceSynchronize());
    }
    umb_p000_finish(out, b->host, b->n, t0, t1, t2);
}

void umb_p000_free(umb_p000_buf *b)
{
    if (!b) return;
    if (b->mode == umb_p000_buf::kExplicit) {
        cudaFreeHost(b->host);
        cudaFree(b->dev);
    } else {
        cudaFree(b->host);
        if (b->dev != b->host) cudaFree(b->dev);
    }
    free(b);
}

} // extern "C"

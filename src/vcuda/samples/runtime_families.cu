// The runtime API families beyond malloc/copy/launch, as ordinary programs use them:
// symbols, pitched and 3-D memory, events and streams, host callbacks, device
// management, occupancy, stream-ordered allocation, cooperative launch, device printf
// and error texts.  Built unmodified with -cudart shared; every line it prints is
// deterministic, so its output through vcuda must equal its output on the real runtime
// (vcuda's device-run compares them).  Exit 0 when every check held.
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <algorithm>
#include <cstring>
#include <vector>

#include "sample_checks.h"

__constant__ float coeff[16];
__device__ int counter;

__global__ void scale(float *out, const float *in, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * coeff[i % 16];
}

__global__ void bump(int times)
{
    for (int k = 0; k < times; ++k) atomicAdd(&counter, 1);
}

__global__ void fill_rows(char *p, size_t pitch, int width, int height)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x < width && y < height) p[y * pitch + x] = (char)(x + 3 * y);
}

__global__ void hello(int tag)
{
    printf("device says hello from block %d thread %d (tag %d)\n", blockIdx.x, threadIdx.x, tag);
}

__global__ void spin(long long cycles)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}

__global__ void grid_sum(int *out)
{
    atomicAdd(out, 1);
}

static void CUDART_CB on_host(void *data) { ++*(int *)data; }
static void CUDART_CB on_stream(cudaStream_t, cudaError_t status, void *data)
{
    *(int *)data = status == cudaSuccess ? 7 : -1;
}

int main()
{
    setvbuf(stdout, NULL, _IOLBF, 0); // the same on both runtimes, whatever stdout is
    int dev = 0;
    CHECK(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
    CHECK(cudaSetDevice(dev));
    unsigned flags = 0;
    CHECK(cudaGetDeviceFlags(&flags));
    EXPECT((flags & cudaDeviceScheduleMask) == cudaDeviceScheduleBlockingSync, "device flags read back");

    // symbols
    float c[16], back[16];
    for (int i = 0; i < 16; ++i) c[i] = 0.5f * (float)i;
    CHECK(cudaMemcpyToSymbol(coeff, c, sizeof c));
    CHECK(cudaMemcpyFromSymbol(back, coeff, sizeof back));
    EXPECT(!memcmp(c, back, sizeof c), "cudaMemcpyToSymbol/FromSymbol round trip");
    size_t sym_size = 0;
    void *sym_addr = nullptr;
    CHECK(cudaGetSymbolSize(&sym_size, counter));
    CHECK(cudaGetSymbolAddress(&sym_addr, counter));
    EXPECT(sym_size == sizeof(int) && sym_addr, "cudaGetSymbolSize/Address");
    int zero = 0;
    CHECK(cudaMemcpyToSymbol(counter, &zero, sizeof zero));
    const int n = 1000;
    std::vector<float> h(n), r(n);
    for (int i = 0; i < n; ++i) h[i] = (float)i;
    float *din, *dout;
    CHECK(cudaMalloc(&din, n * sizeof(float)));
    CHECK(cudaMalloc(&dout, n * sizeof(float)));
    CHECK(cudaMemcpy(din, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    scale<<<(n + 255) / 256, 256>>>(dout, din, n);
    CHECK(cudaMemcpy(r.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
    bool same = true;
    for (int i = 0; i < n; ++i) same &= r[i] == h[i] * c[i % 16];
    EXPECT(same, "kernel reads __constant__ data set by symbol");

    // pitched, 2-D, 3-D
    char *pm;
    size_t pitch = 0;
    const int W = 100, H = 37;
    CHECK(cudaMallocPitch((void **)&pm, &pitch, W, H));
    printf("pitch of a %d-byte row: %zu\n", W, pitch);
    CHECK(cudaMemset2D(pm, pitch, 0x5a, W, H));
    std::vector<char> img(W * H);
    CHECK(cudaMemcpy2D(img.data(), W, pm, pitch, W, H, cudaMemcpyDeviceToHost));
    bool all5a = true;
    for (char v : img) all5a &= v == 0x5a;
    EXPECT(all5a, "cudaMemset2D + cudaMemcpy2D D2H");
    fill_rows<<<dim3(1, H), 128>>>(pm, pitch, W, H);
    CHECK(cudaMemcpy2D(img.data(), W, pm, pitch, W, H, cudaMemcpyDeviceToHost));
    bool rows = true;
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) rows &= img[y * W + x] == (char)(x + 3 * y);
    EXPECT(rows, "kernel writes pitched rows, read back by cudaMemcpy2D");
    for (int i = 0; i < W * H; ++i) img[i] = (char)(i * 7);
    CHECK(cudaMemcpy2D(pm, pitch, img.data(), W, W, H, cudaMemcpyHostToDevice));
    std::vector<char> img2(W * H);
    CHECK(cudaMemcpy2D(img2.data(), W, pm, pitch, W, H, cudaMemcpyDeviceToHost));
    EXPECT(img == img2, "cudaMemcpy2D H2D then D2H");
    cudaExtent ext = make_cudaExtent(64, 8, 5);
    cudaPitchedPtr vol;
    CHECK(cudaMalloc3D(&vol, ext));
    CHECK(cudaMemset3D(vol, 1, ext));
    std::vector<char> box(64 * 8 * 5, 0);
    cudaMemcpy3DParms p3 = {};
    p3.srcPtr = vol;
    p3.dstPtr = make_cudaPitchedPtr(box.data(), 64, 64, 8);
    p3.extent = ext;
    p3.kind = cudaMemcpyDeviceToHost;
    CHECK(cudaMemcpy3D(&p3));
    bool ones = true;
    for (char v : box) ones &= v == 1;
    EXPECT(ones, "cudaMalloc3D + cudaMemset3D + cudaMemcpy3D");

    // events and streams
    int least = 0, greatest = 0;
    CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    printf("stream priorities: least %d, greatest %d\n", least, greatest);
    cudaStream_t hi, lo;
    CHECK(cudaStreamCreateWithPriority(&hi, cudaStreamNonBlocking, greatest));
    CHECK(cudaStreamCreateWithPriority(&lo, cudaStreamNonBlocking, least));
    int prio = 0;
    unsigned sflags = 0;
    CHECK(cudaStreamGetPriority(hi, &prio));
    CHECK(cudaStreamGetFlags(hi, &sflags));
    EXPECT(prio == greatest && sflags == cudaStreamNonBlocking, "stream priority and flags read back");
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreateWithFlags(&e1, cudaEventDefault));
    CHECK(cudaEventRecord(e0, lo));
    spin<<<1, 1, 0, lo>>>(200000000LL); // ~0.1 s
    CHECK(cudaEventRecordWithFlags(e1, lo, 0));
    EXPECT(cudaEventQuery(e1) == cudaErrorNotReady, "cudaEventQuery: not ready while the kernel runs");
    EXPECT(cudaStreamQuery(lo) == cudaErrorNotReady, "cudaStreamQuery: not ready while the kernel runs");
    EXPECT(cudaGetLastError() == cudaSuccess, "not ready is not an error");
    CHECK(cudaStreamWaitEvent(hi, e1, 0));
    bump<<<1, 1, 0, hi>>>(5);
    CHECK(cudaStreamSynchronize(hi));
    EXPECT(cudaEventQuery(e1) == cudaSuccess, "an event waited for by another stream is complete");
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    EXPECT(ms > 1.0f, "elapsed time covers the kernel");

    // host callbacks in stream order
    int hits = 0, status = 0;
    spin<<<1, 1, 0, lo>>>(20000000LL);
    CHECK(cudaLaunchHostFunc(lo, on_host, &hits));
    CHECK(cudaStreamAddCallback(lo, on_stream, &status, 0));
    CHECK(cudaStreamSynchronize(lo));
    EXPECT(hits == 1 && status == 7, "cudaLaunchHostFunc and cudaStreamAddCallback ran once, after the kernel");

    // device management and occupancy
    size_t heap = 0;
    CHECK(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 64 << 20));
    CHECK(cudaDeviceGetLimit(&heap, cudaLimitMallocHeapSize));
    EXPECT(heap >= (64u << 20), "malloc heap limit set");
    cudaFuncAttributes fa;
    CHECK(cudaFuncGetAttributes(&fa, scale));
    printf("scale: max threads %d, binary version %d\n", fa.maxThreadsPerBlock, fa.binaryVersion);
    CHECK(cudaFuncSetAttribute(scale, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 << 10));
    CHECK(cudaFuncGetAttributes(&fa, scale));
    EXPECT(fa.maxDynamicSharedSizeBytes == 64 << 10, "cudaFuncSetAttribute took effect");
    int blocks = 0, min_grid = 0, best_block = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, scale, 256, 0));
    CHECK(cudaOccupancyMaxPotentialBlockSize(&min_grid, &best_block, scale, 0, 0));
    printf("occupancy of scale: %d blocks of 256 per SM; best block %d, min grid %d\n", blocks, best_block, min_grid);
    int can = -1;
    CHECK(cudaDeviceCanAccessPeer(&can, 0, 0));
    cudaFuncCache cache;
    CHECK(cudaDeviceSetCacheConfig(cudaFuncCachePreferShared));
    CHECK(cudaDeviceGetCacheConfig(&cache));

    // stream-ordered allocation
    cudaMemPool_t pool;
    CHECK(cudaDeviceGetDefaultMemPool(&pool, dev));
    unsigned long long threshold = ~0ull, used = 1;
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    int *async_buf = nullptr;
    CHECK(cudaMallocAsync((void **)&async_buf, 1 << 20, hi));
    CHECK(cudaMemsetAsync(async_buf, 0, 1 << 20, hi));
    CHECK(cudaFreeAsync(async_buf, hi));
    CHECK(cudaStreamSynchronize(hi));
    threshold = 0;
    CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
    EXPECT(threshold == ~0ull && used == 0, "pool attributes: threshold kept, nothing in use after the free");

    // cooperative launch and cudaLaunchKernelEx
    int *sum;
    CHECK(cudaMalloc(&sum, sizeof(int)));
    CHECK(cudaMemset(sum, 0, sizeof(int)));
    void *args[] = {&sum};
    CHECK(cudaLaunchCooperativeKernel((void *)grid_sum, dim3(4), dim3(32), args, 0, 0));
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(2), cfg.blockDim = dim3(16);
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeCooperative, attr.val.cooperative = 1;
    cfg.attrs = &attr, cfg.numAttrs = 1;
    CHECK(cudaLaunchKernelEx(&cfg, grid_sum, sum));
    int total = 0;
    CHECK(cudaMemcpy(&total, sum, sizeof total, cudaMemcpyDeviceToHost));
    EXPECT(total == 4 * 32 + 2 * 16, "cooperative and LaunchKernelEx launches");
    CHECK(cudaProfilerStart());
    CHECK(cudaProfilerStop());

    // graphs: stream capture across two streams, and a graph built node by node
    {
        float *g_in, *g_out;
        std::vector<float> src(n), dst(n);
        for (int i = 0; i < n; ++i) src[i] = (float)(i % 97);
        CHECK(cudaMalloc(&g_in, n * sizeof(float)));
        CHECK(cudaMalloc(&g_out, n * sizeof(float)));
        cudaStream_t side;
        cudaEvent_t fork, join;
        CHECK(cudaStreamCreate(&side));
        CHECK(cudaEventCreate(&fork));
        CHECK(cudaEventCreate(&join));
        int host_runs = 0;
        cudaStreamCaptureStatus cs;
        CHECK(cudaStreamBeginCapture(hi, cudaStreamCaptureModeGlobal));
        CHECK(cudaStreamIsCapturing(hi, &cs));
        EXPECT(cs == cudaStreamCaptureStatusActive, "stream capture active");
        CHECK(cudaMemcpyAsync(g_in, src.data(), n * sizeof(float), cudaMemcpyHostToDevice, hi));
        CHECK(cudaEventRecord(fork, hi));
        CHECK(cudaStreamWaitEvent(side, fork, 0));
        CHECK(cudaMemsetAsync(g_out, 0, n * sizeof(float), side));
        CHECK(cudaEventRecord(join, side));
        CHECK(cudaStreamWaitEvent(hi, join, 0));
        scale<<<(n + 255) / 256, 256, 0, hi>>>(g_out, g_in, n);
        CHECK(cudaMemcpyAsync(dst.data(), g_out, n * sizeof(float), cudaMemcpyDeviceToHost, hi));
        CHECK(cudaLaunchHostFunc(hi, on_host, &host_runs));
        cudaGraph_t graph;
        CHECK(cudaStreamEndCapture(hi, &graph));
        size_t nodes = 0;
        CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));
        printf("captured graph: %zu nodes\n", nodes);
        cudaGraphExec_t exec;
        CHECK(cudaGraphInstantiate(&exec, graph, 0));
        EXPECT(host_runs == 0, "nothing ran while capturing");
        for (int rep = 0; rep < 2; ++rep) CHECK(cudaGraphLaunch(exec, hi));
        CHECK(cudaStreamSynchronize(hi));
        bool good = host_runs == 2;
        for (int i = 0; i < n; ++i) good &= dst[i] == src[i] * c[i % 16];
        EXPECT(good, "captured graph launched twice: results and host node");
        CHECK(cudaGraphExecDestroy(exec));
        CHECK(cudaGraphDestroy(graph));
        // by hand: memset -> kernel -> copy back, with a host node at the end
        cudaGraph_t g2;
        CHECK(cudaGraphCreate(&g2, 0));
        cudaGraphNode_t set_node = nullptr, kern_node = nullptr, copy_node = nullptr, host_node = nullptr;
        cudaMemsetParams mp = {};
        mp.dst = g_out, mp.value = 0, mp.elementSize = sizeof(float), mp.width = n, mp.height = 1;
        CHECK(cudaGraphAddMemsetNode(&set_node, g2, nullptr, 0, &mp));
        int nn = n;
        void *kargs[] = {&g_out, &g_in, &nn};
        cudaKernelNodeParams kp = {};
        kp.func = (void *)scale, kp.gridDim = dim3((n + 255) / 256), kp.blockDim = dim3(256), kp.kernelParams = kargs;
        CHECK(cudaGraphAddKernelNode(&kern_node, g2, &set_node, 1, &kp));
        std::fill(dst.begin(), dst.end(), -1.0f);
        CHECK(cudaGraphAddMemcpyNode1D(&copy_node, g2, &kern_node, 1, dst.data(), g_out, n * sizeof(float),
                                       cudaMemcpyDeviceToHost));
        cudaHostNodeParams hp = {on_host, &host_runs};
        CHECK(cudaGraphAddHostNode(&host_node, g2, &copy_node, 1, &hp));
        cudaGraph_t g3;
        CHECK(cudaGraphClone(&g3, g2));
        CHECK(cudaGraphInstantiate(&exec, g3, 0));
        CHECK(cudaGraphLaunch(exec, 0));
        CHECK(cudaStreamSynchronize(0));
        good = host_runs == 3;
        for (int i = 0; i < n; ++i) good &= dst[i] == src[i] * c[i % 16];
        EXPECT(good, "graph built by hand, cloned, launched");
        CHECK(cudaGraphExecDestroy(exec));
        CHECK(cudaGraphDestroy(g2));
        CHECK(cudaGraphDestroy(g3));
        // device work only (a set, a kernel on a forked stream, a device copy): a graph
        // the GPU runs as a whole, launched three times
        CHECK(cudaStreamBeginCapture(hi, cudaStreamCaptureModeGlobal));
        CHECK(cudaMemsetAsync(g_out, 0, n * sizeof(float), hi));
        CHECK(cudaEventRecord(fork, hi));
        CHECK(cudaStreamWaitEvent(side, fork, 0));
        scale<<<(n + 255) / 256, 256, 0, side>>>(g_out, g_in, n);
        CHECK(cudaEventRecord(join, side));
        CHECK(cudaStreamWaitEvent(hi, join, 0));
        CHECK(cudaMemcpyAsync(g_in, g_out, n * sizeof(float), cudaMemcpyDeviceToDevice, hi));
        CHECK(cudaStreamEndCapture(hi, &graph));
        CHECK(cudaGraphInstantiate(&exec, graph, 0));
        for (int rep = 0; rep < 3; ++rep) CHECK(cudaGraphLaunch(exec, hi));
        CHECK(cudaStreamSynchronize(hi));
        CHECK(cudaMemcpy(dst.data(), g_in, n * sizeof(float), cudaMemcpyDeviceToHost));
        good = true;
        for (int i = 0; i < n; ++i) {
            float v = src[i];
            for (int rep = 0; rep < 3; ++rep) v *= c[i % 16];
            good &= dst[i] == v;
        }
        EXPECT(good, "device-only graph launched three times");
        CHECK(cudaGraphExecDestroy(exec));
        CHECK(cudaGraphDestroy(graph));
        CHECK(cudaStreamDestroy(side));
        CHECK(cudaEventDestroy(fork));
        CHECK(cudaEventDestroy(join));
        CHECK(cudaFree(g_in));
        CHECK(cudaFree(g_out));
    }

    // device printf, in order with the host's output
    printf("host: before the kernel\n");
    hello<<<2, 2>>>(42);
    CHECK(cudaDeviceSynchronize());
    printf("host: after the synchronize\n");

    // error texts
    printf("710: %s / %s\n", cudaGetErrorName((cudaError_t)710), cudaGetErrorString((cudaError_t)710));
    printf("801: %s / %s\n", cudaGetErrorName((cudaError_t)801), cudaGetErrorString((cudaError_t)801));
    printf("12345: %s\n", cudaGetErrorString((cudaError_t)12345));

    int after = 0;
    CHECK(cudaMemcpyFromSymbol(&after, counter, sizeof after));
    EXPECT(after == 5, "__device__ counter bumped by the waiting stream");
    CHECK(cudaStreamDestroy(hi));
    CHECK(cudaStreamDestroy(lo));
    CHECK(cudaEventDestroy(e0));
    CHECK(cudaEventDestroy(e1));
    CHECK(cudaFree(pm));
    CHECK(cudaFree(vol.ptr));
    CHECK(cudaFree(din));
    CHECK(cudaFree(dout));
    CHECK(cudaFree(sum));
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
    return failures ? 1 : 0;
}

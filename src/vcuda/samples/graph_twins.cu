// Conditional and memory-allocation graph nodes, as programs use them: IF/ELSE, WHILE
// and SWITCH nodes whose condition kernels set on the GPU (the handle passed as a kernel
// argument), bodies filled by hand and by capture (cudaStreamBeginCaptureToGraph), a
// conditional node added by hand inside a capture (cudaStreamGetCaptureInfo,
// cudaStreamUpdateCaptureDependencies), an exec's kernel node re-pointed, a dependency
// added after the nodes, allocation and free nodes (cudaGraphAddMemAllocNode, and
// cudaMallocAsync/cudaFreeAsync in a capture) with the graph memory attributes.  Built
// unmodified with -cudart shared; every line it prints is deterministic, so its output
// through vcuda must equal its output on the real runtime.  Exit 0 when every check held.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "sample_checks.h"

// The condition: *n, counted down first when count is set.
__global__ void set_cond(int *n, int count, cudaGraphConditionalHandle h)
{
    if (count && *n > 0) --*n;
    cudaGraphSetConditional(h, (unsigned)*n);
}
__global__ void add(int *p, int v) { *p += v; }
__global__ void iota(int *p, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = i;
}

static int get(const int *d)
{
    int v = -1;
    CHECK(cudaMemcpy(&v, d, sizeof v, cudaMemcpyDeviceToHost));
    return v;
}
static void put(int *d, int v) { CHECK(cudaMemcpy(d, &v, sizeof v, cudaMemcpyHostToDevice)); }

static cudaGraphNodeParams kernel(void *f, void **args)
{
    cudaGraphNodeParams p = {cudaGraphNodeTypeKernel};
    p.kernel.func = f;
    p.kernel.gridDim = dim3(1), p.kernel.blockDim = dim3(1);
    p.kernel.kernelParams = args;
    return p;
}
// A conditional node's body k (the program stops where the node could not be made).
static cudaGraph_t body(const cudaGraphNodeParams &c, unsigned k)
{
    if (!c.conditional.phGraph_out) {
        printf("FAIL no body graphs: the conditional node was not made\n");
        exit(1);
    }
    return c.conditional.phGraph_out[k];
}

static cudaGraphNodeParams conditional(cudaGraphConditionalHandle h, cudaGraphConditionalNodeType type, unsigned size)
{
    cudaGraphNodeParams p = {cudaGraphNodeTypeConditional};
    p.conditional.handle = h, p.conditional.type = type, p.conditional.size = size;
    return p;
}

int main()
{
    int *d;
    CHECK(cudaMalloc(&d, 64 * sizeof(int)));
    CHECK(cudaMemset(d, 0, 64 * sizeof(int)));
    int *n = d, *acc = d + 1, *m = d + 2;
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    char what[128];

    // set_cond(n) -> IF [acc += 1 | acc += 100] -> set_cond'(n) -> SWITCH [+1 | +100 | +1000]
    cudaGraph_t g;
    cudaGraphExec_t x;
    cudaGraphConditionalHandle h, h2;
    cudaGraphNode_t kn, kn2, cn, sn, bn;
    CHECK(cudaGraphCreate(&g, 0));
    CHECK(cudaGraphConditionalHandleCreate(&h, g, 0, 0));
    CHECK(cudaGraphConditionalHandleCreate(&h2, g, 0, 0));
    int zero = 0, one = 1, hundred = 100, thousand = 1000;
    void *cargs[] = {&n, &zero, &h}, *cargs2[] = {&n, &zero, &h2}, *a1[] = {&acc, &one}, *a100[] = {&acc, &hundred}, *a1000[] = {&acc, &thousand};
    cudaGraphNodeParams p = kernel((void *)set_cond, cargs);
    CHECK(cudaGraphAddNode(&kn, g, NULL, NULL, 0, &p));
    cudaGraphNodeParams c = conditional(h, cudaGraphCondTypeIf, 2);
    CHECK(cudaGraphAddNode(&cn, g, &kn, NULL, 1, &c));
    p = kernel((void *)add, a1);
    CHECK(cudaGraphAddNode(&bn, body(c, 0), NULL, NULL, 0, &p));
    p = kernel((void *)add, a100);
    CHECK(cudaGraphAddNode(&bn, body(c, 1), NULL, NULL, 0, &p));
    p = kernel((void *)set_cond, cargs2);
    CHECK(cudaGraphAddNode(&kn2, g, &cn, NULL, 1, &p));
    cudaGraphNodeParams sw = conditional(h2, cudaGraphCondTypeSwitch, 3);
    CHECK(cudaGraphAddNode(&sn, g, &kn2, NULL, 1, &sw));
    for (unsigned k = 0; k < 3; ++k) {
        p = kernel((void *)add, k == 0 ? a1 : k == 1 ? a100 : a1000);
        CHECK(cudaGraphAddNode(&bn, body(sw, k), NULL, NULL, 0, &p));
    }
    CHECK(cudaGraphInstantiate(&x, g, 0));
    int want[] = {100 + 1, 1 + 100, 1 + 1000, 1}; // condition 0, 1, 2, 3: ELSE or IF, then SWITCH
    for (int v = 0; v < 4; ++v) {
        put(n, v), put(acc, 0);
        CHECK(cudaGraphLaunch(x, s));
        CHECK(cudaStreamSynchronize(s));
        snprintf(what, sizeof what, "if/else and switch on %d: acc %d", v, get(acc));
        EXPECT(get(acc) == want[v], what);
    }
    // the exec's first kernel re-pointed: the IF's condition now comes from m
    void *cargs_m[] = {&m, &zero, &h};
    cudaKernelNodeParams kp = {};
    kp.func = (void *)set_cond, kp.gridDim = dim3(1), kp.blockDim = dim3(1), kp.kernelParams = cargs_m;
    CHECK(cudaGraphExecKernelNodeSetParams(x, kn, &kp));
    put(n, 0), put(m, 2), put(acc, 0);
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    EXPECT(get(acc) == 1 + 1, "exec kernel node re-pointed");
    CHECK(cudaGraphExecDestroy(x));
    CHECK(cudaGraphDestroy(g));

    // WHILE with a default value, its body captured: acc += 1 while (--n) (do-while)
    cudaGraphConditionalHandle hw;
    CHECK(cudaGraphCreate(&g, 0));
    CHECK(cudaGraphConditionalHandleCreate(&hw, g, 1, cudaGraphCondAssignDefault));
    c = conditional(hw, cudaGraphCondTypeWhile, 1);
    CHECK(cudaGraphAddNode(&cn, g, NULL, NULL, 0, &c));
    CHECK(cudaStreamBeginCaptureToGraph(s, body(c, 0), NULL, NULL, 0, cudaStreamCaptureModeGlobal));
    add<<<1, 1, 0, s>>>(acc, 1);
    set_cond<<<1, 1, 0, s>>>(n, 1, hw);
    CHECK(cudaStreamEndCapture(s, NULL));
    CHECK(cudaGraphInstantiate(&x, g, 0));
    put(n, 5), put(acc, 0);
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    snprintf(what, sizeof what, "do-while from 5: %d rounds", get(acc));
    EXPECT(get(acc) == 5, what);
    CHECK(cudaGraphExecDestroy(x));
    CHECK(cudaGraphDestroy(g));

    // captured: set_cond -> WHILE (added by hand) -> acc += 1000; a dependency added after
    cudaStreamCaptureStatus st;
    const cudaGraphNode_t *deps;
    size_t ndeps = 0;
    cudaGraphConditionalHandle hc;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cudaStreamGetCaptureInfo(s, &st, NULL, &g, &deps, NULL, &ndeps));
    CHECK(cudaGraphConditionalHandleCreate(&hc, g, 0, 0));
    set_cond<<<1, 1, 0, s>>>(n, 1, hc);
    CHECK(cudaStreamGetCaptureInfo(s, &st, NULL, &g, &deps, NULL, &ndeps));
    EXPECT(st == cudaStreamCaptureStatusActive && ndeps == 1, "capture info: active, one dependency");
    c = conditional(hc, cudaGraphCondTypeWhile, 1);
    CHECK(cudaGraphAddNode(&cn, g, deps, NULL, ndeps, &c));
    CHECK(cudaStreamUpdateCaptureDependencies(s, &cn, NULL, 1, cudaStreamSetCaptureDependencies));
    add<<<1, 1, 0, s>>>(acc, 1000);
    cudaGraph_t g2;
    CHECK(cudaStreamEndCapture(s, &g2));
    EXPECT(g2 == g, "the captured graph is the one capture info named");
    CHECK(cudaStreamBeginCaptureToGraph(s, body(c, 0), NULL, NULL, 0, cudaStreamCaptureModeGlobal));
    add<<<1, 1, 0, s>>>(acc, 1);
    set_cond<<<1, 1, 0, s>>>(n, 1, hc);
    CHECK(cudaStreamEndCapture(s, NULL));
    cudaGraphNode_t k1, k2;
    void *am[] = {&m, &one}, *an[] = {&acc, &hundred};
    p = kernel((void *)add, am);
    CHECK(cudaGraphAddNode(&k1, g, NULL, NULL, 0, &p));
    p = kernel((void *)add, an);
    CHECK(cudaGraphAddNode(&k2, g, NULL, NULL, 0, &p));
    CHECK(cudaGraphAddDependencies(g, &k1, &k2, NULL, 1));
    size_t count = 0;
    CHECK(cudaGraphGetNodes(g, NULL, &count));
    snprintf(what, sizeof what, "captured graph with a conditional node: %zu nodes", count);
    EXPECT(count == 5, what);
    CHECK(cudaGraphInstantiate(&x, g, 0));
    put(n, 4), put(acc, 0), put(m, 0);
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    snprintf(what, sizeof what, "while from 3: acc %d, m %d", get(acc), get(m));
    EXPECT(get(acc) == 3 + 1000 + 100 && get(m) == 1, what);
    CHECK(cudaGraphExecDestroy(x));
    CHECK(cudaGraphDestroy(g));

    // allocation nodes: alloc A -> free A -> alloc B (may reuse A's address) -> iota ->
    // copy out -> free B
    int dev = 0;
    CHECK(cudaGetDevice(&dev));
    const int N = 1 << 20;
    cudaMemAllocNodeParams ap = {};
    ap.bytesize = N * sizeof(int);
    ap.poolProps.allocType = cudaMemAllocationTypePinned;
    ap.poolProps.location.type = cudaMemLocationTypeDevice, ap.poolProps.location.id = dev;
    cudaGraphNode_t na, fa, nb, ki, cp, fb;
    int *out;
    CHECK(cudaMalloc(&out, N * sizeof(int)));
    CHECK(cudaGraphCreate(&g, 0));
    CHECK(cudaGraphAddMemAllocNode(&na, g, NULL, 0, &ap));
    void *pa = ap.dptr;
    CHECK(cudaGraphAddMemFreeNode(&fa, g, &na, 1, pa));
    CHECK(cudaGraphAddMemAllocNode(&nb, g, &fa, 1, &ap));
    int *pb = (int *)ap.dptr;
    int nn = N;
    void *ia[] = {&pb, &nn};
    p = kernel((void *)iota, ia);
    p.kernel.gridDim = dim3(N / 256), p.kernel.blockDim = dim3(256);
    CHECK(cudaGraphAddNode(&ki, g, &nb, NULL, 1, &p));
    CHECK(cudaGraphAddMemcpyNode1D(&cp, g, &ki, 1, out, pb, N * sizeof(int), cudaMemcpyDeviceToDevice));
    CHECK(cudaGraphAddMemFreeNode(&fb, g, &cp, 1, pb));
    CHECK(cudaGraphInstantiate(&x, g, 0));
    CHECK(cudaGraphDestroy(g));
    unsigned long long used = 1, high = 0;
    CHECK(cudaDeviceGetGraphMemAttribute(dev, cudaGraphMemAttrUsedMemCurrent, &used));
    EXPECT(used == 0, "no graph memory in use before the launch");
    for (int r = 0; r < 2; ++r) {
        CHECK(cudaMemset(out, 0, N * sizeof(int)));
        CHECK(cudaGraphLaunch(x, s));
        CHECK(cudaStreamSynchronize(s));
    }
    int last = -1, mid = -1;
    CHECK(cudaMemcpy(&last, out + N - 1, sizeof last, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(&mid, out + N / 2, sizeof mid, cudaMemcpyDeviceToHost));
    EXPECT(last == N - 1 && mid == N / 2, "the graph allocation's contents copied out");
    CHECK(cudaDeviceGetGraphMemAttribute(dev, cudaGraphMemAttrUsedMemCurrent, &used));
    CHECK(cudaDeviceGetGraphMemAttribute(dev, cudaGraphMemAttrUsedMemHigh, &high));
    // Freed allocations' memory stays with the graphs (for their next launch) until trimmed.
    snprintf(what, sizeof what, "graph memory after the launches: used %llu, high %s %zu", used,
             high >= ap.bytesize ? ">=" : "<", ap.bytesize);
    EXPECT(used >= ap.bytesize && high >= ap.bytesize, what);
    CHECK(cudaGraphExecDestroy(x));

    // cudaMallocAsync / cudaFreeAsync in a capture
    int *q = NULL;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cudaMallocAsync((void **)&q, N * sizeof(int), s));
    iota<<<N / 256, 256, 0, s>>>(q, N);
    CHECK(cudaMemcpyAsync(out, q, N * sizeof(int), cudaMemcpyDeviceToDevice, s));
    CHECK(cudaFreeAsync(q, s));
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphGetNodes(g, NULL, &count));
    snprintf(what, sizeof what, "captured allocation: %zu nodes", count);
    EXPECT(count == 4, what);
    CHECK(cudaGraphInstantiate(&x, g, 0));
    CHECK(cudaMemset(out, 0, N * sizeof(int)));
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemcpy(&last, out + N - 1, sizeof last, cudaMemcpyDeviceToHost));
    EXPECT(last == N - 1, "captured allocation's contents copied out");
    CHECK(cudaGraphExecDestroy(x));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaDeviceGraphMemTrim(dev));
    CHECK(cudaDeviceGetGraphMemAttribute(dev, cudaGraphMemAttrUsedMemCurrent, &used));
    EXPECT(used == 0, "trimmed: no graph memory in use");

    CHECK(cudaFree(out));
    CHECK(cudaFree(d));
    CHECK(cudaStreamDestroy(s));
    printf("%s (%d failures)\n", failures ? "FAIL" : "PASS", failures);
    return failures != 0;
}

/* Conditional and memory-allocation graph nodes through the libcudart stand-in, against
 * the real vcuda-server on the CPU stand-in driver: `vcuda_cudart_twins_test server|client
 * SERVER FAKE_LIB_DIR` (the mode is VCUDA_GRAPHS: graphs with such nodes have a twin on
 * the server either way).
 *
 * What graphConditionalNodes and graphMemoryFootprint (cuda-samples) do, with the
 * stand-in driver's kernels: `setcond({handle, int *n})` counts *n down and sets the
 * condition to it, `counter(int *out)` stores the module's count of counter runs in *out.
 *   - IF/ELSE made with cudaGraphAddNode, the handle given to a kernel node as an
 *     argument: body 0 runs when the condition is set, body 1 when it is not;
 *   - WHILE with a default value assigned at each launch, its body captured into it
 *     (cudaStreamBeginCaptureToGraph, cudaStreamEndCapture with no graph out);
 *   - a captured graph that makes its handle on the capture's graph
 *     (cudaStreamGetCaptureInfo), adds a WHILE node by hand after the captured kernel
 *     and continues the capture after it (cudaStreamUpdateCaptureDependencies);
 *   - an allocation node (its address known when the node is made), a kernel on it and a
 *     free node; the graph memory attributes and trim; an allocation no graph frees,
 *     freed with cudaFree; cudaMallocAsync/cudaFreeAsync in a capture;
 *   - an exec's kernel node re-pointed (cudaGraphExecKernelNodeSetParams);
 *   - a clone, an exec update and the destruction of a body refused with the documented
 *     errors; every exec destroyed in the end (the server's log says so). */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_fatbin.h"
#include "vcuda_test.h"

static const char TOKEN[] = "twins-test-token";
static char counter_stub, setcond_stub; /* the kernels' host-side names: any unique addresses */


static int get_int(const void *p)
{
    int v = -1;
    CHECK(cudaMemcpy(&v, p, sizeof v, cudaMemcpyDeviceToHost) == cudaSuccess);
    return v;
}

static void put_int(void *p, int v) { CHECK(cudaMemcpy(p, &v, sizeof v, cudaMemcpyHostToDevice) == cudaSuccess); }

static struct cudaGraphNodeParams kernel_params(void *func, void **args)
{
    struct cudaGraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = cudaGraphNodeTypeKernel;
    p.kernel.func = func;
    p.kernel.gridDim = (dim3){1, 1, 1}, p.kernel.blockDim = (dim3){1, 1, 1};
    p.kernel.kernelParams = args;
    return p;
}

static struct cudaGraphNodeParams cond_params(cudaGraphConditionalHandle h, enum cudaGraphConditionalNodeType type,
                                              unsigned size)
{
    struct cudaGraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = cudaGraphNodeTypeConditional;
    p.conditional.handle = h, p.conditional.type = type, p.conditional.size = size;
    return p;
}

static void launch_sync(cudaGraphExec_t ex, cudaStream_t st)
{
    CHECK(cudaGraphLaunch(ex, st) == cudaSuccess && cudaStreamSynchronize(st) == cudaSuccess);
}

int main(int argc, char **argv)
{
    vcuda_test_server s;
    void **h = graph_test_start(argc, argv, &s, TOKEN, "twins");
    if (!h) return 2;
    register_kernel(h, &counter_stub, "counter");
    register_kernel(h, &setcond_stub, "setcond");

    char *buf;
    cudaStream_t st;
    CHECK(cudaMalloc((void **)&buf, 64) == cudaSuccess && cudaStreamCreate(&st) == cudaSuccess);
    CHECK(cudaMemset(buf, 0, 64) == cudaSuccess);
    char *out_a = buf, *out_b = buf + 4, *n1 = buf + 8, *n2 = buf + 12;
    dim3 one = {1, 1, 1};

    /* IF/ELSE by hand: setcond -> IF [counter(out_a) | counter(out_b)] */
    cudaGraph_t g;
    cudaGraphExec_t ex;
    cudaGraphConditionalHandle h1;
    cudaGraphNode_t kn, cn, bn;
    CHECK(cudaGraphCreate(&g, 0) == cudaSuccess && cudaGraphConditionalHandleCreate(&h1, g, 0, 0) == cudaSuccess);
    struct { cudaGraphConditionalHandle h; char *p; } arg1 = {h1, n1};
    void *args1[] = {&arg1}, *args_a[] = {&out_a}, *args_b[] = {&out_b};
    struct cudaGraphNodeParams p = kernel_params(&setcond_stub, args1);
    CHECK(cudaGraphAddNode(&kn, g, NULL, NULL, 0, &p) == cudaSuccess);
    struct cudaGraphNodeParams c = cond_params(h1, cudaGraphCondTypeIf, 2);
    CHECK(cudaGraphAddNode(&cn, g, &kn, NULL, 1, &c) == cudaSuccess && c.conditional.phGraph_out);
    enum cudaGraphNodeType type;
    CHECK(cudaGraphNodeGetType(cn, &type) == cudaSuccess && type == cudaGraphNodeTypeConditional);
    p = kernel_params(&counter_stub, args_a);
    CHECK(cudaGraphAddNode(&bn, c.conditional.phGraph_out[0], NULL, NULL, 0, &p) == cudaSuccess);
    p = kernel_params(&counter_stub, args_b);
    CHECK(cudaGraphAddNode(&bn, c.conditional.phGraph_out[1], NULL, NULL, 0, &p) == cudaSuccess);
    CHECK(cudaGraphInstantiate(&ex, g, 0) == cudaSuccess);
    put_int(n1, 2); /* -> 1: IF */
    launch_sync(ex, st);
    int a = get_int(out_a), b = get_int(out_b);
    put_int(n1, 0); /* stays 0: ELSE */
    launch_sync(ex, st);
    int a2 = get_int(out_a), b2 = get_int(out_b);
    CHECK(a == 1 && b == 0 && a2 == 1 && b2 == 2);
    printf("{\"test\":\"cudart_twins_if_else\",\"mode\":\"%s\",\"if\":[%d,%d],\"else\":[%d,%d]}\n", argv[1], a, b, a2, b2);
    /* the exec's kernel node re-pointed (its node in the twin): the condition from n2 */
    struct { cudaGraphConditionalHandle h; char *p; } arg1b = {h1, n2};
    void *args1b[] = {&arg1b};
    struct cudaKernelNodeParams kp1;
    memset(&kp1, 0, sizeof kp1);
    kp1.func = &setcond_stub, kp1.gridDim = one, kp1.blockDim = one, kp1.kernelParams = args1b;
    CHECK(cudaGraphExecKernelNodeSetParams(ex, kn, &kp1) == cudaSuccess);
    put_int(n2, 2);
    launch_sync(ex, st);
    CHECK(get_int(out_a) == 3 && get_int(n1) == 0 && get_int(n2) == 1);
    /* refused by name, or as the runtime refuses */
    cudaGraph_t clone;
    cudaGraphExecUpdateResultInfo info;
    CHECK(cudaGraphClone(&clone, g) == cudaErrorNotSupported);
    CHECK(cudaGraphExecUpdate(ex, g, &info) == cudaErrorNotSupported);
    CHECK(cudaGraphDestroy(c.conditional.phGraph_out[0]) == cudaErrorInvalidValue);
    cudaGetLastError();
    CHECK(cudaGraphExecDestroy(ex) == cudaSuccess && cudaGraphDestroy(g) == cudaSuccess);

    /* WHILE, default 1 assigned at each launch, its body captured into it */
    cudaGraphConditionalHandle h2;
    CHECK(cudaGraphCreate(&g, 0) == cudaSuccess);
    CHECK(cudaGraphConditionalHandleCreate(&h2, g, 1, cudaGraphCondAssignDefault) == cudaSuccess);
    c = cond_params(h2, cudaGraphCondTypeWhile, 1);
    CHECK(cudaGraphAddNode(&cn, g, NULL, NULL, 0, &c) == cudaSuccess);
    struct { cudaGraphConditionalHandle h; char *p; } arg2 = {h2, n2};
    void *args2[] = {&arg2};
    CHECK(cudaStreamBeginCaptureToGraph(st, c.conditional.phGraph_out[0], NULL, NULL, 0, cudaStreamCaptureModeGlobal) ==
          cudaSuccess);
    CHECK(cudaLaunchKernel(&counter_stub, one, one, args_a, 0, st) == cudaSuccess);
    CHECK(cudaLaunchKernel(&setcond_stub, one, one, args2, 0, st) == cudaSuccess);
    CHECK(cudaStreamEndCapture(st, NULL) == cudaSuccess);
    CHECK(cudaGraphInstantiate(&ex, g, 0) == cudaSuccess);
    put_int(n2, 3);
    launch_sync(ex, st);
    a = get_int(out_a);
    CHECK(a == 6); /* three runs after the three above (the counter is the module's) */
    printf("{\"test\":\"cudart_twins_while\",\"mode\":\"%s\",\"runs\":%d}\n", argv[1], a - 3);
    CHECK(cudaGraphExecDestroy(ex) == cudaSuccess && cudaGraphDestroy(g) == cudaSuccess);

    /* captured: setcond -> WHILE (added by hand into the capture's graph) -> counter(out_b) */
    cudaStream_t cs;
    enum cudaStreamCaptureStatus status;
    const cudaGraphNode_t *deps;
    size_t ndeps = 9;
    cudaGraphConditionalHandle h3;
    CHECK(cudaStreamCreate(&cs) == cudaSuccess && cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal) == cudaSuccess);
    CHECK(cudaStreamGetCaptureInfo(cs, &status, NULL, &g, &deps, NULL, &ndeps) == cudaSuccess &&
          status == cudaStreamCaptureStatusActive && ndeps == 0);
    CHECK(cudaGraphConditionalHandleCreate(&h3, g, 0, 0) == cudaSuccess);
    struct { cudaGraphConditionalHandle h; char *p; } arg3 = {h3, n1};
    void *args3[] = {&arg3};
    CHECK(cudaLaunchKernel(&setcond_stub, one, one, args3, 0, cs) == cudaSuccess);
    CHECK(cudaStreamGetCaptureInfo(cs, &status, NULL, &g, &deps, NULL, &ndeps) == cudaSuccess && ndeps == 1);
    c = cond_params(h3, cudaGraphCondTypeWhile, 1);
    CHECK(cudaGraphAddNode(&cn, g, deps, NULL, ndeps, &c) == cudaSuccess);
    cudaGraph_t body = c.conditional.phGraph_out[0];
    CHECK(cudaStreamUpdateCaptureDependencies(cs, &cn, NULL, 1, cudaStreamSetCaptureDependencies) == cudaSuccess);
    CHECK(cudaLaunchKernel(&counter_stub, one, one, args_b, 0, cs) == cudaSuccess);
    cudaGraph_t g2;
    CHECK(cudaStreamEndCapture(cs, &g2) == cudaSuccess && g2 == g);
    CHECK(cudaStreamIsCapturing(cs, &status) == cudaSuccess && status == cudaStreamCaptureStatusNone);
    CHECK(cudaStreamBeginCaptureToGraph(cs, body, NULL, NULL, 0, cudaStreamCaptureModeGlobal) == cudaSuccess);
    CHECK(cudaLaunchKernel(&setcond_stub, one, one, args3, 0, cs) == cudaSuccess);
    CHECK(cudaStreamEndCapture(cs, NULL) == cudaSuccess);
    size_t nn = 0;
    CHECK(cudaGraphGetNodes(g, NULL, &nn) == cudaSuccess && nn == 3);
    CHECK(cudaGraphInstantiate(&ex, g, 0) == cudaSuccess);
    put_int(n1, 0); /* 0: no loop, counter(out_b) once */
    launch_sync(ex, st);
    b = get_int(out_b);
    put_int(n1, 4); /* 3 after the first setcond: three loops (3 -> 2 -> 1 -> 0) */
    launch_sync(ex, st);
    b2 = get_int(out_b);
    CHECK(b == 7 && b2 == 8);
    CHECK(cudaGraphExecDestroy(ex) == cudaSuccess && cudaGraphDestroy(g) == cudaSuccess);

    /* memory nodes: alloc -> counter(p) -> free */
    struct cudaMemAllocNodeParams ap;
    memset(&ap, 0, sizeof ap);
    ap.bytesize = 1 << 20;
    ap.poolProps.allocType = cudaMemAllocationTypePinned;
    ap.poolProps.location.type = cudaMemLocationTypeDevice, ap.poolProps.location.id = 0;
    cudaGraphNode_t an, fn_;
    CHECK(cudaGraphCreate(&g, 0) == cudaSuccess && cudaGraphAddMemAllocNode(&an, g, NULL, 0, &ap) == cudaSuccess);
    void *dptr = ap.dptr;
    void *args_p[] = {&dptr};
    struct cudaKernelNodeParams kp;
    memset(&kp, 0, sizeof kp);
    kp.func = &counter_stub, kp.gridDim = one, kp.blockDim = one, kp.kernelParams = args_p;
    CHECK(dptr && cudaGraphAddKernelNode(&kn, g, &an, 1, &kp) == cudaSuccess);
    CHECK(cudaGraphAddMemFreeNode(&fn_, g, &kn, 1, dptr) == cudaSuccess);
    CHECK(cudaGraphInstantiate(&ex, g, cudaGraphInstantiateFlagAutoFreeOnLaunch) == cudaSuccess);
    CHECK(cudaGraphDestroy(g) == cudaSuccess); /* (the exec keeps what it needs) */
    launch_sync(ex, st);
    unsigned long long used = 1, high = 0, reserved = 0, zero = 0;
    CHECK(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, &used) == cudaSuccess && used == 0);
    CHECK(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &high) == cudaSuccess && high >= ap.bytesize);
    CHECK(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrReservedMemCurrent, &reserved) == cudaSuccess &&
          reserved >= ap.bytesize);
    CHECK(cudaDeviceGraphMemTrim(0) == cudaSuccess);
    CHECK(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrReservedMemCurrent, &reserved) == cudaSuccess && reserved == 0);
    CHECK(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &zero) == cudaSuccess);
    CHECK(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, &zero) == cudaErrorInvalidValue);
    cudaGetLastError();
    CHECK(cudaGraphExecDestroy(ex) == cudaSuccess);
    printf("{\"test\":\"cudart_twins_memory\",\"mode\":\"%s\",\"used_after\":%llu,\"high\":%llu}\n", argv[1], used, high);
    /* an allocation no graph frees stays the program's, until cudaFree */
    CHECK(cudaGraphCreate(&g, 0) == cudaSuccess && cudaGraphAddMemAllocNode(&an, g, NULL, 0, &ap) == cudaSuccess);
    CHECK(cudaGraphInstantiate(&ex, g, 0) == cudaSuccess && cudaGraphDestroy(g) == cudaSuccess);
    launch_sync(ex, st);
    CHECK(cudaMemset(ap.dptr, 7, 4) == cudaSuccess && get_int(ap.dptr) == 0x07070707);
    CHECK(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, &used) == cudaSuccess && used == ap.bytesize);
    CHECK(cudaFree(ap.dptr) == cudaSuccess);
    CHECK(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, &used) == cudaSuccess && used == 0);
    CHECK(cudaGraphExecDestroy(ex) == cudaSuccess);
    /* cudaMallocAsync / cudaFreeAsync in a capture: allocation and free nodes */
    void *q = NULL;
    CHECK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal) == cudaSuccess);
    CHECK(cudaMallocAsync(&q, 4096, cs) == cudaSuccess && q);
    CHECK(cudaMemsetAsync(q, 1, 4096, cs) == cudaSuccess);
    CHECK(cudaFreeAsync(q, cs) == cudaSuccess);
    CHECK(cudaStreamEndCapture(cs, &g) == cudaSuccess && cudaGraphGetNodes(g, NULL, &nn) == cudaSuccess && nn == 3);
    CHECK(cudaGraphInstantiate(&ex, g, 0) == cudaSuccess);
    launch_sync(ex, st);
    CHECK(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, &used) == cudaSuccess && used == 0);
    CHECK(cudaGraphExecDestroy(ex) == cudaSuccess && cudaGraphDestroy(g) == cudaSuccess);
    CHECK(cudaStreamDestroy(cs) == cudaSuccess && cudaStreamDestroy(st) == cudaSuccess && cudaFree(buf) == cudaSuccess);

    static char text[1 << 20];
    char *log = stop_server_read_log(s.pid, s.log, text, sizeof text);
    /* IF, ELSE, IF (re-pointed), WHILE x3, WHILE x0 (no line), WHILE x3 */
    CHECK(count(log, "fake libcuda: 1 conditional bodies ran") == 3);
    CHECK(count(log, "fake libcuda: exec kernel node 0 set") == 1);
    CHECK(count(log, "fake libcuda: 3 conditional bodies ran") == 2);
    CHECK(count(log, "graph exec destroyed") == 6 && count(log, "graph exec destroyed, 0 left") == 6);
    printf("%s: %s (%d failed checks)\n", argv[1], failures ? "FAIL" : "PASS", failures);
    return failures != 0;
}

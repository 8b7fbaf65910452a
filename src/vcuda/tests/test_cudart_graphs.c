/* CUDA graphs through the libcudart stand-in, against the real vcuda-server on the CPU
 * stand-in driver: `vcuda_cudart_graphs_test server|client SERVER FAKE_LIB_DIR`.
 *
 * A plain C program calling the runtime API as nvcc's code would: it registers a
 * fatbinary holding the stand-in driver's `counter` kernel, captures a stream (a set,
 * the kernel, a device-to-device copy), instantiates the graph and launches it three
 * times, then builds a graph with a host node and one by hand (a 4-byte memset, the
 * kernel, an edge given twice).  With VCUDA_GRAPHS=server the captured and the hand-made
 * graph must run on the server (the stand-in driver says "graph launched" per launch),
 * the host-node graph must be replayed (no such line); with VCUDA_GRAPHS=client none
 * runs there.  Results must be the same either way, and a failure of a server-side
 * launch (its memory freed) must surface at the next call, as a kernel launch's does. */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cubin.h"
#include "vcuda_test.h"

void **__cudaRegisterFatBinary(void *fat_cubin);
void __cudaRegisterFunction(void **handle, const char *host_fun, char *device_fun, const char *device_name,
                            int thread_limit, uint3 *tid, uint3 *bid, dim3 *bdim, dim3 *gdim, int *wsize);

static const char TOKEN[] = "graphs-test-token";
static char counter_stub; /* the kernel's host-side name: any unique address */

static void on_host(void *data) { ++*(int *)data; }

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)); ++p) ++n;
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[1], "server") && strcmp(argv[1], "client")))
        return fprintf(stderr, "usage: %s server|client SERVER FAKE_LIB_DIR\n", argv[0]), 2;
    int on_server = !strcmp(argv[1], "server");
    vcuda_test_server s;
    start_server_for_me(&s, argv[2], argv[3], TOKEN);
    setenv("VCUDA_GRAPHS", argv[1], 1);

    /* what nvcc's start-up code does: the fatbinary (header, one ELF entry, the cubin) */
    static uint8_t img[2048], fat[4096];
    size_t n = fake_cubin(img, "graphs");
    fc_put(fat, 0xba55ed50u, 4), fc_put(fat + 4, 1, 2), fc_put(fat + 6, 16, 2), fc_put(fat + 8, 64 + n, 8);
    fc_put(fat + 16, 2, 2), fc_put(fat + 18, 0x101, 2), fc_put(fat + 20, 64, 4), fc_put(fat + 24, n, 8);
    fc_put(fat + 16 + 0x28, 0x11, 8);
    memcpy(fat + 80, img, n);
    static struct { int magic, version; const void *data; void *unused; } wrapper = {0x466243b1, 1, fat, NULL};
    void **h = __cudaRegisterFatBinary(&wrapper);
    __cudaRegisterFunction(h, &counter_stub, (char *)"counter", "counter", -1, NULL, NULL, NULL, NULL, NULL);

    char *buf;
    cudaStream_t st;
    CHECK(cudaMalloc((void **)&buf, 64) == cudaSuccess && cudaStreamCreate(&st) == cudaSuccess);
    char *out = buf + 32;
    void *args[] = {&out};
    dim3 one = {1, 1, 1};
    cudaGraph_t g;
    cudaGraphExec_t ex;
    CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal) == cudaSuccess);
    CHECK(cudaMemsetAsync(buf, 0x11, 16, st) == cudaSuccess);
    CHECK(cudaLaunchKernel(&counter_stub, one, one, args, 0, st) == cudaSuccess);
    CHECK(cudaMemcpyAsync(buf + 16, buf, 16, cudaMemcpyDefault, st) == cudaSuccess);
    CHECK(cudaStreamEndCapture(st, &g) == cudaSuccess);
    CHECK(cudaGraphInstantiate(&ex, g, 0) == cudaSuccess);
    for (int i = 0; i < 3; ++i) CHECK(cudaGraphLaunch(ex, st) == cudaSuccess);
    CHECK(cudaStreamSynchronize(st) == cudaSuccess);
    uint8_t host[36];
    CHECK(cudaMemcpy(host, buf, sizeof host, cudaMemcpyDeviceToHost) == cudaSuccess);
    int good = 1;
    for (int i = 0; i < 32; ++i) good &= host[i] == 0x11;
    int runs;
    memcpy(&runs, host + 32, sizeof runs);
    CHECK(good && runs == 3);
    printf("{\"test\":\"cudart_graphs\",\"mode\":\"%s\",\"kernel_runs\":%d,\"bytes_ok\":%s}\n", argv[1], runs,
           good ? "true" : "false");

    /* a host node keeps the graph here: replayed, the function runs in this process */
    int host_runs = 0;
    cudaGraph_t g2;
    cudaGraphExec_t ex2;
    cudaGraphNode_t k, hn;
    struct cudaKernelNodeParams kp;
    memset(&kp, 0, sizeof kp);
    kp.func = &counter_stub, kp.gridDim = one, kp.blockDim = one, kp.kernelParams = args;
    struct cudaHostNodeParams hp = {on_host, &host_runs};
    CHECK(cudaGraphCreate(&g2, 0) == cudaSuccess);
    CHECK(cudaGraphAddKernelNode(&k, g2, NULL, 0, &kp) == cudaSuccess);
    CHECK(cudaGraphAddHostNode(&hn, g2, &k, 1, &hp) == cudaSuccess);
    CHECK(cudaGraphInstantiate(&ex2, g2, 0) == cudaSuccess);
    CHECK(cudaGraphLaunch(ex2, st) == cudaSuccess && cudaStreamSynchronize(st) == cudaSuccess && host_runs == 1);
    CHECK(cudaGraphExecDestroy(ex2) == cudaSuccess && cudaGraphDestroy(g2) == cudaSuccess);

    /* by hand: a 4-byte-element memset, then the kernel, the edge given twice (the
     * server takes each dependency once) */
    cudaGraph_t g3;
    cudaGraphExec_t ex3;
    cudaGraphNode_t set = NULL, kern = NULL;
    struct cudaMemsetParams mp;
    memset(&mp, 0, sizeof mp);
    mp.dst = buf, mp.value = 0, mp.elementSize = 4, mp.width = 4, mp.height = 1;
    CHECK(cudaGraphCreate(&g3, 0) == cudaSuccess);
    CHECK(cudaGraphAddMemsetNode(&set, g3, NULL, 0, &mp) == cudaSuccess);
    CHECK(cudaGraphAddKernelNode(&kern, g3, NULL, 0, &kp) == cudaSuccess);
    cudaGraphNode_t from[] = {set, set}, to[] = {kern, kern};
    CHECK(cudaGraphAddDependencies(g3, from, to, NULL, 2) == cudaSuccess);
    CHECK(cudaGraphInstantiate(&ex3, g3, 0) == cudaSuccess);
    CHECK(cudaGraphLaunch(ex3, 0) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess);
    CHECK(cudaMemcpy(host, buf, sizeof host, cudaMemcpyDeviceToHost) == cudaSuccess);
    good = 1;
    for (int i = 0; i < 16; ++i) good &= host[i] == 0;
    for (int i = 16; i < 32; ++i) good &= host[i] == 0x11;
    memcpy(&runs, host + 32, sizeof runs);
    CHECK(good && runs == 5); /* the counter's fifth run: 3 above, 1 in the host-node graph */
    CHECK(cudaGraphExecDestroy(ex3) == cudaSuccess && cudaGraphDestroy(g3) == cudaSuccess);

    /* the memory freed under the instantiated graph: refused on the server, nothing
     * written; told at the launch (replayed) or at the next call (on the server) */
    CHECK(cudaFree(buf) == cudaSuccess);
    cudaError_t at_launch = cudaGraphLaunch(ex, st), after = cudaStreamSynchronize(st);
    CHECK(on_server ? at_launch == cudaSuccess && after == cudaErrorInvalidValue
                    : at_launch == cudaErrorInvalidValue && after == cudaSuccess);
    cudaGetLastError();
    CHECK(cudaGraphExecDestroy(ex) == cudaSuccess && cudaGraphDestroy(g) == cudaSuccess);
    CHECK(cudaStreamDestroy(st) == cudaSuccess);

    static char text[1 << 20];
    char *log = stop_server_read_log(s.pid, s.log, text, sizeof text);
    /* on the server: 4 launches, two execs made and destroyed; replayed: none of it */
    CHECK(count(log, "fake libcuda: graph launched") == (on_server ? 4 : 0));
    CHECK(count(log, "graph exec destroyed") == (on_server ? 2 : 0));
    CHECK(count(log, "graph exec destroyed, 0 left") == (on_server ? 1 : 0));
    printf("%s: %s (%d failed checks)\n", argv[1], failures ? "FAIL" : "PASS", failures);
    return failures != 0;
}

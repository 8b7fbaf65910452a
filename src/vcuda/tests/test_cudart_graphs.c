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
 * launch (its memory freed) must surface at the next call, as a kernel launch's does.
 *
 * Then what sits beside graphs on the launch paths: an exec's kernel node re-pointed
 * (cudaGraphExecKernelNodeSetParams) and a whole exec updated from a graph of the same
 * shape (cudaGraphExecUpdate), a changed shape refused as the driver refuses it;
 * cudaLaunchKernelEx with the attributes CUB/Thrust and others pass (PDL, a memory sync
 * domain, a completion event) reaching the server's driver as given, a cluster checked
 * there (and refused by name in a stream capture); and a pinned host address
 * (cudaMallocHost, also past its start, also inside a struct argument) given to a
 * kernel refused by name at every launch path -- launch, Ex, cooperative, graph
 * instantiate and exec update -- before it reaches the server (the counter kernel would
 * write through it there). */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_fatbin.h"
#include "vcuda_test.h"

static const char TOKEN[] = "graphs-test-token";
static char counter_stub, pair_stub; /* the kernels' host-side names: any unique addresses */

static void on_host(void *data) { ++*(int *)data; }

/* The runtime's stderr while `call` runs, into text (cap bytes). */
#define STDERR_OF(text, cap, call)                                                             \
    do {                                                                                       \
        FILE *tmp_ = tmpfile();                                                                \
        int saved_ = dup(2);                                                                   \
        fflush(stderr), dup2(fileno(tmp_), 2);                                                 \
        call;                                                                                  \
        fflush(stderr), dup2(saved_, 2), close(saved_);                                        \
        rewind(tmp_);                                                                          \
        size_t n_ = fread(text, 1, (cap) - 1, tmp_);                                           \
        text[n_] = 0;                                                                          \
        fclose(tmp_);                                                                          \
    } while (0)


int main(int argc, char **argv)
{
    vcuda_test_server s;
    void **h = graph_test_start(argc, argv, &s, TOKEN, "graphs");
    if (!h) return 2;
    int on_server = !strcmp(argv[1], "server");
    register_kernel(h, &counter_stub, "counter");
    register_kernel(h, &pair_stub, "pair");

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

    /* exec updates: one kernel node re-pointed, then the whole exec from another graph
     * of the same shape; the counter's runs land where the updated arguments say */
    char *out2 = buf + 40, *out3 = buf + 48;
    void *args2[] = {&out2}, *args3[] = {&out3};
    cudaGraph_t g4, g5, g6;
    cudaGraphExec_t ex4;
    cudaGraphNode_t k4, k5, k6a, k6b;
    CHECK(cudaGraphCreate(&g4, 0) == cudaSuccess && cudaGraphAddKernelNode(&k4, g4, NULL, 0, &kp) == cudaSuccess);
    CHECK(cudaGraphInstantiate(&ex4, g4, 0) == cudaSuccess);
    CHECK(cudaGraphLaunch(ex4, st) == cudaSuccess); /* run 6, into out */
    kp.kernelParams = args2;
    CHECK(cudaGraphExecKernelNodeSetParams(ex4, k4, &kp) == cudaSuccess);
    CHECK(cudaGraphExecKernelNodeSetParams(ex4, set, &kp) == cudaErrorInvalidValue); /* not its node */
    cudaGetLastError();
    CHECK(cudaGraphLaunch(ex4, st) == cudaSuccess); /* run 7, into out2 */
    kp.kernelParams = args3;
    CHECK(cudaGraphCreate(&g5, 0) == cudaSuccess && cudaGraphAddKernelNode(&k5, g5, NULL, 0, &kp) == cudaSuccess);
    cudaGraphExecUpdateResultInfo info;
    CHECK(cudaGraphExecUpdate(ex4, g5, &info) == cudaSuccess && info.result == cudaGraphExecUpdateSuccess);
    CHECK(cudaGraphLaunch(ex4, st) == cudaSuccess); /* run 8, into out3 */
    CHECK(cudaGraphCreate(&g6, 0) == cudaSuccess && cudaGraphAddKernelNode(&k6a, g6, NULL, 0, &kp) == cudaSuccess &&
          cudaGraphAddKernelNode(&k6b, g6, &k6a, 1, &kp) == cudaSuccess);
    CHECK(cudaGraphExecUpdate(ex4, g6, &info) == cudaErrorGraphExecUpdateFailure &&
          info.result == cudaGraphExecUpdateErrorTopologyChanged);
    cudaGetLastError();
    CHECK(cudaStreamSynchronize(st) == cudaSuccess);
    int got[3];
    CHECK(cudaMemcpy(host, buf + 32, 4, cudaMemcpyDeviceToHost) == cudaSuccess);
    memcpy(&got[0], host, 4);
    CHECK(cudaMemcpy(&got[1], out2, 4, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(cudaMemcpy(&got[2], out3, 4, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(got[0] == 6 && got[1] == 7 && got[2] == 8);
    printf("{\"test\":\"cudart_graph_exec_update\",\"mode\":\"%s\",\"runs\":[%d,%d,%d]}\n", argv[1], got[0], got[1], got[2]);

    /* cudaLaunchKernelEx: attributes that only allow overlap or tune placement run the
     * kernel as a plain launch; the completion event is recorded after it; a cluster is
     * refused by name */
    cudaEvent_t done;
    cudaLaunchAttribute at[4];
    memset(at, 0, sizeof at);
    CHECK(cudaEventCreate(&done) == cudaSuccess);
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization, at[0].val.programmaticStreamSerializationAllowed = 1;
    at[1].id = cudaLaunchAttributeMemSyncDomain, at[1].val.memSyncDomain = cudaLaunchMemSyncDomainRemote;
    at[2].id = cudaLaunchAttributePriority, at[2].val.priority = 0;
    at[3].id = cudaLaunchAttributeLaunchCompletionEvent, at[3].val.launchCompletionEvent.event = done;
    cudaLaunchConfig_t cfg = {one, one, 0, st, at, 4};
    CHECK(cudaLaunchKernelExC(&cfg, &counter_stub, args) == cudaSuccess); /* run 9, into out */
    CHECK(cudaEventSynchronize(done) == cudaSuccess);
    CHECK(cudaMemcpy(&got[0], out, 4, cudaMemcpyDeviceToHost) == cudaSuccess && got[0] == 9);
    /* a cluster goes to the driver, which checks it against the grid: 1x1x1 runs (the
     * stand-in driver's grids are 1 block at most), 2x1x1 over a grid of 1 fails there
     * (told at the next call: the launch was posted); in a stream capture it is refused
     * by name (a captured node keeps no attributes) */
    static char said[8192];
    cudaError_t ex_cluster;
    cudaGraph_t g8;
    at[0].id = cudaLaunchAttributeClusterDimension, at[0].val.clusterDim.x = 2, at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1, cfg.numAttrs = 1, at[0].val.clusterDim.x = 1;
    CHECK(cudaLaunchKernelExC(&cfg, &counter_stub, args) == cudaSuccess); /* run 10 */
    CHECK(cudaStreamSynchronize(st) == cudaSuccess);
    at[0].val.clusterDim.x = 2;
    CHECK(cudaLaunchKernelExC(&cfg, &counter_stub, args) == cudaSuccess);
    CHECK(cudaStreamSynchronize(st) == cudaErrorInvalidClusterSize);
    cudaGetLastError();
    CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal) == cudaSuccess);
    STDERR_OF(said, sizeof said, ex_cluster = cudaLaunchKernelExC(&cfg, &counter_stub, args));
    CHECK(cudaStreamEndCapture(st, &g8) == cudaSuccess && cudaGraphDestroy(g8) == cudaSuccess);
    CHECK(ex_cluster == cudaErrorNotSupported &&
          strstr(said, "vcuda: cudaLaunchKernelEx is not supported remotely: cooperative kernels and thread block "
                      "clusters in a stream capture"));
    cfg.attrs = NULL;
    CHECK(cudaLaunchKernelExC(&cfg, &counter_stub, args) == cudaErrorInvalidValue);
    cudaGetLastError();

    /* zero-copy: a pinned host address (here 8 bytes past the start) never reaches the
     * server, at any launch path; said once, by name; a device address still runs */
    char *pinned, *inside;
    CHECK(cudaMallocHost((void **)&pinned, 64) == cudaSuccess);
    inside = pinned + 8;
    void *hargs[] = {&inside};
    cudaError_t z[7];
    struct { char *a, *b; } pair = {buf, inside}; /* the pinned address in the struct's second word */
    void *pargs[] = {&pair};
    cudaGraph_t g7;
    cudaGraphExec_t ex7 = NULL;
    cfg.attrs = at, cfg.numAttrs = 0;
    kp.kernelParams = hargs;
    STDERR_OF(said, sizeof said, {
        z[0] = cudaLaunchKernel(&counter_stub, one, one, hargs, 0, st);
        z[1] = cudaLaunchKernel(&counter_stub, one, one, hargs, 0, st);
        z[2] = cudaLaunchKernelExC(&cfg, &counter_stub, hargs);
        z[3] = cudaLaunchCooperativeKernel(&counter_stub, one, one, hargs, 0, st);
        z[4] = cudaGraphExecKernelNodeSetParams(ex4, k4, &kp);
        cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal);
        cudaLaunchKernel(&counter_stub, one, one, hargs, 0, st);
        cudaStreamEndCapture(st, &g7);
        z[5] = cudaGraphInstantiate(&ex7, g7, 0);
        z[6] = cudaLaunchKernel(&pair_stub, one, one, pargs, 0, st);
    });
    for (int i = 0; i < 7; ++i)
        if (z[i] != cudaErrorNotSupported) fprintf(stderr, "refusal %d: error %d\n", i, z[i]), ++failures;
    CHECK(cudaGetLastError() == cudaErrorNotSupported && cudaGetLastError() == cudaSuccess);
    CHECK(count(said, "vcuda: cudaLaunchKernel: kernel argument 0 points into host memory from cudaMallocHost "
                      "(zero-copy), which is not supported remotely\n") == 1);
    CHECK(count(said, "points into host memory") == 1); /* once per process */
    /* what the runtime tells of pinned memory: host memory, no device address; its flags */
    unsigned hflags = 99;
    struct cudaPointerAttributes pa;
    CHECK(cudaHostGetFlags(&hflags, inside) == cudaSuccess && hflags == 0);
    CHECK(cudaPointerGetAttributes(&pa, inside) == cudaSuccess && pa.type == cudaMemoryTypeHost &&
          pa.hostPointer == inside && pa.devicePointer == NULL);
    CHECK(cudaGraphDestroy(g7) == cudaSuccess && cudaFreeHost(pinned) == cudaSuccess);
    CHECK(cudaHostGetFlags(&hflags, inside) == cudaErrorInvalidValue);
    /* registered memory: once only, and unregistered once */
    static char regd[8192];
    CHECK(cudaHostRegister(regd, 4096, cudaHostRegisterDefault) == cudaSuccess);
    CHECK(cudaHostRegister(regd + 2048, 4096, cudaHostRegisterDefault) == cudaErrorHostMemoryAlreadyRegistered);
    CHECK(cudaHostUnregister(regd) == cudaSuccess && cudaHostUnregister(regd) == cudaErrorHostMemoryNotRegistered);
    cudaGetLastError();
    /* the server's device addresses and this process's host ones may coincide: a word in
     * a device allocation is the device's (the stand-in only records the range, so the
     * device address itself can stand for such a host range) */
    CHECK(cudaHostRegister(buf, 64, cudaHostRegisterDefault) == cudaSuccess);
    CHECK(cudaLaunchKernel(&counter_stub, one, one, args, 0, st) == cudaSuccess); /* run 11 */
    CHECK(cudaHostUnregister(buf) == cudaSuccess);
    CHECK(cudaHostAlloc((void **)&pinned, 64, cudaHostAllocMapped) == cudaErrorNotSupported);
    cudaGetLastError();
    CHECK(cudaLaunchKernel(&counter_stub, one, one, args, 0, st) == cudaSuccess); /* run 12 */
    CHECK(cudaGraphLaunch(ex4, st) == cudaSuccess); /* run 13, into out3: the refused update left it */
    pair.b = buf + 56; /* device addresses in both words: runs (14, into buf + 56) */
    CHECK(cudaLaunchKernel(&pair_stub, one, one, pargs, 0, st) == cudaSuccess);
    CHECK(cudaStreamSynchronize(st) == cudaSuccess);
    CHECK(cudaMemcpy(&got[0], out, 4, cudaMemcpyDeviceToHost) == cudaSuccess && got[0] == 12);
    CHECK(cudaMemcpy(&got[2], out3, 4, cudaMemcpyDeviceToHost) == cudaSuccess && got[2] == 13);
    CHECK(cudaMemcpy(&got[1], buf + 56, 4, cudaMemcpyDeviceToHost) == cudaSuccess && got[1] == 14);
    printf("{\"test\":\"cudart_zero_copy_refused\",\"mode\":\"%s\",\"refused\":7,\"counter_after\":%d}\n", argv[1], got[2]);
    CHECK(cudaGraphExecDestroy(ex4) == cudaSuccess && cudaGraphDestroy(g4) == cudaSuccess);
    CHECK(cudaGraphDestroy(g5) == cudaSuccess && cudaGraphDestroy(g6) == cudaSuccess && cudaEventDestroy(done) == cudaSuccess);

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
    /* on the server: 4 launches, then 4 of the updated exec (its node set there once; a
     * new instance after cudaGraphExecUpdate), the execs made and destroyed; replayed:
     * none of it */
    CHECK(count(log, "fake libcuda: graph launched") == (on_server ? 8 : 0));
    CHECK(count(log, "fake libcuda: exec kernel node 0 set") == (on_server ? 1 : 0));
    /* the attributes as the driver got them (both modes: launches are not graphs) */
    CHECK(count(log, "fake libcuda: launch ex: cooperative=0 programmatic=1 cluster=1x1x1 priority=0 domain=1") == 1);
    CHECK(count(log, "fake libcuda: launch ex: cooperative=0 programmatic=0 cluster=1x1x1 priority=0 domain=0") == 1);
    CHECK(count(log, "graph exec destroyed") == (on_server ? 4 : 0));
    CHECK(count(log, "graph exec destroyed, 0 left") == (on_server ? 1 : 0));
    printf("%s: %s (%d failed checks)\n", argv[1], failures ? "FAIL" : "PASS", failures);
    return failures != 0;
}

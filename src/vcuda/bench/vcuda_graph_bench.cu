// vcuda-graph-bench: what a CUDA graph launch costs, local or through vcuda.  A stream
// capture of --kernels dependent launches of a small kernel becomes one graph; the graph
// is launched --launches times back to back and the stream synchronized, --reps times:
//
//   graph_launch_time    wall time of one such loop / --launches (us per graph launch)
//   stream_launch_time   the same --kernels launches issued one by one into the stream
//                        (the work the graph replaces), per loop iteration
//   graph_sync_time      one graph launch and a cudaStreamSynchronize, per iteration
//                        (the round trip a program waiting on each graph sees)
//
// Run as is it measures the local runtime; with the vcuda stand-in first on
// LD_LIBRARY_PATH it measures the remote GPU (VCUDA_GRAPHS=server: the graph runs on the
// server; VCUDA_GRAPHS=client: the stand-in replays its nodes one call each).  The
// kernels' result is checked: a loop that did not run every node fails the program.
#include "umstudy/support.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(call)                                                                              \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess) ums_fail("%s: %s (%s)", #call, cudaGetErrorString(e_), cudaGetErrorName(e_)); \
    } while (0)

__global__ void step(int *v) { v[threadIdx.x] += 1; }

int main(int argc, char **argv)
{
    long long kernels = 20, launches = 1000, reps = 7;
    const ums_arg args[] = {
        {"kernels", UMS_ARG_INT, &kernels, "dependent kernel launches captured into the graph", 1, 4096, NULL},
        {"launches", UMS_ARG_INT, &launches, "graph launches per timed loop", 1, 1000000, NULL},
        {"reps", UMS_ARG_INT, &reps, "timed loops (median, min and max are reported)", 3, 1000, NULL},
    };
    ums_args_parse(argc, argv, "vcuda-graph-bench: graph launch cost, local or through vcuda", args,
                   sizeof args / sizeof args[0]);
    ums_json_init("vcuda-graph-bench");
    int remote = dlsym(RTLD_DEFAULT, "vcuda_stand_in") != NULL; // the stand-in's own mark
    const char *mode = getenv("VCUDA_GRAPHS");
    const char *via = !remote ? "local" : mode && !strcmp(mode, "client") ? "vcuda-client-replay" : "vcuda-server-graph";
    ums_param_str("via", via);
    ums_param_int("kernels", kernels);
    ums_param_int("launches", launches);
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) ums_unsupported("no CUDA device (%s)", cudaGetErrorString(e));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    ums_param_str("gpu", prop.name);

    const int width = 32;
    int *v;
    cudaStream_t s;
    CK(cudaMalloc(&v, width * sizeof(int)));
    CK(cudaMemset(v, 0, width * sizeof(int)));
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t g;
    cudaGraphExec_t ex;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (long long k = 0; k < kernels; ++k) step<<<1, width, 0, s>>>(v);
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ex, g, 0));
    long long expect = 0;
    for (int w = 0; w < 10; ++w) CK(cudaGraphLaunch(ex, s)); // warm-up
    CK(cudaStreamSynchronize(s));
    expect += 10 * kernels;

    const char *names[] = {"graph_launch_time", "stream_launch_time", "graph_sync_time"};
    for (int kind = 0; kind < 3; ++kind) {
        std::vector<double> t(reps);
        for (long long r = 0; r < reps; ++r) {
            double t0 = ums_now();
            for (long long i = 0; i < launches; ++i) {
                if (kind != 1) CK(cudaGraphLaunch(ex, s));
                else
                    for (long long k = 0; k < kernels; ++k) step<<<1, width, 0, s>>>(v);
                if (kind == 2) CK(cudaStreamSynchronize(s));
            }
            CK(cudaStreamSynchronize(s));
            t[r] = (ums_now() - t0) / (double)launches * 1e6;
            expect += launches * kernels;
        }
        CK(cudaGetLastError());
        double lo = t[0], hi = t[0];
        for (double x : t) lo = x < lo ? x : lo, hi = x > hi ? x : hi;
        ums_rec rec;
        ums_rec_begin(&rec, names[kind], ums_median(t.data(), t.size()), "us");
        ums_rec_str(&rec, "via", via);
        ums_rec_int(&rec, "reps", reps);
        ums_rec_num(&rec, "min", lo);
        ums_rec_num(&rec, "max", hi);
        ums_rec_emit(&rec);
    }
    std::vector<int> host(width);
    CK(cudaMemcpy(host.data(), v, width * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < width; ++i)
        if (host[i] != expect) ums_fail("element %d is %d after the loops, expected %lld: not every node ran", i, host[i], expect);
    CK(cudaGraphExecDestroy(ex));
    CK(cudaGraphDestroy(g));
    CK(cudaStreamDestroy(s));
    CK(cudaFree(v));
    return 0;
}

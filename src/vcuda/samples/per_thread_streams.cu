// The default streams as ordinary multi-threaded programs use them, built twice
// (--default-stream legacy and --default-stream per-thread, -cudart shared): stream 0
// is then the legacy stream shared by all host threads or each thread's own stream,
// and the program is correct either way, so each build prints the same verdicts.
//   - ordering: several host threads each write with kernels and read back with
//     cudaMemcpyAsync on stream 0, on cudaStreamPerThread and across the two, with no
//     synchronization but cudaStreamSynchronize of that stream (right only if each
//     stream runs in order: the kernels take longer than the copies would);
//   - a synchronous cudaMemcpy after a kernel on stream 0 sees its result; a
//     synchronous cudaMemcpy from pinned memory is complete on return (a kernel on a
//     non-blocking stream reads it at once);
//   - the legacy stream (cudaStreamLegacy) and the blocking streams: legacy work waits
//     for a blocking stream, for this thread's and another thread's per-thread stream,
//     and they for it (read back on the other); a non-blocking stream waits for none,
//     two blocking streams and a per-thread stream not for each other (an event
//     recorded there completes while the other stream's kernel still runs);
//   - stream properties: flags, priority, ids, device of cudaStreamPerThread and 0.
// Lines starting "observed" report what the runtime did where the documentation leaves
// it open (queries of a stream around another's running kernel); they are not verdicts,
// but the output through vcuda must equal the output on the real runtime, line for line
// (run each build locally and through vcuda-run and diff).  Exit 0 when every check held.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "sample_checks.h"

#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
static const char *const kBuild = "per-thread";
#else
static const char *const kBuild = "legacy";
#endif

__device__ unsigned long long now_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Every element of p[0, n) set to v, after waiting ns nanoseconds: slower than any copy
// of the buffer, so a copy that does not wait for it reads what was there before.
__global__ void slow_fill(int *p, int n, int v, unsigned long long ns)
{
    if (threadIdx.x == 0) {
        unsigned long long t0 = now_ns();
        while (now_ns() - t0 < ns) {
        }
    }
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = v;
}

// How many of p[0, n) differ from v (into *bad).
__global__ void count_not(const int *p, int n, int v, int *bad)
{
    int mine = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) mine += p[i] != v;
    if (mine) atomicAdd(bad, mine);
}

static const unsigned long long kMs = 1000000ull;
static const int kThreads = 4, kRounds = 6, kN = 1 << 16;

static int mismatches(const int *h, int n, int v)
{
    int bad = 0;
    for (int i = 0; i < n; ++i) bad += h[i] != v;
    return bad;
}

// ---- per-thread ordering -------------------------------------------------------------

struct thread_result {
    int bad[3] = {0, 0, 0}; // stream 0, cudaStreamPerThread, kernel on 0 and copy on cudaStreamPerThread
    int sync_bad = 0;       // synchronous cudaMemcpy after a kernel on stream 0
    int errors = 0;
    unsigned long long id0 = 0, idp = 0;
};

static void worker(int t, thread_result *r)
{
    int *d = nullptr, *h = nullptr;
    auto ok = [r](cudaError_t e) { r->errors += e != cudaSuccess; return e == cudaSuccess; };
    if (!ok(cudaMalloc(&d, kN * sizeof(int))) || !ok(cudaMallocHost(&h, kN * sizeof(int)))) return;
    cudaStream_t fill[3] = {0, cudaStreamPerThread, 0}, copy[3] = {0, cudaStreamPerThread, cudaStreamPerThread};
    for (int round = 0; round < kRounds; ++round)
        for (int k = 0; k < 3; ++k) {
            int v = 1000 * t + 10 * round + k + 1;
            std::memset(h, 0, kN * sizeof(int));
            slow_fill<<<64, 256, 0, fill[k]>>>(d, kN, v, 2 * kMs);
            ok(cudaGetLastError());
            ok(cudaMemcpyAsync(h, d, kN * sizeof(int), cudaMemcpyDeviceToHost, copy[k]));
            ok(cudaStreamSynchronize(copy[k]));
            r->bad[k] += mismatches(h, kN, v);
        }
    slow_fill<<<64, 256>>>(d, kN, -t - 1, 2 * kMs);
    ok(cudaMemcpy(h, d, kN * sizeof(int), cudaMemcpyDeviceToHost));
    r->sync_bad = mismatches(h, kN, -t - 1);
    ok(cudaStreamGetId(0, &r->id0));
    ok(cudaStreamGetId(cudaStreamPerThread, &r->idp));
    ok(cudaStreamSynchronize(cudaStreamPerThread));
    ok(cudaFreeHost(h));
    ok(cudaFree(d));
}

static void ordering()
{
    std::vector<thread_result> r(kThreads);
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; ++t) ts.emplace_back(worker, t, &r[t]);
    for (auto &t : ts) t.join();
    int bad[3] = {0, 0, 0}, sync_bad = 0, errors = 0;
    for (const auto &x : r) {
        for (int k = 0; k < 3; ++k) bad[k] += x.bad[k];
        sync_bad += x.sync_bad, errors += x.errors;
    }
    EXPECT(errors == 0, "every call of the worker threads succeeded");
    EXPECT(bad[0] == 0, "kernel then copy on stream 0, in each of 4 threads: in order");
    EXPECT(bad[1] == 0, "kernel then copy on cudaStreamPerThread, in each of 4 threads: in order");
    EXPECT(bad[2] == 0, "kernel on stream 0 then copy on cudaStreamPerThread: in order");
    EXPECT(sync_bad == 0, "a synchronous cudaMemcpy after a kernel on stream 0 sees its result");
    bool distinct = true, zero_is_own = true;
    for (int a = 0; a < kThreads; ++a)
        for (int b = a + 1; b < kThreads; ++b) distinct &= r[a].idp != r[b].idp;
    for (const auto &x : r) zero_is_own &= (x.id0 == x.idp) == (std::string(kBuild) == "per-thread");
    EXPECT(distinct, "each thread's cudaStreamPerThread is a stream of its own");
    EXPECT(zero_is_own, "stream 0 is the thread's per-thread stream exactly in the per-thread build");
}

// ---- a synchronous copy from pinned memory ------------------------------------------------

static void synchronous_copy()
{
    const int n = 16 << 20; // 64 MiB: the end of the copy is well behind its start
    int *h = nullptr, *d = nullptr, *bad = nullptr, nbad = -1;
    cudaStream_t nb;
    CHECK(cudaMallocHost(&h, n * sizeof(int)));
    CHECK(cudaMalloc(&d, n * sizeof(int)));
    CHECK(cudaMalloc(&bad, sizeof(int)));
    CHECK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
    CHECK(cudaMemset(d, 0, n * sizeof(int)));
    CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < n; ++i) h[i] = 77;
    CHECK(cudaMemset(bad, 0, sizeof(int)));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(d, h, n * sizeof(int), cudaMemcpyHostToDevice));
    count_not<<<256, 256, 0, nb>>>(d, n, 77, bad);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpyAsync(&nbad, bad, sizeof(int), cudaMemcpyDeviceToHost, nb));
    CHECK(cudaStreamSynchronize(nb));
    EXPECT(nbad == 0, "cudaMemcpy from pinned memory is complete on return (read at once on a non-blocking stream)");
    CHECK(cudaStreamDestroy(nb));
    CHECK(cudaFree(bad));
    CHECK(cudaFree(d));
    CHECK(cudaFreeHost(h));
}

// ---- the legacy stream and the blocking streams -----------------------------------------

// Whether an event recorded on `s` now completes within 100 ms.
static bool completes_soon(cudaStream_t s)
{
    cudaEvent_t e;
    CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CHECK(cudaEventRecord(e, s));
    cudaError_t q = cudaErrorNotReady;
    for (int i = 0; i < 100 && q == cudaErrorNotReady; ++i) {
        q = cudaEventQuery(e);
        if (q == cudaErrorNotReady) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    CHECK(cudaEventSynchronize(e));
    CHECK(cudaEventDestroy(e));
    return q == cudaSuccess;
}

static int read_back(const int *d, cudaStream_t s, int v)
{
    int *h = nullptr;
    CHECK(cudaMallocHost(&h, kN * sizeof(int)));
    std::memset(h, 0, kN * sizeof(int));
    CHECK(cudaMemcpyAsync(h, d, kN * sizeof(int), cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    int bad = mismatches(h, kN, v);
    CHECK(cudaFreeHost(h));
    return bad;
}

static void legacy_and_blocking()
{
    int *d = nullptr;
    cudaStream_t blocking, blocking2, nb;
    CHECK(cudaMalloc(&d, kN * sizeof(int)));
    CHECK(cudaStreamCreate(&blocking));
    CHECK(cudaStreamCreate(&blocking2));
    CHECK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
    CHECK(cudaDeviceSynchronize());

    slow_fill<<<64, 256, 0, blocking>>>(d, kN, 11, 50 * kMs);
    EXPECT(read_back(d, cudaStreamLegacy, 11) == 0, "the legacy stream waits for a blocking stream");
    slow_fill<<<64, 256, 0, cudaStreamLegacy>>>(d, kN, 12, 50 * kMs);
    EXPECT(read_back(d, blocking, 12) == 0, "a blocking stream waits for the legacy stream");
    slow_fill<<<64, 256, 0, cudaStreamPerThread>>>(d, kN, 13, 50 * kMs);
    EXPECT(read_back(d, cudaStreamLegacy, 13) == 0, "the legacy stream waits for the per-thread stream");
    slow_fill<<<64, 256, 0, cudaStreamLegacy>>>(d, kN, 14, 50 * kMs);
    EXPECT(read_back(d, cudaStreamPerThread, 14) == 0, "the per-thread stream waits for the legacy stream");
    slow_fill<<<64, 256, 0, cudaStreamLegacy>>>(d, kN, 15, 50 * kMs);
    int other_bad = -1;
    std::thread([&] { other_bad = read_back(d, cudaStreamPerThread, 15); }).join();
    EXPECT(other_bad == 0, "another thread's per-thread stream waits for the legacy stream");
    {   // (the other thread stays until the read is done: its stream is still there)
        std::promise<void> launched, read;
        std::thread other([&] {
            slow_fill<<<64, 256, 0, cudaStreamPerThread>>>(d, kN, 16, 50 * kMs);
            launched.set_value();
            read.get_future().wait();
            CHECK(cudaStreamSynchronize(cudaStreamPerThread));
        });
        launched.get_future().wait();
        EXPECT(read_back(d, cudaStreamLegacy, 16) == 0, "the legacy stream waits for another thread's per-thread stream");
        read.set_value();
        other.join();
    }
    CHECK(cudaDeviceSynchronize());

    slow_fill<<<1, 32, 0, cudaStreamLegacy>>>(d, 1, 17, 300 * kMs);
    EXPECT(completes_soon(nb), "a non-blocking stream does not wait for the legacy stream");
    CHECK(cudaDeviceSynchronize());
    slow_fill<<<1, 32, 0, blocking>>>(d, 1, 18, 300 * kMs);
    EXPECT(completes_soon(blocking2), "a blocking stream does not wait for another blocking stream");
    EXPECT(completes_soon(cudaStreamPerThread), "the per-thread stream does not wait for a blocking stream");
    CHECK(cudaDeviceSynchronize());
    slow_fill<<<1, 32, 0, cudaStreamPerThread>>>(d, 1, 19, 300 * kMs);
    EXPECT(completes_soon(blocking), "a blocking stream does not wait for the per-thread stream");
    CHECK(cudaDeviceSynchronize());

    // where the documentation says nothing: a query of a stream that does nothing,
    // while a stream it synchronizes with runs a kernel
    slow_fill<<<1, 32, 0, blocking>>>(d, 1, 20, 300 * kMs);
    cudaError_t q_legacy = cudaStreamQuery(cudaStreamLegacy);
    CHECK(cudaDeviceSynchronize());
    slow_fill<<<1, 32, 0, cudaStreamLegacy>>>(d, 1, 21, 300 * kMs);
    cudaError_t q_blocking = cudaStreamQuery(blocking);
    CHECK(cudaDeviceSynchronize());
    // and a synchronize of one: did it wait for the other's kernel (queried right after)?
    slow_fill<<<1, 32, 0, blocking>>>(d, 1, 22, 300 * kMs);
    CHECK(cudaStreamSynchronize(cudaStreamLegacy));
    cudaError_t s_legacy = cudaStreamQuery(blocking);
    CHECK(cudaDeviceSynchronize());
    slow_fill<<<1, 32, 0, cudaStreamLegacy>>>(d, 1, 23, 300 * kMs);
    CHECK(cudaStreamSynchronize(blocking));
    cudaError_t s_blocking = cudaStreamQuery(cudaStreamLegacy);
    CHECK(cudaDeviceSynchronize());
    printf("observed cudaStreamSynchronize(cudaStreamLegacy) waited for a blocking stream's kernel: %s\n",
           s_legacy == cudaSuccess ? "yes" : "no");
    printf("observed cudaStreamSynchronize(blocking stream) waited for the legacy stream's kernel: %s\n",
           s_blocking == cudaSuccess ? "yes" : "no");
    printf("observed cudaStreamQuery(cudaStreamLegacy) while a blocking stream runs a kernel: %s\n",
           cudaGetErrorName(q_legacy));
    printf("observed cudaStreamQuery(blocking stream) while the legacy stream runs a kernel: %s\n",
           cudaGetErrorName(q_blocking));
    cudaGetLastError();

    CHECK(cudaStreamDestroy(nb));
    CHECK(cudaStreamDestroy(blocking2));
    CHECK(cudaStreamDestroy(blocking));
    CHECK(cudaFree(d));
}

// ---- stream properties --------------------------------------------------------------------

static void properties()
{
    unsigned f0 = 99, fp = 99, fl = 99;
    int p0 = 99, pp = 99, dev = -1, cur = -1;
    unsigned long long id0 = 0, idp = 0, idl = 0;
    CHECK(cudaStreamGetFlags(0, &f0));
    CHECK(cudaStreamGetFlags(cudaStreamPerThread, &fp));
    CHECK(cudaStreamGetFlags(cudaStreamLegacy, &fl));
    CHECK(cudaStreamGetPriority(0, &p0));
    CHECK(cudaStreamGetPriority(cudaStreamPerThread, &pp));
    CHECK(cudaGetDevice(&cur));
    CHECK(cudaStreamGetDevice(cudaStreamPerThread, &dev));
    CHECK(cudaStreamGetId(0, &id0));
    CHECK(cudaStreamGetId(cudaStreamPerThread, &idp));
    CHECK(cudaStreamGetId(cudaStreamLegacy, &idl));
    printf("observed flags: stream 0 %u, cudaStreamPerThread %u, cudaStreamLegacy %u; priorities: stream 0 %d, "
           "cudaStreamPerThread %d\n", f0, fp, fl, p0, pp);
    EXPECT(dev == cur, "cudaStreamPerThread is a stream of the current device");
    EXPECT(idp != idl, "cudaStreamPerThread and cudaStreamLegacy are different streams");
    EXPECT((id0 == idp) == (std::string(kBuild) == "per-thread"), "stream 0 is cudaStreamPerThread exactly in the per-thread build");
    EXPECT((id0 == idl) == (std::string(kBuild) == "legacy"), "stream 0 is cudaStreamLegacy exactly in the legacy build");
}

int main()
{
    printf("per_thread_streams, built with --default-stream %s\n", kBuild);
    int n = 0;
    CHECK(cudaGetDeviceCount(&n));
    if (n == 0) return 1;
    properties();
    ordering();
    synchronous_copy();
    legacy_and_blocking();
    printf("%s: %d failed\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}

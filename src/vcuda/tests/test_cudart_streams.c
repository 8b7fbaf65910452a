/* The default streams through the libcudart stand-in, against the real vcuda-server on
 * the CPU stand-in driver: `vcuda_cudart_streams_test SERVER FAKE_LIB_DIR`.
 *
 * Built as a program built with `nvcc --default-stream per-thread` is: with
 * CUDA_API_PER_THREAD_DEFAULT_STREAM, so cuda_runtime_api.h sends cudaMemcpy to
 * cudaMemcpy_ptds, cudaLaunchKernel to cudaLaunchKernel_ptsz and so on, and stream 0 is
 * the calling thread's per-thread stream; cudaMemcpyLegacy below is the plain cudaMemcpy
 * a library built the legacy way would call.  The stand-in driver's kernel `busy(ms)`
 * keeps its stream busy for ms milliseconds and every stream-ordered copy, synchronize
 * and query answers by that time (fake_libcuda.c), so which stream waits for which is
 * a matter of how long a call takes (BUSY, and margins of a third of it either way):
 *   - stream 0 and cudaStreamPerThread are one stream per thread: another thread's is
 *     idle while this one's is busy (_ptsz launches, __cudaLaunchKernel_ptsz too);
 *     flags 0, priority 0, one id per thread, none the legacy stream's;
 *   - the legacy stream (cudaStreamLegacy) waits for every thread's per-thread stream
 *     and each of those for it; a non-blocking stream for neither; a blocking stream
 *     and a per-thread stream not for each other;
 *   - cudaMemcpy_ptds from the host returns complete, with the per-thread stream's
 *     earlier work, where cudaMemcpyAsync_ptsz returns at once; the legacy cudaMemcpy
 *     likewise on the legacy stream;
 *   - an event recorded on the per-thread stream, waited for by another thread's;
 *   - a capture of the per-thread stream, launched as a graph on it; a synchronous copy
 *     meanwhile refused by name;
 *   - a thread's per-thread stream goes with the thread (40 threads on a server allowing
 *     24 handles), its queued work still waited for by cudaDeviceSynchronize;
 *   - after cudaDeviceReset a new per-thread stream is made. */
#define _GNU_SOURCE
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#include <cuda_runtime_api.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fake_fatbin.h"
#include "vcuda_test.h"

#if !defined(cudaMemcpy) || !defined(cudaLaunchKernel)
#error "cuda_runtime_api.h did not map the calls to their per-thread entry points"
#endif

static const char TOKEN[] = "streams-test-token";
static char busy_stub, counter_stub; /* the kernels' host-side names: any unique addresses */
#define BUSY 300
#define MARGIN (BUSY / 3)

/* The plain (legacy default stream) cudaMemcpy and nvcc's launch entry point. */
cudaError_t cudaMemcpyLegacy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) __asm__("cudaMemcpy");
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t k, dim3 grid, dim3 block, void **args, size_t shmem, cudaStream_t s);

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static const dim3 one = {1, 1, 1};
static char *dev; /* 64 bytes of device memory */

static void busy(cudaStream_t s, uint32_t ms)
{
    void *args[] = {&ms};
    CHECK(cudaLaunchKernel(&busy_stub, one, one, args, 0, s) == cudaSuccess);
}

/* How long a 4-byte copy back takes: it waits for its stream. */
static int64_t d2h_ms(cudaStream_t s)
{
    int v;
    int64_t t = now_ms();
    CHECK(cudaMemcpyAsync(&v, dev, sizeof v, cudaMemcpyDeviceToHost, s) == cudaSuccess);
    return now_ms() - t;
}

static void run_in_thread(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, fn, arg) == 0 && pthread_join(t, NULL) == 0);
}

/* ---- one stream per thread --------------------------------------------------------- */

typedef struct {
    cudaError_t query;
    int64_t copy_ms;
    unsigned long long id;
    cudaStream_t wait_stream;
    cudaEvent_t wait_for;
} other_thread;

static void *other(void *arg)
{
    other_thread *o = arg;
    int v;
    if (o->wait_for) CHECK(cudaStreamWaitEvent(o->wait_stream, o->wait_for, 0) == cudaSuccess);
    o->query = cudaStreamQuery(0);
    CHECK(cudaStreamGetId(0, &o->id) == cudaSuccess);
    int64_t t = now_ms();
    CHECK(cudaMemcpy(&v, dev, sizeof v, cudaMemcpyDeviceToHost) == cudaSuccess); /* _ptds */
    o->copy_ms = now_ms() - t;
    return NULL;
}

static void per_thread_streams(void)
{
    unsigned flags = 1;
    int priority = 1, device = -1;
    unsigned long long id0, idp, idl;
    CHECK(cudaStreamGetFlags(0, &flags) == cudaSuccess && flags == cudaStreamDefault);
    CHECK(cudaStreamGetFlags(cudaStreamPerThread, &flags) == cudaSuccess && flags == cudaStreamDefault);
    CHECK(cudaStreamGetPriority(0, &priority) == cudaSuccess && priority == 0);
    CHECK(cudaStreamGetDevice(0, &device) == cudaSuccess && device == 0);
    CHECK(cudaStreamGetId(0, &id0) == cudaSuccess && cudaStreamGetId(cudaStreamPerThread, &idp) == cudaSuccess);
    CHECK(cudaStreamGetId(cudaStreamLegacy, &idl) == cudaSuccess);
    CHECK(id0 == idp && id0 != idl);
    CHECK(cudaStreamDestroy(cudaStreamPerThread) == cudaErrorInvalidResourceHandle);
    CHECK(cudaStreamDestroy(cudaStreamLegacy) == cudaErrorInvalidResourceHandle);
    cudaGetLastError();

    int64_t t0 = now_ms();
    busy(0, BUSY);
    CHECK(cudaStreamQuery(0) == cudaErrorNotReady && cudaStreamQuery(cudaStreamPerThread) == cudaErrorNotReady);
    other_thread o = {0};
    run_in_thread(other, &o);
    CHECK(o.query == cudaSuccess && o.copy_ms < MARGIN && o.id != id0 && o.id != idl);
    CHECK(cudaStreamSynchronize(0) == cudaSuccess);
    int64_t own = now_ms() - t0;
    CHECK(own >= BUSY - MARGIN);
    /* nvcc's own launch path for <<<...>>> under --default-stream per-thread */
    cudaKernel_t k;
    uint32_t ms = BUSY;
    void *args[] = {&ms};
    CHECK(cudaGetKernel(&k, &busy_stub) == cudaSuccess);
    t0 = now_ms();
    CHECK(__cudaLaunchKernel_ptsz(k, one, one, args, 0, 0) == cudaSuccess);
    CHECK(cudaStreamQuery(cudaStreamPerThread) == cudaErrorNotReady);
    CHECK(cudaStreamSynchronize(cudaStreamPerThread) == cudaSuccess && now_ms() - t0 >= BUSY - MARGIN);
    printf("{\"test\":\"cudart_streams_per_thread\",\"other_thread_copy_ms\":%lld,\"own_stream_ms\":%lld}\n",
           (long long)o.copy_ms, (long long)own);
}

/* ---- the legacy stream and the others ------------------------------------------------ */

static void legacy_stream(void)
{
    cudaStream_t nb, blocking;
    CHECK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking) == cudaSuccess);
    CHECK(cudaStreamCreate(&blocking) == cudaSuccess);
    /* the legacy stream after the per-thread stream: waits */
    int64_t t0 = now_ms();
    busy(0, BUSY);
    d2h_ms(cudaStreamLegacy);
    int64_t legacy_after_per_thread = now_ms() - t0;
    /* after the legacy stream: a non-blocking stream does not wait, another thread's
     * per-thread stream does, and this thread's */
    t0 = now_ms();
    busy(cudaStreamLegacy, BUSY);
    int64_t non_blocking = d2h_ms(nb);
    other_thread o = {0};
    run_in_thread(other, &o);
    int64_t other_after_legacy = now_ms() - t0;
    t0 = now_ms();
    busy(cudaStreamLegacy, BUSY);
    d2h_ms(0);
    int64_t per_thread_after_legacy = now_ms() - t0;
    CHECK(legacy_after_per_thread >= BUSY - MARGIN && non_blocking < MARGIN);
    CHECK(other_after_legacy >= BUSY - MARGIN && per_thread_after_legacy >= BUSY - MARGIN);
    /* a blocking stream and the per-thread stream: neither waits for the other */
    busy(blocking, BUSY);
    int64_t per_thread_after_blocking = d2h_ms(0);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    busy(0, BUSY);
    int64_t blocking_after_per_thread = d2h_ms(blocking);
    CHECK(per_thread_after_blocking < MARGIN && blocking_after_per_thread < MARGIN);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    printf("{\"test\":\"cudart_streams_legacy\",\"legacy_after_per_thread_ms\":%lld,\"non_blocking_after_legacy_ms\":%lld,"
           "\"other_thread_after_legacy_ms\":%lld,\"per_thread_after_legacy_ms\":%lld,"
           "\"per_thread_after_blocking_ms\":%lld,\"blocking_after_per_thread_ms\":%lld}\n",
           (long long)legacy_after_per_thread, (long long)non_blocking, (long long)other_after_legacy,
           (long long)per_thread_after_legacy, (long long)per_thread_after_blocking, (long long)blocking_after_per_thread);
    CHECK(cudaStreamDestroy(nb) == cudaSuccess && cudaStreamDestroy(blocking) == cudaSuccess);
}

/* ---- synchronous copies -------------------------------------------------------------- */

static void synchronous_copies(void)
{
    int v = 7;
    int64_t t0 = now_ms();
    busy(0, BUSY);
    CHECK(cudaMemcpyAsync(dev, &v, sizeof v, cudaMemcpyHostToDevice, 0) == cudaSuccess);
    int64_t async_ms = now_ms() - t0;
    CHECK(cudaMemcpy(dev, &v, sizeof v, cudaMemcpyHostToDevice) == cudaSuccess); /* _ptds */
    int64_t sync_ms = now_ms() - t0;
    CHECK(async_ms < MARGIN && sync_ms >= BUSY - MARGIN);
    CHECK(cudaStreamQuery(0) == cudaSuccess);
    /* the legacy cudaMemcpy on the legacy stream */
    t0 = now_ms();
    busy(cudaStreamLegacy, BUSY);
    CHECK(cudaMemcpyAsync(dev, &v, sizeof v, cudaMemcpyHostToDevice, cudaStreamLegacy) == cudaSuccess);
    int64_t legacy_async_ms = now_ms() - t0;
    CHECK(cudaMemcpyLegacy(dev, &v, sizeof v, cudaMemcpyHostToDevice) == cudaSuccess);
    int64_t legacy_sync_ms = now_ms() - t0;
    CHECK(legacy_async_ms < MARGIN && legacy_sync_ms >= BUSY - MARGIN);
    CHECK(cudaStreamQuery(cudaStreamLegacy) == cudaSuccess);
    int back = 0;
    CHECK(cudaMemcpy(&back, dev, sizeof back, cudaMemcpyDeviceToHost) == cudaSuccess && back == 7);
    printf("{\"test\":\"cudart_streams_sync_copies\",\"async_ms\":%lld,\"sync_ms\":%lld,\"legacy_async_ms\":%lld,"
           "\"legacy_sync_ms\":%lld}\n",
           (long long)async_ms, (long long)sync_ms, (long long)legacy_async_ms, (long long)legacy_sync_ms);
}

/* ---- events -------------------------------------------------------------------------- */

static void events(void)
{
    cudaEvent_t e;
    CHECK(cudaEventCreate(&e) == cudaSuccess);
    int64_t t0 = now_ms();
    busy(0, BUSY);
    CHECK(cudaEventRecord(e, 0) == cudaSuccess);
    CHECK(cudaEventQuery(e) == cudaErrorNotReady);
    other_thread o = {.wait_stream = 0, .wait_for = e};
    run_in_thread(other, &o);
    int64_t waited = now_ms() - t0;
    CHECK(o.copy_ms > 0 && waited >= BUSY - MARGIN && o.query == cudaErrorNotReady);
    CHECK(cudaEventQuery(e) == cudaSuccess);
    /* cudaStreamPerThread named as such, in both places */
    t0 = now_ms();
    busy(cudaStreamPerThread, BUSY);
    CHECK(cudaEventRecord(e, cudaStreamPerThread) == cudaSuccess);
    CHECK(cudaStreamWaitEvent(cudaStreamPerThread, e, 0) == cudaSuccess);
    CHECK(cudaEventSynchronize(e) == cudaSuccess && now_ms() - t0 >= BUSY - MARGIN);
    CHECK(cudaEventDestroy(e) == cudaSuccess);
    printf("{\"test\":\"cudart_streams_events\",\"waited_in_other_thread_ms\":%lld}\n", (long long)waited);
}

/* ---- capture ---------------------------------------------------------------------------- */

static void capture(void)
{
    char *out = dev + 32;
    void *args[] = {&out};
    enum cudaStreamCaptureStatus st;
    cudaGraph_t g;
    cudaGraphExec_t ex;
    int v;
    CHECK(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal) == cudaSuccess);
    CHECK(cudaStreamIsCapturing(cudaStreamPerThread, &st) == cudaSuccess && st == cudaStreamCaptureStatusActive);
    CHECK(cudaStreamIsCapturing(cudaStreamLegacy, &st) == cudaSuccess && st == cudaStreamCaptureStatusNone);
    CHECK(cudaLaunchKernel(&counter_stub, one, one, args, 0, 0) == cudaSuccess);
    CHECK(cudaMemcpy(&v, dev, sizeof v, cudaMemcpyDeviceToHost) == cudaErrorNotSupported);
    cudaGetLastError();
    CHECK(cudaStreamEndCapture(cudaStreamPerThread, &g) == cudaSuccess);
    size_t n = 0;
    CHECK(cudaGraphGetNodes(g, NULL, &n) == cudaSuccess && n == 1);
    CHECK(cudaGraphInstantiate(&ex, g, 0) == cudaSuccess);
    CHECK(cudaGraphLaunch(ex, 0) == cudaSuccess && cudaGraphLaunch(ex, cudaStreamPerThread) == cudaSuccess);
    CHECK(cudaStreamSynchronize(0) == cudaSuccess);
    CHECK(cudaMemcpy(&v, out, sizeof v, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(v == 2);
    CHECK(cudaGraphExecDestroy(ex) == cudaSuccess && cudaGraphDestroy(g) == cudaSuccess);
    printf("{\"test\":\"cudart_streams_capture\",\"nodes\":%zu,\"kernel_runs\":%d}\n", n, v);
}

/* ---- a thread's end ---------------------------------------------------------------------- */

static void *launch_and_leave(void *arg)
{
    busy(0, *(uint32_t *)arg);
    return NULL;
}

static void *use_and_leave(void *arg)
{
    *(cudaError_t *)arg = cudaStreamQuery(0);
    return NULL;
}

static void thread_end(void)
{
    uint32_t ms = BUSY;
    int64_t t0 = now_ms();
    run_in_thread(launch_and_leave, &ms);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    int64_t waited = now_ms() - t0;
    CHECK(waited >= BUSY - MARGIN);
    int ok = 0;
    for (int i = 0; i < 40; ++i) {
        cudaError_t e = cudaErrorUnknown;
        run_in_thread(use_and_leave, &e);
        ok += e == cudaSuccess;
    }
    CHECK(ok == 40);
    printf("{\"test\":\"cudart_streams_thread_end\",\"device_sync_ms\":%lld,\"threads\":%d}\n", (long long)waited, ok);
}

/* ---- a device reset -------------------------------------------------------------------- */

static void device_reset(void)
{
    CHECK(cudaStreamQuery(0) == cudaSuccess);
    CHECK(cudaDeviceReset() == cudaSuccess);
    CHECK(cudaStreamQuery(0) == cudaSuccess);
    int64_t t0 = now_ms();
    busy(0, BUSY);
    CHECK(cudaStreamSynchronize(0) == cudaSuccess && now_ms() - t0 >= BUSY - MARGIN);
    printf("{\"test\":\"cudart_streams_device_reset\",\"ok\":%s}\n", failures ? "false" : "true");
}

int main(int argc, char **argv)
{
    if (argc != 3) return fprintf(stderr, "usage: %s SERVER FAKE_LIB_DIR\n", argv[0]), 2;
    vcuda_test_server s;
    char servers[64];
    start_server(&s, argv[1], argv[2], TOKEN, "--max-handles 24");
    snprintf(servers, sizeof servers, "127.0.0.1:%u", s.port);
    setenv("VCUDA_SERVERS", servers, 1);
    setenv("VCUDA_TOKEN", TOKEN, 1);
    void **h = register_fake_fatbin("streams");
    register_kernel(h, &busy_stub, "busy");
    register_kernel(h, &counter_stub, "counter");
    CHECK(cudaMalloc((void **)&dev, 64) == cudaSuccess);
    CHECK(cudaMemset(dev, 0, 64) == cudaSuccess);

    per_thread_streams();
    legacy_stream();
    synchronous_copies();
    events();
    capture();
    thread_end();
    device_reset();

    char log[65536];
    stop_server_read_log(s.pid, s.log, log, sizeof log);
    printf("%s\n", failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}

/* Managed memory through the libcudart stand-in, against the real vcuda-server on the
 * CPU stand-in driver: `vcuda_cudart_managed_test segv|uffd SERVER FAKE_LIB_DIR` (the
 * fault engine, VCUDA_MANAGED_ENGINE; uffd exits 77 with the reason where userfaultfd is
 * not permitted; `config`: a bad VCUDA_MANAGED_PAGE makes cudaMallocManaged fail).  The stand-in's kernel `scale(float *p, int n, float k)` multiplies
 * device memory, which the host sees only through what crosses, so every case below is
 * a coherence check (pages of VCUDA_MANAGED_PAGE=16K):
 *   - the attributes: managed memory 1, concurrent managed access 0, mapped memory 0;
 *   - host writes, then a launch: the kernel sees them (all pages sent, each byte once);
 *     then the host reads the kernel's results after synchronizing (pages fetched);
 *   - a write to one page sends that page only; values across a page boundary;
 *   - four host threads write and read their quarters, faulting concurrently;
 *   - a prefetch to the device sends without a launch, one to the host fetches so that
 *     reads take no fault; the last prefetch location is reported; a batch of both;
 *   - memory attached to the host is left alone by launches; attached to one stream, by
 *     launches on other streams;
 *   - __managed__ variables (registered as nvcc's start-up code does, reached through
 *     the pointers __cudaInitModule sets), sharing pages, 64 bytes into the first;
 *   - a host read between a launch and its synchronization (an error with the real
 *     runtime on such a device): it waits for the device, then sees the results;
 *   - copies and sets to and from managed memory (and CUDA arrays), advice, pointer
 *     attributes, cudaFree;
 *   - mapped host memory refused by name. */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vcuda_test.h"

#include "../src/managed.h"

void **__cudaRegisterFatBinary(void *fat_cubin);
void __cudaRegisterFunction(void **handle, const char *host_fun, char *device_fun, const char *device_name,
                            int thread_limit, uint3 *tid, uint3 *bid, dim3 *bdim, dim3 *gdim, int *wsize);
void __cudaRegisterManagedVar(void **handle, void **host_var_ptr, char *device_address, const char *device_name,
                              int ext, size_t size, int constant, int global);
char __cudaInitModule(void **handle);

static const char TOKEN[] = "managed-test-token";
static char scale_stub, busy_stub;
static float *mvals, *mbig; /* __managed__ variables as nvcc's host code reaches them */
enum { PAGE = 16 << 10, N = (int)(3.5 * PAGE / sizeof(float)), NV = 10, NB = 2000 };
static const dim3 one = {1, 1, 1};
static void (*get_stats)(vcuda_managed_stats *);

static vcuda_managed_stats stats(void)
{
    vcuda_managed_stats s;
    get_stats(&s);
    return s;
}

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void scale(float *p, int n, float k, cudaStream_t s)
{
    void *args[] = {&p, &n, &k};
    CHECK(cudaLaunchKernel(&scale_stub, one, one, args, 0, s) == cudaSuccess);
}

static void fc_put(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; ++i) p[i] = (uint8_t)(v >> (8 * i));
}

/* A fatbinary of one PTX entry, which the stand-in driver reads for its kernels and its
 * __managed__ variable, registered as nvcc's start-up code does. */
static void **register_module(void)
{
    static const char ptx[] = "// vcuda-fake-function scale\n// vcuda-fake-function busy\n"
                              "// vcuda-fake-managed mvals 40\n// vcuda-fake-managed mbig 8000\n.version 8.0\n";
    static uint8_t fat[1024];
    size_t len = sizeof ptx, at = 16;
    memset(fat + at, 0, 64);
    fc_put(fat + at, 1, 2), fc_put(fat + at + 2, 0x101, 2), fc_put(fat + at + 4, 64, 4);
    fc_put(fat + at + 8, len, 8), fc_put(fat + at + 0x1c, 90, 4);
    memcpy(fat + at + 64, ptx, len);
    at += 64 + len;
    fc_put(fat, 0xba55ed50u, 4), fc_put(fat + 4, 1, 2), fc_put(fat + 6, 16, 2), fc_put(fat + 8, at - 16, 8);
    static struct { int magic, version; const void *data; void *unused; } wrapper = {0x466243b1, 1, fat, NULL};
    void **h = __cudaRegisterFatBinary(&wrapper);
    __cudaRegisterFunction(h, &scale_stub, (char *)"scale", "scale", -1, NULL, NULL, NULL, NULL, NULL);
    __cudaRegisterFunction(h, &busy_stub, (char *)"busy", "busy", -1, NULL, NULL, NULL, NULL, NULL);
    __cudaRegisterManagedVar(h, (void **)&mvals, (char *)"mvals", "mvals", 0, NV * sizeof(float), 0, 0);
    __cudaRegisterManagedVar(h, (void **)&mbig, (char *)"mbig", "mbig", 0, NB * sizeof(float), 0, 0);
    return h;
}

static int all(const float *a, int from, int to, float (*want)(int))
{
    for (int i = from; i < to; ++i)
        if (a[i] != want(i)) return fprintf(stderr, "a[%d] = %g, want %g\n", i, a[i], want(i)), 0;
    return 1;
}
static float twice(int i) { return 2.0f * (float)i; }
static float four(int i) { return 4.0f * (float)i; }

typedef struct {
    float *a;
    int from, to, bad;
} quarter;

static void *write_quarter(void *arg)
{
    quarter *q = arg;
    for (int i = q->from; i < q->to; ++i) q->a[i] = (float)i;
    return NULL;
}

static void *check_quarter(void *arg)
{
    quarter *q = arg;
    q->bad = !all(q->a, q->from, q->to, twice);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[1], "segv") && strcmp(argv[1], "uffd") && strcmp(argv[1], "config")))
        return fprintf(stderr, "usage: %s segv|uffd|config SERVER FAKE_LIB_DIR\n", argv[0]), 2;
    if (!strcmp(argv[1], "config")) { /* a page size that is no multiple of the OS page: refused */
        setenv("VCUDA_MANAGED_PAGE", "1000", 1);
        vcuda_test_server srv;
        start_server_for_me(&srv, argv[2], argv[3], TOKEN);
        void *p = NULL;
        CHECK(cudaMallocManaged(&p, 4096, cudaMemAttachGlobal) == cudaErrorInvalidValue && !p);
        static char text[1 << 16];
        stop_server_read_log(srv.pid, srv.log, text, sizeof text);
        return failures != 0;
    }
    setenv("VCUDA_MANAGED_ENGINE", argv[1], 1);
    setenv("VCUDA_MANAGED_PAGE", "16K", 1);
    get_stats = (void (*)(vcuda_managed_stats *))dlsym(RTLD_DEFAULT, "vcuda_managed_get_stats");
    if (!get_stats) return fprintf(stderr, "the stand-in does not export vcuda_managed_get_stats\n"), 1;
    void **h = register_module();
    vcuda_test_server srv;
    start_server_for_me(&srv, argv[2], argv[3], TOKEN);

    /* the attributes */
    int v = -1;
    struct cudaDeviceProp prop;
    CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrManagedMemory, 0) == cudaSuccess && v == 1);
    CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrConcurrentManagedAccess, 0) == cudaSuccess && v == 0);
    CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrCanMapHostMemory, 0) == cudaSuccess && v == 0);
    CHECK(cudaGetDeviceProperties(&prop, 0) == cudaSuccess && prop.managedMemory == 1 &&
          prop.concurrentManagedAccess == 0 && prop.pageableMemoryAccess == 0 && prop.canMapHostMemory == 0);

    /* host writes, then a launch; the host reads after synchronizing */
    float *a = NULL;
    cudaError_t e = cudaMallocManaged((void **)&a, N * sizeof(float), cudaMemAttachGlobal);
    if (e == cudaErrorInvalidValue && !strcmp(argv[1], "uffd")) {
        printf("skip: userfaultfd is not usable here (see the reason above)\n");
        stop_server_read_log(srv.pid, srv.log, (char[4096]){0}, 4096);
        return 77;
    }
    CHECK(e == cudaSuccess && a);
    if (!a) return 1;
    vcuda_managed_stats s0 = stats();
    for (int i = 0; i < N; ++i) a[i] = (float)i; /* zeros installed, no transfer */
    CHECK(stats().bytes_from_device == s0.bytes_from_device && stats().zero_fills > s0.zero_fills);
    scale(a, N, 2, 0);
    vcuda_managed_stats s1 = stats();
    CHECK(s1.bytes_to_device - s0.bytes_to_device == N * sizeof(float)); /* each byte once */
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(all(a, 0, N, twice));
    vcuda_managed_stats s2 = stats();
    CHECK(s2.bytes_from_device - s1.bytes_from_device == N * sizeof(float) && s2.fault_syncs == s1.fault_syncs);

    /* one page written: that page goes, nothing else; values across a page boundary */
    int edge = PAGE / (int)sizeof(float); /* a[edge] starts page 1 */
    float pair[2] = {(float)(edge - 1), (float)edge};
    memcpy((char *)&a[edge] - sizeof(float), pair, sizeof pair); /* the last of page 0, the first of page 1 */
    a[edge + 1] = (float)(edge + 1);
    vcuda_managed_stats s3 = stats();
    scale(a, N, 2, 0); /* pages 0 and 1: twice(i) except the three written: i */
    CHECK(stats().bytes_to_device - s3.bytes_to_device == 2 * PAGE);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(all(a, 0, edge - 1, four) && all(a, edge + 2, N, four) && a[edge - 1] == 2.0f * (float)(edge - 1) &&
          a[edge] == 2.0f * (float)edge && a[edge + 1] == 2.0f * (float)(edge + 1));

    /* four host threads, each its quarter: concurrent first touches and writes */
    quarter q[4];
    pthread_t t[4];
    for (int i = 0; i < 4; ++i) q[i] = (quarter){a, i * N / 4, (i + 1) * N / 4, 0};
    for (int i = 0; i < 4; ++i) pthread_create(&t[i], NULL, write_quarter, &q[i]);
    for (int i = 0; i < 4; ++i) pthread_join(t[i], NULL);
    scale(a, N, 2, 0);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    for (int i = 0; i < 4; ++i) pthread_create(&t[i], NULL, check_quarter, &q[i]);
    for (int i = 0; i < 4; ++i) pthread_join(t[i], NULL);
    CHECK(!q[0].bad && !q[1].bad && !q[2].bad && !q[3].bad);

    /* prefetch to the device sends, to the host fetches: then reads take no fault */
    struct cudaMemLocation dev0 = {cudaMemLocationTypeDevice, 0}, host = {cudaMemLocationTypeHost, 0};
    for (int i = 0; i < N; ++i) a[i] = (float)i;
    vcuda_managed_stats s4 = stats();
    CHECK(cudaMemPrefetchAsync(a, N * sizeof(float), dev0, 0, 0) == cudaSuccess);
    CHECK(stats().bytes_to_device - s4.bytes_to_device == N * sizeof(float) && stats().launches == s4.launches);
    CHECK(cudaMemRangeGetAttribute(&v, 4, cudaMemRangeAttributeLastPrefetchLocation, a, N * sizeof(float)) ==
              cudaSuccess && v == 0);
    scale(a, N, 2, 0);
    CHECK(stats().bytes_to_device == s4.bytes_to_device + N * sizeof(float)); /* nothing dirty was left */
    CHECK(cudaMemPrefetchAsync(a, N * sizeof(float), host, 0, 0) == cudaSuccess);
    vcuda_managed_stats s5 = stats();
    CHECK(all(a, 0, N, twice) && stats().faults == s5.faults);
    CHECK(cudaMemRangeGetAttribute(&v, 4, cudaMemRangeAttributeLastPrefetchLocation, a, N * sizeof(float)) ==
              cudaSuccess && v == cudaCpuDeviceId);
    void *ranges[] = {a, (char *)a + PAGE};
    size_t lens[] = {PAGE, PAGE}, idx[] = {0, 1};
    struct cudaMemLocation where[] = {dev0, host};
    a[0] = 1, a[edge] = 2; /* pages 0 and 1 dirty: the batch sends page 0 only */
    vcuda_managed_stats s5b = stats();
    CHECK(cudaMemPrefetchBatchAsync(ranges, lens, 2, where, idx, 2, 0, 0) == cudaSuccess);
    CHECK(stats().bytes_to_device - s5b.bytes_to_device == PAGE);
    CHECK(cudaMemRangeGetAttribute(&v, 4, cudaMemRangeAttributeLastPrefetchLocation, a, 4) == cudaSuccess && v == 0);
    CHECK(cudaMemRangeGetAttribute(&v, 4, cudaMemRangeAttributeLastPrefetchLocation, a, 2 * PAGE) == cudaSuccess &&
          v == cudaInvalidDeviceId); /* not all to one place */

    /* attached to the host: launches leave it; to one stream: launches on others do */
    float *b = NULL;
    cudaStream_t st, other;
    CHECK(cudaStreamCreate(&st) == cudaSuccess && cudaStreamCreate(&other) == cudaSuccess);
    CHECK(cudaMallocManaged((void **)&b, PAGE, cudaMemAttachHost) == cudaSuccess);
    b[0] = 7;
    scale(a, 1, 1, 0);
    vcuda_managed_stats s6 = stats();
    CHECK(b[0] == 7 && stats().faults == s6.faults);
    CHECK(cudaStreamAttachMemAsync(st, b, 0, cudaMemAttachSingle) == cudaSuccess);
    scale(a, 1, 1, other);
    CHECK(cudaStreamSynchronize(other) == cudaSuccess);
    CHECK(b[0] == 7 && stats().faults == s6.faults && stats().bytes_to_device == s6.bytes_to_device);
    scale(b, 1, 3, st);
    CHECK(cudaStreamSynchronize(st) == cudaSuccess);
    CHECK(b[0] == 21 && stats().faults == s6.faults + 1);

    /* __managed__ variables: pointers set by __cudaInitModule; 64 bytes into a page, the
     * second right after the first and over three pages */
    CHECK(__cudaInitModule(h) == 1 && mvals && ((uintptr_t)mvals & 4095) == 64 && mbig == mvals + NV);
    if (mvals && mbig) {
        for (int i = 0; i < NV; ++i) mvals[i] = (float)(i + 1);
        for (int i = 0; i < NB; ++i) mbig[i] = (float)i;
        scale(mvals, NV, 3, 0);
        scale(mbig, NB, 2, 0);
        CHECK(cudaDeviceSynchronize() == cudaSuccess);
        int good = 1;
        for (int i = 0; i < NV; ++i) good &= mvals[i] == 3.0f * (float)(i + 1);
        CHECK(good && all(mbig, 0, NB, twice));
        struct cudaPointerAttributes pa;
        CHECK(cudaPointerGetAttributes(&pa, mvals) == cudaSuccess && pa.type == cudaMemoryTypeManaged &&
              pa.hostPointer == mvals && pa.devicePointer == mvals);
    }

    /* a host read between a launch and its synchronization waits for the device */
    a[0] = 5;
    uint32_t ms = 300;
    void *bargs[] = {&ms};
    CHECK(cudaLaunchKernel(&busy_stub, one, one, bargs, 0, 0) == cudaSuccess);
    scale(a, 1, 2, 0);
    vcuda_managed_stats s7 = stats();
    int64_t t0 = now_ms();
    float got = a[0]; /* no cudaDeviceSynchronize before it */
    int64_t waited = now_ms() - t0;
    CHECK(got == 10 && waited >= 200 && stats().fault_syncs == s7.fault_syncs + 1);
    fprintf(stderr, "a read between a launch and its synchronization waited %lld ms\n", (long long)waited);

    /* copies and sets: managed memory is device memory to them, kind as given or not */
    float host_in[64], host_out[64];
    for (int i = 0; i < 64; ++i) host_in[i] = (float)(1000 + i), a[i] = (float)(-i);
    CHECK(cudaMemcpy(host_out, a, sizeof host_out, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(host_out[0] == 0 && host_out[63] == -63); /* the dirty page went first */
    CHECK(cudaMemcpy(a, host_in, sizeof host_in, cudaMemcpyHostToDevice) == cudaSuccess);
    CHECK(a[0] == 1000 && a[63] == 1063 && a[64] == 2.0f * 64); /* the host copy dropped, fetched again */
    CHECK(cudaMemcpy(host_out, a, sizeof host_out, cudaMemcpyHostToHost) == cudaSuccess && host_out[5] == 1005);
    CHECK(cudaMemset(a, 0, 16 * sizeof(float)) == cudaSuccess);
    CHECK(a[0] == 0 && a[15] == 0 && a[16] == 1016);
    CHECK(cudaMemcpy(b, a + 16, sizeof(float), cudaMemcpyDefault) == cudaSuccess && b[0] == 1016);

    /* a CUDA array from and to managed memory: its dirty pages first, its host copy dropped */
    cudaArray_t arr;
    struct cudaChannelFormatDesc fd = cudaCreateChannelDesc(32, 0, 0, 0, cudaChannelFormatKindFloat);
    CHECK(cudaMallocArray(&arr, &fd, 8, 4, 0) == cudaSuccess);
    for (int i = 0; i < 32; ++i) a[i] = (float)(500 + i);
    CHECK(cudaMemcpy2DToArray(arr, 0, 0, a, 8 * sizeof(float), 8 * sizeof(float), 4, cudaMemcpyHostToDevice) ==
          cudaSuccess);
    CHECK(cudaMemcpy2DFromArray(host_out, 8 * sizeof(float), arr, 0, 0, 8 * sizeof(float), 4,
                                cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(host_out[0] == 500 && host_out[31] == 531);
    CHECK(cudaMemcpy2DFromArray(a + 64, 8 * sizeof(float), arr, 0, 0, 8 * sizeof(float), 4, cudaMemcpyDefault) ==
          cudaSuccess);
    CHECK(a[64] == 500 && a[95] == 531 && a[0] == 500);
    CHECK(cudaFreeArray(arr) == cudaSuccess);

    /* advice is recorded and reported */
    CHECK(cudaMemAdvise(a, PAGE, cudaMemAdviseSetReadMostly, dev0) == cudaSuccess);
    CHECK(cudaMemAdvise(a, PAGE, cudaMemAdviseSetPreferredLocation, dev0) == cudaSuccess);
    CHECK(cudaMemAdvise(a, PAGE, cudaMemAdviseSetAccessedBy, host) == cudaSuccess);
    int rm = -1, pl = -1, by[2] = {-9, -9};
    void *data[] = {&rm, &pl, by};
    size_t sizes[] = {4, 4, 8};
    enum cudaMemRangeAttribute which[] = {cudaMemRangeAttributeReadMostly, cudaMemRangeAttributePreferredLocation,
                                          cudaMemRangeAttributeAccessedBy};
    CHECK(cudaMemRangeGetAttributes(data, sizes, which, 3, a, PAGE) == cudaSuccess && rm == 1 && pl == 0 &&
          by[0] == cudaCpuDeviceId && by[1] == cudaInvalidDeviceId);
    CHECK(cudaMemRangeGetAttribute(&rm, 4, cudaMemRangeAttributeReadMostly, a, 2 * PAGE) == cudaSuccess &&
          rm == 0); /* advised for the first page only */
    CHECK(cudaMemAdvise(&v, 4, cudaMemAdviseSetReadMostly, dev0) == cudaErrorInvalidValue); /* not managed */

    /* freed: the host side goes too; another allocation works */
    CHECK(cudaFree(a) == cudaSuccess && cudaFree(b) == cudaSuccess);
    CHECK(cudaMallocManaged((void **)&a, 100, cudaMemAttachGlobal) == cudaSuccess && a && a[24] == 0);
    CHECK(cudaMallocManaged((void **)&b, 0, cudaMemAttachGlobal) == cudaErrorInvalidValue);
    CHECK(cudaFree(a) == cudaSuccess);

    /* mapped (zero-copy) host memory cannot cross: refused by name */
    void *mapped = NULL;
    CHECK(cudaHostAlloc(&mapped, 4096, cudaHostAllocMapped) == cudaErrorNotSupported);
    cudaGetLastError();

    vcuda_managed_stats end = stats();
    fprintf(stderr, "managed %s: %llu B to the device, %llu B from it, %llu faults, %llu write faults\n", argv[1],
            (unsigned long long)end.bytes_to_device, (unsigned long long)end.bytes_from_device,
            (unsigned long long)end.faults, (unsigned long long)end.write_faults);
    static char text[1 << 16];
    stop_server_read_log(srv.pid, srv.log, text, sizeof text);
    return failures != 0;
}

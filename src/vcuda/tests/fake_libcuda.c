/* A CPU stand-in for the CUDA driver (built as libcuda.so.1 in a directory of its own):
 * vcuda-server loads it through its ordinary dlopen("libcuda.so.1") when that directory
 * is on LD_LIBRARY_PATH, so the server's real code runs in CI without a GPU.
 *
 * It models what the tests need and nothing more:
 *   - "device" memory is host memory; copies and sets are memcpy/memset;
 *   - streams have a time at which their queued work ends; the kernel `busy(uint ms)`
 *     makes its stream busy for ms milliseconds, and every synchronize, event wait and
 *     stream-ordered copy sleeps until then, like a GPU still running (copies to the
 *     device only once the staging memory is full, see cuMemcpyHtoDAsync_v2);
 *   - `sticky(uint code)` kills the context with a sticky error: every later call of the
 *     process returns that code, in any context (as the real driver does); with 710 (a
 *     device-side assert) the next synchronize first writes the driver's assertion
 *     message to stderr, as the real driver does;
 *   - `counter(int *out)` increments a counter that belongs to the loaded module (a
 *     __device__ variable) and stores it to *out: per-module state is visible;
 *     `pair(struct {int *a, *b;})` does the same through b (a struct argument);
 *   - it also printf()s "counter N" from the device: the line waits in the context's
 *     printf buffer until the next synchronize, which writes it to stdout, as the real
 *     driver does; its __device__ variable is named "counter_state";
 *   - pitched allocations, 2-D sets, stream and event queries, stream priorities and
 *     context limits are modelled plainly (pitch: the width rounded up to 512 bytes);
 *   - graphs of kernels, 1-D device copies, byte sets and empty nodes run their nodes
 *     in dependency order when launched, and say so on stderr, as they do when an exec
 *     is destroyed (with the count left), so tests can tell where a graph ran; an
 *     exec's kernel node takes new arguments (cuGraphExecKernelNodeSetParams);
 *     conditional nodes (set by the kernel `setcond({handle, int *n})`, which counts *n
 *     down and sets the condition to it), allocation and free nodes and the graph
 *     memory attributes are modelled too (see "graphs" below);
 *   - cuLaunchKernelEx runs the kernel as cuLaunchKernel does and says on stderr which
 *     attributes it was given; a cluster dimension that does not divide the grid is
 *     refused (CUDA_ERROR_INVALID_CLUSTER_SIZE), as the driver refuses it;
 *   - CUDA arrays are host buffers and texture/surface objects numbers (see the end);
 *   - cuModuleLoadData reads the ELF it is given trusting every offset, with no length,
 *     as the real driver does: an image the server failed to validate can crash it;
 *     a fatbin's first entry is what it loads (a driver picks its GPU's), and a PTX
 *     entry is not compiled: its variables are those its lines
 *     "// vcuda-fake-global NAME BYTES" declare, for cuModuleGetGlobal, its kernels
 *     those its lines "// vcuda-fake-function NAME" name, and its lines
 *     "// vcuda-fake-managed NAME BYTES" declare variables with storage of their own
 *     (zeros; one after the other from 64 bytes into a page, so that __managed__
 *     variables share pages with each other and with what is not theirs);
 *   - `scale(float *p, int n, float k)` multiplies p[0..n) by k (memory the host sees
 *     only through copies: what managed memory's coherence is tested with);
 *   - the device has 4 multiprocessors of 2048 threads (what a stack limit multiplies).
 * Every other driver function the server resolves exists as a weak stub returning
 * CUDA_ERROR_NOT_SUPPORTED (generated from server_driver.h's tables at build time). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/driver_graph.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

#define EXPORT __attribute__((visibility("default")))

typedef struct stream {
    int64_t end_ns; /* queued work ends then */
    size_t staged;  /* bytes of pageable H2D copies queued behind that work */
} stream;
typedef struct {
    int64_t at_ns;
} event;
typedef struct {
    int counter; /* the module's __device__ state */
    char names[8][64];
    int nnames;
    char globals[8][64]; /* a PTX entry's variables (see above) */
    size_t global_bytes[8];
    char *global_data[8]; /* vcuda-fake-managed: the storage; else NULL */
    int nglobals;
} module;
typedef struct {
    module *m;
    int kind; /* 0 other, 1 busy, 2 sticky, 3 counter */
} function;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static stream null_stream;
static int dead; /* sticky error of the context, 0 if alive */
static int ctx_token = 1;

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void sleep_until(int64_t t)
{
    int64_t n;
    while ((n = now_ns()) < t) {
        struct timespec ts = {(t - n) / 1000000000, (long)((t - n) % 1000000000)};
        nanosleep(&ts, NULL);
    }
}

static stream *S(void *s) { return s ? (stream *)s : &null_stream; }

static CUresult alive(void)
{
    pthread_mutex_lock(&mu);
    int d = dead;
    pthread_mutex_unlock(&mu);
    return d;
}

/* The context's device printf buffer (one context's worth: enough for the tests). */
static char printf_buf[4096];
static size_t printf_len;
static char assert_msg[256]; /* a device assert's message, written at the next synchronize */
static size_t limits[8];

/* A synchronize writes what kernels printed to stdout, from the calling thread. */
static void flush_printf(void)
{
    pthread_mutex_lock(&mu);
    if (printf_len) fwrite(printf_buf, 1, printf_len, stdout), fflush(stdout);
    printf_len = 0;
    if (*assert_msg) fputs(assert_msg, stderr), fflush(stderr), *assert_msg = 0;
    pthread_mutex_unlock(&mu);
}

/* Waits for a stream's queued work; the context may die meanwhile. */
static CUresult drain(void *s)
{
    pthread_mutex_lock(&mu);
    int64_t end = S(s)->end_ns;
    pthread_mutex_unlock(&mu);
    sleep_until(end);
    flush_printf();
    return alive();
}

EXPORT CUresult cuInit(unsigned f) { (void)f; return 0; }
EXPORT CUresult cuDeviceGetCount(int *n) { *n = 1; return 0; }
EXPORT CUresult cuDeviceGet(int *d, int o) { *d = o; return o == 0 ? 0 : 101; }
EXPORT CUresult cuDeviceGetName(char *n, int len, int d)
{
    (void)d;
    snprintf(n, (size_t)len, "vcuda CPU stand-in");
    return 0;
}
EXPORT CUresult cuDeviceTotalMem_v2(size_t *b, int d) { (void)d; *b = (size_t)16 << 30; return 0; }
EXPORT CUresult cuDeviceGetAttribute(int *v, int a, int d)
{
    (void)d;
    *v = a == 75 || a == 76 ? 9 : a == 13 ? 32 : a == 1 ? 1024 : a == 16 ? 4 : a == 39 ? 2048 : 1;
    return 0;
}
EXPORT CUresult cuDriverGetVersion(int *v) { *v = 13000; return 0; }
EXPORT CUresult cuDevicePrimaryCtxRetain(void **c, int d) { (void)d; *c = &ctx_token; return 0; }
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(int d) { (void)d; return 0; }
EXPORT CUresult cuCtxSetCurrent(void *c) { (void)c; return 0; }
EXPORT CUresult cuCtxCreate_v2(void **c, unsigned f, int d) { (void)f, (void)d; CUresult r = alive(); if (!r) *c = calloc(1, 8); return r; }
EXPORT CUresult cuCtxDestroy_v2(void *c) { free(c); return 0; }
EXPORT CUresult cuCtxSynchronize(void) { return drain(NULL); }
EXPORT CUresult cuGetErrorString(CUresult r, const char **s)
{
    *s = r == 710 ? "device-side assert triggered" : r == 700 ? "an illegal memory access was encountered"
       : r == 1 ? "invalid argument" : "fake-libcuda error";
    return 0;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
    CUresult d = alive();
    if (d) return d;
    void *q = calloc(1, n);
    if (!q) return 2;
    *p = (CUdeviceptr)(uintptr_t)q;
    return 0;
}
static int graph_alloc_free(CUdeviceptr p);
/* a graph allocation ends (its reservation stays, as with the driver); else freed */
EXPORT CUresult cuMemFree_v2(CUdeviceptr p)
{
    if (!graph_alloc_free(p)) free((void *)(uintptr_t)p);
    return 0;
}
EXPORT CUresult cuMemAllocHost_v2(void **p, size_t n) { return (*p = malloc(n)) ? 0 : 2; }
EXPORT CUresult cuMemFreeHost(void *p) { free(p); return 0; }
EXPORT CUresult cuMemGetInfo_v2(size_t *f, size_t *t) { *f = (size_t)8 << 30, *t = (size_t)16 << 30; return 0; }

#define DEV(p) ((void *)(uintptr_t)(p))
EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { CUresult r = alive(); if (!r) memcpy(DEV(d), s, n); return r; }
EXPORT CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { CUresult r = alive(); if (!r) memcpy(d, DEV(s), n); return r; }
EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { CUresult r = alive(); if (!r) memmove(DEV(d), DEV(s), n); return r; }
EXPORT CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { CUresult r = alive(); if (!r) memset(DEV(d), v, n); return r; }
/* A pageable H2D copy is staged at once, behind the stream's queued work, while the
 * driver's staging memory (STAGING bytes here) holds what the stream has not reached;
 * past that it waits for the stream, as the real driver's does once staging is full. */
#define STAGING ((size_t)4 << 20)
EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, void *st)
{
    CUresult r = alive();
    if (r) return r;
    pthread_mutex_lock(&mu);
    stream *x = S(st);
    if (now_ns() >= x->end_ns) x->staged = 0;
    int full = x->staged + n > STAGING;
    x->staged += n;
    pthread_mutex_unlock(&mu);
    if (full && !(r = drain(st))) {
        pthread_mutex_lock(&mu);
        x->staged = n;
        pthread_mutex_unlock(&mu);
    }
    if (!r) memcpy(DEV(d), s, n);
    return r;
}
EXPORT CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, void *st) { CUresult r = drain(st); if (!r) memcpy(d, DEV(s), n); return r; }
EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, void *st) { CUresult r = drain(st); if (!r) memmove(DEV(d), DEV(s), n); return r; }
EXPORT CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, void *st) { CUresult r = drain(st); if (!r) memset(DEV(d), v, n); return r; }

EXPORT CUresult cuStreamCreate(void **s, unsigned f) { (void)f; CUresult d = alive(); if (d) return d; return (*s = calloc(1, sizeof(stream))) ? 0 : 2; }
EXPORT CUresult cuStreamDestroy_v2(void *s) { free(s); return 0; }
EXPORT CUresult cuStreamSynchronize(void *s) { return drain(s); }
EXPORT CUresult cuEventCreate(void **e, unsigned f) { (void)f; CUresult d = alive(); if (d) return d; return (*e = calloc(1, sizeof(event))) ? 0 : 2; }
EXPORT CUresult cuEventDestroy_v2(void *e) { free(e); return 0; }
EXPORT CUresult cuEventRecord(void *e, void *s)
{
    pthread_mutex_lock(&mu);
    ((event *)e)->at_ns = S(s)->end_ns;
    pthread_mutex_unlock(&mu);
    return alive();
}
EXPORT CUresult cuEventSynchronize(void *e) { sleep_until(((event *)e)->at_ns); flush_printf(); return alive(); }
EXPORT CUresult cuEventElapsedTime(float *ms, void *a, void *b)
{
    *ms = (float)(((event *)b)->at_ns - ((event *)a)->at_ns) / 1e6f;
    return alive();
}
EXPORT CUresult cuStreamWaitEvent(void *s, void *e, unsigned f)
{
    (void)f;
    pthread_mutex_lock(&mu);
    if (((event *)e)->at_ns > S(s)->end_ns) S(s)->end_ns = ((event *)e)->at_ns;
    pthread_mutex_unlock(&mu);
    return alive();
}

/* ELF64 read the way a driver does: offsets from the image, no length to check them
 * against.  Function names are the FUNC symbols of the symbol table. */
EXPORT CUresult cuModuleLoadData(void **mod, const void *image)
{
    const uint8_t *p = image;
    CUresult d = alive();
    if (d) return d;
    uint32_t fat_magic, entry_header;
    uint16_t fat_header, kind = 2;
    memcpy(&fat_magic, p, 4);
    if (fat_magic == 0xba55ed50u) { /* a fatbinary: its first entry's image (a driver picks its GPU's) */
        uint64_t entry_flags;
        memcpy(&fat_header, p + 6, 2);
        memcpy(&kind, p + fat_header, 2);
        memcpy(&entry_header, p + fat_header + 4, 4);
        memcpy(&entry_flags, p + fat_header + 0x28, 8);
        /* a zstd-compressed entry: what the real driver answered to the tests' compressed
         * fake cubins (measured on an H100): CUDA_ERROR_UNKNOWN, the context usable */
        if (entry_flags & 0x8000u) return 999;
        p += fat_header + entry_header;
    }
    if (kind == 1) { /* PTX: the variables its vcuda-fake-global lines name */
        module *m = calloc(1, sizeof *m);
        const char *t = (const char *)p, *k = t;
        while (m->nglobals < 8 && (k = strstr(k, "// vcuda-fake-global "))) {
            unsigned long long bytes = 0;
            if (sscanf(k, "// vcuda-fake-global %63s %llu", m->globals[m->nglobals], &bytes) == 2)
                m->global_bytes[m->nglobals++] = (size_t)bytes;
            ++k;
        }
        /* the managed variables one after the other (8-aligned), from 64 bytes into a page */
        size_t at = 64, first = (size_t)m->nglobals;
        for (k = t; m->nglobals < 8 && (k = strstr(k, "// vcuda-fake-managed ")); ++k) {
            unsigned long long bytes = 0;
            if (sscanf(k, "// vcuda-fake-managed %63s %llu", m->globals[m->nglobals], &bytes) == 2) {
                m->global_data[m->nglobals] = (char *)(uintptr_t)at; /* (an offset until allocated) */
                m->global_bytes[m->nglobals++] = (size_t)bytes;
                at += (bytes + 7) / 8 * 8;
            }
        }
        void *block = NULL;
        if ((size_t)m->nglobals > first && !posix_memalign(&block, 4096, at)) {
            memset(block, 0, at);
            for (int i = (int)first; i < m->nglobals; ++i) m->global_data[i] = (char *)block + (uintptr_t)m->global_data[i];
        }
        for (k = t; m->nnames < 8 && (k = strstr(k, "// vcuda-fake-function ")); ++k)
            sscanf(k, "// vcuda-fake-function %63s", m->names[m->nnames++]);
        *mod = m;
        return 0;
    }
    if (memcmp(p, "\177ELF", 4)) return 200;
    module *m = calloc(1, sizeof *m);
    uint64_t shoff;
    uint16_t shnum;
    memcpy(&shoff, p + 40, 8);
    memcpy(&shnum, p + 60, 2);
    for (unsigned i = 0; i < shnum; ++i) {
        const uint8_t *sh = p + shoff + (uint64_t)i * 64;
        uint32_t type, link;
        uint64_t off, size;
        memcpy(&type, sh + 4, 4), memcpy(&off, sh + 24, 8), memcpy(&size, sh + 32, 8), memcpy(&link, sh + 40, 4);
        if (type != 2) continue;
        uint64_t stroff;
        memcpy(&stroff, p + shoff + (uint64_t)link * 64 + 24, 8);
        for (uint64_t k = 0; k < size / 24 && m->nnames < 8; ++k) {
            const uint8_t *sym = p + off + k * 24;
            uint32_t name;
            memcpy(&name, sym, 4);
            if ((sym[4] & 0xf) == 2 /* STT_FUNC */)
                snprintf(m->names[m->nnames++], sizeof m->names[0], "%s", (const char *)p + stroff + name);
        }
    }
    *mod = m;
    return 0;
}
EXPORT CUresult cuModuleUnload(void *m) { free(m); return 0; }
EXPORT CUresult cuModuleGetGlobal_v2(CUdeviceptr *p, size_t *size, void *mod, const char *name)
{
    module *m = mod;
    for (int i = 0; i < m->nglobals; ++i)
        if (!strcmp(m->globals[i], name)) {
            /* (&counter: not to be written) */
            *p = (CUdeviceptr)(uintptr_t)(m->global_data[i] ? (void *)m->global_data[i] : (void *)&m->counter);
            *size = m->global_bytes[i];
            return alive();
        }
    if (strcmp(name, "counter_state")) return 500;
    *p = (CUdeviceptr)(uintptr_t)&((module *)mod)->counter, *size = sizeof(int);
    return alive();
}
EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned elem)
{
    (void)elem;
    *pitch = (w + 511) / 512 * 512;
    return cuMemAlloc_v2(p, *pitch * h);
}
EXPORT CUresult cuMemsetD2D8Async(CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h, void *st)
{
    CUresult r = drain(st);
    for (size_t y = 0; !r && y < h; ++y) memset((char *)DEV(d) + y * pitch, v, w);
    return r;
}
/* not ready (600) while the stream's queued work or the event's point is in the future */
EXPORT CUresult cuStreamQuery(void *s)
{
    pthread_mutex_lock(&mu);
    int64_t end = S(s)->end_ns;
    pthread_mutex_unlock(&mu);
    return now_ns() < end ? 600 : alive();
}
EXPORT CUresult cuEventQuery(void *e)
{
    pthread_mutex_lock(&mu);
    int64_t at = ((event *)e)->at_ns;
    pthread_mutex_unlock(&mu);
    return now_ns() < at ? 600 : alive();
}
EXPORT CUresult cuStreamCreateWithPriority(void **s, unsigned f, int prio) { (void)prio; return cuStreamCreate(s, f); }
EXPORT CUresult cuCtxSetLimit(int which, size_t v)
{
    if (which < 0 || which >= 8) return 1;
    pthread_mutex_lock(&mu);
    limits[which] = v;
    pthread_mutex_unlock(&mu);
    return alive();
}
EXPORT CUresult cuCtxGetLimit(size_t *v, int which)
{
    if (which < 0 || which >= 8) return 1;
    pthread_mutex_lock(&mu);
    *v = limits[which];
    pthread_mutex_unlock(&mu);
    return alive();
}
EXPORT CUresult cuModuleGetFunction(void **f, void *mod, const char *name)
{
    module *m = mod;
    for (int i = 0; i < m->nnames; ++i)
        if (!strcmp(m->names[i], name)) {
            function *fn = calloc(1, sizeof *fn); /* leaked with the module: a test double */
            fn->m = m;
            fn->kind = !strcmp(name, "busy") ? 1 : !strcmp(name, "sticky") ? 2 : !strcmp(name, "counter") ? 3
                     : !strcmp(name, "pair") ? 4 : !strcmp(name, "setcond") ? 5 : !strcmp(name, "scale") ? 6 : 0;
            *f = fn;
            return 0;
        }
    return 500;
}
/* The one parameter's size, by kernel. */
static size_t param_size(const function *fn) { return fn->kind == 4 || fn->kind == 5 ? 16 : fn->kind == 3 ? 8 : 4; }

EXPORT CUresult cuFuncGetParamInfo(void *f, size_t i, size_t *off, size_t *size)
{
    function *fn = f;
    static const size_t scale_off[] = {0, 8, 12}, scale_size[] = {8, 4, 4};
    if (fn->kind == 6) { /* scale(float *p, int n, float k) */
        if (i > 2) return 1;
        *off = scale_off[i], *size = scale_size[i];
        return 0;
    }
    if (fn->kind == 0 || i > 0) return 1; /* past the last parameter */
    *off = 0, *size = param_size(fn);
    return 0;
}
static void cond_set(unsigned long long handle, unsigned value);

/* What a kernel does, in stream s's time (mu held; arg: its one parameter, if any). */
static void run_kernel(const function *fn, void *s, const void *arg)
{
    int64_t t = now_ns(), *end = &S(s)->end_ns;
    if (*end < t) *end = t;
    if (fn->kind == 1) *end += (int64_t)*(const uint32_t *)arg * 1000000;
    if (fn->kind == 2) dead = (int)*(const uint32_t *)arg; /* reported from now on */
    if (fn->kind == 2 && dead == 710)
        snprintf(assert_msg, sizeof assert_msg, "sticky.cu:7: void sticky(unsigned int): block: [0,0,0], "
                 "thread: [0,0,0] Assertion `code != 710` failed.\n");
    if (fn->kind == 3 || fn->kind == 4) {
        *(int *)DEV(((const CUdeviceptr *)arg)[fn->kind == 4]) = ++fn->m->counter;
        if (printf_len + 32 < sizeof printf_buf)
            printf_len += (size_t)snprintf(printf_buf + printf_len, 32, "counter %d\n", fn->m->counter);
    }
    if (fn->kind == 5) { /* setcond({handle, int *n}): counts *n down to 0 and sets the condition to it */
        unsigned long long h;
        CUdeviceptr p;
        memcpy(&h, arg, 8), memcpy(&p, (const char *)arg + 8, 8);
        int *n = DEV(p);
        if (*n > 0) --*n;
        cond_set(h, (unsigned)*n);
        if (printf_len + 32 < sizeof printf_buf)
            printf_len += (size_t)snprintf(printf_buf + printf_len, 32, "setcond %d\n", *n);
    }
}

EXPORT CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                               unsigned smem, void *s, void **params, void **extra)
{
    (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)smem, (void)extra;
    CUresult d = alive();
    if (d) return d;
    const function *fn = f;
    pthread_mutex_lock(&mu);
    if (fn->kind == 6) {
        float *p = DEV(*(const CUdeviceptr *)params[0]), k = *(const float *)params[2];
        for (int i = 0, n = *(const int *)params[1]; i < n; ++i) p[i] *= k;
    }
    run_kernel(f, s, params ? params[0] : NULL);
    pthread_mutex_unlock(&mu);
    return 0;
}

/* ---- graphs: nodes with their parameters copied (kernel arguments too, as the driver
 * does); a node's dependencies exist before it (the API takes them as it is added), so
 * the order of adding is an order that respects every dependency, and an exec runs its
 * nodes in that order when launched, after the stream's queued work.  Only what the
 * server builds is modelled: kernels, 1-D device copies, byte sets, empty nodes, and
 * what graph twins add:
 *   - conditional handles are numbers (0xc0d0000 + n) whose value the `setcond` kernel
 *     sets; a conditional node (cuGraphAddNode_v2) owns its body graphs, run when
 *     launched as IF (1 or 2 bodies), WHILE or SWITCH say, and its launch says on stderr
 *     how many bodies ran;
 *   - an allocation node reserves its address when it is made (host memory: the fake
 *     "VA reservation") and makes it live when it runs, a free node ends it, as
 *     cuMemFree_v2 does for a graph allocation; the graph memory attributes count live
 *     graph bytes (used), the most there were (high), and the bytes kept for graphs
 *     (reserved: what was ever live, until cuDeviceGraphMemTrim gives back all but the
 *     live ones);
 *   - cuGraphAddDependencies_v2 takes an edge that keeps the order of adding (an earlier
 *     node before a later one) and refuses others (CUDA_ERROR_NOT_SUPPORTED). */
#define MAX_CONDS 64
#define MAX_GALLOCS 256
typedef struct graph graph;
typedef struct {
    int kind; /* 0 empty, 1 kernel, 2 copy, 3 set, 4 conditional, 5 alloc, 6 free */
    const function *fn;
    unsigned char arg[16];
    CUdeviceptr dst, src;
    size_t n, pitch, width, height;
    unsigned char value;
    unsigned long long cond; /* conditional */
    int cond_type;
    unsigned size;
    graph **bodies;
} gnode;
struct graph {
    gnode **nodes; /* a graph's: each its own allocation (the node's handle) */
    size_t n;
};
typedef struct {
    gnode *nodes; /* an exec's: copies, in the order they were added */
    gnode **from; /* the graph's nodes they were copied from (valid while the graph is) */
    size_t n;
} graph_exec;
static int live_execs; /* said on stderr at each destroy, for the server's tests */
static struct {
    unsigned value, dflt, flags;
} conds[MAX_CONDS];
static int nconds;
static struct {
    CUdeviceptr p;
    size_t n;
    int live;
} gallocs[MAX_GALLOCS];
static int ngallocs;
static size_t gmem_used, gmem_high, gmem_reserved, gmem_reserved_high;

static void cond_set(unsigned long long handle, unsigned value)
{
    if (handle >= 0xc0d0000ull && handle < 0xc0d0000ull + (unsigned)nconds) conds[handle - 0xc0d0000ull].value = value;
}

static int galloc_find(CUdeviceptr p)
{
    for (int i = 0; i < ngallocs; ++i)
        if (gallocs[i].p == p) return i;
    return -1;
}

/* A graph allocation becomes live or ends (mu held). */
static void galloc_live(int i, int live)
{
    if (i < 0 || gallocs[i].live == live) return;
    gallocs[i].live = live;
    if (live) {
        gmem_used += gallocs[i].n;
        if (gmem_used > gmem_high) gmem_high = gmem_used;
        if (gmem_used > gmem_reserved) gmem_reserved = gmem_used;
        if (gmem_reserved > gmem_reserved_high) gmem_reserved_high = gmem_reserved;
    } else
        gmem_used -= gallocs[i].n;
}

static CUresult add_gnode(void **out, void *g, void *const *deps, size_t ndeps, gnode x)
{
    graph *gr = g;
    for (size_t i = 0; i < ndeps; ++i) { /* dependencies must be nodes of this graph */
        size_t k = 0;
        while (k < gr->n && gr->nodes[k] != deps[i]) ++k;
        if (k == gr->n) return 1;
    }
    gnode **q = realloc(gr->nodes, (gr->n + 1) * sizeof *q), *n = malloc(sizeof *n);
    if (q) gr->nodes = q;
    if (!q || !n) return free(n), 2;
    *n = x;
    *out = gr->nodes[gr->n++] = n;
    return alive();
}
EXPORT CUresult cuGraphCreate(void **g, unsigned f) { (void)f; return (*g = calloc(1, sizeof(graph))) ? alive() : 2; }
EXPORT CUresult cuGraphDestroy(void *g)
{
    graph *gr = g;
    for (size_t i = 0; i < gr->n; ++i) {
        for (unsigned k = 0; gr->nodes[i]->kind == 4 && k < gr->nodes[i]->size; ++k) cuGraphDestroy(gr->nodes[i]->bodies[k]);
        if (gr->nodes[i]->kind == 4) free(gr->nodes[i]->bodies);
        free(gr->nodes[i]);
    }
    free(gr->nodes);
    free(gr);
    return 0;
}
EXPORT CUresult cuGraphAddEmptyNode(void **out, void *g, void *const *deps, size_t nd)
{
    return add_gnode(out, g, deps, nd, (gnode){0});
}
EXPORT CUresult cuGraphAddKernelNode_v2(void **out, void *g, void *const *deps, size_t nd, const kernel_node_params *p)
{
    const function *fn = p->func;
    gnode x = {1, fn, {0}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL};
    if (!fn || p->extra) return 1;
    if (fn->kind) memcpy(x.arg, p->params[0], param_size(fn)); /* cuFuncGetParamInfo's sizes */
    return add_gnode(out, g, deps, nd, x);
}
EXPORT CUresult cuGraphAddMemcpyNode(void **out, void *g, void *const *deps, size_t nd, const memcpy3d_params *p, void *ctx)
{
    (void)ctx;
    if (p->src_type != VCUDA_CU_MEMORYTYPE_DEVICE || p->dst_type != VCUDA_CU_MEMORYTYPE_DEVICE || p->height != 1 ||
        p->depth != 1)
        return 801;
    gnode x = {2, NULL, {0}, p->dst_device, p->src_device, p->width, 0, 0, 0, 0, 0, 0, 0, NULL};
    return add_gnode(out, g, deps, nd, x);
}
EXPORT CUresult cuGraphAddMemsetNode(void **out, void *g, void *const *deps, size_t nd, const memset_node_params *p, void *ctx)
{
    (void)ctx;
    if (p->element_size != 1 || (p->height > 1 && p->pitch < p->width)) return 1;
    gnode x = {3, NULL, {0}, p->dst, 0, 0, p->pitch, p->width, p->height, (unsigned char)p->value, 0, 0, 0, NULL};
    return add_gnode(out, g, deps, nd, x);
}
EXPORT CUresult cuGraphConditionalHandleCreate(unsigned long long *h, void *g, void *ctx, unsigned dflt, unsigned flags)
{
    (void)g, (void)ctx;
    if (flags > 1) return 1;
    pthread_mutex_lock(&mu);
    int i = nconds < MAX_CONDS ? nconds++ : -1;
    if (i >= 0) conds[i].value = conds[i].dflt = dflt, conds[i].flags = flags;
    pthread_mutex_unlock(&mu);
    if (i < 0) return 2;
    *h = 0xc0d0000ull + (unsigned)i;
    return alive();
}
EXPORT CUresult cuGraphAddNode_v2(void **out, void *g, void *const *deps, const void *edges, size_t nd,
                                  graph_node_params *p)
{
    if (p->type != VCUDA_CU_GRAPH_NODE_TYPE_CONDITIONAL || edges) return 801;
    unsigned size = p->u.conditional.size;
    int type = p->u.conditional.type;
    if (p->u.conditional.handle - 0xc0d0000ull >= (unsigned)nconds || type < 0 || type > 2 || !size ||
        (type == 0 && size > 2) || (type == 1 && size > 1))
        return 1;
    gnode x = {4, NULL, {0}, 0, 0, 0, 0, 0, 0, 0, p->u.conditional.handle, type, size, calloc(size, sizeof(graph *))};
    for (unsigned k = 0; x.bodies && k < size; ++k) cuGraphCreate((void **)&x.bodies[k], 0);
    CUresult r = x.bodies ? add_gnode(out, g, deps, nd, x) : 2;
    if (r) {
        for (unsigned k = 0; x.bodies && k < size; ++k) cuGraphDestroy(x.bodies[k]);
        free(x.bodies);
        return r;
    }
    p->u.conditional.bodies = (void **)x.bodies; /* the driver's array, valid while the node is */
    return 0;
}
EXPORT CUresult cuGraphAddMemAllocNode(void **out, void *g, void *const *deps, size_t nd, mem_alloc_node_params *p)
{
    if (p->pool.alloc_type != VCUDA_CU_MEM_ALLOCATION_TYPE_PINNED || p->pool.location_type != VCUDA_CU_MEM_LOCATION_TYPE_DEVICE ||
        p->pool.location_id != 0 || !p->bytesize)
        return 1;
    void *q = calloc(1, p->bytesize); /* the reservation (kept: a test double) */
    if (!q) return 2;
    pthread_mutex_lock(&mu);
    int i = ngallocs < MAX_GALLOCS ? ngallocs++ : -1;
    if (i >= 0) gallocs[i].p = (CUdeviceptr)(uintptr_t)q, gallocs[i].n = p->bytesize, gallocs[i].live = 0;
    pthread_mutex_unlock(&mu);
    if (i < 0) return free(q), 2;
    gnode x = {5, NULL, {0}, (CUdeviceptr)(uintptr_t)q, 0, p->bytesize, 0, 0, 0, 0, 0, 0, 0, NULL};
    CUresult r = add_gnode(out, g, deps, nd, x);
    if (!r) p->dptr = (CUdeviceptr)(uintptr_t)q;
    return r;
}
EXPORT CUresult cuGraphAddMemFreeNode(void **out, void *g, void *const *deps, size_t nd, CUdeviceptr dptr)
{
    pthread_mutex_lock(&mu);
    int i = galloc_find(dptr);
    pthread_mutex_unlock(&mu);
    if (i < 0) return 1;
    gnode x = {6, NULL, {0}, dptr, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL};
    return add_gnode(out, g, deps, nd, x);
}
EXPORT CUresult cuGraphAddDependencies_v2(void *g, void *const *from, void *const *to, const void *edges, size_t n)
{
    graph *gr = g;
    for (size_t e = 0; e < n; ++e) {
        size_t a = gr->n, b = gr->n;
        for (size_t k = 0; k < gr->n; ++k) {
            if (gr->nodes[k] == from[e]) a = k;
            if (gr->nodes[k] == to[e]) b = k;
        }
        if (a == gr->n || b == gr->n || edges) return 1;
        if (a > b) return 801;
    }
    return alive();
}
EXPORT CUresult cuDeviceGetGraphMemAttribute(int dev, int attr, void *v)
{
    (void)dev;
    pthread_mutex_lock(&mu);
    size_t x = attr == 0 ? gmem_used : attr == 1 ? gmem_high : attr == 2 ? gmem_reserved : gmem_reserved_high;
    pthread_mutex_unlock(&mu);
    if (attr < 0 || attr > 3) return 1;
    *(unsigned long long *)v = x;
    return alive();
}
EXPORT CUresult cuDeviceSetGraphMemAttribute(int dev, int attr, void *v)
{
    (void)dev;
    if ((attr != 1 && attr != 3) || *(unsigned long long *)v) return 1;
    pthread_mutex_lock(&mu);
    if (attr == 1) gmem_high = gmem_used;
    else gmem_reserved_high = gmem_reserved;
    pthread_mutex_unlock(&mu);
    return alive();
}
EXPORT CUresult cuDeviceGraphMemTrim(int dev)
{
    (void)dev;
    pthread_mutex_lock(&mu);
    gmem_reserved = gmem_used;
    pthread_mutex_unlock(&mu);
    return alive();
}
EXPORT CUresult cuGraphInstantiateWithFlags(void **e, void *g, unsigned long long f)
{
    const graph *gr = g;
    graph_exec *x = calloc(1, sizeof *x);
    if (x && gr->n) x->nodes = malloc(gr->n * sizeof *x->nodes), x->from = malloc(gr->n * sizeof *x->from);
    if ((f & ~1ull) || !x || (gr->n && (!x->nodes || !x->from))) { /* (1: auto free on launch) */
        if (x) free(x->nodes), free(x->from);
        return free(x), 1;
    }
    for (size_t i = 0; i < gr->n; ++i) x->nodes[i] = *gr->nodes[i], x->from[i] = gr->nodes[i];
    x->n = gr->n;
    pthread_mutex_lock(&mu);
    ++live_execs;
    pthread_mutex_unlock(&mu);
    *e = x;
    return alive();
}
EXPORT CUresult cuGraphExecDestroy(void *e)
{
    pthread_mutex_lock(&mu);
    int left = --live_execs;
    pthread_mutex_unlock(&mu);
    fprintf(stderr, "fake libcuda: graph exec destroyed, %d left\n", left);
    free(((graph_exec *)e)->nodes);
    free(((graph_exec *)e)->from);
    free(e);
    return 0;
}

static void run_graph(const graph *gr, void *s, unsigned *bodies_run);

static int graph_alloc_free(CUdeviceptr p)
{
    pthread_mutex_lock(&mu);
    int i = galloc_find(p);
    galloc_live(i, 0);
    pthread_mutex_unlock(&mu);
    return i >= 0;
}

/* One node, in stream s's time (mu held); bodies_run counts conditional bodies run. */
static void run_gnode(const gnode *n, void *s, unsigned *bodies_run)
{
    if (n->kind == 1) run_kernel(n->fn, s, n->arg);
    else if (n->kind == 2) memmove(DEV(n->dst), DEV(n->src), n->n);
    else if (n->kind == 3)
        for (size_t y = 0; y < n->height; ++y) memset((char *)DEV(n->dst) + y * n->pitch, n->value, n->width);
    else if (n->kind == 4) {
        unsigned *v = &conds[n->cond - 0xc0d0000ull].value;
        if (n->cond_type == 0 && (*v || n->size == 2)) ++*bodies_run, run_graph(n->bodies[*v ? 0 : 1], s, bodies_run);
        for (unsigned k = 0; n->cond_type == 1 && *v && k < 1000000; ++k) ++*bodies_run, run_graph(n->bodies[0], s, bodies_run);
        if (n->cond_type == 2 && *v < n->size) ++*bodies_run, run_graph(n->bodies[*v], s, bodies_run);
    } else if (n->kind == 5) galloc_live(galloc_find(n->dst), 1);
    else if (n->kind == 6) galloc_live(galloc_find(n->dst), 0);
}

static void run_graph(const graph *gr, void *s, unsigned *bodies_run)
{
    for (size_t i = 0; i < gr->n; ++i) run_gnode(gr->nodes[i], s, bodies_run);
}

EXPORT CUresult cuGraphLaunch(void *e, void *s)
{
    const graph_exec *x = e;
    unsigned bodies_run = 0;
    CUresult r = drain(s);
    if (r) return r;
    fprintf(stderr, "fake libcuda: graph launched (%zu nodes)\n", x->n);
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nconds; ++i)
        if (conds[i].flags & 1) conds[i].value = conds[i].dflt; /* CU_GRAPH_COND_ASSIGN_DEFAULT */
    for (size_t i = 0; i < x->n; ++i) run_gnode(&x->nodes[i], s, &bodies_run);
    pthread_mutex_unlock(&mu);
    if (bodies_run) fprintf(stderr, "fake libcuda: %u conditional bodies ran\n", bodies_run);
    return 0;
}
EXPORT CUresult cuGraphExecKernelNodeSetParams_v2(void *e, void *node, const kernel_node_params *p)
{
    graph_exec *x = e;
    const function *fn = p->func;
    size_t i = 0;
    while (i < x->n && x->from[i] != node) ++i;
    if (i == x->n || x->nodes[i].kind != 1 || !fn || p->extra) return 1;
    pthread_mutex_lock(&mu);
    x->nodes[i].fn = fn;
    if (fn->kind) memcpy(x->nodes[i].arg, p->params[0], param_size(fn));
    pthread_mutex_unlock(&mu);
    fprintf(stderr, "fake libcuda: exec kernel node %zu set\n", i);
    return alive();
}

EXPORT CUresult cuLaunchKernelEx(const launch_config *c, void *f, void **params, void **extra)
{
    unsigned coop = 0, pdl = 0, cx = 1, cy = 1, cz = 1, domain = 0;
    int prio = 0;
    for (unsigned i = 0; i < c->nattrs; ++i) {
        const launch_attribute *a = &c->attrs[i];
        switch (a->id) {
        case VCUDA_CU_LAUNCH_ATTRIBUTE_COOPERATIVE: coop = a->value.cooperative != 0; break;
        case VCUDA_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION: pdl = a->value.programmatic != 0; break;
        case VCUDA_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
            cx = a->value.cluster.x, cy = a->value.cluster.y, cz = a->value.cluster.z;
            break;
        case VCUDA_CU_LAUNCH_ATTRIBUTE_PRIORITY: prio = a->value.priority; break;
        case VCUDA_CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN: domain = (unsigned)a->value.sync_domain; break;
        default: return 1;
        }
    }
    if (!cx || !cy || !cz || c->grid[0] % cx || c->grid[1] % cy || c->grid[2] % cz) return 912;
    fprintf(stderr, "fake libcuda: launch ex: cooperative=%u programmatic=%u cluster=%ux%ux%u priority=%d domain=%u\n",
            coop, pdl, cx, cy, cz, prio, domain);
    return cuLaunchKernel(f, c->grid[0], c->grid[1], c->grid[2], c->block[0], c->block[1], c->block[2], c->shmem,
                          c->stream, params, extra);
}

/* ---- CUDA arrays, texture and surface objects ------------------------------------ *
 * An array is a host buffer, rows of width x element bytes packed; a copy walks the box
 * row by row; texture and surface objects are numbers from 1 on, each said on stderr
 * with what it was made from, so tests can check what the server asked for. */
#include "../src/driver_array.h"

typedef struct {
    array3d_desc d;
    size_t elem;
    unsigned char *data;
} fake_array;

static unsigned fmt_bytes(int f) { return f == 1 || f == 8 ? 1 : f == 2 || f == 9 || f == 0x10 ? 2 : 4; }

EXPORT CUresult cuArray3DCreate_v2(void **out, const array3d_desc *d)
{
    CUresult r = alive();
    if (r) return r;
    fake_array *a = calloc(1, sizeof *a);
    if (!a) return 2;
    a->d = *d, a->elem = fmt_bytes(d->format) * d->channels;
    size_t n = d->width * a->elem * (d->height ? d->height : 1) * (d->depth ? d->depth : 1);
    if (!(a->data = calloc(1, n))) return free(a), 2;
    *out = a;
    return 0;
}
EXPORT CUresult cuArrayDestroy(void *a)
{
    if (!a) return 400;
    free(((fake_array *)a)->data);
    free(a);
    return 0;
}

static unsigned char *box_row(int type, unsigned long long dev, void *arr, size_t x, size_t y, size_t z, size_t pitch,
                              size_t height)
{
    if (type == 3) {
        fake_array *a = arr;
        size_t row = a->d.width * a->elem, rows = a->d.height ? a->d.height : 1;
        return a->data + (z * rows + y) * row + x;
    }
    return (unsigned char *)(uintptr_t)dev + (z * height + y) * pitch + x;
}

EXPORT CUresult cuMemcpy3DAsync_v2(const memcpy3d_params *p, void *st)
{
    CUresult r = drain(st);
    if (r) return r;
    for (size_t z = 0; z < p->depth; ++z)
        for (size_t y = 0; y < p->height; ++y)
            memmove(box_row(p->dst_type, p->dst_device, p->dst_array, p->dst_x, p->dst_y + y, p->dst_z + z, p->dst_pitch,
                            p->dst_height),
                    box_row(p->src_type, p->src_device, p->src_array, p->src_x, p->src_y + y, p->src_z + z, p->src_pitch,
                            p->src_height),
                    p->width);
    return 0;
}

static unsigned long long next_object = 1;
static unsigned long long live_objects[256];

static CUresult object_new(unsigned long long *out, const resource_desc *rd, const char *kind)
{
    if (rd->type == 0 && !rd->res.array.array) return 1;
    pthread_mutex_lock(&mu);
    unsigned long long o = next_object++;
    int slot = -1;
    for (int i = 0; i < 256 && slot < 0; ++i)
        if (!live_objects[i]) slot = i;
    if (slot >= 0) live_objects[slot] = o;
    pthread_mutex_unlock(&mu);
    if (slot < 0) return 2;
    *out = o;
    fprintf(stderr, "fake driver: %s object %llu on resource type %d\n", kind, o, rd->type);
    return 0;
}
static CUresult object_free(unsigned long long o, const char *kind)
{
    CUresult r = 400;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < 256; ++i)
        if (live_objects[i] == o && o) live_objects[i] = 0, r = 0;
    pthread_mutex_unlock(&mu);
    fprintf(stderr, "fake driver: %s object %llu destroyed (%d)\n", kind, o, r);
    return r;
}
EXPORT CUresult cuTexObjectCreate(unsigned long long *o, const resource_desc *rd, const texture_desc *td, const view_desc *vd)
{
    CUresult r = alive();
    if (r || (r = object_new(o, rd, "texture"))) return r;
    int format = rd->type == 2 ? rd->res.linear.format : rd->type == 3 ? rd->res.pitch2d.format
                                                                       : ((fake_array *)rd->res.array.array)->d.format;
    fprintf(stderr, "fake driver: texture %llu format 0x%x address %d %d %d filter %d flags 0x%x border %g view %d\n", *o,
            format, td->address[0], td->address[1], td->address[2], td->filter, td->flags, td->border[0], vd != NULL);
    return 0;
}
EXPORT CUresult cuTexObjectDestroy(unsigned long long o) { return object_free(o, "texture"); }
EXPORT CUresult cuSurfObjectCreate(unsigned long long *o, const resource_desc *rd)
{
    CUresult r = alive();
    return r ? r : object_new(o, rd, "surface");
}
EXPORT CUresult cuSurfObjectDestroy(unsigned long long o) { return object_free(o, "surface"); }
EXPORT CUresult cuDeviceGetUuid_v2(unsigned char *uuid, int d)
{
    for (int i = 0; i < 16; ++i) uuid[i] = (unsigned char)(0xa0 + i + d);
    return 0;
}

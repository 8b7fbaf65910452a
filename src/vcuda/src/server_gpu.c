/* vcuda server GPU side (see server_gpu.h). */
#define _GNU_SOURCE
#include "vcuda/server_gpu.h"

#include "vcuda/sha256.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The few driver types used, declared here so the server needs no CUDA toolkit to
 * build (the driver ABI of these has been stable since CUDA 4). */
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream, *CUevent;

#define DRIVER_FUNCTIONS(X)                                                                  \
    X(cuInit, CUresult, (unsigned))                                                          \
    X(cuDeviceGetCount, CUresult, (int *))                                                   \
    X(cuDeviceGet, CUresult, (int *, int))                                                   \
    X(cuDeviceGetName, CUresult, (char *, int, int))                                         \
    X(cuDeviceTotalMem_v2, CUresult, (size_t *, int))                                        \
    X(cuDeviceGetAttribute, CUresult, (int *, int, int))                                     \
    X(cuDriverGetVersion, CUresult, (int *))                                                 \
    X(cuDevicePrimaryCtxRetain, CUresult, (CUcontext *, int))                                \
    X(cuDevicePrimaryCtxRelease_v2, CUresult, (int))                                         \
    X(cuCtxSetCurrent, CUresult, (CUcontext))                                                \
    X(cuCtxSynchronize, CUresult, (void))                                                    \
    X(cuMemAlloc_v2, CUresult, (CUdeviceptr *, size_t))                                      \
    X(cuMemFree_v2, CUresult, (CUdeviceptr))                                                 \
    X(cuMemAllocHost_v2, CUresult, (void **, size_t))                                        \
    X(cuMemFreeHost, CUresult, (void *))                                                     \
    X(cuMemGetInfo_v2, CUresult, (size_t *, size_t *))                                       \
    X(cuMemcpyHtoD_v2, CUresult, (CUdeviceptr, const void *, size_t))                        \
    X(cuMemcpyDtoD_v2, CUresult, (CUdeviceptr, CUdeviceptr, size_t))                         \
    X(cuMemcpyDtoHAsync_v2, CUresult, (void *, CUdeviceptr, size_t, CUstream))               \
    X(cuMemcpyDtoH_v2, CUresult, (void *, CUdeviceptr, size_t))                              \
    X(cuMemsetD8_v2, CUresult, (CUdeviceptr, unsigned char, size_t))                         \
    X(cuStreamCreate, CUresult, (CUstream *, unsigned))                                      \
    X(cuStreamDestroy_v2, CUresult, (CUstream))                                              \
    X(cuStreamSynchronize, CUresult, (CUstream))                                             \
    X(cuEventCreate, CUresult, (CUevent *, unsigned))                                        \
    X(cuEventDestroy_v2, CUresult, (CUevent))                                                \
    X(cuEventRecord, CUresult, (CUevent, CUstream))                                          \
    X(cuEventSynchronize, CUresult, (CUevent))                                               \
    X(cuEventElapsedTime, CUresult, (float *, CUevent, CUevent))                             \
    X(cuModuleLoadData, CUresult, (CUmodule *, const void *))                                \
    X(cuModuleGetFunction, CUresult, (CUfunction *, CUmodule, const char *))                 \
    X(cuFuncGetParamInfo, CUresult, (CUfunction, size_t, size_t *, size_t *))                \
    X(cuLaunchKernel, CUresult,                                                              \
      (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,     \
       CUstream, void **, void **))                                                          \
    X(cuGetErrorString, CUresult, (CUresult, const char **))                                 \
    X(cuEventQuery, CUresult, (CUevent))                                                     \
    X(cuStreamQuery, CUresult, (CUstream))                                                   \
    X(cuStreamWaitEvent, CUresult, (CUstream, CUevent, unsigned))                            \
    X(cuStreamCreateWithPriority, CUresult, (CUstream *, unsigned, int))                     \
    X(cuCtxGetStreamPriorityRange, CUresult, (int *, int *))                                 \
    X(cuCtxSetLimit, CUresult, (int, size_t))                                                \
    X(cuCtxGetLimit, CUresult, (size_t *, int))                                              \
    X(cuFuncGetAttribute, CUresult, (int *, int, CUfunction))                                \
    X(cuFuncSetAttribute, CUresult, (CUfunction, int, int))                                  \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, CUresult,                        \
      (int *, CUfunction, int, size_t, unsigned))                                            \
    X(cuOccupancyAvailableDynamicSMemPerBlock, CUresult, (size_t *, CUfunction, int, int))   \
    X(cuModuleGetGlobal_v2, CUresult, (CUdeviceptr *, size_t *, CUmodule, const char *))     \
    X(cuLaunchCooperativeKernel, CUresult,                                                   \
      (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,     \
       CUstream, void **))                                                                   \
    X(cuMemAllocPitch_v2, CUresult, (CUdeviceptr *, size_t *, size_t, size_t, unsigned))     \
    X(cuMemsetD2D8_v2, CUresult, (CUdeviceptr, size_t, unsigned char, size_t, size_t))

typedef struct {
#define DECLARE(name, ret, args) ret(*name) args;
    DRIVER_FUNCTIONS(DECLARE)
#undef DECLARE
} driver;

enum { CU_INVALID_VALUE = 1, CU_NOT_FOUND = 500, CU_ATTR_PCI_BUS = 33 };

/* Per-client limits: a client cannot make the server grow without bound. */
#define MAX_ALLOCS (1u << 20)
#define MAX_HANDLES (1u << 16)
#define MAX_MODULES 1024
#define PARAM_ALIGN 16
#define MSG_LEN 320 /* error texts sent back (driver messages are short) */

typedef enum { H_STREAM = 1, H_EVENT, H_MODULE, H_FUNCTION } handle_kind;

typedef struct {
    CUfunction f;
    uint32_t n;
    uint32_t sizes[VCUDA_MAX_PARAMS];
} function_info;

typedef struct {
    uint64_t id;
    handle_kind kind;
    void *obj; /* CUstream, CUevent, module cache entry, function_info* */
} handle;

typedef struct {
    CUdeviceptr base;
    uint64_t size;
} allocation;

typedef struct {
    allocation *allocs;
    uint32_t nalloc, cap_alloc;
    handle *handles;
    uint32_t nhandle, cap_handle;
    uint64_t next_id;
    int copy_error;          /* first failure of a chunked H2D copy, reported at its end */
    char copy_msg[MSG_LEN];
    int launch_error;        /* failure of an asynchronous launch, for the next reply */
    char launch_msg[MSG_LEN];
    char msg[MSG_LEN]; /* error reply text; lives until the next request */
    allocation *globals; /* __device__ variables the client looked up: copyable, not freeable */
    uint32_t nglobal, cap_global;
} client;

typedef struct {
    uint8_t hash[VCUDA_HASH_SIZE];
    CUmodule mod;
} cached_module;

struct vcuda_gpu {
    driver cu;
    void *lib;
    int ordinal, dev;
    CUcontext ctx;
    CUstream copy_stream; /* the server's own, for pipelined D2H */
    void *pinned[2];
    CUdeviceptr touch;    /* 4 bytes the keep-alive copies back */
    size_t chunk;
    cached_module modules[MAX_MODULES];
    int nmodules;
    volatile sig_atomic_t *stop;
    char name[256];
    /* Device printf: the driver writes it to this process's stdout, which is a pipe
     * drained into out[] (by the request that synchronized, or by out_thread when the
     * pipe fills between requests) and shipped to the client on PRINTF_FETCH. */
    int out_fd;
    pthread_t out_thread;
    pthread_mutex_t out_mu;
    char *out;
    size_t out_len, out_dropped;
};


static const char *cu_error_text(vcuda_gpu *g, CUresult r)
{
    const char *s = NULL;
    if (!g->cu.cuGetErrorString || g->cu.cuGetErrorString(r, &s) != 0 || !s) s = "unknown driver error";
    return s;
}

/* Driver errors after which the context is unusable for everyone (the sticky ones). */
static int context_lost(CUresult r) { return r == 700 || r == 710 /* device assert */ || (r >= 714 && r <= 720) || r == 999; }

/* Error reply from a failed driver call.  CUresult and cudaError_t share numbers for
 * every error a client can provoke here, so the code passes through (bounded to the
 * wire's range). */
static int reply_cu(vcuda_gpu *g, client *cl, vcuda_msg *r, const char *what, CUresult rc)
{
    snprintf(cl->msg, sizeof cl->msg, "%s: %s (CUresult %d)", what, cu_error_text(g, rc), rc);
    vcuda_reply_error(r, rc >= 1 && rc <= VCUDA_MAX_CUDA_ERROR ? rc : 999, cl->msg);
    if (context_lost(rc)) {
        fprintf(stderr, "vcuda-server: device %d: %s: the context is unusable; exiting so that "
                "clients fail over and the server can be restarted\n", g->ordinal, cl->msg);
        *g->stop = 1;
    }
    return 0;
}

static int reply_invalid(client *cl, vcuda_msg *r, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cl->msg, sizeof cl->msg, fmt, ap);
    va_end(ap);
    vcuda_reply_error(r, code, cl->msg);
    return 0;
}

/* ---- per-client tables ----------------------------------------------------------- */

static int grow(void **p, uint32_t *cap, uint32_t need, size_t elem, uint32_t max)
{
    if (need <= *cap) return 0;
    if (need > max) return -1;
    uint32_t n = *cap ? *cap * 2 : 16;
    if (n > max) n = max;
    void *q = realloc(*p, (size_t)n * elem);
    if (!q) return -1;
    *p = q, *cap = n;
    return 0;
}

static handle *find_handle(client *cl, uint64_t id, handle_kind kind)
{
    for (uint32_t i = 0; i < cl->nhandle; ++i)
        if (cl->handles[i].id == id && cl->handles[i].kind == kind) return &cl->handles[i];
    return NULL;
}

static uint64_t add_handle(client *cl, handle_kind kind, void *obj)
{
    if (grow((void **)&cl->handles, &cl->cap_handle, cl->nhandle + 1, sizeof(handle), MAX_HANDLES))
        return 0;
    cl->handles[cl->nhandle++] = (handle){++cl->next_id, kind, obj};
    return cl->next_id;
}

static void remove_handle(client *cl, handle *h) { *h = cl->handles[--cl->nhandle]; }

/* The allocation holding [p, p+n) entirely, or NULL: no copy, set or free ever touches
 * memory this client did not allocate. */
static allocation *in_table(allocation *t, uint32_t n_entries, uint64_t p, uint64_t n)
{
    for (uint32_t i = 0; i < n_entries; ++i) {
        allocation *a = &t[i];
        if (p >= a->base && p - a->base <= a->size && n <= a->size - (p - a->base)) return a;
    }
    return NULL;
}

static allocation *find_range(client *cl, uint64_t p, uint64_t n)
{
    allocation *a = in_table(cl->allocs, cl->nalloc, p, n);
    return a ? a : in_table(cl->globals, cl->nglobal, p, n);
}

/* Stream handle -> CUstream (0: the legacy default stream).  -1 if not this client's. */
static int stream_of(client *cl, uint64_t id, CUstream *s)
{
    handle *h;
    if (id == 0) return *s = NULL, 0;
    if (!(h = find_handle(cl, id, H_STREAM))) return -1;
    *s = h->obj;
    return 0;
}

/* Copies are ordered after the work already queued where the client asked. */
static CUresult wait_for(vcuda_gpu *g, CUstream s)
{
    return s ? g->cu.cuStreamSynchronize(s) : g->cu.cuCtxSynchronize();
}

/* ---- module cache ---------------------------------------------------------------- */

static cached_module *cache_find(vcuda_gpu *g, const uint8_t *hash)
{
    for (int i = 0; i < g->nmodules; ++i)
        if (!memcmp(g->modules[i].hash, hash, VCUDA_HASH_SIZE)) return &g->modules[i];
    return NULL;
}

/* Only the formats cuModuleLoadData takes from a vcuda client: a fatbin whose header
 * accounts for exactly the bytes sent, or an ELF cubin.  Anything else never reaches
 * the driver. */
static const char *image_problem(const uint8_t *p, uint32_t n)
{
    if (n >= 16 && p[0] == 0x50 && p[1] == 0xed && p[2] == 0x55 && p[3] == 0xba) {
        uint32_t hsize = (uint32_t)p[6] | (uint32_t)p[7] << 8;
        uint64_t fsize = 0;
        for (int i = 7; i >= 0; --i) fsize = fsize << 8 | p[8 + i];
        if (hsize < 16 || fsize > n || hsize + fsize != n)
            return "fatbin header does not match the image size";
        return NULL;
    }
    if (n >= 64 && !memcmp(p, "\177ELF", 4) && p[4] == 2 /* 64-bit */) return NULL;
    return "image is neither a fatbin nor a 64-bit ELF cubin";
}

/* ---- the handler ----------------------------------------------------------------- */

static void release_client(void *ctx, vcuda_conn *c);

static int h2d(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    int last = !(q->hdr.flags & VCUDA_FLAG_MORE);
    CUstream s;
    if (!cl->copy_error) {
        CUresult rc = 0;
        if (stream_of(cl, q->v[1], &s))
            cl->copy_error = 400, snprintf(cl->copy_msg, sizeof cl->copy_msg, "MEMCPY_H2D: unknown stream");
        else if (!find_range(cl, q->v[0], q->blob_len))
            cl->copy_error = 1, snprintf(cl->copy_msg, sizeof cl->copy_msg,
                                         "MEMCPY_H2D: [0x%llx, +%u) is not inside an allocation of this client",
                                         (unsigned long long)q->v[0], q->blob_len);
        else if (q->blob_len && ((rc = wait_for(g, s)) || (rc = g->cu.cuMemcpyHtoD_v2(q->v[0], q->blob, q->blob_len))))
            cl->copy_error = rc, snprintf(cl->copy_msg, sizeof cl->copy_msg, "MEMCPY_H2D: %s (CUresult %d)",
                                          cu_error_text(g, rc), rc);
        if (rc && context_lost(rc)) reply_cu(g, cl, r, "MEMCPY_H2D", rc);
    }
    if (!last) return 0;
    if (cl->copy_error) {
        memcpy(cl->msg, cl->copy_msg, sizeof cl->copy_msg);
        vcuda_reply_error(r, cl->copy_error, cl->msg);
        cl->copy_error = 0;
    }
    return 0;
}

/* D2H in chunks through two pinned buffers: the copy of chunk k+1 runs while chunk k
 * is on the wire. */
static int d2h(vcuda_gpu *g, vcuda_conn *c, client *cl, const vcuda_msg *q, vcuda_msg *r, char *why)
{
    uint64_t src = q->v[0], size = q->v[1];
    CUstream s;
    CUresult rc;
    if (stream_of(cl, q->v[2], &s)) return reply_invalid(cl, r, 400, "MEMCPY_D2H: unknown stream");
    if (!find_range(cl, src, size))
        return reply_invalid(cl, r, 1, "MEMCPY_D2H: [0x%llx, +%llu) is not inside an allocation of this client",
                             (unsigned long long)src, (unsigned long long)size);
    if ((rc = wait_for(g, s))) return reply_cu(g, cl, r, "MEMCPY_D2H", rc);
    if (size == 0) return r->blob = NULL, r->blob_len = 0, 0;
    uint64_t off = 0, n0 = size < g->chunk ? size : g->chunk;
    if ((rc = g->cu.cuMemcpyDtoHAsync_v2(g->pinned[0], src, n0, g->copy_stream)))
        return reply_cu(g, cl, r, "MEMCPY_D2H", rc);
    for (int k = 0;; k ^= 1) {
        uint64_t n = size - off < g->chunk ? size - off : g->chunk;
        if ((rc = g->cu.cuStreamSynchronize(g->copy_stream))) return reply_cu(g, cl, r, "MEMCPY_D2H", rc);
        uint64_t next = off + n, nn = size - next < g->chunk ? size - next : g->chunk;
        if (next < size && (rc = g->cu.cuMemcpyDtoHAsync_v2(g->pinned[k ^ 1], src + next, nn, g->copy_stream)))
            return reply_cu(g, cl, r, "MEMCPY_D2H", rc); /* chunks sent so far end with this error */
        r->blob = g->pinned[k], r->blob_len = (uint32_t)n;
        if (next == size) return 0; /* the loop sends this last chunk as the reply */
        if (vcuda_send_more(c, q, r, why)) {
            g->cu.cuStreamSynchronize(g->copy_stream); /* nothing in flight into a buffer reused later */
            return -1;
        }
        memset(r, 0, sizeof *r);
        off = next;
    }
}

static int launch(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    handle *h = find_handle(cl, q->v[0], H_FUNCTION);
    CUstream s;
    static _Alignas(PARAM_ALIGN) uint8_t packed[VCUDA_MAX_PARAMS * PARAM_ALIGN + VCUDA_MAX_PARAM_BYTES];
    void *params[VCUDA_MAX_PARAMS];
    if (!h) return reply_invalid(cl, r, 98 /* cudaErrorInvalidDeviceFunction */, "LAUNCH: unknown function handle");
    if (stream_of(cl, q->v[8], &s)) return reply_invalid(cl, r, 400, "LAUNCH: unknown stream");
    const function_info *fi = h->obj;
    /* the sizes must be the kernel's own: the client packed by the same table */
    if (q->nsizes != fi->n || memcmp(q->sizes, fi->sizes, fi->n * sizeof *fi->sizes))
        return reply_invalid(cl, r, 1, "LAUNCH: %u arguments given, the kernel takes %u (or their sizes differ)",
                             q->nsizes, fi->n);
    size_t at = 0, from = 0;
    for (uint32_t i = 0; i < fi->n; ++i) {
        params[i] = packed + at;
        memcpy(packed + at, q->blob + from, fi->sizes[i]);
        from += fi->sizes[i];
        at += (fi->sizes[i] + PARAM_ALIGN - 1) / PARAM_ALIGN * PARAM_ALIGN;
    }
    CUresult rc = q->hdr.opcode == VCUDA_OP_LAUNCH_COOPERATIVE
        ? g->cu.cuLaunchCooperativeKernel(fi->f, (unsigned)q->v[1], (unsigned)q->v[2], (unsigned)q->v[3],
                                          (unsigned)q->v[4], (unsigned)q->v[5], (unsigned)q->v[6],
                                          (unsigned)q->v[7], s, fi->n ? params : NULL)
        : g->cu.cuLaunchKernel(fi->f, (unsigned)q->v[1], (unsigned)q->v[2], (unsigned)q->v[3],
                               (unsigned)q->v[4], (unsigned)q->v[5], (unsigned)q->v[6],
                               (unsigned)q->v[7], s, fi->n ? params : NULL, NULL);
    return rc ? reply_cu(g, cl, r, vcuda_opcode_name(q->hdr.opcode), rc) : 0;
}

static int function_get(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    handle *mh = find_handle(cl, q->v[0], H_MODULE);
    char name[VCUDA_MAX_STRING + 1];
    CUfunction f;
    CUresult rc;
    if (!mh) return reply_invalid(cl, r, 400, "FUNCTION_GET: unknown module handle");
    memcpy(name, q->str, q->str_len), name[q->str_len] = 0;
    if ((rc = g->cu.cuModuleGetFunction(&f, ((cached_module *)mh->obj)->mod, name)))
        return reply_cu(g, cl, r, "FUNCTION_GET", rc);
    function_info *fi = calloc(1, sizeof *fi);
    if (!fi) return reply_invalid(cl, r, 2, "FUNCTION_GET: server out of memory");
    fi->f = f;
    for (;;) {
        size_t off, size;
        rc = g->cu.cuFuncGetParamInfo(f, fi->n, &off, &size);
        if (rc == CU_INVALID_VALUE) break; /* past the last parameter */
        if (rc) {
            free(fi);
            return reply_cu(g, cl, r, "FUNCTION_GET (cuFuncGetParamInfo)", rc);
        }
        if (fi->n == VCUDA_MAX_PARAMS || size < 1 || size > VCUDA_MAX_PARAM_BYTES) {
            free(fi);
            return reply_invalid(cl, r, 1, "FUNCTION_GET: %s has a parameter layout vcuda cannot carry", name);
        }
        fi->sizes[fi->n++] = (uint32_t)size;
    }
    uint64_t id = add_handle(cl, H_FUNCTION, fi);
    if (!id) {
        free(fi);
        return reply_invalid(cl, r, 2, "FUNCTION_GET: handle limit reached");
    }
    r->v[0] = id, r->nv = 1;
    r->nsizes = fi->n;
    memcpy(r->sizes, fi->sizes, fi->n * sizeof *fi->sizes);
    return 0;
}

static int module(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    cached_module *m = cache_find(g, q->hash);
    if (q->hdr.opcode == VCUDA_OP_MODULE_LOOKUP && !m)
        return reply_invalid(cl, r, CU_NOT_FOUND, "MODULE_LOOKUP: not cached; send MODULE_LOAD");
    if (!m) {
        uint8_t h[VCUDA_HASH_SIZE];
        const char *bad = image_problem(q->blob, q->blob_len);
        CUmodule mod;
        CUresult rc;
        if (bad) return reply_invalid(cl, r, 200 /* cudaErrorInvalidKernelImage */, "MODULE_LOAD: %s", bad);
        vcuda_sha256(q->blob, q->blob_len, h);
        if (memcmp(h, q->hash, VCUDA_HASH_SIZE))
            return reply_invalid(cl, r, 1, "MODULE_LOAD: the image does not hash to the name sent");
        if (g->nmodules == MAX_MODULES)
            return reply_invalid(cl, r, 2, "MODULE_LOAD: module cache full (%d images)", MAX_MODULES);
        if ((rc = g->cu.cuModuleLoadData(&mod, q->blob))) return reply_cu(g, cl, r, "MODULE_LOAD", rc);
        m = &g->modules[g->nmodules++];
        memcpy(m->hash, h, VCUDA_HASH_SIZE);
        m->mod = mod;
    }
    uint64_t id = add_handle(cl, H_MODULE, m);
    if (!id) return reply_invalid(cl, r, 2, "MODULE: handle limit reached");
    r->v[0] = id, r->nv = 1;
    return 0;
}

static int properties(vcuda_gpu *g, client *cl, vcuda_msg *r)
{
    /* name, total, smem/block, L2, major, minor, SMs, warp, threads/block, clock,
     * memory clock, bus width -- the order of the reply layout */
    static const int attrs[] = {8, 38, 75, 76, 16, 10, 1, 13, 36, 37};
    size_t total;
    CUresult rc;
    if ((rc = g->cu.cuDeviceTotalMem_v2(&total, g->dev))) return reply_cu(g, cl, r, "GET_DEVICE_PROPERTIES", rc);
    r->str = (const uint8_t *)g->name, r->str_len = (uint32_t)strlen(g->name);
    r->v[0] = total, r->nv = 1;
    for (size_t i = 0; i < sizeof attrs / sizeof *attrs; ++i) {
        int v = 0;
        if ((rc = g->cu.cuDeviceGetAttribute(&v, attrs[i], g->dev)))
            return reply_cu(g, cl, r, "GET_DEVICE_PROPERTIES", rc);
        r->v[r->nv++] = i < 2 ? (uint64_t)(unsigned)v : (uint64_t)(int64_t)v;
    }
    return 0;
}

static int more_requests(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r);

static int handle_core(void *ctx, vcuda_conn *c, const vcuda_msg *q, vcuda_msg *r, char *why)
{
    vcuda_gpu *g = ctx;
    client *cl = c->user;
    CUresult rc = 0;
    CUstream s;
    handle *h;
    if (!cl && !(cl = c->user = calloc(1, sizeof *cl))) {
        vcuda_fail(why, 0, "no memory for client state");
        return -1;
    }
    /* An asynchronous launch failed since the last reply: like CUDA's asynchronous
     * errors, the next call that returns a status reports it, and is not carried out
     * (an H2D copy takes it over as its copy error, so its chunks are skipped too). */
    if (cl->launch_error && !(q->hdr.flags & VCUDA_FLAG_NOREPLY)) {
        int code = cl->launch_error;
        cl->launch_error = 0;
        if (q->hdr.opcode == VCUDA_OP_MEMCPY_H2D) {
            if (!cl->copy_error) cl->copy_error = code, memcpy(cl->copy_msg, cl->launch_msg, sizeof cl->copy_msg);
        } else {
            memcpy(cl->msg, cl->launch_msg, sizeof cl->msg);
            vcuda_reply_error(r, code, cl->msg);
            return 0;
        }
    }
    switch (q->hdr.opcode) {
    case VCUDA_OP_GET_DEVICE_COUNT: r->v[0] = 1, r->nv = 1; return 0; /* one GPU per server */
    case VCUDA_OP_SET_DEVICE:
        return q->v[0] == 0 ? 0 : reply_invalid(cl, r, 101, "SET_DEVICE: a server exports device 0 only");
    case VCUDA_OP_GET_DEVICE: r->v[0] = 0, r->nv = 1; return 0;
    case VCUDA_OP_GET_DEVICE_PROPERTIES:
        if (q->v[0] != 0) return reply_invalid(cl, r, 101, "GET_DEVICE_PROPERTIES: device 0 only");
        return properties(g, cl, r);
    case VCUDA_OP_DEVICE_GET_ATTRIBUTE: {
        int v = 0;
        if ((rc = g->cu.cuDeviceGetAttribute(&v, (int)q->v[0], g->dev))) return reply_cu(g, cl, r, "DEVICE_GET_ATTRIBUTE", rc);
        r->v[0] = (uint64_t)(int64_t)v, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_MEM_GET_INFO: {
        size_t fr, tot;
        if ((rc = g->cu.cuMemGetInfo_v2(&fr, &tot))) return reply_cu(g, cl, r, "MEM_GET_INFO", rc);
        r->v[0] = fr, r->v[1] = tot, r->nv = 2;
        return 0;
    }
    case VCUDA_OP_TOUCH: {
        uint32_t word;
        return (rc = g->cu.cuMemcpyDtoH_v2(&word, g->touch, sizeof word)) ? reply_cu(g, cl, r, "TOUCH", rc) : 0;
    }
    case VCUDA_OP_DRIVER_GET_VERSION: {
        int v = 0;
        if ((rc = g->cu.cuDriverGetVersion(&v))) return reply_cu(g, cl, r, "DRIVER_GET_VERSION", rc);
        r->v[0] = (uint64_t)v, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_DEVICE_SYNCHRONIZE:
        return (rc = g->cu.cuCtxSynchronize()) ? reply_cu(g, cl, r, "DEVICE_SYNCHRONIZE", rc) : 0;
    case VCUDA_OP_DEVICE_RESET: {
        /* this client's memory, streams and events (the shared context stays) */
        release_client(g, c);
        return (c->user = calloc(1, sizeof(client))) ? 0 : (vcuda_fail(why, 0, "no memory for client state"), -1);
    }
    case VCUDA_OP_MALLOC: {
        CUdeviceptr p;
        if (q->v[0] == 0) return reply_invalid(cl, r, 1, "MALLOC: size 0");
        if (grow((void **)&cl->allocs, &cl->cap_alloc, cl->nalloc + 1, sizeof(allocation), MAX_ALLOCS))
            return reply_invalid(cl, r, 2, "MALLOC: allocation limit reached");
        if ((rc = g->cu.cuMemAlloc_v2(&p, q->v[0]))) return reply_cu(g, cl, r, "MALLOC", rc);
        cl->allocs[cl->nalloc++] = (allocation){p, q->v[0]};
        r->v[0] = p, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_FREE:
        for (uint32_t i = 0; i < cl->nalloc; ++i)
            if (cl->allocs[i].base == q->v[0]) {
                if ((rc = g->cu.cuMemFree_v2(q->v[0]))) return reply_cu(g, cl, r, "FREE", rc);
                cl->allocs[i] = cl->allocs[--cl->nalloc];
                return 0;
            }
        return reply_invalid(cl, r, 1, "FREE: 0x%llx is not an allocation of this client", (unsigned long long)q->v[0]);
    case VCUDA_OP_MEMCPY_H2D: return h2d(g, cl, q, r);
    case VCUDA_OP_MEMCPY_D2H: return d2h(g, c, cl, q, r, why);
    case VCUDA_OP_MEMCPY_D2D:
        if (stream_of(cl, q->v[3], &s)) return reply_invalid(cl, r, 400, "MEMCPY_D2D: unknown stream");
        if (!find_range(cl, q->v[0], q->v[2]) || !find_range(cl, q->v[1], q->v[2]))
            return reply_invalid(cl, r, 1, "MEMCPY_D2D: a range is not inside an allocation of this client");
        if (q->v[2] && ((rc = wait_for(g, s)) || (rc = g->cu.cuMemcpyDtoD_v2(q->v[0], q->v[1], q->v[2]))))
            return reply_cu(g, cl, r, "MEMCPY_D2D", rc);
        return 0;
    case VCUDA_OP_MEMSET:
        if (stream_of(cl, q->v[3], &s)) return reply_invalid(cl, r, 400, "MEMSET: unknown stream");
        if (!find_range(cl, q->v[0], q->v[2]))
            return reply_invalid(cl, r, 1, "MEMSET: the range is not inside an allocation of this client");
        if (q->v[2] && ((rc = wait_for(g, s)) ||
                        (rc = g->cu.cuMemsetD8_v2(q->v[0], (unsigned char)q->v[1], q->v[2]))))
            return reply_cu(g, cl, r, "MEMSET", rc);
        return 0;
    case VCUDA_OP_STREAM_CREATE:
    case VCUDA_OP_EVENT_CREATE: {
        int is_stream = q->hdr.opcode == VCUDA_OP_STREAM_CREATE;
        /* streams: default or non-blocking; events: default, blocking-sync, no-timing
         * (interprocess events would hand out a server IPC handle: refused) */
        if (q->v[0] & ~(uint64_t)(is_stream ? 1 : 3))
            return reply_invalid(cl, r, 1, "%s: flags 0x%llx not supported", is_stream ? "STREAM_CREATE" : "EVENT_CREATE",
                                 (unsigned long long)q->v[0]);
        void *o;
        rc = is_stream ? g->cu.cuStreamCreate((CUstream *)&o, (unsigned)q->v[0])
                       : g->cu.cuEventCreate((CUevent *)&o, (unsigned)q->v[0]);
        if (rc) return reply_cu(g, cl, r, is_stream ? "STREAM_CREATE" : "EVENT_CREATE", rc);
        uint64_t id = add_handle(cl, is_stream ? H_STREAM : H_EVENT, o);
        if (!id) {
            is_stream ? g->cu.cuStreamDestroy_v2(o) : g->cu.cuEventDestroy_v2(o);
            return reply_invalid(cl, r, 2, "handle limit reached");
        }
        r->v[0] = id, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_STREAM_DESTROY:
        if (!(h = find_handle(cl, q->v[0], H_STREAM))) return reply_invalid(cl, r, 400, "STREAM_DESTROY: unknown stream");
        rc = g->cu.cuStreamDestroy_v2(h->obj);
        remove_handle(cl, h);
        return rc ? reply_cu(g, cl, r, "STREAM_DESTROY", rc) : 0;
    case VCUDA_OP_STREAM_SYNCHRONIZE:
        if (stream_of(cl, q->v[0], &s)) return reply_invalid(cl, r, 400, "STREAM_SYNCHRONIZE: unknown stream");
        return (rc = wait_for(g, s)) ? reply_cu(g, cl, r, "STREAM_SYNCHRONIZE", rc) : 0;
    case VCUDA_OP_EVENT_DESTROY:
        if (!(h = find_handle(cl, q->v[0], H_EVENT))) return reply_invalid(cl, r, 400, "EVENT_DESTROY: unknown event");
        rc = g->cu.cuEventDestroy_v2(h->obj);
        remove_handle(cl, h);
        return rc ? reply_cu(g, cl, r, "EVENT_DESTROY", rc) : 0;
    case VCUDA_OP_EVENT_RECORD:
        if (!(h = find_handle(cl, q->v[0], H_EVENT)) || stream_of(cl, q->v[1], &s))
            return reply_invalid(cl, r, 400, "EVENT_RECORD: unknown event or stream");
        return (rc = g->cu.cuEventRecord(h->obj, s)) ? reply_cu(g, cl, r, "EVENT_RECORD", rc) : 0;
    case VCUDA_OP_EVENT_SYNCHRONIZE:
        if (!(h = find_handle(cl, q->v[0], H_EVENT))) return reply_invalid(cl, r, 400, "EVENT_SYNCHRONIZE: unknown event");
        return (rc = g->cu.cuEventSynchronize(h->obj)) ? reply_cu(g, cl, r, "EVENT_SYNCHRONIZE", rc) : 0;
    case VCUDA_OP_EVENT_ELAPSED: {
        handle *a = find_handle(cl, q->v[0], H_EVENT), *b = find_handle(cl, q->v[1], H_EVENT);
        float ms = 0;
        if (!a || !b) return reply_invalid(cl, r, 400, "EVENT_ELAPSED: unknown event");
        if ((rc = g->cu.cuEventElapsedTime(&ms, a->obj, b->obj))) return reply_cu(g, cl, r, "EVENT_ELAPSED", rc);
        uint32_t bits;
        memcpy(&bits, &ms, sizeof bits);
        r->v[0] = bits, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_MODULE_LOOKUP:
    case VCUDA_OP_MODULE_LOAD: return module(g, cl, q, r);
    case VCUDA_OP_MODULE_UNLOAD: /* the image stays cached for the next client */
        if (!(h = find_handle(cl, q->v[0], H_MODULE))) return reply_invalid(cl, r, 400, "MODULE_UNLOAD: unknown module");
        remove_handle(cl, h);
        return 0;
    case VCUDA_OP_FUNCTION_GET: return function_get(g, cl, q, r);
    case VCUDA_OP_LAUNCH:
        launch(g, cl, q, r);
        if ((q->hdr.flags & VCUDA_FLAG_NOREPLY) && (r->hdr.flags & VCUDA_FLAG_ERROR) && !cl->launch_error) {
            /* nobody waits for this reply: the client's next call gets the error */
            cl->launch_error = (int)r->v[0];
            snprintf(cl->launch_msg, sizeof cl->launch_msg, "an earlier kernel launch failed: %.280s", cl->msg);
        }
        return 0;
    default: return more_requests(g, cl, q, r);
    }
}

/* ---- device printf ---------------------------------------------------------------- */

#define OUT_MAX (64u << 20) /* output kept for a client that does not synchronize */

/* Moves what the pipe holds into g->out (out_mu held). */
static void drain_locked(vcuda_gpu *g)
{
    char buf[65536];
    ssize_t n;
    while ((n = read(g->out_fd, buf, sizeof buf)) > 0) {
        size_t keep = g->out_len + (size_t)n > OUT_MAX ? OUT_MAX - g->out_len : (size_t)n;
        char *q = keep ? realloc(g->out, g->out_len + keep) : g->out;
        if (!q) keep = 0;
        else g->out = q;
        memcpy(g->out + g->out_len, buf, keep);
        g->out_len += keep;
        g->out_dropped += (size_t)n - keep;
    }
}

/* The driver writes device printf output while a synchronizing call runs; fflush
 * pushes what stdio holds, the drain takes it, so the reply to that call says so. */
static void drain_output(vcuda_gpu *g)
{
    fflush(stdout);
    pthread_mutex_lock(&g->out_mu);
    drain_locked(g);
    pthread_mutex_unlock(&g->out_mu);
}

/* Between requests nobody drains: a kernel printing more than the pipe holds would
 * block the driver, so this thread empties it whenever it has data. */
static void *out_reader(void *arg)
{
    vcuda_gpu *g = arg;
    struct pollfd p = {g->out_fd, POLLIN, 0};
    while (!*g->stop) {
        if (poll(&p, 1, 200) > 0) {
            pthread_mutex_lock(&g->out_mu);
            drain_locked(g);
            pthread_mutex_unlock(&g->out_mu);
            if (p.revents & (POLLHUP | POLLERR)) break;
        }
    }
    return NULL;
}

static int printf_fetch(vcuda_gpu *g, client *cl, vcuda_msg *r)
{
    static char *sent; /* the reply's bytes, alive until the next fetch */
    pthread_mutex_lock(&g->out_mu);
    if (g->out_dropped) {
        char note[96];
        int n = snprintf(note, sizeof note, "\n[vcuda-server: %zu bytes of device printf output dropped]\n",
                         g->out_dropped);
        char *q = realloc(g->out, g->out_len + (size_t)n);
        if (q) memcpy(q + g->out_len, note, (size_t)n), g->out = q, g->out_len += (size_t)n, g->out_dropped = 0;
    }
    size_t n = g->out_len < g->chunk ? g->out_len : g->chunk;
    char *b = realloc(sent, n ? n : 1);
    if (b) {
        sent = b;
        memcpy(sent, g->out, n);
        memmove(g->out, g->out + n, g->out_len - n);
        g->out_len -= n;
    }
    pthread_mutex_unlock(&g->out_mu);
    if (!b) return reply_invalid(cl, r, 2, "PRINTF_FETCH: server out of memory");
    r->blob = (const uint8_t *)sent, r->blob_len = (uint32_t)n;
    return 0;
}

static int synchronizes(unsigned op)
{
    return op == VCUDA_OP_DEVICE_SYNCHRONIZE || op == VCUDA_OP_STREAM_SYNCHRONIZE || op == VCUDA_OP_EVENT_SYNCHRONIZE ||
           op == VCUDA_OP_MEMCPY_D2H || op == VCUDA_OP_EVENT_QUERY || op == VCUDA_OP_STREAM_QUERY ||
           op == VCUDA_OP_DEVICE_RESET;
}

static int handle_request(void *ctx, vcuda_conn *c, const vcuda_msg *q, vcuda_msg *r, char *why)
{
    vcuda_gpu *g = ctx;
    int rc = handle_core(ctx, c, q, r, why);
    if (g->out_fd >= 0) {
        if (synchronizes(q->hdr.opcode)) drain_output(g);
        pthread_mutex_lock(&g->out_mu);
        if (g->out_len || g->out_dropped) r->hdr.flags |= VCUDA_FLAG_OUTPUT;
        pthread_mutex_unlock(&g->out_mu);
    }
    return rc;
}

/* ---- the calls added for whole programs (wire codes 33..) ------------------------- */

static int more_requests(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    const char *op = vcuda_opcode_name(q->hdr.opcode);
    CUresult rc = 0;
    CUstream s;
    handle *h, *e;
    switch (q->hdr.opcode) {
    case VCUDA_OP_EVENT_QUERY:
        if (!(h = find_handle(cl, q->v[0], H_EVENT))) return reply_invalid(cl, r, 400, "EVENT_QUERY: unknown event");
        return (rc = g->cu.cuEventQuery(h->obj)) ? reply_cu(g, cl, r, op, rc) : 0;
    case VCUDA_OP_STREAM_QUERY:
        if (stream_of(cl, q->v[0], &s)) return reply_invalid(cl, r, 400, "STREAM_QUERY: unknown stream");
        return (rc = g->cu.cuStreamQuery(s)) ? reply_cu(g, cl, r, op, rc) : 0;
    case VCUDA_OP_STREAM_WAIT_EVENT:
        if (stream_of(cl, q->v[0], &s) || !(e = find_handle(cl, q->v[1], H_EVENT)))
            return reply_invalid(cl, r, 400, "STREAM_WAIT_EVENT: unknown stream or event");
        if (q->v[2] & ~(uint64_t)1) return reply_invalid(cl, r, 1, "STREAM_WAIT_EVENT: flags 0x%llx", (unsigned long long)q->v[2]);
        return (rc = g->cu.cuStreamWaitEvent(s, e->obj, 0)) ? reply_cu(g, cl, r, op, rc) : 0;
    case VCUDA_OP_STREAM_CREATE_PRIORITY: {
        CUstream o;
        if (q->v[0] & ~(uint64_t)1) return reply_invalid(cl, r, 1, "STREAM_CREATE_PRIORITY: flags 0x%llx", (unsigned long long)q->v[0]);
        if ((rc = g->cu.cuStreamCreateWithPriority(&o, (unsigned)q->v[0], (int)(int64_t)q->v[1])))
            return reply_cu(g, cl, r, op, rc);
        uint64_t id = add_handle(cl, H_STREAM, o);
        if (!id) return g->cu.cuStreamDestroy_v2(o), reply_invalid(cl, r, 2, "handle limit reached");
        r->v[0] = id, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_STREAM_PRIORITY_RANGE: {
        int least = 0, greatest = 0;
        if ((rc = g->cu.cuCtxGetStreamPriorityRange(&least, &greatest))) return reply_cu(g, cl, r, op, rc);
        r->v[0] = (uint64_t)(int64_t)least, r->v[1] = (uint64_t)(int64_t)greatest, r->nv = 2;
        return 0;
    }
    case VCUDA_OP_LIMIT_SET:
        /* the context is shared by the server's clients: a limit set is set for all */
        return (rc = g->cu.cuCtxSetLimit((int)q->v[0], q->v[1])) ? reply_cu(g, cl, r, op, rc) : 0;
    case VCUDA_OP_LIMIT_GET: {
        size_t v = 0;
        if ((rc = g->cu.cuCtxGetLimit(&v, (int)q->v[0]))) return reply_cu(g, cl, r, op, rc);
        r->v[0] = v, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_FUNC_ATTRIBUTES:
        if (!(h = find_handle(cl, q->v[0], H_FUNCTION))) return reply_invalid(cl, r, 98, "FUNC_ATTRIBUTES: unknown function");
        for (int a = 0; a < 16; ++a) {
            int v = 0;
            /* attributes a driver does not know (cluster ones on old GPUs) read as 0 */
            if ((rc = g->cu.cuFuncGetAttribute(&v, a, ((function_info *)h->obj)->f)) && rc != CU_INVALID_VALUE)
                return reply_cu(g, cl, r, op, rc);
            r->v[r->nv++] = (uint64_t)(int64_t)(rc ? 0 : v);
        }
        return 0;
    case VCUDA_OP_FUNC_SET_ATTRIBUTE:
        if (!(h = find_handle(cl, q->v[0], H_FUNCTION))) return reply_invalid(cl, r, 98, "FUNC_SET_ATTRIBUTE: unknown function");
        return (rc = g->cu.cuFuncSetAttribute(((function_info *)h->obj)->f, (int)(int64_t)q->v[1], (int)(int64_t)q->v[2]))
                   ? reply_cu(g, cl, r, op, rc) : 0;
    case VCUDA_OP_OCCUPANCY_BLOCKS: {
        int n = 0;
        if (!(h = find_handle(cl, q->v[0], H_FUNCTION))) return reply_invalid(cl, r, 98, "OCCUPANCY_BLOCKS: unknown function");
        if ((rc = g->cu.cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&n, ((function_info *)h->obj)->f, (int)q->v[1],
                                                                            q->v[2], (unsigned)q->v[3])))
            return reply_cu(g, cl, r, op, rc);
        r->v[0] = (uint64_t)(int64_t)n, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_OCCUPANCY_DYNAMIC_SMEM: {
        size_t n = 0;
        if (!(h = find_handle(cl, q->v[0], H_FUNCTION))) return reply_invalid(cl, r, 98, "OCCUPANCY_DYNAMIC_SMEM: unknown function");
        if ((rc = g->cu.cuOccupancyAvailableDynamicSMemPerBlock(&n, ((function_info *)h->obj)->f, (int)q->v[1], (int)q->v[2])))
            return reply_cu(g, cl, r, op, rc);
        r->v[0] = n, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_MODULE_GLOBAL: {
        char name[VCUDA_MAX_STRING + 1];
        CUdeviceptr p;
        size_t size;
        if (!(h = find_handle(cl, q->v[0], H_MODULE))) return reply_invalid(cl, r, 400, "MODULE_GLOBAL: unknown module");
        memcpy(name, q->str, q->str_len), name[q->str_len] = 0;
        if ((rc = g->cu.cuModuleGetGlobal_v2(&p, &size, ((cached_module *)h->obj)->mod, name)))
            return reply_cu(g, cl, r, op, rc);
        if (!in_table(cl->globals, cl->nglobal, p, size)) {
            if (grow((void **)&cl->globals, &cl->cap_global, cl->nglobal + 1, sizeof(allocation), MAX_HANDLES))
                return reply_invalid(cl, r, 2, "MODULE_GLOBAL: limit reached");
            cl->globals[cl->nglobal++] = (allocation){p, size};
        }
        r->v[0] = p, r->v[1] = size, r->nv = 2;
        return 0;
    }
    case VCUDA_OP_LAUNCH_COOPERATIVE: return launch(g, cl, q, r);
    case VCUDA_OP_MALLOC_PITCH: {
        CUdeviceptr p;
        size_t pitch;
        if (!q->v[0] || !q->v[1]) return reply_invalid(cl, r, 1, "MALLOC_PITCH: empty extent");
        if (grow((void **)&cl->allocs, &cl->cap_alloc, cl->nalloc + 1, sizeof(allocation), MAX_ALLOCS))
            return reply_invalid(cl, r, 2, "MALLOC_PITCH: allocation limit reached");
        /* element size 16: the runtime's own choice for cudaMallocPitch */
        if ((rc = g->cu.cuMemAllocPitch_v2(&p, &pitch, q->v[0], q->v[1], 16))) return reply_cu(g, cl, r, op, rc);
        cl->allocs[cl->nalloc++] = (allocation){p, (uint64_t)pitch * q->v[1]};
        r->v[0] = p, r->v[1] = pitch, r->nv = 2;
        return 0;
    }
    case VCUDA_OP_MEMSET_2D: {
        uint64_t dst = q->v[0], pitch = q->v[1], w = q->v[3], ht = q->v[4];
        if (stream_of(cl, q->v[5], &s)) return reply_invalid(cl, r, 400, "MEMSET_2D: unknown stream");
        if (!w || !ht) return 0;
        if (w > pitch || (ht - 1) > (VCUDA_MAX_SIZE / pitch) || !find_range(cl, dst, (ht - 1) * pitch + w))
            return reply_invalid(cl, r, 1, "MEMSET_2D: the rows are not inside an allocation of this client");
        if ((rc = wait_for(g, s)) || (rc = g->cu.cuMemsetD2D8_v2(dst, pitch, (unsigned char)q->v[2], w, ht)))
            return reply_cu(g, cl, r, op, rc);
        return 0;
    }
    case VCUDA_OP_PRINTF_FETCH: return printf_fetch(g, cl, r);
    default:
        return reply_invalid(cl, r, 801, "%s is not served by vcuda-server", op);
    }
}

static void release_client(void *ctx, vcuda_conn *c)
{
    vcuda_gpu *g = ctx;
    client *cl = c->user;
    if (!cl) return;
    /* work the client queued may still use its memory: drain before freeing */
    g->cu.cuCtxSynchronize();
    for (uint32_t i = 0; i < cl->nalloc; ++i) g->cu.cuMemFree_v2(cl->allocs[i].base);
    for (uint32_t i = 0; i < cl->nhandle; ++i) {
        handle *h = &cl->handles[i];
        if (h->kind == H_STREAM) g->cu.cuStreamDestroy_v2(h->obj);
        else if (h->kind == H_EVENT) g->cu.cuEventDestroy_v2(h->obj);
        else if (h->kind == H_FUNCTION) free(h->obj);
    }
    if (cl->nalloc || cl->nhandle)
        fprintf(stderr, "vcuda-server: connection %llu: released %u allocations and %u handles\n",
                (unsigned long long)c->id, cl->nalloc, cl->nhandle);
    free(cl->allocs);
    free(cl->handles);
    free(cl->globals);
    free(cl);
    c->user = NULL;
}

struct vcuda_handler vcuda_gpu_handler(vcuda_gpu *g)
{
    struct vcuda_handler h = {g, handle_request, release_client};
    return h;
}

/* stdout becomes the printf pipe (the server logs on stderr).  Without it, device
 * printf output stays in the server's stdout, as before, and the server says so. */
static void capture_output(vcuda_gpu *g)
{
    int fds[2];
    fflush(stdout);
    if (pipe(fds)) {
        fprintf(stderr, "vcuda-server: device printf stays on the server's stdout (pipe: %s)\n", strerror(errno));
        return;
    }
#ifdef F_SETPIPE_SZ
    fcntl(fds[1], F_SETPIPE_SZ, 1 << 20); /* fewer wake-ups; the size is only a hint */
#endif
    fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    if (dup2(fds[1], STDOUT_FILENO) < 0) {
        fprintf(stderr, "vcuda-server: device printf stays on the server's stdout (dup2: %s)\n", strerror(errno));
        close(fds[0]), close(fds[1]);
        return;
    }
    close(fds[1]);
    g->out_fd = fds[0];
    pthread_mutex_init(&g->out_mu, NULL);
    if (pthread_create(&g->out_thread, NULL, out_reader, g)) {
        fprintf(stderr, "vcuda-server: device printf: no reader thread; output beyond the pipe's size waits\n");
        g->out_fd = -1; /* keep the pipe as stdout, drained by nobody: as without capture */
    }
}

vcuda_gpu *vcuda_gpu_open(int ordinal, size_t chunk, volatile sig_atomic_t *stop, char *why)
{
    vcuda_gpu *g = calloc(1, sizeof *g);
    CUresult rc;
    int n = 0;
    if (!g) return vcuda_fail(why, 0, "out of memory"), NULL;
    g->ordinal = ordinal, g->chunk = chunk, g->stop = stop, g->out_fd = -1;
    if (!(g->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL))) {
        vcuda_fail(why, 0, "no CUDA driver (libcuda.so.1: %s)", dlerror());
        free(g);
        return NULL;
    }
#define RESOLVE(name, ret, args) *(void **)&g->cu.name = dlsym(g->lib, #name);
    DRIVER_FUNCTIONS(RESOLVE)
#undef RESOLVE
    /* cuEventElapsedTime_v2 (CUDA 12.8+) is the same call where it exists */
    void *v2 = dlsym(g->lib, "cuEventElapsedTime_v2");
    if (v2) *(void **)&g->cu.cuEventElapsedTime = v2;
#define CHECK_RESOLVED(name, ret, args)                                                      \
    if (!g->cu.name) {                                                                       \
        vcuda_fail(why, 0, "the CUDA driver lacks %s%s", #name,                                    \
                !strcmp(#name, "cuFuncGetParamInfo") ? " (a CUDA 12.4 or newer driver is needed)" : ""); \
        goto fail;                                                                           \
    }
    DRIVER_FUNCTIONS(CHECK_RESOLVED)
#undef CHECK_RESOLVED
    if ((rc = g->cu.cuInit(0)) || (rc = g->cu.cuDeviceGetCount(&n)) || n == 0) {
        vcuda_fail(why, 0, "no usable GPU (cuInit/cuDeviceGetCount: CUresult %d, %d devices)", rc, n);
        goto fail;
    }
    if (ordinal >= n) {
        vcuda_fail(why, 0, "--device %d but this machine has %d GPU(s)", ordinal, n);
        goto fail;
    }
    if ((rc = g->cu.cuDeviceGet(&g->dev, ordinal)) || (rc = g->cu.cuDeviceGetName(g->name, sizeof g->name, g->dev)) ||
        (rc = g->cu.cuDevicePrimaryCtxRetain(&g->ctx, g->dev)) || (rc = g->cu.cuCtxSetCurrent(g->ctx)) ||
        (rc = g->cu.cuStreamCreate(&g->copy_stream, 1 /* non-blocking */)) ||
        (rc = g->cu.cuMemAllocHost_v2(&g->pinned[0], chunk)) || (rc = g->cu.cuMemAllocHost_v2(&g->pinned[1], chunk)) ||
        (rc = g->cu.cuMemAlloc_v2(&g->touch, 4)) || (rc = g->cu.cuMemsetD8_v2(g->touch, 0, 4))) {
        vcuda_fail(why, 0, "device %d: set-up failed: %s (CUresult %d)", ordinal, cu_error_text(g, rc), rc);
        goto fail;
    }
    capture_output(g);
    return g;
fail:
    dlclose(g->lib);
    free(g);
    return NULL;
}

void vcuda_gpu_close(vcuda_gpu *g)
{
    if (!g) return;
    if (g->out_fd >= 0) {
        *g->stop = 1;
        pthread_join(g->out_thread, NULL);
        close(g->out_fd);
        free(g->out);
    }
    g->cu.cuCtxSynchronize();
    g->cu.cuMemFreeHost(g->pinned[0]);
    g->cu.cuMemFreeHost(g->pinned[1]);
    g->cu.cuMemFree_v2(g->touch);
    g->cu.cuStreamDestroy_v2(g->copy_stream);
    g->cu.cuDevicePrimaryCtxRelease_v2(g->dev);
    dlclose(g->lib);
    free(g);
}

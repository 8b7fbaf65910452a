/* vcuda server GPU side (see server_gpu.h). */
#define _GNU_SOURCE
#include "vcuda/server_gpu.h"

#include "vcuda/image.h"
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
typedef void *CUgraph, *CUgraphNode, *CUgraphExec;
#include "driver_graph.h"
#include "driver_array.h"

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
    X(cuLaunchKernelEx, CUresult, (const launch_config *, CUfunction, void **, void **))     \
    X(cuMemAllocPitch_v2, CUresult, (CUdeviceptr *, size_t *, size_t, size_t, unsigned))     \
    X(cuMemsetD2D8Async, CUresult, (CUdeviceptr, size_t, unsigned char, size_t, size_t, CUstream))

/* What the multi-tenant design needs besides: stream-ordered copies on each client's
 * own streams, per-client module unloading, and a context per client (--isolation
 * context). */
#define TENANCY_FUNCTIONS(X)                                                                 \
    X(cuModuleUnload, CUresult, (CUmodule))                                                  \
    X(cuMemcpyHtoDAsync_v2, CUresult, (CUdeviceptr, const void *, size_t, CUstream))         \
    X(cuMemcpyDtoDAsync_v2, CUresult, (CUdeviceptr, CUdeviceptr, size_t, CUstream))          \
    X(cuMemsetD8Async, CUresult, (CUdeviceptr, unsigned char, size_t, CUstream))             \
    X(cuStreamWaitEvent, CUresult, (CUstream, CUevent, unsigned))                            \
    X(cuCtxCreate_v2, CUresult, (CUcontext *, unsigned, int))                                \
    X(cuCtxDestroy_v2, CUresult, (CUcontext))

/* Graphs built and run on the server (see "graphs" below). */
#define GRAPH_FUNCTIONS(X)                                                                   \
    X(cuGraphCreate, CUresult, (CUgraph *, unsigned))                                        \
    X(cuGraphDestroy, CUresult, (CUgraph))                                                   \
    X(cuGraphAddEmptyNode, CUresult, (CUgraphNode *, CUgraph, const CUgraphNode *, size_t))  \
    X(cuGraphAddKernelNode_v2, CUresult,                                                     \
      (CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const kernel_node_params *))     \
    X(cuGraphAddMemcpyNode, CUresult,                                                        \
      (CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const memcpy3d_params *, CUcontext)) \
    X(cuGraphAddMemsetNode, CUresult,                                                        \
      (CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const memset_node_params *, CUcontext)) \
    X(cuGraphInstantiateWithFlags, CUresult, (CUgraphExec *, CUgraph, unsigned long long))   \
    X(cuGraphLaunch, CUresult, (CUgraphExec, CUstream))                                      \
    X(cuGraphExecDestroy, CUresult, (CUgraphExec))                                           \
    X(cuGraphExecKernelNodeSetParams_v2, CUresult, (CUgraphExec, CUgraphNode, const kernel_node_params *))  \
    X(cuGraphAddNode_v2, CUresult,                                                           \
      (CUgraphNode *, CUgraph, const CUgraphNode *, const void *, size_t, graph_node_params *)) \
    X(cuGraphConditionalHandleCreate, CUresult,                                              \
      (unsigned long long *, CUgraph, CUcontext, unsigned, unsigned))                        \
    X(cuGraphAddMemAllocNode, CUresult,                                                      \
      (CUgraphNode *, CUgraph, const CUgraphNode *, size_t, mem_alloc_node_params *))        \
    X(cuGraphAddMemFreeNode, CUresult, (CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUdeviceptr)) \
    X(cuGraphAddDependencies_v2, CUresult,                                                   \
      (CUgraph, const CUgraphNode *, const CUgraphNode *, const void *, size_t))             \
    X(cuDeviceGetGraphMemAttribute, CUresult, (int, int, void *))                            \
    X(cuDeviceSetGraphMemAttribute, CUresult, (int, int, void *))                            \
    X(cuDeviceGraphMemTrim, CUresult, (int))

/* CUDA arrays, texture and surface objects (see "arrays" below). */
#define ARRAY_FUNCTIONS(X)                                                                   \
    X(cuArray3DCreate_v2, CUresult, (void **, const array3d_desc *))                         \
    X(cuArrayDestroy, CUresult, (void *))                                                    \
    X(cuMemcpy3DAsync_v2, CUresult, (const memcpy3d_params *, CUstream))                     \
    X(cuTexObjectCreate, CUresult,                                                           \
      (unsigned long long *, const resource_desc *, const texture_desc *, const view_desc *)) \
    X(cuTexObjectDestroy, CUresult, (unsigned long long))                                    \
    X(cuSurfObjectCreate, CUresult, (unsigned long long *, const resource_desc *))           \
    X(cuSurfObjectDestroy, CUresult, (unsigned long long))

/* cudaDeviceProp fields beyond attributes. */
#define PROPERTY_FUNCTIONS(X) X(cuDeviceGetUuid_v2, CUresult, (unsigned char *, int))

typedef struct {
#define DECLARE(name, ret, args) ret(*name) args;
    DRIVER_FUNCTIONS(DECLARE)
    TENANCY_FUNCTIONS(DECLARE)
    GRAPH_FUNCTIONS(DECLARE)
    ARRAY_FUNCTIONS(DECLARE)
    PROPERTY_FUNCTIONS(DECLARE)
#undef DECLARE
} driver;

enum { CU_INVALID_VALUE = 1, CU_NOT_FOUND = 500, CU_ATTR_PCI_BUS = 33, CU_ATTR_SMS = 16, CU_ATTR_THREADS_PER_SM = 39 };

/* The context limits (CUlimit) and what each makes the device reserve (see limit_set). */
enum {
    LIMIT_STACK = 0, LIMIT_PRINTF_FIFO, LIMIT_HEAP, LIMIT_SYNC_DEPTH, LIMIT_PENDING_LAUNCHES, LIMIT_L2_FETCH,
    LIMIT_L2_PERSISTING, NLIMITS
};
/* The limits a holder (a tenant on the shared context, a client on its own) changed: the
 * values they had before, to go back to, and the bytes charged for each. */
typedef struct {
    uint32_t set; /* bit per limit */
    size_t prev[NLIMITS];
    uint64_t charged[NLIMITS];
} limit_state;

/* Per-client limits: a client cannot make the server grow without bound (the
 * configurable ones are in vcuda_gpu_limits). */
#define MAX_ALLOCS (1u << 20)
#define MAX_HANDLES (limits.max_handles)
#define MAX_IMAGES 1024 /* cached module images (transfer savings only, never state) */
static vcuda_gpu_limits limits = VCUDA_GPU_LIMITS_DEFAULT;
#define PARAM_ALIGN 16
#define MSG_LEN 320 /* error texts sent back (driver messages are short) */

typedef enum { H_STREAM = 1, H_EVENT, H_MODULE, H_FUNCTION, H_GRAPH_EXEC, H_ARRAY, H_TEXTURE, H_SURFACE, H_GRAPH } handle_kind;
#define MAX_CLIENT_GRAPH_NODES (64u * VCUDA_MAX_GRAPH_NODES) /* in all of a client's graph execs */

typedef struct {
    CUfunction f;
    CUmodule owner; /* unloading the module removes its functions */
    uint32_t n;
    uint32_t sizes[VCUDA_MAX_PARAMS];
} function_info;

typedef struct {
    uint64_t id;
    handle_kind kind;
    void *obj; /* CUstream, CUevent, cached_module*, function_info*, graph_exec* */
    unsigned flags; /* streams: the client's flags (0: ordered with its default stream) */
    int retired;    /* streams: destroyed by the client with work still queued (reap_streams) */
} handle;

typedef struct {
    CUdeviceptr base;
    uint64_t size;
    CUmodule owner; /* a looked-up __device__ variable: the module it goes with (else NULL) */
    int graph;      /* made by a graph's allocation node (see "graph twins") */
} allocation;

/* One stream of a client's device output, and which stream goes where on the client. */
typedef struct {
    char *b;
    size_t len, dropped;
} outbuf;
enum { OUT_PRINTF, OUT_ASSERT };

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
    /* the client's own streams: its default stream (the legacy stream's stand-in) and
     * one for D2H staging and keep-alives, both non-blocking, so no other client's work
     * orders with them; join orders the default stream with the client's blocking ones */
    CUstream def, aux;
    CUevent join;
    void *pinned[2];
    uint64_t generation; /* the context generation this client attached to */
    int fatal;           /* a sticky error: the session ends after this reply */
    uint32_t graph_nodes; /* nodes in the client's graph execs */
    vcuda_tenant *tenant; /* whose quota this client's device memory counts against */
    uint64_t mem_bytes;   /* what it holds, charged to its tenant: given back when it goes */
    uint32_t nmodules;
    limit_state lims;     /* limits of its own context (--isolation context) */
    CUcontext own;     /* --isolation context: the client's own context (else NULL) */
    CUdeviceptr touch; /* the keep-alive's 4 bytes in that context */
    allocation *globals; /* __device__ variables the client looked up: copyable, not freeable */
    uint32_t nglobal, cap_global;
    /* device output attributed to this client (see "device printf"), out_mu held:
     * [OUT_PRINTF] device printf (the program's stdout), [OUT_ASSERT] device assertion
     * messages (its stderr) */
    outbuf out[2];
    char *sent;
} client;

/* A client's module: its own CUmodule, loaded from a cached image (so its __device__
 * and __constant__ state is its own), unloaded on MODULE_UNLOAD or disconnect. */
typedef struct {
    uint8_t hash[VCUDA_HASH_SIZE];
    CUmodule mod;
    uint64_t bytes; /* its data's device memory, charged (vcuda_image_footprint) */
} cached_module;

/* PTX variables whose size the image does not tell (vcuda_image_footprint): asked of
 * the driver once the module is loaded.  Their names, each ended by a NUL, one after
 * the other. */
#define MAX_UNSIZED 1024
typedef struct {
    char *names;
    size_t len;
    unsigned n;
    int overflow;
} unsized_names;

/* A validated image, kept so that a later client need not send it again, with what
 * its data takes (vcuda_image_footprint, read in the walk that validated it): a client
 * loading it from the cache is charged without the image being decompressed again. */
typedef struct {
    uint8_t hash[VCUDA_HASH_SIZE];
    uint8_t *img;
    size_t len;
    uint64_t bytes;
    unsized_names unsized;
    uint64_t last_use;
} image_entry;

struct vcuda_gpu {
    driver cu;
    void *lib;
    int ordinal, dev;
    CUcontext ctx;
    CUdeviceptr touch;    /* 4 bytes the keep-alive copies back */
    size_t chunk;
    pthread_mutex_t mu;   /* the image cache and the context's life below */
    image_entry images[MAX_IMAGES];
    int nimages;
    size_t image_bytes;
    uint64_t use_clock;
    uint64_t generation; /* bumped when a sticky error kills the context */
    int dead;            /* the CUresult that killed it */
    int attached;        /* clients on the context */
    volatile sig_atomic_t *stop;
    char name[256];
    int limit_busy;             /* LIMIT_SET on the shared context: no client attaches meanwhile */
    pthread_cond_t limit_done;
    /* the shared context's limits, set by one tenant (see limit_set): its connections on
     * the context, the values to restore when the last goes, what it is charged */
    vcuda_tenant *lim_owner;
    int lim_owner_conns;
    limit_state lims;
    uint64_t threads; /* resident threads of the device: SMs x threads per SM (the stack's multiplier) */
    /* Device printf: the driver writes it to this process's stdout, and device assertion
     * messages to its stderr; each is a pipe (out_fd) drained (by the request that
     * synchronized, or by out_thread between requests) into its owner's buffer or to
     * log_fd, the stream it replaced (see "device printf"). */
    int out_fd[2], log_fd[2];
    char eline[512]; /* the stderr pipe's current line, to find assertion messages */
    size_t elen;
    pthread_t out_thread;
    pthread_mutex_t out_mu;  /* out_owner and every client's out* (after g->mu if both) */
    client *out_owner;
    int out_claimable; /* the one client left after others went may take the output */
};


static const char *cu_error_text(vcuda_gpu *g, CUresult r)
{
    const char *s = NULL;
    if (!g->cu.cuGetErrorString || g->cu.cuGetErrorString(r, &s) != 0 || !s) s = "unknown driver error";
    return s;
}

/* Driver errors after which the context is unusable for everyone (the sticky ones):
 * illegal address, launch timeout, device assert, hardware stack error, illegal
 * instruction, misaligned address, invalid address space, invalid PC, launch failed,
 * tensor memory leak, unknown.  (720, a cooperative launch too large, is refused
 * before anything runs and leaves the context usable.) */
static int context_lost(CUresult r)
{
    return r == 700 || r == 702 || r == 710 || (r >= 714 && r <= 719) || r == 721 || r == 999;
}

/* 999 (unknown) is also what a call that leaves the context usable may answer (measured:
 * cuModuleLoadData given a validated image the driver cannot load), so one client's bad
 * image would end every session: it counts as lost only when a synchronize of the context
 * fails too.  (The other codes come from work that ran, and are sticky.) */
static int really_lost(vcuda_gpu *g, CUresult r)
{
    return context_lost(r) && (r != 999 || g->cu.cuCtxSynchronize() != 0);
}

/* Error reply from a failed driver call.  CUresult and cudaError_t share numbers for
 * every error a client can provoke here, so the code passes through (bounded to the
 * wire's range). */
static int reply_cu(vcuda_gpu *g, client *cl, vcuda_msg *r, const char *what, CUresult rc)
{
    snprintf(cl->msg, sizeof cl->msg, "%s: %s (CUresult %d)", what, cu_error_text(g, rc), rc);
    vcuda_reply_error(r, rc >= 1 && rc <= VCUDA_MAX_CUDA_ERROR ? rc : 999, cl->msg);
    if (!cl->fatal && really_lost(g, rc)) {
        /* this client's session ends with the error, then every other one, and the
         * server process is replaced (see release_client), so no later client inherits
         * the error: the driver keeps it for the life of the process, in every context
         * (measured: a context created after a 710 fails with 710) */
        cl->fatal = rc;
        pthread_mutex_lock(&g->mu);
        if (!g->dead && cl->generation == g->generation) {
            g->dead = rc;
            ++g->generation;
            fprintf(stderr, "vcuda-server: device %d: %s: the context is unusable; ending the sessions on it "
                    "and replacing the server process\n", g->ordinal, cl->msg);
        }
        pthread_mutex_unlock(&g->mu);
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

/* ---- quotas ------------------------------------------------------------------------ */

/* Device memory for a client: charged to its tenant, all of whose connections share its
 * quota (counted in this process, which serves all of them: server_gpu.h), and counted
 * as the client's (its end gives back what it still holds), unless that would take the
 * tenant past its quota: 0, or 1 with the refusal, naming `what` was to take the bytes,
 * in r. */
static int charge(client *cl, vcuda_msg *r, const char *what, uint64_t bytes)
{
    uint64_t used = 0;
    vcuda_tenant *t = cl->tenant;
    if (t && vcuda_tenant_charge(t, bytes, &used))
        return reply_invalid(cl, r, 2, "%s: %llu bytes would exceed tenant %s's quota of %llu bytes (%llu in use)", what,
                             (unsigned long long)bytes, t->name, (unsigned long long)t->mem_quota,
                             (unsigned long long)used), 1;
    cl->mem_bytes += bytes;
    return 0;
}

static void uncharge(client *cl, uint64_t bytes)
{
    cl->mem_bytes -= bytes;
    if (cl->tenant) vcuda_tenant_uncharge(cl->tenant, bytes);
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
        if (cl->handles[i].id == id && cl->handles[i].kind == kind && !cl->handles[i].retired) return &cl->handles[i];
    return NULL;
}

static uint64_t add_handle(client *cl, handle_kind kind, void *obj)
{
    if (grow((void **)&cl->handles, &cl->cap_handle, cl->nhandle + 1, sizeof(handle), MAX_HANDLES))
        return 0;
    cl->handles[cl->nhandle++] = (handle){++cl->next_id, kind, obj, 0, 0};
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

static vcuda_gpu *the_gpu; /* stream_of's driver table (one GPU per server process) */

/* The legacy default stream's ordering, per client: work on its default stream follows
 * what its blocking streams queued before, and work on a blocking stream follows what
 * its default stream queued before.  Other clients' streams are never involved. */
static void join_streams(client *cl, CUstream s)
{
    const driver *cu = &the_gpu->cu;
    if (s == cl->def) {
        for (uint32_t i = 0; i < cl->nhandle; ++i)
            if (cl->handles[i].kind == H_STREAM && !(cl->handles[i].flags & 1)) {
                cu->cuEventRecord(cl->join, cl->handles[i].obj);
                cu->cuStreamWaitEvent(cl->def, cl->join, 0);
            }
    } else {
        cu->cuEventRecord(cl->join, cl->def);
        cu->cuStreamWaitEvent(s, cl->join, 0);
    }
}

static allocation *find_range(client *cl, uint64_t p, uint64_t n)
{
    allocation *a = in_table(cl->allocs, cl->nalloc, p, n);
    return a ? a : in_table(cl->globals, cl->nglobal, p, n);
}

/* Stream handle -> CUstream (0: the client's default stream), ordered as the legacy
 * default stream would be.  -1 if not this client's. */
static int stream_of(client *cl, uint64_t id, CUstream *s)
{
    handle *h;
    if (id == 0) {
        *s = cl->def;
        join_streams(cl, cl->def);
        return 0;
    }
    if (!(h = find_handle(cl, id, H_STREAM))) return -1;
    *s = h->obj;
    if (!(h->flags & 1)) join_streams(cl, *s);
    return 0;
}

/* The stream a query or synchronize names: the legacy stream's stands for everything it
 * is ordered after (a query of it reports not ready while a blocking stream runs, as
 * CUDA's does), a created stream for its own work only (a query of a blocking stream
 * while the legacy stream runs a kernel reports ready on the real runtime: the
 * ordering applies to work queued, not to waiting).  -1 if not this client's. */
static int waited_stream(client *cl, uint64_t id, CUstream *s)
{
    handle *h;
    if (id == 0) return stream_of(cl, id, s);
    if (!(h = find_handle(cl, id, H_STREAM))) return -1;
    *s = h->obj;
    return 0;
}

/* Copies are ordered after the work already queued where the client asked. */
static CUresult wait_for(vcuda_gpu *g, CUstream s) { return g->cu.cuStreamSynchronize(s); }

/* A stream the client destroys while work is still queued in it stays in its table,
 * retired (no request can name it), until that work is done: the driver would finish
 * the work after cuStreamDestroy all the same, but then neither a device synchronize
 * nor the legacy stream's ordering (join_streams) here would wait for it, as CUDA's
 * do (a thread's per-thread default stream goes so when the thread ends).  Reaped,
 * once idle, at the next STREAM_CREATE, STREAM_DESTROY and device synchronize. */
static void reap_streams(vcuda_gpu *g, client *cl)
{
    for (uint32_t i = 0; i < cl->nhandle;)
        if (cl->handles[i].retired && g->cu.cuStreamQuery(cl->handles[i].obj) != 600 /* CUDA_ERROR_NOT_READY */) {
            g->cu.cuStreamDestroy_v2(cl->handles[i].obj);
            remove_handle(cl, &cl->handles[i]);
        } else {
            ++i;
        }
}

/* Everything this client queued (its "device synchronize"), in retired streams too:
 * other clients' work on the same GPU is not waited for. */
static CUresult sync_client(vcuda_gpu *g, client *cl)
{
    /* (aux never holds work past the request that queued it) */
    CUresult rc = g->cu.cuStreamSynchronize(cl->def);
    for (uint32_t i = 0; i < cl->nhandle && !rc; ++i)
        if (cl->handles[i].kind == H_STREAM) rc = g->cu.cuStreamSynchronize(cl->handles[i].obj);
    if (!rc) reap_streams(g, cl);
    return rc;
}

/* ---- module images ---------------------------------------------------------------- */

static void collect_unsized(const char *name, size_t len, void *arg)
{
    unsized_names *u = arg;
    char *c = u->n < MAX_UNSIZED ? realloc(u->names, u->len + len + 1) : NULL;
    if (!c) {
        u->overflow = 1;
        return;
    }
    memcpy(c + u->len, name, len), c[u->len + len] = 0;
    u->names = c, u->len += len + 1, ++u->n;
}

/* A private copy of `from` in *to: 0, or -1 (out of memory, *to empty). */
static int unsized_copy(unsized_names *to, const unsized_names *from)
{
    *to = *from;
    if (!from->len) return to->names = NULL, 0;
    if (!(to->names = malloc(from->len))) return memset(to, 0, sizeof *to), -1;
    memcpy(to->names, from->names, from->len);
    return 0;
}

/* A private copy of a cached image and its footprint (g->mu held by the caller), or
 * NULL. */
static uint8_t *cache_copy(vcuda_gpu *g, const uint8_t *hash, size_t *len, uint64_t *bytes, unsized_names *u)
{
    for (int i = 0; i < g->nimages; ++i)
        if (!memcmp(g->images[i].hash, hash, VCUDA_HASH_SIZE)) {
            image_entry *e = &g->images[i];
            uint8_t *p = malloc(e->len);
            if (p && unsized_copy(u, &e->unsized)) free(p), p = NULL;
            if (p) memcpy(p, e->img, e->len), *len = e->len, *bytes = e->bytes;
            e->last_use = ++g->use_clock;
            return p;
        }
    return NULL;
}

/* Keeps a copy of a validated image (g->mu held), evicting the least recently used
 * ones to stay within the cache's bounds: a client filling the cache slows later
 * clients by one transfer, never refuses them. */
static void cache_put(vcuda_gpu *g, const uint8_t *hash, const uint8_t *img, size_t len, uint64_t bytes,
                      const unsized_names *u)
{
    size_t size = len + u->len;
    if (size > limits.cache_bytes) return;
    for (int i = 0; i < g->nimages; ++i)
        if (!memcmp(g->images[i].hash, hash, VCUDA_HASH_SIZE)) return;
    while (g->nimages && (g->nimages == MAX_IMAGES || g->image_bytes + size > limits.cache_bytes)) {
        int lru = 0;
        for (int i = 1; i < g->nimages; ++i)
            if (g->images[i].last_use < g->images[lru].last_use) lru = i;
        g->image_bytes -= g->images[lru].len + g->images[lru].unsized.len;
        free(g->images[lru].img);
        free(g->images[lru].unsized.names);
        g->images[lru] = g->images[--g->nimages];
    }
    uint8_t *p = malloc(len);
    unsized_names names;
    if (!p || unsized_copy(&names, u)) {
        free(p);
        return;
    }
    memcpy(p, img, len);
    image_entry *e = &g->images[g->nimages++];
    memcpy(e->hash, hash, VCUDA_HASH_SIZE);
    e->img = p, e->len = len, e->bytes = bytes, e->unsized = names, e->last_use = ++g->use_clock;
    g->image_bytes += size;
}

/* ---- the handler ----------------------------------------------------------------- */

static void release_client(void *ctx, vcuda_conn *c);
static int attach_client(void *ctx, vcuda_conn *c, char *why);

static int h2d(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    int last = !(q->hdr.flags & VCUDA_FLAG_MORE);
    CUstream s = NULL; /* (set whenever copy_error stays 0) */
    if (!cl->copy_error) {
        CUresult rc = 0;
        if (stream_of(cl, q->v[1], &s))
            cl->copy_error = 400, snprintf(cl->copy_msg, sizeof cl->copy_msg, "MEMCPY_H2D: unknown stream");
        else if (!find_range(cl, q->v[0], q->blob_len))
            cl->copy_error = 1, snprintf(cl->copy_msg, sizeof cl->copy_msg,
                                         "MEMCPY_H2D: [0x%llx, +%u) is not inside an allocation of this client",
                                         (unsigned long long)q->v[0], q->blob_len);
        /* stream-ordered on the client's own stream: the pageable source is staged
         * before the call returns, so the receive buffer can be reused at once */
        else if (q->blob_len && (rc = g->cu.cuMemcpyHtoDAsync_v2(q->v[0], q->blob, q->blob_len, s)))
            cl->copy_error = rc, snprintf(cl->copy_msg, sizeof cl->copy_msg, "MEMCPY_H2D: %s (CUresult %d)",
                                          cu_error_text(g, rc), rc);
        if (rc && context_lost(rc)) reply_cu(g, cl, r, "MEMCPY_H2D", rc);
        /* a host-synchronous copy (proto.h, VCUDA_FLAG_SYNC) is complete, with the
         * stream's earlier work, before the reply says so */
        else if (last && !cl->copy_error && (q->hdr.flags & VCUDA_FLAG_SYNC) && (rc = wait_for(g, s)))
            return reply_cu(g, cl, r, "MEMCPY_H2D", rc);
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
    /* the client's own staging buffers, made at its first D2H (freed when it goes) */
    for (int k = 0; k < 2; ++k)
        if (!cl->pinned[k] && (rc = g->cu.cuMemAllocHost_v2(&cl->pinned[k], g->chunk)))
            return reply_cu(g, cl, r, "MEMCPY_D2H (staging buffer)", rc);
    uint64_t off = 0, n0 = size < g->chunk ? size : g->chunk;
    if ((rc = g->cu.cuMemcpyDtoHAsync_v2(cl->pinned[0], src, n0, cl->aux)))
        return reply_cu(g, cl, r, "MEMCPY_D2H", rc);
    for (int k = 0;; k ^= 1) {
        uint64_t n = size - off < g->chunk ? size - off : g->chunk;
        if ((rc = g->cu.cuStreamSynchronize(cl->aux))) return reply_cu(g, cl, r, "MEMCPY_D2H", rc);
        uint64_t next = off + n, nn = size - next < g->chunk ? size - next : g->chunk;
        if (next < size && (rc = g->cu.cuMemcpyDtoHAsync_v2(cl->pinned[k ^ 1], src + next, nn, cl->aux)))
            return reply_cu(g, cl, r, "MEMCPY_D2H", rc); /* chunks sent so far end with this error */
        r->blob = cl->pinned[k], r->blob_len = (uint32_t)n;
        if (next == size) return 0; /* the loop sends this last chunk as the reply */
        if (vcuda_send_more(c, q, r, why)) {
            g->cu.cuStreamSynchronize(cl->aux); /* nothing in flight into a buffer reused later */
            return -1;
        }
        memset(r, 0, sizeof *r);
        off = next;
    }
}

/* Kernel arguments as the driver takes them, one aligned pointer per parameter, from
 * bytes packed by the kernel's own sizes (the caller checked their total).  Per worker
 * thread (clients launch concurrently); valid until its next call. */
static void **unpack_params(const function_info *fi, const uint8_t *blob)
{
    static _Thread_local _Alignas(PARAM_ALIGN) uint8_t packed[VCUDA_MAX_PARAMS * PARAM_ALIGN + VCUDA_MAX_PARAM_BYTES];
    static _Thread_local void *params[VCUDA_MAX_PARAMS];
    size_t at = 0, from = 0;
    for (uint32_t i = 0; i < fi->n; ++i) {
        params[i] = packed + at;
        memcpy(packed + at, blob + from, fi->sizes[i]);
        from += fi->sizes[i];
        at += (fi->sizes[i] + PARAM_ALIGN - 1) / PARAM_ALIGN * PARAM_ALIGN;
    }
    return fi->n ? params : NULL;
}

/* The function a launch names, with the client's own argument sizes (the client packed
 * by the same table): NULL after an error reply.  what: the frame's name. */
static const function_info *launch_function(client *cl, uint64_t id, const vcuda_msg *q, vcuda_msg *r, const char *what)
{
    handle *h = find_handle(cl, id, H_FUNCTION);
    if (!h) return reply_invalid(cl, r, 98 /* cudaErrorInvalidDeviceFunction */, "%s: unknown function handle", what), NULL;
    const function_info *fi = h->obj;
    if (q->nsizes != fi->n || memcmp(q->sizes, fi->sizes, fi->n * sizeof *fi->sizes))
        return reply_invalid(cl, r, 1, "%s: %u arguments given, the kernel takes %u (or their sizes differ)", what,
                             q->nsizes, fi->n), NULL;
    return fi;
}

/* LAUNCH_EX's attributes as the driver takes them; -1 after an error reply. */
static int launch_attributes(client *cl, const vcuda_msg *q, vcuda_msg *r, launch_attribute *a, unsigned *n)
{
    uint64_t flags = q->v[9];
    *n = 0;
    if (flags & ~(uint64_t)VCUDA_LAUNCH_KNOWN)
        return reply_invalid(cl, r, 1, "LAUNCH_EX: unknown attribute flags 0x%llx", (unsigned long long)flags), -1;
    if (q->v[14] > 1) return reply_invalid(cl, r, 1, "LAUNCH_EX: memory sync domain %llu", (unsigned long long)q->v[14]), -1;
    memset(a, 0, 5 * sizeof *a);
    if (flags & VCUDA_LAUNCH_COOPERATIVE) a[*n].id = VCUDA_CU_LAUNCH_ATTRIBUTE_COOPERATIVE, a[(*n)++].value.cooperative = 1;
    if (flags & VCUDA_LAUNCH_PROGRAMMATIC)
        a[*n].id = VCUDA_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, a[(*n)++].value.programmatic = 1;
    if (flags & VCUDA_LAUNCH_CLUSTER) {
        a[*n].id = VCUDA_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        a[*n].value.cluster.x = (unsigned)q->v[10], a[*n].value.cluster.y = (unsigned)q->v[11];
        a[(*n)++].value.cluster.z = (unsigned)q->v[12];
    }
    if (flags & VCUDA_LAUNCH_PRIORITY) a[*n].id = VCUDA_CU_LAUNCH_ATTRIBUTE_PRIORITY, a[(*n)++].value.priority = (int)q->v[13];
    if (flags & VCUDA_LAUNCH_SYNC_DOMAIN)
        a[*n].id = VCUDA_CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN, a[(*n)++].value.sync_domain = (int)q->v[14];
    return 0;
}

/* LAUNCH, LAUNCH_COOPERATIVE and LAUNCH_EX (the driver checks the attributes' values:
 * cluster dimensions against the kernel and the grid, and so on). */
static int launch(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    const char *what = vcuda_opcode_name(q->hdr.opcode);
    const function_info *fi = launch_function(cl, q->v[0], q, r, what);
    CUstream s;
    launch_attribute attrs[5];
    unsigned nattrs = 0;
    if (!fi) return 0;
    if (stream_of(cl, q->v[8], &s)) return reply_invalid(cl, r, 400, "%s: unknown stream", what);
    if (q->hdr.opcode == VCUDA_OP_LAUNCH_EX && launch_attributes(cl, q, r, attrs, &nattrs)) return 0;
    void **params = unpack_params(fi, q->blob);
    unsigned d[7];
    for (int i = 0; i < 7; ++i) d[i] = (unsigned)q->v[1 + i];
    CUresult rc;
    if (q->hdr.opcode == VCUDA_OP_LAUNCH_EX) {
        launch_config c = {{d[0], d[1], d[2]}, {d[3], d[4], d[5]}, d[6], s, attrs, nattrs};
        rc = g->cu.cuLaunchKernelEx(&c, fi->f, params, NULL);
    } else if (q->hdr.opcode == VCUDA_OP_LAUNCH_COOPERATIVE)
        rc = g->cu.cuLaunchCooperativeKernel(fi->f, d[0], d[1], d[2], d[3], d[4], d[5], d[6], s, params);
    else
        rc = g->cu.cuLaunchKernel(fi->f, d[0], d[1], d[2], d[3], d[4], d[5], d[6], s, params, NULL);
    return rc ? reply_cu(g, cl, r, what, rc) : 0;
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
    fi->owner = ((cached_module *)mh->obj)->mod;
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

/* ---- graphs ----------------------------------------------------------------------- *
 * GRAPH_INSTANTIATE brings a whole graph (proto.h, "graphs"); it is checked here as
 * LAUNCH, MEMCPY_D2D and MEMSET are, node by node (function handles the client's own,
 * argument bytes the kernel's own total, every copied or set range inside one of the
 * client's allocations), then built as a CUgraph of the client's context, instantiated,
 * and kept as a handle: GRAPH_LAUNCH is then one frame and one cuGraphLaunch.  The
 * ranges are checked again at every launch (memory freed since then may be someone
 * else's), and unloading a module destroys the execs whose kernels it holds. */
typedef struct {
    uint64_t p, n;
} mem_range;

/* The graph and its nodes are kept with the exec: GRAPH_EXEC_KERNEL_SET names a node
 * by its index, and the driver by the graph's node. */
typedef struct twin twin;
typedef struct {
    CUgraphExec exec;
    CUgraph graph;
    CUgraphNode *made;
    uint8_t *kinds; /* VCUDA_GNODE_* per node */
    uint32_t nodes, nranges, nmodules, cap_modules;
    mem_range *ranges;
    CUmodule *modules;
    twin *tw; /* instantiated from a twin (which then holds graph and made), else NULL */
} graph_exec;

static void twin_unref(vcuda_gpu *g, client *cl, twin *t, int alive);
static void twin_launched(twin *t);
static int alloc_refused(client *cl, vcuda_msg *r, const char *api, uint64_t bytes);

static void graph_exec_free(vcuda_gpu *g, client *cl, graph_exec *x, int alive)
{
    if (alive && x->exec) g->cu.cuGraphExecDestroy(x->exec);
    if (x->tw) twin_unref(g, cl, x->tw, alive); /* (its nodes count with the twin) */
    else {
        if (alive && x->graph) g->cu.cuGraphDestroy(x->graph);
        cl->graph_nodes -= x->nodes;
    }
    free(x->made), free(x->kinds);
    free(x->ranges);
    free(x->modules);
    free(x);
}

/* Module m among those whose unloading destroys exec x. */
static int graph_exec_uses(graph_exec *x, CUmodule m)
{
    uint32_t k = 0;
    while (k < x->nmodules && x->modules[k] != m) ++k;
    if (k < x->nmodules) return 0;
    if (x->nmodules == x->cap_modules) {
        CUmodule *q = realloc(x->modules, (x->cap_modules + 8) * sizeof *q);
        if (!q) return -1;
        x->modules = q, x->cap_modules += 8;
    }
    x->modules[x->nmodules++] = m;
    return 0;
}

/* The client's execs whose kernels are in module m (NULL: all of them) go. */
static void graph_execs_drop(vcuda_gpu *g, client *cl, CUmodule m, int alive)
{
    for (uint32_t i = cl->nhandle; i-- > 0;) {
        if (cl->handles[i].kind != H_GRAPH_EXEC) continue;
        graph_exec *x = cl->handles[i].obj;
        int uses = !m;
        for (uint32_t k = 0; k < x->nmodules && !uses; ++k) uses = x->modules[k] == m;
        if (!uses) continue;
        graph_exec_free(g, cl, x, alive);
        remove_handle(cl, &cl->handles[i]);
    }
}

/* Checks one decoded node against the client's tables; records what launches recheck. */
static int graph_node_check(client *cl, const vcuda_graph_node *n, uint32_t i, graph_exec *x, vcuda_msg *r, const char *what)
{
    switch (n->kind) {
    case VCUDA_GNODE_KERNEL: {
        handle *h = find_handle(cl, n->function, H_FUNCTION);
        if (!h) return reply_invalid(cl, r, 98, "%s: node %u: unknown function handle", what, i), -1;
        const function_info *fi = h->obj;
        uint32_t total = 0;
        for (uint32_t k = 0; k < fi->n; ++k) total += fi->sizes[k];
        if (n->params_len != total)
            return reply_invalid(cl, r, 1, "%s: node %u: %u argument bytes, the kernel takes %u", what, i,
                                 n->params_len, total), -1;
        x->kinds[i] = VCUDA_GNODE_KERNEL;
        return graph_exec_uses(x, fi->owner) ? reply_invalid(cl, r, 2, "%s: server out of memory", what), -1 : 0;
    }
    case VCUDA_GNODE_COPY:
        if (!n->size) return 0;
        if (!find_range(cl, n->dst, n->size) || !find_range(cl, n->src, n->size))
            return reply_invalid(cl, r, 1, "%s: node %u: a copied range is not inside an allocation of "
                                 "this client", what, i), -1;
        x->ranges[x->nranges++] = (mem_range){n->dst, n->size};
        x->ranges[x->nranges++] = (mem_range){n->src, n->size};
        return 0;
    case VCUDA_GNODE_SET: {
        if (!n->width || !n->height) return 0;
        if (n->width > n->pitch || n->height - 1 > VCUDA_MAX_SIZE / n->pitch)
            return reply_invalid(cl, r, 1, "%s: node %u: width over pitch", what, i), -1;
        uint64_t span = (n->height - 1) * n->pitch + n->width;
        if (!find_range(cl, n->dst, span))
            return reply_invalid(cl, r, 1, "%s: node %u: the set rows are not inside an allocation of "
                                 "this client", what, i), -1;
        x->ranges[x->nranges++] = (mem_range){n->dst, span};
        return 0;
    }
    default: return 0;
    }
}

/* Adds checked node i to the CUgraph (deps: the CUgraphNodes it waits for). */
static CUresult graph_node_add(vcuda_gpu *g, client *cl, CUgraph graph, const vcuda_graph_node *n, CUgraphNode *out,
                               const CUgraphNode *deps)
{
    CUcontext cx = cl->own ? cl->own : g->ctx;
    if (n->kind == VCUDA_GNODE_KERNEL) {
        const function_info *fi = find_handle(cl, n->function, H_FUNCTION)->obj;
        kernel_node_params p = {fi->f, {n->dim[0], n->dim[1], n->dim[2]}, {n->dim[3], n->dim[4], n->dim[5]}, n->shmem,
                                unpack_params(fi, n->params), NULL, NULL, NULL};
        return g->cu.cuGraphAddKernelNode_v2(out, graph, deps, n->ndeps, &p); /* copies the arguments */
    }
    if (n->kind == VCUDA_GNODE_COPY && n->size) {
        memcpy3d_params p;
        memset(&p, 0, sizeof p);
        p.src_type = p.dst_type = VCUDA_CU_MEMORYTYPE_DEVICE;
        p.src_device = n->src, p.dst_device = n->dst;
        p.src_pitch = p.dst_pitch = p.width = n->size;
        p.src_height = p.dst_height = p.height = p.depth = 1;
        return g->cu.cuGraphAddMemcpyNode(out, graph, deps, n->ndeps, &p, cx);
    }
    if (n->kind == VCUDA_GNODE_SET && n->width && n->height) {
        memset_node_params p = {n->dst, n->pitch, n->value, 1, n->width, n->height};
        return g->cu.cuGraphAddMemsetNode(out, graph, deps, n->ndeps, &p, cx);
    }
    /* empty nodes, and copies and sets of nothing, only order */
    return g->cu.cuGraphAddEmptyNode(out, graph, deps, n->ndeps);
}

static int graph_instantiate(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    uint32_t count = (uint32_t)q->v[0];
    char bad[VCUDA_WHY_LEN];
    if (count < 1 || count > VCUDA_MAX_GRAPH_NODES)
        return reply_invalid(cl, r, 1, "GRAPH_INSTANTIATE: %u nodes outside [1,%u]", count, VCUDA_MAX_GRAPH_NODES);
    if (count > MAX_CLIENT_GRAPH_NODES - cl->graph_nodes)
        return reply_invalid(cl, r, 2, "GRAPH_INSTANTIATE: this client's graphs would exceed %u nodes",
                             MAX_CLIENT_GRAPH_NODES);
    vcuda_graph_node *nodes = calloc(count, sizeof *nodes);
    CUgraphNode *made = calloc(count, sizeof *made), *deps = calloc(count, sizeof *deps);
    graph_exec *x = calloc(1, sizeof *x);
    CUgraph graph = NULL;
    CUresult rc = 0;
    int refused = 0;
    if (x) x->ranges = calloc(2 * (size_t)count, sizeof *x->ranges), x->made = made, x->kinds = calloc(count, 1);
    if (!nodes || !made || !deps || !x || !x->ranges || !x->kinds)
        refused = reply_invalid(cl, r, 2, "GRAPH_INSTANTIATE: server out of memory") + 1;
    else if (vcuda_graph_decode(q->blob, q->blob_len, count, nodes, bad))
        refused = reply_invalid(cl, r, 1, "GRAPH_INSTANTIATE: %s", bad) + 1;
    for (uint32_t i = 0; i < count && !refused; ++i) refused = graph_node_check(cl, &nodes[i], i, x, r, "GRAPH_INSTANTIATE") != 0;
    if (!refused && !(rc = g->cu.cuGraphCreate(&graph, 0)))
        for (uint32_t i = 0; i < count && !rc; ++i) {
            for (uint32_t k = 0; k < nodes[i].ndeps; ++k) deps[k] = made[vcuda_graph_dep(&nodes[i], k)];
            rc = graph_node_add(g, cl, graph, &nodes[i], &made[i], deps);
        }
    if (!refused && !rc) rc = g->cu.cuGraphInstantiateWithFlags(&x->exec, graph, 0);
    if (x) x->graph = graph; /* kept for GRAPH_EXEC_KERNEL_SET (see graph_exec) */
    else if (graph) g->cu.cuGraphDestroy(graph);
    if (!x) free(made);
    free(nodes), free(deps);
    uint64_t id = 0;
    if (!refused && !rc) {
        x->nodes = count, cl->graph_nodes += count;
        if (!(id = add_handle(cl, H_GRAPH_EXEC, x))) reply_invalid(cl, r, 2, "GRAPH_INSTANTIATE: handle limit reached");
    } else if (rc)
        reply_cu(g, cl, r, "GRAPH_INSTANTIATE", rc);
    if (!id) {
        if (x) graph_exec_free(g, cl, x, 1);
        return 0;
    }
    r->v[0] = id, r->nv = 1;
    return 0;
}

/* GRAPH_EXEC_KERNEL_SET: a kernel node of an exec takes a new configuration and new
 * arguments (cudaGraphExecKernelNodeSetParams), checked as LAUNCH's are. */
static int graph_exec_kernel_set(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    handle *h = find_handle(cl, q->v[0], H_GRAPH_EXEC);
    if (!h) return reply_invalid(cl, r, 400, "GRAPH_EXEC_KERNEL_SET: unknown graph exec");
    graph_exec *x = h->obj;
    uint64_t i = q->v[1];
    if (i >= x->nodes || x->kinds[i] != VCUDA_GNODE_KERNEL)
        return reply_invalid(cl, r, 1, "GRAPH_EXEC_KERNEL_SET: node %llu is not a kernel node of the exec",
                             (unsigned long long)i);
    const function_info *fi = launch_function(cl, q->v[2], q, r, "GRAPH_EXEC_KERNEL_SET");
    if (!fi) return 0;
    if (graph_exec_uses(x, fi->owner))
        return reply_invalid(cl, r, 2, "GRAPH_EXEC_KERNEL_SET: server out of memory");
    kernel_node_params p = {fi->f, {(unsigned)q->v[3], (unsigned)q->v[4], (unsigned)q->v[5]},
                            {(unsigned)q->v[6], (unsigned)q->v[7], (unsigned)q->v[8]}, (unsigned)q->v[9],
                            unpack_params(fi, q->blob), NULL, NULL, NULL};
    CUresult rc = g->cu.cuGraphExecKernelNodeSetParams_v2(x->exec, x->made[i], &p); /* copies the arguments */
    return rc ? reply_cu(g, cl, r, "GRAPH_EXEC_KERNEL_SET", rc) : 0;
}

static int graph_launch(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    handle *h = find_handle(cl, q->v[0], H_GRAPH_EXEC);
    CUstream s;
    CUresult rc;
    if (!h) return reply_invalid(cl, r, 400, "GRAPH_LAUNCH: unknown graph exec");
    if (stream_of(cl, q->v[1], &s)) return reply_invalid(cl, r, 400, "GRAPH_LAUNCH: unknown stream");
    const graph_exec *x = h->obj;
    for (uint32_t i = 0; i < x->nranges; ++i)
        if (!find_range(cl, x->ranges[i].p, x->ranges[i].n))
            return reply_invalid(cl, r, 1, "GRAPH_LAUNCH: memory the graph copies or sets was freed since it was "
                                 "instantiated");
    if ((rc = g->cu.cuGraphLaunch(x->exec, s))) return reply_cu(g, cl, r, "GRAPH_LAUNCH", rc);
    if (x->tw) twin_launched(x->tw);
    return 0;
}

/* ---- graph twins (proto.h, "graph twins") ------------------------------------------ *
 * A twin is a CUgraph of the client's context built node by node as the client adds
 * them, so that what the driver decides when a node is made -- a conditional handle's
 * value (kernels take it as an argument), an allocation's address, the body graphs of a
 * conditional node -- is the driver's own.  A top twin is held by the client's handle
 * and by each exec made from it (GRAPH_EXEC_KERNEL_SET names the twin's nodes); the
 * bodies of its conditional nodes are twins too, addressed by handles of their own but
 * owned by their node: they go with the top twin.  Nodes are checked as in
 * GRAPH_INSTANTIATE; what launches recheck (ranges) and the modules whose unloading
 * ends the twin are kept on the top twin (`shape`), and copied into its execs.
 *
 * Graph allocations are entries of the client's allocation table (so copies, sets and
 * FREE take them, and they count against its quota) from the node's creation on.  When
 * the top twin goes, the addresses its FREE nodes freed (if it was ever launched) and
 * those its ALLOC nodes never made real (if it never was) leave the table: the driver
 * may give those addresses to another graph, perhaps another client's.  An allocation
 * no graph of it freed stays the client's until FREE, as with the driver. */
#define MAX_TWIN_EDGES (16u * VCUDA_MAX_GRAPH_NODES)

struct twin {
    CUgraph graph;
    twin *root; /* the top twin (itself for one) */
    CUgraphNode *nodes;
    uint8_t *kinds;
    uint32_t n, cap_nodes, cap_kinds;
    uint32_t *edges; /* pairs (from, to): every dependency, for the cycle check */
    uint32_t nedges, cap_edges;
    /* top twin only */
    uint32_t refs;      /* its handle (until GRAPH_TWIN_DESTROY) and each exec */
    uint32_t nodes_all; /* its nodes and its bodies' (counted in cl->graph_nodes) */
    int launched, dead; /* dead: a module its kernels are in was unloaded */
    twin **bodies;      /* every body twin, nested ones too */
    uint64_t *conds, *allocs, *frees; /* its conditional handles; addresses of ALLOC / FREE nodes */
    uint32_t nbodies, cap_bodies, nconds, cap_conds, nallocs, cap_allocs, nfrees, cap_frees, cap_ranges;
    graph_exec shape; /* ranges and modules (see above) */
};

static void twin_launched(twin *t) { t->root->launched = 1; }

/* Appends v to a growing u64 list (-1: out of room). */
static int push_u64(uint64_t **a, uint32_t *n, uint32_t *cap, uint64_t v, uint32_t max)
{
    if (grow((void **)a, cap, *n + 1, sizeof **a, max)) return -1;
    (*a)[(*n)++] = v;
    return 0;
}

static twin *twin_new(client *cl, CUgraph graph, twin *root, uint64_t *id)
{
    twin *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->graph = graph;
    t->root = root ? root : t;
    if (root && grow((void **)&root->bodies, &root->cap_bodies, root->nbodies + 1, sizeof *root->bodies, MAX_HANDLES))
        return free(t), NULL;
    if (!(*id = add_handle(cl, H_GRAPH, t))) return free(t), NULL;
    if (root) root->bodies[root->nbodies++] = t;
    else t->refs = 1;
    return t;
}

static void twin_free_one(twin *t)
{
    free(t->nodes), free(t->kinds), free(t->edges);
    free(t->bodies), free(t->conds), free(t->allocs), free(t->frees);
    free(t->shape.ranges), free(t->shape.modules);
    free(t);
}

/* A graph allocation's entry leaves the client's table (no driver call). */
static void forget_graph_alloc(client *cl, uint64_t p)
{
    for (uint32_t i = 0; i < cl->nalloc; ++i)
        if (cl->allocs[i].graph && cl->allocs[i].base == p) {
            uncharge(cl, cl->allocs[i].size);
            cl->allocs[i] = cl->allocs[--cl->nalloc];
            return;
        }
}

/* One reference to top twin t goes; with the last, the twin and its bodies. */
static void twin_unref(vcuda_gpu *g, client *cl, twin *t, int alive)
{
    if (--t->refs) return;
    for (uint32_t i = 0; i < t->nfrees && t->launched; ++i) forget_graph_alloc(cl, t->frees[i]);
    for (uint32_t i = 0; i < t->nallocs && !t->launched; ++i) forget_graph_alloc(cl, t->allocs[i]);
    if (alive) g->cu.cuGraphDestroy(t->graph); /* and the body graphs, its nodes' */
    cl->graph_nodes -= t->nodes_all;
    for (uint32_t i = 0; i < t->nbodies; ++i) twin_free_one(t->bodies[i]);
    twin_free_one(t);
}

/* GRAPH_TWIN_DESTROY: the client's handles to t and its bodies go, then its reference. */
static void twin_destroy(vcuda_gpu *g, client *cl, twin *t)
{
    for (uint32_t i = cl->nhandle; i-- > 0;) {
        handle *h = &cl->handles[i];
        if (h->kind == H_GRAPH && ((twin *)h->obj)->root == t) remove_handle(cl, h);
    }
    twin_unref(g, cl, t, 1);
}

/* The client's twins, when it goes (after its execs). */
static void twins_drop(vcuda_gpu *g, client *cl, int alive)
{
    for (uint32_t i = cl->nhandle; i-- > 0;) {
        handle *h = &cl->handles[i];
        if (h->kind == H_GRAPH && ((twin *)h->obj)->root == h->obj) {
            twin *t = h->obj;
            for (uint32_t k = cl->nhandle; k-- > 0;) /* (its bodies' handles, then its own) */
                if (cl->handles[k].kind == H_GRAPH && ((twin *)cl->handles[k].obj)->root == t) cl->handles[k].kind = 0;
            twin_unref(g, cl, t, alive);
            i = cl->nhandle; /* restart: entries were marked */
        }
    }
}

/* Whether `to` already waits for `from`, through the twin's dependencies: adding the
 * edge to -> from (from waits for to) would close a cycle. */
static int twin_reaches(const twin *t, uint32_t from, uint32_t to, uint8_t *seen, uint32_t *stack)
{
    uint32_t top = 0;
    memset(seen, 0, t->n);
    stack[top++] = from, seen[from] = 1;
    while (top) {
        uint32_t v = stack[--top];
        if (v == to) return 1;
        for (uint32_t e = 0; e < t->nedges; ++e)
            if (t->edges[2 * e + 1] == v && !seen[t->edges[2 * e]]) seen[t->edges[2 * e]] = 1, stack[top++] = t->edges[2 * e];
    }
    return 0;
}

static int twin_edge(twin *t, uint32_t from, uint32_t to)
{
    if (grow((void **)&t->edges, &t->cap_edges, 2 * (t->nedges + 1), sizeof *t->edges, 2 * MAX_TWIN_EDGES)) return -1;
    t->edges[2 * t->nedges] = from, t->edges[2 * t->nedges + 1] = to, ++t->nedges;
    return 0;
}

static twin *twin_of(client *cl, uint64_t id)
{
    handle *h = find_handle(cl, id, H_GRAPH);
    return h ? h->obj : NULL;
}

/* GRAPH_TWIN_ADD_NODE: node `index` of the twin, checked, made by the driver. */
static int twin_add_node(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    static _Thread_local uint8_t bodies[8 * VCUDA_MAX_COND_BODIES];
    static _Thread_local CUgraphNode deps[VCUDA_MAX_GRAPH_NODES];
    const char *what = "GRAPH_TWIN_ADD_NODE";
    twin *t = twin_of(cl, q->v[0]);
    uint32_t index = (uint32_t)q->v[1];
    vcuda_graph_node n;
    char bad[VCUDA_WHY_LEN];
    CUcontext cx = cl->own ? cl->own : g->ctx;
    CUgraphNode made = NULL;
    CUresult rc = 0;
    if (!t) return reply_invalid(cl, r, 400, "%s: unknown graph", what);
    twin *root = t->root;
    if (root->dead) return reply_invalid(cl, r, 400, "%s: a module the graph's kernels are in was unloaded", what);
    if (q->v[1] != t->n) return reply_invalid(cl, r, 1, "%s: node %llu, the graph has %u", what, (unsigned long long)q->v[1], t->n);
    if (cl->graph_nodes >= MAX_CLIENT_GRAPH_NODES)
        return reply_invalid(cl, r, 2, "%s: this client's graphs would exceed %u nodes", what, MAX_CLIENT_GRAPH_NODES);
    if (vcuda_graph_decode_from(q->blob, q->blob_len, index, 1, &n, bad)) return reply_invalid(cl, r, 1, "%s: %s", what, bad);
    if (grow((void **)&t->nodes, &t->cap_nodes, t->n + 1, sizeof *t->nodes, VCUDA_MAX_GRAPH_NODES) ||
        grow((void **)&t->kinds, &t->cap_kinds, t->n + 1, 1, VCUDA_MAX_GRAPH_NODES) ||
        grow((void **)&root->shape.ranges, &root->cap_ranges, root->shape.nranges + 2, sizeof(mem_range),
             2 * MAX_CLIENT_GRAPH_NODES) ||
        t->nedges + n.ndeps > MAX_TWIN_EDGES)
        return reply_invalid(cl, r, 2, "%s: server out of memory or the graph's edge limit (%u)", what, MAX_TWIN_EDGES);
    for (uint32_t k = 0; k < n.ndeps; ++k) deps[k] = t->nodes[vcuda_graph_dep(&n, k)];
    r->v[0] = 0, r->nv = 1, r->blob = bodies, r->blob_len = 0;
    switch (n.kind) {
    case VCUDA_GNODE_COND: {
        uint32_t k = 0;
        while (k < root->nconds && root->conds[k] != n.cond) ++k;
        if (k == root->nconds) return reply_invalid(cl, r, 400, "%s: unknown conditional handle", what);
        if (grow((void **)&cl->handles, &cl->cap_handle, cl->nhandle + n.cond_size, sizeof(handle), MAX_HANDLES))
            return reply_invalid(cl, r, 2, "%s: handle limit reached", what);
        graph_node_params p;
        memset(&p, 0, sizeof p);
        p.type = VCUDA_CU_GRAPH_NODE_TYPE_CONDITIONAL;
        p.u.conditional.handle = n.cond, p.u.conditional.type = (int)n.cond_type, p.u.conditional.size = n.cond_size;
        p.u.conditional.ctx = cx;
        if ((rc = g->cu.cuGraphAddNode_v2(&made, t->graph, deps, NULL, n.ndeps, &p))) break;
        for (k = 0; k < n.cond_size; ++k) {
            uint64_t id = 0;
            if (!p.u.conditional.bodies || !twin_new(cl, p.u.conditional.bodies[k], root, &id))
                return reply_invalid(cl, r, 2, "%s: server out of memory", what); /* (the node stays, unusable) */
            for (int b = 0; b < 8; ++b) bodies[8 * k + b] = (uint8_t)(id >> (8 * b));
        }
        r->blob_len = 8 * n.cond_size;
        break;
    }
    case VCUDA_GNODE_ALLOC: {
        size_t total = 0;
        if (!g->cu.cuDeviceTotalMem_v2(&total, g->dev) && n.size > total)
            return reply_invalid(cl, r, 2, "%s: an allocation of %llu bytes on a device of %zu", what,
                                 (unsigned long long)n.size, total);
        if (alloc_refused(cl, r, what, n.size)) return 0;
        if (grow((void **)&root->allocs, &root->cap_allocs, root->nallocs + 1, sizeof(uint64_t), MAX_ALLOCS))
            return uncharge(cl, n.size), reply_invalid(cl, r, 2, "%s: server out of memory", what);
        mem_alloc_node_params p;
        memset(&p, 0, sizeof p);
        p.pool.alloc_type = VCUDA_CU_MEM_ALLOCATION_TYPE_PINNED;
        p.pool.location_type = VCUDA_CU_MEM_LOCATION_TYPE_DEVICE, p.pool.location_id = g->dev;
        p.bytesize = n.size;
        if ((rc = g->cu.cuGraphAddMemAllocNode(&made, t->graph, deps, n.ndeps, &p))) {
            uncharge(cl, n.size);
            break;
        }
        cl->allocs[cl->nalloc++] = (allocation){p.dptr, n.size, NULL, 1};
        root->allocs[root->nallocs++] = p.dptr;
        r->v[0] = p.dptr;
        break;
    }
    case VCUDA_GNODE_FREE: {
        /* By base, among graph allocations only: a range lookup would also match the end
         * of an ordinary allocation that the driver placed right before this one. */
        allocation *a = NULL;
        for (uint32_t k = 0; k < cl->nalloc && !a; ++k)
            if (cl->allocs[k].graph && cl->allocs[k].base == n.dst) a = &cl->allocs[k];
        if (!a)
            return reply_invalid(cl, r, 1, "%s: 0x%llx is not a graph allocation of this client", what,
                                 (unsigned long long)n.dst);
        if (push_u64(&root->frees, &root->nfrees, &root->cap_frees, n.dst, MAX_ALLOCS))
            return reply_invalid(cl, r, 2, "%s: server out of memory", what);
        if ((rc = g->cu.cuGraphAddMemFreeNode(&made, t->graph, deps, n.ndeps, n.dst))) --root->nfrees;
        break;
    }
    default: {
        uint8_t *saved = root->shape.kinds;
        root->shape.kinds = t->kinds;
        int refused = graph_node_check(cl, &n, index, &root->shape, r, what);
        root->shape.kinds = saved;
        if (refused) return 0;
        rc = graph_node_add(g, cl, t->graph, &n, &made, deps);
    }
    }
    if (rc) return reply_cu(g, cl, r, what, rc);
    for (uint32_t k = 0; k < n.ndeps; ++k) twin_edge(t, vcuda_graph_dep(&n, k), index); /* (room checked) */
    t->nodes[t->n] = made, t->kinds[t->n++] = (uint8_t)n.kind;
    ++root->nodes_all, ++cl->graph_nodes;
    return 0;
}

/* GRAPH_TWIN_ADD_EDGE: `to` waits for `from` too. */
static int twin_add_edge(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    static _Thread_local uint8_t seen[VCUDA_MAX_GRAPH_NODES];
    static _Thread_local uint32_t stack[VCUDA_MAX_GRAPH_NODES];
    twin *t = twin_of(cl, q->v[0]);
    uint64_t from = q->v[1], to = q->v[2];
    CUresult rc;
    if (!t) return reply_invalid(cl, r, 400, "GRAPH_TWIN_ADD_EDGE: unknown graph");
    if (from >= t->n || to >= t->n || from == to)
        return reply_invalid(cl, r, 1, "GRAPH_TWIN_ADD_EDGE: nodes %llu -> %llu of a graph of %u", (unsigned long long)from,
                             (unsigned long long)to, t->n);
    for (uint32_t e = 0; e < t->nedges; ++e)
        if (t->edges[2 * e] == from && t->edges[2 * e + 1] == to)
            return reply_invalid(cl, r, 1, "GRAPH_TWIN_ADD_EDGE: the dependency exists");
    if (twin_reaches(t, (uint32_t)from, (uint32_t)to, seen, stack))
        return reply_invalid(cl, r, 1, "GRAPH_TWIN_ADD_EDGE: node %llu already waits for node %llu: a cycle",
                             (unsigned long long)from, (unsigned long long)to);
    if (t->nedges >= MAX_TWIN_EDGES || twin_edge(t, (uint32_t)from, (uint32_t)to))
        return reply_invalid(cl, r, 2, "GRAPH_TWIN_ADD_EDGE: the graph's edge limit (%u)", MAX_TWIN_EDGES);
    if ((rc = g->cu.cuGraphAddDependencies_v2(t->graph, &t->nodes[from], &t->nodes[to], NULL, 1))) {
        --t->nedges;
        return reply_cu(g, cl, r, "GRAPH_TWIN_ADD_EDGE", rc);
    }
    return 0;
}

/* GRAPH_TWIN_INSTANTIATE: an exec of the top twin itself. */
static int twin_instantiate(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    twin *t = twin_of(cl, q->v[0]);
    const uint64_t known = 1 /* auto free on launch */ | 8 /* use node priority */;
    if (!t) return reply_invalid(cl, r, 400, "GRAPH_TWIN_INSTANTIATE: unknown graph");
    if (t->root != t) return reply_invalid(cl, r, 1, "GRAPH_TWIN_INSTANTIATE: a conditional node's body graph");
    if (t->dead) return reply_invalid(cl, r, 400, "GRAPH_TWIN_INSTANTIATE: a module the graph's kernels are in was unloaded");
    if (q->v[1] & ~known)
        return reply_invalid(cl, r, 1, "GRAPH_TWIN_INSTANTIATE: flags 0x%llx", (unsigned long long)q->v[1]);
    graph_exec *x = calloc(1, sizeof *x);
    size_t nr = t->shape.nranges, nm = t->shape.nmodules;
    if (x) {
        x->made = malloc((t->n ? t->n : 1) * sizeof *x->made), x->kinds = malloc(t->n ? t->n : 1);
        x->ranges = malloc((nr ? nr : 1) * sizeof *x->ranges), x->modules = malloc((nm ? nm : 1) * sizeof *x->modules);
    }
    if (!x || !x->made || !x->kinds || !x->ranges || !x->modules) {
        if (x) free(x->made), free(x->kinds), free(x->ranges), free(x->modules), free(x);
        return reply_invalid(cl, r, 2, "GRAPH_TWIN_INSTANTIATE: server out of memory");
    }
    if (t->n) memcpy(x->made, t->nodes, t->n * sizeof *x->made), memcpy(x->kinds, t->kinds, t->n);
    if (nr) memcpy(x->ranges, t->shape.ranges, nr * sizeof *x->ranges);
    if (nm) memcpy(x->modules, t->shape.modules, nm * sizeof *x->modules);
    x->nodes = t->n, x->nranges = (uint32_t)nr, x->nmodules = x->cap_modules = (uint32_t)nm;
    x->tw = t, ++t->refs;
    CUresult rc = g->cu.cuGraphInstantiateWithFlags(&x->exec, t->graph, q->v[1]);
    uint64_t id = rc ? 0 : add_handle(cl, H_GRAPH_EXEC, x);
    if (!id) {
        if (rc) reply_cu(g, cl, r, "GRAPH_TWIN_INSTANTIATE", rc);
        else reply_invalid(cl, r, 2, "GRAPH_TWIN_INSTANTIATE: handle limit reached");
        graph_exec_free(g, cl, x, 1);
        return 0;
    }
    r->v[0] = id, r->nv = 1;
    return 0;
}

/* Module m is unloaded: the client's twins with kernels in it cannot be instantiated or
 * grown any more (their execs went with graph_execs_drop). */
static void twins_module_gone(client *cl, CUmodule m)
{
    for (uint32_t i = 0; i < cl->nhandle; ++i)
        if (cl->handles[i].kind == H_GRAPH) {
            twin *t = ((twin *)cl->handles[i].obj)->root;
            for (uint32_t k = 0; k < t->shape.nmodules; ++k) t->dead |= t->shape.modules[k] == m;
        }
}

/* The twin and graph-memory requests (wire codes 80..). */
static int twin_requests(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    const char *op = vcuda_opcode_name(q->hdr.opcode);
    CUcontext cx = cl->own ? cl->own : g->ctx;
    CUresult rc = 0;
    twin *t;
    switch (q->hdr.opcode) {
    case VCUDA_OP_GRAPH_TWIN_CREATE: {
        CUgraph graph;
        uint64_t id = 0;
        if (cl->nhandle >= MAX_HANDLES) return reply_invalid(cl, r, 2, "%s: handle limit reached", op);
        if ((rc = g->cu.cuGraphCreate(&graph, 0))) return reply_cu(g, cl, r, op, rc);
        if (!twin_new(cl, graph, NULL, &id)) {
            g->cu.cuGraphDestroy(graph);
            return reply_invalid(cl, r, 2, "%s: server out of memory", op);
        }
        r->v[0] = id, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_GRAPH_TWIN_DESTROY:
        if (!(t = twin_of(cl, q->v[0]))) return reply_invalid(cl, r, 400, "%s: unknown graph", op);
        if (t->root != t) return reply_invalid(cl, r, 1, "%s: a conditional node's body graph goes with its node", op);
        twin_destroy(g, cl, t);
        return 0;
    case VCUDA_OP_GRAPH_TWIN_ADD_NODE: return twin_add_node(g, cl, q, r);
    case VCUDA_OP_GRAPH_TWIN_ADD_EDGE: return twin_add_edge(g, cl, q, r);
    case VCUDA_OP_GRAPH_TWIN_INSTANTIATE: return twin_instantiate(g, cl, q, r);
    case VCUDA_OP_GRAPH_COND_CREATE: {
        unsigned long long v;
        if (!(t = twin_of(cl, q->v[0]))) return reply_invalid(cl, r, 400, "%s: unknown graph", op);
        if (q->v[2] > 1) return reply_invalid(cl, r, 1, "%s: flags 0x%llx", op, (unsigned long long)q->v[2]);
        if (grow((void **)&t->root->conds, &t->root->cap_conds, t->root->nconds + 1, sizeof(uint64_t), MAX_HANDLES))
            return reply_invalid(cl, r, 2, "%s: conditional handle limit reached", op);
        if ((rc = g->cu.cuGraphConditionalHandleCreate(&v, t->graph, cx, (unsigned)q->v[1], (unsigned)q->v[2])))
            return reply_cu(g, cl, r, op, rc);
        t->root->conds[t->root->nconds++] = v;
        r->v[0] = v, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_GRAPH_MEM_ATTR_GET: {
        unsigned long long v = 0;
        if (q->v[0] > 3) return reply_invalid(cl, r, 1, "%s: attribute %llu", op, (unsigned long long)q->v[0]);
        if ((rc = g->cu.cuDeviceGetGraphMemAttribute(g->dev, (int)q->v[0], &v))) return reply_cu(g, cl, r, op, rc);
        r->v[0] = v > VCUDA_MAX_SIZE ? VCUDA_MAX_SIZE : v, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_GRAPH_MEM_ATTR_RESET: {
        unsigned long long zero = 0;
        if (q->v[0] != 1 && q->v[0] != 3) /* the high watermarks, USED_MEM_HIGH and RESERVED_MEM_HIGH */
            return reply_invalid(cl, r, 1, "%s: attribute %llu cannot be set", op, (unsigned long long)q->v[0]);
        return (rc = g->cu.cuDeviceSetGraphMemAttribute(g->dev, (int)q->v[0], &zero)) ? reply_cu(g, cl, r, op, rc) : 0;
    }
    case VCUDA_OP_GRAPH_MEM_TRIM: return (rc = g->cu.cuDeviceGraphMemTrim(g->dev)) ? reply_cu(g, cl, r, op, rc) : 0;
    default: return reply_invalid(cl, r, 801, "%s is not served by vcuda-server", op);
    }
}

/* What a refused module load says (its data is charged before the driver sees the
 * image, so the message names what was refused, not an API the client called). */
#define MODULE_CHARGE "vcuda: module load: its __device__ data and code"

/* MODULE_LOOKUP / MODULE_LOAD: the client gets a module of its own, loaded from the
 * validated image (cached by the hash the server computed, so a later client of the
 * same program need not send it again).  Its data -- __device__ and __constant__
 * variables, code -- is charged to the tenant before the driver loads it, sized in the
 * walk that validates the image (within the decompression bounds, each entry
 * decompressed once) or, for a cached image, as it was then; a PTX variable whose size
 * the text does not give is sized by the driver after loading, and the module unloaded
 * again if that takes the tenant past its quota. */
static int module(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    const char *api = vcuda_opcode_name(q->hdr.opcode);
    uint8_t *img = NULL, h[VCUDA_HASH_SIZE];
    size_t len = 0;
    char bad[VCUDA_WHY_LEN];
    uint64_t bytes = 0, extra = 0;
    unsized_names un;
    memset(&un, 0, sizeof un);
    if (cl->nmodules >= limits.max_modules)
        return reply_invalid(cl, r, 2, "%s: this client has %u modules loaded (limit %u)", api, cl->nmodules,
                             limits.max_modules);
    if (q->hdr.opcode == VCUDA_OP_MODULE_LOOKUP) {
        pthread_mutex_lock(&g->mu);
        img = cache_copy(g, q->hash, &len, &bytes, &un);
        pthread_mutex_unlock(&g->mu);
        if (!img) return reply_invalid(cl, r, CU_NOT_FOUND, "MODULE_LOOKUP: not cached; send MODULE_LOAD");
        memcpy(h, q->hash, sizeof h);
    } else {
        /* the name first (cheap next to validating): the same bytes validated for an
         * earlier client are taken from the cache, not decompressed and checked again */
        vcuda_sha256(q->blob, q->blob_len, h);
        if (memcmp(h, q->hash, VCUDA_HASH_SIZE))
            return reply_invalid(cl, r, 1, "MODULE_LOAD: the image does not hash to the name sent");
        pthread_mutex_lock(&g->mu);
        img = cache_copy(g, h, &len, &bytes, &un);
        pthread_mutex_unlock(&g->mu);
        if (!img) {
            /* otherwise every header, offset and size is checked before the driver sees
             * a byte (and the data sized in the same walk), and the driver gets a private
             * copy of exactly the validated bytes */
            int v = vcuda_image_footprint(q->blob, q->blob_len, &bytes, collect_unsized, &un, bad);
            int overflow = un.overflow;
            if (v || overflow) free(un.names);
            if (v == VCUDA_IMAGE_BUSY) return reply_invalid(cl, r, 2 /* cudaErrorMemoryAllocation */, "MODULE_LOAD: %s", bad);
            if (v) return reply_invalid(cl, r, 200 /* cudaErrorInvalidKernelImage */, "MODULE_LOAD: %s", bad);
            if (overflow)
                return reply_invalid(cl, r, 200, "%s: more than %d PTX variables of types this server cannot size", api,
                                     MAX_UNSIZED);
            if (!(img = malloc(q->blob_len)))
                return free(un.names), reply_invalid(cl, r, 2, "MODULE_LOAD: server out of memory");
            memcpy(img, q->blob, q->blob_len);
            len = q->blob_len;
        }
    }
    if (charge(cl, r, MODULE_CHARGE, bytes)) {
        free(img);
        free(un.names);
        return 0;
    }
    cached_module *m = calloc(1, sizeof *m);
    CUresult rc = m ? g->cu.cuModuleLoadData(&m->mod, img) : 2;
    if (!rc && q->hdr.opcode == VCUDA_OP_MODULE_LOAD) {
        pthread_mutex_lock(&g->mu);
        cache_put(g, h, img, len, bytes, &un);
        pthread_mutex_unlock(&g->mu);
    }
    free(img);
    /* (the driver loaded one entry: others' names are not found) */
    for (const char *name = un.names; name && name < un.names + un.len; name += strlen(name) + 1) {
        CUdeviceptr p;
        size_t size = 0;
        if (!rc && !g->cu.cuModuleGetGlobal_v2(&p, &size, m->mod, name)) extra += size;
    }
    free(un.names);
    int refused = 0;
    if (!rc && extra) { /* charged anew in whole, so that the refusal names the whole */
        uncharge(cl, bytes);
        if (charge(cl, r, MODULE_CHARGE, bytes + extra)) refused = 1, g->cu.cuModuleUnload(m->mod);
        else bytes += extra;
    }
    if (rc || refused) {
        free(m);
        if (!refused) uncharge(cl, bytes);
        return refused ? 0 : reply_cu(g, cl, r, api, rc);
    }
    memcpy(m->hash, h, sizeof h);
    m->bytes = bytes;
    uint64_t id = add_handle(cl, H_MODULE, m);
    if (!id) {
        g->cu.cuModuleUnload(m->mod);
        uncharge(cl, m->bytes);
        free(m);
        return reply_invalid(cl, r, 2, "MODULE: handle limit reached");
    }
    ++cl->nmodules;
    r->v[0] = id, r->nv = 1;
    return 0;
}

/* Unloads a client's module and forgets its functions. */
static void module_unload(vcuda_gpu *g, client *cl, handle *h)
{
    cached_module *m = h->obj;
    remove_handle(cl, h);
    for (uint32_t i = cl->nhandle; i-- > 0;)
        if (cl->handles[i].kind == H_FUNCTION && ((function_info *)cl->handles[i].obj)->owner == m->mod) {
            free(cl->handles[i].obj);
            remove_handle(cl, &cl->handles[i]);
        }
    /* and its __device__ variables: once unloaded, their addresses may be handed to
     * another client's allocation */
    for (uint32_t i = cl->nglobal; i-- > 0;)
        if (cl->globals[i].owner == m->mod) cl->globals[i] = cl->globals[--cl->nglobal];
    graph_execs_drop(g, cl, m->mod, 1); /* and the graphs that launch its kernels */
    twins_module_gone(cl, m->mod);
    g->cu.cuModuleUnload(m->mod);
    uncharge(cl, m->bytes);
    free(m);
    --cl->nmodules;
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
static void drain_output(vcuda_gpu *g);
static int capturing(vcuda_gpu *g);

/* Whether one more allocation of `bytes` would break this client's quotas (the error
 * reply is then in r).  Otherwise makes room in the table and charges the bytes (the
 * caller gives them back if the driver then fails). */
static int alloc_refused(client *cl, vcuda_msg *r, const char *api, uint64_t bytes)
{
    if (grow((void **)&cl->allocs, &cl->cap_alloc, cl->nalloc + 1, sizeof(allocation), MAX_ALLOCS))
        return reply_invalid(cl, r, 2, "%s: allocation limit reached", api), 1;
    return charge(cl, r, api, bytes);
}

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
    if (!cl->tenant) cl->tenant = c->tenant;
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
        uint32_t word; /* on the client's side stream: never waits for its kernels */
        if ((rc = g->cu.cuMemcpyDtoHAsync_v2(&word, cl->own ? cl->touch : g->touch, sizeof word, cl->aux)) ||
            (rc = g->cu.cuStreamSynchronize(cl->aux)))
            return reply_cu(g, cl, r, "TOUCH", rc);
        return 0;
    }
    case VCUDA_OP_DRIVER_GET_VERSION: {
        int v = 0;
        if ((rc = g->cu.cuDriverGetVersion(&v))) return reply_cu(g, cl, r, "DRIVER_GET_VERSION", rc);
        r->v[0] = (uint64_t)v, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_DEVICE_SYNCHRONIZE:
        return (rc = sync_client(g, cl)) ? reply_cu(g, cl, r, "DEVICE_SYNCHRONIZE", rc) : 0;
    case VCUDA_OP_DEVICE_RESET: {
        /* this client's memory, streams, events and modules (the shared context stays);
         * its device printf output so far goes with it into the new session */
        if ((rc = sync_client(g, cl))) return reply_cu(g, cl, r, "DEVICE_RESET", rc);
        outbuf out[2] = {{0}};
        if (capturing(g)) {
            drain_output(g);
            pthread_mutex_lock(&g->out_mu);
            memcpy(out, cl->out, sizeof out), memset(cl->out, 0, sizeof cl->out);
            pthread_mutex_unlock(&g->out_mu);
        }
        release_client(g, c);
        if (attach_client(g, c, why)) return free(out[0].b), free(out[1].b), -1;
        cl = c->user;
        pthread_mutex_lock(&g->out_mu);
        for (int k = 0; k < 2; ++k)
            if (!cl->out[k].b) cl->out[k] = out[k];
            else free(out[k].b); /* (a new session's output came first: no order to keep) */
        pthread_mutex_unlock(&g->out_mu);
        return 0;
    }
    case VCUDA_OP_MALLOC: {
        CUdeviceptr p;
        if (q->v[0] == 0) return reply_invalid(cl, r, 1, "MALLOC: size 0");
        if (alloc_refused(cl, r, "MALLOC", q->v[0])) return 0;
        if ((rc = g->cu.cuMemAlloc_v2(&p, q->v[0]))) return uncharge(cl, q->v[0]), reply_cu(g, cl, r, "MALLOC", rc);
        cl->allocs[cl->nalloc++] = (allocation){p, q->v[0], NULL, 0};
        r->v[0] = p, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_FREE:
        for (uint32_t i = 0; i < cl->nalloc; ++i)
            if (cl->allocs[i].base == q->v[0]) {
                if ((rc = g->cu.cuMemFree_v2(q->v[0]))) return reply_cu(g, cl, r, "FREE", rc);
                uncharge(cl, cl->allocs[i].size);
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
        if (q->v[2] && (rc = g->cu.cuMemcpyDtoDAsync_v2(q->v[0], q->v[1], q->v[2], s)))
            return reply_cu(g, cl, r, "MEMCPY_D2D", rc);
        return 0;
    case VCUDA_OP_MEMSET:
        if (stream_of(cl, q->v[3], &s)) return reply_invalid(cl, r, 400, "MEMSET: unknown stream");
        if (!find_range(cl, q->v[0], q->v[2]))
            return reply_invalid(cl, r, 1, "MEMSET: the range is not inside an allocation of this client");
        if (q->v[2] && (rc = g->cu.cuMemsetD8Async(q->v[0], (unsigned char)q->v[1], q->v[2], s)))
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
        if (is_stream) reap_streams(g, cl);
        /* every stream non-blocking on the device: a client's blocking stream orders with
         * its own default stream only (join_streams), never with other clients' work */
        rc = is_stream ? g->cu.cuStreamCreate((CUstream *)&o, 1 /* CU_STREAM_NON_BLOCKING */)
                       : g->cu.cuEventCreate((CUevent *)&o, (unsigned)q->v[0]);
        if (rc) return reply_cu(g, cl, r, is_stream ? "STREAM_CREATE" : "EVENT_CREATE", rc);
        uint64_t id = add_handle(cl, is_stream ? H_STREAM : H_EVENT, o);
        if (!id) {
            is_stream ? g->cu.cuStreamDestroy_v2(o) : g->cu.cuEventDestroy_v2(o);
            return reply_invalid(cl, r, 2, "handle limit reached");
        }
        if (is_stream) cl->handles[cl->nhandle - 1].flags = (unsigned)q->v[0];
        r->v[0] = id, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_STREAM_DESTROY:
        if (!(h = find_handle(cl, q->v[0], H_STREAM))) return reply_invalid(cl, r, 400, "STREAM_DESTROY: unknown stream");
        h->retired = 1; /* (see reap_streams) */
        reap_streams(g, cl);
        return 0;
    case VCUDA_OP_STREAM_SYNCHRONIZE:
        if (waited_stream(cl, q->v[0], &s)) return reply_invalid(cl, r, 400, "STREAM_SYNCHRONIZE: unknown stream");
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
    case VCUDA_OP_MODULE_UNLOAD: /* the image stays cached for the next client, its state goes */
        if (!(h = find_handle(cl, q->v[0], H_MODULE))) return reply_invalid(cl, r, 400, "MODULE_UNLOAD: unknown module");
        module_unload(g, cl, h);
        return 0;
    case VCUDA_OP_FUNCTION_GET: return function_get(g, cl, q, r);
    case VCUDA_OP_LAUNCH:
    case VCUDA_OP_LAUNCH_EX:
    case VCUDA_OP_GRAPH_LAUNCH:
        if (q->hdr.opcode != VCUDA_OP_GRAPH_LAUNCH) launch(g, cl, q, r);
        else graph_launch(g, cl, q, r);
        if ((q->hdr.flags & VCUDA_FLAG_NOREPLY) && (r->hdr.flags & VCUDA_FLAG_ERROR) && !cl->launch_error) {
            /* nobody waits for this reply: the client's next call gets the error */
            cl->launch_error = (int)r->v[0];
            snprintf(cl->launch_msg, sizeof cl->launch_msg, "an earlier %s failed: %.280s",
                     q->hdr.opcode != VCUDA_OP_GRAPH_LAUNCH ? "kernel launch" : "graph launch", cl->msg);
        }
        return 0;
    default: return more_requests(g, cl, q, r);
    }
}

/* ---- device printf ---------------------------------------------------------------- *
 * The driver writes device printf output to this process's stdout, from whichever
 * thread synchronizes, for every context alike: the bytes do not say whose kernel
 * printed them.  stdout is therefore a pipe (capture_output) whose bytes go to one
 * owner, the server's only client, and are shipped to it with PRINTF_FETCH.  While two
 * or more clients are attached there is no owner and the output goes to the server's
 * own stdout (its log), for every client.  Each change of owner first drains what the
 * pipe holds into the old owner's buffer (out_mu held), and a client that detaches has
 * synchronized its work first, so no byte of one client's kernels is handed to another:
 * a client attaching to an empty server owns the output at once; the one client left
 * when the others have gone takes it at the start of its next request (a synchronize it
 * had under way may have written a departed client's bytes, which go to the log).
 * --isolation context does not change this: the contexts are separate, the stream the
 * driver writes them to is not; with --isolation process each tenant's serving process
 * has a stdout of its own, so the rule holds per tenant.  Device assertion messages ("... Assertion `EXPR`
 * failed.") follow the same rule: the driver writes them to stderr while it reports the
 * sticky error (710), so stderr is a pipe too, whose lines all go on to the server's log
 * and whose assertion lines also to the owner; the reply carrying the 710 says output
 * waits, and the session ends only once the client has fetched it.  With several
 * clients attached nobody owns them: they are in the server's log only. */

#define OUT_MAX (64u << 20) /* output kept for a client that does not synchronize */

static int capturing(vcuda_gpu *g) { return g->out_fd[OUT_PRINTF] >= 0 || g->out_fd[OUT_ASSERT] >= 0; }

static void out_append(outbuf *o, const char *p, size_t n)
{
    size_t keep = o->len + n > OUT_MAX ? OUT_MAX - o->len : n;
    char *q = keep ? realloc(o->b, o->len + keep) : o->b;
    if (!q) keep = 0;
    else o->b = q;
    if (keep) memcpy(o->b + o->len, p, keep);
    o->len += keep;
    o->dropped += n - keep;
}

/* The driver's own form: "FILE:LINE: FUNCTION: block: [x,y,z], thread: [x,y,z] Assertion
 * `EXPR` failed."  Only such lines of the stderr pipe are a client's: everything else
 * there is this server's own log. */
static int assertion_line(const char *l)
{
    const char *a = strstr(l, "block: [");
    return a && (a = strstr(a, "thread: [")) && (a = strstr(a, "Assertion `")) && strstr(a, "` failed.");
}

/* Moves what the pipes hold to their owner's buffers or to the log (out_mu held).
 * stdout's bytes are device printf's; stderr's are the server's own log lines and the
 * driver's device assertion messages: all of it goes on to the log (the server's stderr
 * as it was, where its operator looks for why a context was lost), and the assertion
 * lines also to the owner. */
static void drain_locked(vcuda_gpu *g)
{
    char buf[65536];
    ssize_t n;
    for (int k = 0; k < 2; ++k) {
        while (g->out_fd[k] >= 0 && (n = read(g->out_fd[k], buf, sizeof buf)) > 0) {
            client *o = g->out_owner;
            if (k == OUT_PRINTF && o) {
                out_append(&o->out[OUT_PRINTF], buf, (size_t)n);
                continue;
            }
            for (ssize_t i = 0; k == OUT_ASSERT && i < n; ++i) { /* longer lines than eline are not the driver's */
                if (g->elen < sizeof g->eline - 1) g->eline[g->elen] = buf[i];
                ++g->elen;
                if (buf[i] != '\n') continue;
                if (g->elen < sizeof g->eline) {
                    g->eline[g->elen] = 0;
                    if (o && assertion_line(g->eline)) out_append(&o->out[OUT_ASSERT], g->eline, g->elen);
                }
                g->elen = 0;
            }
            /* written without out_mu: a log nobody reads may block this write, and no
             * client's request may wait for that (the bytes are nobody's, or a copy) */
            pthread_mutex_unlock(&g->out_mu);
            for (ssize_t at = 0, w; at < n; at += w > 0 ? w : n) w = write(g->log_fd[k], buf + at, (size_t)(n - at));
            pthread_mutex_lock(&g->out_mu);
        }
    }
}

/* The driver writes device output while a synchronizing call runs; fflush pushes what
 * stdio holds, the drain takes it, so the reply to that call says so. */
static void drain_output(vcuda_gpu *g)
{
    fflush(stdout);
    fflush(stderr);
    pthread_mutex_lock(&g->out_mu);
    drain_locked(g);
    pthread_mutex_unlock(&g->out_mu);
}

/* A client attaches (delta 1) or detaches (-1): attached_now clients are left (g->mu
 * held).  The pipes' bytes so far belong to the owner before the change. */
static void output_owner_change(vcuda_gpu *g, client *cl, int delta, int attached_now)
{
    if (!capturing(g)) return;
    fflush(stdout);
    fflush(stderr);
    pthread_mutex_lock(&g->out_mu);
    drain_locked(g);
    if (delta > 0) g->out_owner = attached_now == 1 ? cl : NULL;
    else g->out_owner = NULL;
    __atomic_store_n(&g->out_claimable, delta < 0 && attached_now == 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&g->out_mu);
}

/* Between requests nobody drains: a kernel printing more than a pipe holds would block
 * the driver (and a full stderr pipe the server's own logging), so this thread empties
 * them whenever they have data. */
static void *out_reader(void *arg)
{
    vcuda_gpu *g = arg;
    struct pollfd p[2] = {{g->out_fd[0], POLLIN, 0}, {g->out_fd[1], POLLIN, 0}};
    while (!*g->stop) {
        if (poll(p, 2, 200) > 0) {
            pthread_mutex_lock(&g->out_mu);
            drain_locked(g);
            pthread_mutex_unlock(&g->out_mu);
            if ((p[0].revents | p[1].revents) & (POLLHUP | POLLERR)) break;
        }
    }
    return NULL;
}

static int pending(const client *cl)
{
    return cl->out[0].len || cl->out[0].dropped || cl->out[1].len || cl->out[1].dropped;
}

/* A chunk of device printf output first, then of assertion messages; the reply says
 * which (1: stdout, 2: stderr, as the real runtime's driver writes them). */
static int printf_fetch(vcuda_gpu *g, client *cl, vcuda_msg *r)
{
    r->v[0] = 1, r->nv = 1;
    if (!capturing(g)) return r->blob = NULL, r->blob_len = 0, 0;
    pthread_mutex_lock(&g->out_mu);
    int k = cl->out[OUT_PRINTF].len || cl->out[OUT_PRINTF].dropped ? OUT_PRINTF : OUT_ASSERT;
    outbuf *o = &cl->out[k];
    if (o->dropped) {
        char note[96];
        int n = snprintf(note, sizeof note, "\n[vcuda-server: %zu bytes of device %s output dropped]\n", o->dropped,
                         k == OUT_PRINTF ? "printf" : "assertion");
        char *q = realloc(o->b, o->len + (size_t)n);
        if (q) memcpy(q + o->len, note, (size_t)n), o->b = q, o->len += (size_t)n, o->dropped = 0;
    }
    size_t n = o->len < g->chunk ? o->len : g->chunk;
    char *b = realloc(cl->sent, n ? n : 1); /* the reply's bytes, alive until the next fetch */
    if (b) {
        cl->sent = b;
        if (n) memcpy(cl->sent, o->b, n), memmove(o->b, o->b + n, o->len - n);
        o->len -= n;
    }
    pthread_mutex_unlock(&g->out_mu);
    if (!b) return reply_invalid(cl, r, 2, "PRINTF_FETCH: server out of memory");
    r->v[0] = (uint64_t)k + 1;
    r->blob = (const uint8_t *)cl->sent, r->blob_len = (uint32_t)n;
    return 0;
}

static int synchronizes(unsigned op)
{
    return op == VCUDA_OP_DEVICE_SYNCHRONIZE || op == VCUDA_OP_STREAM_SYNCHRONIZE || op == VCUDA_OP_EVENT_SYNCHRONIZE ||
           op == VCUDA_OP_MEMCPY_D2H || op == VCUDA_OP_EVENT_QUERY || op == VCUDA_OP_STREAM_QUERY ||
           op == VCUDA_OP_DEVICE_RESET;
}

/* The one client left after the others went takes the output, between two of its
 * requests: no synchronize of its own is under way, every departed client synchronized
 * and drained before it went, so what the pipe holds is nobody's (to the log). */
static void claim_output(vcuda_gpu *g, client *cl)
{
    pthread_mutex_lock(&g->mu);
    fflush(stdout);
    fflush(stderr);
    pthread_mutex_lock(&g->out_mu);
    if (g->out_claimable && g->attached == 1 && !g->out_owner) {
        drain_locked(g);
        g->out_owner = cl;
    }
    __atomic_store_n(&g->out_claimable, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&g->out_mu);
    pthread_mutex_unlock(&g->mu);
}

static int handle_request(void *ctx, vcuda_conn *c, const vcuda_msg *q, vcuda_msg *r, char *why)
{
    vcuda_gpu *g = ctx;
    /* (read unlocked: a stale value only claims one request later; claim_output re-checks) */
    if (capturing(g) && c->user && __atomic_load_n(&g->out_claimable, __ATOMIC_RELAXED)) claim_output(g, c->user);
    int rc = handle_core(ctx, c, q, r, why);
    client *cl = c->user; /* DEVICE_RESET replaced it */
    if (capturing(g) && cl) {
        /* a call that failed with a sticky error (a device assert) may not be one that
         * synchronizes: the driver wrote its messages while reporting it */
        if (synchronizes(q->hdr.opcode) || cl->fatal) drain_output(g);
        pthread_mutex_lock(&g->out_mu);
        if (pending(cl)) r->hdr.flags |= VCUDA_FLAG_OUTPUT;
        pthread_mutex_unlock(&g->out_mu);
    }
    return rc;
}

/* ---- context limits ------------------------------------------------------------------ *
 * LIMIT_SET: limits are the context's.  On the client's own context (--isolation
 * context) it sets what it likes; on the shared one only while it is the only client,
 * with no other client attaching meanwhile.  What a limit makes the device reserve is
 * charged to the client's tenant: the stack its size times the device's resident threads
 * (SMs x threads per SM: the driver reserves a stack for every thread that can run at
 * once), the malloc heap and the printf FIFO their size, each above the value the context
 * had before the tenant changed it.  The L2 limits reserve no device memory; the device
 * runtime's (sync depth, pending launches) reserve an amount the driver does not tell,
 * so a tenant with a quota cannot set them.  A limit set on the shared context is the
 * tenant's until its last connection leaves: then the context gets its previous values
 * back and the tenant its quota, so the next client finds the context as it was.  On a
 * client's own context the limits go with the context, at the client's end.  With
 * --isolation process the shared context is the tenant's serving process's, which holds
 * all of that tenant's connections: the same restore when the last one leaves (the
 * process lingers, serving the tenant's next client), and a process that has exited
 * takes its context with it (the next one starts from the driver's defaults). */
static const char *const limit_names[NLIMITS] = {
    "cudaLimitStackSize", "cudaLimitPrintfFifoSize", "cudaLimitMallocHeapSize", "cudaLimitDevRuntimeSyncDepth",
    "cudaLimitDevRuntimePendingLaunchCount", "cudaLimitMaxL2FetchGranularity", "cudaLimitPersistingL2CacheSize"};

/* Bytes of device memory limit `which` at value v reserves (see above). */
static uint64_t limit_bytes(const vcuda_gpu *g, int which, uint64_t v)
{
    if (which == LIMIT_STACK) return g->threads && v > UINT64_MAX / g->threads ? UINT64_MAX : v * g->threads;
    return which == LIMIT_PRINTF_FIFO || which == LIMIT_HEAP ? v : 0;
}

/* The charge for limit `which` at v, its holder's earlier value being base. */
static uint64_t limit_charge(const vcuda_gpu *g, int which, uint64_t base, uint64_t v)
{
    uint64_t now = limit_bytes(g, which, v), before = limit_bytes(g, which, base);
    return now > before ? now - before : 0;
}

/* The tenant's quota for `bytes` more of a limit: 0, or -1 (nothing charged, the
 * refusal in r).  own: a client's own context (charged as its memory). */
static int limit_charge_take(vcuda_gpu *g, client *cl, vcuda_msg *r, int own, int which, uint64_t v, uint64_t bytes)
{
    uint64_t used = 0;
    vcuda_tenant *t = cl->tenant;
    if (!bytes) return 0;
    if (!t || !vcuda_tenant_charge(t, bytes, &used)) {
        if (own) cl->mem_bytes += bytes; /* (its own context's: given back at its end) */
        return 0;
    }
    if (which == LIMIT_STACK)
        reply_invalid(cl, r, 2, "LIMIT_SET: %s of %llu bytes reserves %llu bytes of device memory (x %llu resident "
                      "threads): over tenant %s's quota of %llu bytes (%llu in use)", limit_names[which],
                      (unsigned long long)v, (unsigned long long)bytes, (unsigned long long)g->threads, t->name,
                      (unsigned long long)t->mem_quota, (unsigned long long)used);
    else
        reply_invalid(cl, r, 2, "LIMIT_SET: %s of %llu bytes: %llu more bytes of device memory, over tenant %s's quota "
                      "of %llu bytes (%llu in use)", limit_names[which], (unsigned long long)v,
                      (unsigned long long)bytes, t->name, (unsigned long long)t->mem_quota, (unsigned long long)used);
    return -1;
}

static void limit_charge_give(client *cl, int own, vcuda_tenant *t, uint64_t bytes)
{
    if (own) uncharge(cl, bytes);
    else if (t) vcuda_tenant_uncharge(t, bytes);
}

/* Sets the limit with the charges that go with it (the holder's state in ls); the
 * reply in r either way. */
static int limit_apply(vcuda_gpu *g, client *cl, vcuda_msg *r, int own, limit_state *ls, int which, uint64_t v)
{
    size_t cur = 0, got = 0;
    CUresult rc;
    if ((rc = g->cu.cuCtxGetLimit(&cur, which))) return reply_cu(g, cl, r, "LIMIT_SET", rc);
    uint32_t bit = 1u << which;
    uint64_t base = ls->set & bit ? ls->prev[which] : cur, had = ls->charged[which];
    uint64_t want = limit_charge(g, which, base, v), held = want > had ? want : had;
    if (held > had && limit_charge_take(g, cl, r, own, which, v, held - had)) return 0;
    if ((rc = g->cu.cuCtxSetLimit(which, v))) {
        limit_charge_give(cl, own, cl->tenant, held - had);
        return reply_cu(g, cl, r, "LIMIT_SET", rc);
    }
    /* the driver may round the value up: the charge is for what it took */
    uint64_t took = g->cu.cuCtxGetLimit(&got, which) ? want : limit_charge(g, which, base, got);
    if (took > held && limit_charge_take(g, cl, r, own, which, got, took - held)) {
        g->cu.cuCtxSetLimit(which, cur);
        limit_charge_give(cl, own, cl->tenant, held - had);
        return 0;
    }
    if (took < held) limit_charge_give(cl, own, cl->tenant, held - took);
    ls->charged[which] = took;
    if (!(ls->set & bit)) ls->prev[which] = base, ls->set |= bit;
    return 0;
}

static int limit_set(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    if (q->v[0] >= NLIMITS) /* (the runtime's cudaLimit values are these) */
        return reply_invalid(cl, r, 217 /* cudaErrorUnsupportedLimit */, "LIMIT_SET: no limit %llu",
                             (unsigned long long)q->v[0]);
    int which = (int)q->v[0], own = cl->own != NULL;
    vcuda_tenant *t = cl->tenant;
    if (t && t->mem_quota && (which == LIMIT_SYNC_DEPTH || which == LIMIT_PENDING_LAUNCHES))
        return reply_invalid(cl, r, 801, "LIMIT_SET: %s reserves device memory this server cannot account for: "
                             "refused under tenant %s's quota", limit_names[which], t->name);
    if (own) return limit_apply(g, cl, r, 1, &cl->lims, which, q->v[1]);
    pthread_mutex_lock(&g->mu);
    int alone = g->attached == 1 && !g->limit_busy;
    if (alone) g->limit_busy = 1;
    pthread_mutex_unlock(&g->mu);
    if (!alone)
        return reply_invalid(cl, r, 801, "LIMIT_SET: the GPU context is shared with other clients of this "
                             "server; limits can be set with --isolation context or on a server of one's own");
    /* the only client: any earlier holder's connections are all gone (and its limits
     * restored), unless it is this client's tenant */
    limit_apply(g, cl, r, 0, &g->lims, which, q->v[1]);
    pthread_mutex_lock(&g->mu);
    if (g->lims.set && g->lim_owner != t) g->lim_owner = t, g->lim_owner_conns = 1;
    g->limit_busy = 0;
    pthread_cond_broadcast(&g->limit_done);
    pthread_mutex_unlock(&g->mu);
    return 0;
}

/* The shared context's limits back to what they were, the tenant's charge for them back
 * to it (its last connection on the context has gone; g->limit_busy held by the caller,
 * so no client attaches meanwhile).  A limit the driver no longer lets change (the heap,
 * once a kernel that uses malloc has run) stays, and so does its charge. */
static void limits_restore(vcuda_gpu *g, vcuda_tenant *t)
{
    limit_state *ls = &g->lims;
    for (int k = 0; k < NLIMITS; ++k) {
        if (!(ls->set & (1u << k))) continue;
        CUresult rc = g->cu.cuCtxSetLimit(k, ls->prev[k]);
        if (rc) {
            fprintf(stderr, "vcuda-server: device %d: tenant %s left; %s could not be set back to %zu: %s (CUresult "
                    "%d): the context keeps it, and the tenant its charge of %llu bytes\n", g->ordinal,
                    t ? t->name : "?", limit_names[k], ls->prev[k], cu_error_text(g, rc), rc,
                    (unsigned long long)ls->charged[k]);
            continue;
        }
        if (t) vcuda_tenant_uncharge(t, ls->charged[k]);
    }
    memset(ls, 0, sizeof *ls);
}

/* ---- the calls added for whole programs (wire codes 33..) ------------------------- */

static int array_requests(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r);

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
        if (waited_stream(cl, q->v[0], &s)) return reply_invalid(cl, r, 400, "STREAM_QUERY: unknown stream");
        return (rc = g->cu.cuStreamQuery(s)) ? reply_cu(g, cl, r, op, rc) : 0;
    case VCUDA_OP_STREAM_WAIT_EVENT:
        if (stream_of(cl, q->v[0], &s) || !(e = find_handle(cl, q->v[1], H_EVENT)))
            return reply_invalid(cl, r, 400, "STREAM_WAIT_EVENT: unknown stream or event");
        if (q->v[2] & ~(uint64_t)1) return reply_invalid(cl, r, 1, "STREAM_WAIT_EVENT: flags 0x%llx", (unsigned long long)q->v[2]);
        return (rc = g->cu.cuStreamWaitEvent(s, e->obj, 0)) ? reply_cu(g, cl, r, op, rc) : 0;
    case VCUDA_OP_STREAM_CREATE_PRIORITY: {
        CUstream o;
        if (q->v[0] & ~(uint64_t)1) return reply_invalid(cl, r, 1, "STREAM_CREATE_PRIORITY: flags 0x%llx", (unsigned long long)q->v[0]);
        /* non-blocking on the device, as every client stream (see STREAM_CREATE) */
        if ((rc = g->cu.cuStreamCreateWithPriority(&o, 1, (int)(int64_t)q->v[1]))) return reply_cu(g, cl, r, op, rc);
        uint64_t id = add_handle(cl, H_STREAM, o);
        if (!id) return g->cu.cuStreamDestroy_v2(o), reply_invalid(cl, r, 2, "handle limit reached");
        cl->handles[cl->nhandle - 1].flags = (unsigned)q->v[0];
        r->v[0] = id, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_STREAM_PRIORITY_RANGE: {
        int least = 0, greatest = 0;
        if ((rc = g->cu.cuCtxGetStreamPriorityRange(&least, &greatest))) return reply_cu(g, cl, r, op, rc);
        r->v[0] = (uint64_t)(int64_t)least, r->v[1] = (uint64_t)(int64_t)greatest, r->nv = 2;
        return 0;
    }
    case VCUDA_OP_LIMIT_SET: return limit_set(g, cl, q, r);
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
        /* the variable is in the client's own module (per-client load): copies may
         * address it until that module is unloaded (module_unload forgets it) */
        if (!in_table(cl->globals, cl->nglobal, p, size)) {
            if (grow((void **)&cl->globals, &cl->cap_global, cl->nglobal + 1, sizeof(allocation), MAX_HANDLES))
                return reply_invalid(cl, r, 2, "MODULE_GLOBAL: limit reached");
            cl->globals[cl->nglobal++] = (allocation){p, size, ((cached_module *)h->obj)->mod, 0};
        }
        r->v[0] = p, r->v[1] = size, r->nv = 2;
        return 0;
    }
    case VCUDA_OP_LAUNCH_COOPERATIVE: return launch(g, cl, q, r);
    case VCUDA_OP_MALLOC_PITCH: {
        CUdeviceptr p;
        size_t pitch;
        uint64_t w = q->v[0], ht = q->v[1];
        if (!w || !ht) return reply_invalid(cl, r, 1, "MALLOC_PITCH: empty extent");
        if (ht > VCUDA_MAX_SIZE / w) return reply_invalid(cl, r, 2, "MALLOC_PITCH: %llu x %llu bytes is too large",
                                                          (unsigned long long)w, (unsigned long long)ht);
        /* the rows' bytes are charged first, the pitch's padding once the driver chose it */
        if (alloc_refused(cl, r, op, w * ht)) return 0;
        /* element size 16: the runtime's own choice for cudaMallocPitch */
        if ((rc = g->cu.cuMemAllocPitch_v2(&p, &pitch, w, ht, 16))) return uncharge(cl, w * ht), reply_cu(g, cl, r, op, rc);
        if (pitch < w || ht > VCUDA_MAX_SIZE / pitch || charge(cl, r, op, (uint64_t)pitch * ht - w * ht)) {
            g->cu.cuMemFree_v2(p);
            uncharge(cl, w * ht);
            if (!(r->hdr.flags & VCUDA_FLAG_ERROR)) reply_invalid(cl, r, 2, "MALLOC_PITCH: the driver's pitch %zu is unusable", pitch);
            return 0;
        }
        cl->allocs[cl->nalloc++] = (allocation){p, (uint64_t)pitch * ht, NULL, 0};
        r->v[0] = p, r->v[1] = pitch, r->nv = 2;
        return 0;
    }
    case VCUDA_OP_MEMSET_2D: {
        uint64_t dst = q->v[0], pitch = q->v[1], w = q->v[3], ht = q->v[4];
        if (stream_of(cl, q->v[5], &s)) return reply_invalid(cl, r, 400, "MEMSET_2D: unknown stream");
        if (!w || !ht) return 0;
        if (w > pitch || (ht - 1) > (VCUDA_MAX_SIZE / pitch) || !find_range(cl, dst, (ht - 1) * pitch + w))
            return reply_invalid(cl, r, 1, "MEMSET_2D: the rows are not inside an allocation of this client");
        /* stream-ordered on the client's own stream, as MEMSET */
        if ((rc = g->cu.cuMemsetD2D8Async(dst, pitch, (unsigned char)q->v[2], w, ht, s))) return reply_cu(g, cl, r, op, rc);
        return 0;
    }
    case VCUDA_OP_PRINTF_FETCH: return printf_fetch(g, cl, r);
    case VCUDA_OP_GRAPH_INSTANTIATE: return graph_instantiate(g, cl, q, r);
    case VCUDA_OP_GRAPH_EXEC_KERNEL_SET: return graph_exec_kernel_set(g, cl, q, r);
    case VCUDA_OP_GRAPH_TWIN_CREATE:
    case VCUDA_OP_GRAPH_TWIN_DESTROY:
    case VCUDA_OP_GRAPH_TWIN_ADD_NODE:
    case VCUDA_OP_GRAPH_TWIN_ADD_EDGE:
    case VCUDA_OP_GRAPH_COND_CREATE:
    case VCUDA_OP_GRAPH_TWIN_INSTANTIATE:
    case VCUDA_OP_GRAPH_MEM_ATTR_GET:
    case VCUDA_OP_GRAPH_MEM_ATTR_RESET:
    case VCUDA_OP_GRAPH_MEM_TRIM: return twin_requests(g, cl, q, r);
    case VCUDA_OP_ARRAY_CREATE:
    case VCUDA_OP_ARRAY_DESTROY:
    case VCUDA_OP_MEMCPY_3D:
    case VCUDA_OP_TEX_CREATE:
    case VCUDA_OP_TEX_DESTROY:
    case VCUDA_OP_SURF_CREATE:
    case VCUDA_OP_SURF_DESTROY: return array_requests(g, cl, q, r);
    case VCUDA_OP_DEVICE_UUID: {
        static _Thread_local unsigned char uuid[16];
        if ((rc = g->cu.cuDeviceGetUuid_v2(uuid, g->dev))) return reply_cu(g, cl, r, op, rc);
        r->blob = uuid, r->blob_len = sizeof uuid;
        return 0;
    }
    case VCUDA_OP_GRAPH_EXEC_DESTROY:
        if (!(h = find_handle(cl, q->v[0], H_GRAPH_EXEC))) return reply_invalid(cl, r, 400, "GRAPH_EXEC_DESTROY: unknown graph exec");
        graph_exec_free(g, cl, h->obj, 1);
        remove_handle(cl, h);
        return 0;
    default:
        return reply_invalid(cl, r, 801, "%s is not served by vcuda-server", op);
    }
}

/* ---- CUDA arrays, texture and surface objects (wire codes 60..) ------------------- *
 * An array is a handle of the client's table (its CUarray never leaves the server); a
 * texture or surface object is the driver's own CUtexObject/CUsurfObject value, because
 * kernels take it by value, kept in the client's table under that value so that only
 * the client that made it can destroy it.  Arrays count against the memory quota. */

typedef struct {
    void *arr; /* CUarray */
    uint64_t width, height, depth, bytes;
    unsigned elem, format, channels;
} array_info;

/* Object handles keep the driver's value as their id (see above). */
static int add_object(client *cl, handle_kind kind, uint64_t id)
{
    if (grow((void **)&cl->handles, &cl->cap_handle, cl->nhandle + 1, sizeof(handle), MAX_HANDLES)) return -1;
    cl->handles[cl->nhandle++] = (handle){id, kind, NULL, 0, 0};
    return 0;
}

/* a*b+c within VCUDA_MAX_SIZE (each factor already is), else UINT64_MAX */
static uint64_t mul_add(uint64_t a, uint64_t b, uint64_t c)
{
    unsigned __int128 v = (unsigned __int128)a * b + c;
    return v > VCUDA_MAX_SIZE ? UINT64_MAX : (uint64_t)v;
}

/* One side of a MEMCPY_3D into the driver's struct: an array of this client with the
 * box inside it, or device memory of this client holding every byte the copy touches. */
static int copy_side(client *cl, const uint64_t *w, const uint64_t *ext, int *type, unsigned long long *dev, void **arr,
                     size_t *xyz_pitch_height)
{
    uint64_t x = w[2], y = w[3], z = w[4], pitch = w[5], height = w[6];
    *type = (int)w[0];
    for (int i = 0; i < 3; ++i) xyz_pitch_height[i] = w[2 + i];
    xyz_pitch_height[3] = pitch, xyz_pitch_height[4] = height;
    if (w[0] == VCUDA_MEM_ARRAY) {
        handle *h = find_handle(cl, w[1], H_ARRAY);
        if (!h) return -1;
        const array_info *a = h->obj;
        uint64_t hh = a->height ? a->height : 1, dd = a->depth ? a->depth : 1;
        *arr = a->arr;
        xyz_pitch_height[3] = xyz_pitch_height[4] = 0;
        return x % a->elem || ext[0] % a->elem || x + ext[0] > a->width * a->elem || y + ext[1] > hh || z + ext[2] > dd
                   ? -1 : 0;
    }
    /* the last byte touched: ((z + depth - 1) * height + y + rows - 1) * pitch + x + width */
    if (ext[0] > pitch || x > pitch - ext[0] || (ext[2] > 1 && y + ext[1] > height)) return -1;
    uint64_t row = ext[2] > 1 ? mul_add(z + ext[2] - 1, height, y + ext[1] - 1) : mul_add(z, height, y + ext[1] - 1);
    uint64_t first = mul_add(z, height, y), span = row == UINT64_MAX ? UINT64_MAX : mul_add(row - first, pitch, ext[0]);
    uint64_t start = first == UINT64_MAX ? UINT64_MAX : mul_add(first, pitch, x);
    if (span == UINT64_MAX || start == UINT64_MAX || w[1] > UINT64_MAX - start || !find_range(cl, w[1] + start, span))
        return -1;
    *dev = w[1];
    return 0;
}

static int memcpy_3d(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    char why[VCUDA_WHY_LEN];
    uint64_t w[VCUDA_COPY_WORDS];
    memcpy3d_params p;
    size_t sv[5], dv[5];
    CUstream s;
    CUresult rc;
    if (vcuda_desc_decode(VCUDA_DESC_COPY, q->blob, q->blob_len, w, why)) return reply_invalid(cl, r, 1, "MEMCPY_3D: %s", why);
    if (stream_of(cl, q->v[0], &s)) return reply_invalid(cl, r, 400, "MEMCPY_3D: unknown stream");
    const uint64_t *ext = w + VCUDA_C_WIDTH;
    if (!ext[0] || !ext[1] || !ext[2]) return 0;
    memset(&p, 0, sizeof p);
    if (copy_side(cl, w + VCUDA_C_SRC_TYPE, ext, &p.src_type, &p.src_device, &p.src_array, sv) ||
        copy_side(cl, w + VCUDA_C_DST_TYPE, ext, &p.dst_type, &p.dst_device, &p.dst_array, dv))
        return reply_invalid(cl, r, 1, "MEMCPY_3D: a side is not an array or a range of this client's, or the box is outside it");
    p.src_x = sv[0], p.src_y = sv[1], p.src_z = sv[2], p.src_pitch = sv[3], p.src_height = sv[4];
    p.dst_x = dv[0], p.dst_y = dv[1], p.dst_z = dv[2], p.dst_pitch = dv[3], p.dst_height = dv[4];
    p.width = ext[0], p.height = ext[1], p.depth = ext[2];
    return (rc = g->cu.cuMemcpy3DAsync_v2(&p, s)) ? reply_cu(g, cl, r, "MEMCPY_3D", rc) : 0;
}

static int array_create(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    uint64_t fmt = q->v[0], ch = q->v[1], wd = q->v[2], ht = q->v[3], dp = q->v[4], flags = q->v[5];
    unsigned elem = vcuda_format_bytes(fmt) * (unsigned)(ch <= 4 ? ch : 0);
    CUresult rc;
    /* CUDA_ARRAY3D_LAYERED, SURFACE_LDST, CUBEMAP, TEXTURE_GATHER */
    if (!elem || ch == 3 || (flags & ~(uint64_t)0xf) || !wd)
        return reply_invalid(cl, r, 1, "ARRAY_CREATE: format 0x%llx x %llu channels, flags 0x%llx, width %llu",
                             (unsigned long long)fmt, (unsigned long long)ch, (unsigned long long)flags, (unsigned long long)wd);
    uint64_t bytes = mul_add(mul_add(wd, ht ? ht : 1, 0), dp ? dp : 1, 0);
    bytes = bytes == UINT64_MAX ? bytes : mul_add(bytes, elem, 0);
    if (bytes == UINT64_MAX) return reply_invalid(cl, r, 2, "ARRAY_CREATE: too large");
    if (charge(cl, r, "ARRAY_CREATE", bytes)) return 0;
    array_info *a = calloc(1, sizeof *a);
    if (!a) return uncharge(cl, bytes), reply_invalid(cl, r, 2, "ARRAY_CREATE: out of memory");
    array3d_desc d = {wd, ht, dp, (int)fmt, (unsigned)ch, (unsigned)flags};
    if ((rc = g->cu.cuArray3DCreate_v2(&a->arr, &d))) return free(a), uncharge(cl, bytes), reply_cu(g, cl, r, "ARRAY_CREATE", rc);
    *a = (array_info){a->arr, wd, ht, dp, bytes, elem, (unsigned)fmt, (unsigned)ch};
    uint64_t id = add_handle(cl, H_ARRAY, a);
    if (!id) return g->cu.cuArrayDestroy(a->arr), free(a), uncharge(cl, bytes), reply_invalid(cl, r, 2, "handle limit reached");
    r->v[0] = id, r->nv = 1;
    return 0;
}

/* TEX_CREATE's resource into the driver's struct: an array of this client, or linear or
 * pitched memory wholly inside one of its allocations. */
static int resource(client *cl, const uint64_t *w, resource_desc *rd)
{
    uint64_t elem = vcuda_format_bytes(w[VCUDA_T_FORMAT]) * w[VCUDA_T_CHANNELS];
    memset(rd, 0, sizeof *rd);
    rd->type = (int)w[VCUDA_T_RES_TYPE];
    if (rd->type == VCUDA_RES_ARRAY) {
        handle *h = find_handle(cl, w[VCUDA_T_RES], H_ARRAY);
        return h ? (rd->res.array.array = ((array_info *)h->obj)->arr, 0) : -1;
    }
    if (rd->type == VCUDA_RES_LINEAR) {
        rd->res.linear.ptr = w[VCUDA_T_RES], rd->res.linear.format = (int)w[VCUDA_T_FORMAT];
        rd->res.linear.channels = (unsigned)w[VCUDA_T_CHANNELS], rd->res.linear.bytes = w[VCUDA_T_WIDTH];
        return w[VCUDA_T_WIDTH] && find_range(cl, w[VCUDA_T_RES], w[VCUDA_T_WIDTH]) ? 0 : -1;
    }
    uint64_t rowb = w[VCUDA_T_WIDTH] * elem, ht = w[VCUDA_T_HEIGHT], pitch = w[VCUDA_T_PITCH];
    rd->res.pitch2d.ptr = w[VCUDA_T_RES], rd->res.pitch2d.format = (int)w[VCUDA_T_FORMAT];
    rd->res.pitch2d.channels = (unsigned)w[VCUDA_T_CHANNELS];
    rd->res.pitch2d.width = w[VCUDA_T_WIDTH], rd->res.pitch2d.height = ht, rd->res.pitch2d.pitch = pitch;
    if (!rowb || !ht || rowb > pitch) return -1;
    uint64_t span = mul_add(ht - 1, pitch, rowb);
    return span != UINT64_MAX && find_range(cl, w[VCUDA_T_RES], span) ? 0 : -1;
}

static float f32(uint64_t bits)
{
    uint32_t b = (uint32_t)bits;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

static int tex_create(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    char why[VCUDA_WHY_LEN];
    uint64_t w[VCUDA_TEX_WORDS];
    resource_desc rd;
    texture_desc td;
    view_desc vd;
    unsigned long long obj = 0;
    CUresult rc;
    if (vcuda_desc_decode(VCUDA_DESC_TEX, q->blob, q->blob_len, w, why)) return reply_invalid(cl, r, 1, "TEX_CREATE: %s", why);
    if (resource(cl, w, &rd))
        return reply_invalid(cl, r, 1, "TEX_CREATE: the resource is not an array or a range of this client's");
    memset(&td, 0, sizeof td), memset(&vd, 0, sizeof vd);
    for (int i = 0; i < 3; ++i) td.address[i] = (int)w[VCUDA_T_ADDRESS0 + i];
    td.filter = (int)w[VCUDA_T_FILTER], td.flags = (unsigned)w[VCUDA_T_FLAGS];
    td.max_anisotropy = (unsigned)w[VCUDA_T_MAX_ANISOTROPY], td.mip_filter = (int)w[VCUDA_T_MIP_FILTER];
    td.mip_bias = f32(w[VCUDA_T_MIP_BIAS]), td.mip_min = f32(w[VCUDA_T_MIP_MIN]), td.mip_max = f32(w[VCUDA_T_MIP_MAX]);
    for (int i = 0; i < 4; ++i) td.border[i] = f32(w[VCUDA_T_BORDER0 + i]);
    vd.format = (int)w[VCUDA_T_VIEW_FORMAT];
    vd.width = w[VCUDA_T_VIEW_WIDTH], vd.height = w[VCUDA_T_VIEW_HEIGHT], vd.depth = w[VCUDA_T_VIEW_DEPTH];
    vd.first_mip = (unsigned)w[VCUDA_T_FIRST_MIP], vd.last_mip = (unsigned)w[VCUDA_T_LAST_MIP];
    vd.first_layer = (unsigned)w[VCUDA_T_FIRST_LAYER], vd.last_layer = (unsigned)w[VCUDA_T_LAST_LAYER];
    if ((rc = g->cu.cuTexObjectCreate(&obj, &rd, &td, w[VCUDA_T_VIEW] ? &vd : NULL))) return reply_cu(g, cl, r, "TEX_CREATE", rc);
    if (add_object(cl, H_TEXTURE, obj)) return g->cu.cuTexObjectDestroy(obj), reply_invalid(cl, r, 2, "handle limit reached");
    r->v[0] = obj, r->nv = 1;
    return 0;
}

static int array_requests(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    const char *op = vcuda_opcode_name(q->hdr.opcode);
    CUresult rc = 0;
    handle *h;
    switch (q->hdr.opcode) {
    case VCUDA_OP_ARRAY_CREATE: return array_create(g, cl, q, r);
    case VCUDA_OP_MEMCPY_3D: return memcpy_3d(g, cl, q, r);
    case VCUDA_OP_TEX_CREATE: return tex_create(g, cl, q, r);
    case VCUDA_OP_SURF_CREATE: {
        resource_desc rd;
        unsigned long long obj = 0;
        if (!(h = find_handle(cl, q->v[0], H_ARRAY))) return reply_invalid(cl, r, 400, "SURF_CREATE: unknown array");
        memset(&rd, 0, sizeof rd);
        rd.type = VCUDA_RES_ARRAY, rd.res.array.array = ((array_info *)h->obj)->arr;
        if ((rc = g->cu.cuSurfObjectCreate(&obj, &rd))) return reply_cu(g, cl, r, op, rc);
        if (add_object(cl, H_SURFACE, obj)) return g->cu.cuSurfObjectDestroy(obj), reply_invalid(cl, r, 2, "handle limit reached");
        r->v[0] = obj, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_ARRAY_DESTROY: {
        if (!(h = find_handle(cl, q->v[0], H_ARRAY))) return reply_invalid(cl, r, 400, "ARRAY_DESTROY: not an array of this client");
        array_info *a = h->obj;
        if ((rc = g->cu.cuArrayDestroy(a->arr))) return reply_cu(g, cl, r, op, rc);
        uncharge(cl, a->bytes);
        free(a);
        remove_handle(cl, h);
        return 0;
    }
    default: { /* TEX_DESTROY, SURF_DESTROY */
        int tex = q->hdr.opcode == VCUDA_OP_TEX_DESTROY;
        if (!(h = find_handle(cl, q->v[0], tex ? H_TEXTURE : H_SURFACE)))
            return reply_invalid(cl, r, 400, "%s: 0x%llx is not a %s object of this client", op, (unsigned long long)q->v[0],
                                 tex ? "texture" : "surface");
        rc = tex ? g->cu.cuTexObjectDestroy(h->id) : g->cu.cuSurfObjectDestroy(h->id);
        remove_handle(cl, h);
        return rc ? reply_cu(g, cl, r, op, rc) : 0;
    }
    }
}

/* A client's objects, then its arrays (they may be in use by the objects), when it goes. */
static void arrays_release(vcuda_gpu *g, client *cl, int alive)
{
    for (int pass = 0; pass < 2; ++pass)
        for (uint32_t i = 0; i < cl->nhandle; ++i) {
            handle *h = &cl->handles[i];
            if (pass == 0 && alive && h->kind == H_TEXTURE) g->cu.cuTexObjectDestroy(h->id);
            else if (pass == 0 && alive && h->kind == H_SURFACE) g->cu.cuSurfObjectDestroy(h->id);
            else if (pass == 1 && h->kind == H_ARRAY) {
                if (alive) g->cu.cuArrayDestroy(((array_info *)h->obj)->arr);
                free(h->obj);
                h->obj = NULL;
            }
        }
}

static void release_client(void *ctx, vcuda_conn *c)
{
    vcuda_gpu *g = ctx;
    client *cl = c->user;
    if (!cl) return;
    pthread_mutex_lock(&g->mu);
    /* on a dead or the client's own context nothing is freed one by one: the process's
     * end or the context's destruction frees it all */
    int alive = cl->generation == g->generation && !cl->own;
    pthread_mutex_unlock(&g->mu);
    if (alive) sync_client(g, cl); /* work the client queued may still use its memory */
    arrays_release(g, cl, alive);
    graph_execs_drop(g, cl, NULL, alive); /* before the modules their kernels are in */
    twins_drop(g, cl, alive);             /* (and before the allocations: see "graph twins") */
    for (uint32_t i = 0; i < cl->nalloc && alive; ++i) g->cu.cuMemFree_v2(cl->allocs[i].base);
    for (uint32_t i = 0; i < cl->nhandle; ++i) {
        handle *h = &cl->handles[i];
        if (h->kind == H_STREAM && alive) g->cu.cuStreamDestroy_v2(h->obj);
        else if (h->kind == H_EVENT && alive) g->cu.cuEventDestroy_v2(h->obj);
        else if (h->kind == H_FUNCTION) free(h->obj);
        else if (h->kind == H_MODULE) {
            if (alive) g->cu.cuModuleUnload(((cached_module *)h->obj)->mod);
            free(h->obj);
        }
    }
    if (alive) {
        for (int k = 0; k < 2; ++k)
            if (cl->pinned[k]) g->cu.cuMemFreeHost(cl->pinned[k]);
        if (cl->join) g->cu.cuEventDestroy_v2(cl->join);
        if (cl->aux) g->cu.cuStreamDestroy_v2(cl->aux);
        if (cl->def) g->cu.cuStreamDestroy_v2(cl->def);
    }
    if (cl->nalloc || cl->nhandle)
        vcuda_log_limited("vcuda-server", "connection %llu: released %u allocations and %u handles",
                          (unsigned long long)c->id, cl->nalloc, cl->nhandle);
    if (cl->own) g->cu.cuCtxDestroy_v2(cl->own); /* (and the limits of its own, charged as its memory) */
    if (cl->tenant) vcuda_tenant_uncharge(cl->tenant, cl->mem_bytes); /* what it still held */
    cl->mem_bytes = 0;
    free(cl->allocs);
    free(cl->handles);
    free(cl->globals);
    pthread_mutex_lock(&g->mu);
    if (!cl->own && g->lim_owner && g->lim_owner == cl->tenant && --g->lim_owner_conns == 0) {
        /* the tenant's last connection on the shared context: its limits go (see limit_set) */
        vcuda_tenant *t = g->lim_owner;
        while (g->limit_busy) pthread_cond_wait(&g->limit_done, &g->mu);
        g->limit_busy = 1;
        pthread_mutex_unlock(&g->mu);
        if (alive) limits_restore(g, t);
        else memset(&g->lims, 0, sizeof g->lims); /* (a lost context: the process is replaced) */
        pthread_mutex_lock(&g->mu);
        g->lim_owner = NULL;
        g->limit_busy = 0;
        pthread_cond_broadcast(&g->limit_done);
    }
    --g->attached;
    output_owner_change(g, cl, -1, g->attached); /* its last output (synchronized above) is its own */
    free(cl->out[0].b);
    free(cl->out[1].b);
    free(cl->sent);
    free(cl);
    c->user = NULL;
    if (g->dead && !*g->stop) {
        /* the failing client has had its reply: end every session and let vcuda-server's
         * supervisor start a fresh process on the same socket */
        fprintf(stderr, "vcuda-server: device %d: the context lost to CUresult %d cannot be used again in this "
                "process; stopping it for a fresh one\n", g->ordinal, g->dead);
        *g->stop = 1;
    }
    pthread_mutex_unlock(&g->mu);
}

/* On the client's worker thread, before its first request: the context current there
 * (refused while one lost to a sticky error is being replaced) and the client's own
 * streams. */
static int attach_client(void *ctx, vcuda_conn *c, char *why)
{
    vcuda_gpu *g = ctx;
    client *cl = calloc(1, sizeof *cl);
    CUresult rc;
    if (!cl) return vcuda_fail(why, -1, "no memory for client state");
    cl->tenant = c->tenant;
    pthread_mutex_lock(&g->mu);
    while (g->limit_busy) pthread_cond_wait(&g->limit_done, &g->mu); /* see limit_set */
    if (g->dead) {
        pthread_mutex_unlock(&g->mu);
        free(cl);
        return vcuda_fail(why, -1, "the GPU context is being replaced after a sticky error");
    }
    cl->generation = g->generation;
    ++g->attached;
    if (!limits.isolation && g->lim_owner && g->lim_owner == cl->tenant) ++g->lim_owner_conns;
    output_owner_change(g, cl, 1, g->attached);
    CUcontext cx = g->ctx;
    pthread_mutex_unlock(&g->mu);
    c->user = cl;
    if (limits.isolation) { /* a context per client: nothing of the GPU state is shared */
        if ((rc = g->cu.cuCtxCreate_v2(&cl->own, 0, g->dev)) || (rc = g->cu.cuMemAlloc_v2(&cl->touch, 4)) ||
            (rc = g->cu.cuMemsetD8_v2(cl->touch, 0, 4))) {
            vcuda_fail(why, -1, "client context: %s (CUresult %d)", cu_error_text(g, rc), rc);
            release_client(g, c);
            return -1;
        }
        cx = cl->own;
    }
    if ((rc = g->cu.cuCtxSetCurrent(cx)) || (rc = g->cu.cuStreamCreate(&cl->def, 1)) ||
        (rc = g->cu.cuStreamCreate(&cl->aux, 1)) || (rc = g->cu.cuEventCreate(&cl->join, 2 /* no timing */))) {
        vcuda_fail(why, -1, "client set-up failed: %s (CUresult %d)", cu_error_text(g, rc), rc);
        release_client(g, c);
        return -1;
    }
    return 0;
}

/* Every request: a session whose context died (its own sticky error or another
 * client's) ends with that error; the handler proper runs otherwise. */
static int handle_checked(void *ctx, vcuda_conn *c, const vcuda_msg *q, vcuda_msg *r, char *why)
{
    vcuda_gpu *g = ctx;
    client *cl = c->user;
    pthread_mutex_lock(&g->mu);
    int lost = cl && cl->generation != g->generation ? (g->dead ? g->dead : 999) : 0;
    pthread_mutex_unlock(&g->mu);
    if (lost && cl->fatal && q->hdr.opcode == VCUDA_OP_PRINTF_FETCH) {
        /* the client whose kernel killed the context collects what it printed and its
         * assertion messages (the reply to the failing call said they wait); its session
         * ends when they are all sent, or at its first other request (below).  A client
         * that does neither keeps this lost serving process until it disconnects. */
        int rc = handle_request(ctx, c, q, r, why);
        if (!(r->hdr.flags & VCUDA_FLAG_OUTPUT)) c->end_session = 1;
        return rc;
    }
    if (lost) {
        snprintf(cl->msg, sizeof cl->msg, "the GPU context was lost to a sticky error (CUresult %d) and is being "
                 "replaced: this session's state is gone", lost);
        vcuda_reply_error(r, lost, cl->msg);
        c->end_session = 1;
        return 0;
    }
    int rc = handle_request(ctx, c, q, r, why);
    /* a sticky error ends the session, once the output its reply announced is fetched */
    if (c->user && ((client *)c->user)->fatal && !(r->hdr.flags & VCUDA_FLAG_OUTPUT)) c->end_session = 1;
    return rc;
}

int vcuda_gpu_context_lost(vcuda_gpu *g)
{
    pthread_mutex_lock(&g->mu);
    int d = g->dead;
    pthread_mutex_unlock(&g->mu);
    return d;
}

struct vcuda_handler vcuda_gpu_handler(vcuda_gpu *g)
{
    struct vcuda_handler h = {g, handle_checked, release_client, attach_client};
    return h;
}

void vcuda_gpu_set_limits(const vcuda_gpu_limits *l) { limits = *l; }

/* stdout becomes the printf pipe and stderr the assertion pipe (k: OUT_PRINTF /
 * OUT_ASSERT); the streams they replace stay the logs.  Without a pipe, that output
 * stays in the server's own stream, as before, and the server says so. */
static void capture_fd(vcuda_gpu *g, int k)
{
    int fds[2], fd = k == OUT_PRINTF ? STDOUT_FILENO : STDERR_FILENO;
    const char *what = k == OUT_PRINTF ? "device printf stays on the server's stdout"
                                       : "device assertion messages stay on the server's stderr";
    fflush(k == OUT_PRINTF ? stdout : stderr);
    if ((g->log_fd[k] = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0) {
        fprintf(stderr, "vcuda-server: %s (dup: %s)\n", what, strerror(errno));
        return;
    }
    if (pipe(fds)) {
        fprintf(stderr, "vcuda-server: %s (pipe: %s)\n", what, strerror(errno));
        return;
    }
#ifdef F_SETPIPE_SZ
    fcntl(fds[1], F_SETPIPE_SZ, 1 << 20); /* fewer wake-ups; the size is only a hint */
#endif
    fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    if (dup2(fds[1], fd) < 0) {
        fprintf(stderr, "vcuda-server: %s (dup2: %s)\n", what, strerror(errno));
        close(fds[0]), close(fds[1]);
        return;
    }
    close(fds[1]);
    g->out_fd[k] = fds[0];
}

static void uncapture(vcuda_gpu *g)
{
    for (int k = 0; k < 2; ++k) {
        if (g->out_fd[k] < 0) continue;
        fflush(k == OUT_PRINTF ? stdout : stderr);
        dup2(g->log_fd[k], k == OUT_PRINTF ? STDOUT_FILENO : STDERR_FILENO);
        close(g->out_fd[k]);
        g->out_fd[k] = -1;
    }
}

static void capture_output(vcuda_gpu *g)
{
    capture_fd(g, OUT_PRINTF);
    capture_fd(g, OUT_ASSERT);
    if (capturing(g) && pthread_create(&g->out_thread, NULL, out_reader, g)) {
        uncapture(g); /* as without capture */
        fprintf(stderr, "vcuda-server: device printf and assertion messages stay on the server's "
                        "stdout/stderr (no reader thread)\n");
    }
}

vcuda_gpu *vcuda_gpu_open(int ordinal, size_t chunk, volatile sig_atomic_t *stop, char *why)
{
    vcuda_gpu *g = calloc(1, sizeof *g);
    CUresult rc;
    int n = 0;
    if (!g) return vcuda_fail(why, 0, "out of memory"), NULL;
    g->ordinal = ordinal, g->chunk = chunk, g->stop = stop, g->out_fd[0] = g->out_fd[1] = -1;
    g->log_fd[0] = g->log_fd[1] = -1;
    if (!(g->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL))) {
        vcuda_fail(why, 0, "no CUDA driver (libcuda.so.1: %s)", dlerror());
        free(g);
        return NULL;
    }
#define RESOLVE(name, ret, args) *(void **)&g->cu.name = dlsym(g->lib, #name);
    DRIVER_FUNCTIONS(RESOLVE)
    TENANCY_FUNCTIONS(RESOLVE)
    GRAPH_FUNCTIONS(RESOLVE)
    ARRAY_FUNCTIONS(RESOLVE)
    PROPERTY_FUNCTIONS(RESOLVE)
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
    TENANCY_FUNCTIONS(CHECK_RESOLVED)
    GRAPH_FUNCTIONS(CHECK_RESOLVED)
    ARRAY_FUNCTIONS(CHECK_RESOLVED)
    PROPERTY_FUNCTIONS(CHECK_RESOLVED)
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
        (rc = g->cu.cuMemAlloc_v2(&g->touch, 4)) || (rc = g->cu.cuMemsetD8_v2(g->touch, 0, 4))) {
        vcuda_fail(why, 0, "device %d: set-up failed: %s (CUresult %d)", ordinal, cu_error_text(g, rc), rc);
        goto fail;
    }
    int sms = 0, per_sm = 0;
    if ((rc = g->cu.cuDeviceGetAttribute(&sms, CU_ATTR_SMS, g->dev)) ||
        (rc = g->cu.cuDeviceGetAttribute(&per_sm, CU_ATTR_THREADS_PER_SM, g->dev)) || sms <= 0 || per_sm <= 0) {
        vcuda_fail(why, 0, "device %d: no multiprocessor count or threads per multiprocessor (CUresult %d)", ordinal, rc);
        goto fail;
    }
    g->threads = (uint64_t)sms * (uint64_t)per_sm;
    pthread_mutex_init(&g->mu, NULL);
    pthread_mutex_init(&g->out_mu, NULL);
    pthread_cond_init(&g->limit_done, NULL);
    the_gpu = g;
    capture_output(g);
    return g;
fail:
    dlclose(g->lib);
    free(g);
    return NULL;
}

void vcuda_gpu_end_output(vcuda_gpu *g)
{
    if (capturing(g)) {
        *g->stop = 1;
        pthread_join(g->out_thread, NULL);
        pthread_mutex_lock(&g->out_mu);
        g->out_owner = NULL; /* what is left goes to the logs */
        pthread_mutex_unlock(&g->out_mu);
        drain_output(g);
        uncapture(g);
    }
    for (int k = 0; k < 2; ++k)
        if (g->log_fd[k] >= 0) close(g->log_fd[k]), g->log_fd[k] = -1;
}

void vcuda_gpu_close(vcuda_gpu *g)
{
    if (!g) return;
    vcuda_gpu_end_output(g);
    g->cu.cuCtxSynchronize();
    g->cu.cuMemFree_v2(g->touch);
    g->cu.cuDevicePrimaryCtxRelease_v2(g->dev);
    for (int i = 0; i < g->nimages; ++i) free(g->images[i].img), free(g->images[i].unsized.names);
    pthread_mutex_destroy(&g->mu);
    dlclose(g->lib);
    free(g);
}

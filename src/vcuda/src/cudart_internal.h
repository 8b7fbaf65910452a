/* What the families of the libcudart stand-in share (cudart_*.c): the runtime's
 * per-thread state, the one request/reply path to the servers, the objects that cross
 * families (streams and events, registered images and kernels, device allocations,
 * graphs) and the internal functions one family calls in another.  Everything declared
 * here is hidden: the library exports only the runtime's own names (cudart_exports.txt).
 *
 * The stand-in as a whole: the CUDA runtime API of unmodified programs (nvcc -cudart
 * shared), forwarded to vcuda servers.  Built as libcudart.so.<major> with the
 * runtime's own symbol version, so the dynamic linker takes it in place of NVIDIA's
 * when its directory comes first on LD_LIBRARY_PATH (or with LD_PRELOAD).  Every
 * symbol the real runtime exports is exported too: what no family defines is a
 * generated stub (cudart_stub.h), and what vcuda cannot provide (zero-copy memory,
 * mipmapped arrays, IPC, graphics interop) returns
 * cudaErrorNotSupported after "vcuda: NAME is not supported remotely" on stderr, once
 * per function. */
#ifndef VCUDA_CUDART_INTERNAL_H
#define VCUDA_CUDART_INTERNAL_H

#include <cuda_runtime_api.h>

#include "vcuda/client.h"
#include "vcuda/sha256.h"
#include "cudart_ptds.h"
#include "cudart_stub.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

#pragma GCC visibility push(hidden)

/* A refusal of some uses of a function defined here: once per call site, the name and
 * the reason on stderr; cudaErrorNotSupported (the generated stubs: cudart_stub.h). */
#define unsupported(api, reason)                                                          \
    ({                                                                                    \
        static int said_;                                                                 \
        if (!atomic_exchange((_Atomic int *)&said_, 1))                                   \
            fprintf(stderr, "vcuda: %s is not supported remotely: %s\n", api, reason);    \
        rt_record(cudaErrorNotSupported);                                                 \
    })

/* cudaStream_t / cudaEvent_t point at one of these: the server's handle and the device
 * it lives on.  The magic catches a handle of the other kind or a stale one. */
typedef struct {
    uint32_t magic;
    int device;
    uint64_t handle;
    unsigned flags; /* as created (streams: also their priority) */
    int priority;
    struct graph *capture; /* streams: the graph being captured into; events: recorded in it */
    unsigned long long id; /* streams: cudaStreamGetId's (from stream_ids) */
} remote_object;
#define STREAM_MAGIC 0x5354524du

/* A call without a stream that the real runtime makes synchronous with the host
 * (cudart_stream.c, "host-synchronous calls"): expr with rt_host_sync set. */
#define SYNCHRONOUS(api, expr)                                                                     \
    ({                                                                                             \
        cudaError_t r_;                                                                            \
        if (rt_capturing(NULL)) {                                                                  \
            r_ = unsupported(api, "a copy or set without a stream while the per-thread default stream captures"); \
        } else {                                                                                   \
            int outer_ = rt_host_sync;                                                             \
            rt_host_sync = 1;                                                                      \
            r_ = (expr);                                                                           \
            rt_host_sync = outer_;                                                                 \
        }                                                                                          \
        r_;                                                                                        \
    })

/* A device allocation of this process (cudart_memory.c's table). */
typedef struct {
    int device;
    uint64_t base, size;
} allocation;

/* A registered fatbinary and the kernels in it (cudart_launch.c). */
typedef struct {
    const uint8_t *image;
    size_t size;
    int hashed;
    uint8_t hash[VCUDA_HASH_SIZE];
    uint64_t module[VCUDA_MAX_DEVICES]; /* server handle per device, 0: not loaded */
} fatbin;

typedef struct {
    const void *host_fun;
    const char *name;
    fatbin *fb;
    uint64_t handle[VCUDA_MAX_DEVICES];
    int have_sizes;
    uint32_t nparams;
    uint32_t sizes[VCUDA_MAX_PARAMS];
} kernel;

/* __device__ and __constant__ variables: the host shadow's address names the variable
 * in cudaMemcpyToSymbol & co.; its device address comes from the server's module. */
typedef struct {
    const void *host_var;
    const char *name;
    fatbin *fb;
    uint64_t dptr[VCUDA_MAX_DEVICES], size[VCUDA_MAX_DEVICES]; /* 0: not looked up yet */
} device_var;

/* A graph and its nodes (cudart_graph.c says how graphs are built and run). */
typedef enum { NODE_EMPTY, NODE_KERNEL, NODE_COPY, NODE_COPY3D, NODE_SET, NODE_HOST, NODE_COND, NODE_ALLOC, NODE_FREE } node_kind;
typedef struct graph_node {
    node_kind kind;
    struct graph *owner;
    const struct graph_node *origin; /* in an exec: the graph's node it was copied from */
    size_t ndeps, index;
    struct graph_node **deps;
    /* kernel */
    kernel *k;
    dim3 grid, block;
    size_t shmem;
    uint8_t *args; /* the argument values, copied when the node was made */
    /* copies and sets */
    void *dst;
    const void *src;
    size_t n, pitch, width, height;
    int value;
    enum cudaMemcpyKind copy_kind;
    struct cudaMemcpy3DParms p3;
    /* host */
    cudaHostFn_t fn;
    void *data;
    /* conditional (bodies: graphs of their own, owned by the node) */
    unsigned long long cond;
    int cond_type;
    unsigned nbodies;
    struct graph **bodies;
    /* allocation (n bytes at dst) and free (dst) */
    uint32_t tidx; /* its index in the graph's twin */
} graph_node;

typedef struct graph {
    uint32_t magic;
    graph_node **nodes;
    size_t nnodes, cap;
    graph_node **front;    /* capture: the nodes the next one depends on */
    cudaGraphEdgeData *front_edges; /* (their edge data: all default) */
    size_t nfront, cap_front;
    cudaStream_t origin;   /* capture: the stream that began it */
    int captured_to;       /* capture: into a graph the program made (cudaStreamBeginCaptureToGraph) */
    remote_object *joined[64]; /* capture: the other streams that joined it */
    size_t njoined;
    uint64_t exec;    /* instantiated on the server: its handle there (0: replayed here) */
    int exec_device;  /* the device (server) that holds it */
    int stale;        /* updated since instantiated: instantiated again at its next launch */
    uint64_t twin;    /* its twin on the server (cudart_graph.c, "graph twins"), 0 if none */
    int twin_device;  /* the device (server) that holds it */
    uint32_t tn;      /* the twin's node count */
    int body;         /* a conditional node's body graph: goes with its node */
    unsigned long long capture_id; /* capture: its id (cudaStreamGetCaptureInfo) */
    int twin_exec;    /* an exec of a twin */
} graph;

/* ---- internal functions and state, by the family that owns them ---- */

/* cudart_call.c */
extern _Thread_local int rt_current_device;
extern _Thread_local cudaError_t rt_last_error;
cudaError_t rt_record(cudaError_t e);
int rt_grow(void *arr, size_t *cap, size_t n, size_t elem);
extern int rt_async_launch;
extern int rt_server_graphs;
cudaError_t rt_ready(void);
cudaError_t rt_result(vcuda_client_status s, const vcuda_msg *reply, const char *api, const char *why);
cudaError_t rt_call(unsigned op, const uint64_t *v, unsigned nv, vcuda_msg *reply, const char *api);

/* cudart_device.c */
cudaError_t rt_valid_device(int d);

/* cudart_memory.c */
extern pthread_mutex_t rt_alloc_mu;
extern allocation *rt_allocs;
extern size_t rt_nalloc, rt_cap_alloc;
int rt_table_add(int device, uint64_t base, uint64_t size);
int rt_is_device_pointer(const void *p);
cudaError_t rt_host_arg(const char *api, const uint8_t *args, uint32_t nparams, const uint32_t *sizes);
cudaError_t rt_memcpy_remote(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t stream,
                             const char *api);
cudaError_t rt_set_2d(void *p, size_t pitch, int value, size_t width, size_t height, cudaStream_t stream);
cudaError_t rt_copy_3d(const struct cudaMemcpy3DParms *p, cudaStream_t s, const char *api);

/* cudart_managed.c: the device attributes of managed and host memory (1 if attr is one,
 * its value set), and the hooks where device work starts (a launch on s; a copy or set
 * touching managed memory, whose kind then follows the pointers) or ends. */
int rt_managed_attribute(int attr, int *value);
cudaError_t rt_managed_launch(cudaStream_t s, const char *api);
cudaError_t rt_managed_copy(void *dst, size_t dspan, const void *src, size_t sspan, enum cudaMemcpyKind *kind,
                            const char *api);
cudaError_t rt_managed_set(void *p, size_t span, const char *api);
void rt_managed_synchronized(void);
void rt_managed_reset(void);
uint64_t rt_managed_release(uint64_t p);
char rt_managed_init_module(void **handle);

/* cudart_stream.c */
extern _Atomic unsigned rt_resets[VCUDA_MAX_DEVICES];
int rt_legacy_stream(cudaStream_t s);
cudaError_t rt_own_stream(cudaStream_t *s);
cudaStream_t rt_existing_stream(cudaStream_t s);
cudaError_t rt_stream_handle(cudaStream_t s, uint64_t *h);
extern _Thread_local int rt_host_sync;
int rt_stream_device(cudaStream_t s);

/* cudart_launch.c */
extern pthread_mutex_t rt_reg_mu;
extern kernel **rt_kernels;
extern size_t rt_nkernels, rt_cap_kernels;
extern device_var **rt_vars;
extern size_t rt_nvars, rt_cap_vars;
kernel *rt_find_kernel(const void *host_fun);
cudaError_t rt_resolve(kernel *k, uint64_t *fn);
cudaError_t rt_launch(kernel *k, dim3 grid, dim3 block, void **args, size_t shmem, cudaStream_t stream,
                      const char *api);
cudaError_t rt_module_lookup(fatbin *fb, int d, unsigned op, const char *name, vcuda_msg *r);

/* cudart_graph.c.  Stream capture: each rt_capture_* hook records what a capturing stream
 * is given instead of sending it, and returns 1; 0 where the stream is not capturing. */
cudaError_t rt_join_capture(graph *g, remote_object *so);
graph *rt_capturing(cudaStream_t s);
int rt_capture_kernel(cudaStream_t s, void *k, dim3 grid, dim3 block, void **args, size_t shmem, cudaError_t *e);
int rt_capture_copy(cudaStream_t s, void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaError_t *e);
int rt_capture_set(cudaStream_t s, void *p, size_t pitch, int value, size_t width, size_t height, cudaError_t *e);
int rt_capture_host(cudaStream_t s, cudaHostFn_t fn, void *data, cudaError_t *e);
cudaError_t rt_capture_memory(graph *g, void **p, void *dptr, size_t size, const char *api);

/* cudart_array.c */
void rt_staging_forget(int device);
cudaError_t rt_strided_copy(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                            enum cudaMemcpyKind kind, cudaStream_t s, const char *api);
cudaError_t rt_copy_3d_array(const struct cudaMemcpy3DParms *p, cudaStream_t s, const char *api);

#pragma GCC visibility pop

#endif

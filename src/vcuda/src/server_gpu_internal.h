/* What the request families of the vcuda server's GPU handler share (server_gpu*.c):
 * the per-GPU state (struct vcuda_gpu), each client's tables (handles, allocations,
 * streams, modules), the per-client limits, the error replies and the quota charges,
 * and the internal functions one family calls in another.  Everything declared here is
 * internal to vcuda-server. */
#ifndef VCUDA_SERVER_GPU_INTERNAL_H
#define VCUDA_SERVER_GPU_INTERNAL_H

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

#include "server_driver.h"

#pragma GCC visibility push(hidden)

enum { CU_INVALID_VALUE = 1, CU_NOT_FOUND = 500, CU_ATTR_PCI_BUS = 33, CU_ATTR_SMS = 16, CU_ATTR_THREADS_PER_SM = 39 };

/* The context limits (CUlimit) and what each makes the device reserve (see sg_limit_set). */
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
#define MAX_HANDLES (sg_limits.max_handles)
#define MAX_IMAGES 1024 /* cached module images (transfer savings only, never state) */
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
    int retired;    /* streams: destroyed by the client with work still queued (sg_reap_streams) */
} handle;

typedef struct {
    CUdeviceptr base;
    uint64_t size;
    CUmodule owner; /* a looked-up __device__ variable: the module it goes with (else NULL) */
    int graph;      /* made by a graph's allocation node (server_gpu_graph.c, "graph twins") */
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
    /* the shared context's limits, set by one tenant (see sg_limit_set): its connections on
     * the context, the values to restore when the last goes, what it is charged */
    vcuda_tenant *lim_owner;
    int lim_owner_conns;
    limit_state lims;
    uint64_t threads; /* resident threads of the device: SMs x threads per SM (the stack's multiplier) */
    /* Device printf: the driver writes it to this process's stdout, and device assertion
     * messages to its stderr; each is a pipe (out_fd) drained (by the request that
     * synchronized, or by out_thread between requests) into its owner's buffer or to
     * log_fd, the stream it replaced (server_gpu_device.c, "device printf"). */
    int out_fd[2], log_fd[2];
    char eline[512]; /* the stderr pipe's current line, to find assertion messages */
    size_t elen;
    pthread_t out_thread;
    pthread_mutex_t out_mu;  /* out_owner and every client's out* (after g->mu if both) */
    client *out_owner;
    int out_claimable; /* the one client left after others went may take the output */
};

/* graph execs and graph twins: their layout is server_gpu_graph.c's alone */
typedef struct graph_exec graph_exec;
typedef struct twin twin;

/* ---- internal functions and state, by the family that owns them ---- */

/* server_gpu.c */
extern vcuda_gpu_limits sg_limits;
const char *sg_cu_error_text(vcuda_gpu *g, CUresult r);
int sg_context_lost(CUresult r);
int sg_reply_cu(vcuda_gpu *g, client *cl, vcuda_msg *r, const char *what, CUresult rc);
int sg_reply_invalid(client *cl, vcuda_msg *r, int code, const char *fmt, ...);
int sg_charge(client *cl, vcuda_msg *r, const char *what, uint64_t bytes);
void sg_uncharge(client *cl, uint64_t bytes);
int sg_grow(void **p, uint32_t *cap, uint32_t need, size_t elem, uint32_t max);
handle *sg_find_handle(client *cl, uint64_t id, handle_kind kind);
uint64_t sg_add_handle(client *cl, handle_kind kind, void *obj);
void sg_remove_handle(client *cl, handle *h);
allocation *sg_in_table(allocation *t, uint32_t n_entries, uint64_t p, uint64_t n);

/* server_gpu_device.c */
int sg_properties(vcuda_gpu *g, client *cl, vcuda_msg *r);
int sg_capturing(vcuda_gpu *g);
void sg_drain_output(vcuda_gpu *g);
void sg_output_owner_change(vcuda_gpu *g, client *cl, int delta, int attached_now);
int sg_pending(const client *cl);
int sg_printf_fetch(vcuda_gpu *g, client *cl, vcuda_msg *r);
int sg_synchronizes(unsigned op);
void sg_claim_output(vcuda_gpu *g, client *cl);
int sg_limit_set(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r);
void sg_limits_restore(vcuda_gpu *g, vcuda_tenant *t);
void sg_uncapture(vcuda_gpu *g);
void sg_capture_output(vcuda_gpu *g);

/* server_gpu_memory.c */
allocation *sg_find_range(client *cl, uint64_t p, uint64_t n);
int sg_h2d(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r);
int sg_d2h(vcuda_gpu *g, vcuda_conn *c, client *cl, const vcuda_msg *q, vcuda_msg *r, char *why);
int sg_alloc_refused(client *cl, vcuda_msg *r, const char *api, uint64_t bytes);

/* server_gpu_stream.c */
extern vcuda_gpu *sg_the_gpu;
int sg_stream_of(client *cl, uint64_t id, CUstream *s);
int sg_waited_stream(client *cl, uint64_t id, CUstream *s);
CUresult sg_wait_for(vcuda_gpu *g, CUstream s);
void sg_reap_streams(vcuda_gpu *g, client *cl);
CUresult sg_sync_client(vcuda_gpu *g, client *cl);

/* server_gpu_launch.c */
void **sg_unpack_params(const function_info *fi, const uint8_t *blob);
const function_info *sg_launch_function(client *cl, uint64_t id, const vcuda_msg *q, vcuda_msg *r, const char *what);
int sg_launch(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r);
int sg_function_get(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r);
int sg_module(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r);
void sg_module_unload(vcuda_gpu *g, client *cl, handle *h);

/* server_gpu_graph.c */
void sg_graph_exec_free(vcuda_gpu *g, client *cl, graph_exec *x, int alive);
void sg_graph_execs_drop(vcuda_gpu *g, client *cl, CUmodule m, int alive);
int sg_graph_instantiate(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r);
int sg_graph_exec_kernel_set(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r);
int sg_graph_launch(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r);
void sg_twins_drop(vcuda_gpu *g, client *cl, int alive);
void sg_twins_module_gone(client *cl, CUmodule m);
int sg_twin_requests(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r);

/* server_gpu_array.c */
int sg_array_requests(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r);
void sg_arrays_release(vcuda_gpu *g, client *cl, int alive);

#pragma GCC visibility pop

#endif

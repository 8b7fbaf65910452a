/* vcuda server GPU side: the handler behind vcuda_server_run for one GPU.
 *
 * The CUDA driver is resolved at run time (dlopen "libcuda.so.1"), so the server builds
 * without the CUDA toolkit and, on a machine without a GPU, refuses to start with the
 * reason.  All clients share the device's primary context, each on its own worker
 * thread with its own non-blocking streams (its default stream stands in for the
 * legacy one, ordered with its own blocking streams only: a client's per-thread default
 * streams are blocking streams of its own; a blocking stream it destroys with work still
 * queued stays in that order, and in its device synchronize, until the work is done),
 * so no client's work or synchronize waits for another's.  Module images are validated
 * (image.h) and cached under the SHA-256 the server computes itself, to save transfers
 * only: each client loads its own module from the cached image, so its __device__ and
 * __constant__ state is its own, and unloads it when it goes.  Each client has its own
 * table of allocations, streams, events, modules, functions, instantiated graphs (built
 * on the server from a graph the client sends whole, see proto.h), CUDA arrays and
 * texture and surface objects (proto.h, "arrays"), bounded by per-client limits
 * (vcuda_gpu_limits); every handle and device range a client names is checked against
 * that table, and everything in it is released when the client goes away.
 *
 * Quotas are per tenant (tenants.h): the device memory all of a tenant's connections
 * make the GPU hold together is charged against its quota, and a request that would
 * take it past is refused by name (cudaErrorMemoryAllocation, naming the tenant and
 * its quota) before the driver is asked.  Charged: allocations (MALLOC, MALLOC_PITCH
 * with the driver's padding), CUDA arrays, graph allocation nodes (while their twin or
 * exec keeps them: see "graph twins"), the data of the modules a client loads -- its
 * __device__ and __constant__ variables and code, sized from the image before loading
 * (vcuda_image_footprint; a PTX variable the image does not size is sized by the driver
 * after loading, and the module unloaded again if it does not fit) -- and what context
 * limits reserve (LIMIT_SET, see server_gpu_device.c "context limits": the stack's size times
 * the device's resident threads, the heap and printf FIFO sizes).  Each is given back
 * when it is freed or unloaded and, for all a client still holds, when it goes; the
 * shared context's limits when the tenant's last connection goes, the context then
 * getting its previous values back.  Not charged: what the driver keeps per context and
 * per stream (a context per client with --isolation context: bounded by the tenant's
 * connection limit), the local memory a kernel's own frame needs beyond the stack limit
 * (the driver grows that reservation at launch), and host memory.  The counts are kept
 * in the process that serves the tenant's connections: with --isolation process each
 * tenant's serving process holds all of them (and only them), otherwise the one serving
 * process holds every tenant's.
 *
 * Kernel arguments cannot be checked: a kernel can address any memory of its process's
 * address space.  A sticky error (700, 702, 710, 714-719, 721, 999) ends the session of
 * the client that caused it with that error, then every other session of the process,
 * and stops the serving process (vcuda_gpu_context_lost says so): a fresh one takes
 * over, because the driver keeps a sticky error for the life of the process, in every
 * context of it.  What that means for each isolation mode of vcuda-server:
 *   shared  (the default) one context for every client: modules, streams and handles
 *           are each client's own, but any kernel can read and write any memory of the
 *           context, other clients' and other tenants' included, and a sticky error
 *           ends every session.
 *   context (limits.isolation) a context per client, at the price of a context's
 *           creation per connection: modules, handles and context settings apart, but
 *           NOT memory: the contexts share the process's address space (a kernel given
 *           another client's device pointer reads it), and a sticky error still ends
 *           every session.
 *   process (server_isolate.h) a serving process of its own per tenant, each running
 *           this handler as in shared: a kernel of one tenant cannot reach another
 *           tenant's memory (such a pointer faults, or names the tenant's own memory),
 *           and a sticky error ends only that tenant's sessions.
 * No mode partitions the GPU's compute and memory bandwidth or its total memory (no
 * MIG/MPS), and clients of one tenant always share a process.
 * Context-wide settings (LIMIT_SET) are taken only on a client's own context, or on the
 * shared one while that client is its only one (see "quotas" above for what they cost
 * the tenant and when they are undone).  Device printf output (which the driver
 * writes to the process's stdout for every context alike) and device assertion messages
 * (to its stderr) are shipped to a client only while it is its process's only client;
 * otherwise they stay on the server's stdout and stderr (assertion messages go to the
 * server's stderr in any case). */
#ifndef VCUDA_SERVER_GPU_H
#define VCUDA_SERVER_GPU_H

#include "vcuda/server_loop.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vcuda_gpu vcuda_gpu;

/* Per-client limits (device memory quotas are the tenants', tenants.h). */
typedef struct {
    uint32_t max_handles;    /* streams, events, modules and functions of one client */
    uint32_t max_modules;    /* modules one client may have loaded */
    size_t cache_bytes;      /* bytes of validated images kept for later clients */
    int isolation;           /* 1: a context per client (--isolation context) */
} vcuda_gpu_limits;
#define VCUDA_GPU_LIMITS_DEFAULT {16384, 256, (size_t)256 << 20, 0}
void vcuda_gpu_set_limits(const vcuda_gpu_limits *limits);

/* Opens the driver and device `ordinal`, retains its primary context.  NULL with the
 * reason in why when there is no driver, no such GPU, or the driver is too old.
 * chunk_bytes: size of the D2H reply chunks (pipelined through two pinned buffers). */
vcuda_gpu *vcuda_gpu_open(int ordinal, size_t chunk_bytes, volatile sig_atomic_t *stop,
                          char *why);
/* The handler for vcuda_server_config (ctx is the vcuda_gpu). */
struct vcuda_handler vcuda_gpu_handler(vcuda_gpu *g);
void vcuda_gpu_close(vcuda_gpu *g);
/* stdout and stderr back to what they were, with what the pipes still hold written to
 * them (vcuda_gpu_close does it; a process leaving a lost context calls it alone). */
void vcuda_gpu_end_output(vcuda_gpu *g);
/* The sticky CUresult that ended this process's use of the GPU, or 0. */
int vcuda_gpu_context_lost(vcuda_gpu *g);

#ifdef __cplusplus
}
#endif
#endif

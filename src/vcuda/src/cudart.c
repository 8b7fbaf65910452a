/* libcudart stand-in: the CUDA runtime API of unmodified programs (nvcc -cudart
 * shared), forwarded to vcuda servers.  Built as libcudart.so.<major> with the
 * runtime's own symbol version, so the dynamic linker takes it in place of NVIDIA's
 * when its directory comes first on LD_LIBRARY_PATH (or with LD_PRELOAD).
 *
 * What nvcc emits is covered: the fatbinary/function registration, the call
 * configuration push/pop, __cudaGetKernel and __cudaLaunchKernel (CUDA 12.8+) and
 * cudaLaunchKernel, and with --default-stream per-thread their _ptsz/_ptds forms
 * (cudart_ptds.c; see "the default streams" below).  Each kernel's parameter sizes come from the server
 * (cuFuncGetParamInfo on the loaded image) and are cached per function, so the
 * arguments nvcc passes as void*[] are packed without recompiling anything.  Every
 * symbol the real runtime exports is exported here too: what this file does not
 * define is a generated stub (cudart_stub.h), and what vcuda cannot provide (managed
 * and zero-copy memory, mipmapped arrays, IPC, graphics interop) returns
 * cudaErrorNotSupported after "vcuda: NAME is not supported remotely" on stderr,
 * once per function. */
#define _GNU_SOURCE
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

/* A mark that this is vcuda's runtime and not NVIDIA's (the two export the same cuda*
 * names): programs such as vcuda-bench look it up to know whether calls are remote. */
EXPORT const char vcuda_stand_in[] = "vcuda libcudart stand-in";
#define FATBIN_WRAPPER_MAGIC 0x466243b1u
#define FATBIN_MAGIC 0xba55ed50u

/* ---- per-thread state, as in the real runtime ------------------------------------- */

static _Thread_local int current_device;
static _Thread_local cudaError_t last_error;

static cudaError_t record(cudaError_t e)
{
    if (e != cudaSuccess) last_error = e;
    return e;
}

/* Room for one more element in a growing array (*cap doubles): 0, or -1 if out of memory. */
static int grow(void *arr, size_t *cap, size_t n, size_t elem)
{
    void **p = arr;
    if (n < *cap) return 0;
    size_t c = *cap ? 2 * *cap : 64;
    void *q = realloc(*p, c * elem);
    if (!q) return -1;
    *p = q, *cap = c;
    return 0;
}

/* ---- connection set-up, once per process ----------------------------------------- */

static pthread_once_t open_once = PTHREAD_ONCE_INIT;
static cudaError_t open_error;
static int async_launch = 1;
static int server_graphs = 1; /* graphs built and run on the server (see "graphs") */

/* An environment switch between two words: *on = (value is `yes`), unchanged if unset;
 * -1 (said on stderr) for any other value. */
static int env_choice(const char *name, const char *yes, const char *no, int *on)
{
    const char *l = getenv(name);
    if (!l || !*l) return 0;
    if (strcmp(l, yes) && strcmp(l, no)) {
        fprintf(stderr, "vcuda: %s='%s' is not %s or %s\n", name, l, yes, no);
        return -1;
    }
    *on = !strcmp(l, yes);
    return 0;
}

static void open_servers(void)
{
    char why[VCUDA_WHY_LEN];
    if (env_choice("VCUDA_LAUNCH", "async", "sync", &async_launch) ||
        env_choice("VCUDA_GRAPHS", "server", "client", &server_graphs)) {
        open_error = cudaErrorInitializationError;
        return;
    }
    if (vcuda_client_open(why)) {
        fprintf(stderr, "vcuda: %s\n", why);
        open_error = cudaErrorInitializationError;
    } else if (vcuda_client_device_count() == 0) {
        fprintf(stderr, "vcuda: no reachable server: no devices\n");
        open_error = cudaErrorNoDevice;
    }
}

/* Every API entry that needs a server starts here. */
static cudaError_t ready(void)
{
    pthread_once(&open_once, open_servers);
    return open_error;
}

static void fetch_output(int device);

/* Status of a call -> cudaError_t, with the server's code for its own errors.  A reply
 * that says device printf output waits has it fetched and written to stdout first, so
 * it comes before anything the program prints after the call. */
static cudaError_t result(vcuda_client_status s, const vcuda_msg *reply, const char *api, const char *why)
{
    if ((s == VCUDA_CLIENT_OK || s == VCUDA_CLIENT_REMOTE_ERROR) && (reply->hdr.flags & VCUDA_FLAG_OUTPUT)) {
        cudaError_t code = s == VCUDA_CLIENT_OK ? cudaSuccess : (cudaError_t)(int)(int64_t)reply->v[0];
        fetch_output(current_device);
        return code ? record(code) : cudaSuccess;
    }
    if (s == VCUDA_CLIENT_OK) return cudaSuccess;
    if (s == VCUDA_CLIENT_REMOTE_ERROR) return record((cudaError_t)(int)(int64_t)reply->v[0]);
    if (s != VCUDA_CLIENT_UNAVAILABLE) fprintf(stderr, "vcuda: %s: %s\n", api, why);
    return record((cudaError_t)vcuda_client_cuda_error(s));
}

static cudaError_t call(unsigned op, const uint64_t *v, unsigned nv, vcuda_msg *reply, const char *api)
{
    char why[VCUDA_WHY_LEN];
    vcuda_msg m;
    cudaError_t e = ready();
    if (e) return record(e);
    memset(&m, 0, sizeof m);
    m.hdr.opcode = (uint16_t)op;
    for (unsigned i = 0; i < nv; ++i) m.v[i] = v[i];
    m.nv = nv;
    return result(vcuda_client_call(current_device, &m, reply, 0, why), reply, api, why);
}

/* Once per function (said: its own flag), the name on stderr; cudaErrorNotSupported. */
int vcuda_cudart_unsupported(const char *name, int *said)
{
    if (!atomic_exchange((_Atomic int *)said, 1)) fprintf(stderr, "vcuda: %s is not supported remotely\n", name);
    return record(cudaErrorNotSupported);
}

/* The same for the functions defined here that refuse some uses, with the reason. */
#define unsupported(api, reason)                                                          \
    ({                                                                                    \
        static int said_;                                                                 \
        if (!atomic_exchange((_Atomic int *)&said_, 1))                                    \
            fprintf(stderr, "vcuda: %s is not supported remotely: %s\n", api, reason);   \
        record(cudaErrorNotSupported);                                                    \
    })

/* ---- remote streams and events ---------------------------------------------------- */

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

/* Stream capture (see "graphs" below): each hook records what a capturing stream is
 * given instead of sending it, and returns 1; 0 where the stream is not capturing. */
static struct graph *capturing(cudaStream_t s);
static int capture_kernel(cudaStream_t s, void *k, dim3 grid, dim3 block, void **args, size_t shmem, cudaError_t *e);
static int capture_copy(cudaStream_t s, void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaError_t *e);
static int capture_set(cudaStream_t s, void *p, size_t pitch, int value, size_t width, size_t height, cudaError_t *e);
static int capture_host(cudaStream_t s, cudaHostFn_t fn, void *data, cudaError_t *e);
static cudaError_t join_capture(struct graph *g, remote_object *stream);
#define STREAM_MAGIC 0x5354524du
#define EVENT_MAGIC 0x45564e54u

/* Stream ids (cudaStreamGetId): the legacy stream of device d has d + 1, every stream
 * made here the next number after those. */
static _Atomic unsigned long long stream_ids = VCUDA_MAX_DEVICES;

static cudaError_t create_object(unsigned op, unsigned flags, uint32_t magic, void **out, const char *api)
{
    vcuda_msg r;
    uint64_t v = flags;
    if (!out) return record(cudaErrorInvalidValue);
    cudaError_t e = call(op, &v, 1, &r, api);
    if (e) return e;
    remote_object *o = malloc(sizeof *o);
    if (!o) return record(cudaErrorMemoryAllocation);
    *o = (remote_object){magic, current_device, r.v[0], flags, 0, NULL, 0};
    if (magic == STREAM_MAGIC) o->id = atomic_fetch_add(&stream_ids, 1) + 1;
    *out = o;
    return cudaSuccess;
}

static void forget_stream_attrs(cudaStream_t s);

/* ---- the default streams ------------------------------------------------------------ *
 * The legacy default stream (NULL, cudaStreamLegacy) is the server's default stream of
 * this process's connection: one per device, shared by all host threads, as the real
 * runtime's is one per context; the server orders it with the blocking streams
 * (server_gpu.c, join_streams).  The per-thread default stream (cudaStreamPerThread,
 * and NULL in a call through a _ptsz/_ptds entry point: cudart_ptds.c) is one stream
 * per host thread and device, as in the real runtime: an ordinary blocking stream on
 * the server (flags 0), so it orders with the legacy stream and with no other stream,
 * made by the thread's first use of it on the device, and destroyed when the thread
 * ends (the server keeps work still queued in it, see reap_streams there) or when the
 * device is reset.  Every path that takes a stream sees it as the stream it is
 * (own_stream), so launches, copies, events, waits and captures treat it like any
 * other. */
_Thread_local int vcuda_per_thread_call;

typedef struct {
    remote_object *stream[VCUDA_MAX_DEVICES];
    unsigned generation[VCUDA_MAX_DEVICES]; /* resets[d] when it was made */
} thread_streams;
static _Thread_local thread_streams *my_streams;
static _Atomic unsigned resets[VCUDA_MAX_DEVICES]; /* cudaDeviceReset: every thread's stream of d goes */
static pthread_key_t streams_key;
static pthread_once_t streams_once = PTHREAD_ONCE_INIT;
static int streams_key_ok;

/* The legacy stream?  The per-thread one? */
static int legacy_stream(cudaStream_t s) { return s == cudaStreamLegacy || (!s && !vcuda_per_thread_call); }
static int per_thread_stream(cudaStream_t s) { return s == cudaStreamPerThread || (!s && vcuda_per_thread_call); }

/* This thread's per-thread stream of device d if it is there (made before the last
 * reset of d), else NULL; one made before is let go here (the server's went with the
 * reset). */
static remote_object *thread_stream(int d)
{
    thread_streams *t = my_streams;
    if (!t || !t->stream[d]) return NULL;
    if (t->generation[d] != atomic_load(&resets[d])) {
        forget_stream_attrs((cudaStream_t)t->stream[d]);
        t->stream[d]->magic = 0;
        free(t->stream[d]);
        t->stream[d] = NULL;
    }
    return t->stream[d];
}

/* At the thread's end: its per-thread streams are destroyed (their queued work still
 * runs, and is still waited for by a device synchronize, see reap_streams). */
static void streams_end(void *arg)
{
    thread_streams *t = arg;
    my_streams = t;
    for (int d = 0; d < VCUDA_MAX_DEVICES; ++d) {
        remote_object *o = thread_stream(d);
        if (!o) continue;
        forget_stream_attrs((cudaStream_t)o);
        vcuda_msg r;
        int saved = current_device;
        current_device = d;
        call(VCUDA_OP_STREAM_DESTROY, &o->handle, 1, &r, "cudaStreamPerThread (the thread's end)");
        current_device = saved;
        if (o->capture) continue; /* (a capture still names it: kept for the capture's end) */
        o->magic = 0;
        free(o);
    }
    my_streams = NULL;
    free(t);
}

static void streams_key_make(void) { streams_key_ok = !pthread_key_create(&streams_key, streams_end); }

/* The per-thread stream of the current device, made on first use. */
static cudaError_t make_thread_stream(remote_object **out)
{
    int d = current_device;
    cudaError_t e = ready();
    if (e) return record(e);
    if ((*out = thread_stream(d))) return cudaSuccess;
    pthread_once(&streams_once, streams_key_make);
    if (!my_streams) {
        thread_streams *t = calloc(1, sizeof *t);
        if (!t || !streams_key_ok || pthread_setspecific(streams_key, t)) return free(t), record(cudaErrorMemoryAllocation);
        my_streams = t;
    }
    unsigned gen = atomic_load(&resets[d]);
    if ((e = create_object(VCUDA_OP_STREAM_CREATE, cudaStreamDefault, STREAM_MAGIC, (void **)out, "cudaStreamPerThread")))
        return e;
    my_streams->stream[d] = *out, my_streams->generation[d] = gen;
    return cudaSuccess;
}

/* *s as the stream it is: the per-thread stream (made if need be) where *s names it;
 * unchanged otherwise. */
static cudaError_t own_stream(cudaStream_t *s)
{
    remote_object *o;
    if (!per_thread_stream(*s)) return cudaSuccess;
    cudaError_t e = make_thread_stream(&o);
    if (!e) *s = (cudaStream_t)o;
    return e;
}

/* The same where nothing is made: the per-thread stream if it exists, else NULL (no
 * work, no capture, flags 0, priority 0: what a new one would say), the legacy stream
 * NULL, another stream itself. */
static cudaStream_t existing_stream(cudaStream_t s)
{
    if (per_thread_stream(s)) return (cudaStream_t)thread_stream(current_device);
    return legacy_stream(s) ? NULL : s;
}

/* Stream -> server handle (0: the legacy stream).  Invalid handle if it is not a stream
 * of the current device. */
static cudaError_t stream_handle(cudaStream_t s, uint64_t *h)
{
    *h = 0;
    if (legacy_stream(s)) return cudaSuccess;
    cudaError_t e = own_stream(&s);
    if (e) return e;
    const remote_object *o = (const remote_object *)s;
    if (o->magic != STREAM_MAGIC || o->device != current_device) return record(cudaErrorInvalidResourceHandle);
    *h = o->handle;
    return cudaSuccess;
}

/* ---- host-synchronous calls --------------------------------------------------------- *
 * The copies and sets that take no stream (cudaMemcpy, cudaMemset, cudaMemcpy2D ...) are
 * issued into the default stream (legacy, or per-thread through their _ptds entry
 * points) and, as CUDA's "API synchronization behavior" says, a copy from host memory
 * returns complete, with the stream's earlier work: its last frame asks the server for
 * that (VCUDA_FLAG_SYNC), and one through the staging buffer (arrays, strided rows)
 * synchronizes the stream at its end.  A copy to host memory is complete on return in
 * any case; device-to-device copies and sets need nothing more.  On a capturing
 * per-thread stream they are refused by name: they cannot be captured as they are, and
 * how the real runtime fails them is not modelled. */
static _Thread_local int host_sync;
#define SYNCHRONOUS(api, expr)                                                                     \
    ({                                                                                             \
        cudaError_t r_;                                                                            \
        if (capturing(NULL)) {                                                                     \
            r_ = unsupported(api, "a copy or set without a stream while the per-thread default stream captures"); \
        } else {                                                                                   \
            int outer_ = host_sync;                                                                \
            host_sync = 1;                                                                         \
            r_ = (expr);                                                                           \
            host_sync = outer_;                                                                    \
        }                                                                                          \
        r_;                                                                                        \
    })

static cudaError_t object_call(unsigned op, const void *obj, uint32_t magic, const char *api, vcuda_msg *r)
{
    const remote_object *o = obj;
    vcuda_msg local;
    if (!o || o->magic != magic) return record(cudaErrorInvalidResourceHandle);
    int saved = current_device;
    current_device = o->device; /* an object is served by the server that made it */
    cudaError_t e = call(op, &o->handle, 1, r ? r : &local, api);
    current_device = saved;
    return e;
}

static cudaError_t destroy_object(unsigned op, void *obj, uint32_t magic, const char *api)
{
    cudaError_t e = object_call(op, obj, magic, api, NULL);
    if (e != cudaErrorInvalidResourceHandle) {
        ((remote_object *)obj)->magic = 0;
        free(obj);
    }
    return e;
}

/* ---- device allocations known to this process ------------------------------------- */

typedef struct {
    int device;
    uint64_t base, size;
} allocation;

static pthread_mutex_t alloc_mu = PTHREAD_MUTEX_INITIALIZER;
static allocation *allocs;
static size_t nalloc, cap_alloc;

/* [base, +size) is device memory of `device` (cudaMemcpyDefault's question); 0 if the
 * table could hold it. */
static int table_add(int device, uint64_t base, uint64_t size)
{
    pthread_mutex_lock(&alloc_mu);
    int ok = !grow(&allocs, &cap_alloc, nalloc, sizeof *allocs);
    if (ok) allocs[nalloc++] = (allocation){device, base, size};
    pthread_mutex_unlock(&alloc_mu);
    return ok ? 0 : -1;
}

/* A new allocation of the current device; one the table cannot hold is freed again. */
static cudaError_t remember(uint64_t base, uint64_t size)
{
    int ok = !table_add(current_device, base, size);
    if (!ok) {
        vcuda_msg r;
        call(VCUDA_OP_FREE, &base, 1, &r, "cudaFree");
        return record(cudaErrorMemoryAllocation);
    }
    return cudaSuccess;
}

/* Is a inside an allocation of the device (any device: -1)? */
static int in_allocation(uint64_t a, int device)
{
    int found = 0;
    pthread_mutex_lock(&alloc_mu);
    for (size_t i = 0; i < nalloc && !found; ++i)
        found = (device < 0 || allocs[i].device == device) && a >= allocs[i].base && a - allocs[i].base < allocs[i].size;
    pthread_mutex_unlock(&alloc_mu);
    return found;
}

/* Is p inside an allocation of the current device?  (cudaMemcpyDefault's question.) */
static int is_device_pointer(const void *p) { return in_allocation((uint64_t)(uintptr_t)p, current_device); }

/* ---- host memory handed out as pinned (zero-copy refusal) ----------------------------- */

/* With the real runtime, memory from cudaHostAlloc, cudaMallocHost and cudaHostRegister
 * is reachable by kernels at its host address (UVA), and programs rely on it (a kernel
 * writing a result into pinned memory).  Through vcuda that address means nothing to
 * the remote GPU: a kernel given it would fault there and take the context down.  So
 * every such range is kept here, sorted by base, and every launch path scans the
 * kernel's argument bytes for an address inside one of them (host_arg) and refuses the
 * launch by name.  The table is empty in most programs: one relaxed load then. */
typedef struct {
    uint64_t base, end;
    const char *from; /* the call that made it */
    unsigned flags;   /* as given to it (cudaHostGetFlags) */
} host_range;

static pthread_mutex_t host_mu = PTHREAD_MUTEX_INITIALIZER;
static host_range *host_ranges;
static size_t nhost, cap_host;
static _Atomic size_t nhost_seen; /* nhost, for the lock-free empty check */

/* The range holding a (host_mu held), else NULL: binary search over the sorted bases. */
static const host_range *host_range_of(uint64_t a)
{
    size_t lo = 0, hi = nhost;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (host_ranges[mid].base <= a) lo = mid + 1;
        else hi = mid;
    }
    return lo && a < host_ranges[lo - 1].end ? &host_ranges[lo - 1] : NULL;
}

static cudaError_t host_range_add(const void *p, size_t n, const char *from, unsigned flags)
{
    uint64_t base = (uint64_t)(uintptr_t)p;
    pthread_mutex_lock(&host_mu);
    size_t at = nhost;
    while (at && host_ranges[at - 1].base > base) --at;
    uint64_t end = base + (n ? n : 1);
    cudaError_t e = (at && host_ranges[at - 1].end > base) || (at < nhost && host_ranges[at].base < end)
                        ? cudaErrorHostMemoryAlreadyRegistered
                    : grow(&host_ranges, &cap_host, nhost, sizeof *host_ranges) ? cudaErrorMemoryAllocation
                                                                                 : cudaSuccess;
    if (!e) {
        memmove(&host_ranges[at + 1], &host_ranges[at], (nhost - at) * sizeof *host_ranges);
        host_ranges[at] = (host_range){base, end, from, flags};
        atomic_store_explicit(&nhost_seen, ++nhost, memory_order_relaxed);
    }
    pthread_mutex_unlock(&host_mu);
    return e ? record(e) : cudaSuccess;
}

/* Removes the range starting at p; 0 where there is none. */
static int host_range_remove(const void *p)
{
    uint64_t base = (uint64_t)(uintptr_t)p;
    pthread_mutex_lock(&host_mu);
    const host_range *r = host_range_of(base);
    int found = r && r->base == base;
    if (found) {
        size_t at = (size_t)(r - host_ranges);
        memmove(&host_ranges[at], &host_ranges[at + 1], (nhost - at - 1) * sizeof *host_ranges);
        atomic_store_explicit(&nhost_seen, --nhost, memory_order_relaxed);
    }
    pthread_mutex_unlock(&host_mu);
    return found;
}

/* Whether a kernel's packed arguments (nparams of the given sizes) hold an address in
 * pinned host memory in any naturally aligned 8-byte word of a parameter (so a pointer
 * inside a struct counts too); if so, says which once, on stderr, naming api and the
 * argument, and returns cudaErrorNotSupported.  Device addresses are the server's and
 * host ones this process's, so the two can coincide: a word inside one of this
 * process's device allocations is taken for the device pointer it most likely is. */
static cudaError_t host_arg(const char *api, const uint8_t *args, uint32_t nparams, const uint32_t *sizes)
{
    static _Atomic int said;
    if (!atomic_load_explicit(&nhost_seen, memory_order_relaxed)) return cudaSuccess;
    const host_range *hit = NULL;
    uint32_t which = 0;
    pthread_mutex_lock(&host_mu);
    for (uint32_t i = 0, at = 0; i < nparams && !hit; at += sizes[i++])
        for (uint32_t o = 0; o + 8 <= sizes[i] && !hit; o += 8) {
            uint64_t w;
            memcpy(&w, args + at + o, sizeof w);
            if ((hit = host_range_of(w)) && in_allocation(w, -1)) hit = NULL;
            if (hit) which = i;
        }
    const char *from = hit ? hit->from : NULL;
    pthread_mutex_unlock(&host_mu);
    if (!hit) return cudaSuccess;
    if (!atomic_exchange(&said, 1))
        fprintf(stderr, "vcuda: %s: kernel argument %u points into host memory from %s (zero-copy), which is not "
                "supported remotely\n", api, which, from);
    return record(cudaErrorNotSupported);
}

/* ---- registered images and kernels ------------------------------------------------- */

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

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER; /* also serializes lazy loads */
static kernel **kernels;
static size_t nkernels, cap_kernels;

typedef struct {
    int magic;
    int version;
    const unsigned long long *data;
    void *filename_or_fatbins;
} fatbin_wrapper;

EXPORT void **__cudaRegisterFatBinary(void *fat_cubin)
{
    const fatbin_wrapper *w = fat_cubin;
    fatbin *fb = calloc(1, sizeof *fb);
    if (!fb) {
        fprintf(stderr, "vcuda: __cudaRegisterFatBinary: out of memory\n");
        abort();
    }
    if (!w || (unsigned)w->magic != FATBIN_WRAPPER_MAGIC || !w->data) {
        fprintf(stderr, "vcuda: __cudaRegisterFatBinary: not an nvcc fatbinary wrapper; its kernels cannot run\n");
        return (void **)fb;
    }
    const uint8_t *p = (const uint8_t *)w->data;
    uint32_t magic = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    uint16_t hsize = (uint16_t)(p[6] | p[7] << 8);
    uint64_t fsize;
    memcpy(&fsize, p + 8, sizeof fsize); /* little-endian hosts only, like nvcc's output */
    if (magic != FATBIN_MAGIC) {
        fprintf(stderr, "vcuda: __cudaRegisterFatBinary: fatbin magic 0x%08x unknown; its kernels cannot run\n", magic);
        return (void **)fb;
    }
    fb->image = p;
    fb->size = hsize + fsize;
    return (void **)fb;
}

EXPORT void __cudaRegisterFatBinaryEnd(void **handle) { (void)handle; }
EXPORT char __cudaInitModule(void **handle) { (void)handle; return 1; }

/* At exit: the server keeps the image cached; our side has nothing worth freeing. */
EXPORT void __cudaUnregisterFatBinary(void **handle) { (void)handle; }

/* Appends item to a registration list; a program whose registration fails cannot run
 * (nvcc's start-up code has no way to hear of it), so that stops it with the reason. */
static void add_registered(void *list, size_t *n, size_t *cap, void *item, const char *api, const char *name)
{
    pthread_mutex_lock(&reg_mu);
    if (!item || grow(list, cap, *n, sizeof item)) {
        fprintf(stderr, "vcuda: %s(%s): out of memory\n", api, name);
        abort();
    }
    (*(void ***)list)[(*n)++] = item;
    pthread_mutex_unlock(&reg_mu);
}

EXPORT void __cudaRegisterFunction(void **handle, const char *host_fun, char *device_fun,
                                   const char *device_name, int thread_limit, uint3 *tid,
                                   uint3 *bid, dim3 *bdim, dim3 *gdim, int *wsize)
{
    (void)device_fun, (void)thread_limit, (void)tid, (void)bid, (void)bdim, (void)gdim, (void)wsize;
    kernel *k = calloc(1, sizeof *k);
    if (k) k->host_fun = host_fun, k->name = device_name, k->fb = (fatbin *)handle;
    add_registered(&kernels, &nkernels, &cap_kernels, k, "__cudaRegisterFunction", device_name);
}

/* __device__ and __constant__ variables: the host shadow's address names the variable
 * in cudaMemcpyToSymbol & co.; its device address comes from the server's module. */
typedef struct {
    const void *host_var;
    const char *name;
    fatbin *fb;
    uint64_t dptr[VCUDA_MAX_DEVICES], size[VCUDA_MAX_DEVICES]; /* 0: not looked up yet */
} device_var;
static device_var **vars;
static size_t nvars, cap_vars;

EXPORT void __cudaRegisterVar(void **handle, char *host_var, char *device_address, const char *device_name,
                              int ext, size_t size, int constant, int global)
{
    (void)device_address, (void)ext, (void)size, (void)constant, (void)global;
    device_var *v = calloc(1, sizeof *v);
    if (v) v->host_var = host_var, v->name = device_name, v->fb = (fatbin *)handle;
    add_registered(&vars, &nvars, &cap_vars, v, "__cudaRegisterVar", device_name);
}

EXPORT void __cudaRegisterManagedVar(void **handle, void **host_var_ptr, char *device_address,
                                     const char *device_name, int ext, size_t size, int constant, int global)
{
    (void)handle, (void)host_var_ptr, (void)device_address, (void)ext, (void)size, (void)constant, (void)global;
    fprintf(stderr, "vcuda: __managed__ variable %s: managed memory cannot be remoted; this program cannot run under vcuda\n",
            device_name);
    exit(1);
}

static kernel *find_kernel(const void *host_fun)
{
    kernel *k = NULL;
    pthread_mutex_lock(&reg_mu);
    for (size_t i = 0; i < nkernels && !k; ++i)
        if (kernels[i]->host_fun == host_fun) k = kernels[i];
    pthread_mutex_unlock(&reg_mu);
    return k;
}

/* Module on the current device: by hash if the server has it, else the image. */
static cudaError_t load_module(fatbin *fb, uint64_t *module)
{
    char why[VCUDA_WHY_LEN];
    vcuda_msg m, r;
    vcuda_client_status s;
    if (!fb->image) return record(cudaErrorInvalidKernelImage);
    if (!fb->hashed) vcuda_sha256(fb->image, fb->size, fb->hash), fb->hashed = 1;
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_MODULE_LOOKUP;
    memcpy(m.hash, fb->hash, VCUDA_HASH_SIZE);
    s = vcuda_client_call(current_device, &m, &r, 0, why);
    if (s == VCUDA_CLIENT_REMOTE_ERROR && (int64_t)r.v[0] == cudaErrorSymbolNotFound) {
        if (fb->size > VCUDA_MAX_CHUNK) {
            fprintf(stderr, "vcuda: module image of %zu bytes exceeds the %u-byte frame limit\n", fb->size, VCUDA_MAX_CHUNK);
            return record(cudaErrorInvalidKernelImage);
        }
        m.hdr.opcode = VCUDA_OP_MODULE_LOAD;
        m.blob = fb->image, m.blob_len = (uint32_t)fb->size;
        s = vcuda_client_call(current_device, &m, &r, 0, why);
    }
    if (s == VCUDA_CLIENT_REMOTE_ERROR)
        fprintf(stderr, "vcuda: loading a module on device %d: %.*s\n", current_device, (int)r.str_len, (const char *)r.str);
    cudaError_t e = result(s, &r, "module load", why);
    if (!e) *module = r.v[0];
    return e;
}

/* A name in fb's module on device d (a kernel: FUNCTION_GET, a variable: MODULE_GLOBAL),
 * loading the module first where it is not.  reg_mu held. */
static cudaError_t module_lookup(fatbin *fb, int d, unsigned op, const char *name, vcuda_msg *r)
{
    char why[VCUDA_WHY_LEN];
    vcuda_msg m;
    cudaError_t e = fb->module[d] ? cudaSuccess : load_module(fb, &fb->module[d]);
    if (e) return e;
    memset(&m, 0, sizeof m);
    m.hdr.opcode = (uint16_t)op;
    m.v[0] = fb->module[d], m.nv = 1;
    m.str = (const uint8_t *)name, m.str_len = (uint32_t)strlen(name);
    vcuda_client_status s = vcuda_client_call(d, &m, r, 0, why);
    if (s == VCUDA_CLIENT_REMOTE_ERROR) fprintf(stderr, "vcuda: %s: %.*s\n", name, (int)r->str_len, (const char *)r->str);
    return result(s, r, op == VCUDA_OP_FUNCTION_GET ? "function lookup" : "symbol lookup", why);
}

/* The kernel's function handle on the current device, loading what is missing. */
static cudaError_t resolve(kernel *k, uint64_t *fn)
{
    cudaError_t e = ready();
    int d = current_device;
    if (e) return record(e);
    if (d < 0 || d >= vcuda_client_device_count()) return record(cudaErrorInvalidDevice);
    pthread_mutex_lock(&reg_mu);
    if (!k->handle[d]) {
        vcuda_msg r;
        if (!(e = module_lookup(k->fb, d, VCUDA_OP_FUNCTION_GET, k->name, &r))) {
            k->handle[d] = r.v[0];
            k->nparams = r.nsizes;
            memcpy(k->sizes, r.sizes, r.nsizes * sizeof *r.sizes);
            k->have_sizes = 1;
        }
    }
    *fn = k->handle[d];
    pthread_mutex_unlock(&reg_mu);
    return e;
}

/* Per device, fetched once: the launch limits the driver would check. */
typedef struct {
    int known;
    int max_threads, block[3], grid[3], smem_optin;
} launch_limits;
static launch_limits limits[VCUDA_MAX_DEVICES];

EXPORT cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device);

static cudaError_t check_limits(dim3 grid, dim3 block, size_t shmem)
{
    launch_limits *L = &limits[current_device];
    cudaError_t e;
    if (!L->known) {
        struct { int *v; enum cudaDeviceAttr a; } q[] = {
            {&L->max_threads, cudaDevAttrMaxThreadsPerBlock}, {&L->block[0], cudaDevAttrMaxBlockDimX},
            {&L->block[1], cudaDevAttrMaxBlockDimY}, {&L->block[2], cudaDevAttrMaxBlockDimZ},
            {&L->grid[0], cudaDevAttrMaxGridDimX}, {&L->grid[1], cudaDevAttrMaxGridDimY},
            {&L->grid[2], cudaDevAttrMaxGridDimZ}, {&L->smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin}};
        for (size_t i = 0; i < sizeof q / sizeof *q; ++i)
            if ((e = cudaDeviceGetAttribute(q[i].v, q[i].a, current_device))) return e;
        L->known = 1;
    }
    if ((uint64_t)block.x * block.y * block.z > (uint64_t)L->max_threads || block.x > (unsigned)L->block[0] ||
        block.y > (unsigned)L->block[1] || block.z > (unsigned)L->block[2] || grid.x > (unsigned)L->grid[0] ||
        grid.y > (unsigned)L->grid[1] || grid.z > (unsigned)L->grid[2])
        return record(cudaErrorInvalidValue); /* what the driver (and CUDA 13's runtime) say */
    if (shmem > (size_t)L->smem_optin) return record(cudaErrorInvalidValue);
    return cudaSuccess;
}

/* LAUNCH, LAUNCH_COOPERATIVE, or LAUNCH_EX with ex: its attribute scalars (attributes,
 * cluster x, y, z, priority, sync domain; see VCUDA_LAUNCH_EX_LAYOUT). */
static cudaError_t launch_op(kernel *k, dim3 grid, dim3 block, void **args, size_t shmem, cudaStream_t stream,
                             unsigned op, const char *api, const uint64_t *ex)
{
    static _Thread_local uint8_t packed[VCUDA_MAX_PARAM_BYTES];
    char why[VCUDA_WHY_LEN];
    vcuda_msg m, r;
    uint64_t fn, sh;
    cudaError_t e;
    if (!k) return record(cudaErrorInvalidDeviceFunction);
    if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z) return record(cudaErrorInvalidConfiguration);
    if (shmem > UINT32_MAX) return record(cudaErrorInvalidValue);
    /* a captured node keeps no attributes: those that only allow overlap or order may go,
     * a cooperative or clustered kernel cannot run as a plain one */
    if (op == VCUDA_OP_LAUNCH_EX && (ex[0] & (VCUDA_LAUNCH_CLUSTER | VCUDA_LAUNCH_COOPERATIVE)) && capturing(stream))
        return unsupported(api, "cooperative kernels and thread block clusters in a stream capture");
    if (op != VCUDA_OP_LAUNCH_COOPERATIVE && capture_kernel(stream, k, grid, block, args, shmem, &e)) return e;
    if ((e = resolve(k, &fn)) || (e = stream_handle(stream, &sh))) return e;
    memset(&m, 0, sizeof m);
    m.hdr.opcode = (uint16_t)op;
    uint64_t v[] = {fn, grid.x, grid.y, grid.z, block.x, block.y, block.z, shmem, sh};
    memcpy(m.v, v, sizeof v);
    m.nv = 9;
    if (op == VCUDA_OP_LAUNCH_EX) memcpy(m.v + 9, ex, 6 * sizeof *ex), m.nv = 15;
    /* the kernel's parameters, in order, each as many bytes as the kernel declares */
    size_t at = 0;
    for (uint32_t i = 0; i < k->nparams; ++i) {
        memcpy(packed + at, args[i], k->sizes[i]);
        at += k->sizes[i];
    }
    if ((e = host_arg(api, packed, k->nparams, k->sizes))) return e;
    m.nsizes = k->nparams;
    memcpy(m.sizes, k->sizes, k->nparams * sizeof *k->sizes);
    m.blob = packed, m.blob_len = (uint32_t)at;
    r.hdr.flags = 0; /* (no reply when posted) */
    if (async_launch && (op == VCUDA_OP_LAUNCH || (op == VCUDA_OP_LAUNCH_EX && !(ex[0] & VCUDA_LAUNCH_COOPERATIVE)))) {
        /* like the real runtime: the launch returns once queued; what fails on the
         * server is returned by this device's next call (limits are checked here first,
         * so a bad configuration is still reported at the launch) */
        if ((e = check_limits(grid, block, shmem))) return e;
        return result(vcuda_client_post(current_device, &m, why), &r, "kernel launch", why);
    }
    return result(vcuda_client_call(current_device, &m, &r, 0, why), &r, "kernel launch", why);
}

static cudaError_t launch(kernel *k, dim3 grid, dim3 block, void **args, size_t shmem, cudaStream_t stream,
                          const char *api)
{
    return launch_op(k, grid, block, args, shmem, stream, VCUDA_OP_LAUNCH, api, NULL);
}

typedef struct {
    dim3 grid, block;
    size_t shmem;
    void *stream;
} launch_config;
static _Thread_local launch_config config_stack[16];
static _Thread_local int config_depth;

EXPORT unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shmem, void *stream)
{
    if (config_depth == 16) return 1; /* nvcc's stub then skips the launch */
    config_stack[config_depth++] = (launch_config){grid, block, shmem, stream};
    return 0;
}

EXPORT cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *shmem, void *stream)
{
    if (config_depth == 0) return record(cudaErrorMissingConfiguration);
    launch_config c = config_stack[--config_depth];
    *grid = c.grid, *block = c.block, *shmem = c.shmem, *(void **)stream = c.stream;
    return cudaSuccess;
}

EXPORT cudaError_t __cudaGetKernel(cudaKernel_t *kernel_out, const void *host_fun)
{
    kernel *k = find_kernel(host_fun);
    if (!k) return record(cudaErrorInvalidDeviceFunction);
    *kernel_out = (cudaKernel_t)k;
    return cudaSuccess;
}

EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t k, dim3 grid, dim3 block, void **args, size_t shmem,
                                      cudaStream_t stream)
{
    return launch((kernel *)k, grid, block, args, shmem, stream, "cudaLaunchKernel");
}

EXPORT cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
                                    cudaStream_t stream)
{
    return launch(find_kernel(func), grid, block, args, shmem, stream, "cudaLaunchKernel");
}

/* ---- device management ------------------------------------------------------------ */

EXPORT cudaError_t cudaGetDeviceCount(int *count)
{
    cudaError_t e = ready();
    if (!count) return record(cudaErrorInvalidValue);
    *count = e ? 0 : vcuda_client_device_count();
    return record(e);
}

EXPORT cudaError_t cudaSetDevice(int device)
{
    cudaError_t e = ready();
    if (e) return record(e);
    if (device < 0 || device >= vcuda_client_device_count()) return record(cudaErrorInvalidDevice);
    current_device = device;
    return cudaSuccess;
}

EXPORT cudaError_t cudaGetDevice(int *device)
{
    if (!device) return record(cudaErrorInvalidValue);
    *device = current_device;
    return cudaSuccess;
}

/* Managed, pageable and mapped (zero-copy) host memory cannot cross the network: report them absent, so that
 * programs which check (umbench does) take their explicit-copy path. */
static int hidden_attribute(int attr)
{
    return attr == cudaDevAttrManagedMemory || attr == cudaDevAttrConcurrentManagedAccess ||
           attr == cudaDevAttrPageableMemoryAccess || attr == cudaDevAttrPageableMemoryAccessUsesHostPageTables ||
           attr == cudaDevAttrDirectManagedMemAccessFromHost || attr == cudaDevAttrCanMapHostMemory ||
           attr == cudaDevAttrHostNativeAtomicSupported || attr == cudaDevAttrCanUseHostPointerForRegisteredMem;
}

EXPORT cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    vcuda_msg r;
    uint64_t v = (uint64_t)(int64_t)(int)attr;
    if (!value) return record(cudaErrorInvalidValue);
    int saved = current_device;
    cudaError_t e = ready();
    if (e) return record(e);
    if (device < 0 || device >= vcuda_client_device_count()) return record(cudaErrorInvalidDevice);
    if (hidden_attribute(attr)) return *value = 0, cudaSuccess;
    current_device = device;
    e = call(VCUDA_OP_DEVICE_GET_ATTRIBUTE, &v, 1, &r, "cudaDeviceGetAttribute");
    current_device = saved;
    if (!e) *value = (int)(int64_t)r.v[0];
    return e;
}

EXPORT cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device)
{
    vcuda_msg r;
    uint64_t v = 0;
    if (!p) return record(cudaErrorInvalidValue);
    int saved = current_device;
    cudaError_t e = ready();
    if (e) return record(e);
    if (device < 0 || device >= vcuda_client_device_count()) return record(cudaErrorInvalidDevice);
    current_device = device;
    e = call(VCUDA_OP_GET_DEVICE_PROPERTIES, &v, 1, &r, "cudaGetDeviceProperties");
    current_device = saved;
    if (e) return e;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%.*s", (int)r.str_len, (const char *)r.str);
    p->totalGlobalMem = r.v[0], p->sharedMemPerBlock = r.v[1], p->l2CacheSize = (int)r.v[2];
    p->major = (int)r.v[3], p->minor = (int)r.v[4], p->multiProcessorCount = (int)r.v[5];
    p->warpSize = (int)r.v[6], p->maxThreadsPerBlock = (int)r.v[7], p->memoryBusWidth = (int)r.v[10];
    /* the rest through attributes (managed/pageable stay 0, see hidden_attribute) */
    struct { int *field; enum cudaDeviceAttr attr; } more[] = {
        {&p->maxThreadsDim[0], cudaDevAttrMaxBlockDimX}, {&p->maxThreadsDim[1], cudaDevAttrMaxBlockDimY},
        {&p->maxThreadsDim[2], cudaDevAttrMaxBlockDimZ}, {&p->maxGridSize[0], cudaDevAttrMaxGridDimX},
        {&p->maxGridSize[1], cudaDevAttrMaxGridDimY}, {&p->maxGridSize[2], cudaDevAttrMaxGridDimZ},
        {&p->regsPerBlock, cudaDevAttrMaxRegistersPerBlock}, {&p->pciBusID, cudaDevAttrPciBusId},
        {&p->pciDeviceID, cudaDevAttrPciDeviceId}, {&p->pciDomainID, cudaDevAttrPciDomainId},
        {&p->maxThreadsPerMultiProcessor, cudaDevAttrMaxThreadsPerMultiProcessor},
        {&p->unifiedAddressing, cudaDevAttrUnifiedAddressing}};
    for (size_t i = 0; i < sizeof more / sizeof *more; ++i)
        if ((e = cudaDeviceGetAttribute(more[i].field, more[i].attr, device))) return e;
    struct { int *field; enum cudaDeviceAttr attr; } flags[] = {
        {&p->integrated, cudaDevAttrIntegrated}, {&p->canMapHostMemory, cudaDevAttrCanMapHostMemory},
        {&p->concurrentKernels, cudaDevAttrConcurrentKernels}, {&p->ECCEnabled, cudaDevAttrEccEnabled},
        {&p->tccDriver, cudaDevAttrTccDriver}, {&p->asyncEngineCount, cudaDevAttrAsyncEngineCount},
        {&p->persistingL2CacheMaxSize, cudaDevAttrMaxPersistingL2CacheSize},
        {&p->streamPrioritiesSupported, cudaDevAttrStreamPrioritiesSupported},
        {&p->globalL1CacheSupported, cudaDevAttrGlobalL1CacheSupported},
        {&p->localL1CacheSupported, cudaDevAttrLocalL1CacheSupported},
        {&p->regsPerMultiprocessor, cudaDevAttrMaxRegistersPerMultiprocessor},
        {&p->isMultiGpuBoard, cudaDevAttrIsMultiGpuBoard}, {&p->multiGpuBoardGroupID, cudaDevAttrMultiGpuBoardGroupID},
        {&p->hostNativeAtomicSupported, cudaDevAttrHostNativeAtomicSupported},
        {&p->computePreemptionSupported, cudaDevAttrComputePreemptionSupported},
        {&p->canUseHostPointerForRegisteredMem, cudaDevAttrCanUseHostPointerForRegisteredMem},
        {&p->cooperativeLaunch, cudaDevAttrCooperativeLaunch},
        {&p->maxBlocksPerMultiProcessor, cudaDevAttrMaxBlocksPerMultiprocessor},
        {&p->accessPolicyMaxWindowSize, cudaDevAttrMaxAccessPolicyWindowSize},
        {&p->hostRegisterSupported, cudaDevAttrHostRegisterSupported},
        {&p->memoryPoolsSupported, cudaDevAttrMemoryPoolsSupported}, {&p->clusterLaunch, cudaDevAttrClusterLaunch},
        /* texture and surface limits, and the rest the runtime fills from attributes */
        {&p->maxTexture1D, cudaDevAttrMaxTexture1DWidth}, {&p->maxTexture1DMipmap, cudaDevAttrMaxTexture1DMipmappedWidth},
        {&p->maxTexture2D[0], cudaDevAttrMaxTexture2DWidth}, {&p->maxTexture2D[1], cudaDevAttrMaxTexture2DHeight},
        {&p->maxTexture2DMipmap[0], cudaDevAttrMaxTexture2DMipmappedWidth},
        {&p->maxTexture2DMipmap[1], cudaDevAttrMaxTexture2DMipmappedHeight},
        {&p->maxTexture2DLinear[0], cudaDevAttrMaxTexture2DLinearWidth},
        {&p->maxTexture2DLinear[1], cudaDevAttrMaxTexture2DLinearHeight},
        {&p->maxTexture2DLinear[2], cudaDevAttrMaxTexture2DLinearPitch},
        {&p->maxTexture2DGather[0], cudaDevAttrMaxTexture2DGatherWidth},
        {&p->maxTexture2DGather[1], cudaDevAttrMaxTexture2DGatherHeight},
        {&p->maxTexture3D[0], cudaDevAttrMaxTexture3DWidth}, {&p->maxTexture3D[1], cudaDevAttrMaxTexture3DHeight},
        {&p->maxTexture3D[2], cudaDevAttrMaxTexture3DDepth}, {&p->maxTexture3DAlt[0], cudaDevAttrMaxTexture3DWidthAlt},
        {&p->maxTexture3DAlt[1], cudaDevAttrMaxTexture3DHeightAlt}, {&p->maxTexture3DAlt[2], cudaDevAttrMaxTexture3DDepthAlt},
        {&p->maxTextureCubemap, cudaDevAttrMaxTextureCubemapWidth},
        {&p->maxTexture1DLayered[0], cudaDevAttrMaxTexture1DLayeredWidth},
        {&p->maxTexture1DLayered[1], cudaDevAttrMaxTexture1DLayeredLayers},
        {&p->maxTexture2DLayered[0], cudaDevAttrMaxTexture2DLayeredWidth},
        {&p->maxTexture2DLayered[1], cudaDevAttrMaxTexture2DLayeredHeight},
        {&p->maxTexture2DLayered[2], cudaDevAttrMaxTexture2DLayeredLayers},
        {&p->maxTextureCubemapLayered[0], cudaDevAttrMaxTextureCubemapLayeredWidth},
        {&p->maxTextureCubemapLayered[1], cudaDevAttrMaxTextureCubemapLayeredLayers},
        {&p->maxSurface1D, cudaDevAttrMaxSurface1DWidth}, {&p->maxSurface2D[0], cudaDevAttrMaxSurface2DWidth},
        {&p->maxSurface2D[1], cudaDevAttrMaxSurface2DHeight}, {&p->maxSurface3D[0], cudaDevAttrMaxSurface3DWidth},
        {&p->maxSurface3D[1], cudaDevAttrMaxSurface3DHeight}, {&p->maxSurface3D[2], cudaDevAttrMaxSurface3DDepth},
        {&p->maxSurface1DLayered[0], cudaDevAttrMaxSurface1DLayeredWidth},
        {&p->maxSurface1DLayered[1], cudaDevAttrMaxSurface1DLayeredLayers},
        {&p->maxSurface2DLayered[0], cudaDevAttrMaxSurface2DLayeredWidth},
        {&p->maxSurface2DLayered[1], cudaDevAttrMaxSurface2DLayeredHeight},
        {&p->maxSurface2DLayered[2], cudaDevAttrMaxSurface2DLayeredLayers},
        {&p->maxSurfaceCubemap, cudaDevAttrMaxSurfaceCubemapWidth},
        {&p->maxSurfaceCubemapLayered[0], cudaDevAttrMaxSurfaceCubemapLayeredWidth},
        {&p->maxSurfaceCubemapLayered[1], cudaDevAttrMaxSurfaceCubemapLayeredLayers},
        {&p->sparseCudaArraySupported, cudaDevAttrSparseCudaArraySupported},
        {&p->hostRegisterReadOnlySupported, cudaDevAttrHostRegisterReadOnlySupported},
        {&p->timelineSemaphoreInteropSupported, cudaDevAttrTimelineSemaphoreInteropSupported},
        {&p->gpuDirectRDMASupported, cudaDevAttrGPUDirectRDMASupported},
        {(int *)&p->gpuDirectRDMAFlushWritesOptions, cudaDevAttrGPUDirectRDMAFlushWritesOptions},
        {&p->gpuDirectRDMAWritesOrdering, cudaDevAttrGPUDirectRDMAWritesOrdering},
        {(int *)&p->memoryPoolSupportedHandleTypes, cudaDevAttrMemoryPoolSupportedHandleTypes},
        {&p->deferredMappingCudaArraySupported, cudaDevAttrDeferredMappingCudaArraySupported},
        {&p->ipcEventSupported, cudaDevAttrIpcEventSupport}, {&p->unifiedFunctionPointers, (enum cudaDeviceAttr)129 /* the driver's UNIFIED_FUNCTION_POINTERS */},
        {&p->deviceNumaConfig, cudaDevAttrNumaConfig}, {&p->deviceNumaId, cudaDevAttrNumaId},
        {&p->mpsEnabled, cudaDevAttrMpsEnabled}, {&p->hostNumaId, cudaDevAttrHostNumaId},
        {(int *)&p->gpuPciDeviceID, cudaDevAttrGpuPciDeviceId}, {(int *)&p->gpuPciSubsystemID, cudaDevAttrGpuPciSubsystemId},
        {&p->hostNumaMultinodeIpcSupported, cudaDevAttrHostNumaMultinodeIpcSupported}};
    for (size_t i = 0; i < sizeof flags / sizeof *flags; ++i)
        if ((e = cudaDeviceGetAttribute(flags[i].field, flags[i].attr, device))) return e;
    current_device = device;
    e = call(VCUDA_OP_DEVICE_UUID, NULL, 0, &r, "cudaGetDeviceProperties");
    current_device = saved;
    if (e) return e;
    if (r.blob_len == sizeof p->uuid.bytes) memcpy(p->uuid.bytes, r.blob, sizeof p->uuid.bytes);
    struct { size_t *field; enum cudaDeviceAttr attr; } sizes[] = {
        {&p->sharedMemPerMultiprocessor, cudaDevAttrMaxSharedMemoryPerMultiprocessor},
        {&p->totalConstMem, cudaDevAttrTotalConstantMemory}, {&p->memPitch, cudaDevAttrMaxPitch},
        {&p->textureAlignment, cudaDevAttrTextureAlignment}, {&p->texturePitchAlignment, cudaDevAttrTexturePitchAlignment},
        {&p->surfaceAlignment, cudaDevAttrSurfaceAlignment},
        {&p->sharedMemPerBlockOptin, cudaDevAttrMaxSharedMemoryPerBlockOptin},
        {&p->reservedSharedMemPerBlock, cudaDevAttrReservedSharedMemoryPerBlock}};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; ++i) {
        int v = 0;
        if ((e = cudaDeviceGetAttribute(&v, sizes[i].attr, device))) return e;
        *sizes[i].field = (size_t)(unsigned)v;
    }
    return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceGetPCIBusId(char *out, int len, int device)
{
    int dom, bus, dev;
    cudaError_t e;
    if (!out || len <= 0) return record(cudaErrorInvalidValue);
    if ((e = cudaDeviceGetAttribute(&dom, cudaDevAttrPciDomainId, device)) ||
        (e = cudaDeviceGetAttribute(&bus, cudaDevAttrPciBusId, device)) ||
        (e = cudaDeviceGetAttribute(&dev, cudaDevAttrPciDeviceId, device)))
        return e;
    snprintf(out, (size_t)len, "%08x:%02x:%02x.0", (unsigned)dom, (unsigned)bus, (unsigned)dev);
    return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceSynchronize(void)
{
    vcuda_msg r;
    return call(VCUDA_OP_DEVICE_SYNCHRONIZE, NULL, 0, &r, "cudaDeviceSynchronize");
}

static void staging_forget(int device);
EXPORT cudaError_t cudaDeviceReset(void)
{
    vcuda_msg r;
    cudaError_t e = call(VCUDA_OP_DEVICE_RESET, NULL, 0, &r, "cudaDeviceReset");
    if (e) return e;
    /* the server dropped this client's modules and functions on this device too, and its
     * streams: every thread's per-thread stream of the device is made anew (thread_stream) */
    atomic_fetch_add(&resets[current_device], 1);
    pthread_mutex_lock(&reg_mu);
    for (size_t i = 0; i < nkernels; ++i) kernels[i]->handle[current_device] = 0, kernels[i]->fb->module[current_device] = 0;
    for (size_t i = 0; i < nvars; ++i) vars[i]->dptr[current_device] = 0, vars[i]->fb->module[current_device] = 0;
    pthread_mutex_unlock(&reg_mu);
    pthread_mutex_lock(&alloc_mu);
    for (size_t i = 0; i < nalloc;)
        if (allocs[i].device == current_device) allocs[i] = allocs[--nalloc];
        else ++i;
    pthread_mutex_unlock(&alloc_mu);
    staging_forget(current_device);
    return cudaSuccess;
}

EXPORT cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    vcuda_msg r;
    if (!free_bytes || !total) return record(cudaErrorInvalidValue);
    cudaError_t e = call(VCUDA_OP_MEM_GET_INFO, NULL, 0, &r, "cudaMemGetInfo");
    if (!e) *free_bytes = r.v[0], *total = r.v[1];
    return e;
}

EXPORT cudaError_t cudaDriverGetVersion(int *version)
{
    vcuda_msg r;
    if (!version) return record(cudaErrorInvalidValue);
    cudaError_t e = call(VCUDA_OP_DRIVER_GET_VERSION, NULL, 0, &r, "cudaDriverGetVersion");
    if (!e) *version = (int)r.v[0];
    return e;
}

EXPORT cudaError_t cudaRuntimeGetVersion(int *version)
{
    if (!version) return record(cudaErrorInvalidValue);
    *version = CUDART_VERSION;
    return cudaSuccess;
}

/* ---- errors ----------------------------------------------------------------------- */

EXPORT cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

EXPORT cudaError_t cudaPeekAtLastError(void) { return last_error; }

/* The runtime's own names and texts for every code it names (generated from it); any
 * other code is an "unrecognized error code", as there. */
EXPORT const char *cudaGetErrorName(cudaError_t e)
{
    switch ((int)e) {
#define X(code, name, text) case code: return name;
#include "cudart_errors.h"
#undef X
    default: return "unrecognized error code";
    }
}

EXPORT const char *cudaGetErrorString(cudaError_t e)
{
    switch ((int)e) {
#define X(code, name, text) case code: return text;
#include "cudart_errors.h"
#undef X
    default: return "unrecognized error code";
    }
}

/* ---- memory ------------------------------------------------------------------------ */

EXPORT cudaError_t cudaMalloc(void **p, size_t size)
{
    vcuda_msg r;
    uint64_t v = size;
    if (!p) return record(cudaErrorInvalidValue);
    if (size == 0) return *p = NULL, cudaSuccess;
    cudaError_t e = call(VCUDA_OP_MALLOC, &v, 1, &r, "cudaMalloc");
    if (e) return e;
    if ((e = remember(r.v[0], size))) return e;
    *p = (void *)(uintptr_t)r.v[0];
    return cudaSuccess;
}

EXPORT cudaError_t cudaFree(void *p)
{
    vcuda_msg r;
    uint64_t v = (uint64_t)(uintptr_t)p;
    if (!p) return cudaSuccess;
    cudaError_t e = call(VCUDA_OP_FREE, &v, 1, &r, "cudaFree");
    if (e) return e;
    pthread_mutex_lock(&alloc_mu);
    for (size_t i = 0; i < nalloc; ++i)
        if (allocs[i].device == current_device && allocs[i].base == v) {
            allocs[i] = allocs[--nalloc];
            break;
        }
    pthread_mutex_unlock(&alloc_mu);
    return cudaSuccess;
}

/* Host memory stays on this host: "pinned" means nothing to a copy that crosses a
 * socket, so page-aligned ordinary memory does.  Its range is remembered, so that a
 * kernel given an address in it is refused by name (see host_arg). */
static cudaError_t host_alloc(void **p, size_t size, const char *api, unsigned flags)
{
    if (!p) return record(cudaErrorInvalidValue);
    if (posix_memalign(p, 4096, size ? size : 1)) return *p = NULL, record(cudaErrorMemoryAllocation);
    cudaError_t e = host_range_add(*p, size, api, flags);
    if (e) free(*p), *p = NULL;
    return e;
}

EXPORT cudaError_t cudaMallocHost(void **p, size_t size) { return host_alloc(p, size, "cudaMallocHost", 0); }

/* Mapped memory is refused as cudaHostRegister's is (and canMapHostMemory says 0);
 * portable and write-combined only tune the real thing. */
EXPORT cudaError_t cudaHostAlloc(void **p, size_t size, unsigned flags)
{
    if (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined))
        return record(cudaErrorInvalidValue);
    if (flags & cudaHostAllocMapped)
        return unsupported("cudaHostAlloc", "mapped (zero-copy) host memory needs memory coherent with the GPU");
    return host_alloc(p, size, "cudaHostAlloc", flags);
}

EXPORT cudaError_t cudaFreeHost(void *p)
{
    if (p && !host_range_remove(p)) return record(cudaErrorInvalidValue);
    free(p);
    return cudaSuccess;
}

EXPORT cudaError_t cudaMallocManaged(void **p, size_t size, unsigned flags)
{
    (void)p, (void)size, (void)flags;
    return unsupported("cudaMallocManaged", "managed memory cannot be remoted");
}

EXPORT cudaError_t cudaMemPrefetchAsync(const void *p, size_t n, struct cudaMemLocation loc, unsigned flags,
                                        cudaStream_t s)
{
    (void)p, (void)n, (void)loc, (void)flags, (void)s;
    return unsupported("cudaMemPrefetchAsync", "managed memory cannot be remoted");
}

EXPORT cudaError_t cudaMemAdvise(const void *p, size_t n, enum cudaMemoryAdvise a, struct cudaMemLocation loc)
{
    (void)p, (void)n, (void)a, (void)loc;
    return unsupported("cudaMemAdvise", "managed memory cannot be remoted");
}

static cudaError_t memcpy_remote(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t stream,
                                 const char *api)
{
    char why[VCUDA_WHY_LEN];
    vcuda_msg m, r;
    uint64_t sh;
    cudaError_t e = ready();
    if (e) return record(e);
    if (capture_copy(stream, dst, src, n, kind, &e)) return e;
    if ((e = stream_handle(stream, &sh))) return record(e);
    if (kind == cudaMemcpyDefault)
        kind = is_device_pointer(dst) ? (is_device_pointer(src) ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                      : (is_device_pointer(src) ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
    if (n == 0) return cudaSuccess;
    if (!dst || !src) return record(cudaErrorInvalidValue);
    memset(&m, 0, sizeof m);
    switch (kind) {
    case cudaMemcpyHostToHost: memmove(dst, src, n); return cudaSuccess;
    case cudaMemcpyHostToDevice:
        m.hdr.opcode = VCUDA_OP_MEMCPY_H2D;
        m.hdr.flags = host_sync ? VCUDA_FLAG_SYNC : 0;
        m.v[0] = (uint64_t)(uintptr_t)dst, m.v[1] = sh, m.nv = 2;
        return result(vcuda_client_send_chunks(current_device, &m, 0, src, n, vcuda_client_chunk(), &r, why), &r, api, why);
    case cudaMemcpyDeviceToHost:
        m.hdr.opcode = VCUDA_OP_MEMCPY_D2H;
        m.v[0] = (uint64_t)(uintptr_t)src, m.v[1] = n, m.v[2] = sh, m.nv = 3;
        return result(vcuda_client_recv_chunks(current_device, &m, dst, n, &r, why), &r, api, why);
    case cudaMemcpyDeviceToDevice:
        m.hdr.opcode = VCUDA_OP_MEMCPY_D2D;
        m.v[0] = (uint64_t)(uintptr_t)dst, m.v[1] = (uint64_t)(uintptr_t)src, m.v[2] = n, m.v[3] = sh, m.nv = 4;
        return result(vcuda_client_call(current_device, &m, &r, 0, why), &r, api, why);
    default: return record(cudaErrorInvalidMemcpyDirection);
    }
}

EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    return SYNCHRONOUS("cudaMemcpy", memcpy_remote(dst, src, n, kind, NULL, "cudaMemcpy"));
}

/* Ordered in its stream: a copy to host memory is complete on return, one from host
 * memory returns once the server holds the bytes (they are then copied in stream order,
 * as the runtime stages pageable memory). */
EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s)
{
    return memcpy_remote(dst, src, n, kind, s, "cudaMemcpyAsync");
}

EXPORT cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t stream)
{
    vcuda_msg r;
    uint64_t sh;
    cudaError_t e = ready();
    if (e) return record(e);
    if (capture_set(stream, p, n, value, n, 1, &e)) return e;
    if ((e = stream_handle(stream, &sh))) return record(e);
    if (n == 0) return cudaSuccess;
    uint64_t v[] = {(uint64_t)(uintptr_t)p, (uint64_t)(int64_t)value, n, sh};
    return call(VCUDA_OP_MEMSET, v, 4, &r, "cudaMemset");
}

EXPORT cudaError_t cudaMemset(void *p, int value, size_t n)
{
    return SYNCHRONOUS("cudaMemset", cudaMemsetAsync(p, value, n, NULL));
}

/* ---- streams and events ------------------------------------------------------------ */

EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    return create_object(VCUDA_OP_STREAM_CREATE, flags, STREAM_MAGIC, (void **)s, "cudaStreamCreate");
}
EXPORT cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
static void forget_stream_attrs(cudaStream_t s);
EXPORT cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    /* the default streams are not the program's to destroy */
    if (!s || s == cudaStreamLegacy || s == cudaStreamPerThread) return record(cudaErrorInvalidResourceHandle);
    forget_stream_attrs(s); /* a later stream may get the same address */
    return destroy_object(VCUDA_OP_STREAM_DESTROY, s, STREAM_MAGIC, "cudaStreamDestroy");
}
EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    vcuda_msg r;
    uint64_t zero = 0;
    cudaError_t e;
    if (legacy_stream(s)) return call(VCUDA_OP_STREAM_SYNCHRONIZE, &zero, 1, &r, "cudaStreamSynchronize");
    if ((e = own_stream(&s))) return e;
    if (capturing(s)) return record(cudaErrorStreamCaptureUnsupported);
    return object_call(VCUDA_OP_STREAM_SYNCHRONIZE, s, STREAM_MAGIC, "cudaStreamSynchronize", NULL);
}

EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned flags)
{
    return create_object(VCUDA_OP_EVENT_CREATE, flags, EVENT_MAGIC, (void **)ev, "cudaEventCreate");
}
EXPORT cudaError_t cudaEventCreate(cudaEvent_t *ev) { return cudaEventCreateWithFlags(ev, cudaEventDefault); }
EXPORT cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
    return destroy_object(VCUDA_OP_EVENT_DESTROY, ev, EVENT_MAGIC, "cudaEventDestroy");
}
EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
    return object_call(VCUDA_OP_EVENT_SYNCHRONIZE, ev, EVENT_MAGIC, "cudaEventSynchronize", NULL);
}

EXPORT cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t stream)
{
    const remote_object *o = (const remote_object *)ev;
    vcuda_msg r;
    uint64_t sh;
    cudaError_t e;
    if (!o || o->magic != EVENT_MAGIC || o->device != current_device) return record(cudaErrorInvalidResourceHandle);
    /* recorded into a capture, the event only lets another stream join it */
    if ((((remote_object *)ev)->capture = capturing(stream))) return cudaSuccess;
    if ((e = stream_handle(stream, &sh))) return e;
    uint64_t v[] = {o->handle, sh};
    return call(VCUDA_OP_EVENT_RECORD, v, 2, &r, "cudaEventRecord");
}

EXPORT cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    const remote_object *a = (const remote_object *)start, *b = (const remote_object *)end;
    vcuda_msg r;
    if (!ms) return record(cudaErrorInvalidValue);
    if (!a || !b || a->magic != EVENT_MAGIC || b->magic != EVENT_MAGIC || a->device != b->device)
        return record(cudaErrorInvalidResourceHandle);
    int saved = current_device;
    current_device = a->device;
    uint64_t v[] = {a->handle, b->handle};
    cudaError_t e = call(VCUDA_OP_EVENT_ELAPSED, v, 2, &r, "cudaEventElapsedTime");
    current_device = saved;
    if (!e) {
        uint32_t bits = (uint32_t)r.v[0];
        memcpy(ms, &bits, sizeof *ms);
    }
    return e;
}

/* ---- device printf ------------------------------------------------------------------ */

/* The server's reply said output waits: fetched (in chunks) and written where the real
 * runtime's driver writes it: device printf to stdout, device assertion messages to
 * stderr (the reply says which). */
static void fetch_output(int device)
{
    char why[VCUDA_WHY_LEN];
    vcuda_msg m, r;
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_PRINTF_FETCH;
    for (int more = 1; more;) {
        vcuda_client_status st = vcuda_client_call(device, &m, &r, 0, why);
        if (st != VCUDA_CLIENT_OK) {
            if (st != VCUDA_CLIENT_UNAVAILABLE) fprintf(stderr, "vcuda: device printf output lost: %s\n", why);
            return;
        }
        if (r.blob_len) fwrite(r.blob, 1, r.blob_len, r.v[0] == 2 ? stderr : stdout);
        more = (r.hdr.flags & VCUDA_FLAG_OUTPUT) && r.blob_len;
    }
}

/* ---- more of events and streams ------------------------------------------------------ */

/* A query's "not ready" is an answer, not an error: it does not become the last error. */
static cudaError_t query(cudaError_t e, cudaError_t before)
{
    if (e == cudaErrorNotReady) last_error = before;
    return e;
}

EXPORT cudaError_t cudaEventQuery(cudaEvent_t ev)
{
    cudaError_t before = last_error;
    return query(object_call(VCUDA_OP_EVENT_QUERY, ev, EVENT_MAGIC, "cudaEventQuery", NULL), before);
}

EXPORT cudaError_t cudaStreamQuery(cudaStream_t s)
{
    cudaError_t before = last_error, e;
    vcuda_msg r;
    uint64_t zero = 0;
    if (legacy_stream(s)) return query(call(VCUDA_OP_STREAM_QUERY, &zero, 1, &r, "cudaStreamQuery"), before);
    if ((e = own_stream(&s))) return e;
    return query(object_call(VCUDA_OP_STREAM_QUERY, s, STREAM_MAGIC, "cudaStreamQuery", NULL), before);
}

EXPORT cudaError_t cudaEventRecordWithFlags(cudaEvent_t ev, cudaStream_t stream, unsigned flags)
{
    /* cudaEventRecordExternal makes an event-record node in a capture; here a recorded
     * event only lets another stream join the capture (see cudaEventRecord) */
    if (flags & ~(unsigned)cudaEventRecordExternal) return record(cudaErrorInvalidValue);
    return cudaEventRecord(ev, stream);
}

/* The device a stream belongs to (the default streams: the current device). */
static int stream_device(cudaStream_t s)
{
    const remote_object *o = (const remote_object *)existing_stream(s);
    return !o || o->magic != STREAM_MAGIC ? current_device : o->device;
}

EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t ev, unsigned flags)
{
    const remote_object *o = (const remote_object *)ev;
    vcuda_msg r;
    uint64_t sh;
    cudaError_t e;
    if (!o || o->magic != EVENT_MAGIC) return record(cudaErrorInvalidResourceHandle);
    if (o->capture) { /* the stream joins the capture (its nodes are replayed in order) */
        if (legacy_stream(s)) return record(cudaErrorStreamCaptureImplicit);
        if ((e = own_stream(&s))) return e;
        remote_object *so = (remote_object *)s;
        if (so->magic != STREAM_MAGIC) return record(cudaErrorInvalidResourceHandle);
        return so->capture == o->capture ? cudaSuccess : join_capture(o->capture, so);
    }
    int dev = stream_device(s), saved = current_device;
    /* an event of another server: waited for here, so the stream's later work follows it */
    if (o->device != dev) return cudaEventSynchronize(ev);
    current_device = dev;
    if (!(e = stream_handle(s, &sh))) {
        uint64_t v[] = {sh, o->handle, flags};
        e = call(VCUDA_OP_STREAM_WAIT_EVENT, v, 3, &r, "cudaStreamWaitEvent");
    }
    current_device = saved;
    return e;
}

EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned flags, int priority)
{
    vcuda_msg r;
    if (!s) return record(cudaErrorInvalidValue);
    uint64_t v[] = {flags, (uint64_t)(int64_t)priority};
    cudaError_t e = call(VCUDA_OP_STREAM_CREATE_PRIORITY, v, 2, &r, "cudaStreamCreateWithPriority");
    if (e) return e;
    remote_object *o = malloc(sizeof *o);
    if (!o) return record(cudaErrorMemoryAllocation);
    int least = 0, greatest = 0;
    cudaDeviceGetStreamPriorityRange(&least, &greatest);
    /* the driver clamps to the range; so does what cudaStreamGetPriority reports */
    priority = priority > least ? least : priority < greatest ? greatest : priority;
    *o = (remote_object){STREAM_MAGIC, current_device, r.v[0], flags, priority, NULL, atomic_fetch_add(&stream_ids, 1) + 1};
    *s = (cudaStream_t)o;
    return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest)
{
    static struct { int known, least, greatest; } range[VCUDA_MAX_DEVICES];
    vcuda_msg r;
    cudaError_t e = ready();
    if (e) return record(e);
    if (!range[current_device].known) {
        if ((e = call(VCUDA_OP_STREAM_PRIORITY_RANGE, NULL, 0, &r, "cudaDeviceGetStreamPriorityRange"))) return e;
        range[current_device].least = (int)(int64_t)r.v[0], range[current_device].greatest = (int)(int64_t)r.v[1];
        range[current_device].known = 1;
    }
    if (least) *least = range[current_device].least;
    if (greatest) *greatest = range[current_device].greatest;
    return cudaSuccess;
}

static const remote_object *stream_object(cudaStream_t s)
{
    const remote_object *o = (const remote_object *)existing_stream(s);
    return o && o->magic == STREAM_MAGIC ? o : NULL;
}

EXPORT cudaError_t cudaStreamGetPriority(cudaStream_t s, int *priority)
{
    const remote_object *o = stream_object(s);
    if (!priority) return record(cudaErrorInvalidValue);
    *priority = o ? o->priority : 0;
    return cudaSuccess;
}

EXPORT cudaError_t cudaStreamGetFlags(cudaStream_t s, unsigned *flags)
{
    const remote_object *o = stream_object(s);
    if (!flags) return record(cudaErrorInvalidValue);
    *flags = o ? o->flags : cudaStreamDefault;
    return cudaSuccess;
}

EXPORT cudaError_t cudaStreamGetDevice(cudaStream_t s, int *device)
{
    if (!device) return record(cudaErrorInvalidValue);
    *device = stream_device(s);
    return cudaSuccess;
}

EXPORT cudaError_t cudaStreamGetId(cudaStream_t s, unsigned long long *id)
{
    cudaError_t e;
    if (!id) return record(cudaErrorInvalidValue);
    if (legacy_stream(s)) return *id = (unsigned long long)current_device + 1, cudaSuccess;
    if ((e = own_stream(&s))) return e;
    const remote_object *o = stream_object(s);
    if (!o) return record(cudaErrorInvalidResourceHandle);
    *id = o->id;
    return cudaSuccess;
}

/* Active while the stream records into a graph (see "graphs" below). */
EXPORT cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *status)
{
    if (!status) return record(cudaErrorInvalidValue);
    *status = capturing(s) ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}

/* ---- host functions in stream order ----------------------------------------------- */

/* Run here, on the calling thread, once the server says the stream reached them: the
 * stream's earlier work is complete, and its later work is queued after they return. */
EXPORT cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *data)
{
    cudaError_t e;
    if (!fn) return record(cudaErrorInvalidValue);
    if (capture_host(s, fn, data, &e)) return e;
    e = cudaStreamSynchronize(s);
    if (e) return e;
    int per_thread = vcuda_per_thread_call; /* (the program's code, not this call's) */
    vcuda_per_thread_call = 0;
    fn(data);
    vcuda_per_thread_call = per_thread;
    return cudaSuccess;
}

EXPORT cudaError_t cudaStreamAddCallback(cudaStream_t s, cudaStreamCallback_t cb, void *data, unsigned flags)
{
    if (!cb || flags) return record(cudaErrorInvalidValue);
    cudaError_t e = cudaStreamSynchronize(s);
    if (e == cudaErrorDevicesUnavailable) return e;
    int per_thread = vcuda_per_thread_call; /* (the program's code, not this call's) */
    vcuda_per_thread_call = 0;
    cb(s, e, data); /* as the runtime does: the callback is told the stream's error */
    vcuda_per_thread_call = per_thread;
    return cudaSuccess;
}

/* ---- device management -------------------------------------------------------------- */

static struct {
    unsigned flags;
    enum cudaFuncCache cache;
    enum cudaSharedMemConfig smem;
} device_config[VCUDA_MAX_DEVICES];

/* Scheduling flags decide how the host thread waits: here it waits on a socket, so they
 * are kept (and reported back) but change nothing. */
EXPORT cudaError_t cudaSetDeviceFlags(unsigned flags)
{
    cudaError_t e = ready();
    if (e) return record(e);
    if (flags & ~(unsigned)cudaDeviceMask) return record(cudaErrorInvalidValue);
    device_config[current_device].flags = flags;
    return cudaSuccess;
}

EXPORT cudaError_t cudaGetDeviceFlags(unsigned *flags)
{
    if (!flags) return record(cudaErrorInvalidValue);
    *flags = device_config[current_device].flags;
    return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceSetLimit(enum cudaLimit limit, size_t value)
{
    vcuda_msg r;
    uint64_t v[] = {(uint64_t)limit, value};
    return call(VCUDA_OP_LIMIT_SET, v, 2, &r, "cudaDeviceSetLimit");
}

EXPORT cudaError_t cudaDeviceGetLimit(size_t *value, enum cudaLimit limit)
{
    vcuda_msg r;
    uint64_t v = (uint64_t)limit;
    if (!value) return record(cudaErrorInvalidValue);
    cudaError_t e = call(VCUDA_OP_LIMIT_GET, &v, 1, &r, "cudaDeviceGetLimit");
    if (!e) *value = r.v[0];
    return e;
}

/* Cache and shared-memory preferences are hints the driver may ignore (Hopper does for
 * the bank size): kept and reported, not forwarded. */
#define DEVICE_SETTING(set, get, type, field)                                                    \
    EXPORT cudaError_t set(type c)                                                             \
    {                                                                                          \
        device_config[current_device].field = c;                                               \
        return cudaSuccess;                                                                    \
    }                                                                                          \
    EXPORT cudaError_t get(type *c)                                                            \
    {                                                                                          \
        if (!c) return record(cudaErrorInvalidValue);                                          \
        *c = device_config[current_device].field;                                              \
        return cudaSuccess;                                                                    \
    }
DEVICE_SETTING(cudaDeviceSetCacheConfig, cudaDeviceGetCacheConfig, enum cudaFuncCache, cache)
DEVICE_SETTING(cudaDeviceSetSharedMemConfig, cudaDeviceGetSharedMemConfig, enum cudaSharedMemConfig, smem)
#undef DEVICE_SETTING

/* Per kernel the same hints: accepted for a kernel this program registered. */
#define FUNC_HINT(name, type)                                                                  \
    EXPORT cudaError_t name(const void *func, type c)                                          \
    {                                                                                          \
        (void)c;                                                                               \
        return find_kernel(func) ? cudaSuccess : record(cudaErrorInvalidDeviceFunction);       \
    }
FUNC_HINT(cudaFuncSetCacheConfig, enum cudaFuncCache)
FUNC_HINT(cudaFuncSetSharedMemConfig, enum cudaSharedMemConfig)
#undef FUNC_HINT

static cudaError_t valid_device(int d)
{
    cudaError_t e = ready();
    if (e) return record(e);
    return d < 0 || d >= vcuda_client_device_count() ? record(cudaErrorInvalidDevice) : cudaSuccess;
}

/* Each server exports one GPU, so no two vcuda devices share a server: no peer access. */
EXPORT cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer)
{
    cudaError_t e;
    if (!can) return record(cudaErrorInvalidValue);
    if ((e = valid_device(device)) || (e = valid_device(peer))) return e;
    *can = 0;
    return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags)
{
    cudaError_t e = valid_device(peer);
    if (e) return e;
    return flags ? record(cudaErrorInvalidValue) : record(cudaErrorPeerAccessUnsupported);
}

EXPORT cudaError_t cudaDeviceDisablePeerAccess(int peer)
{
    cudaError_t e = valid_device(peer);
    return e ? e : record(cudaErrorPeerAccessNotEnabled);
}

EXPORT cudaError_t cudaDeviceGetP2PAttribute(int *value, enum cudaDeviceP2PAttr attr, int src, int dst)
{
    cudaError_t e;
    (void)attr;
    if (!value) return record(cudaErrorInvalidValue);
    if ((e = valid_device(src)) || (e = valid_device(dst))) return e;
    *value = 0;
    return cudaSuccess;
}

EXPORT cudaError_t cudaInitDevice(int device, unsigned device_flags, unsigned flags)
{
    (void)device_flags, (void)flags;
    return valid_device(device);
}

EXPORT cudaError_t cudaSetValidDevices(int *devices, int n)
{
    cudaError_t e;
    if (n < 0 || (n && !devices)) return record(cudaErrorInvalidValue);
    for (int i = 0; i < n; ++i)
        if ((e = valid_device(devices[i]))) return e;
    return n ? cudaSetDevice(devices[0]) : cudaSuccess;
}

/* The device whose major.minor is closest to what is asked (the runtime's criterion). */
EXPORT cudaError_t cudaChooseDevice(int *device, const struct cudaDeviceProp *want)
{
    cudaError_t e = ready();
    if (!device || !want) return record(cudaErrorInvalidValue);
    if (e) return record(e);
    int best = 0, best_d = INT32_MAX;
    for (int d = 0; d < vcuda_client_device_count(); ++d) {
        int major = 0, minor = 0;
        if ((e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d)) ||
            (e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d)))
            return e;
        int dist = abs((major * 10 + minor) - (want->major * 10 + want->minor));
        if (dist < best_d) best_d = dist, best = d;
    }
    *device = best;
    return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceGetByPCIBusId(int *device, const char *bus_id)
{
    char id[32];
    cudaError_t e = ready();
    if (!device || !bus_id) return record(cudaErrorInvalidValue);
    if (e) return record(e);
    for (int d = 0; d < vcuda_client_device_count(); ++d) {
        if ((e = cudaDeviceGetPCIBusId(id, sizeof id, d))) return e;
        if (!strcasecmp(id, bus_id) || !strcasecmp(id + 4, bus_id)) return *device = d, cudaSuccess;
    }
    return record(cudaErrorInvalidDevice);
}

EXPORT cudaError_t cudaDeviceFlushGPUDirectRDMAWrites(enum cudaFlushGPUDirectRDMAWritesTarget t,
                                                      enum cudaFlushGPUDirectRDMAWritesScope scope)
{
    (void)t, (void)scope;
    return cudaSuccess; /* no third-party device writes into a vcuda client's GPU memory */
}

/* Persisting L2 lines are a cache hint (see cudaStreamSetAttribute): nothing to reset. */
EXPORT cudaError_t cudaCtxResetPersistingL2Cache(void) { return cudaSuccess; }

EXPORT cudaError_t cudaProfilerStart(void) { return cudaSuccess; }
EXPORT cudaError_t cudaProfilerStop(void) { return cudaSuccess; }

/* ---- kernels: attributes, occupancy (computed on the server), launches ------------ */

static cudaError_t kernel_call(const void *func, unsigned op, uint64_t *v, unsigned nv, vcuda_msg *r, const char *api)
{
    kernel *k = find_kernel(func);
    cudaError_t e;
    if (!k) return record(cudaErrorInvalidDeviceFunction);
    if ((e = resolve(k, &v[0]))) return e;
    return call(op, v, nv, r, api);
}

EXPORT cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *a, const void *func)
{
    vcuda_msg r;
    uint64_t v[1];
    if (!a) return record(cudaErrorInvalidValue);
    cudaError_t e = kernel_call(func, VCUDA_OP_FUNC_ATTRIBUTES, v, 1, &r, "cudaFuncGetAttributes");
    if (e) return e;
    memset(a, 0, sizeof *a);
    int x[16];
    for (int i = 0; i < 16; ++i) x[i] = (int)(int64_t)r.v[i];
    a->maxThreadsPerBlock = x[0], a->sharedSizeBytes = (size_t)x[1], a->constSizeBytes = (size_t)x[2];
    a->localSizeBytes = (size_t)x[3], a->numRegs = x[4], a->ptxVersion = x[5], a->binaryVersion = x[6];
    a->cacheModeCA = x[7], a->maxDynamicSharedSizeBytes = x[8], a->preferredShmemCarveout = x[9];
    a->clusterDimMustBeSet = x[10], a->requiredClusterWidth = x[11], a->requiredClusterHeight = x[12];
    a->requiredClusterDepth = x[13], a->nonPortableClusterSizeAllowed = x[14];
    a->clusterSchedulingPolicyPreference = x[15];
    return cudaSuccess;
}

EXPORT cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
    vcuda_msg r;
    uint64_t v[] = {0, (uint64_t)(int64_t)(int)attr, (uint64_t)(int64_t)value};
    return kernel_call(func, VCUDA_OP_FUNC_SET_ATTRIBUTE, v, 3, &r, "cudaFuncSetAttribute");
}

EXPORT cudaError_t cudaFuncGetName(const char **name, const void *func)
{
    kernel *k = find_kernel(func);
    if (!name) return record(cudaErrorInvalidValue);
    if (!k) return record(cudaErrorInvalidDeviceFunction);
    *name = k->name;
    return cudaSuccess;
}

EXPORT cudaError_t cudaGetKernel(cudaKernel_t *out, const void *func) { return __cudaGetKernel(out, func); }

EXPORT cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, const void *func, int block,
                                                                          size_t smem, unsigned flags)
{
    vcuda_msg r;
    if (!n || block <= 0) return record(cudaErrorInvalidValue);
    uint64_t v[] = {0, (uint64_t)block, smem, flags};
    cudaError_t e = kernel_call(func, VCUDA_OP_OCCUPANCY_BLOCKS, v, 4, &r, "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    if (!e) *n = (int)(int64_t)r.v[0];
    return e;
}

EXPORT cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, const void *func, int block, size_t smem)
{
    return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(n, func, block, smem, cudaOccupancyDefault);
}

EXPORT cudaError_t cudaOccupancyAvailableDynamicSMemPerBlock(size_t *bytes, const void *func, int blocks, int block)
{
    vcuda_msg r;
    if (!bytes || blocks <= 0 || block <= 0) return record(cudaErrorInvalidValue);
    uint64_t v[] = {0, (uint64_t)blocks, (uint64_t)block};
    cudaError_t e = kernel_call(func, VCUDA_OP_OCCUPANCY_DYNAMIC_SMEM, v, 3, &r, "cudaOccupancyAvailableDynamicSMemPerBlock");
    if (!e) *bytes = r.v[0];
    return e;
}

/* Cooperative launches are answered at once: a grid too large to be co-resident fails
 * the launch itself (cudaErrorCooperativeLaunchTooLarge), as with the real runtime. */
static cudaError_t launch_cooperative(kernel *k, dim3 grid, dim3 block, void **args, size_t shmem, cudaStream_t stream,
                                     const char *api)
{
    if (!k) return record(cudaErrorInvalidDeviceFunction);
    return launch_op(k, grid, block, args, shmem, stream, VCUDA_OP_LAUNCH_COOPERATIVE, api, NULL);
}

EXPORT cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
                                               cudaStream_t stream)
{
    return launch_cooperative(find_kernel(func), grid, block, args, shmem, stream, "cudaLaunchCooperativeKernel");
}

/* cudaLaunchKernelEx (a template in cuda_runtime.h) lands here.  The attributes that
 * change how the kernel runs go to the server with it (LAUNCH_EX), where the driver
 * checks them as it would here: cooperative, programmatic stream serialization (PDL,
 * as CUB/Thrust use on sm_90), cluster dimensions, priority, memory sync domain.  Of
 * the rest, those that only tune placement -- access-policy window, shared-memory
 * carveout, scheduling preferences, a preferred cluster shape (the kernel must also run
 * with the required one), the sync-domain map -- are left out, with the same results;
 * the programmatic and launch-completion events are recorded on the stream right after
 * the launch: they fire once the kernel is done, no earlier than the real trigger, so
 * whatever waits on them still sees the kernel's work.  Device-updatable graph nodes
 * and attributes unknown here are refused by name. */
EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args)
{
    uint64_t ex[6] = {0, 1, 1, 1, 0, 0}; /* attributes, cluster x y z, priority, sync domain */
    cudaEvent_t after[2];
    int after_flags[2], nafter = 0;
    if (!config || (config->numAttrs && !config->attrs)) return record(cudaErrorInvalidValue);
    for (unsigned i = 0; i < config->numAttrs; ++i) {
        const cudaLaunchAttribute *a = &config->attrs[i];
        switch (a->id) {
        case cudaLaunchAttributeIgnore: case cudaLaunchAttributeAccessPolicyWindow:
        case cudaLaunchAttributeMemSyncDomainMap: case cudaLaunchAttributePreferredSharedMemoryCarveout:
        case cudaLaunchAttributeClusterSchedulingPolicyPreference: case cudaLaunchAttributeNvlinkUtilCentricScheduling:
        case cudaLaunchAttributePreferredClusterDimension:
            break;
        case cudaLaunchAttributeCooperative:
            ex[0] = a->val.cooperative ? ex[0] | VCUDA_LAUNCH_COOPERATIVE : ex[0] & ~(uint64_t)VCUDA_LAUNCH_COOPERATIVE;
            break;
        case cudaLaunchAttributeProgrammaticStreamSerialization:
            ex[0] = a->val.programmaticStreamSerializationAllowed ? ex[0] | VCUDA_LAUNCH_PROGRAMMATIC
                                                                  : ex[0] & ~(uint64_t)VCUDA_LAUNCH_PROGRAMMATIC;
            break;
        case cudaLaunchAttributeClusterDimension:
            if (!a->val.clusterDim.x || !a->val.clusterDim.y || !a->val.clusterDim.z) return record(cudaErrorInvalidValue);
            ex[0] |= VCUDA_LAUNCH_CLUSTER;
            ex[1] = a->val.clusterDim.x, ex[2] = a->val.clusterDim.y, ex[3] = a->val.clusterDim.z;
            break;
        case cudaLaunchAttributePriority: ex[0] |= VCUDA_LAUNCH_PRIORITY, ex[4] = (uint64_t)(int64_t)a->val.priority; break;
        case cudaLaunchAttributeMemSyncDomain:
            if ((unsigned)a->val.memSyncDomain > 1) return record(cudaErrorInvalidValue);
            ex[0] |= VCUDA_LAUNCH_SYNC_DOMAIN, ex[5] = (uint64_t)a->val.memSyncDomain;
            break;
        case cudaLaunchAttributeProgrammaticEvent:
        case cudaLaunchAttributeLaunchCompletionEvent: {
            int programmatic = a->id == cudaLaunchAttributeProgrammaticEvent;
            cudaEvent_t ev = programmatic ? a->val.programmaticEvent.event : a->val.launchCompletionEvent.event;
            int fl = programmatic ? a->val.programmaticEvent.flags : a->val.launchCompletionEvent.flags;
            if (!ev || (fl & ~(int)cudaEventRecordDefault) || nafter == 2) return record(cudaErrorInvalidValue);
            after[nafter] = ev, after_flags[nafter++] = fl;
            break;
        }
        default: return unsupported("cudaLaunchKernelEx", "a launch attribute that vcuda cannot carry (device-updatable "
                                    "graph nodes, or one newer than vcuda)");
        }
    }
    kernel *k = find_kernel(func);
    cudaError_t e = launch_op(k, config->gridDim, config->blockDim, args, config->dynamicSmemBytes, config->stream,
                              ex[0] ? VCUDA_OP_LAUNCH_EX : VCUDA_OP_LAUNCH, "cudaLaunchKernelEx", ex);
    for (int i = 0; i < nafter && !e; ++i) e = cudaEventRecordWithFlags(after[i], config->stream, (unsigned)after_flags[i]);
    return e;
}

/* ---- symbols ------------------------------------------------------------------------ */

/* The device address and size of a __device__/__constant__ variable on the current
 * device, from its module on the server. */
static cudaError_t symbol(const void *host_var, uint64_t *dptr, uint64_t *size)
{
    device_var *v = NULL;
    cudaError_t e = ready();
    int d = current_device;
    if (e) return record(e);
    pthread_mutex_lock(&reg_mu);
    for (size_t i = 0; i < nvars && !v; ++i)
        if (vars[i]->host_var == host_var) v = vars[i];
    if (!v) {
        pthread_mutex_unlock(&reg_mu);
        return record(cudaErrorInvalidSymbol);
    }
    if (!v->dptr[d]) {
        vcuda_msg r;
        if (!(e = module_lookup(v->fb, d, VCUDA_OP_MODULE_GLOBAL, v->name, &r))) v->dptr[d] = r.v[0], v->size[d] = r.v[1];
    }
    *dptr = v->dptr[d], *size = v->size[d];
    pthread_mutex_unlock(&reg_mu);
    return e;
}

EXPORT cudaError_t cudaGetSymbolAddress(void **p, const void *sym)
{
    uint64_t a, n;
    if (!p) return record(cudaErrorInvalidValue);
    cudaError_t e = symbol(sym, &a, &n);
    if (!e) *p = (void *)(uintptr_t)a;
    return e;
}

EXPORT cudaError_t cudaGetSymbolSize(size_t *size, const void *sym)
{
    uint64_t a, n;
    if (!size) return record(cudaErrorInvalidValue);
    cudaError_t e = symbol(sym, &a, &n);
    if (!e) *size = n;
    return e;
}

static cudaError_t symbol_copy(const void *sym, size_t count, size_t offset, enum cudaMemcpyKind kind, int to,
                               void *host, cudaStream_t stream, const char *api)
{
    uint64_t a, n;
    cudaError_t e = symbol(sym, &a, &n);
    if (e) return e;
    if (offset > n || count > n - offset) return record(cudaErrorInvalidValue);
    void *dev = (void *)(uintptr_t)(a + offset);
    if (kind == cudaMemcpyDefault) kind = is_device_pointer(host) ? cudaMemcpyDeviceToDevice
                                                                  : to ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    if (to && kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice) return record(cudaErrorInvalidMemcpyDirection);
    if (!to && kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice) return record(cudaErrorInvalidMemcpyDirection);
    return to ? memcpy_remote(dev, host, count, kind, stream, api) : memcpy_remote(host, dev, count, kind, stream, api);
}

EXPORT cudaError_t cudaMemcpyToSymbol(const void *sym, const void *src, size_t count, size_t offset, enum cudaMemcpyKind kind)
{
    return SYNCHRONOUS("cudaMemcpyToSymbol", symbol_copy(sym, count, offset, kind, 1, (void *)src, NULL, "cudaMemcpyToSymbol"));
}
EXPORT cudaError_t cudaMemcpyFromSymbol(void *dst, const void *sym, size_t count, size_t offset, enum cudaMemcpyKind kind)
{
    return SYNCHRONOUS("cudaMemcpyFromSymbol", symbol_copy(sym, count, offset, kind, 0, dst, NULL, "cudaMemcpyFromSymbol"));
}
EXPORT cudaError_t cudaMemcpyToSymbolAsync(const void *sym, const void *src, size_t count, size_t offset,
                                           enum cudaMemcpyKind kind, cudaStream_t s)
{
    return symbol_copy(sym, count, offset, kind, 1, (void *)src, s, "cudaMemcpyToSymbolAsync");
}
EXPORT cudaError_t cudaMemcpyFromSymbolAsync(void *dst, const void *sym, size_t count, size_t offset,
                                             enum cudaMemcpyKind kind, cudaStream_t s)
{
    return symbol_copy(sym, count, offset, kind, 0, dst, s, "cudaMemcpyFromSymbolAsync");
}

/* ---- pitched, 2-D and 3-D memory ---------------------------------------------------- */

/* The pitch is the driver's own (cuMemAllocPitch on the server). */
EXPORT cudaError_t cudaMallocPitch(void **p, size_t *pitch, size_t width, size_t height)
{
    vcuda_msg r;
    if (!p || !pitch) return record(cudaErrorInvalidValue);
    if (!width || !height) return *p = NULL, *pitch = 0, cudaSuccess;
    uint64_t v[] = {width, height};
    cudaError_t e = call(VCUDA_OP_MALLOC_PITCH, v, 2, &r, "cudaMallocPitch");
    if (e || (e = remember(r.v[0], r.v[1] * height))) return e;
    *p = (void *)(uintptr_t)r.v[0], *pitch = r.v[1];
    return cudaSuccess;
}

EXPORT cudaError_t cudaMalloc3D(struct cudaPitchedPtr *pp, struct cudaExtent ext)
{
    void *p = NULL;
    size_t pitch = 0;
    if (!pp) return record(cudaErrorInvalidValue);
    if (ext.height && ext.depth > SIZE_MAX / ext.height) return record(cudaErrorInvalidValue);
    cudaError_t e = cudaMallocPitch(&p, &pitch, ext.width, ext.height * ext.depth);
    if (!e) *pp = (struct cudaPitchedPtr){p, pitch, ext.width, ext.height};
    return e;
}

static cudaError_t strided_copy(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                                enum cudaMemcpyKind kind, cudaStream_t s, const char *api);
/* One copy where both sides are contiguous, or the source is on the device (one copy of
 * the whole span, then the rows taken out here), or the destination is (strided_copy);
 * rows one by one otherwise. */
static cudaError_t copy_2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                           enum cudaMemcpyKind kind, cudaStream_t stream, const char *api)
{
    cudaError_t e = cudaSuccess;
    if (!width || !height) return cudaSuccess;
    if (width > dpitch || width > spitch) return record(cudaErrorInvalidPitchValue);
    if (kind == cudaMemcpyDefault)
        kind = is_device_pointer(dst) ? (is_device_pointer(src) ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                      : (is_device_pointer(src) ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
    if (dpitch == width && spitch == width) return memcpy_remote(dst, src, width * height, kind, stream, api);
    /* strided rows into device memory: one copy on the server (host rows through the
     * staging buffer: about four calls, so for more rows than that), not one call per
     * row; a capturing stream records the rows instead */
    if ((kind == cudaMemcpyDeviceToDevice ? height > 1 : kind == cudaMemcpyHostToDevice && height > 4) && !capturing(stream))
        return strided_copy(dst, dpitch, src, spitch, width, height, kind, stream, api);
    if (kind == cudaMemcpyDeviceToHost) {
        size_t span = (height - 1) * spitch + width;
        uint8_t *tmp = malloc(span);
        if (!tmp) return record(cudaErrorMemoryAllocation);
        if (!(e = memcpy_remote(tmp, src, span, kind, stream, api)))
            for (size_t y = 0; y < height; ++y) memcpy((uint8_t *)dst + y * dpitch, tmp + y * spitch, width);
        free(tmp);
        return e;
    }
    for (size_t y = 0; y < height && !e; ++y)
        e = memcpy_remote((uint8_t *)dst + y * dpitch, (const uint8_t *)src + y * spitch, width, kind, stream, api);
    return e;
}

EXPORT cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                                enum cudaMemcpyKind kind)
{
    return SYNCHRONOUS("cudaMemcpy2D", copy_2d(dst, dpitch, src, spitch, width, height, kind, NULL, "cudaMemcpy2D"));
}

EXPORT cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                     size_t height, enum cudaMemcpyKind kind, cudaStream_t s)
{
    return copy_2d(dst, dpitch, src, spitch, width, height, kind, s, "cudaMemcpy2DAsync");
}

static cudaError_t set_2d(void *p, size_t pitch, int value, size_t width, size_t height, cudaStream_t stream)
{
    vcuda_msg r;
    uint64_t sh;
    cudaError_t e = ready();
    if (e) return record(e);
    if (capture_set(stream, p, pitch, value, width, height, &e)) return e;
    if ((e = stream_handle(stream, &sh))) return record(e);
    if (!width || !height) return cudaSuccess;
    if (width > pitch) return record(cudaErrorInvalidPitchValue);
    uint64_t v[] = {(uint64_t)(uintptr_t)p, pitch, (uint64_t)(int64_t)value, width, height, sh};
    return call(VCUDA_OP_MEMSET_2D, v, 6, &r, "cudaMemset2D");
}

EXPORT cudaError_t cudaMemset2D(void *p, size_t pitch, int value, size_t width, size_t height)
{
    return SYNCHRONOUS("cudaMemset2D", set_2d(p, pitch, value, width, height, NULL));
}
EXPORT cudaError_t cudaMemset2DAsync(void *p, size_t pitch, int value, size_t width, size_t height, cudaStream_t s)
{
    return set_2d(p, pitch, value, width, height, s);
}

/* A 3-D set is one 2-D set where the slices are contiguous, else one per slice. */
static cudaError_t set_3d(struct cudaPitchedPtr pp, int value, struct cudaExtent ext, cudaStream_t s)
{
    cudaError_t e = cudaSuccess;
    if (!ext.depth) return cudaSuccess;
    if (ext.height == pp.ysize || ext.depth == 1)
        return set_2d(pp.ptr, pp.pitch, value, ext.width, ext.height + (ext.depth - 1) * pp.ysize, s) ;
    for (size_t z = 0; z < ext.depth && !e; ++z)
        e = set_2d((uint8_t *)pp.ptr + z * pp.pitch * pp.ysize, pp.pitch, value, ext.width, ext.height, s);
    return e;
}
EXPORT cudaError_t cudaMemset3D(struct cudaPitchedPtr pp, int value, struct cudaExtent ext)
{
    return SYNCHRONOUS("cudaMemset3D", set_3d(pp, value, ext, NULL));
}
EXPORT cudaError_t cudaMemset3DAsync(struct cudaPitchedPtr pp, int value, struct cudaExtent ext, cudaStream_t s)
{
    return set_3d(pp, value, ext, s);
}

static cudaError_t copy_3d_array(const struct cudaMemcpy3DParms *p, cudaStream_t s, const char *api);
/* Linear memory: one 2-D copy per slice (with an array on a side: copy_3d_array). */
static cudaError_t copy_3d(const struct cudaMemcpy3DParms *p, cudaStream_t s, const char *api)
{
    cudaError_t e = cudaSuccess;
    if (!p) return record(cudaErrorInvalidValue);
    if (p->srcArray || p->dstArray) return copy_3d_array(p, s, api);
    const struct cudaPitchedPtr *sp = &p->srcPtr, *dp = &p->dstPtr;
    for (size_t z = 0; z < p->extent.depth && !e; ++z) {
        const uint8_t *src = (const uint8_t *)sp->ptr + ((p->srcPos.z + z) * sp->ysize + p->srcPos.y) * sp->pitch + p->srcPos.x;
        uint8_t *dst = (uint8_t *)dp->ptr + ((p->dstPos.z + z) * dp->ysize + p->dstPos.y) * dp->pitch + p->dstPos.x;
        e = copy_2d(dst, dp->pitch, src, sp->pitch, p->extent.width, p->extent.height, p->kind, s, api);
    }
    return e;
}
EXPORT cudaError_t cudaMemcpy3D(const struct cudaMemcpy3DParms *p)
{
    return SYNCHRONOUS("cudaMemcpy3D", copy_3d(p, NULL, "cudaMemcpy3D"));
}
EXPORT cudaError_t cudaMemcpy3DAsync(const struct cudaMemcpy3DParms *p, cudaStream_t s) { return copy_3d(p, s, "cudaMemcpy3DAsync"); }

/* Between two servers through this host, in chunks. */
static cudaError_t copy_peer(void *dst, int dst_dev, const void *src, int src_dev, size_t n, cudaStream_t s)
{
    cudaError_t e;
    if ((e = valid_device(dst_dev)) || (e = valid_device(src_dev))) return e;
    if (!n) return cudaSuccess;
    size_t chunk = n < ((size_t)64 << 20) ? n : ((size_t)64 << 20);
    uint8_t *tmp = malloc(chunk);
    if (!tmp) return record(cudaErrorMemoryAllocation);
    int saved = current_device;
    for (size_t off = 0; off < n && !e; off += chunk) {
        size_t k = n - off < chunk ? n - off : chunk;
        current_device = src_dev;
        e = memcpy_remote(tmp, (const uint8_t *)src + off, k, cudaMemcpyDeviceToHost, src_dev == saved ? s : NULL, "cudaMemcpyPeer");
        current_device = dst_dev;
        if (!e) e = memcpy_remote((uint8_t *)dst + off, tmp, k, cudaMemcpyHostToDevice, dst_dev == saved ? s : NULL, "cudaMemcpyPeer");
    }
    current_device = saved;
    free(tmp);
    return e;
}
/* Serialized with all work, earlier and later, of the current, source and destination
 * devices (the runtime's words): each is synchronized first, and the copy is complete
 * on return. */
EXPORT cudaError_t cudaMemcpyPeer(void *dst, int dd, const void *src, int sd, size_t n)
{
    int saved = current_device, devs[] = {saved, sd, dd};
    cudaError_t e = cudaSuccess;
    if ((e = valid_device(dd)) || (e = valid_device(sd))) return e;
    for (int i = 0; i < 3 && !e; ++i)
        if (i == 0 || (devs[i] != saved && (i == 1 || devs[i] != sd))) {
            current_device = devs[i];
            e = cudaDeviceSynchronize();
        }
    current_device = saved;
    return e ? e : SYNCHRONOUS("cudaMemcpyPeer", copy_peer(dst, dd, src, sd, n, NULL));
}
EXPORT cudaError_t cudaMemcpyPeerAsync(void *dst, int dd, const void *src, int sd, size_t n, cudaStream_t s)
{
    return copy_peer(dst, dd, src, sd, n, s);
}

/* ---- stream-ordered allocation ------------------------------------------------------ */

/* Allocated at once (earlier than the stream would, which no program can tell) and freed
 * once the stream has reached the free.  Pools are kept here: their attributes are the
 * program's settings and this process's usage. */
typedef struct {
    uint32_t magic;
    int device;
    int reuse[3];
    uint64_t release_threshold, used, used_high;
} mem_pool;
#define POOL_MAGIC 0x504f4f4cu
static mem_pool default_pools[VCUDA_MAX_DEVICES];
static mem_pool *current_pools[VCUDA_MAX_DEVICES];
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;

static mem_pool *default_pool(int d)
{
    pthread_mutex_lock(&pool_mu);
    if (!default_pools[d].magic) default_pools[d] = (mem_pool){POOL_MAGIC, d, {1, 1, 1}, 0, 0, 0};
    if (!current_pools[d]) current_pools[d] = &default_pools[d];
    mem_pool *p = current_pools[d];
    pthread_mutex_unlock(&pool_mu);
    return p;
}

typedef struct {
    uint64_t base, size;
    mem_pool *pool;
} pool_block;
static pool_block *blocks;
static size_t nblocks, cap_blocks;

static cudaError_t pool_alloc(void **p, size_t size, mem_pool *pool, cudaStream_t s)
{
    uint64_t sh;
    cudaError_t e = ready();
    if (e || (e = stream_handle(s, &sh))) return record(e);
    if (!pool || pool->magic != POOL_MAGIC) return record(cudaErrorInvalidValue);
    int saved = current_device;
    current_device = pool->device;
    e = cudaMalloc(p, size);
    current_device = saved;
    if (e || !size) return e;
    pthread_mutex_lock(&pool_mu);
    if (!grow(&blocks, &cap_blocks, nblocks, sizeof *blocks)) {
        blocks[nblocks++] = (pool_block){(uint64_t)(uintptr_t)*p, size, pool};
        pool->used += size;
        if (pool->used > pool->used_high) pool->used_high = pool->used;
    }
    pthread_mutex_unlock(&pool_mu);
    return cudaSuccess;
}

static cudaError_t capture_memory(struct graph *g, void **p, void *dptr, size_t size, const char *api);

EXPORT cudaError_t cudaMallocAsync(void **p, size_t size, cudaStream_t s)
{
    cudaError_t e = ready();
    if (e) return record(e);
    if (capturing(s)) return p && size ? capture_memory(capturing(s), p, NULL, size, "cudaMallocAsync") : record(cudaErrorInvalidValue);
    return pool_alloc(p, size, default_pool(stream_device(s)), s);
}

EXPORT cudaError_t cudaMallocFromPoolAsync(void **p, size_t size, cudaMemPool_t pool, cudaStream_t s)
{
    if (capturing(s)) return unsupported("cudaMallocFromPoolAsync", "an allocation from a pool of the program's in a capture");
    return pool_alloc(p, size, (mem_pool *)pool, s);
}

EXPORT cudaError_t cudaFreeAsync(void *p, cudaStream_t s)
{
    cudaError_t e;
    if (!p) return cudaSuccess;
    if (capturing(s)) return capture_memory(capturing(s), NULL, p, 0, "cudaFreeAsync");
    if ((e = cudaStreamSynchronize(s))) return e;
    pthread_mutex_lock(&pool_mu);
    for (size_t i = 0; i < nblocks; ++i)
        if (blocks[i].base == (uint64_t)(uintptr_t)p) {
            blocks[i].pool->used -= blocks[i].size;
            blocks[i] = blocks[--nblocks];
            break;
        }
    pthread_mutex_unlock(&pool_mu);
    return cudaFree(p);
}

EXPORT cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device)
{
    cudaError_t e = valid_device(device);
    if (!pool) return record(cudaErrorInvalidValue);
    if (e) return e;
    default_pool(device);
    *pool = (cudaMemPool_t)&default_pools[device];
    return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceGetMemPool(cudaMemPool_t *pool, int device)
{
    cudaError_t e = valid_device(device);
    if (!pool) return record(cudaErrorInvalidValue);
    if (e) return e;
    *pool = (cudaMemPool_t)default_pool(device);
    return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t pool)
{
    mem_pool *p = (mem_pool *)pool;
    cudaError_t e = valid_device(device);
    if (e) return e;
    if (!p || p->magic != POOL_MAGIC || p->device != device) return record(cudaErrorInvalidValue);
    default_pool(device);
    pthread_mutex_lock(&pool_mu);
    current_pools[device] = p;
    pthread_mutex_unlock(&pool_mu);
    return cudaSuccess;
}

EXPORT cudaError_t cudaMemPoolCreate(cudaMemPool_t *pool, const struct cudaMemPoolProps *props)
{
    cudaError_t e;
    if (!pool || !props) return record(cudaErrorInvalidValue);
    if (props->allocType != cudaMemAllocationTypePinned || props->location.type != cudaMemLocationTypeDevice ||
        props->handleTypes != cudaMemHandleTypeNone)
        return unsupported("cudaMemPoolCreate", "only device pools without export handles are remoted");
    if ((e = valid_device(props->location.id))) return e;
    mem_pool *p = malloc(sizeof *p);
    if (!p) return record(cudaErrorMemoryAllocation);
    *p = (mem_pool){POOL_MAGIC, props->location.id, {1, 1, 1}, 0, 0, 0};
    *pool = (cudaMemPool_t)p;
    return cudaSuccess;
}

EXPORT cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool)
{
    mem_pool *p = (mem_pool *)pool;
    if (!p || p->magic != POOL_MAGIC || p == &default_pools[p->device]) return record(cudaErrorInvalidValue);
    pthread_mutex_lock(&pool_mu);
    if (current_pools[p->device] == p) current_pools[p->device] = &default_pools[p->device];
    pthread_mutex_unlock(&pool_mu);
    p->magic = 0; /* its blocks stay valid until freed, as the runtime allows */
    return cudaSuccess;
}

EXPORT cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t keep)
{
    (void)keep; /* freed blocks are returned to the server at once: nothing is held */
    return pool && ((mem_pool *)pool)->magic == POOL_MAGIC ? cudaSuccess : record(cudaErrorInvalidValue);
}

/* Pool attributes: the reuse policies and threshold as the program set them, the
 * usage this process's stream-ordered allocations make (nothing is held beyond what is
 * in use: reserved == used; the high marks can only be reset, to the current use). */
static cudaError_t pool_attribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value, int set)
{
    mem_pool *p = (mem_pool *)pool;
    if (!p || p->magic != POOL_MAGIC || !value) return record(cudaErrorInvalidValue);
    pthread_mutex_lock(&pool_mu);
    cudaError_t e = cudaSuccess;
    int *flag = NULL;
    uint64_t *u64 = NULL, readonly = 0;
    switch (attr) {
    case cudaMemPoolReuseFollowEventDependencies: case cudaMemPoolReuseAllowOpportunistic:
    case cudaMemPoolReuseAllowInternalDependencies: flag = &p->reuse[attr - cudaMemPoolReuseFollowEventDependencies]; break;
    case cudaMemPoolAttrReleaseThreshold: u64 = &p->release_threshold; break;
    case cudaMemPoolAttrReservedMemCurrent: case cudaMemPoolAttrUsedMemCurrent:
        if (set) e = cudaErrorInvalidValue;
        else readonly = p->used, u64 = &readonly;
        break;
    case cudaMemPoolAttrReservedMemHigh: case cudaMemPoolAttrUsedMemHigh:
        if (set && *(uint64_t *)value) e = cudaErrorInvalidValue;
        else if (set) p->used_high = p->used;
        else u64 = &p->used_high;
        break;
    default: e = cudaErrorInvalidValue;
    }
    if (flag) set ? (void)(*flag = *(int *)value) : (void)(*(int *)value = *flag);
    if (u64 && u64 != &readonly) set ? (void)(*u64 = *(uint64_t *)value) : (void)(*(uint64_t *)value = *u64);
    else if (u64) *(uint64_t *)value = readonly;
    pthread_mutex_unlock(&pool_mu);
    return e ? record(e) : cudaSuccess;
}

EXPORT cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value)
{
    return pool_attribute(pool, attr, value, 1);
}

EXPORT cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value)
{
    return pool_attribute(pool, attr, value, 0);
}

/* ---- host memory and pointers ------------------------------------------------------- */

/* Registering host memory pins it for DMA; a copy that crosses a socket needs no pin. */
EXPORT cudaError_t cudaHostRegister(void *p, size_t n, unsigned flags)
{
    if (!p || !n) return record(cudaErrorInvalidValue);
    if (flags & (cudaHostRegisterMapped | cudaHostRegisterIoMemory | cudaHostRegisterReadOnly))
        return unsupported("cudaHostRegister", "mapped (zero-copy) host memory needs memory coherent with the GPU");
    return host_range_add(p, n, "cudaHostRegister", flags);
}
EXPORT cudaError_t cudaHostUnregister(void *p)
{
    return p && host_range_remove(p) ? cudaSuccess : record(cudaErrorHostMemoryNotRegistered);
}

EXPORT cudaError_t cudaHostGetDevicePointer(void **dp, void *hp, unsigned flags)
{
    (void)dp, (void)hp, (void)flags;
    return unsupported("cudaHostGetDevicePointer", "zero-copy host memory needs memory coherent with the GPU");
}

/* The flags pinned memory was made with (p anywhere inside it). */
EXPORT cudaError_t cudaHostGetFlags(unsigned *flags, void *p)
{
    if (!flags || !p) return record(cudaErrorInvalidValue);
    pthread_mutex_lock(&host_mu);
    const host_range *r = host_range_of((uint64_t)(uintptr_t)p);
    if (r) *flags = r->flags;
    pthread_mutex_unlock(&host_mu);
    return r ? cudaSuccess : record(cudaErrorInvalidValue);
}

/* Device memory is the device's; pinned memory is host memory with no device address
 * (the GPU cannot reach it: see host_arg); anything else is unregistered. */
EXPORT cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *ptr)
{
    uint64_t p = (uint64_t)(uintptr_t)ptr;
    if (!a) return record(cudaErrorInvalidValue);
    memset(a, 0, sizeof *a);
    a->type = cudaMemoryTypeUnregistered, a->device = -2;
    pthread_mutex_lock(&host_mu);
    if (host_range_of(p)) a->type = cudaMemoryTypeHost, a->device = current_device, a->hostPointer = (void *)ptr;
    pthread_mutex_unlock(&host_mu);
    pthread_mutex_lock(&alloc_mu);
    for (size_t i = 0; i < nalloc; ++i)
        if (p >= allocs[i].base && p - allocs[i].base < allocs[i].size) {
            /* (a device address wins where it coincides with a host one: see host_arg) */
            a->type = cudaMemoryTypeDevice, a->device = allocs[i].device, a->devicePointer = (void *)ptr;
            a->hostPointer = NULL;
            break;
        }
    pthread_mutex_unlock(&alloc_mu);
    return cudaSuccess;
}

EXPORT struct cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w, enum cudaChannelFormatKind f)
{
    struct cudaChannelFormatDesc d = {x, y, z, w, f};
    return d;
}

/* ---- stream attributes -------------------------------------------------------------- */

/* Access-policy windows, synchronization policy and the like tune how the GPU caches and
 * waits; they never change results.  Kept per stream here, reported back, not forwarded. */
typedef struct {
    cudaStream_t stream;
    cudaStreamAttrID id;
    cudaStreamAttrValue value;
} stream_attr;
static stream_attr *stream_attrs;
static size_t nstream_attrs, cap_stream_attrs;
static pthread_mutex_t attr_mu = PTHREAD_MUTEX_INITIALIZER;

static stream_attr *find_stream_attr(cudaStream_t s, cudaStreamAttrID id, int add)
{
    for (size_t i = 0; i < nstream_attrs; ++i)
        if (stream_attrs[i].stream == s && stream_attrs[i].id == id) return &stream_attrs[i];
    if (!add || grow(&stream_attrs, &cap_stream_attrs, nstream_attrs, sizeof *stream_attrs)) return NULL;
    stream_attr *a = &stream_attrs[nstream_attrs++];
    memset(a, 0, sizeof *a);
    a->stream = s, a->id = id;
    return a;
}

static void forget_stream_attrs(cudaStream_t s)
{
    pthread_mutex_lock(&attr_mu);
    for (size_t i = 0; i < nstream_attrs;)
        if (stream_attrs[i].stream == s) stream_attrs[i] = stream_attrs[--nstream_attrs];
        else ++i;
    pthread_mutex_unlock(&attr_mu);
}

EXPORT cudaError_t cudaStreamSetAttribute(cudaStream_t s, cudaStreamAttrID id, const cudaStreamAttrValue *value)
{
    uint64_t sh;
    cudaError_t e = ready();
    if (e || (e = own_stream(&s)) || (e = stream_handle(s, &sh))) return record(e);
    if (!value) return record(cudaErrorInvalidValue);
    if (id == cudaLaunchAttributePriority) return unsupported("cudaStreamSetAttribute", "a stream's priority is fixed when it is created");
    pthread_mutex_lock(&attr_mu);
    stream_attr *a = find_stream_attr(s, id, 1);
    if (a) a->value = *value;
    pthread_mutex_unlock(&attr_mu);
    return a ? cudaSuccess : record(cudaErrorMemoryAllocation);
}

EXPORT cudaError_t cudaStreamGetAttribute(cudaStream_t s, cudaStreamAttrID id, cudaStreamAttrValue *value)
{
    uint64_t sh;
    cudaError_t e = ready();
    if (e || (e = own_stream(&s)) || (e = stream_handle(s, &sh))) return record(e);
    if (!value) return record(cudaErrorInvalidValue);
    memset(value, 0, sizeof *value);
    if (id == cudaLaunchAttributePriority) return cudaStreamGetPriority(s, &value->priority);
    pthread_mutex_lock(&attr_mu);
    stream_attr *a = find_stream_attr(s, id, 0);
    if (a) *value = a->value;
    pthread_mutex_unlock(&attr_mu);
    return cudaSuccess;
}

EXPORT cudaError_t cudaStreamCopyAttributes(cudaStream_t dst, cudaStream_t src)
{
    cudaError_t e = ready();
    if (e || (e = own_stream(&dst)) || (e = own_stream(&src))) return record(e);
    pthread_mutex_lock(&attr_mu);
    for (size_t i = 0; i < nstream_attrs && !e; ++i)
        if (stream_attrs[i].stream == src) {
            stream_attr copy = stream_attrs[i], *a = find_stream_attr(dst, copy.id, 1);
            if (a) a->value = copy.value;
            else e = cudaErrorMemoryAllocation;
        }
    pthread_mutex_unlock(&attr_mu);
    return e ? record(e) : cudaSuccess;
}

/* ---- graphs ------------------------------------------------------------------------- */

/* A graph is kept here, as the list of its nodes and their dependencies, built by the
 * cudaGraphAdd* calls or by stream capture (a capturing stream, and every stream that
 * waits on an event recorded in it, appends what it is given instead of sending it).
 * Instantiation fixes an order that respects every dependency.  A graph of kernels,
 * device-to-device copies, sets and empty nodes is then sent whole to the server
 * (GRAPH_INSTANTIATE), which builds and instantiates it as a CUgraph: cudaGraphLaunch
 * is one frame, and the GPU runs independent branches concurrently.  A graph that
 * touches this process's memory -- host nodes (the function runs here), copies from or
 * to host memory (read or written here when the node runs), 3-D copies -- or exceeds
 * the server's graph limits is replayed instead: cudaGraphLaunch issues its nodes in
 * that order into the launch stream, each executed on the server as the call it was
 * made from or run here (host nodes); only the concurrency between independent branches
 * is given up, results are the same.  VCUDA_GRAPHS=client replays every graph.
 *
 * A graph that needs its identity on the server before it is instantiated -- a
 * conditional handle (kernels take its value as an argument, and set it on the GPU), a
 * conditional node (its body graphs), a memory allocation node (its address is fixed
 * when the node is made), a cudaMallocAsync or cudaFreeAsync in a capture -- gets a twin
 * there (proto.h, "graph twins"): from then on each node is sent as it is added, and
 * instantiating it instantiates the twin; such a graph is never replayed, and cloning
 * it or updating its exec is refused by name.  Other graphs keep the one-frame path. */
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
    uint64_t twin;    /* its twin on the server (see above), 0 if none */
    int twin_device;  /* the device (server) that holds it */
    uint32_t tn;      /* the twin's node count */
    int body;         /* a conditional node's body graph: goes with its node */
    unsigned long long capture_id; /* capture: its id (cudaStreamGetCaptureInfo) */
    int twin_exec;    /* an exec of a twin */
} graph;
#define GRAPH_MAGIC 0x47524150u
#define EXEC_MAGIC 0x47455845u

static pthread_mutex_t graph_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic unsigned long long capture_ids;

static graph *as_graph(const void *g, uint32_t magic)
{
    const graph *x = g;
    return x && x->magic == magic ? (graph *)x : NULL;
}

static cudaError_t join_capture(graph *g, remote_object *so)
{
    pthread_mutex_lock(&graph_mu);
    int full = g->njoined == sizeof g->joined / sizeof *g->joined;
    if (!full) g->joined[g->njoined++] = so, so->capture = g;
    pthread_mutex_unlock(&graph_mu);
    return full ? unsupported("cudaStreamWaitEvent", "more than 64 streams joining one capture") : cudaSuccess;
}

static graph *capturing(cudaStream_t s)
{
    const remote_object *o = (const remote_object *)existing_stream(s);
    return o && o->magic == STREAM_MAGIC ? o->capture : NULL;
}

/* The capture's dependency set becomes (add: also holds) nodes[0..n); room for at least
 * one node is made.  -1 if out of memory. */
static int set_front(graph *g, graph_node *const *nodes, size_t n, int add)
{
    size_t need = (add ? g->nfront : 0) + n + 1;
    if (n && nodes >= g->front && nodes < g->front + g->cap_front) { /* (the set itself, from cudaStreamGetCaptureInfo) */
        graph_node **copy = malloc(n * sizeof *copy);
        if (!copy) return -1;
        memcpy(copy, nodes, n * sizeof *copy);
        int r = set_front(g, copy, n, add);
        free(copy);
        return r;
    }
    if (need > g->cap_front) {
        graph_node **f = realloc(g->front, need * sizeof *f);
        if (f) g->front = f;
        cudaGraphEdgeData *e = f ? realloc(g->front_edges, need * sizeof *e) : NULL;
        if (!e) return -1;
        g->front_edges = e, g->cap_front = need;
    }
    if (!add) g->nfront = 0;
    for (size_t i = 0; i < n; ++i) g->front[g->nfront++] = nodes[i];
    memset(g->front_edges, 0, g->cap_front * sizeof *g->front_edges);
    return 0;
}

/* A new node of g after deps (or, when capturing, after the capture's dependency set). */
static graph_node *add_node(graph *g, node_kind kind, graph_node *const *deps, size_t ndeps, int capture)
{
    if (capture && set_front(g, NULL, 0, 1)) return NULL; /* (room for the node itself, made first) */
    graph_node *n = calloc(1, sizeof *n);
    graph_node *const *d = capture ? g->front : deps;
    size_t nd = capture ? g->nfront : ndeps;
    if (!n || (nd && !(n->deps = malloc(nd * sizeof *n->deps)))) return free(n), NULL;
    for (size_t i = 0; i < nd; ++i) {
        if (!d[i] || d[i]->owner != g) return free(n->deps), free(n), NULL;
        n->deps[i] = d[i];
    }
    n->ndeps = nd, n->kind = kind, n->owner = g, n->tidx = UINT32_MAX;
    if (grow(&g->nodes, &g->cap, g->nnodes, sizeof *g->nodes)) return free(n->deps), free(n), NULL;
    n->index = g->nnodes;
    g->nodes[g->nnodes++] = n;
    if (capture) g->front[0] = n, g->nfront = 1;
    return n;
}

static cudaError_t kernel_node(graph_node *n, kernel *k, dim3 grid, dim3 block, size_t shmem, void **args)
{
    uint64_t fn;
    cudaError_t e;
    if (!k) return record(cudaErrorInvalidDeviceFunction);
    if ((e = resolve(k, &fn))) return e; /* the argument sizes */
    size_t total = 0;
    for (uint32_t i = 0; i < k->nparams; ++i) total += k->sizes[i];
    if (!(n->args = malloc(total ? total : 1))) return record(cudaErrorMemoryAllocation);
    for (uint32_t i = 0, at = 0; i < k->nparams; at += k->sizes[i++]) memcpy(n->args + at, args[i], k->sizes[i]);
    n->k = k, n->grid = grid, n->block = block, n->shmem = shmem;
    return cudaSuccess;
}

/* ---- graph twins (see "graphs" above, and proto.h) ---- */
static void free_graph(graph *g);
static int server_node(const graph_node *n);
static int cmp_u32(const void *a, const void *b);

/* The wire form of node n's own fields (its dependencies aside), resolving a kernel on
 * the current device. */
static cudaError_t wire_node(const graph_node *n, vcuda_graph_node *x)
{
    cudaError_t e = cudaSuccess;
    switch (n->kind) {
    case NODE_KERNEL: {
        uint64_t fn;
        if ((e = resolve(n->k, &fn))) break;
        x->kind = VCUDA_GNODE_KERNEL, x->function = fn;
        uint32_t dims[6] = {n->grid.x, n->grid.y, n->grid.z, n->block.x, n->block.y, n->block.z};
        memcpy(x->dim, dims, sizeof dims);
        x->shmem = (uint32_t)n->shmem, x->params = n->args, x->params_len = 0;
        for (uint32_t p = 0; p < n->k->nparams; ++p) x->params_len += n->k->sizes[p];
        break;
    }
    case NODE_COPY: x->kind = VCUDA_GNODE_COPY, x->dst = (uintptr_t)n->dst, x->src = (uintptr_t)n->src, x->size = n->n; break;
    case NODE_SET:
        x->kind = VCUDA_GNODE_SET, x->dst = (uintptr_t)n->dst, x->pitch = n->pitch, x->value = (uint32_t)n->value & 0xff;
        x->width = n->width, x->height = n->height;
        break;
    case NODE_COND:
        x->kind = VCUDA_GNODE_COND, x->cond = n->cond, x->cond_type = (uint32_t)n->cond_type, x->cond_size = n->nbodies;
        break;
    case NODE_ALLOC: x->kind = VCUDA_GNODE_ALLOC, x->size = n->n; break;
    case NODE_FREE: x->kind = VCUDA_GNODE_FREE, x->dst = (uintptr_t)n->dst; break;
    default: x->kind = VCUDA_GNODE_EMPTY; break;
    }
    return e;
}

/* A request about g's twin, to the device that holds it; the server's reason on stderr. */
static cudaError_t twin_call(const graph *g, vcuda_msg *m, vcuda_msg *r, const char *api)
{
    char why[VCUDA_WHY_LEN];
    cudaError_t e = ready();
    if (e) return record(e);
    int saved = current_device;
    current_device = g->twin_device;
    vcuda_client_status st = vcuda_client_call(current_device, m, r, 0, why);
    if (st == VCUDA_CLIENT_REMOTE_ERROR) fprintf(stderr, "vcuda: %s: %.*s\n", api, (int)r->str_len, (const char *)r->str);
    e = result(st, r, api, why);
    current_device = saved;
    return e;
}

/* Node n (its dependencies there already) goes to g's twin: an allocation gets its
 * address, a conditional node its body graphs (twins of their own).  graph_mu held. */
static cudaError_t twin_push(graph *g, graph_node *n, const char *api)
{
    char why[VCUDA_WHY_LEN];
    vcuda_graph_node x;
    vcuda_msg m, r;
    size_t len = 0;
    int saved = current_device;
    current_device = g->twin_device; /* (server_node and wire_node ask it) */
    int ok = n->kind == NODE_COND || n->kind == NODE_ALLOC || n->kind == NODE_FREE || server_node(n);
    current_device = saved;
    if (!ok)
        return unsupported(api, "host nodes, copies from or to host memory and 3-D copies in a graph with conditional "
                                "or memory nodes");
    memset(&x, 0, sizeof x);
    uint32_t *d = malloc((n->ndeps ? n->ndeps : 1) * sizeof *d);
    uint8_t *blob = NULL;
    if (!d) return record(cudaErrorMemoryAllocation);
    for (size_t k = 0; k < n->ndeps; ++k) d[x.ndeps++] = n->deps[k]->tidx;
    qsort(d, x.ndeps, sizeof *d, cmp_u32);
    uint32_t nd = x.ndeps;
    x.ndeps = 0, x.deps = d;
    for (uint32_t k = 0; k < nd; ++k)
        if (!x.ndeps || d[k] != d[x.ndeps - 1]) d[x.ndeps++] = d[k];
    current_device = g->twin_device;
    cudaError_t e = nd && d[nd - 1] == UINT32_MAX ? cudaErrorInvalidValue : wire_node(n, &x);
    current_device = saved;
    if (!e && (vcuda_graph_encode_from(&x, g->tn, 1, NULL, 0, &len, why) || !(blob = malloc(len)) ||
               vcuda_graph_encode_from(&x, g->tn, 1, blob, len, &len, why)))
        e = blob ? cudaErrorInvalidValue : cudaErrorMemoryAllocation;
    if (!e) {
        memset(&m, 0, sizeof m);
        m.hdr.opcode = VCUDA_OP_GRAPH_TWIN_ADD_NODE;
        m.v[0] = g->twin, m.v[1] = g->tn, m.nv = 2;
        m.blob = blob, m.blob_len = (uint32_t)len;
        e = twin_call(g, &m, &r, api);
    }
    free(d), free(blob);
    if (e) return record(e);
    if (n->kind == NODE_ALLOC) { /* device memory from the node's creation on, as with the driver */
        n->dst = (void *)(uintptr_t)r.v[0];
        if (table_add(g->twin_device, r.v[0], n->n)) return record(cudaErrorMemoryAllocation);
    }
    if (n->kind == NODE_COND) {
        if (r.blob_len != 8u * n->nbodies) return record(cudaErrorUnknown);
        for (unsigned k = 0; k < n->nbodies; ++k) {
            graph *b = calloc(1, sizeof *b);
            if (!b) return record(cudaErrorMemoryAllocation);
            b->magic = GRAPH_MAGIC, b->body = 1, b->twin_device = g->twin_device;
            for (int i = 0; i < 8; ++i) b->twin |= (uint64_t)r.blob[8 * k + i] << (8 * i);
            n->bodies[k] = b;
        }
    }
    n->tidx = g->tn++;
    return cudaSuccess;
}

/* g gets a twin on the current device, holding the nodes it has (each after those it
 * depends on); none if anything fails.  graph_mu held. */
static cudaError_t twin_graph(graph *g, const char *api)
{
    vcuda_msg r;
    g->twin_device = current_device;
    cudaError_t e = call(VCUDA_OP_GRAPH_TWIN_CREATE, NULL, 0, &r, api);
    uint8_t *done = calloc(g->nnodes ? g->nnodes : 1, 1);
    if (!e && !done) e = record(cudaErrorMemoryAllocation);
    if (e) return free(done), e;
    g->twin = r.v[0], g->tn = 0;
    for (size_t pushed = 0; !e && pushed < g->nnodes;) {
        size_t before = pushed;
        for (size_t i = 0; i < g->nnodes && !e; ++i) {
            int ready_ = !done[i];
            for (size_t k = 0; ready_ && k < g->nodes[i]->ndeps; ++k) ready_ = done[g->nodes[i]->deps[k]->index];
            if (ready_) e = twin_push(g, g->nodes[i], api), done[i] = 1, ++pushed;
        }
        if (!e && pushed == before) e = record(cudaErrorInvalidValue); /* a cycle */
    }
    free(done);
    if (e) {
        call(VCUDA_OP_GRAPH_TWIN_DESTROY, &g->twin, 1, &r, api);
        g->twin = 0;
        for (size_t i = 0; i < g->nnodes; ++i) g->nodes[i]->tidx = UINT32_MAX;
    }
    return e;
}

/* After node n was added to g: to the twin, if g has one or n needs it.  graph_mu held. */
static cudaError_t node_added(graph *g, graph_node *n, const char *api)
{
    if (g->twin) return twin_push(g, n, api);
    if (n->kind == NODE_COND || n->kind == NODE_ALLOC || n->kind == NODE_FREE) return twin_graph(g, api);
    return cudaSuccess;
}

/* The last node added to g goes again (it could not be added); a capture's dependency
 * set is what it was before.  graph_mu held. */
static void drop_node(graph *g, graph_node *n, int capture)
{
    if (capture) set_front(g, n->deps, n->ndeps, 0);
    --g->nnodes;
    free(n->deps), free(n->args), free(n->bodies), free(n);
}

/* A node made by a capture: kept unless the twin refused it (then the error). */
static cudaError_t captured(graph *g, graph_node *n, cudaError_t e, const char *api)
{
    cudaError_t t = node_added(g, n, api);
    if (t) drop_node(g, n, 1);
    return t ? t : e;
}

static int capture_kernel(cudaStream_t s, void *k, dim3 grid, dim3 block, void **args, size_t shmem, cudaError_t *e)
{
    graph *g = capturing(s);
    if (!g) return 0;
    pthread_mutex_lock(&graph_mu);
    graph_node *n = add_node(g, NODE_KERNEL, NULL, 0, 1);
    *e = n ? kernel_node(n, k, grid, block, shmem, args) : record(cudaErrorMemoryAllocation);
    if (n && *e) n->kind = NODE_EMPTY; /* keeps the order; the error is the capture's */
    if (n) *e = captured(g, n, *e, "cudaLaunchKernel");
    pthread_mutex_unlock(&graph_mu);
    return 1;
}

static int capture_copy(cudaStream_t s, void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaError_t *e)
{
    graph *g = capturing(s);
    if (!g) return 0;
    pthread_mutex_lock(&graph_mu);
    graph_node *x = add_node(g, NODE_COPY, NULL, 0, 1);
    if (x) x->dst = dst, x->src = src, x->n = n, x->copy_kind = kind;
    *e = x ? captured(g, x, cudaSuccess, "cudaMemcpyAsync") : record(cudaErrorMemoryAllocation);
    pthread_mutex_unlock(&graph_mu);
    return 1;
}

static int capture_set(cudaStream_t s, void *p, size_t pitch, int value, size_t width, size_t height, cudaError_t *e)
{
    graph *g = capturing(s);
    if (!g) return 0;
    pthread_mutex_lock(&graph_mu);
    graph_node *x = add_node(g, NODE_SET, NULL, 0, 1);
    if (x) x->dst = p, x->pitch = pitch, x->value = value, x->width = width, x->height = height;
    *e = x ? captured(g, x, cudaSuccess, "cudaMemsetAsync") : record(cudaErrorMemoryAllocation);
    pthread_mutex_unlock(&graph_mu);
    return 1;
}

static int capture_host(cudaStream_t s, cudaHostFn_t fn, void *data, cudaError_t *e)
{
    graph *g = capturing(s);
    if (!g) return 0;
    pthread_mutex_lock(&graph_mu);
    graph_node *x = add_node(g, NODE_HOST, NULL, 0, 1);
    if (x) x->fn = fn, x->data = data;
    *e = x ? captured(g, x, cudaSuccess, "cudaLaunchHostFunc") : record(cudaErrorMemoryAllocation);
    pthread_mutex_unlock(&graph_mu);
    return 1;
}

EXPORT cudaError_t cudaGraphCreate(cudaGraph_t *out, unsigned flags)
{
    if (!out || flags) return record(cudaErrorInvalidValue);
    graph *g = calloc(1, sizeof *g);
    if (!g) return record(cudaErrorMemoryAllocation);
    g->magic = GRAPH_MAGIC;
    *out = (cudaGraph_t)g;
    return cudaSuccess;
}

static void free_graph(graph *g)
{
    for (size_t i = 0; i < g->nnodes; ++i) {
        graph_node *n = g->nodes[i];
        if (g->magic == GRAPH_MAGIC) /* (an exec's copies share the graph's bodies) */
            for (unsigned k = 0; n->bodies && k < n->nbodies; ++k)
                if (n->bodies[k]) free_graph(n->bodies[k]);
        if (g->magic == GRAPH_MAGIC) free(n->bodies);
        free(n->deps), free(n->args), free(n);
    }
    free(g->nodes), free(g->front), free(g->front_edges);
    g->magic = 0;
    free(g);
}

/* cudaGraphDestroy and cudaGraphExecDestroy: a graph or an instantiated one. */
static cudaError_t destroy_graph(void *p, uint32_t magic)
{
    graph *g = as_graph(p, magic);
    if (!g) return record(cudaErrorInvalidValue);
    pthread_mutex_lock(&graph_mu);
    free_graph(g);
    pthread_mutex_unlock(&graph_mu);
    return cudaSuccess;
}

/* A graph with a twin: the twin goes first (the server keeps it while execs of it live). */
EXPORT cudaError_t cudaGraphDestroy(cudaGraph_t gr)
{
    graph *g = as_graph(gr, GRAPH_MAGIC);
    vcuda_msg r;
    if (!g || g->body) return record(cudaErrorInvalidValue); /* (a body goes with its node) */
    if (g->twin) {
        int saved = current_device;
        current_device = g->twin_device;
        call(VCUDA_OP_GRAPH_TWIN_DESTROY, &g->twin, 1, &r, "cudaGraphDestroy");
        current_device = saved;
    }
    return destroy_graph(gr, GRAPH_MAGIC);
}

/* Node creation for the cudaGraphAdd* calls: checks, adds, fills (fill may fail). */
#define ADD_NODE(kind_, fill) ADD_NODE_THEN(kind_, fill, (void)0)
/* ... and once it is made (and in the graph's twin, if it has one): then. */
#define ADD_NODE_THEN(kind_, fill, then)                                                       \
    do {                                                                                       \
        graph *g = as_graph(gr, GRAPH_MAGIC);                                                  \
        cudaError_t e_ = cudaSuccess;                                                          \
        if (!out || !g || (ndeps && !deps)) return record(cudaErrorInvalidValue);              \
        pthread_mutex_lock(&graph_mu);                                                         \
        graph_node *n = add_node(g, kind_, (graph_node *const *)deps, ndeps, 0);               \
        if (!n) e_ = cudaErrorInvalidValue;                                                    \
        else {                                                                                 \
            fill;                                                                              \
            if (!e_) e_ = node_added(g, n, __func__);                                          \
            if (e_) drop_node(g, n, 0);                                                        \
            else *out = (cudaGraphNode_t)n, then;                                              \
        }                                                                                      \
        pthread_mutex_unlock(&graph_mu);                                                       \
        return e_ ? record(e_) : cudaSuccess;                                                  \
    } while (0)

EXPORT cudaError_t cudaGraphAddEmptyNode(cudaGraphNode_t *out, cudaGraph_t gr, const cudaGraphNode_t *deps, size_t ndeps)
{
    ADD_NODE(NODE_EMPTY, (void)0);
}

EXPORT cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t *out, cudaGraph_t gr, const cudaGraphNode_t *deps, size_t ndeps,
                                          const struct cudaKernelNodeParams *p)
{
    if (!p || p->extra) return p ? unsupported("cudaGraphAddKernelNode", "arguments through 'extra'") : record(cudaErrorInvalidValue);
    ADD_NODE(NODE_KERNEL, e_ = kernel_node(n, find_kernel(p->func), p->gridDim, p->blockDim, p->sharedMemBytes, p->kernelParams));
}

EXPORT cudaError_t cudaGraphAddMemcpyNode(cudaGraphNode_t *out, cudaGraph_t gr, const cudaGraphNode_t *deps, size_t ndeps,
                                          const struct cudaMemcpy3DParms *p)
{
    if (!p) return record(cudaErrorInvalidValue);
    if (p->srcArray || p->dstArray) return unsupported("cudaGraphAddMemcpyNode", "CUDA arrays are not remoted");
    ADD_NODE(NODE_COPY3D, n->p3 = *p);
}

EXPORT cudaError_t cudaGraphAddMemcpyNode1D(cudaGraphNode_t *out, cudaGraph_t gr, const cudaGraphNode_t *deps,
                                            size_t ndeps, void *dst, const void *src, size_t count,
                                            enum cudaMemcpyKind kind)
{
    ADD_NODE(NODE_COPY, (n->dst = dst, n->src = src, n->n = count, n->copy_kind = kind));
}

EXPORT cudaError_t cudaGraphAddMemsetNode(cudaGraphNode_t *out, cudaGraph_t gr, const cudaGraphNode_t *deps, size_t ndeps,
                                          const struct cudaMemsetParams *p)
{
    if (!p || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4)) return record(cudaErrorInvalidValue);
    /* sets are bytewise here: a wider element must repeat one byte (0 and -1 do) */
    unsigned v = p->value, b = v & 0xff;
    if (p->elementSize > 1 && v != (b * (p->elementSize == 2 ? 0x0101u : 0x01010101u)))
        return unsupported("cudaGraphAddMemsetNode", "a 2- or 4-byte pattern whose bytes differ");
    ADD_NODE(NODE_SET, (n->dst = p->dst, n->pitch = p->pitch ? p->pitch : p->width * p->elementSize,
                        n->value = (int)b, n->width = p->width * p->elementSize, n->height = p->height ? p->height : 1));
}

EXPORT cudaError_t cudaGraphAddHostNode(cudaGraphNode_t *out, cudaGraph_t gr, const cudaGraphNode_t *deps, size_t ndeps,
                                        const struct cudaHostNodeParams *p)
{
    if (!p || !p->fn) return record(cudaErrorInvalidValue);
    ADD_NODE(NODE_HOST, (n->fn = p->fn, n->data = p->userData));
}

/* ---- conditional and memory nodes (their graph gets a twin: see "graphs") ---- */

EXPORT cudaError_t cudaGraphConditionalHandleCreate(cudaGraphConditionalHandle *out, cudaGraph_t gr, unsigned dflt,
                                                    unsigned flags)
{
    graph *g = as_graph(gr, GRAPH_MAGIC);
    vcuda_msg m, r;
    if (!out || !g) return record(cudaErrorInvalidValue);
    pthread_mutex_lock(&graph_mu);
    cudaError_t e = g->twin ? cudaSuccess : twin_graph(g, "cudaGraphConditionalHandleCreate");
    if (!e) {
        memset(&m, 0, sizeof m);
        m.hdr.opcode = VCUDA_OP_GRAPH_COND_CREATE;
        m.v[0] = g->twin, m.v[1] = dflt, m.v[2] = flags, m.nv = 3;
        if (!(e = twin_call(g, &m, &r, "cudaGraphConditionalHandleCreate"))) *out = r.v[0];
    }
    pthread_mutex_unlock(&graph_mu);
    return e;
}

/* A conditional node; its body graphs (p->phGraph_out) are the node's, filled by the
 * program with nodes or a capture. */
static cudaError_t add_conditional(cudaGraphNode_t *out, cudaGraph_t gr, const cudaGraphNode_t *deps, size_t ndeps,
                                   struct cudaConditionalNodeParams *p)
{
    if (!p || p->size < 1 || p->size > VCUDA_MAX_COND_BODIES) return record(cudaErrorInvalidValue);
    ADD_NODE(NODE_COND, (n->cond = p->handle, n->cond_type = (int)p->type, n->nbodies = p->size,
                         e_ = (n->bodies = calloc(p->size, sizeof *n->bodies)) ? cudaSuccess : cudaErrorMemoryAllocation,
                         p->phGraph_out = (cudaGraph_t *)n->bodies));
}

/* Allocation properties vcuda takes: pinned memory of the current device, no IPC, no
 * peer access (the address is the server's device's). */
static cudaError_t alloc_props(const struct cudaMemPoolProps *pp, size_t naccess, size_t size, const char *api)
{
    if (pp->allocType != cudaMemAllocationTypePinned || pp->location.type != cudaMemLocationTypeDevice ||
        pp->handleTypes != cudaMemHandleTypeNone || !size)
        return record(cudaErrorInvalidValue);
    if (pp->location.id != current_device) return unsupported(api, "an allocation node for another device than the current one");
    if (naccess) return unsupported(api, "peer access descriptors of a graph allocation");
    return cudaSuccess;
}

EXPORT cudaError_t cudaGraphAddMemAllocNode(cudaGraphNode_t *out, cudaGraph_t gr, const cudaGraphNode_t *deps,
                                            size_t ndeps, struct cudaMemAllocNodeParams *p)
{
    cudaError_t e = p ? alloc_props(&p->poolProps, p->accessDescCount, p->bytesize, "cudaGraphAddMemAllocNode")
                      : record(cudaErrorInvalidValue);
    if (e) return e;
    ADD_NODE_THEN(NODE_ALLOC, (n->n = p->bytesize), p->dptr = n->dst);
}

EXPORT cudaError_t cudaGraphAddMemFreeNode(cudaGraphNode_t *out, cudaGraph_t gr, const cudaGraphNode_t *deps,
                                           size_t ndeps, void *dptr)
{
    if (!dptr) return record(cudaErrorInvalidValue);
    ADD_NODE(NODE_FREE, (n->dst = dptr));
}

/* cudaGraphAddNode: each type as its own cudaGraphAdd*Node call would make it. */
EXPORT cudaError_t cudaGraphAddNode(cudaGraphNode_t *out, cudaGraph_t gr, const cudaGraphNode_t *deps,
                                    const cudaGraphEdgeData *edges, size_t ndeps, struct cudaGraphNodeParams *p)
{
    (void)edges; /* edge data (programmatic ports) only tunes overlap, as in cudaGraphAddDependencies */
    if (!p) return record(cudaErrorInvalidValue);
    switch (p->type) {
    case cudaGraphNodeTypeKernel: {
        struct cudaKernelNodeParams k = {.func = p->kernel.func, .gridDim = p->kernel.gridDim, .blockDim = p->kernel.blockDim,
                                         .sharedMemBytes = p->kernel.sharedMemBytes, .kernelParams = p->kernel.kernelParams,
                                         .extra = p->kernel.extra};
        return cudaGraphAddKernelNode(out, gr, deps, ndeps, &k);
    }
    case cudaGraphNodeTypeMemcpy:
        if (p->memcpy.flags) return record(cudaErrorInvalidValue);
        return cudaGraphAddMemcpyNode(out, gr, deps, ndeps, &p->memcpy.copyParams);
    case cudaGraphNodeTypeMemset: {
        struct cudaMemsetParams m = {.dst = p->memset.dst, .pitch = p->memset.pitch, .value = p->memset.value,
                                     .elementSize = p->memset.elementSize, .width = p->memset.width, .height = p->memset.height};
        return cudaGraphAddMemsetNode(out, gr, deps, ndeps, &m);
    }
    case cudaGraphNodeTypeHost: {
        struct cudaHostNodeParams h = {.fn = p->host.fn, .userData = p->host.userData};
        return cudaGraphAddHostNode(out, gr, deps, ndeps, &h);
    }
    case cudaGraphNodeTypeEmpty: return cudaGraphAddEmptyNode(out, gr, deps, ndeps);
    case cudaGraphNodeTypeMemAlloc: {
        struct cudaMemAllocNodeParams a = {.poolProps = p->alloc.poolProps, .accessDescs = p->alloc.accessDescs,
                                           .accessDescCount = p->alloc.accessDescCount, .bytesize = p->alloc.bytesize};
        cudaError_t e = cudaGraphAddMemAllocNode(out, gr, deps, ndeps, &a);
        if (!e) p->alloc.dptr = a.dptr;
        return e;
    }
    case cudaGraphNodeTypeMemFree: return cudaGraphAddMemFreeNode(out, gr, deps, ndeps, p->free.dptr);
    case cudaGraphNodeTypeConditional: return add_conditional(out, gr, deps, ndeps, &p->conditional);
    default: return unsupported("cudaGraphAddNode", "child graph, event and external semaphore nodes");
    }
}

/* cudaMallocAsync and cudaFreeAsync in a capture: an allocation node (the address is
 * known at once, as with the driver) and a free node. */
static cudaError_t capture_memory(graph *g, void **p, void *dptr, size_t size, const char *api)
{
    pthread_mutex_lock(&graph_mu);
    graph_node *n = add_node(g, p ? NODE_ALLOC : NODE_FREE, NULL, 0, 1);
    cudaError_t e = n ? cudaSuccess : record(cudaErrorMemoryAllocation);
    if (n) n->n = size, n->dst = dptr, e = captured(g, n, cudaSuccess, api);
    if (!e && p) *p = n->dst;
    pthread_mutex_unlock(&graph_mu);
    return e;
}

/* ---- graph memory (the server's device's: its driver's own accounting) ---- */

/* A request with scalars v about device (valid), on its server. */
static cudaError_t device_call(int device, unsigned op, const uint64_t *v, unsigned nv, vcuda_msg *r, const char *api)
{
    cudaError_t e = valid_device(device);
    if (e) return e;
    int saved = current_device;
    current_device = device;
    e = call(op, v, nv, r, api);
    current_device = saved;
    return e;
}

EXPORT cudaError_t cudaDeviceGetGraphMemAttribute(int device, enum cudaGraphMemAttributeType attr, void *value)
{
    vcuda_msg r;
    uint64_t a = (uint64_t)attr;
    if (!value || a > cudaGraphMemAttrReservedMemHigh) return record(cudaErrorInvalidValue);
    cudaError_t e = device_call(device, VCUDA_OP_GRAPH_MEM_ATTR_GET, &a, 1, &r, "cudaDeviceGetGraphMemAttribute");
    if (!e) *(unsigned long long *)value = r.v[0];
    return e;
}

/* Only the high watermarks can be set, and only to 0 (a reset), as with the driver. */
EXPORT cudaError_t cudaDeviceSetGraphMemAttribute(int device, enum cudaGraphMemAttributeType attr, void *value)
{
    vcuda_msg r;
    uint64_t a = (uint64_t)attr;
    if (!value || (attr != cudaGraphMemAttrUsedMemHigh && attr != cudaGraphMemAttrReservedMemHigh) ||
        *(const unsigned long long *)value)
        return record(cudaErrorInvalidValue);
    return device_call(device, VCUDA_OP_GRAPH_MEM_ATTR_RESET, &a, 1, &r, "cudaDeviceSetGraphMemAttribute");
}

EXPORT cudaError_t cudaDeviceGraphMemTrim(int device)
{
    vcuda_msg r;
    return device_call(device, VCUDA_OP_GRAPH_MEM_TRIM, NULL, 0, &r, "cudaDeviceGraphMemTrim");
}

/* The twin's node b waits for its node a too (refused there if that closes a cycle). */
static cudaError_t twin_edge(graph *g, const graph_node *a, const graph_node *b)
{
    vcuda_msg m, r;
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_GRAPH_TWIN_ADD_EDGE;
    m.v[0] = g->twin, m.v[1] = a->tidx, m.v[2] = b->tidx, m.nv = 3;
    return twin_call(g, &m, &r, "cudaGraphAddDependencies");
}

EXPORT cudaError_t cudaGraphAddDependencies(cudaGraph_t gr, const cudaGraphNode_t *from, const cudaGraphNode_t *to,
                                            const cudaGraphEdgeData *edge, size_t count)
{
    graph *g = as_graph(gr, GRAPH_MAGIC);
    cudaError_t e = cudaSuccess;
    (void)edge; /* edge data (programmatic ports) only tunes overlap */
    if (!g || (count && (!from || !to))) return record(cudaErrorInvalidValue);
    pthread_mutex_lock(&graph_mu);
    for (size_t i = 0; i < count && !e; ++i) {
        graph_node *a = (graph_node *)from[i], *b = (graph_node *)to[i];
        graph_node **q;
        if (!a || !b || a->owner != g || b->owner != g) e = cudaErrorInvalidValue;
        else if (!(q = realloc(b->deps, (b->ndeps + 1) * sizeof *q))) e = cudaErrorMemoryAllocation;
        else if (g->twin && (e = twin_edge(g, a, b))) b->deps = q;
        else b->deps = q, b->deps[b->ndeps++] = a;
    }
    pthread_mutex_unlock(&graph_mu);
    return e ? record(e) : cudaSuccess;
}

EXPORT cudaError_t cudaGraphGetNodes(cudaGraph_t gr, cudaGraphNode_t *nodes, size_t *count)
{
    graph *g = as_graph(gr, GRAPH_MAGIC);
    if (!g || !count) return record(cudaErrorInvalidValue);
    pthread_mutex_lock(&graph_mu);
    if (nodes)
        for (size_t i = 0; i < *count; ++i) nodes[i] = i < g->nnodes ? (cudaGraphNode_t)g->nodes[i] : NULL;
    *count = g->nnodes;
    pthread_mutex_unlock(&graph_mu);
    return cudaSuccess;
}

EXPORT cudaError_t cudaGraphGetRootNodes(cudaGraph_t gr, cudaGraphNode_t *nodes, size_t *count)
{
    graph *g = as_graph(gr, GRAPH_MAGIC);
    size_t k = 0;
    if (!g || !count) return record(cudaErrorInvalidValue);
    pthread_mutex_lock(&graph_mu);
    for (size_t i = 0; i < g->nnodes; ++i)
        if (!g->nodes[i]->ndeps) {
            if (nodes && k < *count) nodes[k] = (cudaGraphNode_t)g->nodes[i];
            ++k;
        }
    if (nodes)
        for (size_t i = k; i < *count; ++i) nodes[i] = NULL;
    *count = k;
    pthread_mutex_unlock(&graph_mu);
    return cudaSuccess;
}

EXPORT cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, enum cudaGraphNodeType *type)
{
    static const enum cudaGraphNodeType types[] = {cudaGraphNodeTypeEmpty,    cudaGraphNodeTypeKernel,
                                                   cudaGraphNodeTypeMemcpy,   cudaGraphNodeTypeMemcpy,
                                                   cudaGraphNodeTypeMemset,   cudaGraphNodeTypeHost,
                                                   cudaGraphNodeTypeConditional, cudaGraphNodeTypeMemAlloc,
                                                   cudaGraphNodeTypeMemFree};
    if (!node || !type) return record(cudaErrorInvalidValue);
    *type = types[((graph_node *)node)->kind];
    return cudaSuccess;
}

/* A copy of g whose nodes are in an order that respects every dependency (Kahn's,
 * stable: among ready nodes, the one made first), under the given magic.  graph_mu held. */
static cudaError_t copy_graph(const graph *g, uint32_t magic, int ordered, graph **out)
{
    size_t n = g->nnodes, done = 0;
    graph *c = calloc(1, sizeof *c);
    size_t *new_index = calloc(n ? n : 1, sizeof *new_index), *order = calloc(n ? n : 1, sizeof *order);
    uint8_t *placed = calloc(n ? n : 1, 1);
    cudaError_t e = cudaSuccess;
    if (!c || !new_index || !order || !placed || (n && !(c->nodes = calloc(n, sizeof *c->nodes)))) e = cudaErrorMemoryAllocation;
    while (!e && done < n) {
        size_t pick = n;
        for (size_t i = 0; i < n && pick == n; ++i) {
            if (placed[i]) continue;
            size_t waiting = 0;
            for (size_t d = 0; d < g->nodes[i]->ndeps; ++d) waiting += !placed[g->nodes[i]->deps[d]->index];
            if (!waiting || !ordered) pick = i;
        }
        if (pick == n) e = cudaErrorInvalidValue; /* a cycle */
        else placed[pick] = 1, order[done++] = pick;
    }
    for (size_t i = 0; !e && i < n; ++i) { /* order[i]: the original index of the i-th node */
        const graph_node *o = g->nodes[order[i]];
        graph_node *x = calloc(1, sizeof *x);
        if (!x) { e = cudaErrorMemoryAllocation; break; }
        *x = *o;
        x->owner = c, x->origin = o, x->index = i, x->deps = NULL, x->args = NULL, c->nodes[c->nnodes++] = x;
        new_index[order[i]] = i;
        size_t total = 0;
        if (o->kind == NODE_KERNEL)
            for (uint32_t p = 0; p < o->k->nparams; ++p) total += o->k->sizes[p];
        if ((o->ndeps && !(x->deps = malloc(o->ndeps * sizeof *x->deps))) ||
            (o->kind == NODE_KERNEL && !(x->args = malloc(total ? total : 1))))
            e = cudaErrorMemoryAllocation;
        else if (o->kind == NODE_KERNEL) memcpy(x->args, o->args, total);
    }
    for (size_t i = 0; !e && i < c->nnodes; ++i) /* dependencies, in the copy's nodes */
        for (size_t d = 0; d < c->nodes[i]->ndeps; ++d)
            c->nodes[i]->deps[d] = c->nodes[new_index[g->nodes[order[i]]->deps[d]->index]];
    free(new_index), free(order), free(placed);
    if (e) {
        if (c) free_graph(c);
        return record(e);
    }
    c->magic = magic, c->cap = c->nnodes;
    *out = c;
    return cudaSuccess;
}

/* copy_graph under graph_mu: cudaGraphClone (a graph) and cudaGraphInstantiate (an
 * executable one). */
static cudaError_t copy_graph_locked(graph *g, uint32_t magic, int exec, graph **c)
{
    pthread_mutex_lock(&graph_mu);
    cudaError_t e = copy_graph(g, magic, exec, c);
    pthread_mutex_unlock(&graph_mu);
    return e;
}

EXPORT cudaError_t cudaGraphClone(cudaGraph_t *out, cudaGraph_t gr)
{
    graph *g = as_graph(gr, GRAPH_MAGIC), *c = NULL;
    if (!out || !g) return record(cudaErrorInvalidValue);
    if (g->twin || g->body) return unsupported("cudaGraphClone", "a graph with conditional or memory nodes (or a body of one)");
    cudaError_t e = copy_graph_locked(g, GRAPH_MAGIC, 0, &c);
    if (!e) *out = (cudaGraph_t)c;
    return e;
}

/* Whether the server can run node n as it is (see "graphs" above); a copy's direction
 * is resolved here, on the current device, as cudaMemcpyDefault would be at launch. */
static int server_node(const graph_node *n)
{
    switch (n->kind) {
    case NODE_EMPTY: return 1;
    case NODE_KERNEL: return n->shmem <= UINT32_MAX;
    case NODE_SET: return 1;
    case NODE_COPY:
        return n->copy_kind == cudaMemcpyDeviceToDevice ||
               (n->copy_kind == cudaMemcpyDefault && is_device_pointer(n->dst) && is_device_pointer(n->src));
    default: return 0;
    }
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Instantiates the ordered copy c on the current device's server, where it can run
 * there (c->exec stays 0 otherwise: replayed).  Errors are the server's. */
static cudaError_t server_instantiate(graph *c)
{
    char why[VCUDA_WHY_LEN];
    size_t total_deps = 0, len = 0;
    cudaError_t e = ready();
    if (e) return record(e);
    if (!server_graphs || !c->nnodes || c->nnodes > VCUDA_MAX_GRAPH_NODES) return cudaSuccess;
    for (size_t i = 0; i < c->nnodes; ++i) {
        if (!server_node(c->nodes[i])) return cudaSuccess;
        total_deps += c->nodes[i]->ndeps;
    }
    vcuda_graph_node *w = calloc(c->nnodes, sizeof *w);
    uint32_t *deps = malloc((total_deps ? total_deps : 1) * sizeof *deps), *d = deps;
    uint8_t *blob = NULL;
    if (!w || !deps) e = cudaErrorMemoryAllocation;
    for (size_t i = 0; !e && i < c->nnodes; ++i) {
        const graph_node *n = c->nodes[i];
        vcuda_graph_node *x = &w[i];
        /* dependencies: earlier nodes (c is ordered), increasing, each once */
        uint32_t nd = 0;
        for (size_t k = 0; k < n->ndeps; ++k) d[nd++] = (uint32_t)n->deps[k]->index;
        qsort(d, nd, sizeof *d, cmp_u32);
        x->ndeps = 0, x->deps = d;
        for (uint32_t k = 0; k < nd; ++k)
            if (!x->ndeps || d[k] != d[x->ndeps - 1]) d[x->ndeps++] = d[k];
        d += x->ndeps;
        e = wire_node(n, x);
    }
    uint32_t count = (uint32_t)c->nnodes;
    /* beyond the codec's limits (argument bytes, sizes): replayed, as it always could be */
    if (!e && !vcuda_graph_encode(w, count, NULL, 0, &len, why) && len <= VCUDA_MAX_CHUNK) {
        if (!(blob = malloc(len))) e = cudaErrorMemoryAllocation;
        else if (!vcuda_graph_encode(w, count, blob, len, &len, why)) {
            vcuda_msg m, r;
            memset(&m, 0, sizeof m);
            m.hdr.opcode = VCUDA_OP_GRAPH_INSTANTIATE;
            m.v[0] = count, m.nv = 1;
            m.blob = blob, m.blob_len = (uint32_t)len;
            vcuda_client_status s = vcuda_client_call(current_device, &m, &r, 0, why);
            if (s == VCUDA_CLIENT_REMOTE_ERROR)
                fprintf(stderr, "vcuda: cudaGraphInstantiate: %.*s\n", (int)r.str_len, (const char *)r.str);
            if (!(e = result(s, &r, "cudaGraphInstantiate", why))) c->exec = r.v[0], c->exec_device = current_device;
        }
    }
    free(w), free(deps), free(blob);
    return e ? record(e) : cudaSuccess;
}

/* Kernel nodes of g whose arguments point into pinned host memory are refused by name
 * at api (see host_arg): they could only fault on the server's GPU. */
static cudaError_t graph_host_args(const graph *g, const char *api)
{
    cudaError_t e = cudaSuccess;
    for (size_t i = 0; i < g->nnodes && !e; ++i)
        if (g->nodes[i]->kind == NODE_KERNEL) e = host_arg(api, g->nodes[i]->args, g->nodes[i]->k->nparams, g->nodes[i]->k->sizes);
    return e;
}

/* An exec updated since it was instantiated (cudaGraphExecKernelNodeSetParams,
 * cudaGraphExecUpdate): the copy here holds the new parameters; where the server holds
 * an instance, that one is replaced by one of the updated copy (the driver's own update
 * would need the server to keep every node's handle; a new instance has the same
 * results, at one instantiation per launch that follows an update). */
static cudaError_t reinstantiate(graph *g)
{
    cudaError_t e = cudaSuccess;
    int saved = current_device;
    if (g->exec) {
        vcuda_msg r;
        current_device = g->exec_device;
        e = call(VCUDA_OP_GRAPH_EXEC_DESTROY, &g->exec, 1, &r, "cudaGraphLaunch");
        g->exec = 0;
    }
    if (!e) e = server_instantiate(g);
    current_device = saved;
    if (!e) g->stale = 0;
    return e;
}

/* The exec c of a graph with a twin is an instance of the twin itself. */
static cudaError_t twin_instantiate(graph *g, graph *c, unsigned long long flags)
{
    vcuda_msg m, r;
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_GRAPH_TWIN_INSTANTIATE;
    m.v[0] = g->twin, m.v[1] = flags, m.nv = 2;
    cudaError_t e = twin_call(g, &m, &r, "cudaGraphInstantiate");
    if (!e) c->exec = r.v[0], c->exec_device = g->twin_device, c->twin_exec = 1;
    return e;
}

EXPORT cudaError_t cudaGraphInstantiate(cudaGraphExec_t *out, cudaGraph_t gr, unsigned long long flags)
{
    graph *g = as_graph(gr, GRAPH_MAGIC), *c = NULL;
    if (!out || !g) return record(cudaErrorInvalidValue);
    if (flags & ~(unsigned long long)(cudaGraphInstantiateFlagAutoFreeOnLaunch | cudaGraphInstantiateFlagUseNodePriority))
        return unsupported("cudaGraphInstantiate", "device launch and upload flags");
    if (g->body) return record(cudaErrorInvalidValue);
    cudaError_t e = copy_graph_locked(g, EXEC_MAGIC, 1, &c);
    if (!e && ((e = graph_host_args(c, "cudaGraphInstantiate")) ||
               (e = g->twin ? twin_instantiate(g, c, flags) : server_instantiate(c))))
        destroy_graph(c, EXEC_MAGIC);
    if (!e) *out = (cudaGraphExec_t)c;
    return e;
}

EXPORT cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *out, cudaGraph_t gr, unsigned long long flags)
{
    return cudaGraphInstantiate(out, gr, flags);
}

EXPORT cudaError_t cudaGraphExecDestroy(cudaGraphExec_t ex)
{
    graph *g = as_graph(ex, EXEC_MAGIC);
    cudaError_t e = cudaSuccess;
    if (g && g->exec) { /* the server's first; the copy here goes whatever it says */
        vcuda_msg r;
        int saved = current_device;
        current_device = g->exec_device;
        e = call(VCUDA_OP_GRAPH_EXEC_DESTROY, &g->exec, 1, &r, "cudaGraphExecDestroy");
        current_device = saved;
    }
    cudaError_t d = destroy_graph(ex, EXEC_MAGIC);
    return e ? e : d;
}

/* The server's instance of exec g takes node n's new kernel configuration and arguments
 * (GRAPH_EXEC_KERNEL_SET; the driver checks them as cuGraphExecKernelNodeSetParams). */
static cudaError_t server_kernel_set(graph *g, const graph_node *n)
{
    char why[VCUDA_WHY_LEN];
    vcuda_msg m, r;
    uint64_t fn;
    int saved = current_device;
    current_device = g->exec_device;
    cudaError_t e = resolve(n->k, &fn);
    if (!e) {
        memset(&m, 0, sizeof m);
        m.hdr.opcode = VCUDA_OP_GRAPH_EXEC_KERNEL_SET;
        uint64_t v[] = {g->exec, g->twin_exec ? n->tidx : n->index, fn, n->grid.x, n->grid.y, n->grid.z, n->block.x, n->block.y, n->block.z, n->shmem};
        memcpy(m.v, v, sizeof v);
        m.nv = 10;
        m.nsizes = n->k->nparams;
        memcpy(m.sizes, n->k->sizes, n->k->nparams * sizeof *n->k->sizes);
        m.blob = n->args;
        for (uint32_t i = 0; i < n->k->nparams; ++i) m.blob_len += n->k->sizes[i];
        vcuda_client_status st = vcuda_client_call(current_device, &m, &r, 0, why);
        if (st == VCUDA_CLIENT_REMOTE_ERROR)
            fprintf(stderr, "vcuda: cudaGraphExecKernelNodeSetParams: %.*s\n", (int)r.str_len, (const char *)r.str);
        e = result(st, &r, "cudaGraphExecKernelNodeSetParams", why);
    }
    current_device = saved;
    return e;
}

/* A kernel node of an exec takes new parameters (the next launch uses them); the
 * node is named by the graph's node it was instantiated from.  Where the server holds
 * the exec, its node is updated there too. */
EXPORT cudaError_t cudaGraphExecKernelNodeSetParams(cudaGraphExec_t ex, cudaGraphNode_t node,
                                                    const struct cudaKernelNodeParams *p)
{
    graph *g = as_graph(ex, EXEC_MAGIC);
    graph_node *x = NULL, fresh;
    if (!g || !node || !p) return record(cudaErrorInvalidValue);
    if (p->extra) return unsupported("cudaGraphExecKernelNodeSetParams", "arguments through 'extra'");
    pthread_mutex_lock(&graph_mu);
    for (size_t i = 0; i < g->nnodes && !x; ++i)
        if (g->nodes[i]->origin == (const graph_node *)node) x = g->nodes[i];
    memset(&fresh, 0, sizeof fresh);
    cudaError_t e = !x || x->kind != NODE_KERNEL ? cudaErrorInvalidValue
                    : kernel_node(&fresh, find_kernel(p->func), p->gridDim, p->blockDim, p->sharedMemBytes, p->kernelParams);
    if (!e) {
        fresh.index = x->index, fresh.tidx = x->tidx;
        e = fresh.shmem > UINT32_MAX ? cudaErrorInvalidValue
                                     : host_arg("cudaGraphExecKernelNodeSetParams", fresh.args, fresh.k->nparams, fresh.k->sizes);
        if (!e && g->exec && !g->stale) e = server_kernel_set(g, &fresh); /* (stale: instantiated anew at launch) */
        if (e) free(fresh.args);
    }
    if (!e) {
        free(x->args);
        x->k = fresh.k, x->grid = fresh.grid, x->block = fresh.block, x->shmem = fresh.shmem, x->args = fresh.args;
    }
    pthread_mutex_unlock(&graph_mu);
    return e ? record(e) : cudaSuccess;
}

/* The whole exec takes the parameters of gr's nodes, where gr has the exec's topology:
 * as many nodes, in the same (dependency) order, each of the same kind with the same
 * dependencies; else nothing changes and info says why, as the driver does. */
EXPORT cudaError_t cudaGraphExecUpdate(cudaGraphExec_t ex, cudaGraph_t gr, cudaGraphExecUpdateResultInfo *info)
{
    graph *g = as_graph(ex, EXEC_MAGIC), *src = as_graph(gr, GRAPH_MAGIC), *c = NULL;
    if (info) memset(info, 0, sizeof *info);
    if (!g || !src) return record(cudaErrorInvalidValue);
    if (g->twin_exec || src->twin || src->body)
        return unsupported("cudaGraphExecUpdate", "graphs with conditional or memory nodes");
    cudaError_t e = copy_graph_locked(src, EXEC_MAGIC, 1, &c);
    if (e) return e;
    enum cudaGraphExecUpdateResult why = cudaGraphExecUpdateSuccess;
    cudaGraphNode_t bad = NULL;
    if (c->nnodes != g->nnodes) why = cudaGraphExecUpdateErrorTopologyChanged;
    for (size_t i = 0; i < c->nnodes && !why; ++i) {
        const graph_node *a = c->nodes[i], *b = g->nodes[i];
        bad = (cudaGraphNode_t)a->origin;
        if (a->kind != b->kind) why = cudaGraphExecUpdateErrorNodeTypeChanged;
        else if (a->ndeps != b->ndeps) why = cudaGraphExecUpdateErrorTopologyChanged;
        for (size_t d = 0; d < a->ndeps && !why; ++d)
            if (a->deps[d]->index != b->deps[d]->index) why = cudaGraphExecUpdateErrorTopologyChanged;
    }
    if (!why && (e = graph_host_args(c, "cudaGraphExecUpdate"))) {
        destroy_graph(c, EXEC_MAGIC);
        return e;
    }
    if (why) {
        if (info) info->result = why, info->errorNode = bad, info->errorFromNode = NULL;
        destroy_graph(c, EXEC_MAGIC);
        return record(cudaErrorGraphExecUpdateFailure);
    }
    /* the exec takes c's nodes, which keep the names the old ones had (the nodes of the
     * graph it was instantiated from, as with the driver); c goes with the old ones */
    pthread_mutex_lock(&graph_mu);
    graph_node **nodes = g->nodes;
    size_t cap = g->cap;
    g->nodes = c->nodes, g->cap = c->cap, c->nodes = nodes, c->cap = cap;
    for (size_t i = 0; i < g->nnodes; ++i)
        g->nodes[i]->owner = g, g->nodes[i]->origin = c->nodes[i]->origin, c->nodes[i]->owner = c;
    g->stale = 1;
    free_graph(c);
    pthread_mutex_unlock(&graph_mu);
    if (info) info->result = cudaGraphExecUpdateSuccess;
    return cudaSuccess;
}

EXPORT cudaError_t cudaGraphUpload(cudaGraphExec_t ex, cudaStream_t s)
{
    (void)s; /* nothing to upload: nodes are sent when launched */
    return as_graph(ex, EXEC_MAGIC) ? cudaSuccess : record(cudaErrorInvalidValue);
}

EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t ex, cudaStream_t s)
{
    graph *g = as_graph(ex, EXEC_MAGIC);
    cudaError_t e = cudaSuccess;
    void *argv[VCUDA_MAX_PARAMS];
    if (!g) return record(cudaErrorInvalidValue);
    if (capturing(s)) return unsupported("cudaGraphLaunch", "a graph launched into a capturing stream (child graphs)");
    if (g->twin_exec && g->exec_device != stream_device(s))
        return unsupported("cudaGraphLaunch", "a graph with conditional or memory nodes on a stream of another device");
    if (g->stale) { /* (once, whichever thread launches it first) */
        pthread_mutex_lock(&graph_mu);
        if (g->stale) e = reinstantiate(g);
        pthread_mutex_unlock(&graph_mu);
        if (e) return e;
    }
    if (g->exec && g->exec_device == stream_device(s)) {
        /* one frame to the server holding it (the stream's); like a kernel launch,
         * unanswered unless VCUDA_LAUNCH=sync (a failure there is returned by that
         * device's next call) */
        char why[VCUDA_WHY_LEN];
        vcuda_msg m, r;
        uint64_t sh;
        int saved = current_device;
        current_device = g->exec_device;
        if (!(e = stream_handle(s, &sh))) {
            memset(&m, 0, sizeof m);
            m.hdr.opcode = VCUDA_OP_GRAPH_LAUNCH;
            m.v[0] = g->exec, m.v[1] = sh, m.nv = 2;
            r.hdr.flags = 0; /* (no reply when posted) */
            e = result(async_launch ? vcuda_client_post(current_device, &m, why)
                                    : vcuda_client_call(current_device, &m, &r, 0, why), &r, "cudaGraphLaunch", why);
        }
        current_device = saved;
        return e;
    }
    for (size_t i = 0; i < g->nnodes && !e; ++i) {
        graph_node *n = g->nodes[i];
        switch (n->kind) {
        case NODE_EMPTY: break;
        case NODE_KERNEL:
            for (uint32_t p = 0, at = 0; p < n->k->nparams; at += n->k->sizes[p++]) argv[p] = n->args + at;
            e = launch(n->k, n->grid, n->block, argv, n->shmem, s, "cudaGraphLaunch");
            break;
        case NODE_COPY: e = memcpy_remote(n->dst, n->src, n->n, n->copy_kind, s, "cudaGraphLaunch"); break;
        case NODE_COPY3D: e = copy_3d(&n->p3, s, "cudaGraphLaunch"); break;
        case NODE_SET: e = set_2d(n->dst, n->pitch, n->value, n->width, n->height, s); break;
        case NODE_HOST: e = cudaLaunchHostFunc(s, n->fn, n->data); break;
        case NODE_COND:
        case NODE_ALLOC:
        case NODE_FREE: e = record(cudaErrorInvalidValue); break; /* (only in a twin's exec: never replayed) */
        }
    }
    return e;
}

EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    cudaGraph_t gr;
    (void)mode; /* the modes police other threads' unsafe calls; nothing here is unsafe */
    if (legacy_stream(s)) return record(cudaErrorStreamCaptureUnsupported);
    cudaError_t e = own_stream(&s);
    if (e) return e;
    remote_object *o = (remote_object *)s;
    if (o->magic != STREAM_MAGIC) return record(cudaErrorInvalidResourceHandle);
    if (o->capture) return record(cudaErrorIllegalState);
    if ((e = cudaGraphCreate(&gr, 0))) return e;
    o->capture = (graph *)gr;
    o->capture->origin = s;
    o->capture->capture_id = atomic_fetch_add(&capture_ids, 1) + 1;
    return cudaSuccess;
}

/* Capture into a graph the program made (a conditional node's body, say), after deps. */
EXPORT cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t s, cudaGraph_t gr, const cudaGraphNode_t *deps,
                                                 const cudaGraphEdgeData *edges, size_t ndeps, enum cudaStreamCaptureMode mode)
{
    graph *g = as_graph(gr, GRAPH_MAGIC);
    (void)mode, (void)edges; /* (see cudaStreamBeginCapture; edge data only tunes overlap) */
    if (legacy_stream(s)) return record(cudaErrorStreamCaptureUnsupported);
    cudaError_t e = own_stream(&s);
    if (e) return e;
    remote_object *o = (remote_object *)s;
    if (o->magic != STREAM_MAGIC) return record(cudaErrorInvalidResourceHandle);
    if (!g || (ndeps && !deps)) return record(cudaErrorInvalidValue);
    if (o->capture || g->origin) return record(cudaErrorIllegalState);
    pthread_mutex_lock(&graph_mu);
    for (size_t i = 0; i < ndeps && !e; ++i)
        if (!deps[i] || ((graph_node *)deps[i])->owner != g) e = cudaErrorInvalidValue;
    if (!e && set_front(g, (graph_node *const *)deps, ndeps, 0)) e = cudaErrorMemoryAllocation;
    if (!e) {
        g->origin = s, g->captured_to = 1, g->capture_id = atomic_fetch_add(&capture_ids, 1) + 1;
        o->capture = g;
    }
    pthread_mutex_unlock(&graph_mu);
    return e ? record(e) : cudaSuccess;
}

EXPORT cudaError_t cudaStreamGetCaptureInfo(cudaStream_t s, enum cudaStreamCaptureStatus *status, unsigned long long *id,
                                            cudaGraph_t *graph_out, const cudaGraphNode_t **deps,
                                            const cudaGraphEdgeData **edges, size_t *ndeps)
{
    graph *g = capturing(s);
    if (!status) return record(cudaErrorInvalidValue);
    *status = g ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    if (!g) return cudaSuccess;
    pthread_mutex_lock(&graph_mu);
    if (id) *id = g->capture_id;
    if (graph_out) *graph_out = (cudaGraph_t)g;
    if (deps) *deps = (const cudaGraphNode_t *)g->front;
    if (edges) *edges = g->front_edges;
    if (ndeps) *ndeps = g->nfront;
    pthread_mutex_unlock(&graph_mu);
    return cudaSuccess;
}

/* The nodes the capture's next node waits for: these (cudaStreamSetCaptureDependencies)
 * or these too (cudaStreamAddCaptureDependencies). */
EXPORT cudaError_t cudaStreamUpdateCaptureDependencies(cudaStream_t s, cudaGraphNode_t *nodes, const cudaGraphEdgeData *edges,
                                                       size_t n, unsigned flags)
{
    graph *g = capturing(s);
    cudaError_t e = cudaSuccess;
    (void)edges;
    if (!g) return record(cudaErrorIllegalState);
    if ((n && !nodes) || flags > cudaStreamSetCaptureDependencies) return record(cudaErrorInvalidValue);
    pthread_mutex_lock(&graph_mu);
    for (size_t i = 0; i < n && !e; ++i)
        if (!nodes[i] || ((graph_node *)nodes[i])->owner != g) e = cudaErrorInvalidValue;
    if (!e && set_front(g, (graph_node *const *)nodes, n, flags == cudaStreamAddCaptureDependencies))
        e = cudaErrorMemoryAllocation;
    pthread_mutex_unlock(&graph_mu);
    return e ? record(e) : cudaSuccess;
}

EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *out)
{
    remote_object *o = (remote_object *)existing_stream(s);
    graph *g = capturing(s);
    if (!g) return record(out ? cudaErrorIllegalState : cudaErrorInvalidValue);
    if (!out && !g->captured_to) return record(cudaErrorInvalidValue);
    if (g->origin != (cudaStream_t)o) return record(cudaErrorStreamCaptureUnmatched);
    o->capture = NULL;
    /* the streams that joined leave with it */
    pthread_mutex_lock(&graph_mu);
    for (size_t i = 0; i < g->njoined; ++i)
        if (g->joined[i]->magic == STREAM_MAGIC && g->joined[i]->capture == g) g->joined[i]->capture = NULL;
    g->nfront = 0, g->origin = NULL, g->njoined = 0, g->captured_to = 0;
    pthread_mutex_unlock(&graph_mu);
    if (out) *out = (cudaGraph_t)g;
    return cudaSuccess;
}

EXPORT cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    static _Thread_local enum cudaStreamCaptureMode current = cudaStreamCaptureModeGlobal;
    if (!mode) return record(cudaErrorInvalidValue);
    enum cudaStreamCaptureMode m = *mode;
    *mode = current, current = m;
    return cudaSuccess;
}

/* ---- CUDA arrays, texture and surface objects ------------------------------------- */
/* A cudaArray_t points at one of these: the server's handle (an id in this client's
 * table there), the device it lives on, and what it was made with (for cudaArrayGetInfo
 * and for the element size that array offsets and extents are counted in).  Host data
 * reaches an array through a device buffer of this client's, with the ordinary chunked
 * copies (memcpy_remote), then one MEMCPY_3D on the server: the array logic there is
 * only device-to-device. */
#define ARRAY_MAGIC 0x41525259u
typedef struct {
    uint32_t magic;
    int device;
    uint64_t handle;
    struct cudaChannelFormatDesc desc;
    struct cudaExtent ext;
    unsigned flags, elem, format, channels;
} remote_array;

static remote_array *as_array(const void *a)
{
    remote_array *r = (remote_array *)a;
    return r && r->magic == ARRAY_MAGIC && r->device == current_device ? r : NULL;
}

/* cudaChannelFormatDesc -> CUarray_format and channel count: 1, 2 or 4 channels of one
 * width, signed, unsigned or float (the formats the protocol takes). */
static cudaError_t channel_format(const struct cudaChannelFormatDesc *d, unsigned *format, unsigned *channels)
{
    int bits[4] = {d->x, d->y, d->z, d->w}, n = 0;
    while (n < 4 && bits[n]) ++n;
    for (int i = n; i < 4; ++i)
        if (bits[i]) return record(cudaErrorInvalidChannelDescriptor);
    for (int i = 1; i < n; ++i)
        if (bits[i] != bits[0]) return record(cudaErrorInvalidChannelDescriptor);
    if (n == 0 || n == 3) return record(cudaErrorInvalidChannelDescriptor);
    unsigned f = 0, b = (unsigned)bits[0];
    if (d->f == cudaChannelFormatKindUnsigned) f = b == 8 ? 0x01 : b == 16 ? 0x02 : b == 32 ? 0x03 : 0;
    else if (d->f == cudaChannelFormatKindSigned) f = b == 8 ? 0x08 : b == 16 ? 0x09 : b == 32 ? 0x0a : 0;
    else if (d->f == cudaChannelFormatKindFloat) f = b == 16 ? 0x10 : b == 32 ? 0x20 : 0;
    else return unsupported("cudaChannelFormatDesc", "only signed, unsigned and float channels are remoted");
    if (!f) return record(cudaErrorInvalidChannelDescriptor);
    *format = f, *channels = (unsigned)n;
    return cudaSuccess;
}

static cudaError_t array_create(cudaArray_t *out, const struct cudaChannelFormatDesc *desc, struct cudaExtent ext,
                                unsigned flags, const char *api)
{
    vcuda_msg r;
    unsigned format, channels;
    cudaError_t e;
    if (!out || !desc || !ext.width) return record(cudaErrorInvalidValue);
    if (flags & ~0xfu) return unsupported(api, "sparse, deferred-mapping and color-attachment arrays are not remoted");
    if ((e = channel_format(desc, &format, &channels))) return e;
    uint64_t v[] = {format, channels, ext.width, ext.height, ext.depth, flags};
    if ((e = call(VCUDA_OP_ARRAY_CREATE, v, 6, &r, api))) return e;
    remote_array *a = malloc(sizeof *a);
    if (!a) {
        call(VCUDA_OP_ARRAY_DESTROY, &r.v[0], 1, &r, api);
        return record(cudaErrorMemoryAllocation);
    }
    *a = (remote_array){ARRAY_MAGIC, current_device, r.v[0], *desc, ext, flags, (unsigned)(desc->x + desc->y + desc->z + desc->w) / 8,
                        format, channels};
    *out = (cudaArray_t)a;
    return cudaSuccess;
}

EXPORT cudaError_t cudaMallocArray(cudaArray_t *a, const struct cudaChannelFormatDesc *desc, size_t width, size_t height,
                                   unsigned flags)
{
    struct cudaExtent ext = {width, height, 0};
    return array_create(a, desc, ext, flags, "cudaMallocArray");
}

EXPORT cudaError_t cudaMalloc3DArray(cudaArray_t *a, const struct cudaChannelFormatDesc *desc, struct cudaExtent ext,
                                     unsigned flags)
{
    return array_create(a, desc, ext, flags, "cudaMalloc3DArray");
}

EXPORT cudaError_t cudaFreeArray(cudaArray_t arr)
{
    vcuda_msg r;
    if (!arr) return cudaSuccess;
    remote_array *a = (remote_array *)arr;
    if (a->magic != ARRAY_MAGIC) return record(cudaErrorInvalidResourceHandle);
    int saved = current_device;
    current_device = a->device; /* freed by the server that made it, whichever is current */
    cudaError_t e = call(VCUDA_OP_ARRAY_DESTROY, &a->handle, 1, &r, "cudaFreeArray");
    current_device = saved;
    if (!e) a->magic = 0, free(a);
    return e;
}

EXPORT cudaError_t cudaArrayGetInfo(struct cudaChannelFormatDesc *desc, struct cudaExtent *ext, unsigned *flags,
                                    cudaArray_t arr)
{
    const remote_array *a = as_array(arr);
    if (!a) return record(cudaErrorInvalidResourceHandle);
    if (desc) *desc = a->desc;
    if (ext) *ext = a->ext;
    if (flags) *flags = a->flags;
    return cudaSuccess;
}

EXPORT cudaError_t cudaGetChannelDesc(struct cudaChannelFormatDesc *desc, cudaArray_const_t arr)
{
    const remote_array *a = as_array(arr);
    if (!desc) return record(cudaErrorInvalidValue);
    if (!a) return record(cudaErrorInvalidResourceHandle);
    *desc = a->desc;
    return cudaSuccess;
}

/* One side of an array copy: an array (x in bytes) or memory at ptr with its pitch and
 * rows per slice (host or device: which, kind says). */
typedef struct {
    remote_array *array;
    uint8_t *ptr;
    size_t pitch, rows, x, y, z;
} copy_end;

static void side_words(const copy_end *c, uint64_t *w)
{
    w[0] = c->array ? VCUDA_MEM_ARRAY : VCUDA_MEM_DEVICE, w[1] = c->array ? c->array->handle : (uint64_t)(uintptr_t)c->ptr;
    w[2] = c->x, w[3] = c->y, w[4] = c->z, w[5] = c->array ? 0 : c->pitch, w[6] = c->array ? 0 : c->rows;
}

/* Device-to-device (an array on at least one side) on the server. */
static cudaError_t copy_on_server(const copy_end *dst, const copy_end *src, size_t width, size_t height, size_t depth,
                                  cudaStream_t s, const char *api)
{
    char why[VCUDA_WHY_LEN];
    uint8_t desc[8 * VCUDA_COPY_WORDS];
    uint64_t w[VCUDA_COPY_WORDS];
    vcuda_msg m, r;
    size_t len;
    uint64_t sh;
    cudaError_t e;
    if ((e = stream_handle(s, &sh))) return e;
    side_words(src, w + VCUDA_C_SRC_TYPE), side_words(dst, w + VCUDA_C_DST_TYPE);
    w[VCUDA_C_WIDTH] = width, w[VCUDA_C_HEIGHT] = height, w[VCUDA_C_DEPTH] = depth;
    if (vcuda_desc_encode(VCUDA_DESC_COPY, w, desc, sizeof desc, &len, why)) {
        fprintf(stderr, "vcuda: %s: %s\n", api, why);
        return record(cudaErrorInvalidValue);
    }
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_MEMCPY_3D;
    m.v[0] = sh, m.nv = 1, m.blob = desc, m.blob_len = (uint32_t)len;
    return result(vcuda_client_call(current_device, &m, &r, 0, why), &r, api, why);
}

/* Host data for a copy done on the server goes through one device buffer per device,
 * kept and reused (a free would wait for the whole GPU on the server), grown when a
 * copy needs more; an event recorded after the copy that reads it orders its reuse, so
 * a copy waits for that one copy only.  staging_mu held while it is in use. */
typedef struct {
    uint8_t *buf;
    size_t size;
    cudaEvent_t done;
    int pending;
} staging_buffer;
static staging_buffer staging[VCUDA_MAX_DEVICES];
#define STAGING_KEEP ((size_t)64 << 20) /* a larger buffer is freed after its copy */
static pthread_mutex_t staging_mu = PTHREAD_MUTEX_INITIALIZER;

static cudaError_t staging_take(staging_buffer *sb, size_t size)
{
    cudaError_t e;
    if (sb->pending && (e = cudaEventSynchronize(sb->done))) return e;
    sb->pending = 0;
    if (!sb->done && (e = cudaEventCreateWithFlags(&sb->done, cudaEventDisableTiming))) return e;
    if (size <= sb->size) return cudaSuccess;
    if (sb->buf) cudaFree(sb->buf);
    sb->buf = NULL, sb->size = 0;
    if ((e = cudaMalloc((void **)&sb->buf, size))) return e;
    sb->size = size;
    return cudaSuccess;
}

/* After cudaDeviceReset: the server let the buffer and its event go with the session. */
static void staging_forget(int device)
{
    pthread_mutex_lock(&staging_mu);
    free(staging[device].done); /* (the local half of a remote event) */
    memset(&staging[device], 0, sizeof staging[device]);
    pthread_mutex_unlock(&staging_mu);
}

/* Any copy with an array on one side at least (width in bytes, x offsets in bytes), or
 * strided rows into device memory.  A host side goes through the staging buffer. */
static cudaError_t array_copy(copy_end dst, copy_end src, size_t width, size_t height, size_t depth,
                              enum cudaMemcpyKind kind, cudaStream_t s, const char *api)
{
    cudaError_t e = ready();
    if (e) return record(e);
    if (capturing(s)) return unsupported(api, "copies to and from CUDA arrays are not captured into graphs");
    if ((dst.array && dst.array->magic != ARRAY_MAGIC) || (src.array && src.array->magic != ARRAY_MAGIC))
        return record(cudaErrorInvalidResourceHandle);
    if (!width || !height || !depth) return cudaSuccess;
    if (kind == cudaMemcpyDefault)
        kind = (dst.array || is_device_pointer(dst.ptr)) ? (src.array || is_device_pointer(src.ptr)) ? cudaMemcpyDeviceToDevice
                                                                                                    : cudaMemcpyHostToDevice
                                                         : cudaMemcpyDeviceToHost;
    int host_src = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyHostToHost;
    int host_dst = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToHost;
    if ((host_src && src.array) || (host_dst && dst.array) || (host_src && host_dst)) return record(cudaErrorInvalidMemcpyDirection);
    if (!host_src && !host_dst) return copy_on_server(&dst, &src, width, height, depth, s, api);
    copy_end *host = host_src ? &src : &dst, staged = {NULL, NULL, width, height, 0, 0, 0};
    if (height > SIZE_MAX / width || depth > SIZE_MAX / (width * height) || width > host->pitch ||
        (depth > 1 && host->rows < host->y + height))
        return record(cudaErrorInvalidValue); /* (slices of the host box would overlap) */
    size_t total = width * height * depth;
    uint8_t *packed = malloc(total); /* the host box's rows back to back: one transfer */
    if (!packed) return record(cudaErrorMemoryAllocation);
    staging_buffer *sb = &staging[current_device];
    pthread_mutex_lock(&staging_mu);
    if ((e = staging_take(sb, total))) return pthread_mutex_unlock(&staging_mu), free(packed), e;
    staged.ptr = sb->buf;
    for (size_t z = 0; z < depth; ++z)
        for (size_t y = 0; y < height; ++y) {
            uint8_t *row = host->ptr + ((host->z + z) * host->rows + host->y + y) * host->pitch + host->x;
            if (host_src) memcpy(packed + (z * height + y) * width, row, width);
        }
    if (host_src) e = memcpy_remote(staged.ptr, packed, total, cudaMemcpyHostToDevice, s, api);
    if (!e) e = host_src ? copy_on_server(&dst, &staged, width, height, depth, s, api)
                         : copy_on_server(&staged, &src, width, height, depth, s, api);
    if (!e && host_dst && !(e = memcpy_remote(packed, staged.ptr, total, cudaMemcpyDeviceToHost, s, api)))
        for (size_t z = 0; z < depth; ++z)
            for (size_t y = 0; y < height; ++y)
                memcpy(host->ptr + ((host->z + z) * host->rows + host->y + y) * host->pitch + host->x,
                       packed + (z * height + y) * width, width);
    /* host data in the buffer: the next user waits until this copy has read it */
    if (!e && host_src && !(e = cudaEventRecord(sb->done, s))) sb->pending = 1;
    if (!e && host_src && host_sync) e = cudaStreamSynchronize(s); /* (see "host-synchronous calls") */
    if (sb->size > STAGING_KEEP) { /* not kept: the free waits for the copy (see above) */
        cudaFree(sb->buf);
        sb->buf = NULL, sb->size = 0, sb->pending = 0;
    }
    pthread_mutex_unlock(&staging_mu);
    free(packed);
    return e;
}

static copy_end at_memory(const void *p, size_t pitch);
static cudaError_t strided_copy(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                                enum cudaMemcpyKind kind, cudaStream_t s, const char *api)
{
    return array_copy(at_memory(dst, dpitch), at_memory(src, spitch), width, height, 1, kind, s, api);
}

static copy_end at_array(const void *a, size_t x, size_t y)
{
    copy_end c = {(remote_array *)a, NULL, 0, 0, x, y, 0};
    return c;
}
static copy_end at_memory(const void *p, size_t pitch)
{
    copy_end c = {NULL, (uint8_t *)p, pitch, 0, 0, 0, 0};
    return c;
}
#define ARRAY_ARG(a) \
    do { if (!as_array(a)) return record(cudaErrorInvalidResourceHandle); } while (0)

EXPORT cudaError_t cudaMemcpy2DToArrayAsync(cudaArray_t dst, size_t wo, size_t ho, const void *src, size_t spitch, size_t width,
                                            size_t height, enum cudaMemcpyKind kind, cudaStream_t s)
{
    ARRAY_ARG(dst);
    if (width > spitch && height > 1) return record(cudaErrorInvalidPitchValue);
    return array_copy(at_array(dst, wo, ho), at_memory(src, spitch), width, height, 1, kind, s, "cudaMemcpy2DToArray");
}
EXPORT cudaError_t cudaMemcpy2DToArray(cudaArray_t dst, size_t wo, size_t ho, const void *src, size_t spitch, size_t width,
                                       size_t height, enum cudaMemcpyKind kind)
{
    return SYNCHRONOUS("cudaMemcpy2DToArray", cudaMemcpy2DToArrayAsync(dst, wo, ho, src, spitch, width, height, kind, NULL));
}
EXPORT cudaError_t cudaMemcpy2DFromArrayAsync(void *dst, size_t dpitch, cudaArray_const_t src, size_t wo, size_t ho,
                                              size_t width, size_t height, enum cudaMemcpyKind kind, cudaStream_t s)
{
    ARRAY_ARG(src);
    if (width > dpitch && height > 1) return record(cudaErrorInvalidPitchValue);
    return array_copy(at_memory(dst, dpitch), at_array(src, wo, ho), width, height, 1, kind, s, "cudaMemcpy2DFromArray");
}
EXPORT cudaError_t cudaMemcpy2DFromArray(void *dst, size_t dpitch, cudaArray_const_t src, size_t wo, size_t ho, size_t width,
                                         size_t height, enum cudaMemcpyKind kind)
{
    return SYNCHRONOUS("cudaMemcpy2DFromArray", cudaMemcpy2DFromArrayAsync(dst, dpitch, src, wo, ho, width, height, kind, NULL));
}
EXPORT cudaError_t cudaMemcpy2DArrayToArray(cudaArray_t dst, size_t wod, size_t hod, cudaArray_const_t src, size_t wos,
                                            size_t hos, size_t width, size_t height, enum cudaMemcpyKind kind)
{
    ARRAY_ARG(dst);
    ARRAY_ARG(src);
    if (kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault) return record(cudaErrorInvalidMemcpyDirection);
    return SYNCHRONOUS("cudaMemcpy2DArrayToArray", array_copy(at_array(dst, wod, hod), at_array(src, wos, hos), width, height, 1,
                                                              kind, NULL, "cudaMemcpy2DArrayToArray"));
}

/* The deprecated linear forms: count bytes from (x, y) on, row after row of the array. */
static cudaError_t linear_array_copy(remote_array *a, size_t x, size_t y, void *mem, size_t count, int to_array,
                                     enum cudaMemcpyKind kind, cudaStream_t s, const char *api)
{
    cudaError_t e = cudaSuccess;
    if (!a) return record(cudaErrorInvalidResourceHandle);
    size_t row = a->ext.width * a->elem;
    uint8_t *p = mem;
    while (count && !e) {
        if (x >= row) return record(cudaErrorInvalidValue);
        size_t n = row - x < count ? row - x : count, rows = 1;
        if (x == 0 && count >= row) rows = count / row, n = row; /* whole rows at once */
        copy_end arr = at_array(a, x, y), m = at_memory(p, row);
        e = to_array ? array_copy(arr, m, n, rows, 1, kind, s, api) : array_copy(m, arr, n, rows, 1, kind, s, api);
        p += n * rows, count -= n * rows, y += rows, x = 0;
    }
    return e;
}
/* (deprecated in the runtime, exported all the same; one calls the other here) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
EXPORT cudaError_t cudaMemcpyToArrayAsync(cudaArray_t dst, size_t wo, size_t ho, const void *src, size_t count,
                                          enum cudaMemcpyKind kind, cudaStream_t s)
{
    return linear_array_copy(as_array(dst), wo, ho, (void *)src, count, 1, kind, s, "cudaMemcpyToArray");
}
EXPORT cudaError_t cudaMemcpyToArray(cudaArray_t dst, size_t wo, size_t ho, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    return SYNCHRONOUS("cudaMemcpyToArray", cudaMemcpyToArrayAsync(dst, wo, ho, src, count, kind, NULL));
}
EXPORT cudaError_t cudaMemcpyFromArrayAsync(void *dst, cudaArray_const_t src, size_t wo, size_t ho, size_t count,
                                            enum cudaMemcpyKind kind, cudaStream_t s)
{
    return linear_array_copy(as_array(src), wo, ho, dst, count, 0, kind, s, "cudaMemcpyFromArray");
}
EXPORT cudaError_t cudaMemcpyFromArray(void *dst, cudaArray_const_t src, size_t wo, size_t ho, size_t count, enum cudaMemcpyKind kind)
{
    return SYNCHRONOUS("cudaMemcpyFromArray", cudaMemcpyFromArrayAsync(dst, src, wo, ho, count, kind, NULL));
}
#pragma GCC diagnostic pop

/* cudaMemcpy3D with an array on a side: positions and the extent count that array's
 * elements (bytes on a memory side when the other is an array: its element size). */
static cudaError_t copy_3d_array(const struct cudaMemcpy3DParms *p, cudaStream_t s, const char *api)
{
    remote_array *sa = p->srcArray ? as_array(p->srcArray) : NULL, *da = p->dstArray ? as_array(p->dstArray) : NULL;
    if ((p->srcArray && !sa) || (p->dstArray && !da)) return record(cudaErrorInvalidResourceHandle);
    size_t elem = sa ? sa->elem : da->elem;
    copy_end src = {sa, (uint8_t *)p->srcPtr.ptr, p->srcPtr.pitch, p->srcPtr.ysize, p->srcPos.x * (sa ? sa->elem : 1), p->srcPos.y,
                    p->srcPos.z};
    copy_end dst = {da, (uint8_t *)p->dstPtr.ptr, p->dstPtr.pitch, p->dstPtr.ysize, p->dstPos.x * (da ? da->elem : 1), p->dstPos.y,
                    p->dstPos.z};
    if (p->extent.width > SIZE_MAX / elem) return record(cudaErrorInvalidValue);
    return array_copy(dst, src, p->extent.width * elem, p->extent.height ? p->extent.height : 1,
                      p->extent.depth ? p->extent.depth : 1, p->kind, s, api);
}

/* ---- texture and surface objects ---- */
/* The object value is the server driver's own (kernels take it by value); kept here with
 * the descriptors it was made from, for the Get*Desc calls and to know its server. */
typedef struct {
    unsigned long long obj;
    int device, surface;
    struct cudaResourceDesc res;
    struct cudaTextureDesc tex;
    struct cudaResourceViewDesc view;
    int has_view;
} tex_record;
static tex_record *tex_records;
static size_t ntex, cap_tex;
static pthread_mutex_t tex_mu = PTHREAD_MUTEX_INITIALIZER;

static tex_record *find_tex(unsigned long long obj, int surface)
{
    for (size_t i = 0; i < ntex; ++i)
        if (tex_records[i].obj == obj && tex_records[i].surface == surface) return &tex_records[i];
    return NULL;
}

static uint64_t bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static cudaError_t remember_tex(unsigned long long obj, const tex_record *t)
{
    pthread_mutex_lock(&tex_mu);
    int ok = !grow(&tex_records, &cap_tex, ntex, sizeof *tex_records);
    if (ok) tex_records[ntex] = *t, tex_records[ntex++].obj = obj;
    pthread_mutex_unlock(&tex_mu);
    return ok ? cudaSuccess : record(cudaErrorMemoryAllocation);
}

/* The runtime's descriptors -> the driver's values, in the TEX_CREATE words. */
static cudaError_t texture_words(const struct cudaResourceDesc *res, const struct cudaTextureDesc *tex,
                                 const struct cudaResourceViewDesc *view, uint64_t *w)
{
    unsigned format = 0, channels = 0;
    cudaError_t e;
    const remote_array *a = NULL;
    memset(w, 0, VCUDA_TEX_WORDS * sizeof *w);
    switch (res->resType) {
    case cudaResourceTypeArray:
        if (!(a = as_array(res->res.array.array))) return record(cudaErrorInvalidResourceHandle);
        w[VCUDA_T_RES_TYPE] = VCUDA_RES_ARRAY, w[VCUDA_T_RES] = a->handle;
        format = a->format, channels = a->channels;
        break;
    case cudaResourceTypeLinear:
        if ((e = channel_format(&res->res.linear.desc, &format, &channels))) return e;
        w[VCUDA_T_RES_TYPE] = VCUDA_RES_LINEAR, w[VCUDA_T_RES] = (uint64_t)(uintptr_t)res->res.linear.devPtr;
        w[VCUDA_T_WIDTH] = res->res.linear.sizeInBytes;
        break;
    case cudaResourceTypePitch2D:
        if ((e = channel_format(&res->res.pitch2D.desc, &format, &channels))) return e;
        w[VCUDA_T_RES_TYPE] = VCUDA_RES_PITCH2D, w[VCUDA_T_RES] = (uint64_t)(uintptr_t)res->res.pitch2D.devPtr;
        w[VCUDA_T_WIDTH] = res->res.pitch2D.width, w[VCUDA_T_HEIGHT] = res->res.pitch2D.height;
        w[VCUDA_T_PITCH] = res->res.pitch2D.pitchInBytes;
        break;
    default: return unsupported("cudaCreateTextureObject", "mipmapped arrays are not remoted");
    }
    w[VCUDA_T_FORMAT] = format, w[VCUDA_T_CHANNELS] = channels;
    if (!tex) return cudaSuccess;
    for (int i = 0; i < 3; ++i) w[VCUDA_T_ADDRESS0 + i] = (uint64_t)tex->addressMode[i];
    w[VCUDA_T_FILTER] = (uint64_t)tex->filterMode;
    /* CU_TRSF_READ_AS_INTEGER for integer data read as such (floats are read as they are) */
    w[VCUDA_T_FLAGS] = (tex->readMode == cudaReadModeElementType && format != 0x10 && format != 0x20 ? 0x01 : 0) |
                       (tex->normalizedCoords ? 0x02 : 0) | (tex->sRGB ? 0x10 : 0) |
                       (tex->disableTrilinearOptimization ? 0x20 : 0) | (tex->seamlessCubemap ? 0x40 : 0);
    w[VCUDA_T_MAX_ANISOTROPY] = tex->maxAnisotropy, w[VCUDA_T_MIP_FILTER] = (uint64_t)tex->mipmapFilterMode;
    w[VCUDA_T_MIP_BIAS] = bits(tex->mipmapLevelBias), w[VCUDA_T_MIP_MIN] = bits(tex->minMipmapLevelClamp);
    w[VCUDA_T_MIP_MAX] = bits(tex->maxMipmapLevelClamp);
    for (int i = 0; i < 4; ++i) w[VCUDA_T_BORDER0 + i] = bits(tex->borderColor[i]);
    if (view) {
        w[VCUDA_T_VIEW] = 1, w[VCUDA_T_VIEW_FORMAT] = (uint64_t)view->format; /* cudaResViewFormat = CUresourceViewFormat */
        w[VCUDA_T_VIEW_WIDTH] = view->width, w[VCUDA_T_VIEW_HEIGHT] = view->height, w[VCUDA_T_VIEW_DEPTH] = view->depth;
        w[VCUDA_T_FIRST_MIP] = view->firstMipmapLevel, w[VCUDA_T_LAST_MIP] = view->lastMipmapLevel;
        w[VCUDA_T_FIRST_LAYER] = view->firstLayer, w[VCUDA_T_LAST_LAYER] = view->lastLayer;
    }
    return cudaSuccess;
}

EXPORT cudaError_t cudaCreateTextureObject(cudaTextureObject_t *out, const struct cudaResourceDesc *res,
                                           const struct cudaTextureDesc *tex, const struct cudaResourceViewDesc *view)
{
    char why[VCUDA_WHY_LEN];
    uint64_t w[VCUDA_TEX_WORDS];
    uint8_t desc[8 * VCUDA_TEX_WORDS];
    vcuda_msg m, r;
    size_t len;
    cudaError_t e = ready();
    if (e) return record(e);
    if (!out || !res || !tex) return record(cudaErrorInvalidValue);
    if ((e = texture_words(res, tex, view, w))) return e;
    if (vcuda_desc_encode(VCUDA_DESC_TEX, w, desc, sizeof desc, &len, why)) {
        fprintf(stderr, "vcuda: cudaCreateTextureObject: %s\n", why);
        return record(cudaErrorInvalidValue);
    }
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_TEX_CREATE;
    m.blob = desc, m.blob_len = (uint32_t)len;
    if ((e = result(vcuda_client_call(current_device, &m, &r, 0, why), &r, "cudaCreateTextureObject", why))) return e;
    tex_record t;
    memset(&t, 0, sizeof t);
    t.device = current_device, t.res = *res, t.tex = *tex, t.has_view = view != NULL;
    if (view) t.view = *view;
    if ((e = remember_tex(r.v[0], &t))) return e;
    *out = (cudaTextureObject_t)r.v[0];
    return cudaSuccess;
}

EXPORT cudaError_t cudaCreateSurfaceObject(cudaSurfaceObject_t *out, const struct cudaResourceDesc *res)
{
    vcuda_msg r;
    cudaError_t e = ready();
    if (e) return record(e);
    if (!out || !res) return record(cudaErrorInvalidValue);
    const remote_array *a = res->resType == cudaResourceTypeArray ? as_array(res->res.array.array) : NULL;
    if (!a) return record(cudaErrorInvalidResourceHandle);
    if ((e = call(VCUDA_OP_SURF_CREATE, &a->handle, 1, &r, "cudaCreateSurfaceObject"))) return e;
    tex_record t;
    memset(&t, 0, sizeof t);
    t.device = current_device, t.surface = 1, t.res = *res;
    if ((e = remember_tex(r.v[0], &t))) return e;
    *out = (cudaSurfaceObject_t)r.v[0];
    return cudaSuccess;
}

/* Destroyed on the server that made it; one unknown here is still sent (the server
 * refuses what is not this client's). */
static cudaError_t destroy_tex(unsigned long long obj, int surface, const char *api)
{
    vcuda_msg r;
    uint64_t v = obj;
    pthread_mutex_lock(&tex_mu);
    tex_record *t = find_tex(obj, surface);
    int device = t ? t->device : current_device;
    pthread_mutex_unlock(&tex_mu);
    int saved = current_device;
    current_device = device;
    cudaError_t e = call(surface ? VCUDA_OP_SURF_DESTROY : VCUDA_OP_TEX_DESTROY, &v, 1, &r, api);
    current_device = saved;
    pthread_mutex_lock(&tex_mu);
    if (!e && (t = find_tex(obj, surface))) *t = tex_records[--ntex];
    pthread_mutex_unlock(&tex_mu);
    return e;
}
EXPORT cudaError_t cudaDestroyTextureObject(cudaTextureObject_t obj)
{
    return obj ? destroy_tex(obj, 0, "cudaDestroyTextureObject") : cudaSuccess;
}
EXPORT cudaError_t cudaDestroySurfaceObject(cudaSurfaceObject_t obj)
{
    return obj ? destroy_tex(obj, 1, "cudaDestroySurfaceObject") : cudaSuccess;
}

/* The descriptors an object was made from (what field `which` asks: 0 resource,
 * 1 texture, 2 view). */
static cudaError_t tex_desc(void *out, unsigned long long obj, int surface, int which)
{
    if (!out) return record(cudaErrorInvalidValue);
    pthread_mutex_lock(&tex_mu);
    tex_record *t = find_tex(obj, surface);
    if (t && which == 0) memcpy(out, &t->res, sizeof t->res);
    if (t && which == 1) memcpy(out, &t->tex, sizeof t->tex);
    if (t && which == 2) {
        if (t->has_view) memcpy(out, &t->view, sizeof t->view);
        else memset(out, 0, sizeof t->view);
    }
    pthread_mutex_unlock(&tex_mu);
    return t ? cudaSuccess : record(cudaErrorInvalidValue);
}
EXPORT cudaError_t cudaGetTextureObjectResourceDesc(struct cudaResourceDesc *d, cudaTextureObject_t o) { return tex_desc(d, o, 0, 0); }
EXPORT cudaError_t cudaGetTextureObjectTextureDesc(struct cudaTextureDesc *d, cudaTextureObject_t o) { return tex_desc(d, o, 0, 1); }
EXPORT cudaError_t cudaGetTextureObjectResourceViewDesc(struct cudaResourceViewDesc *d, cudaTextureObject_t o)
{
    return tex_desc(d, o, 0, 2);
}
EXPORT cudaError_t cudaGetSurfaceObjectResourceDesc(struct cudaResourceDesc *d, cudaSurfaceObject_t o) { return tex_desc(d, o, 1, 0); }

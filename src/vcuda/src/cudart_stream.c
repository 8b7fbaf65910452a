/* Streams and events of the libcudart stand-in: cudaStream_t and cudaEvent_t are
 * remote objects (the server's handle and device), the legacy and per-thread default
 * streams, host functions in stream order, stream attributes.  Every family that takes
 * a stream resolves it here (rt_own_stream, rt_stream_handle), so the default streams
 * are seen as the streams they are everywhere. */
#define _GNU_SOURCE
#include "cudart_internal.h"

#define EVENT_MAGIC 0x45564e54u

/* Stream ids (cudaStreamGetId): the legacy stream of device d has d + 1, every stream
 * made here the next number after those. */
static _Atomic unsigned long long stream_ids = VCUDA_MAX_DEVICES;

static cudaError_t create_object(unsigned op, unsigned flags, uint32_t magic, void **out, const char *api)
{
    vcuda_msg r;
    uint64_t v = flags;
    if (!out) return rt_record(cudaErrorInvalidValue);
    cudaError_t e = rt_call(op, &v, 1, &r, api);
    if (e) return e;
    remote_object *o = malloc(sizeof *o);
    if (!o) return rt_record(cudaErrorMemoryAllocation);
    *o = (remote_object){magic, rt_current_device, r.v[0], flags, 0, NULL, 0};
    if (magic == STREAM_MAGIC) o->id = atomic_fetch_add(&stream_ids, 1) + 1;
    *out = o;
    return cudaSuccess;
}

static void forget_stream_attrs(cudaStream_t s);

/* ---- the default streams ------------------------------------------------------------ *
 * The legacy default stream (NULL, cudaStreamLegacy) is the server's default stream of
 * this process's connection: one per device, shared by all host threads, as the real
 * runtime's is one per context; the server orders it with the blocking streams
 * (server_gpu_stream.c, join_streams).  The per-thread default stream (cudaStreamPerThread,
 * and NULL in a call through a _ptsz/_ptds entry point: cudart_ptds.c) is one stream
 * per host thread and device, as in the real runtime: an ordinary blocking stream on
 * the server (flags 0), so it orders with the legacy stream and with no other stream,
 * made by the thread's first use of it on the device, and destroyed when the thread
 * ends (the server keeps work still queued in it, see reap_streams there) or when the
 * device is reset.  Every path that takes a stream sees it as the stream it is
 * (rt_own_stream), so launches, copies, events, waits and captures treat it like any
 * other. */
_Thread_local int vcuda_per_thread_call;

typedef struct {
    remote_object *stream[VCUDA_MAX_DEVICES];
    unsigned generation[VCUDA_MAX_DEVICES]; /* resets[d] when it was made */
} thread_streams;
static _Thread_local thread_streams *my_streams;
_Atomic unsigned rt_resets[VCUDA_MAX_DEVICES]; /* cudaDeviceReset: every thread's stream of d goes */
static pthread_key_t streams_key;
static pthread_once_t streams_once = PTHREAD_ONCE_INIT;
static int streams_key_ok;

/* The legacy stream?  The per-thread one? */
int rt_legacy_stream(cudaStream_t s) { return s == cudaStreamLegacy || (!s && !vcuda_per_thread_call); }
static int per_thread_stream(cudaStream_t s) { return s == cudaStreamPerThread || (!s && vcuda_per_thread_call); }

/* This thread's per-thread stream of device d if it is there (made before the last
 * reset of d), else NULL; one made before is let go here (the server's went with the
 * reset). */
static remote_object *thread_stream(int d)
{
    thread_streams *t = my_streams;
    if (!t || !t->stream[d]) return NULL;
    if (t->generation[d] != atomic_load(&rt_resets[d])) {
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
        int saved = rt_current_device;
        rt_current_device = d;
        rt_call(VCUDA_OP_STREAM_DESTROY, &o->handle, 1, &r, "cudaStreamPerThread (the thread's end)");
        rt_current_device = saved;
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
    int d = rt_current_device;
    cudaError_t e = rt_ready();
    if (e) return rt_record(e);
    if ((*out = thread_stream(d))) return cudaSuccess;
    pthread_once(&streams_once, streams_key_make);
    if (!my_streams) {
        thread_streams *t = calloc(1, sizeof *t);
        if (!t || !streams_key_ok || pthread_setspecific(streams_key, t)) return free(t), rt_record(cudaErrorMemoryAllocation);
        my_streams = t;
    }
    unsigned gen = atomic_load(&rt_resets[d]);
    if ((e = create_object(VCUDA_OP_STREAM_CREATE, cudaStreamDefault, STREAM_MAGIC, (void **)out, "cudaStreamPerThread")))
        return e;
    my_streams->stream[d] = *out, my_streams->generation[d] = gen;
    return cudaSuccess;
}

/* *s as the stream it is: the per-thread stream (made if need be) where *s names it;
 * unchanged otherwise. */
cudaError_t rt_own_stream(cudaStream_t *s)
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
cudaStream_t rt_existing_stream(cudaStream_t s)
{
    if (per_thread_stream(s)) return (cudaStream_t)thread_stream(rt_current_device);
    return rt_legacy_stream(s) ? NULL : s;
}

/* Stream -> server handle (0: the legacy stream).  Invalid handle if it is not a stream
 * of the current device. */
cudaError_t rt_stream_handle(cudaStream_t s, uint64_t *h)
{
    *h = 0;
    if (rt_legacy_stream(s)) return cudaSuccess;
    cudaError_t e = rt_own_stream(&s);
    if (e) return e;
    const remote_object *o = (const remote_object *)s;
    if (o->magic != STREAM_MAGIC || o->device != rt_current_device) return rt_record(cudaErrorInvalidResourceHandle);
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
_Thread_local int rt_host_sync;

static cudaError_t object_call(unsigned op, const void *obj, uint32_t magic, const char *api, vcuda_msg *r)
{
    const remote_object *o = obj;
    vcuda_msg local;
    if (!o || o->magic != magic) return rt_record(cudaErrorInvalidResourceHandle);
    int saved = rt_current_device;
    rt_current_device = o->device; /* an object is served by the server that made it */
    cudaError_t e = rt_call(op, &o->handle, 1, r ? r : &local, api);
    rt_current_device = saved;
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
    if (!s || s == cudaStreamLegacy || s == cudaStreamPerThread) return rt_record(cudaErrorInvalidResourceHandle);
    forget_stream_attrs(s); /* a later stream may get the same address */
    return destroy_object(VCUDA_OP_STREAM_DESTROY, s, STREAM_MAGIC, "cudaStreamDestroy");
}
EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    vcuda_msg r;
    uint64_t zero = 0;
    cudaError_t e;
    if (rt_legacy_stream(s)) return rt_call(VCUDA_OP_STREAM_SYNCHRONIZE, &zero, 1, &r, "cudaStreamSynchronize");
    if ((e = rt_own_stream(&s))) return e;
    if (rt_capturing(s)) return rt_record(cudaErrorStreamCaptureUnsupported);
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
    if (!o || o->magic != EVENT_MAGIC || o->device != rt_current_device) return rt_record(cudaErrorInvalidResourceHandle);
    /* recorded into a capture, the event only lets another stream join it */
    if ((((remote_object *)ev)->capture = rt_capturing(stream))) return cudaSuccess;
    if ((e = rt_stream_handle(stream, &sh))) return e;
    uint64_t v[] = {o->handle, sh};
    return rt_call(VCUDA_OP_EVENT_RECORD, v, 2, &r, "cudaEventRecord");
}

EXPORT cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    const remote_object *a = (const remote_object *)start, *b = (const remote_object *)end;
    vcuda_msg r;
    if (!ms) return rt_record(cudaErrorInvalidValue);
    if (!a || !b || a->magic != EVENT_MAGIC || b->magic != EVENT_MAGIC || a->device != b->device)
        return rt_record(cudaErrorInvalidResourceHandle);
    int saved = rt_current_device;
    rt_current_device = a->device;
    uint64_t v[] = {a->handle, b->handle};
    cudaError_t e = rt_call(VCUDA_OP_EVENT_ELAPSED, v, 2, &r, "cudaEventElapsedTime");
    rt_current_device = saved;
    if (!e) {
        uint32_t bits = (uint32_t)r.v[0];
        memcpy(ms, &bits, sizeof *ms);
    }
    return e;
}

/* ---- queries, waits, priorities and properties of events and streams ------------- */

/* A query's "not ready" is an answer, not an error: it does not become the last error. */
static cudaError_t query(cudaError_t e, cudaError_t before)
{
    if (e == cudaErrorNotReady) rt_last_error = before;
    return e;
}

EXPORT cudaError_t cudaEventQuery(cudaEvent_t ev)
{
    cudaError_t before = rt_last_error;
    return query(object_call(VCUDA_OP_EVENT_QUERY, ev, EVENT_MAGIC, "cudaEventQuery", NULL), before);
}

EXPORT cudaError_t cudaStreamQuery(cudaStream_t s)
{
    cudaError_t before = rt_last_error, e;
    vcuda_msg r;
    uint64_t zero = 0;
    if (rt_legacy_stream(s)) return query(rt_call(VCUDA_OP_STREAM_QUERY, &zero, 1, &r, "cudaStreamQuery"), before);
    if ((e = rt_own_stream(&s))) return e;
    return query(object_call(VCUDA_OP_STREAM_QUERY, s, STREAM_MAGIC, "cudaStreamQuery", NULL), before);
}

EXPORT cudaError_t cudaEventRecordWithFlags(cudaEvent_t ev, cudaStream_t stream, unsigned flags)
{
    /* cudaEventRecordExternal makes an event-record node in a capture; here a recorded
     * event only lets another stream join the capture (see cudaEventRecord) */
    if (flags & ~(unsigned)cudaEventRecordExternal) return rt_record(cudaErrorInvalidValue);
    return cudaEventRecord(ev, stream);
}

/* The device a stream belongs to (the default streams: the current device). */
int rt_stream_device(cudaStream_t s)
{
    const remote_object *o = (const remote_object *)rt_existing_stream(s);
    return !o || o->magic != STREAM_MAGIC ? rt_current_device : o->device;
}

EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t ev, unsigned flags)
{
    const remote_object *o = (const remote_object *)ev;
    vcuda_msg r;
    uint64_t sh;
    cudaError_t e;
    if (!o || o->magic != EVENT_MAGIC) return rt_record(cudaErrorInvalidResourceHandle);
    if (o->capture) { /* the stream joins the capture (its nodes are replayed in order) */
        if (rt_legacy_stream(s)) return rt_record(cudaErrorStreamCaptureImplicit);
        if ((e = rt_own_stream(&s))) return e;
        remote_object *so = (remote_object *)s;
        if (so->magic != STREAM_MAGIC) return rt_record(cudaErrorInvalidResourceHandle);
        return so->capture == o->capture ? cudaSuccess : rt_join_capture(o->capture, so);
    }
    int dev = rt_stream_device(s), saved = rt_current_device;
    /* an event of another server: waited for here, so the stream's later work follows it */
    if (o->device != dev) return cudaEventSynchronize(ev);
    rt_current_device = dev;
    if (!(e = rt_stream_handle(s, &sh))) {
        uint64_t v[] = {sh, o->handle, flags};
        e = rt_call(VCUDA_OP_STREAM_WAIT_EVENT, v, 3, &r, "cudaStreamWaitEvent");
    }
    rt_current_device = saved;
    return e;
}

EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned flags, int priority)
{
    vcuda_msg r;
    if (!s) return rt_record(cudaErrorInvalidValue);
    uint64_t v[] = {flags, (uint64_t)(int64_t)priority};
    cudaError_t e = rt_call(VCUDA_OP_STREAM_CREATE_PRIORITY, v, 2, &r, "cudaStreamCreateWithPriority");
    if (e) return e;
    remote_object *o = malloc(sizeof *o);
    if (!o) return rt_record(cudaErrorMemoryAllocation);
    int least = 0, greatest = 0;
    cudaDeviceGetStreamPriorityRange(&least, &greatest);
    /* the driver clamps to the range; so does what cudaStreamGetPriority reports */
    priority = priority > least ? least : priority < greatest ? greatest : priority;
    *o = (remote_object){STREAM_MAGIC, rt_current_device, r.v[0], flags, priority, NULL, atomic_fetch_add(&stream_ids, 1) + 1};
    *s = (cudaStream_t)o;
    return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest)
{
    static struct { int known, least, greatest; } range[VCUDA_MAX_DEVICES];
    vcuda_msg r;
    cudaError_t e = rt_ready();
    if (e) return rt_record(e);
    if (!range[rt_current_device].known) {
        if ((e = rt_call(VCUDA_OP_STREAM_PRIORITY_RANGE, NULL, 0, &r, "cudaDeviceGetStreamPriorityRange"))) return e;
        range[rt_current_device].least = (int)(int64_t)r.v[0], range[rt_current_device].greatest = (int)(int64_t)r.v[1];
        range[rt_current_device].known = 1;
    }
    if (least) *least = range[rt_current_device].least;
    if (greatest) *greatest = range[rt_current_device].greatest;
    return cudaSuccess;
}

static const remote_object *stream_object(cudaStream_t s)
{
    const remote_object *o = (const remote_object *)rt_existing_stream(s);
    return o && o->magic == STREAM_MAGIC ? o : NULL;
}

EXPORT cudaError_t cudaStreamGetPriority(cudaStream_t s, int *priority)
{
    const remote_object *o = stream_object(s);
    if (!priority) return rt_record(cudaErrorInvalidValue);
    *priority = o ? o->priority : 0;
    return cudaSuccess;
}

EXPORT cudaError_t cudaStreamGetFlags(cudaStream_t s, unsigned *flags)
{
    const remote_object *o = stream_object(s);
    if (!flags) return rt_record(cudaErrorInvalidValue);
    *flags = o ? o->flags : cudaStreamDefault;
    return cudaSuccess;
}

EXPORT cudaError_t cudaStreamGetDevice(cudaStream_t s, int *device)
{
    if (!device) return rt_record(cudaErrorInvalidValue);
    *device = rt_stream_device(s);
    return cudaSuccess;
}

EXPORT cudaError_t cudaStreamGetId(cudaStream_t s, unsigned long long *id)
{
    cudaError_t e;
    if (!id) return rt_record(cudaErrorInvalidValue);
    if (rt_legacy_stream(s)) return *id = (unsigned long long)rt_current_device + 1, cudaSuccess;
    if ((e = rt_own_stream(&s))) return e;
    const remote_object *o = stream_object(s);
    if (!o) return rt_record(cudaErrorInvalidResourceHandle);
    *id = o->id;
    return cudaSuccess;
}

/* Active while the stream records into a graph (cudart_graph.c). */
EXPORT cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *status)
{
    if (!status) return rt_record(cudaErrorInvalidValue);
    *status = rt_capturing(s) ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}

/* ---- host functions in stream order ----------------------------------------------- */

/* Run here, on the calling thread, once the server says the stream reached them: the
 * stream's earlier work is complete, and its later work is queued after they return. */
EXPORT cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *data)
{
    cudaError_t e;
    if (!fn) return rt_record(cudaErrorInvalidValue);
    if (rt_capture_host(s, fn, data, &e)) return e;
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
    if (!cb || flags) return rt_record(cudaErrorInvalidValue);
    cudaError_t e = cudaStreamSynchronize(s);
    if (e == cudaErrorDevicesUnavailable) return e;
    int per_thread = vcuda_per_thread_call; /* (the program's code, not this call's) */
    vcuda_per_thread_call = 0;
    cb(s, e, data); /* as the runtime does: the callback is told the stream's error */
    vcuda_per_thread_call = per_thread;
    return cudaSuccess;
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
    if (!add || rt_grow(&stream_attrs, &cap_stream_attrs, nstream_attrs, sizeof *stream_attrs)) return NULL;
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
    cudaError_t e = rt_ready();
    if (e || (e = rt_own_stream(&s)) || (e = rt_stream_handle(s, &sh))) return rt_record(e);
    if (!value) return rt_record(cudaErrorInvalidValue);
    if (id == cudaLaunchAttributePriority) return unsupported("cudaStreamSetAttribute", "a stream's priority is fixed when it is created");
    pthread_mutex_lock(&attr_mu);
    stream_attr *a = find_stream_attr(s, id, 1);
    if (a) a->value = *value;
    pthread_mutex_unlock(&attr_mu);
    return a ? cudaSuccess : rt_record(cudaErrorMemoryAllocation);
}

EXPORT cudaError_t cudaStreamGetAttribute(cudaStream_t s, cudaStreamAttrID id, cudaStreamAttrValue *value)
{
    uint64_t sh;
    cudaError_t e = rt_ready();
    if (e || (e = rt_own_stream(&s)) || (e = rt_stream_handle(s, &sh))) return rt_record(e);
    if (!value) return rt_record(cudaErrorInvalidValue);
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
    cudaError_t e = rt_ready();
    if (e || (e = rt_own_stream(&dst)) || (e = rt_own_stream(&src))) return rt_record(e);
    pthread_mutex_lock(&attr_mu);
    for (size_t i = 0; i < nstream_attrs && !e; ++i)
        if (stream_attrs[i].stream == src) {
            stream_attr copy = stream_attrs[i], *a = find_stream_attr(dst, copy.id, 1);
            if (a) a->value = copy.value;
            else e = cudaErrorMemoryAllocation;
        }
    pthread_mutex_unlock(&attr_mu);
    return e ? rt_record(e) : cudaSuccess;
}

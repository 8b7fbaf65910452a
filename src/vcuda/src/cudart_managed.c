/* Managed memory in the libcudart stand-in: cudaMallocManaged, __managed__ variables
 * (__cudaRegisterManagedVar, __cudaInitModule), cudaMemPrefetch(Batch)Async, cudaMemAdvise,
 * cudaMemRangeGetAttribute(s), cudaStreamAttachMemAsync, the hooks the other families
 * call where device work starts or the device is synchronized, and the device
 * attributes that advertise managed, pageable or mapped host memory.
 *
 * The pages and their coherence are managed.c's (the semantics are written there): a
 * device whose concurrentManagedAccess is 0, the host's copy sent before device work
 * and fetched on first touch after it.  What cannot cross a network stays absent and
 * says so: concurrent access, pageable memory access, host-native atomics, and mapped
 * (zero-copy) host memory (cudaHostAlloc/cudaHostRegister mapped, refused by name in
 * cudart_memory.c; canMapHostMemory 0). */
#define _GNU_SOURCE
#include "cudart_internal.h"
#include "managed.h"

#include <errno.h>

/* ---- device attributes --------------------------------------------------------------- */

/* Managed memory is there (managedMemory 1), with concurrentManagedAccess 0: the host
 * must not touch it while the device works, which is what crossing a network allows.
 * Pageable and mapped (zero-copy) host memory, direct host access to device-resident
 * managed memory and host-native atomics cannot cross it at all: 0, so that programs
 * which check take their other path. */
int rt_managed_attribute(int attr, int *value)
{
    switch (attr) {
    case cudaDevAttrManagedMemory: *value = 1; return 1;
    case cudaDevAttrConcurrentManagedAccess:
    case cudaDevAttrPageableMemoryAccess:
    case cudaDevAttrPageableMemoryAccessUsesHostPageTables:
    case cudaDevAttrDirectManagedMemAccessFromHost:
    case cudaDevAttrCanMapHostMemory:
    case cudaDevAttrHostNativeAtomicSupported:
    case cudaDevAttrCanUseHostPointerForRegisteredMem: *value = 0; return 1;
    default: return 0;
    }
}

/* ---- how pages cross: the runtime's own calls, on the range's device ------------------ */

static _Thread_local cudaError_t op_error; /* the last failing transfer's code */

static int op_done(cudaError_t e, int saved, char *why)
{
    rt_current_device = saved;
    if (!e) return 0;
    op_error = e;
    if (!*why) snprintf(why, VCUDA_WHY_LEN, "%s", cudaGetErrorString(e));
    return -1;
}

static int to_device(int dev, uint64_t dst, const void *src, size_t n, char *why)
{
    vcuda_msg m, r;
    int saved = rt_current_device;
    rt_current_device = dev;
    *why = 0;
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_MEMCPY_H2D;
    m.hdr.flags = VCUDA_FLAG_SYNC; /* complete before the work that follows is queued */
    m.v[0] = dst, m.v[1] = 0, m.nv = 2;
    cudaError_t e = rt_result(vcuda_client_send_chunks(dev, &m, 0, src, n, vcuda_client_chunk(), &r, why), &r,
                              "managed memory", why);
    return op_done(e, saved, why);
}

static int from_device(int dev, void *dst, uint64_t src, size_t n, char *why)
{
    vcuda_msg m, r;
    int saved = rt_current_device;
    rt_current_device = dev;
    *why = 0;
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_MEMCPY_D2H;
    m.v[0] = src, m.v[1] = n, m.v[2] = 0, m.nv = 3;
    cudaError_t e = rt_result(vcuda_client_recv_chunks(dev, &m, dst, n, &r, why), &r, "managed memory", why);
    return op_done(e, saved, why);
}

static int synchronize(int dev, char *why)
{
    vcuda_msg r;
    int saved = rt_current_device;
    rt_current_device = dev;
    *why = 0;
    cudaError_t e = rt_call(VCUDA_OP_DEVICE_SYNCHRONIZE, NULL, 0, &r, "cudaDeviceSynchronize (managed memory)");
    return op_done(e, saved, why);
}

static void print_stats(void) { vcuda_managed_stats_print(); }

static void init_once(void)
{
    static const vcuda_managed_ops ops = {to_device, from_device, synchronize};
    vcuda_managed_init(&ops);
    const char *v = getenv("VCUDA_STATS");
    if (v && !strcmp(v, "1")) atexit(print_stats);
}

static pthread_once_t init = PTHREAD_ONCE_INIT;

/* A failed hook: its reason once on stderr, the transfer's code (or e). */
static cudaError_t hook_failed(const char *api, const char *why, cudaError_t e)
{
    fprintf(stderr, "vcuda: %s: managed memory: %s\n", api, why);
    cudaError_t code = op_error ? op_error : e;
    op_error = cudaSuccess;
    return rt_record(code);
}

/* ---- hooks for the other families ------------------------------------------------------ */

cudaError_t rt_managed_launch(cudaStream_t s, const char *api)
{
    char why[VCUDA_MANAGED_WHY_LEN];
    if (s == cudaStreamLegacy) s = NULL;
    return vcuda_managed_before_launch(rt_current_device, s, why) ? hook_failed(api, why, cudaErrorLaunchFailure)
                                                                    : cudaSuccess;
}

cudaError_t rt_managed_copy(void *dst, size_t dspan, const void *src, size_t sspan, enum cudaMemcpyKind *kind,
                            const char *api)
{
    char why[VCUDA_MANAGED_WHY_LEN];
    int d;
    int ms = src && vcuda_managed_find(src, 0, &d), md = dst && vcuda_managed_find(dst, 0, &d);
    if (!ms && !md) return cudaSuccess;
    /* managed memory is device memory to a copy: the pointers say which way it goes */
    *kind = cudaMemcpyDefault;
    if (ms && vcuda_managed_device_reads(src, sspan, why)) return hook_failed(api, why, cudaErrorUnknown);
    if (md && vcuda_managed_device_writes(dst, dspan, why)) return hook_failed(api, why, cudaErrorUnknown);
    return cudaSuccess;
}

cudaError_t rt_managed_set(void *p, size_t span, const char *api)
{
    char why[VCUDA_MANAGED_WHY_LEN];
    if (!vcuda_managed_find(p, 0, NULL)) return cudaSuccess;
    return vcuda_managed_device_writes(p, span, why) ? hook_failed(api, why, cudaErrorUnknown) : cudaSuccess;
}

void rt_managed_synchronized(void) { vcuda_managed_synchronized(rt_current_device); }
void rt_managed_reset(void) { vcuda_managed_forget_device(rt_current_device); }

/* The device allocation behind managed memory at p, for cudaFree (p's host side goes). */
uint64_t rt_managed_release(uint64_t p)
{
    uint64_t raw;
    return vcuda_managed_unmap(p, &raw) ? raw : p;
}

/* ---- allocation ------------------------------------------------------------------------ */

static void free_raw(uint64_t raw)
{
    vcuda_msg r;
    rt_call(VCUDA_OP_FREE, &raw, 1, &r, "cudaMallocManaged");
}

/* The server allocates, zeros (the host then installs zeros without asking) and the
 * host maps the same address.  An address this process uses already is kept allocated
 * while another is tried, so the server cannot hand it out again. */
EXPORT cudaError_t cudaMallocManaged(void **p, size_t size, unsigned flags)
{
    enum { TRIES = 16 };
    char why[VCUDA_MANAGED_WHY_LEN];
    uint64_t taken[TRIES];
    int ntaken = 0;
    size_t bytes, align;
    if (!p || !size || (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost))
        return rt_record(cudaErrorInvalidValue);
    cudaError_t e = rt_ready();
    if (e) return rt_record(e);
    pthread_once(&init, init_once);
    if (vcuda_managed_layout(size, &bytes, &align, why)) {
        fprintf(stderr, "vcuda: cudaMallocManaged: %s\n", why);
        return rt_record(cudaErrorInvalidValue);
    }
    uint64_t raw = 0, dptr = 0;
    for (int mapped = 0; !mapped;) {
        vcuda_msg r;
        uint64_t v = bytes;
        if ((e = rt_call(VCUDA_OP_MALLOC, &v, 1, &r, "cudaMallocManaged"))) break;
        raw = r.v[0], dptr = (raw + align - 1) / align * align;
        uint64_t set[] = {dptr, 0, size, 0}, zero = 0;
        if ((e = rt_call(VCUDA_OP_MEMSET, set, 4, &r, "cudaMallocManaged")) ||
            (e = rt_call(VCUDA_OP_STREAM_SYNCHRONIZE, &zero, 1, &r, "cudaMallocManaged"))) {
            free_raw(raw);
            break;
        }
        if (!vcuda_managed_map(rt_current_device, dptr, size, flags, raw, why)) {
            mapped = 1;
        } else if (errno == EEXIST && ntaken < TRIES) {
            taken[ntaken++] = raw;
        } else {
            fprintf(stderr, "vcuda: cudaMallocManaged(%zu): %s\n", size, why);
            free_raw(raw);
            e = rt_record(errno == EINVAL ? cudaErrorInvalidValue : cudaErrorMemoryAllocation);
            break;
        }
    }
    for (int i = 0; i < ntaken; ++i) free_raw(taken[i]);
    if (e) return e;
    if (rt_table_add(rt_current_device, dptr, size)) {
        uint64_t back;
        vcuda_managed_unmap(dptr, &back);
        free_raw(raw);
        return rt_record(cudaErrorMemoryAllocation);
    }
    *p = (void *)(uintptr_t)dptr;
    return cudaSuccess;
}

/* ---- __managed__ variables ---------------------------------------------------------------- */

/* nvcc's host code reaches a __managed__ variable through a pointer it keeps (host_var_ptr)
 * and, before its first access in a translation unit, calls __cudaInitModule: that is when
 * the module's variables get their host side, at their device address. */
typedef struct {
    fatbin *fb;
    void **host_var_ptr;
    const char *name;
} managed_var;
static managed_var *mvars;
static size_t nmvars, cap_mvars;
static pthread_mutex_t mvar_mu = PTHREAD_MUTEX_INITIALIZER;

EXPORT void __cudaRegisterManagedVar(void **handle, void **host_var_ptr, char *device_address,
                                     const char *device_name, int ext, size_t size, int constant, int global)
{
    (void)device_address, (void)ext, (void)size, (void)constant, (void)global;
    pthread_mutex_lock(&mvar_mu);
    if (rt_grow(&mvars, &cap_mvars, nmvars, sizeof *mvars)) {
        fprintf(stderr, "vcuda: __cudaRegisterManagedVar(%s): out of memory\n", device_name);
        abort();
    }
    mvars[nmvars++] = (managed_var){(fatbin *)handle, host_var_ptr, device_name};
    pthread_mutex_unlock(&mvar_mu);
}

/* Every __managed__ variable of the module on the current device, mapped; 1, or the
 * reason on stderr and the program ends (nvcc's code cannot go on without them). */
char rt_managed_init_module(void **handle)
{
    fatbin *fb = (fatbin *)handle;
    char why[VCUDA_MANAGED_WHY_LEN];
    const char *bad = NULL;
    pthread_mutex_lock(&mvar_mu);
    size_t n = 0;
    uint64_t *dptr = calloc(nmvars ? nmvars : 1, sizeof *dptr);
    size_t *size = calloc(nmvars ? nmvars : 1, sizeof *size), *which = calloc(nmvars ? nmvars : 1, sizeof *which);
    int d = rt_current_device;
    cudaError_t e = !dptr || !size || !which ? cudaErrorMemoryAllocation : rt_ready();
    if (!e) pthread_once(&init, init_once);
    for (size_t i = 0; i < nmvars && !e; ++i) {
        if (mvars[i].fb != fb || *mvars[i].host_var_ptr) continue;
        vcuda_msg r;
        pthread_mutex_lock(&rt_reg_mu);
        e = rt_module_lookup(fb, d, VCUDA_OP_MODULE_GLOBAL, mvars[i].name, &r);
        pthread_mutex_unlock(&rt_reg_mu);
        if (e) bad = mvars[i].name;
        else dptr[n] = r.v[0], size[n] = r.v[1], which[n++] = i;
    }
    if (e) {
        fprintf(stderr, "vcuda: __managed__ variable %s: %s\n", bad ? bad : "", cudaGetErrorString(e));
    } else if (n && vcuda_managed_map_vars(d, dptr, size, n, why)) {
        fprintf(stderr, "vcuda: __managed__ variables: %s\n", why);
        e = cudaErrorMemoryAllocation;
    }
    for (size_t k = 0; k < n && !e; ++k) {
        if (rt_table_add(d, dptr[k], size[k])) e = cudaErrorMemoryAllocation;
        *mvars[which[k]].host_var_ptr = (void *)(uintptr_t)dptr[k];
    }
    pthread_mutex_unlock(&mvar_mu);
    free(dptr), free(size), free(which);
    if (e) exit(1);
    return 1;
}

/* ---- prefetch, advice, attributes, attachment ----------------------------------------------- */

/* A location as a device ordinal, or cudaCpuDeviceId for the host; -3 if neither. */
static int location_of(struct cudaMemLocation loc)
{
    if (loc.type == cudaMemLocationTypeDevice) return rt_valid_device(loc.id) ? -3 : loc.id;
    if (loc.type == cudaMemLocationTypeHost || loc.type == cudaMemLocationTypeHostNuma ||
        loc.type == cudaMemLocationTypeHostNumaCurrent)
        return cudaCpuDeviceId;
    return -3;
}

/* Done when it returns (stream order is kept: earlier work on the device is waited for
 * before a prefetch to the host reads it). */
EXPORT cudaError_t cudaMemPrefetchAsync(const void *p, size_t n, struct cudaMemLocation loc, unsigned flags,
                                        cudaStream_t s)
{
    char why[VCUDA_MANAGED_WHY_LEN];
    (void)s;
    int where = location_of(loc);
    if (!p || !n || flags || where == -3) return rt_record(cudaErrorInvalidValue);
    if (!vcuda_managed_find(p, n, NULL)) return rt_record(cudaErrorInvalidValue);
    if (vcuda_managed_prefetch(p, n, where == cudaCpuDeviceId, where, why))
        return hook_failed("cudaMemPrefetchAsync", why, cudaErrorInvalidValue);
    return cudaSuccess;
}

EXPORT cudaError_t cudaMemAdvise(const void *p, size_t n, enum cudaMemoryAdvise a, struct cudaMemLocation loc)
{
    int where = location_of(loc);
    if (!p || !n || !vcuda_managed_find(p, n, NULL)) return rt_record(cudaErrorInvalidValue);
    int what = a == cudaMemAdviseSetReadMostly || a == cudaMemAdviseUnsetReadMostly ? VCUDA_ADVICE_READ_MOSTLY
             : a == cudaMemAdviseSetPreferredLocation || a == cudaMemAdviseUnsetPreferredLocation ? VCUDA_ADVICE_PREFERRED
             : a == cudaMemAdviseSetAccessedBy || a == cudaMemAdviseUnsetAccessedBy ? VCUDA_ADVICE_ACCESSED_BY : 0;
    int set = a == cudaMemAdviseSetReadMostly || a == cudaMemAdviseSetPreferredLocation || a == cudaMemAdviseSetAccessedBy;
    if (!what || (what != VCUDA_ADVICE_READ_MOSTLY && set && where == -3)) return rt_record(cudaErrorInvalidValue);
    vcuda_managed_advise(p, n, what, set, where);
    return cudaSuccess;
}

static cudaError_t range_attribute(void *data, size_t size, enum cudaMemRangeAttribute a, const vcuda_managed_attrs *t)
{
    int *out = data;
    int n = (int)(size / 4);
    switch (a) {
    case cudaMemRangeAttributeReadMostly:
    case cudaMemRangeAttributePreferredLocation:
    case cudaMemRangeAttributeLastPrefetchLocation:
    case cudaMemRangeAttributePreferredLocationType:
    case cudaMemRangeAttributePreferredLocationId:
    case cudaMemRangeAttributeLastPrefetchLocationType:
    case cudaMemRangeAttributeLastPrefetchLocationId:
        if (size != 4) return rt_record(cudaErrorInvalidValue);
        break;
    case cudaMemRangeAttributeAccessedBy:
        if (!size || size % 4) return rt_record(cudaErrorInvalidValue);
        break;
    default: return rt_record(cudaErrorInvalidValue);
    }
    int pref = t->preferred_location, last = t->last_prefetch_location;
    switch (a) {
    case cudaMemRangeAttributeReadMostly: *out = t->read_mostly; break;
    case cudaMemRangeAttributePreferredLocation: *out = pref; break;
    case cudaMemRangeAttributeLastPrefetchLocation: *out = last; break;
    case cudaMemRangeAttributePreferredLocationType:
        *out = pref == cudaInvalidDeviceId ? cudaMemLocationTypeInvalid : pref == cudaCpuDeviceId ? cudaMemLocationTypeHost
                                                                                                  : cudaMemLocationTypeDevice;
        break;
    case cudaMemRangeAttributePreferredLocationId: *out = pref >= 0 ? pref : cudaInvalidDeviceId; break;
    case cudaMemRangeAttributeLastPrefetchLocationType:
        *out = last == cudaInvalidDeviceId ? cudaMemLocationTypeInvalid : last == cudaCpuDeviceId ? cudaMemLocationTypeHost
                                                                                                  : cudaMemLocationTypeDevice;
        break;
    case cudaMemRangeAttributeLastPrefetchLocationId: *out = last >= 0 ? last : cudaInvalidDeviceId; break;
    case cudaMemRangeAttributeAccessedBy: {
        /* the devices (and the host: cudaCpuDeviceId) advised, then cudaInvalidDeviceId */
        int k = 0;
        if (t->accessed_by >> 63 && k < n) out[k++] = cudaCpuDeviceId;
        for (int d = 0; d < 63 && k < n; ++d)
            if (t->accessed_by >> d & 1) out[k++] = d;
        while (k < n) out[k++] = cudaInvalidDeviceId;
        break;
    }
    default: break;
    }
    return cudaSuccess;
}

EXPORT cudaError_t cudaMemRangeGetAttribute(void *data, size_t size, enum cudaMemRangeAttribute a, const void *p,
                                            size_t n)
{
    vcuda_managed_attrs t;
    if (!data || !p || !n || vcuda_managed_attributes(p, n, &t)) return rt_record(cudaErrorInvalidValue);
    return range_attribute(data, size, a, &t);
}

EXPORT cudaError_t cudaMemRangeGetAttributes(void **data, size_t *sizes, enum cudaMemRangeAttribute *attrs,
                                             size_t nattrs, const void *p, size_t n)
{
    vcuda_managed_attrs t;
    cudaError_t e = cudaSuccess;
    if (!data || !sizes || !attrs || !nattrs || !p || !n || vcuda_managed_attributes(p, n, &t))
        return rt_record(cudaErrorInvalidValue);
    for (size_t i = 0; i < nattrs && !e; ++i) e = range_attribute(data[i], sizes[i], attrs[i], &t);
    return e;
}

/* Which launches the range goes with: any (global), none (host), or those on the stream.
 * Length 0 or the allocation's (the only ones the runtime takes for allocations). */
static cudaError_t attach(cudaStream_t s, void *p, size_t n, unsigned flags)
{
    int dev;
    if (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost && flags != cudaMemAttachSingle)
        return rt_record(cudaErrorInvalidValue);
    if (!p || !vcuda_managed_find(p, n, &dev)) return rt_record(cudaErrorInvalidValue);
    if (flags == cudaMemAttachSingle && (!s || s == cudaStreamLegacy || s == cudaStreamPerThread))
        return rt_record(cudaErrorInvalidValue);
    vcuda_managed_attach(p, flags, s);
    return cudaSuccess;
}

EXPORT cudaError_t cudaStreamAttachMemAsync(cudaStream_t s, void *p, size_t n, unsigned flags)
{
    return attach(s, p, n, flags);
}

/* A batch: each range to the location its entry of prefetchLocIdxs says (the first entry 0,
 * increasing, below count). */
EXPORT cudaError_t cudaMemPrefetchBatchAsync(void **dptrs, size_t *sizes, size_t count,
                                             struct cudaMemLocation *locs, size_t *loc_idxs, size_t nlocs,
                                             unsigned long long flags, cudaStream_t s)
{
    if (!dptrs || !sizes || !count || !locs || !loc_idxs || !nlocs || nlocs > count || loc_idxs[0] || flags)
        return rt_record(cudaErrorInvalidValue);
    for (size_t i = 1; i < nlocs; ++i)
        if (loc_idxs[i] <= loc_idxs[i - 1] || loc_idxs[i] >= count) return rt_record(cudaErrorInvalidValue);
    cudaError_t e = cudaSuccess;
    for (size_t i = 0, l = 0; i < count && !e; ++i) {
        while (l + 1 < nlocs && loc_idxs[l + 1] <= i) ++l;
        e = cudaMemPrefetchAsync(dptrs[i], sizes[i], locs[l], 0, s);
    }
    return e;
}

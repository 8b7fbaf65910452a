/* Device memory of the libcudart stand-in: allocation (plain, pitched, 3-D, stream-
 * ordered pools), copies and sets in all their forms, pinned host memory and pointer
 * attributes.  The table of this process's device allocations and the ranges of host
 * memory handed out as pinned live here, because copies decide their direction from
 * them (cudaMemcpyDefault) and kernel launches check their arguments against them. */
#define _GNU_SOURCE
#include "cudart_internal.h"
#include "managed.h"

pthread_mutex_t rt_alloc_mu = PTHREAD_MUTEX_INITIALIZER;
allocation *rt_allocs;
size_t rt_nalloc, rt_cap_alloc;

/* [base, +size) is device memory of `device` (cudaMemcpyDefault's question); 0 if the
 * table could hold it. */
int rt_table_add(int device, uint64_t base, uint64_t size)
{
    pthread_mutex_lock(&rt_alloc_mu);
    int ok = !rt_grow(&rt_allocs, &rt_cap_alloc, rt_nalloc, sizeof *rt_allocs);
    if (ok) rt_allocs[rt_nalloc++] = (allocation){device, base, size};
    pthread_mutex_unlock(&rt_alloc_mu);
    return ok ? 0 : -1;
}

/* A new allocation of the current device; one the table cannot hold is freed again. */
static cudaError_t remember(uint64_t base, uint64_t size)
{
    int ok = !rt_table_add(rt_current_device, base, size);
    if (!ok) {
        vcuda_msg r;
        rt_call(VCUDA_OP_FREE, &base, 1, &r, "cudaFree");
        return rt_record(cudaErrorMemoryAllocation);
    }
    return cudaSuccess;
}

/* Is a inside an allocation of the device (any device: -1)? */
static int in_allocation(uint64_t a, int device)
{
    int found = 0;
    pthread_mutex_lock(&rt_alloc_mu);
    for (size_t i = 0; i < rt_nalloc && !found; ++i)
        found = (device < 0 || rt_allocs[i].device == device) && a >= rt_allocs[i].base && a - rt_allocs[i].base < rt_allocs[i].size;
    pthread_mutex_unlock(&rt_alloc_mu);
    return found;
}

/* Is p inside an allocation of the current device?  (cudaMemcpyDefault's question.) */
int rt_is_device_pointer(const void *p) { return in_allocation((uint64_t)(uintptr_t)p, rt_current_device); }

/* ---- host memory handed out as pinned (zero-copy refusal) ----------------------------- */

/* With the real runtime, memory from cudaHostAlloc, cudaMallocHost and cudaHostRegister
 * is reachable by kernels at its host address (UVA), and programs rely on it (a kernel
 * writing a result into pinned memory).  Through vcuda that address means nothing to
 * the remote GPU: a kernel given it would fault there and take the context down.  So
 * every such range is kept here, sorted by base, and every launch path scans the
 * kernel's argument bytes for an address inside one of them (rt_host_arg) and refuses the
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
                    : rt_grow(&host_ranges, &cap_host, nhost, sizeof *host_ranges) ? cudaErrorMemoryAllocation
                                                                                 : cudaSuccess;
    if (!e) {
        memmove(&host_ranges[at + 1], &host_ranges[at], (nhost - at) * sizeof *host_ranges);
        host_ranges[at] = (host_range){base, end, from, flags};
        atomic_store_explicit(&nhost_seen, ++nhost, memory_order_relaxed);
    }
    pthread_mutex_unlock(&host_mu);
    return e ? rt_record(e) : cudaSuccess;
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
cudaError_t rt_host_arg(const char *api, const uint8_t *args, uint32_t nparams, const uint32_t *sizes)
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
    return rt_record(cudaErrorNotSupported);
}

EXPORT cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    vcuda_msg r;
    if (!free_bytes || !total) return rt_record(cudaErrorInvalidValue);
    cudaError_t e = rt_call(VCUDA_OP_MEM_GET_INFO, NULL, 0, &r, "cudaMemGetInfo");
    if (!e) *free_bytes = r.v[0], *total = r.v[1];
    return e;
}

/* ---- allocation, copies and sets --------------------------------------------------- */

EXPORT cudaError_t cudaMalloc(void **p, size_t size)
{
    vcuda_msg r;
    uint64_t v = size;
    if (!p) return rt_record(cudaErrorInvalidValue);
    if (size == 0) return *p = NULL, cudaSuccess;
    cudaError_t e = rt_call(VCUDA_OP_MALLOC, &v, 1, &r, "cudaMalloc");
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
    uint64_t alloc = rt_managed_release(v); /* managed memory: its host side goes, and the allocation behind it */
    cudaError_t e = rt_call(VCUDA_OP_FREE, &alloc, 1, &r, "cudaFree");
    if (e) return e;
    pthread_mutex_lock(&rt_alloc_mu);
    for (size_t i = 0; i < rt_nalloc; ++i)
        if (rt_allocs[i].device == rt_current_device && rt_allocs[i].base == v) {
            rt_allocs[i] = rt_allocs[--rt_nalloc];
            break;
        }
    pthread_mutex_unlock(&rt_alloc_mu);
    return cudaSuccess;
}

/* Host memory stays on this host: "pinned" means nothing to a copy that crosses a
 * socket, so page-aligned ordinary memory does.  Its range is remembered, so that a
 * kernel given an address in it is refused by name (see rt_host_arg). */
static cudaError_t host_alloc(void **p, size_t size, const char *api, unsigned flags)
{
    if (!p) return rt_record(cudaErrorInvalidValue);
    if (posix_memalign(p, 4096, size ? size : 1)) return *p = NULL, rt_record(cudaErrorMemoryAllocation);
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
        return rt_record(cudaErrorInvalidValue);
    if (flags & cudaHostAllocMapped)
        return unsupported("cudaHostAlloc", "mapped (zero-copy) host memory needs memory coherent with the GPU");
    return host_alloc(p, size, "cudaHostAlloc", flags);
}

EXPORT cudaError_t cudaFreeHost(void *p)
{
    if (p && !host_range_remove(p)) return rt_record(cudaErrorInvalidValue);
    free(p);
    return cudaSuccess;
}

cudaError_t rt_memcpy_remote(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t stream,
                             const char *api)
{
    char why[VCUDA_WHY_LEN];
    vcuda_msg m, r;
    uint64_t sh;
    cudaError_t e = rt_ready();
    if (e) return rt_record(e);
    if (rt_capture_copy(stream, dst, src, n, kind, &e)) return e;
    if ((e = rt_stream_handle(stream, &sh))) return rt_record(e);
    if (n && (e = rt_managed_copy(dst, n, src, n, &kind, api))) return e;
    if (kind == cudaMemcpyDefault)
        kind = rt_is_device_pointer(dst) ? (rt_is_device_pointer(src) ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                      : (rt_is_device_pointer(src) ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
    if (n == 0) return cudaSuccess;
    if (!dst || !src) return rt_record(cudaErrorInvalidValue);
    memset(&m, 0, sizeof m);
    switch (kind) {
    case cudaMemcpyHostToHost: memmove(dst, src, n); return cudaSuccess;
    case cudaMemcpyHostToDevice:
        m.hdr.opcode = VCUDA_OP_MEMCPY_H2D;
        m.hdr.flags = rt_host_sync ? VCUDA_FLAG_SYNC : 0;
        m.v[0] = (uint64_t)(uintptr_t)dst, m.v[1] = sh, m.nv = 2;
        return rt_result(vcuda_client_send_chunks(rt_current_device, &m, 0, src, n, vcuda_client_chunk(), &r, why), &r, api, why);
    case cudaMemcpyDeviceToHost:
        m.hdr.opcode = VCUDA_OP_MEMCPY_D2H;
        m.v[0] = (uint64_t)(uintptr_t)src, m.v[1] = n, m.v[2] = sh, m.nv = 3;
        return rt_result(vcuda_client_recv_chunks(rt_current_device, &m, dst, n, &r, why), &r, api, why);
    case cudaMemcpyDeviceToDevice:
        m.hdr.opcode = VCUDA_OP_MEMCPY_D2D;
        m.v[0] = (uint64_t)(uintptr_t)dst, m.v[1] = (uint64_t)(uintptr_t)src, m.v[2] = n, m.v[3] = sh, m.nv = 4;
        return rt_result(vcuda_client_call(rt_current_device, &m, &r, 0, why), &r, api, why);
    default: return rt_record(cudaErrorInvalidMemcpyDirection);
    }
}

EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    return SYNCHRONOUS("cudaMemcpy", rt_memcpy_remote(dst, src, n, kind, NULL, "cudaMemcpy"));
}

/* Ordered in its stream: a copy to host memory is complete on return, one from host
 * memory returns once the server holds the bytes (they are then copied in stream order,
 * as the runtime stages pageable memory). */
EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s)
{
    return rt_memcpy_remote(dst, src, n, kind, s, "cudaMemcpyAsync");
}

EXPORT cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t stream)
{
    vcuda_msg r;
    uint64_t sh;
    cudaError_t e = rt_ready();
    if (e) return rt_record(e);
    if (rt_capture_set(stream, p, n, value, n, 1, &e)) return e;
    if ((e = rt_stream_handle(stream, &sh))) return rt_record(e);
    if (n == 0) return cudaSuccess;
    if ((e = rt_managed_set(p, n, "cudaMemset"))) return e;
    uint64_t v[] = {(uint64_t)(uintptr_t)p, (uint64_t)(int64_t)value, n, sh};
    return rt_call(VCUDA_OP_MEMSET, v, 4, &r, "cudaMemset");
}

EXPORT cudaError_t cudaMemset(void *p, int value, size_t n)
{
    return SYNCHRONOUS("cudaMemset", cudaMemsetAsync(p, value, n, NULL));
}

/* ---- pitched, 2-D and 3-D memory ---------------------------------------------------- */

/* The pitch is the driver's own (cuMemAllocPitch on the server). */
EXPORT cudaError_t cudaMallocPitch(void **p, size_t *pitch, size_t width, size_t height)
{
    vcuda_msg r;
    if (!p || !pitch) return rt_record(cudaErrorInvalidValue);
    if (!width || !height) return *p = NULL, *pitch = 0, cudaSuccess;
    uint64_t v[] = {width, height};
    cudaError_t e = rt_call(VCUDA_OP_MALLOC_PITCH, v, 2, &r, "cudaMallocPitch");
    if (e || (e = remember(r.v[0], r.v[1] * height))) return e;
    *p = (void *)(uintptr_t)r.v[0], *pitch = r.v[1];
    return cudaSuccess;
}

EXPORT cudaError_t cudaMalloc3D(struct cudaPitchedPtr *pp, struct cudaExtent ext)
{
    void *p = NULL;
    size_t pitch = 0;
    if (!pp) return rt_record(cudaErrorInvalidValue);
    if (ext.height && ext.depth > SIZE_MAX / ext.height) return rt_record(cudaErrorInvalidValue);
    cudaError_t e = cudaMallocPitch(&p, &pitch, ext.width, ext.height * ext.depth);
    if (!e) *pp = (struct cudaPitchedPtr){p, pitch, ext.width, ext.height};
    return e;
}

/* One copy where both sides are contiguous, or the source is on the device (one copy of
 * the whole span, then the rows taken out here), or the destination is (rt_strided_copy);
 * rows one by one otherwise. */
static cudaError_t copy_2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                           enum cudaMemcpyKind kind, cudaStream_t stream, const char *api)
{
    cudaError_t e = cudaSuccess;
    if (!width || !height) return cudaSuccess;
    if (width > dpitch || width > spitch) return rt_record(cudaErrorInvalidPitchValue);
    if ((e = rt_managed_copy(dst, (height - 1) * dpitch + width, src, (height - 1) * spitch + width, &kind, api)))
        return e;
    if (kind == cudaMemcpyDefault)
        kind = rt_is_device_pointer(dst) ? (rt_is_device_pointer(src) ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                      : (rt_is_device_pointer(src) ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
    if (dpitch == width && spitch == width) return rt_memcpy_remote(dst, src, width * height, kind, stream, api);
    /* strided rows into device memory: one copy on the server (host rows through the
     * staging buffer: about four calls, so for more rows than that), not one call per
     * row; a capturing stream records the rows instead */
    if ((kind == cudaMemcpyDeviceToDevice ? height > 1 : kind == cudaMemcpyHostToDevice && height > 4) && !rt_capturing(stream))
        return rt_strided_copy(dst, dpitch, src, spitch, width, height, kind, stream, api);
    if (kind == cudaMemcpyDeviceToHost) {
        size_t span = (height - 1) * spitch + width;
        uint8_t *tmp = malloc(span);
        if (!tmp) return rt_record(cudaErrorMemoryAllocation);
        if (!(e = rt_memcpy_remote(tmp, src, span, kind, stream, api)))
            for (size_t y = 0; y < height; ++y) memcpy((uint8_t *)dst + y * dpitch, tmp + y * spitch, width);
        free(tmp);
        return e;
    }
    for (size_t y = 0; y < height && !e; ++y)
        e = rt_memcpy_remote((uint8_t *)dst + y * dpitch, (const uint8_t *)src + y * spitch, width, kind, stream, api);
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

cudaError_t rt_set_2d(void *p, size_t pitch, int value, size_t width, size_t height, cudaStream_t stream)
{
    vcuda_msg r;
    uint64_t sh;
    cudaError_t e = rt_ready();
    if (e) return rt_record(e);
    if (rt_capture_set(stream, p, pitch, value, width, height, &e)) return e;
    if ((e = rt_stream_handle(stream, &sh))) return rt_record(e);
    if (!width || !height) return cudaSuccess;
    if (width > pitch) return rt_record(cudaErrorInvalidPitchValue);
    if ((e = rt_managed_set(p, (height - 1) * pitch + width, "cudaMemset2D"))) return e;
    uint64_t v[] = {(uint64_t)(uintptr_t)p, pitch, (uint64_t)(int64_t)value, width, height, sh};
    return rt_call(VCUDA_OP_MEMSET_2D, v, 6, &r, "cudaMemset2D");
}

EXPORT cudaError_t cudaMemset2D(void *p, size_t pitch, int value, size_t width, size_t height)
{
    return SYNCHRONOUS("cudaMemset2D", rt_set_2d(p, pitch, value, width, height, NULL));
}
EXPORT cudaError_t cudaMemset2DAsync(void *p, size_t pitch, int value, size_t width, size_t height, cudaStream_t s)
{
    return rt_set_2d(p, pitch, value, width, height, s);
}

/* A 3-D set is one 2-D set where the slices are contiguous, else one per slice. */
static cudaError_t set_3d(struct cudaPitchedPtr pp, int value, struct cudaExtent ext, cudaStream_t s)
{
    cudaError_t e = cudaSuccess;
    if (!ext.depth) return cudaSuccess;
    if (ext.height == pp.ysize || ext.depth == 1)
        return rt_set_2d(pp.ptr, pp.pitch, value, ext.width, ext.height + (ext.depth - 1) * pp.ysize, s) ;
    for (size_t z = 0; z < ext.depth && !e; ++z)
        e = rt_set_2d((uint8_t *)pp.ptr + z * pp.pitch * pp.ysize, pp.pitch, value, ext.width, ext.height, s);
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

/* Linear memory: one 2-D copy per slice (with an array on a side: rt_copy_3d_array). */
cudaError_t rt_copy_3d(const struct cudaMemcpy3DParms *p, cudaStream_t s, const char *api)
{
    cudaError_t e = cudaSuccess;
    if (!p) return rt_record(cudaErrorInvalidValue);
    if (p->srcArray || p->dstArray) return rt_copy_3d_array(p, s, api);
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
    return SYNCHRONOUS("cudaMemcpy3D", rt_copy_3d(p, NULL, "cudaMemcpy3D"));
}
EXPORT cudaError_t cudaMemcpy3DAsync(const struct cudaMemcpy3DParms *p, cudaStream_t s) { return rt_copy_3d(p, s, "cudaMemcpy3DAsync"); }

/* Between two servers through this host, in chunks. */
static cudaError_t copy_peer(void *dst, int dst_dev, const void *src, int src_dev, size_t n, cudaStream_t s)
{
    cudaError_t e;
    if ((e = rt_valid_device(dst_dev)) || (e = rt_valid_device(src_dev))) return e;
    if (!n) return cudaSuccess;
    size_t chunk = n < ((size_t)64 << 20) ? n : ((size_t)64 << 20);
    uint8_t *tmp = malloc(chunk);
    if (!tmp) return rt_record(cudaErrorMemoryAllocation);
    int saved = rt_current_device;
    for (size_t off = 0; off < n && !e; off += chunk) {
        size_t k = n - off < chunk ? n - off : chunk;
        rt_current_device = src_dev;
        e = rt_memcpy_remote(tmp, (const uint8_t *)src + off, k, cudaMemcpyDeviceToHost, src_dev == saved ? s : NULL, "cudaMemcpyPeer");
        rt_current_device = dst_dev;
        if (!e) e = rt_memcpy_remote((uint8_t *)dst + off, tmp, k, cudaMemcpyHostToDevice, dst_dev == saved ? s : NULL, "cudaMemcpyPeer");
    }
    rt_current_device = saved;
    free(tmp);
    return e;
}
/* Serialized with all work, earlier and later, of the current, source and destination
 * devices (the runtime's words): each is synchronized first, and the copy is complete
 * on return. */
EXPORT cudaError_t cudaMemcpyPeer(void *dst, int dd, const void *src, int sd, size_t n)
{
    int saved = rt_current_device, devs[] = {saved, sd, dd};
    cudaError_t e = cudaSuccess;
    if ((e = rt_valid_device(dd)) || (e = rt_valid_device(sd))) return e;
    for (int i = 0; i < 3 && !e; ++i)
        if (i == 0 || (devs[i] != saved && (i == 1 || devs[i] != sd))) {
            rt_current_device = devs[i];
            e = cudaDeviceSynchronize();
        }
    rt_current_device = saved;
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
    cudaError_t e = rt_ready();
    if (e || (e = rt_stream_handle(s, &sh))) return rt_record(e);
    if (!pool || pool->magic != POOL_MAGIC) return rt_record(cudaErrorInvalidValue);
    int saved = rt_current_device;
    rt_current_device = pool->device;
    e = cudaMalloc(p, size);
    rt_current_device = saved;
    if (e || !size) return e;
    pthread_mutex_lock(&pool_mu);
    if (!rt_grow(&blocks, &cap_blocks, nblocks, sizeof *blocks)) {
        blocks[nblocks++] = (pool_block){(uint64_t)(uintptr_t)*p, size, pool};
        pool->used += size;
        if (pool->used > pool->used_high) pool->used_high = pool->used;
    }
    pthread_mutex_unlock(&pool_mu);
    return cudaSuccess;
}

EXPORT cudaError_t cudaMallocAsync(void **p, size_t size, cudaStream_t s)
{
    cudaError_t e = rt_ready();
    if (e) return rt_record(e);
    if (rt_capturing(s)) return p && size ? rt_capture_memory(rt_capturing(s), p, NULL, size, "cudaMallocAsync") : rt_record(cudaErrorInvalidValue);
    return pool_alloc(p, size, default_pool(rt_stream_device(s)), s);
}

EXPORT cudaError_t cudaMallocFromPoolAsync(void **p, size_t size, cudaMemPool_t pool, cudaStream_t s)
{
    if (rt_capturing(s)) return unsupported("cudaMallocFromPoolAsync", "an allocation from a pool of the program's in a capture");
    return pool_alloc(p, size, (mem_pool *)pool, s);
}

EXPORT cudaError_t cudaFreeAsync(void *p, cudaStream_t s)
{
    cudaError_t e;
    if (!p) return cudaSuccess;
    if (rt_capturing(s)) return rt_capture_memory(rt_capturing(s), NULL, p, 0, "cudaFreeAsync");
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
    cudaError_t e = rt_valid_device(device);
    if (!pool) return rt_record(cudaErrorInvalidValue);
    if (e) return e;
    default_pool(device);
    *pool = (cudaMemPool_t)&default_pools[device];
    return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceGetMemPool(cudaMemPool_t *pool, int device)
{
    cudaError_t e = rt_valid_device(device);
    if (!pool) return rt_record(cudaErrorInvalidValue);
    if (e) return e;
    *pool = (cudaMemPool_t)default_pool(device);
    return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t pool)
{
    mem_pool *p = (mem_pool *)pool;
    cudaError_t e = rt_valid_device(device);
    if (e) return e;
    if (!p || p->magic != POOL_MAGIC || p->device != device) return rt_record(cudaErrorInvalidValue);
    default_pool(device);
    pthread_mutex_lock(&pool_mu);
    current_pools[device] = p;
    pthread_mutex_unlock(&pool_mu);
    return cudaSuccess;
}

EXPORT cudaError_t cudaMemPoolCreate(cudaMemPool_t *pool, const struct cudaMemPoolProps *props)
{
    cudaError_t e;
    if (!pool || !props) return rt_record(cudaErrorInvalidValue);
    if (props->allocType != cudaMemAllocationTypePinned || props->location.type != cudaMemLocationTypeDevice ||
        props->handleTypes != cudaMemHandleTypeNone)
        return unsupported("cudaMemPoolCreate", "only device pools without export handles are remoted");
    if ((e = rt_valid_device(props->location.id))) return e;
    mem_pool *p = malloc(sizeof *p);
    if (!p) return rt_record(cudaErrorMemoryAllocation);
    *p = (mem_pool){POOL_MAGIC, props->location.id, {1, 1, 1}, 0, 0, 0};
    *pool = (cudaMemPool_t)p;
    return cudaSuccess;
}

EXPORT cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool)
{
    mem_pool *p = (mem_pool *)pool;
    if (!p || p->magic != POOL_MAGIC || p == &default_pools[p->device]) return rt_record(cudaErrorInvalidValue);
    pthread_mutex_lock(&pool_mu);
    if (current_pools[p->device] == p) current_pools[p->device] = &default_pools[p->device];
    pthread_mutex_unlock(&pool_mu);
    p->magic = 0; /* its blocks stay valid until freed, as the runtime allows */
    return cudaSuccess;
}

EXPORT cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t keep)
{
    (void)keep; /* freed blocks are returned to the server at once: nothing is held */
    return pool && ((mem_pool *)pool)->magic == POOL_MAGIC ? cudaSuccess : rt_record(cudaErrorInvalidValue);
}

/* Pool attributes: the reuse policies and threshold as the program set them, the
 * usage this process's stream-ordered allocations make (nothing is held beyond what is
 * in use: reserved == used; the high marks can only be reset, to the current use). */
static cudaError_t pool_attribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value, int set)
{
    mem_pool *p = (mem_pool *)pool;
    if (!p || p->magic != POOL_MAGIC || !value) return rt_record(cudaErrorInvalidValue);
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
    return e ? rt_record(e) : cudaSuccess;
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
    if (!p || !n) return rt_record(cudaErrorInvalidValue);
    if (flags & (cudaHostRegisterMapped | cudaHostRegisterIoMemory | cudaHostRegisterReadOnly))
        return unsupported("cudaHostRegister", "mapped (zero-copy) host memory needs memory coherent with the GPU");
    return host_range_add(p, n, "cudaHostRegister", flags);
}
EXPORT cudaError_t cudaHostUnregister(void *p)
{
    return p && host_range_remove(p) ? cudaSuccess : rt_record(cudaErrorHostMemoryNotRegistered);
}

EXPORT cudaError_t cudaHostGetDevicePointer(void **dp, void *hp, unsigned flags)
{
    (void)dp, (void)hp, (void)flags;
    return unsupported("cudaHostGetDevicePointer", "zero-copy host memory needs memory coherent with the GPU");
}

/* The flags pinned memory was made with (p anywhere inside it). */
EXPORT cudaError_t cudaHostGetFlags(unsigned *flags, void *p)
{
    if (!flags || !p) return rt_record(cudaErrorInvalidValue);
    pthread_mutex_lock(&host_mu);
    const host_range *r = host_range_of((uint64_t)(uintptr_t)p);
    if (r) *flags = r->flags;
    pthread_mutex_unlock(&host_mu);
    return r ? cudaSuccess : rt_record(cudaErrorInvalidValue);
}

/* Device memory is the device's; pinned memory is host memory with no device address
 * (the GPU cannot reach it: see rt_host_arg); anything else is unregistered. */
EXPORT cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *ptr)
{
    uint64_t p = (uint64_t)(uintptr_t)ptr;
    if (!a) return rt_record(cudaErrorInvalidValue);
    memset(a, 0, sizeof *a);
    a->type = cudaMemoryTypeUnregistered, a->device = -2;
    pthread_mutex_lock(&host_mu);
    if (host_range_of(p)) a->type = cudaMemoryTypeHost, a->device = rt_current_device, a->hostPointer = (void *)ptr;
    pthread_mutex_unlock(&host_mu);
    pthread_mutex_lock(&rt_alloc_mu);
    for (size_t i = 0; i < rt_nalloc; ++i)
        if (p >= rt_allocs[i].base && p - rt_allocs[i].base < rt_allocs[i].size) {
            /* (a device address wins where it coincides with a host one: see rt_host_arg) */
            a->type = cudaMemoryTypeDevice, a->device = rt_allocs[i].device, a->devicePointer = (void *)ptr;
            a->hostPointer = NULL;
            break;
        }
    pthread_mutex_unlock(&rt_alloc_mu);
    int dev;
    if (a->type == cudaMemoryTypeDevice && vcuda_managed_find(ptr, 0, &dev)) /* one address on both sides */
        a->type = cudaMemoryTypeManaged, a->device = dev, a->hostPointer = (void *)ptr;
    return cudaSuccess;
}

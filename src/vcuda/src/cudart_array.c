/* CUDA arrays, texture and surface objects of the libcudart stand-in.  The arrays are
 * the server's; this file keeps what they were made with, the staging buffers host
 * data crosses on the way to an array, and the descriptors of texture and surface
 * objects (asked back by cudaGetTextureObject*Desc). */
#define _GNU_SOURCE
#include "cudart_internal.h"

EXPORT struct cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w, enum cudaChannelFormatKind f)
{
    struct cudaChannelFormatDesc d = {x, y, z, w, f};
    return d;
}

/* ---- CUDA arrays, texture and surface objects ------------------------------------- */
/* A cudaArray_t points at one of these: the server's handle (an id in this client's
 * table there), the device it lives on, and what it was made with (for cudaArrayGetInfo
 * and for the element size that array offsets and extents are counted in).  Host data
 * reaches an array through a device buffer of this client's, with the ordinary chunked
 * copies (rt_memcpy_remote), then one MEMCPY_3D on the server: the array logic there is
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
    return r && r->magic == ARRAY_MAGIC && r->device == rt_current_device ? r : NULL;
}

/* cudaChannelFormatDesc -> CUarray_format and channel count: 1, 2 or 4 channels of one
 * width, signed, unsigned or float (the formats the protocol takes). */
static cudaError_t channel_format(const struct cudaChannelFormatDesc *d, unsigned *format, unsigned *channels)
{
    int bits[4] = {d->x, d->y, d->z, d->w}, n = 0;
    while (n < 4 && bits[n]) ++n;
    for (int i = n; i < 4; ++i)
        if (bits[i]) return rt_record(cudaErrorInvalidChannelDescriptor);
    for (int i = 1; i < n; ++i)
        if (bits[i] != bits[0]) return rt_record(cudaErrorInvalidChannelDescriptor);
    if (n == 0 || n == 3) return rt_record(cudaErrorInvalidChannelDescriptor);
    unsigned f = 0, b = (unsigned)bits[0];
    if (d->f == cudaChannelFormatKindUnsigned) f = b == 8 ? 0x01 : b == 16 ? 0x02 : b == 32 ? 0x03 : 0;
    else if (d->f == cudaChannelFormatKindSigned) f = b == 8 ? 0x08 : b == 16 ? 0x09 : b == 32 ? 0x0a : 0;
    else if (d->f == cudaChannelFormatKindFloat) f = b == 16 ? 0x10 : b == 32 ? 0x20 : 0;
    else return unsupported("cudaChannelFormatDesc", "only signed, unsigned and float channels are remoted");
    if (!f) return rt_record(cudaErrorInvalidChannelDescriptor);
    *format = f, *channels = (unsigned)n;
    return cudaSuccess;
}

static cudaError_t array_create(cudaArray_t *out, const struct cudaChannelFormatDesc *desc, struct cudaExtent ext,
                                unsigned flags, const char *api)
{
    vcuda_msg r;
    unsigned format, channels;
    cudaError_t e;
    if (!out || !desc || !ext.width) return rt_record(cudaErrorInvalidValue);
    if (flags & ~0xfu) return unsupported(api, "sparse, deferred-mapping and color-attachment arrays are not remoted");
    if ((e = channel_format(desc, &format, &channels))) return e;
    uint64_t v[] = {format, channels, ext.width, ext.height, ext.depth, flags};
    if ((e = rt_call(VCUDA_OP_ARRAY_CREATE, v, 6, &r, api))) return e;
    remote_array *a = malloc(sizeof *a);
    if (!a) {
        rt_call(VCUDA_OP_ARRAY_DESTROY, &r.v[0], 1, &r, api);
        return rt_record(cudaErrorMemoryAllocation);
    }
    *a = (remote_array){ARRAY_MAGIC, rt_current_device, r.v[0], *desc, ext, flags, (unsigned)(desc->x + desc->y + desc->z + desc->w) / 8,
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
    if (a->magic != ARRAY_MAGIC) return rt_record(cudaErrorInvalidResourceHandle);
    int saved = rt_current_device;
    rt_current_device = a->device; /* freed by the server that made it, whichever is current */
    cudaError_t e = rt_call(VCUDA_OP_ARRAY_DESTROY, &a->handle, 1, &r, "cudaFreeArray");
    rt_current_device = saved;
    if (!e) a->magic = 0, free(a);
    return e;
}

EXPORT cudaError_t cudaArrayGetInfo(struct cudaChannelFormatDesc *desc, struct cudaExtent *ext, unsigned *flags,
                                    cudaArray_t arr)
{
    const remote_array *a = as_array(arr);
    if (!a) return rt_record(cudaErrorInvalidResourceHandle);
    if (desc) *desc = a->desc;
    if (ext) *ext = a->ext;
    if (flags) *flags = a->flags;
    return cudaSuccess;
}

EXPORT cudaError_t cudaGetChannelDesc(struct cudaChannelFormatDesc *desc, cudaArray_const_t arr)
{
    const remote_array *a = as_array(arr);
    if (!desc) return rt_record(cudaErrorInvalidValue);
    if (!a) return rt_record(cudaErrorInvalidResourceHandle);
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
    if ((e = rt_stream_handle(s, &sh))) return e;
    side_words(src, w + VCUDA_C_SRC_TYPE), side_words(dst, w + VCUDA_C_DST_TYPE);
    w[VCUDA_C_WIDTH] = width, w[VCUDA_C_HEIGHT] = height, w[VCUDA_C_DEPTH] = depth;
    if (vcuda_desc_encode(VCUDA_DESC_COPY, w, desc, sizeof desc, &len, why)) {
        fprintf(stderr, "vcuda: %s: %s\n", api, why);
        return rt_record(cudaErrorInvalidValue);
    }
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_MEMCPY_3D;
    m.v[0] = sh, m.nv = 1, m.blob = desc, m.blob_len = (uint32_t)len;
    return rt_result(vcuda_client_call(rt_current_device, &m, &r, 0, why), &r, api, why);
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
void rt_staging_forget(int device)
{
    pthread_mutex_lock(&staging_mu);
    free(staging[device].done); /* (the local half of a remote event) */
    memset(&staging[device], 0, sizeof staging[device]);
    pthread_mutex_unlock(&staging_mu);
}

/* The bytes from a memory side's start that a copy of width x height x depth touches
 * (0 for an array side). */
static size_t memory_span(const copy_end *c, size_t width, size_t height, size_t depth)
{
    if (c->array || !c->ptr) return 0;
    size_t rows = depth > 1 ? c->rows : c->y + height;
    return ((c->z + depth - 1) * rows + c->y + height - 1) * c->pitch + c->x + width;
}

/* Any copy with an array on one side at least (width in bytes, x offsets in bytes), or
 * strided rows into device memory.  A host side goes through the staging buffer. */
static cudaError_t array_copy(copy_end dst, copy_end src, size_t width, size_t height, size_t depth,
                              enum cudaMemcpyKind kind, cudaStream_t s, const char *api)
{
    cudaError_t e = rt_ready();
    if (e) return rt_record(e);
    if (rt_capturing(s)) return unsupported(api, "copies to and from CUDA arrays are not captured into graphs");
    if ((dst.array && dst.array->magic != ARRAY_MAGIC) || (src.array && src.array->magic != ARRAY_MAGIC))
        return rt_record(cudaErrorInvalidResourceHandle);
    if (!width || !height || !depth) return cudaSuccess;
    /* managed memory is device memory to the copy (its dirty pages go first) */
    if ((e = rt_managed_copy(dst.ptr, memory_span(&dst, width, height, depth), src.ptr,
                             memory_span(&src, width, height, depth), &kind, api)))
        return e;
    if (kind == cudaMemcpyDefault)
        kind = (dst.array || rt_is_device_pointer(dst.ptr)) ? (src.array || rt_is_device_pointer(src.ptr)) ? cudaMemcpyDeviceToDevice
                                                                                                    : cudaMemcpyHostToDevice
                                                         : cudaMemcpyDeviceToHost;
    int host_src = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyHostToHost;
    int host_dst = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToHost;
    if ((host_src && src.array) || (host_dst && dst.array) || (host_src && host_dst)) return rt_record(cudaErrorInvalidMemcpyDirection);
    if (!host_src && !host_dst) return copy_on_server(&dst, &src, width, height, depth, s, api);
    copy_end *host = host_src ? &src : &dst, staged = {NULL, NULL, width, height, 0, 0, 0};
    if (height > SIZE_MAX / width || depth > SIZE_MAX / (width * height) || width > host->pitch ||
        (depth > 1 && host->rows < host->y + height))
        return rt_record(cudaErrorInvalidValue); /* (slices of the host box would overlap) */
    size_t total = width * height * depth;
    uint8_t *packed = malloc(total); /* the host box's rows back to back: one transfer */
    if (!packed) return rt_record(cudaErrorMemoryAllocation);
    staging_buffer *sb = &staging[rt_current_device];
    pthread_mutex_lock(&staging_mu);
    if ((e = staging_take(sb, total))) return pthread_mutex_unlock(&staging_mu), free(packed), e;
    staged.ptr = sb->buf;
    for (size_t z = 0; z < depth; ++z)
        for (size_t y = 0; y < height; ++y) {
            uint8_t *row = host->ptr + ((host->z + z) * host->rows + host->y + y) * host->pitch + host->x;
            if (host_src) memcpy(packed + (z * height + y) * width, row, width);
        }
    if (host_src) e = rt_memcpy_remote(staged.ptr, packed, total, cudaMemcpyHostToDevice, s, api);
    if (!e) e = host_src ? copy_on_server(&dst, &staged, width, height, depth, s, api)
                         : copy_on_server(&staged, &src, width, height, depth, s, api);
    if (!e && host_dst && !(e = rt_memcpy_remote(packed, staged.ptr, total, cudaMemcpyDeviceToHost, s, api)))
        for (size_t z = 0; z < depth; ++z)
            for (size_t y = 0; y < height; ++y)
                memcpy(host->ptr + ((host->z + z) * host->rows + host->y + y) * host->pitch + host->x,
                       packed + (z * height + y) * width, width);
    /* host data in the buffer: the next user waits until this copy has read it */
    if (!e && host_src && !(e = cudaEventRecord(sb->done, s))) sb->pending = 1;
    if (!e && host_src && rt_host_sync) e = cudaStreamSynchronize(s); /* (see "host-synchronous calls", cudart_stream.c) */
    if (sb->size > STAGING_KEEP) { /* not kept: the free waits for the copy (see above) */
        cudaFree(sb->buf);
        sb->buf = NULL, sb->size = 0, sb->pending = 0;
    }
    pthread_mutex_unlock(&staging_mu);
    free(packed);
    return e;
}

static copy_end at_memory(const void *p, size_t pitch);
cudaError_t rt_strided_copy(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
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
    do { if (!as_array(a)) return rt_record(cudaErrorInvalidResourceHandle); } while (0)

EXPORT cudaError_t cudaMemcpy2DToArrayAsync(cudaArray_t dst, size_t wo, size_t ho, const void *src, size_t spitch, size_t width,
                                            size_t height, enum cudaMemcpyKind kind, cudaStream_t s)
{
    ARRAY_ARG(dst);
    if (width > spitch && height > 1) return rt_record(cudaErrorInvalidPitchValue);
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
    if (width > dpitch && height > 1) return rt_record(cudaErrorInvalidPitchValue);
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
    if (kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault) return rt_record(cudaErrorInvalidMemcpyDirection);
    return SYNCHRONOUS("cudaMemcpy2DArrayToArray", array_copy(at_array(dst, wod, hod), at_array(src, wos, hos), width, height, 1,
                                                              kind, NULL, "cudaMemcpy2DArrayToArray"));
}

/* The deprecated linear forms: count bytes from (x, y) on, row after row of the array. */
static cudaError_t linear_array_copy(remote_array *a, size_t x, size_t y, void *mem, size_t count, int to_array,
                                     enum cudaMemcpyKind kind, cudaStream_t s, const char *api)
{
    cudaError_t e = cudaSuccess;
    if (!a) return rt_record(cudaErrorInvalidResourceHandle);
    size_t row = a->ext.width * a->elem;
    uint8_t *p = mem;
    while (count && !e) {
        if (x >= row) return rt_record(cudaErrorInvalidValue);
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
cudaError_t rt_copy_3d_array(const struct cudaMemcpy3DParms *p, cudaStream_t s, const char *api)
{
    remote_array *sa = p->srcArray ? as_array(p->srcArray) : NULL, *da = p->dstArray ? as_array(p->dstArray) : NULL;
    if ((p->srcArray && !sa) || (p->dstArray && !da)) return rt_record(cudaErrorInvalidResourceHandle);
    size_t elem = sa ? sa->elem : da->elem;
    copy_end src = {sa, (uint8_t *)p->srcPtr.ptr, p->srcPtr.pitch, p->srcPtr.ysize, p->srcPos.x * (sa ? sa->elem : 1), p->srcPos.y,
                    p->srcPos.z};
    copy_end dst = {da, (uint8_t *)p->dstPtr.ptr, p->dstPtr.pitch, p->dstPtr.ysize, p->dstPos.x * (da ? da->elem : 1), p->dstPos.y,
                    p->dstPos.z};
    if (p->extent.width > SIZE_MAX / elem) return rt_record(cudaErrorInvalidValue);
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
    int ok = !rt_grow(&tex_records, &cap_tex, ntex, sizeof *tex_records);
    if (ok) tex_records[ntex] = *t, tex_records[ntex++].obj = obj;
    pthread_mutex_unlock(&tex_mu);
    return ok ? cudaSuccess : rt_record(cudaErrorMemoryAllocation);
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
        if (!(a = as_array(res->res.array.array))) return rt_record(cudaErrorInvalidResourceHandle);
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
    cudaError_t e = rt_ready();
    if (e) return rt_record(e);
    if (!out || !res || !tex) return rt_record(cudaErrorInvalidValue);
    if ((e = texture_words(res, tex, view, w))) return e;
    if (vcuda_desc_encode(VCUDA_DESC_TEX, w, desc, sizeof desc, &len, why)) {
        fprintf(stderr, "vcuda: cudaCreateTextureObject: %s\n", why);
        return rt_record(cudaErrorInvalidValue);
    }
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_TEX_CREATE;
    m.blob = desc, m.blob_len = (uint32_t)len;
    if ((e = rt_result(vcuda_client_call(rt_current_device, &m, &r, 0, why), &r, "cudaCreateTextureObject", why))) return e;
    tex_record t;
    memset(&t, 0, sizeof t);
    t.device = rt_current_device, t.res = *res, t.tex = *tex, t.has_view = view != NULL;
    if (view) t.view = *view;
    if ((e = remember_tex(r.v[0], &t))) return e;
    *out = (cudaTextureObject_t)r.v[0];
    return cudaSuccess;
}

EXPORT cudaError_t cudaCreateSurfaceObject(cudaSurfaceObject_t *out, const struct cudaResourceDesc *res)
{
    vcuda_msg r;
    cudaError_t e = rt_ready();
    if (e) return rt_record(e);
    if (!out || !res) return rt_record(cudaErrorInvalidValue);
    const remote_array *a = res->resType == cudaResourceTypeArray ? as_array(res->res.array.array) : NULL;
    if (!a) return rt_record(cudaErrorInvalidResourceHandle);
    if ((e = rt_call(VCUDA_OP_SURF_CREATE, &a->handle, 1, &r, "cudaCreateSurfaceObject"))) return e;
    tex_record t;
    memset(&t, 0, sizeof t);
    t.device = rt_current_device, t.surface = 1, t.res = *res;
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
    int device = t ? t->device : rt_current_device;
    pthread_mutex_unlock(&tex_mu);
    int saved = rt_current_device;
    rt_current_device = device;
    cudaError_t e = rt_call(surface ? VCUDA_OP_SURF_DESTROY : VCUDA_OP_TEX_DESTROY, &v, 1, &r, api);
    rt_current_device = saved;
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
    if (!out) return rt_record(cudaErrorInvalidValue);
    pthread_mutex_lock(&tex_mu);
    tex_record *t = find_tex(obj, surface);
    if (t && which == 0) memcpy(out, &t->res, sizeof t->res);
    if (t && which == 1) memcpy(out, &t->tex, sizeof t->tex);
    if (t && which == 2) {
        if (t->has_view) memcpy(out, &t->view, sizeof t->view);
        else memset(out, 0, sizeof t->view);
    }
    pthread_mutex_unlock(&tex_mu);
    return t ? cudaSuccess : rt_record(cudaErrorInvalidValue);
}
EXPORT cudaError_t cudaGetTextureObjectResourceDesc(struct cudaResourceDesc *d, cudaTextureObject_t o) { return tex_desc(d, o, 0, 0); }
EXPORT cudaError_t cudaGetTextureObjectTextureDesc(struct cudaTextureDesc *d, cudaTextureObject_t o) { return tex_desc(d, o, 0, 1); }
EXPORT cudaError_t cudaGetTextureObjectResourceViewDesc(struct cudaResourceViewDesc *d, cudaTextureObject_t o)
{
    return tex_desc(d, o, 0, 2);
}
EXPORT cudaError_t cudaGetSurfaceObjectResourceDesc(struct cudaResourceDesc *d, cudaSurfaceObject_t o) { return tex_desc(d, o, 1, 0); }

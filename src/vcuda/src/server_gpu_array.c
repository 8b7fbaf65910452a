/* CUDA arrays, texture and surface objects of the vcuda server (wire codes 60..): the
 * arrays and objects are the client's handles, arrays charged to the memory quota, and
 * the 3-D copies between arrays and device memory checked against the client's tables. */
#define _GNU_SOURCE
#include "server_gpu_internal.h"

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
    if (sg_grow((void **)&cl->handles, &cl->cap_handle, cl->nhandle + 1, sizeof(handle), MAX_HANDLES)) return -1;
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
        handle *h = sg_find_handle(cl, w[1], H_ARRAY);
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
    if (span == UINT64_MAX || start == UINT64_MAX || w[1] > UINT64_MAX - start || !sg_find_range(cl, w[1] + start, span))
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
    if (vcuda_desc_decode(VCUDA_DESC_COPY, q->blob, q->blob_len, w, why)) return sg_reply_invalid(cl, r, 1, "MEMCPY_3D: %s", why);
    if (sg_stream_of(cl, q->v[0], &s)) return sg_reply_invalid(cl, r, 400, "MEMCPY_3D: unknown stream");
    const uint64_t *ext = w + VCUDA_C_WIDTH;
    if (!ext[0] || !ext[1] || !ext[2]) return 0;
    memset(&p, 0, sizeof p);
    if (copy_side(cl, w + VCUDA_C_SRC_TYPE, ext, &p.src_type, &p.src_device, &p.src_array, sv) ||
        copy_side(cl, w + VCUDA_C_DST_TYPE, ext, &p.dst_type, &p.dst_device, &p.dst_array, dv))
        return sg_reply_invalid(cl, r, 1, "MEMCPY_3D: a side is not an array or a range of this client's, or the box is outside it");
    p.src_x = sv[0], p.src_y = sv[1], p.src_z = sv[2], p.src_pitch = sv[3], p.src_height = sv[4];
    p.dst_x = dv[0], p.dst_y = dv[1], p.dst_z = dv[2], p.dst_pitch = dv[3], p.dst_height = dv[4];
    p.width = ext[0], p.height = ext[1], p.depth = ext[2];
    return (rc = g->cu.cuMemcpy3DAsync_v2(&p, s)) ? sg_reply_cu(g, cl, r, "MEMCPY_3D", rc) : 0;
}

static int array_create(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    uint64_t fmt = q->v[0], ch = q->v[1], wd = q->v[2], ht = q->v[3], dp = q->v[4], flags = q->v[5];
    unsigned elem = vcuda_format_bytes(fmt) * (unsigned)(ch <= 4 ? ch : 0);
    CUresult rc;
    /* CUDA_ARRAY3D_LAYERED, SURFACE_LDST, CUBEMAP, TEXTURE_GATHER */
    if (!elem || ch == 3 || (flags & ~(uint64_t)0xf) || !wd)
        return sg_reply_invalid(cl, r, 1, "ARRAY_CREATE: format 0x%llx x %llu channels, flags 0x%llx, width %llu",
                                (unsigned long long)fmt, (unsigned long long)ch, (unsigned long long)flags, (unsigned long long)wd);
    uint64_t bytes = mul_add(mul_add(wd, ht ? ht : 1, 0), dp ? dp : 1, 0);
    bytes = bytes == UINT64_MAX ? bytes : mul_add(bytes, elem, 0);
    if (bytes == UINT64_MAX) return sg_reply_invalid(cl, r, 2, "ARRAY_CREATE: too large");
    if (sg_charge(cl, r, "ARRAY_CREATE", bytes)) return 0;
    array_info *a = calloc(1, sizeof *a);
    if (!a) return sg_uncharge(cl, bytes), sg_reply_invalid(cl, r, 2, "ARRAY_CREATE: out of memory");
    array3d_desc d = {wd, ht, dp, (int)fmt, (unsigned)ch, (unsigned)flags};
    if ((rc = g->cu.cuArray3DCreate_v2(&a->arr, &d))) return free(a), sg_uncharge(cl, bytes), sg_reply_cu(g, cl, r, "ARRAY_CREATE", rc);
    *a = (array_info){a->arr, wd, ht, dp, bytes, elem, (unsigned)fmt, (unsigned)ch};
    uint64_t id = sg_add_handle(cl, H_ARRAY, a);
    if (!id) return g->cu.cuArrayDestroy(a->arr), free(a), sg_uncharge(cl, bytes), sg_reply_invalid(cl, r, 2, "handle limit reached");
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
        handle *h = sg_find_handle(cl, w[VCUDA_T_RES], H_ARRAY);
        return h ? (rd->res.array.array = ((array_info *)h->obj)->arr, 0) : -1;
    }
    if (rd->type == VCUDA_RES_LINEAR) {
        rd->res.linear.ptr = w[VCUDA_T_RES], rd->res.linear.format = (int)w[VCUDA_T_FORMAT];
        rd->res.linear.channels = (unsigned)w[VCUDA_T_CHANNELS], rd->res.linear.bytes = w[VCUDA_T_WIDTH];
        return w[VCUDA_T_WIDTH] && sg_find_range(cl, w[VCUDA_T_RES], w[VCUDA_T_WIDTH]) ? 0 : -1;
    }
    uint64_t rowb = w[VCUDA_T_WIDTH] * elem, ht = w[VCUDA_T_HEIGHT], pitch = w[VCUDA_T_PITCH];
    rd->res.pitch2d.ptr = w[VCUDA_T_RES], rd->res.pitch2d.format = (int)w[VCUDA_T_FORMAT];
    rd->res.pitch2d.channels = (unsigned)w[VCUDA_T_CHANNELS];
    rd->res.pitch2d.width = w[VCUDA_T_WIDTH], rd->res.pitch2d.height = ht, rd->res.pitch2d.pitch = pitch;
    if (!rowb || !ht || rowb > pitch) return -1;
    uint64_t span = mul_add(ht - 1, pitch, rowb);
    return span != UINT64_MAX && sg_find_range(cl, w[VCUDA_T_RES], span) ? 0 : -1;
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
    if (vcuda_desc_decode(VCUDA_DESC_TEX, q->blob, q->blob_len, w, why)) return sg_reply_invalid(cl, r, 1, "TEX_CREATE: %s", why);
    if (resource(cl, w, &rd))
        return sg_reply_invalid(cl, r, 1, "TEX_CREATE: the resource is not an array or a range of this client's");
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
    if ((rc = g->cu.cuTexObjectCreate(&obj, &rd, &td, w[VCUDA_T_VIEW] ? &vd : NULL))) return sg_reply_cu(g, cl, r, "TEX_CREATE", rc);
    if (add_object(cl, H_TEXTURE, obj)) return g->cu.cuTexObjectDestroy(obj), sg_reply_invalid(cl, r, 2, "handle limit reached");
    r->v[0] = obj, r->nv = 1;
    return 0;
}

int sg_array_requests(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
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
        if (!(h = sg_find_handle(cl, q->v[0], H_ARRAY))) return sg_reply_invalid(cl, r, 400, "SURF_CREATE: unknown array");
        memset(&rd, 0, sizeof rd);
        rd.type = VCUDA_RES_ARRAY, rd.res.array.array = ((array_info *)h->obj)->arr;
        if ((rc = g->cu.cuSurfObjectCreate(&obj, &rd))) return sg_reply_cu(g, cl, r, op, rc);
        if (add_object(cl, H_SURFACE, obj)) return g->cu.cuSurfObjectDestroy(obj), sg_reply_invalid(cl, r, 2, "handle limit reached");
        r->v[0] = obj, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_ARRAY_DESTROY: {
        if (!(h = sg_find_handle(cl, q->v[0], H_ARRAY))) return sg_reply_invalid(cl, r, 400, "ARRAY_DESTROY: not an array of this client");
        array_info *a = h->obj;
        if ((rc = g->cu.cuArrayDestroy(a->arr))) return sg_reply_cu(g, cl, r, op, rc);
        sg_uncharge(cl, a->bytes);
        free(a);
        sg_remove_handle(cl, h);
        return 0;
    }
    default: { /* TEX_DESTROY, SURF_DESTROY */
        int tex = q->hdr.opcode == VCUDA_OP_TEX_DESTROY;
        if (!(h = sg_find_handle(cl, q->v[0], tex ? H_TEXTURE : H_SURFACE)))
            return sg_reply_invalid(cl, r, 400, "%s: 0x%llx is not a %s object of this client", op, (unsigned long long)q->v[0],
                                    tex ? "texture" : "surface");
        rc = tex ? g->cu.cuTexObjectDestroy(h->id) : g->cu.cuSurfObjectDestroy(h->id);
        sg_remove_handle(cl, h);
        return rc ? sg_reply_cu(g, cl, r, op, rc) : 0;
    }
    }
}

/* A client's objects, then its arrays (they may be in use by the objects), when it goes. */
void sg_arrays_release(vcuda_gpu *g, client *cl, int alive)
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

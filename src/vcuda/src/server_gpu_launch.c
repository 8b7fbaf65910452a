/* Modules and kernel launches of the vcuda server: the cache of validated module
 * images (by the SHA-256 the server computes), each client's own modules loaded from
 * it and charged to its tenant, function lookups with their parameter layout, and
 * launches with the argument bytes unpacked by that layout.  The image cache is
 * per GPU and shared by clients for transfer savings only, never for state. */
#define _GNU_SOURCE
#include "server_gpu_internal.h"

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
    if (size > sg_limits.cache_bytes) return;
    for (int i = 0; i < g->nimages; ++i)
        if (!memcmp(g->images[i].hash, hash, VCUDA_HASH_SIZE)) return;
    while (g->nimages && (g->nimages == MAX_IMAGES || g->image_bytes + size > sg_limits.cache_bytes)) {
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

/* Kernel arguments as the driver takes them, one aligned pointer per parameter, from
 * bytes packed by the kernel's own sizes (the caller checked their total).  Per worker
 * thread (clients launch concurrently); valid until its next call. */
void **sg_unpack_params(const function_info *fi, const uint8_t *blob)
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
const function_info *sg_launch_function(client *cl, uint64_t id, const vcuda_msg *q, vcuda_msg *r, const char *what)
{
    handle *h = sg_find_handle(cl, id, H_FUNCTION);
    if (!h) return sg_reply_invalid(cl, r, 98 /* cudaErrorInvalidDeviceFunction */, "%s: unknown function handle", what), NULL;
    const function_info *fi = h->obj;
    if (q->nsizes != fi->n || memcmp(q->sizes, fi->sizes, fi->n * sizeof *fi->sizes))
        return sg_reply_invalid(cl, r, 1, "%s: %u arguments given, the kernel takes %u (or their sizes differ)", what,
                                q->nsizes, fi->n), NULL;
    return fi;
}

/* LAUNCH_EX's attributes as the driver takes them; -1 after an error reply. */
static int launch_attributes(client *cl, const vcuda_msg *q, vcuda_msg *r, launch_attribute *a, unsigned *n)
{
    uint64_t flags = q->v[9];
    *n = 0;
    if (flags & ~(uint64_t)VCUDA_LAUNCH_KNOWN)
        return sg_reply_invalid(cl, r, 1, "LAUNCH_EX: unknown attribute flags 0x%llx", (unsigned long long)flags), -1;
    if (q->v[14] > 1) return sg_reply_invalid(cl, r, 1, "LAUNCH_EX: memory sync domain %llu", (unsigned long long)q->v[14]), -1;
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
int sg_launch(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    const char *what = vcuda_opcode_name(q->hdr.opcode);
    const function_info *fi = sg_launch_function(cl, q->v[0], q, r, what);
    CUstream s;
    launch_attribute attrs[5];
    unsigned nattrs = 0;
    if (!fi) return 0;
    if (sg_stream_of(cl, q->v[8], &s)) return sg_reply_invalid(cl, r, 400, "%s: unknown stream", what);
    if (q->hdr.opcode == VCUDA_OP_LAUNCH_EX && launch_attributes(cl, q, r, attrs, &nattrs)) return 0;
    void **params = sg_unpack_params(fi, q->blob);
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
    return rc ? sg_reply_cu(g, cl, r, what, rc) : 0;
}

int sg_function_get(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    handle *mh = sg_find_handle(cl, q->v[0], H_MODULE);
    char name[VCUDA_MAX_STRING + 1];
    CUfunction f;
    CUresult rc;
    if (!mh) return sg_reply_invalid(cl, r, 400, "FUNCTION_GET: unknown module handle");
    memcpy(name, q->str, q->str_len), name[q->str_len] = 0;
    if ((rc = g->cu.cuModuleGetFunction(&f, ((cached_module *)mh->obj)->mod, name)))
        return sg_reply_cu(g, cl, r, "FUNCTION_GET", rc);
    function_info *fi = calloc(1, sizeof *fi);
    if (!fi) return sg_reply_invalid(cl, r, 2, "FUNCTION_GET: server out of memory");
    fi->f = f;
    fi->owner = ((cached_module *)mh->obj)->mod;
    for (;;) {
        size_t off, size;
        rc = g->cu.cuFuncGetParamInfo(f, fi->n, &off, &size);
        if (rc == CU_INVALID_VALUE) break; /* past the last parameter */
        if (rc) {
            free(fi);
            return sg_reply_cu(g, cl, r, "FUNCTION_GET (cuFuncGetParamInfo)", rc);
        }
        if (fi->n == VCUDA_MAX_PARAMS || size < 1 || size > VCUDA_MAX_PARAM_BYTES) {
            free(fi);
            return sg_reply_invalid(cl, r, 1, "FUNCTION_GET: %s has a parameter layout vcuda cannot carry", name);
        }
        fi->sizes[fi->n++] = (uint32_t)size;
    }
    uint64_t id = sg_add_handle(cl, H_FUNCTION, fi);
    if (!id) {
        free(fi);
        return sg_reply_invalid(cl, r, 2, "FUNCTION_GET: handle limit reached");
    }
    r->v[0] = id, r->nv = 1;
    r->nsizes = fi->n;
    memcpy(r->sizes, fi->sizes, fi->n * sizeof *fi->sizes);
    return 0;
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
int sg_module(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    const char *api = vcuda_opcode_name(q->hdr.opcode);
    uint8_t *img = NULL, h[VCUDA_HASH_SIZE];
    size_t len = 0;
    char bad[VCUDA_WHY_LEN];
    uint64_t bytes = 0, extra = 0;
    unsized_names un;
    memset(&un, 0, sizeof un);
    if (cl->nmodules >= sg_limits.max_modules)
        return sg_reply_invalid(cl, r, 2, "%s: this client has %u modules loaded (limit %u)", api, cl->nmodules,
                                sg_limits.max_modules);
    if (q->hdr.opcode == VCUDA_OP_MODULE_LOOKUP) {
        pthread_mutex_lock(&g->mu);
        img = cache_copy(g, q->hash, &len, &bytes, &un);
        pthread_mutex_unlock(&g->mu);
        if (!img) return sg_reply_invalid(cl, r, CU_NOT_FOUND, "MODULE_LOOKUP: not cached; send MODULE_LOAD");
        memcpy(h, q->hash, sizeof h);
    } else {
        /* the name first (cheap next to validating): the same bytes validated for an
         * earlier client are taken from the cache, not decompressed and checked again */
        vcuda_sha256(q->blob, q->blob_len, h);
        if (memcmp(h, q->hash, VCUDA_HASH_SIZE))
            return sg_reply_invalid(cl, r, 1, "MODULE_LOAD: the image does not hash to the name sent");
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
            if (v == VCUDA_IMAGE_BUSY) return sg_reply_invalid(cl, r, 2 /* cudaErrorMemoryAllocation */, "MODULE_LOAD: %s", bad);
            if (v) return sg_reply_invalid(cl, r, 200 /* cudaErrorInvalidKernelImage */, "MODULE_LOAD: %s", bad);
            if (overflow)
                return sg_reply_invalid(cl, r, 200, "%s: more than %d PTX variables of types this server cannot size", api,
                                        MAX_UNSIZED);
            if (!(img = malloc(q->blob_len)))
                return free(un.names), sg_reply_invalid(cl, r, 2, "MODULE_LOAD: server out of memory");
            memcpy(img, q->blob, q->blob_len);
            len = q->blob_len;
        }
    }
    if (sg_charge(cl, r, MODULE_CHARGE, bytes)) {
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
        sg_uncharge(cl, bytes);
        if (sg_charge(cl, r, MODULE_CHARGE, bytes + extra)) refused = 1, g->cu.cuModuleUnload(m->mod);
        else bytes += extra;
    }
    if (rc || refused) {
        free(m);
        if (!refused) sg_uncharge(cl, bytes);
        return refused ? 0 : sg_reply_cu(g, cl, r, api, rc);
    }
    memcpy(m->hash, h, sizeof h);
    m->bytes = bytes;
    uint64_t id = sg_add_handle(cl, H_MODULE, m);
    if (!id) {
        g->cu.cuModuleUnload(m->mod);
        sg_uncharge(cl, m->bytes);
        free(m);
        return sg_reply_invalid(cl, r, 2, "MODULE: handle limit reached");
    }
    ++cl->nmodules;
    r->v[0] = id, r->nv = 1;
    return 0;
}

/* Unloads a client's module and forgets its functions. */
void sg_module_unload(vcuda_gpu *g, client *cl, handle *h)
{
    cached_module *m = h->obj;
    sg_remove_handle(cl, h);
    for (uint32_t i = cl->nhandle; i-- > 0;)
        if (cl->handles[i].kind == H_FUNCTION && ((function_info *)cl->handles[i].obj)->owner == m->mod) {
            free(cl->handles[i].obj);
            sg_remove_handle(cl, &cl->handles[i]);
        }
    /* and its __device__ variables: once unloaded, their addresses may be handed to
     * another client's allocation */
    for (uint32_t i = cl->nglobal; i-- > 0;)
        if (cl->globals[i].owner == m->mod) cl->globals[i] = cl->globals[--cl->nglobal];
    sg_graph_execs_drop(g, cl, m->mod, 1); /* and the graphs that launch its kernels */
    sg_twins_module_gone(cl, m->mod);
    g->cu.cuModuleUnload(m->mod);
    sg_uncharge(cl, m->bytes);
    free(m);
    --cl->nmodules;
}

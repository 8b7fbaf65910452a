/* Device memory requests of the vcuda server: host-to-device and device-to-host copies
 * (chunked, on the client's stream), the check that a range lies inside one of the
 * client's allocations, and the admission of a new allocation against the client's
 * table and its tenant's quota.  Every other family that touches device memory checks
 * its ranges here. */
#define _GNU_SOURCE
#include "server_gpu_internal.h"

allocation *sg_find_range(client *cl, uint64_t p, uint64_t n)
{
    allocation *a = sg_in_table(cl->allocs, cl->nalloc, p, n);
    return a ? a : sg_in_table(cl->globals, cl->nglobal, p, n);
}
int sg_h2d(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    int last = !(q->hdr.flags & VCUDA_FLAG_MORE);
    CUstream s = NULL; /* (set whenever copy_error stays 0) */
    if (!cl->copy_error) {
        CUresult rc = 0;
        if (sg_stream_of(cl, q->v[1], &s))
            cl->copy_error = 400, snprintf(cl->copy_msg, sizeof cl->copy_msg, "MEMCPY_H2D: unknown stream");
        else if (!sg_find_range(cl, q->v[0], q->blob_len))
            cl->copy_error = 1, snprintf(cl->copy_msg, sizeof cl->copy_msg,
                                         "MEMCPY_H2D: [0x%llx, +%u) is not inside an allocation of this client",
                                         (unsigned long long)q->v[0], q->blob_len);
        /* stream-ordered on the client's own stream: the pageable source is staged
         * before the call returns, so the receive buffer can be reused at once */
        else if (q->blob_len && (rc = g->cu.cuMemcpyHtoDAsync_v2(q->v[0], q->blob, q->blob_len, s)))
            cl->copy_error = rc, snprintf(cl->copy_msg, sizeof cl->copy_msg, "MEMCPY_H2D: %s (CUresult %d)",
                                          sg_cu_error_text(g, rc), rc);
        if (rc && sg_context_lost(rc)) sg_reply_cu(g, cl, r, "MEMCPY_H2D", rc);
        /* a host-synchronous copy (proto.h, VCUDA_FLAG_SYNC) is complete, with the
         * stream's earlier work, before the reply says so */
        else if (last && !cl->copy_error && (q->hdr.flags & VCUDA_FLAG_SYNC) && (rc = sg_wait_for(g, s)))
            return sg_reply_cu(g, cl, r, "MEMCPY_H2D", rc);
    }
    if (!last) return 0;
    if (cl->copy_error) {
        memcpy(cl->msg, cl->copy_msg, sizeof cl->copy_msg);
        vcuda_reply_error(r, cl->copy_error, cl->msg);
        cl->copy_error = 0;
    }
    return 0;
}

/* D2H in chunks through two pinned buffers: the copy of chunk k+1 runs while chunk k
 * is on the wire. */
int sg_d2h(vcuda_gpu *g, vcuda_conn *c, client *cl, const vcuda_msg *q, vcuda_msg *r, char *why)
{
    uint64_t src = q->v[0], size = q->v[1];
    CUstream s;
    CUresult rc;
    if (sg_stream_of(cl, q->v[2], &s)) return sg_reply_invalid(cl, r, 400, "MEMCPY_D2H: unknown stream");
    if (!sg_find_range(cl, src, size))
        return sg_reply_invalid(cl, r, 1, "MEMCPY_D2H: [0x%llx, +%llu) is not inside an allocation of this client",
                             (unsigned long long)src, (unsigned long long)size);
    if ((rc = sg_wait_for(g, s))) return sg_reply_cu(g, cl, r, "MEMCPY_D2H", rc);
    if (size == 0) return r->blob = NULL, r->blob_len = 0, 0;
    /* the client's own staging buffers, made at its first D2H (freed when it goes) */
    for (int k = 0; k < 2; ++k)
        if (!cl->pinned[k] && (rc = g->cu.cuMemAllocHost_v2(&cl->pinned[k], g->chunk)))
            return sg_reply_cu(g, cl, r, "MEMCPY_D2H (staging buffer)", rc);
    uint64_t off = 0, n0 = size < g->chunk ? size : g->chunk;
    if ((rc = g->cu.cuMemcpyDtoHAsync_v2(cl->pinned[0], src, n0, cl->aux)))
        return sg_reply_cu(g, cl, r, "MEMCPY_D2H", rc);
    for (int k = 0;; k ^= 1) {
        uint64_t n = size - off < g->chunk ? size - off : g->chunk;
        if ((rc = g->cu.cuStreamSynchronize(cl->aux))) return sg_reply_cu(g, cl, r, "MEMCPY_D2H", rc);
        uint64_t next = off + n, nn = size - next < g->chunk ? size - next : g->chunk;
        if (next < size && (rc = g->cu.cuMemcpyDtoHAsync_v2(cl->pinned[k ^ 1], src + next, nn, cl->aux)))
            return sg_reply_cu(g, cl, r, "MEMCPY_D2H", rc); /* chunks sent so far end with this error */
        r->blob = cl->pinned[k], r->blob_len = (uint32_t)n;
        if (next == size) return 0; /* the loop sends this last chunk as the reply */
        if (vcuda_send_more(c, q, r, why)) {
            g->cu.cuStreamSynchronize(cl->aux); /* nothing in flight into a buffer reused later */
            return -1;
        }
        memset(r, 0, sizeof *r);
        off = next;
    }
}
/* Whether one more allocation of `bytes` would break this client's quotas (the error
 * reply is then in r).  Otherwise makes room in the table and charges the bytes (the
 * caller gives them back if the driver then fails). */
int sg_alloc_refused(client *cl, vcuda_msg *r, const char *api, uint64_t bytes)
{
    if (sg_grow((void **)&cl->allocs, &cl->cap_alloc, cl->nalloc + 1, sizeof(allocation), MAX_ALLOCS))
        return sg_reply_invalid(cl, r, 2, "%s: allocation limit reached", api), 1;
    return sg_charge(cl, r, api, bytes);
}

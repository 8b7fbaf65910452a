/* Streams and events of the vcuda server: a client's stream handles resolved to
 * CUstreams, ordered as the legacy default stream would be (join_streams), the
 * synchronization of one client's work only, and the blocking streams a client
 * destroyed with work still queued (reaped once done).  Every family that takes a
 * stream resolves it here. */
#define _GNU_SOURCE
#include "server_gpu_internal.h"

vcuda_gpu *sg_the_gpu; /* sg_stream_of's driver table (one GPU per server process) */

/* The legacy default stream's ordering, per client: work on its default stream follows
 * what its blocking streams queued before, and work on a blocking stream follows what
 * its default stream queued before.  Other clients' streams are never involved. */
static void join_streams(client *cl, CUstream s)
{
    const driver *cu = &sg_the_gpu->cu;
    if (s == cl->def) {
        for (uint32_t i = 0; i < cl->nhandle; ++i)
            if (cl->handles[i].kind == H_STREAM && !(cl->handles[i].flags & 1)) {
                cu->cuEventRecord(cl->join, cl->handles[i].obj);
                cu->cuStreamWaitEvent(cl->def, cl->join, 0);
            }
    } else {
        cu->cuEventRecord(cl->join, cl->def);
        cu->cuStreamWaitEvent(s, cl->join, 0);
    }
}

/* Stream handle -> CUstream (0: the client's default stream), ordered as the legacy
 * default stream would be.  -1 if not this client's. */
int sg_stream_of(client *cl, uint64_t id, CUstream *s)
{
    handle *h;
    if (id == 0) {
        *s = cl->def;
        join_streams(cl, cl->def);
        return 0;
    }
    if (!(h = sg_find_handle(cl, id, H_STREAM))) return -1;
    *s = h->obj;
    if (!(h->flags & 1)) join_streams(cl, *s);
    return 0;
}

/* The stream a query or synchronize names: the legacy stream's stands for everything it
 * is ordered after (a query of it reports not ready while a blocking stream runs, as
 * CUDA's does), a created stream for its own work only (a query of a blocking stream
 * while the legacy stream runs a kernel reports ready on the real runtime: the
 * ordering applies to work queued, not to waiting).  -1 if not this client's. */
int sg_waited_stream(client *cl, uint64_t id, CUstream *s)
{
    handle *h;
    if (id == 0) return sg_stream_of(cl, id, s);
    if (!(h = sg_find_handle(cl, id, H_STREAM))) return -1;
    *s = h->obj;
    return 0;
}

/* Copies are ordered after the work already queued where the client asked. */
CUresult sg_wait_for(vcuda_gpu *g, CUstream s) { return g->cu.cuStreamSynchronize(s); }

/* A stream the client destroys while work is still queued in it stays in its table,
 * retired (no request can name it), until that work is done: the driver would finish
 * the work after cuStreamDestroy all the same, but then neither a device synchronize
 * nor the legacy stream's ordering (join_streams) here would wait for it, as CUDA's
 * do (a thread's per-thread default stream goes so when the thread ends).  Reaped,
 * once idle, at the next STREAM_CREATE, STREAM_DESTROY and device synchronize. */
void sg_reap_streams(vcuda_gpu *g, client *cl)
{
    for (uint32_t i = 0; i < cl->nhandle;)
        if (cl->handles[i].retired && g->cu.cuStreamQuery(cl->handles[i].obj) != 600 /* CUDA_ERROR_NOT_READY */) {
            g->cu.cuStreamDestroy_v2(cl->handles[i].obj);
            sg_remove_handle(cl, &cl->handles[i]);
        } else {
            ++i;
        }
}

/* Everything this client queued (its "device synchronize"), in retired streams too:
 * other clients' work on the same GPU is not waited for. */
CUresult sg_sync_client(vcuda_gpu *g, client *cl)
{
    /* (aux never holds work past the request that queued it) */
    CUresult rc = g->cu.cuStreamSynchronize(cl->def);
    for (uint32_t i = 0; i < cl->nhandle && !rc; ++i)
        if (cl->handles[i].kind == H_STREAM) rc = g->cu.cuStreamSynchronize(cl->handles[i].obj);
    if (!rc) sg_reap_streams(g, cl);
    return rc;
}

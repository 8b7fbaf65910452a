/* The vcuda server's GPU handler for one GPU (see server_gpu.h): the driver resolved at
 * run time, the clients attached and released, and the dispatch of every request to
 * its family (server_gpu_*.c).  The error replies, the quota charges and the
 * per-client handle table are here because every family uses them; the dispatch is one
 * switch so that each opcode has exactly one handler. */
#define _GNU_SOURCE
#include "server_gpu_internal.h"

/* The per-client limits in force (vcuda_gpu_set_limits; MAX_HANDLES reads them). */
vcuda_gpu_limits sg_limits = VCUDA_GPU_LIMITS_DEFAULT;

const char *sg_cu_error_text(vcuda_gpu *g, CUresult r)
{
    const char *s = NULL;
    if (!g->cu.cuGetErrorString || g->cu.cuGetErrorString(r, &s) != 0 || !s) s = "unknown driver error";
    return s;
}

/* Driver errors after which the context is unusable for everyone (the sticky ones):
 * illegal address, launch timeout, device assert, hardware stack error, illegal
 * instruction, misaligned address, invalid address space, invalid PC, launch failed,
 * tensor memory leak, unknown.  (720, a cooperative launch too large, is refused
 * before anything runs and leaves the context usable.) */
int sg_context_lost(CUresult r)
{
    return r == 700 || r == 702 || r == 710 || (r >= 714 && r <= 719) || r == 721 || r == 999;
}

/* 999 (unknown) is also what a call that leaves the context usable may answer (measured:
 * cuModuleLoadData given a validated image the driver cannot load), so one client's bad
 * image would end every session: it counts as lost only when a synchronize of the context
 * fails too.  (The other codes come from work that ran, and are sticky.) */
static int really_lost(vcuda_gpu *g, CUresult r)
{
    return sg_context_lost(r) && (r != 999 || g->cu.cuCtxSynchronize() != 0);
}

/* Error reply from a failed driver call.  CUresult and cudaError_t share numbers for
 * every error a client can provoke here, so the code passes through (bounded to the
 * wire's range). */
int sg_reply_cu(vcuda_gpu *g, client *cl, vcuda_msg *r, const char *what, CUresult rc)
{
    snprintf(cl->msg, sizeof cl->msg, "%s: %s (CUresult %d)", what, sg_cu_error_text(g, rc), rc);
    vcuda_reply_error(r, rc >= 1 && rc <= VCUDA_MAX_CUDA_ERROR ? rc : 999, cl->msg);
    if (!cl->fatal && really_lost(g, rc)) {
        /* this client's session ends with the error, then every other one, and the
         * server process is replaced (see release_client), so no later client inherits
         * the error: the driver keeps it for the life of the process, in every context
         * (measured: a context created after a 710 fails with 710) */
        cl->fatal = rc;
        pthread_mutex_lock(&g->mu);
        if (!g->dead && cl->generation == g->generation) {
            g->dead = rc;
            ++g->generation;
            fprintf(stderr, "vcuda-server: device %d: %s: the context is unusable; ending the sessions on it "
                    "and replacing the server process\n", g->ordinal, cl->msg);
        }
        pthread_mutex_unlock(&g->mu);
    }
    return 0;
}

int sg_reply_invalid(client *cl, vcuda_msg *r, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cl->msg, sizeof cl->msg, fmt, ap);
    va_end(ap);
    vcuda_reply_error(r, code, cl->msg);
    return 0;
}

/* ---- quotas ------------------------------------------------------------------------ */

/* Device memory for a client: charged to its tenant, all of whose connections share its
 * quota (counted in this process, which serves all of them: server_gpu.h), and counted
 * as the client's (its end gives back what it still holds), unless that would take the
 * tenant past its quota: 0, or 1 with the refusal, naming `what` was to take the bytes,
 * in r. */
int sg_charge(client *cl, vcuda_msg *r, const char *what, uint64_t bytes)
{
    uint64_t used = 0;
    vcuda_tenant *t = cl->tenant;
    if (t && vcuda_tenant_charge(t, bytes, &used))
        return sg_reply_invalid(cl, r, 2, "%s: %llu bytes would exceed tenant %s's quota of %llu bytes (%llu in use)", what,
                                (unsigned long long)bytes, t->name, (unsigned long long)t->mem_quota,
                                (unsigned long long)used), 1;
    cl->mem_bytes += bytes;
    return 0;
}

void sg_uncharge(client *cl, uint64_t bytes)
{
    cl->mem_bytes -= bytes;
    if (cl->tenant) vcuda_tenant_uncharge(cl->tenant, bytes);
}

/* ---- per-client tables ----------------------------------------------------------- */

int sg_grow(void **p, uint32_t *cap, uint32_t need, size_t elem, uint32_t max)
{
    if (need <= *cap) return 0;
    if (need > max) return -1;
    uint32_t n = *cap ? *cap * 2 : 16;
    if (n > max) n = max;
    void *q = realloc(*p, (size_t)n * elem);
    if (!q) return -1;
    *p = q, *cap = n;
    return 0;
}

handle *sg_find_handle(client *cl, uint64_t id, handle_kind kind)
{
    for (uint32_t i = 0; i < cl->nhandle; ++i)
        if (cl->handles[i].id == id && cl->handles[i].kind == kind && !cl->handles[i].retired) return &cl->handles[i];
    return NULL;
}

uint64_t sg_add_handle(client *cl, handle_kind kind, void *obj)
{
    if (sg_grow((void **)&cl->handles, &cl->cap_handle, cl->nhandle + 1, sizeof(handle), MAX_HANDLES))
        return 0;
    cl->handles[cl->nhandle++] = (handle){++cl->next_id, kind, obj, 0, 0};
    return cl->next_id;
}

void sg_remove_handle(client *cl, handle *h) { *h = cl->handles[--cl->nhandle]; }

/* The allocation holding [p, p+n) entirely, or NULL: no copy, set or free ever touches
 * memory this client did not allocate. */
allocation *sg_in_table(allocation *t, uint32_t n_entries, uint64_t p, uint64_t n)
{
    for (uint32_t i = 0; i < n_entries; ++i) {
        allocation *a = &t[i];
        if (p >= a->base && p - a->base <= a->size && n <= a->size - (p - a->base)) return a;
    }
    return NULL;
}

/* ---- the handler ----------------------------------------------------------------- */

static void release_client(void *ctx, vcuda_conn *c);
static int attach_client(void *ctx, vcuda_conn *c, char *why);

static int more_requests(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r);

static int handle_core(void *ctx, vcuda_conn *c, const vcuda_msg *q, vcuda_msg *r, char *why)
{
    vcuda_gpu *g = ctx;
    client *cl = c->user;
    CUresult rc = 0;
    CUstream s;
    handle *h;
    if (!cl && !(cl = c->user = calloc(1, sizeof *cl))) {
        vcuda_fail(why, 0, "no memory for client state");
        return -1;
    }
    if (!cl->tenant) cl->tenant = c->tenant;
    /* An asynchronous launch failed since the last reply: like CUDA's asynchronous
     * errors, the next call that returns a status reports it, and is not carried out
     * (an H2D copy takes it over as its copy error, so its chunks are skipped too). */
    if (cl->launch_error && !(q->hdr.flags & VCUDA_FLAG_NOREPLY)) {
        int code = cl->launch_error;
        cl->launch_error = 0;
        if (q->hdr.opcode == VCUDA_OP_MEMCPY_H2D) {
            if (!cl->copy_error) cl->copy_error = code, memcpy(cl->copy_msg, cl->launch_msg, sizeof cl->copy_msg);
        } else {
            memcpy(cl->msg, cl->launch_msg, sizeof cl->msg);
            vcuda_reply_error(r, code, cl->msg);
            return 0;
        }
    }
    switch (q->hdr.opcode) {
    case VCUDA_OP_GET_DEVICE_COUNT: r->v[0] = 1, r->nv = 1; return 0; /* one GPU per server */
    case VCUDA_OP_SET_DEVICE:
        return q->v[0] == 0 ? 0 : sg_reply_invalid(cl, r, 101, "SET_DEVICE: a server exports device 0 only");
    case VCUDA_OP_GET_DEVICE: r->v[0] = 0, r->nv = 1; return 0;
    case VCUDA_OP_GET_DEVICE_PROPERTIES:
        if (q->v[0] != 0) return sg_reply_invalid(cl, r, 101, "GET_DEVICE_PROPERTIES: device 0 only");
        return sg_properties(g, cl, r);
    case VCUDA_OP_DEVICE_GET_ATTRIBUTE: {
        int v = 0;
        if ((rc = g->cu.cuDeviceGetAttribute(&v, (int)q->v[0], g->dev))) return sg_reply_cu(g, cl, r, "DEVICE_GET_ATTRIBUTE", rc);
        r->v[0] = (uint64_t)(int64_t)v, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_MEM_GET_INFO: {
        size_t fr, tot;
        if ((rc = g->cu.cuMemGetInfo_v2(&fr, &tot))) return sg_reply_cu(g, cl, r, "MEM_GET_INFO", rc);
        r->v[0] = fr, r->v[1] = tot, r->nv = 2;
        return 0;
    }
    case VCUDA_OP_TOUCH: {
        uint32_t word; /* on the client's side stream: never waits for its kernels */
        if ((rc = g->cu.cuMemcpyDtoHAsync_v2(&word, cl->own ? cl->touch : g->touch, sizeof word, cl->aux)) ||
            (rc = g->cu.cuStreamSynchronize(cl->aux)))
            return sg_reply_cu(g, cl, r, "TOUCH", rc);
        return 0;
    }
    case VCUDA_OP_DRIVER_GET_VERSION: {
        int v = 0;
        if ((rc = g->cu.cuDriverGetVersion(&v))) return sg_reply_cu(g, cl, r, "DRIVER_GET_VERSION", rc);
        r->v[0] = (uint64_t)v, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_DEVICE_SYNCHRONIZE:
        return (rc = sg_sync_client(g, cl)) ? sg_reply_cu(g, cl, r, "DEVICE_SYNCHRONIZE", rc) : 0;
    case VCUDA_OP_DEVICE_RESET: {
        /* this client's memory, streams, events and modules (the shared context stays);
         * its device printf output so far goes with it into the new session */
        if ((rc = sg_sync_client(g, cl))) return sg_reply_cu(g, cl, r, "DEVICE_RESET", rc);
        outbuf out[2] = {{0}};
        if (sg_capturing(g)) {
            sg_drain_output(g);
            pthread_mutex_lock(&g->out_mu);
            memcpy(out, cl->out, sizeof out), memset(cl->out, 0, sizeof cl->out);
            pthread_mutex_unlock(&g->out_mu);
        }
        release_client(g, c);
        if (attach_client(g, c, why)) return free(out[0].b), free(out[1].b), -1;
        cl = c->user;
        pthread_mutex_lock(&g->out_mu);
        for (int k = 0; k < 2; ++k)
            if (!cl->out[k].b) cl->out[k] = out[k];
            else free(out[k].b); /* (a new session's output came first: no order to keep) */
        pthread_mutex_unlock(&g->out_mu);
        return 0;
    }
    case VCUDA_OP_MALLOC: {
        CUdeviceptr p;
        if (q->v[0] == 0) return sg_reply_invalid(cl, r, 1, "MALLOC: size 0");
        if (sg_alloc_refused(cl, r, "MALLOC", q->v[0])) return 0;
        if ((rc = g->cu.cuMemAlloc_v2(&p, q->v[0]))) return sg_uncharge(cl, q->v[0]), sg_reply_cu(g, cl, r, "MALLOC", rc);
        cl->allocs[cl->nalloc++] = (allocation){p, q->v[0], NULL, 0};
        r->v[0] = p, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_FREE:
        for (uint32_t i = 0; i < cl->nalloc; ++i)
            if (cl->allocs[i].base == q->v[0]) {
                if ((rc = g->cu.cuMemFree_v2(q->v[0]))) return sg_reply_cu(g, cl, r, "FREE", rc);
                sg_uncharge(cl, cl->allocs[i].size);
                cl->allocs[i] = cl->allocs[--cl->nalloc];
                return 0;
            }
        return sg_reply_invalid(cl, r, 1, "FREE: 0x%llx is not an allocation of this client", (unsigned long long)q->v[0]);
    case VCUDA_OP_MEMCPY_H2D: return sg_h2d(g, cl, q, r);
    case VCUDA_OP_MEMCPY_D2H: return sg_d2h(g, c, cl, q, r, why);
    case VCUDA_OP_MEMCPY_D2D:
        if (sg_stream_of(cl, q->v[3], &s)) return sg_reply_invalid(cl, r, 400, "MEMCPY_D2D: unknown stream");
        if (!sg_find_range(cl, q->v[0], q->v[2]) || !sg_find_range(cl, q->v[1], q->v[2]))
            return sg_reply_invalid(cl, r, 1, "MEMCPY_D2D: a range is not inside an allocation of this client");
        if (q->v[2] && (rc = g->cu.cuMemcpyDtoDAsync_v2(q->v[0], q->v[1], q->v[2], s)))
            return sg_reply_cu(g, cl, r, "MEMCPY_D2D", rc);
        return 0;
    case VCUDA_OP_MEMSET:
        if (sg_stream_of(cl, q->v[3], &s)) return sg_reply_invalid(cl, r, 400, "MEMSET: unknown stream");
        if (!sg_find_range(cl, q->v[0], q->v[2]))
            return sg_reply_invalid(cl, r, 1, "MEMSET: the range is not inside an allocation of this client");
        if (q->v[2] && (rc = g->cu.cuMemsetD8Async(q->v[0], (unsigned char)q->v[1], q->v[2], s)))
            return sg_reply_cu(g, cl, r, "MEMSET", rc);
        return 0;
    case VCUDA_OP_STREAM_CREATE:
    case VCUDA_OP_EVENT_CREATE: {
        int is_stream = q->hdr.opcode == VCUDA_OP_STREAM_CREATE;
        /* streams: default or non-blocking; events: default, blocking-sync, no-timing
         * (interprocess events would hand out a server IPC handle: refused) */
        if (q->v[0] & ~(uint64_t)(is_stream ? 1 : 3))
            return sg_reply_invalid(cl, r, 1, "%s: flags 0x%llx not supported", is_stream ? "STREAM_CREATE" : "EVENT_CREATE",
                                    (unsigned long long)q->v[0]);
        void *o;
        if (is_stream) sg_reap_streams(g, cl);
        /* every stream non-blocking on the device: a client's blocking stream orders with
         * its own default stream only (join_streams), never with other clients' work */
        rc = is_stream ? g->cu.cuStreamCreate((CUstream *)&o, 1 /* CU_STREAM_NON_BLOCKING */)
                       : g->cu.cuEventCreate((CUevent *)&o, (unsigned)q->v[0]);
        if (rc) return sg_reply_cu(g, cl, r, is_stream ? "STREAM_CREATE" : "EVENT_CREATE", rc);
        uint64_t id = sg_add_handle(cl, is_stream ? H_STREAM : H_EVENT, o);
        if (!id) {
            is_stream ? g->cu.cuStreamDestroy_v2(o) : g->cu.cuEventDestroy_v2(o);
            return sg_reply_invalid(cl, r, 2, "handle limit reached");
        }
        if (is_stream) cl->handles[cl->nhandle - 1].flags = (unsigned)q->v[0];
        r->v[0] = id, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_STREAM_DESTROY:
        if (!(h = sg_find_handle(cl, q->v[0], H_STREAM))) return sg_reply_invalid(cl, r, 400, "STREAM_DESTROY: unknown stream");
        h->retired = 1; /* (see sg_reap_streams) */
        sg_reap_streams(g, cl);
        return 0;
    case VCUDA_OP_STREAM_SYNCHRONIZE:
        if (sg_waited_stream(cl, q->v[0], &s)) return sg_reply_invalid(cl, r, 400, "STREAM_SYNCHRONIZE: unknown stream");
        return (rc = sg_wait_for(g, s)) ? sg_reply_cu(g, cl, r, "STREAM_SYNCHRONIZE", rc) : 0;
    case VCUDA_OP_EVENT_DESTROY:
        if (!(h = sg_find_handle(cl, q->v[0], H_EVENT))) return sg_reply_invalid(cl, r, 400, "EVENT_DESTROY: unknown event");
        rc = g->cu.cuEventDestroy_v2(h->obj);
        sg_remove_handle(cl, h);
        return rc ? sg_reply_cu(g, cl, r, "EVENT_DESTROY", rc) : 0;
    case VCUDA_OP_EVENT_RECORD:
        if (!(h = sg_find_handle(cl, q->v[0], H_EVENT)) || sg_stream_of(cl, q->v[1], &s))
            return sg_reply_invalid(cl, r, 400, "EVENT_RECORD: unknown event or stream");
        return (rc = g->cu.cuEventRecord(h->obj, s)) ? sg_reply_cu(g, cl, r, "EVENT_RECORD", rc) : 0;
    case VCUDA_OP_EVENT_SYNCHRONIZE:
        if (!(h = sg_find_handle(cl, q->v[0], H_EVENT))) return sg_reply_invalid(cl, r, 400, "EVENT_SYNCHRONIZE: unknown event");
        return (rc = g->cu.cuEventSynchronize(h->obj)) ? sg_reply_cu(g, cl, r, "EVENT_SYNCHRONIZE", rc) : 0;
    case VCUDA_OP_EVENT_ELAPSED: {
        handle *a = sg_find_handle(cl, q->v[0], H_EVENT), *b = sg_find_handle(cl, q->v[1], H_EVENT);
        float ms = 0;
        if (!a || !b) return sg_reply_invalid(cl, r, 400, "EVENT_ELAPSED: unknown event");
        if ((rc = g->cu.cuEventElapsedTime(&ms, a->obj, b->obj))) return sg_reply_cu(g, cl, r, "EVENT_ELAPSED", rc);
        uint32_t bits;
        memcpy(&bits, &ms, sizeof bits);
        r->v[0] = bits, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_MODULE_LOOKUP:
    case VCUDA_OP_MODULE_LOAD: return sg_module(g, cl, q, r);
    case VCUDA_OP_MODULE_UNLOAD: /* the image stays cached for the next client, its state goes */
        if (!(h = sg_find_handle(cl, q->v[0], H_MODULE))) return sg_reply_invalid(cl, r, 400, "MODULE_UNLOAD: unknown module");
        sg_module_unload(g, cl, h);
        return 0;
    case VCUDA_OP_FUNCTION_GET: return sg_function_get(g, cl, q, r);
    case VCUDA_OP_LAUNCH:
    case VCUDA_OP_LAUNCH_EX:
    case VCUDA_OP_GRAPH_LAUNCH:
        if (q->hdr.opcode != VCUDA_OP_GRAPH_LAUNCH) sg_launch(g, cl, q, r);
        else sg_graph_launch(g, cl, q, r);
        if ((q->hdr.flags & VCUDA_FLAG_NOREPLY) && (r->hdr.flags & VCUDA_FLAG_ERROR) && !cl->launch_error) {
            /* nobody waits for this reply: the client's next call gets the error */
            cl->launch_error = (int)r->v[0];
            snprintf(cl->launch_msg, sizeof cl->launch_msg, "an earlier %s failed: %.280s",
                     q->hdr.opcode != VCUDA_OP_GRAPH_LAUNCH ? "kernel launch" : "graph launch", cl->msg);
        }
        return 0;
    default: return more_requests(g, cl, q, r);
    }
}

static int handle_request(void *ctx, vcuda_conn *c, const vcuda_msg *q, vcuda_msg *r, char *why)
{
    vcuda_gpu *g = ctx;
    /* (read unlocked: a stale value only claims one request later; sg_claim_output re-checks) */
    if (sg_capturing(g) && c->user && __atomic_load_n(&g->out_claimable, __ATOMIC_RELAXED)) sg_claim_output(g, c->user);
    int rc = handle_core(ctx, c, q, r, why);
    client *cl = c->user; /* DEVICE_RESET replaced it */
    if (sg_capturing(g) && cl) {
        /* a call that failed with a sticky error (a device assert) may not be one that
         * synchronizes: the driver wrote its messages while reporting it */
        if (sg_synchronizes(q->hdr.opcode) || cl->fatal) sg_drain_output(g);
        pthread_mutex_lock(&g->out_mu);
        if (sg_pending(cl)) r->hdr.flags |= VCUDA_FLAG_OUTPUT;
        pthread_mutex_unlock(&g->out_mu);
    }
    return rc;
}

/* ---- the calls added for whole programs (wire codes 33..) ------------------------- */

static int more_requests(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    const char *op = vcuda_opcode_name(q->hdr.opcode);
    CUresult rc = 0;
    CUstream s;
    handle *h, *e;
    switch (q->hdr.opcode) {
    case VCUDA_OP_EVENT_QUERY:
        if (!(h = sg_find_handle(cl, q->v[0], H_EVENT))) return sg_reply_invalid(cl, r, 400, "EVENT_QUERY: unknown event");
        return (rc = g->cu.cuEventQuery(h->obj)) ? sg_reply_cu(g, cl, r, op, rc) : 0;
    case VCUDA_OP_STREAM_QUERY:
        if (sg_waited_stream(cl, q->v[0], &s)) return sg_reply_invalid(cl, r, 400, "STREAM_QUERY: unknown stream");
        return (rc = g->cu.cuStreamQuery(s)) ? sg_reply_cu(g, cl, r, op, rc) : 0;
    case VCUDA_OP_STREAM_WAIT_EVENT:
        if (sg_stream_of(cl, q->v[0], &s) || !(e = sg_find_handle(cl, q->v[1], H_EVENT)))
            return sg_reply_invalid(cl, r, 400, "STREAM_WAIT_EVENT: unknown stream or event");
        if (q->v[2] & ~(uint64_t)1) return sg_reply_invalid(cl, r, 1, "STREAM_WAIT_EVENT: flags 0x%llx", (unsigned long long)q->v[2]);
        return (rc = g->cu.cuStreamWaitEvent(s, e->obj, 0)) ? sg_reply_cu(g, cl, r, op, rc) : 0;
    case VCUDA_OP_STREAM_CREATE_PRIORITY: {
        CUstream o;
        if (q->v[0] & ~(uint64_t)1) return sg_reply_invalid(cl, r, 1, "STREAM_CREATE_PRIORITY: flags 0x%llx", (unsigned long long)q->v[0]);
        /* non-blocking on the device, as every client stream (see STREAM_CREATE) */
        if ((rc = g->cu.cuStreamCreateWithPriority(&o, 1, (int)(int64_t)q->v[1]))) return sg_reply_cu(g, cl, r, op, rc);
        uint64_t id = sg_add_handle(cl, H_STREAM, o);
        if (!id) return g->cu.cuStreamDestroy_v2(o), sg_reply_invalid(cl, r, 2, "handle limit reached");
        cl->handles[cl->nhandle - 1].flags = (unsigned)q->v[0];
        r->v[0] = id, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_STREAM_PRIORITY_RANGE: {
        int least = 0, greatest = 0;
        if ((rc = g->cu.cuCtxGetStreamPriorityRange(&least, &greatest))) return sg_reply_cu(g, cl, r, op, rc);
        r->v[0] = (uint64_t)(int64_t)least, r->v[1] = (uint64_t)(int64_t)greatest, r->nv = 2;
        return 0;
    }
    case VCUDA_OP_LIMIT_SET: return sg_limit_set(g, cl, q, r);
    case VCUDA_OP_LIMIT_GET: {
        size_t v = 0;
        if ((rc = g->cu.cuCtxGetLimit(&v, (int)q->v[0]))) return sg_reply_cu(g, cl, r, op, rc);
        r->v[0] = v, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_FUNC_ATTRIBUTES:
        if (!(h = sg_find_handle(cl, q->v[0], H_FUNCTION))) return sg_reply_invalid(cl, r, 98, "FUNC_ATTRIBUTES: unknown function");
        for (int a = 0; a < 16; ++a) {
            int v = 0;
            /* attributes a driver does not know (cluster ones on old GPUs) read as 0 */
            if ((rc = g->cu.cuFuncGetAttribute(&v, a, ((function_info *)h->obj)->f)) && rc != CU_INVALID_VALUE)
                return sg_reply_cu(g, cl, r, op, rc);
            r->v[r->nv++] = (uint64_t)(int64_t)(rc ? 0 : v);
        }
        return 0;
    case VCUDA_OP_FUNC_SET_ATTRIBUTE:
        if (!(h = sg_find_handle(cl, q->v[0], H_FUNCTION))) return sg_reply_invalid(cl, r, 98, "FUNC_SET_ATTRIBUTE: unknown function");
        return (rc = g->cu.cuFuncSetAttribute(((function_info *)h->obj)->f, (int)(int64_t)q->v[1], (int)(int64_t)q->v[2]))
                   ? sg_reply_cu(g, cl, r, op, rc) : 0;
    case VCUDA_OP_OCCUPANCY_BLOCKS: {
        int n = 0;
        if (!(h = sg_find_handle(cl, q->v[0], H_FUNCTION))) return sg_reply_invalid(cl, r, 98, "OCCUPANCY_BLOCKS: unknown function");
        if ((rc = g->cu.cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&n, ((function_info *)h->obj)->f, (int)q->v[1],
                                                                            q->v[2], (unsigned)q->v[3])))
            return sg_reply_cu(g, cl, r, op, rc);
        r->v[0] = (uint64_t)(int64_t)n, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_OCCUPANCY_DYNAMIC_SMEM: {
        size_t n = 0;
        if (!(h = sg_find_handle(cl, q->v[0], H_FUNCTION))) return sg_reply_invalid(cl, r, 98, "OCCUPANCY_DYNAMIC_SMEM: unknown function");
        if ((rc = g->cu.cuOccupancyAvailableDynamicSMemPerBlock(&n, ((function_info *)h->obj)->f, (int)q->v[1], (int)q->v[2])))
            return sg_reply_cu(g, cl, r, op, rc);
        r->v[0] = n, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_MODULE_GLOBAL: {
        char name[VCUDA_MAX_STRING + 1];
        CUdeviceptr p;
        size_t size;
        if (!(h = sg_find_handle(cl, q->v[0], H_MODULE))) return sg_reply_invalid(cl, r, 400, "MODULE_GLOBAL: unknown module");
        memcpy(name, q->str, q->str_len), name[q->str_len] = 0;
        if ((rc = g->cu.cuModuleGetGlobal_v2(&p, &size, ((cached_module *)h->obj)->mod, name)))
            return sg_reply_cu(g, cl, r, op, rc);
        /* the variable is in the client's own module (per-client load): copies may
         * address it until that module is unloaded (sg_module_unload forgets it) */
        if (!sg_in_table(cl->globals, cl->nglobal, p, size)) {
            if (sg_grow((void **)&cl->globals, &cl->cap_global, cl->nglobal + 1, sizeof(allocation), MAX_HANDLES))
                return sg_reply_invalid(cl, r, 2, "MODULE_GLOBAL: limit reached");
            cl->globals[cl->nglobal++] = (allocation){p, size, ((cached_module *)h->obj)->mod, 0};
        }
        r->v[0] = p, r->v[1] = size, r->nv = 2;
        return 0;
    }
    case VCUDA_OP_LAUNCH_COOPERATIVE: return sg_launch(g, cl, q, r);
    case VCUDA_OP_MALLOC_PITCH: {
        CUdeviceptr p;
        size_t pitch;
        uint64_t w = q->v[0], ht = q->v[1];
        if (!w || !ht) return sg_reply_invalid(cl, r, 1, "MALLOC_PITCH: empty extent");
        if (ht > VCUDA_MAX_SIZE / w) return sg_reply_invalid(cl, r, 2, "MALLOC_PITCH: %llu x %llu bytes is too large",
                                                             (unsigned long long)w, (unsigned long long)ht);
        /* the rows' bytes are charged first, the pitch's padding once the driver chose it */
        if (sg_alloc_refused(cl, r, op, w * ht)) return 0;
        /* element size 16: the runtime's own choice for cudaMallocPitch */
        if ((rc = g->cu.cuMemAllocPitch_v2(&p, &pitch, w, ht, 16))) return sg_uncharge(cl, w * ht), sg_reply_cu(g, cl, r, op, rc);
        if (pitch < w || ht > VCUDA_MAX_SIZE / pitch || sg_charge(cl, r, op, (uint64_t)pitch * ht - w * ht)) {
            g->cu.cuMemFree_v2(p);
            sg_uncharge(cl, w * ht);
            if (!(r->hdr.flags & VCUDA_FLAG_ERROR)) sg_reply_invalid(cl, r, 2, "MALLOC_PITCH: the driver's pitch %zu is unusable", pitch);
            return 0;
        }
        cl->allocs[cl->nalloc++] = (allocation){p, (uint64_t)pitch * ht, NULL, 0};
        r->v[0] = p, r->v[1] = pitch, r->nv = 2;
        return 0;
    }
    case VCUDA_OP_MEMSET_2D: {
        uint64_t dst = q->v[0], pitch = q->v[1], w = q->v[3], ht = q->v[4];
        if (sg_stream_of(cl, q->v[5], &s)) return sg_reply_invalid(cl, r, 400, "MEMSET_2D: unknown stream");
        if (!w || !ht) return 0;
        if (w > pitch || (ht - 1) > (VCUDA_MAX_SIZE / pitch) || !sg_find_range(cl, dst, (ht - 1) * pitch + w))
            return sg_reply_invalid(cl, r, 1, "MEMSET_2D: the rows are not inside an allocation of this client");
        /* stream-ordered on the client's own stream, as MEMSET */
        if ((rc = g->cu.cuMemsetD2D8Async(dst, pitch, (unsigned char)q->v[2], w, ht, s))) return sg_reply_cu(g, cl, r, op, rc);
        return 0;
    }
    case VCUDA_OP_PRINTF_FETCH: return sg_printf_fetch(g, cl, r);
    case VCUDA_OP_GRAPH_INSTANTIATE: return sg_graph_instantiate(g, cl, q, r);
    case VCUDA_OP_GRAPH_EXEC_KERNEL_SET: return sg_graph_exec_kernel_set(g, cl, q, r);
    case VCUDA_OP_GRAPH_TWIN_CREATE:
    case VCUDA_OP_GRAPH_TWIN_DESTROY:
    case VCUDA_OP_GRAPH_TWIN_ADD_NODE:
    case VCUDA_OP_GRAPH_TWIN_ADD_EDGE:
    case VCUDA_OP_GRAPH_COND_CREATE:
    case VCUDA_OP_GRAPH_TWIN_INSTANTIATE:
    case VCUDA_OP_GRAPH_MEM_ATTR_GET:
    case VCUDA_OP_GRAPH_MEM_ATTR_RESET:
    case VCUDA_OP_GRAPH_MEM_TRIM: return sg_twin_requests(g, cl, q, r);
    case VCUDA_OP_ARRAY_CREATE:
    case VCUDA_OP_ARRAY_DESTROY:
    case VCUDA_OP_MEMCPY_3D:
    case VCUDA_OP_TEX_CREATE:
    case VCUDA_OP_TEX_DESTROY:
    case VCUDA_OP_SURF_CREATE:
    case VCUDA_OP_SURF_DESTROY: return sg_array_requests(g, cl, q, r);
    case VCUDA_OP_DEVICE_UUID: {
        static _Thread_local unsigned char uuid[16];
        if ((rc = g->cu.cuDeviceGetUuid_v2(uuid, g->dev))) return sg_reply_cu(g, cl, r, op, rc);
        r->blob = uuid, r->blob_len = sizeof uuid;
        return 0;
    }
    case VCUDA_OP_GRAPH_EXEC_DESTROY:
        if (!(h = sg_find_handle(cl, q->v[0], H_GRAPH_EXEC))) return sg_reply_invalid(cl, r, 400, "GRAPH_EXEC_DESTROY: unknown graph exec");
        sg_graph_exec_free(g, cl, h->obj, 1);
        sg_remove_handle(cl, h);
        return 0;
    default:
        return sg_reply_invalid(cl, r, 801, "%s is not served by vcuda-server", op);
    }
}

static void release_client(void *ctx, vcuda_conn *c)
{
    vcuda_gpu *g = ctx;
    client *cl = c->user;
    if (!cl) return;
    pthread_mutex_lock(&g->mu);
    /* on a dead or the client's own context nothing is freed one by one: the process's
     * end or the context's destruction frees it all */
    int alive = cl->generation == g->generation && !cl->own;
    pthread_mutex_unlock(&g->mu);
    if (alive) sg_sync_client(g, cl); /* work the client queued may still use its memory */
    sg_arrays_release(g, cl, alive);
    sg_graph_execs_drop(g, cl, NULL, alive); /* before the modules their kernels are in */
    sg_twins_drop(g, cl, alive);             /* (and before the allocations: "graph twins") */
    for (uint32_t i = 0; i < cl->nalloc && alive; ++i) g->cu.cuMemFree_v2(cl->allocs[i].base);
    for (uint32_t i = 0; i < cl->nhandle; ++i) {
        handle *h = &cl->handles[i];
        if (h->kind == H_STREAM && alive) g->cu.cuStreamDestroy_v2(h->obj);
        else if (h->kind == H_EVENT && alive) g->cu.cuEventDestroy_v2(h->obj);
        else if (h->kind == H_FUNCTION) free(h->obj);
        else if (h->kind == H_MODULE) {
            if (alive) g->cu.cuModuleUnload(((cached_module *)h->obj)->mod);
            free(h->obj);
        }
    }
    if (alive) {
        for (int k = 0; k < 2; ++k)
            if (cl->pinned[k]) g->cu.cuMemFreeHost(cl->pinned[k]);
        if (cl->join) g->cu.cuEventDestroy_v2(cl->join);
        if (cl->aux) g->cu.cuStreamDestroy_v2(cl->aux);
        if (cl->def) g->cu.cuStreamDestroy_v2(cl->def);
    }
    if (cl->nalloc || cl->nhandle)
        vcuda_log_limited("vcuda-server", "connection %llu: released %u allocations and %u handles",
                          (unsigned long long)c->id, cl->nalloc, cl->nhandle);
    if (cl->own) g->cu.cuCtxDestroy_v2(cl->own); /* (and the limits of its own, charged as its memory) */
    if (cl->tenant) vcuda_tenant_uncharge(cl->tenant, cl->mem_bytes); /* what it still held */
    cl->mem_bytes = 0;
    free(cl->allocs);
    free(cl->handles);
    free(cl->globals);
    pthread_mutex_lock(&g->mu);
    if (!cl->own && g->lim_owner && g->lim_owner == cl->tenant && --g->lim_owner_conns == 0) {
        /* the tenant's last connection on the shared context: its limits go (see sg_limit_set) */
        vcuda_tenant *t = g->lim_owner;
        while (g->limit_busy) pthread_cond_wait(&g->limit_done, &g->mu);
        g->limit_busy = 1;
        pthread_mutex_unlock(&g->mu);
        if (alive) sg_limits_restore(g, t);
        else memset(&g->lims, 0, sizeof g->lims); /* (a lost context: the process is replaced) */
        pthread_mutex_lock(&g->mu);
        g->lim_owner = NULL;
        g->limit_busy = 0;
        pthread_cond_broadcast(&g->limit_done);
    }
    --g->attached;
    sg_output_owner_change(g, cl, -1, g->attached); /* its last output (synchronized above) is its own */
    free(cl->out[0].b);
    free(cl->out[1].b);
    free(cl->sent);
    free(cl);
    c->user = NULL;
    if (g->dead && !*g->stop) {
        /* the failing client has had its reply: end every session and let vcuda-server's
         * supervisor start a fresh process on the same socket */
        fprintf(stderr, "vcuda-server: device %d: the context lost to CUresult %d cannot be used again in this "
                "process; stopping it for a fresh one\n", g->ordinal, g->dead);
        *g->stop = 1;
    }
    pthread_mutex_unlock(&g->mu);
}

/* On the client's worker thread, before its first request: the context current there
 * (refused while one lost to a sticky error is being replaced) and the client's own
 * streams. */
static int attach_client(void *ctx, vcuda_conn *c, char *why)
{
    vcuda_gpu *g = ctx;
    client *cl = calloc(1, sizeof *cl);
    CUresult rc;
    if (!cl) return vcuda_fail(why, -1, "no memory for client state");
    cl->tenant = c->tenant;
    pthread_mutex_lock(&g->mu);
    while (g->limit_busy) pthread_cond_wait(&g->limit_done, &g->mu); /* see sg_limit_set */
    if (g->dead) {
        pthread_mutex_unlock(&g->mu);
        free(cl);
        return vcuda_fail(why, -1, "the GPU context is being replaced after a sticky error");
    }
    cl->generation = g->generation;
    ++g->attached;
    if (!sg_limits.isolation && g->lim_owner && g->lim_owner == cl->tenant) ++g->lim_owner_conns;
    sg_output_owner_change(g, cl, 1, g->attached);
    CUcontext cx = g->ctx;
    pthread_mutex_unlock(&g->mu);
    c->user = cl;
    if (sg_limits.isolation) { /* a context per client: nothing of the GPU state is shared */
        if ((rc = g->cu.cuCtxCreate_v2(&cl->own, 0, g->dev)) || (rc = g->cu.cuMemAlloc_v2(&cl->touch, 4)) ||
            (rc = g->cu.cuMemsetD8_v2(cl->touch, 0, 4))) {
            vcuda_fail(why, -1, "client context: %s (CUresult %d)", sg_cu_error_text(g, rc), rc);
            release_client(g, c);
            return -1;
        }
        cx = cl->own;
    }
    if ((rc = g->cu.cuCtxSetCurrent(cx)) || (rc = g->cu.cuStreamCreate(&cl->def, 1)) ||
        (rc = g->cu.cuStreamCreate(&cl->aux, 1)) || (rc = g->cu.cuEventCreate(&cl->join, 2 /* no timing */))) {
        vcuda_fail(why, -1, "client set-up failed: %s (CUresult %d)", sg_cu_error_text(g, rc), rc);
        release_client(g, c);
        return -1;
    }
    return 0;
}

/* Every request: a session whose context died (its own sticky error or another
 * client's) ends with that error; the handler proper runs otherwise. */
static int handle_checked(void *ctx, vcuda_conn *c, const vcuda_msg *q, vcuda_msg *r, char *why)
{
    vcuda_gpu *g = ctx;
    client *cl = c->user;
    pthread_mutex_lock(&g->mu);
    int lost = cl && cl->generation != g->generation ? (g->dead ? g->dead : 999) : 0;
    pthread_mutex_unlock(&g->mu);
    if (lost && cl->fatal && q->hdr.opcode == VCUDA_OP_PRINTF_FETCH) {
        /* the client whose kernel killed the context collects what it printed and its
         * assertion messages (the reply to the failing call said they wait); its session
         * ends when they are all sent, or at its first other request (below).  A client
         * that does neither keeps this lost serving process until it disconnects. */
        int rc = handle_request(ctx, c, q, r, why);
        if (!(r->hdr.flags & VCUDA_FLAG_OUTPUT)) c->end_session = 1;
        return rc;
    }
    if (lost) {
        snprintf(cl->msg, sizeof cl->msg, "the GPU context was lost to a sticky error (CUresult %d) and is being "
                 "replaced: this session's state is gone", lost);
        vcuda_reply_error(r, lost, cl->msg);
        c->end_session = 1;
        return 0;
    }
    int rc = handle_request(ctx, c, q, r, why);
    /* a sticky error ends the session, once the output its reply announced is fetched */
    if (c->user && ((client *)c->user)->fatal && !(r->hdr.flags & VCUDA_FLAG_OUTPUT)) c->end_session = 1;
    return rc;
}

int vcuda_gpu_context_lost(vcuda_gpu *g)
{
    pthread_mutex_lock(&g->mu);
    int d = g->dead;
    pthread_mutex_unlock(&g->mu);
    return d;
}

struct vcuda_handler vcuda_gpu_handler(vcuda_gpu *g)
{
    struct vcuda_handler h = {g, handle_checked, release_client, attach_client};
    return h;
}

void vcuda_gpu_set_limits(const vcuda_gpu_limits *l) { sg_limits = *l; }
vcuda_gpu *vcuda_gpu_open(int ordinal, size_t chunk, volatile sig_atomic_t *stop, char *why)
{
    vcuda_gpu *g = calloc(1, sizeof *g);
    CUresult rc;
    int n = 0;
    if (!g) return vcuda_fail(why, 0, "out of memory"), NULL;
    g->ordinal = ordinal, g->chunk = chunk, g->stop = stop, g->out_fd[0] = g->out_fd[1] = -1;
    g->log_fd[0] = g->log_fd[1] = -1;
    if (!(g->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL))) {
        vcuda_fail(why, 0, "no CUDA driver (libcuda.so.1: %s)", dlerror());
        free(g);
        return NULL;
    }
#define RESOLVE(name, ret, args) *(void **)&g->cu.name = dlsym(g->lib, #name);
    DRIVER_FUNCTIONS(RESOLVE)
    TENANCY_FUNCTIONS(RESOLVE)
    GRAPH_FUNCTIONS(RESOLVE)
    ARRAY_FUNCTIONS(RESOLVE)
    PROPERTY_FUNCTIONS(RESOLVE)
#undef RESOLVE
    /* cuEventElapsedTime_v2 (CUDA 12.8+) is the same call where it exists */
    void *v2 = dlsym(g->lib, "cuEventElapsedTime_v2");
    if (v2) *(void **)&g->cu.cuEventElapsedTime = v2;
#define CHECK_RESOLVED(name, ret, args)                                                      \
    if (!g->cu.name) {                                                                       \
        vcuda_fail(why, 0, "the CUDA driver lacks %s%s", #name,                              \
                !strcmp(#name, "cuFuncGetParamInfo") ? " (a CUDA 12.4 or newer driver is needed)" : ""); \
        goto fail;                                                                           \
    }
    DRIVER_FUNCTIONS(CHECK_RESOLVED)
    TENANCY_FUNCTIONS(CHECK_RESOLVED)
    GRAPH_FUNCTIONS(CHECK_RESOLVED)
    ARRAY_FUNCTIONS(CHECK_RESOLVED)
    PROPERTY_FUNCTIONS(CHECK_RESOLVED)
#undef CHECK_RESOLVED
    if ((rc = g->cu.cuInit(0)) || (rc = g->cu.cuDeviceGetCount(&n)) || n == 0) {
        vcuda_fail(why, 0, "no usable GPU (cuInit/cuDeviceGetCount: CUresult %d, %d devices)", rc, n);
        goto fail;
    }
    if (ordinal >= n) {
        vcuda_fail(why, 0, "--device %d but this machine has %d GPU(s)", ordinal, n);
        goto fail;
    }
    if ((rc = g->cu.cuDeviceGet(&g->dev, ordinal)) || (rc = g->cu.cuDeviceGetName(g->name, sizeof g->name, g->dev)) ||
        (rc = g->cu.cuDevicePrimaryCtxRetain(&g->ctx, g->dev)) || (rc = g->cu.cuCtxSetCurrent(g->ctx)) ||
        (rc = g->cu.cuMemAlloc_v2(&g->touch, 4)) || (rc = g->cu.cuMemsetD8_v2(g->touch, 0, 4))) {
        vcuda_fail(why, 0, "device %d: set-up failed: %s (CUresult %d)", ordinal, sg_cu_error_text(g, rc), rc);
        goto fail;
    }
    int sms = 0, per_sm = 0;
    if ((rc = g->cu.cuDeviceGetAttribute(&sms, CU_ATTR_SMS, g->dev)) ||
        (rc = g->cu.cuDeviceGetAttribute(&per_sm, CU_ATTR_THREADS_PER_SM, g->dev)) || sms <= 0 || per_sm <= 0) {
        vcuda_fail(why, 0, "device %d: no multiprocessor count or threads per multiprocessor (CUresult %d)", ordinal, rc);
        goto fail;
    }
    g->threads = (uint64_t)sms * (uint64_t)per_sm;
    pthread_mutex_init(&g->mu, NULL);
    pthread_mutex_init(&g->out_mu, NULL);
    pthread_cond_init(&g->limit_done, NULL);
    sg_the_gpu = g;
    sg_capture_output(g);
    return g;
fail:
    dlclose(g->lib);
    free(g);
    return NULL;
}

void vcuda_gpu_end_output(vcuda_gpu *g)
{
    if (sg_capturing(g)) {
        *g->stop = 1;
        pthread_join(g->out_thread, NULL);
        pthread_mutex_lock(&g->out_mu);
        g->out_owner = NULL; /* what is left goes to the logs */
        pthread_mutex_unlock(&g->out_mu);
        sg_drain_output(g);
        sg_uncapture(g);
    }
    for (int k = 0; k < 2; ++k)
        if (g->log_fd[k] >= 0) close(g->log_fd[k]), g->log_fd[k] = -1;
}

void vcuda_gpu_close(vcuda_gpu *g)
{
    if (!g) return;
    vcuda_gpu_end_output(g);
    g->cu.cuCtxSynchronize();
    g->cu.cuMemFree_v2(g->touch);
    g->cu.cuDevicePrimaryCtxRelease_v2(g->dev);
    for (int i = 0; i < g->nimages; ++i) free(g->images[i].img), free(g->images[i].unsized.names);
    pthread_mutex_destroy(&g->mu);
    dlclose(g->lib);
    free(g);
}

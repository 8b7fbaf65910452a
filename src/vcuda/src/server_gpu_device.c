/* Device and context requests of the vcuda server: the device properties, the context
 * limits (LIMIT_SET, charged to the tenant and given back), and device printf and
 * assertion output (the server's stdout and stderr become pipes whose bytes go to the
 * client that owns them).  The limit and output state lives here because only these
 * requests and a client's attach and release touch it. */
#define _GNU_SOURCE
#include "server_gpu_internal.h"

int sg_properties(vcuda_gpu *g, client *cl, vcuda_msg *r)
{
    /* name, total, smem/block, L2, major, minor, SMs, warp, threads/block, clock,
     * memory clock, bus width -- the order of the reply layout */
    static const int attrs[] = {8, 38, 75, 76, 16, 10, 1, 13, 36, 37};
    size_t total;
    CUresult rc;
    if ((rc = g->cu.cuDeviceTotalMem_v2(&total, g->dev))) return sg_reply_cu(g, cl, r, "GET_DEVICE_PROPERTIES", rc);
    r->str = (const uint8_t *)g->name, r->str_len = (uint32_t)strlen(g->name);
    r->v[0] = total, r->nv = 1;
    for (size_t i = 0; i < sizeof attrs / sizeof *attrs; ++i) {
        int v = 0;
        if ((rc = g->cu.cuDeviceGetAttribute(&v, attrs[i], g->dev)))
            return sg_reply_cu(g, cl, r, "GET_DEVICE_PROPERTIES", rc);
        r->v[r->nv++] = i < 2 ? (uint64_t)(unsigned)v : (uint64_t)(int64_t)v;
    }
    return 0;
}

/* ---- device printf ---------------------------------------------------------------- *
 * The driver writes device printf output to this process's stdout, from whichever
 * thread synchronizes, for every context alike: the bytes do not say whose kernel
 * printed them.  stdout is therefore a pipe (sg_capture_output) whose bytes go to one
 * owner, the server's only client, and are shipped to it with PRINTF_FETCH.  While two
 * or more clients are attached there is no owner and the output goes to the server's
 * own stdout (its log), for every client.  Each change of owner first drains what the
 * pipe holds into the old owner's buffer (out_mu held), and a client that detaches has
 * synchronized its work first, so no byte of one client's kernels is handed to another:
 * a client attaching to an empty server owns the output at once; the one client left
 * when the others have gone takes it at the start of its next request (a synchronize it
 * had under way may have written a departed client's bytes, which go to the log).
 * --isolation context does not change this: the contexts are separate, the stream the
 * driver writes them to is not; with --isolation process each tenant's serving process
 * has a stdout of its own, so the rule holds per tenant.  Device assertion messages ("... Assertion `EXPR`
 * failed.") follow the same rule: the driver writes them to stderr while it reports the
 * sticky error (710), so stderr is a pipe too, whose lines all go on to the server's log
 * and whose assertion lines also to the owner; the reply carrying the 710 says output
 * waits, and the session ends only once the client has fetched it.  With several
 * clients attached nobody owns them: they are in the server's log only. */

#define OUT_MAX (64u << 20) /* output kept for a client that does not synchronize */

int sg_capturing(vcuda_gpu *g) { return g->out_fd[OUT_PRINTF] >= 0 || g->out_fd[OUT_ASSERT] >= 0; }

static void out_append(outbuf *o, const char *p, size_t n)
{
    size_t keep = o->len + n > OUT_MAX ? OUT_MAX - o->len : n;
    char *q = keep ? realloc(o->b, o->len + keep) : o->b;
    if (!q) keep = 0;
    else o->b = q;
    if (keep) memcpy(o->b + o->len, p, keep);
    o->len += keep;
    o->dropped += n - keep;
}

/* The driver's own form: "FILE:LINE: FUNCTION: block: [x,y,z], thread: [x,y,z] Assertion
 * `EXPR` failed."  Only such lines of the stderr pipe are a client's: everything else
 * there is this server's own log. */
static int assertion_line(const char *l)
{
    const char *a = strstr(l, "block: [");
    return a && (a = strstr(a, "thread: [")) && (a = strstr(a, "Assertion `")) && strstr(a, "` failed.");
}

/* Moves what the pipes hold to their owner's buffers or to the log (out_mu held).
 * stdout's bytes are device printf's; stderr's are the server's own log lines and the
 * driver's device assertion messages: all of it goes on to the log (the server's stderr
 * as it was, where its operator looks for why a context was lost), and the assertion
 * lines also to the owner. */
static void drain_locked(vcuda_gpu *g)
{
    char buf[65536];
    ssize_t n;
    for (int k = 0; k < 2; ++k) {
        while (g->out_fd[k] >= 0 && (n = read(g->out_fd[k], buf, sizeof buf)) > 0) {
            client *o = g->out_owner;
            if (k == OUT_PRINTF && o) {
                out_append(&o->out[OUT_PRINTF], buf, (size_t)n);
                continue;
            }
            for (ssize_t i = 0; k == OUT_ASSERT && i < n; ++i) { /* longer lines than eline are not the driver's */
                if (g->elen < sizeof g->eline - 1) g->eline[g->elen] = buf[i];
                ++g->elen;
                if (buf[i] != '\n') continue;
                if (g->elen < sizeof g->eline) {
                    g->eline[g->elen] = 0;
                    if (o && assertion_line(g->eline)) out_append(&o->out[OUT_ASSERT], g->eline, g->elen);
                }
                g->elen = 0;
            }
            /* written without out_mu: a log nobody reads may block this write, and no
             * client's request may wait for that (the bytes are nobody's, or a copy) */
            pthread_mutex_unlock(&g->out_mu);
            for (ssize_t at = 0, w; at < n; at += w > 0 ? w : n) w = write(g->log_fd[k], buf + at, (size_t)(n - at));
            pthread_mutex_lock(&g->out_mu);
        }
    }
}

/* The driver writes device output while a synchronizing call runs; fflush pushes what
 * stdio holds, the drain takes it, so the reply to that call says so. */
void sg_drain_output(vcuda_gpu *g)
{
    fflush(stdout);
    fflush(stderr);
    pthread_mutex_lock(&g->out_mu);
    drain_locked(g);
    pthread_mutex_unlock(&g->out_mu);
}

/* A client attaches (delta 1) or detaches (-1): attached_now clients are left (g->mu
 * held).  The pipes' bytes so far belong to the owner before the change. */
void sg_output_owner_change(vcuda_gpu *g, client *cl, int delta, int attached_now)
{
    if (!sg_capturing(g)) return;
    fflush(stdout);
    fflush(stderr);
    pthread_mutex_lock(&g->out_mu);
    drain_locked(g);
    if (delta > 0) g->out_owner = attached_now == 1 ? cl : NULL;
    else g->out_owner = NULL;
    __atomic_store_n(&g->out_claimable, delta < 0 && attached_now == 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&g->out_mu);
}

/* Between requests nobody drains: a kernel printing more than a pipe holds would block
 * the driver (and a full stderr pipe the server's own logging), so this thread empties
 * them whenever they have data. */
static void *out_reader(void *arg)
{
    vcuda_gpu *g = arg;
    struct pollfd p[2] = {{g->out_fd[0], POLLIN, 0}, {g->out_fd[1], POLLIN, 0}};
    while (!*g->stop) {
        if (poll(p, 2, 200) > 0) {
            pthread_mutex_lock(&g->out_mu);
            drain_locked(g);
            pthread_mutex_unlock(&g->out_mu);
            if ((p[0].revents | p[1].revents) & (POLLHUP | POLLERR)) break;
        }
    }
    return NULL;
}

int sg_pending(const client *cl)
{
    return cl->out[0].len || cl->out[0].dropped || cl->out[1].len || cl->out[1].dropped;
}

/* A chunk of device printf output first, then of assertion messages; the reply says
 * which (1: stdout, 2: stderr, as the real runtime's driver writes them). */
int sg_printf_fetch(vcuda_gpu *g, client *cl, vcuda_msg *r)
{
    r->v[0] = 1, r->nv = 1;
    if (!sg_capturing(g)) return r->blob = NULL, r->blob_len = 0, 0;
    pthread_mutex_lock(&g->out_mu);
    int k = cl->out[OUT_PRINTF].len || cl->out[OUT_PRINTF].dropped ? OUT_PRINTF : OUT_ASSERT;
    outbuf *o = &cl->out[k];
    if (o->dropped) {
        char note[96];
        int n = snprintf(note, sizeof note, "\n[vcuda-server: %zu bytes of device %s output dropped]\n", o->dropped,
                         k == OUT_PRINTF ? "printf" : "assertion");
        char *q = realloc(o->b, o->len + (size_t)n);
        if (q) memcpy(q + o->len, note, (size_t)n), o->b = q, o->len += (size_t)n, o->dropped = 0;
    }
    size_t n = o->len < g->chunk ? o->len : g->chunk;
    char *b = realloc(cl->sent, n ? n : 1); /* the reply's bytes, alive until the next fetch */
    if (b) {
        cl->sent = b;
        if (n) memcpy(cl->sent, o->b, n), memmove(o->b, o->b + n, o->len - n);
        o->len -= n;
    }
    pthread_mutex_unlock(&g->out_mu);
    if (!b) return sg_reply_invalid(cl, r, 2, "PRINTF_FETCH: server out of memory");
    r->v[0] = (uint64_t)k + 1;
    r->blob = (const uint8_t *)cl->sent, r->blob_len = (uint32_t)n;
    return 0;
}

int sg_synchronizes(unsigned op)
{
    return op == VCUDA_OP_DEVICE_SYNCHRONIZE || op == VCUDA_OP_STREAM_SYNCHRONIZE || op == VCUDA_OP_EVENT_SYNCHRONIZE ||
           op == VCUDA_OP_MEMCPY_D2H || op == VCUDA_OP_EVENT_QUERY || op == VCUDA_OP_STREAM_QUERY ||
           op == VCUDA_OP_DEVICE_RESET;
}

/* The one client left after the others went takes the output, between two of its
 * requests: no synchronize of its own is under way, every departed client synchronized
 * and drained before it went, so what the pipe holds is nobody's (to the log). */
void sg_claim_output(vcuda_gpu *g, client *cl)
{
    pthread_mutex_lock(&g->mu);
    fflush(stdout);
    fflush(stderr);
    pthread_mutex_lock(&g->out_mu);
    if (g->out_claimable && g->attached == 1 && !g->out_owner) {
        drain_locked(g);
        g->out_owner = cl;
    }
    __atomic_store_n(&g->out_claimable, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&g->out_mu);
    pthread_mutex_unlock(&g->mu);
}

/* ---- context limits ------------------------------------------------------------------ *
 * LIMIT_SET: limits are the context's.  On the client's own context (--isolation
 * context) it sets what it likes; on the shared one only while it is the only client,
 * with no other client attaching meanwhile.  What a limit makes the device reserve is
 * charged to the client's tenant: the stack its size times the device's resident threads
 * (SMs x threads per SM: the driver reserves a stack for every thread that can run at
 * once), the malloc heap and the printf FIFO their size, each above the value the context
 * had before the tenant changed it.  The L2 limits reserve no device memory; the device
 * runtime's (sync depth, pending launches) reserve an amount the driver does not tell,
 * so a tenant with a quota cannot set them.  A limit set on the shared context is the
 * tenant's until its last connection leaves: then the context gets its previous values
 * back and the tenant its quota, so the next client finds the context as it was.  On a
 * client's own context the limits go with the context, at the client's end.  With
 * --isolation process the shared context is the tenant's serving process's, which holds
 * all of that tenant's connections: the same restore when the last one leaves (the
 * process lingers, serving the tenant's next client), and a process that has exited
 * takes its context with it (the next one starts from the driver's defaults). */
static const char *const limit_names[NLIMITS] = {
    "cudaLimitStackSize", "cudaLimitPrintfFifoSize", "cudaLimitMallocHeapSize", "cudaLimitDevRuntimeSyncDepth",
    "cudaLimitDevRuntimePendingLaunchCount", "cudaLimitMaxL2FetchGranularity", "cudaLimitPersistingL2CacheSize"};

/* Bytes of device memory limit `which` at value v reserves (see above). */
static uint64_t limit_bytes(const vcuda_gpu *g, int which, uint64_t v)
{
    if (which == LIMIT_STACK) return g->threads && v > UINT64_MAX / g->threads ? UINT64_MAX : v * g->threads;
    return which == LIMIT_PRINTF_FIFO || which == LIMIT_HEAP ? v : 0;
}

/* The charge for limit `which` at v, its holder's earlier value being base. */
static uint64_t limit_charge(const vcuda_gpu *g, int which, uint64_t base, uint64_t v)
{
    uint64_t now = limit_bytes(g, which, v), before = limit_bytes(g, which, base);
    return now > before ? now - before : 0;
}

/* The tenant's quota for `bytes` more of a limit: 0, or -1 (nothing charged, the
 * refusal in r).  own: a client's own context (charged as its memory). */
static int limit_charge_take(vcuda_gpu *g, client *cl, vcuda_msg *r, int own, int which, uint64_t v, uint64_t bytes)
{
    uint64_t used = 0;
    vcuda_tenant *t = cl->tenant;
    if (!bytes) return 0;
    if (!t || !vcuda_tenant_charge(t, bytes, &used)) {
        if (own) cl->mem_bytes += bytes; /* (its own context's: given back at its end) */
        return 0;
    }
    if (which == LIMIT_STACK)
        sg_reply_invalid(cl, r, 2, "LIMIT_SET: %s of %llu bytes reserves %llu bytes of device memory (x %llu resident "
                         "threads): over tenant %s's quota of %llu bytes (%llu in use)", limit_names[which],
                         (unsigned long long)v, (unsigned long long)bytes, (unsigned long long)g->threads, t->name,
                         (unsigned long long)t->mem_quota, (unsigned long long)used);
    else
        sg_reply_invalid(cl, r, 2, "LIMIT_SET: %s of %llu bytes: %llu more bytes of device memory, over tenant %s's quota "
                         "of %llu bytes (%llu in use)", limit_names[which], (unsigned long long)v,
                         (unsigned long long)bytes, t->name, (unsigned long long)t->mem_quota, (unsigned long long)used);
    return -1;
}

static void limit_charge_give(client *cl, int own, vcuda_tenant *t, uint64_t bytes)
{
    if (own) sg_uncharge(cl, bytes);
    else if (t) vcuda_tenant_uncharge(t, bytes);
}

/* Sets the limit with the charges that go with it (the holder's state in ls); the
 * reply in r either way. */
static int limit_apply(vcuda_gpu *g, client *cl, vcuda_msg *r, int own, limit_state *ls, int which, uint64_t v)
{
    size_t cur = 0, got = 0;
    CUresult rc;
    if ((rc = g->cu.cuCtxGetLimit(&cur, which))) return sg_reply_cu(g, cl, r, "LIMIT_SET", rc);
    uint32_t bit = 1u << which;
    uint64_t base = ls->set & bit ? ls->prev[which] : cur, had = ls->charged[which];
    uint64_t want = limit_charge(g, which, base, v), held = want > had ? want : had;
    if (held > had && limit_charge_take(g, cl, r, own, which, v, held - had)) return 0;
    if ((rc = g->cu.cuCtxSetLimit(which, v))) {
        limit_charge_give(cl, own, cl->tenant, held - had);
        return sg_reply_cu(g, cl, r, "LIMIT_SET", rc);
    }
    /* the driver may round the value up: the charge is for what it took */
    uint64_t took = g->cu.cuCtxGetLimit(&got, which) ? want : limit_charge(g, which, base, got);
    if (took > held && limit_charge_take(g, cl, r, own, which, got, took - held)) {
        g->cu.cuCtxSetLimit(which, cur);
        limit_charge_give(cl, own, cl->tenant, held - had);
        return 0;
    }
    if (took < held) limit_charge_give(cl, own, cl->tenant, held - took);
    ls->charged[which] = took;
    if (!(ls->set & bit)) ls->prev[which] = base, ls->set |= bit;
    return 0;
}

int sg_limit_set(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    if (q->v[0] >= NLIMITS) /* (the runtime's cudaLimit values are these) */
        return sg_reply_invalid(cl, r, 217 /* cudaErrorUnsupportedLimit */, "LIMIT_SET: no limit %llu",
                                (unsigned long long)q->v[0]);
    int which = (int)q->v[0], own = cl->own != NULL;
    vcuda_tenant *t = cl->tenant;
    if (t && t->mem_quota && (which == LIMIT_SYNC_DEPTH || which == LIMIT_PENDING_LAUNCHES))
        return sg_reply_invalid(cl, r, 801, "LIMIT_SET: %s reserves device memory this server cannot account for: "
                                "refused under tenant %s's quota", limit_names[which], t->name);
    if (own) return limit_apply(g, cl, r, 1, &cl->lims, which, q->v[1]);
    pthread_mutex_lock(&g->mu);
    int alone = g->attached == 1 && !g->limit_busy;
    if (alone) g->limit_busy = 1;
    pthread_mutex_unlock(&g->mu);
    if (!alone)
        return sg_reply_invalid(cl, r, 801, "LIMIT_SET: the GPU context is shared with other clients of this "
                                "server; limits can be set with --isolation context or on a server of one's own");
    /* the only client: any earlier holder's connections are all gone (and its limits
     * restored), unless it is this client's tenant */
    limit_apply(g, cl, r, 0, &g->lims, which, q->v[1]);
    pthread_mutex_lock(&g->mu);
    if (g->lims.set && g->lim_owner != t) g->lim_owner = t, g->lim_owner_conns = 1;
    g->limit_busy = 0;
    pthread_cond_broadcast(&g->limit_done);
    pthread_mutex_unlock(&g->mu);
    return 0;
}

/* The shared context's limits back to what they were, the tenant's charge for them back
 * to it (its last connection on the context has gone; g->limit_busy held by the caller,
 * so no client attaches meanwhile).  A limit the driver no longer lets change (the heap,
 * once a kernel that uses malloc has run) stays, and so does its charge. */
void sg_limits_restore(vcuda_gpu *g, vcuda_tenant *t)
{
    limit_state *ls = &g->lims;
    for (int k = 0; k < NLIMITS; ++k) {
        if (!(ls->set & (1u << k))) continue;
        CUresult rc = g->cu.cuCtxSetLimit(k, ls->prev[k]);
        if (rc) {
            fprintf(stderr, "vcuda-server: device %d: tenant %s left; %s could not be set back to %zu: %s (CUresult "
                    "%d): the context keeps it, and the tenant its charge of %llu bytes\n", g->ordinal,
                    t ? t->name : "?", limit_names[k], ls->prev[k], sg_cu_error_text(g, rc), rc,
                    (unsigned long long)ls->charged[k]);
            continue;
        }
        if (t) vcuda_tenant_uncharge(t, ls->charged[k]);
    }
    memset(ls, 0, sizeof *ls);
}

/* stdout becomes the printf pipe and stderr the assertion pipe (k: OUT_PRINTF /
 * OUT_ASSERT); the streams they replace stay the logs.  Without a pipe, that output
 * stays in the server's own stream, as before, and the server says so. */
static void capture_fd(vcuda_gpu *g, int k)
{
    int fds[2], fd = k == OUT_PRINTF ? STDOUT_FILENO : STDERR_FILENO;
    const char *what = k == OUT_PRINTF ? "device printf stays on the server's stdout"
                                       : "device assertion messages stay on the server's stderr";
    fflush(k == OUT_PRINTF ? stdout : stderr);
    if ((g->log_fd[k] = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0) {
        fprintf(stderr, "vcuda-server: %s (dup: %s)\n", what, strerror(errno));
        return;
    }
    if (pipe(fds)) {
        fprintf(stderr, "vcuda-server: %s (pipe: %s)\n", what, strerror(errno));
        return;
    }
#ifdef F_SETPIPE_SZ
    fcntl(fds[1], F_SETPIPE_SZ, 1 << 20); /* fewer wake-ups; the size is only a hint */
#endif
    fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    if (dup2(fds[1], fd) < 0) {
        fprintf(stderr, "vcuda-server: %s (dup2: %s)\n", what, strerror(errno));
        close(fds[0]), close(fds[1]);
        return;
    }
    close(fds[1]);
    g->out_fd[k] = fds[0];
}

void sg_uncapture(vcuda_gpu *g)
{
    for (int k = 0; k < 2; ++k) {
        if (g->out_fd[k] < 0) continue;
        fflush(k == OUT_PRINTF ? stdout : stderr);
        dup2(g->log_fd[k], k == OUT_PRINTF ? STDOUT_FILENO : STDERR_FILENO);
        close(g->out_fd[k]);
        g->out_fd[k] = -1;
    }
}

void sg_capture_output(vcuda_gpu *g)
{
    capture_fd(g, OUT_PRINTF);
    capture_fd(g, OUT_ASSERT);
    if (sg_capturing(g) && pthread_create(&g->out_thread, NULL, out_reader, g)) {
        sg_uncapture(g); /* as without capture */
        fprintf(stderr, "vcuda-server: device printf and assertion messages stay on the server's "
                        "stdout/stderr (no reader thread)\n");
    }
}

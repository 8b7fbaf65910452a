/* gasnet backend: the GASNet-1 API (which GASNet-EX still ships as its legacy API).
 *
 * Coarrays live in the GASNet segment: every image allocates the same sequence of
 * coarrays collectively, so a simple stack allocator gives each one the same offset
 * everywhere and no addresses need exchanging.
 *   put      gasnet_put_nbi per contiguous run.  The non-bulk form is used (Omni
 *            used _bulk) because a coarray put statement lets the program reuse its
 *            right-hand side at once; _bulk would forbid that until sync memory.
 *   get      waits for this image's puts/accumulates first (a get must see them),
 *            then gasnet_get_bulk, or the VIS gasnet_gets_bulk for strided runs
 *   put-acc  GASNet has no remote accumulate (P002 table 1): one AM medium request
 *            per run (split to gasnet_AMMaxMedium), applied by a handler at the
 *            target under a handler-safe lock, so every op is atomic per element
 *   atomics  one AM medium request per call, applied by a handler at the target under
 *            the same lock as the accumulates (so atomic with respect to each other
 *            and to accumulates), the old value in the reply
 *   shape check   the allocation's all-gather: every image sends its shape to every
 *            other one (AM medium, per-parity buffers), the core compares
 *   sync memory   gasnet_wait_syncnbi_puts, wait for every accumulate reply, poll
 * Not here: the image control words (xmpc_ctl) of the MPI backends, so no stopped-image
 * status (xmpc_image_status says running, the *_stat calls never return
 * XMPC_STAT_STOPPED_IMAGE), no deadlock naming and no XMPC_WAIT_TIMEOUT: a sync naming
 * an image that has ended, or collective calls that differ, wait in GASNet's barrier.
 * Transfers have no int limit here (size_t lengths). */
#include "xmpc_internal.h"

#include "umstudy/support.h"

#include <gasnet.h>
#include <gasnet_vis.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { H_ACC = 201, H_ACC_DONE, H_NOTIFY, H_ATOMIC, H_ATOMIC_DONE, H_GATHER }; /* 128..255 */

static gasnet_seginfo_t *g_seg;
static size_t g_seg_size;
static int g_me, g_n;
static gasnet_hsl_t g_acc_lock = GASNET_HSL_INITIALIZER;
static int g_acc_pending;                 /* accumulate requests not yet acknowledged */
static unsigned *g_notified, *g_expected; /* sync images counts, per image */

/* Segment stack: blocks in allocation order; freed ones are released from the top. */
static struct { size_t off, size; int freed; } *g_blk;
static int g_nblk, g_cap_blk;

static const size_t k_type_size[] = {1, sizeof(int), sizeof(long), sizeof(float), sizeof(double)};

static void *word_ptr(gasnet_handlerarg_t hi, gasnet_handlerarg_t lo)
{
    return (void *)(uintptr_t)(((uint64_t)(uint32_t)hi << 32) | (uint32_t)lo);
}

static void acc_handler(gasnet_token_t t, void *buf, size_t nbytes, gasnet_handlerarg_t hi,
                        gasnet_handlerarg_t lo, gasnet_handlerarg_t op, gasnet_handlerarg_t type)
{
    size_t bad = 0;
    gasnet_hsl_lock(&g_acc_lock);
    int rc = xmpc_apply_op((xmpc_op)op, (xmpc_type)type, word_ptr(hi, lo), buf,
                           nbytes / k_type_size[type], &bad);
    gasnet_hsl_unlock(&g_acc_lock);
    if (rc != XMPC_ACC_OK) { /* found at the target, the only place the dividend is */
        fprintf(stderr, "xmpc: error: image %d (gasnet): accumulate '/': %s (element %zu of a "
                "run)\n", g_me + 1, rc == XMPC_ACC_DIV_ZERO ? "integer division by zero"
                : "integer division overflows: INT_MIN / -1", bad);
        gasnet_exit(UMS_EXIT_FAILED);
    }
    gasnet_AMReplyShort0(t, H_ACC_DONE);
}

static void acc_done_handler(gasnet_token_t t)
{
    (void)t;
    __atomic_sub_fetch(&g_acc_pending, 1, __ATOMIC_SEQ_CST);
}

static void notify_handler(gasnet_token_t t, gasnet_handlerarg_t from)
{
    (void)t;
    __atomic_add_fetch(&g_notified[from], 1, __ATOMIC_SEQ_CST);
}

/* ---- atomics: applied at the target under g_acc_lock, the old value replied ---------- */

static int g_atomic_done; /* one atomic in flight per image: xmpc calls are not concurrent */
static long g_atomic_old;

static void atomic_handler(gasnet_token_t t, void *buf, size_t nbytes, gasnet_handlerarg_t hi,
                           gasnet_handlerarg_t lo, gasnet_handlerarg_t what,
                           gasnet_handlerarg_t is_int)
{
    long arg[2] = {0, 0}; /* compare, value */
    memcpy(arg, buf, nbytes < sizeof arg ? nbytes : sizeof arg);
    void *at = word_ptr(hi, lo);
    long old;
    gasnet_hsl_lock(&g_acc_lock);
    if (is_int) {
        int *p = at;
        old = *p;
        if (what == XMPC_AT_DEFINE || (what == XMPC_AT_CAS && old == arg[0]))
            *p = (int)arg[1];
        else if (what == XMPC_AT_ADD)
            *p = (int)((unsigned)*p + (unsigned)arg[1]);
    } else {
        long *p = at;
        old = *p;
        if (what == XMPC_AT_DEFINE || (what == XMPC_AT_CAS && old == arg[0]))
            *p = arg[1];
        else if (what == XMPC_AT_ADD)
            *p = (long)((unsigned long)*p + (unsigned long)arg[1]);
    }
    gasnet_hsl_unlock(&g_acc_lock); /* no GASNet call while holding it */
    gasnet_AMReplyMedium0(t, H_ATOMIC_DONE, &old, sizeof old);
}

static void atomic_done_handler(gasnet_token_t t, void *buf, size_t nbytes)
{
    (void)t;
    memcpy(&g_atomic_old, buf, nbytes < sizeof g_atomic_old ? nbytes : sizeof g_atomic_old);
    __atomic_store_n(&g_atomic_done, 1, __ATOMIC_SEQ_CST);
}

/* ---- the allocation's all-gather: per-parity buffers, filled by a handler ------------ */

enum { GATHER_MAX = 256 };
static char *g_gather_buf[2];
static int g_gather_got[2];
static unsigned g_gather_round;

static void gather_handler(gasnet_token_t t, void *buf, size_t nbytes, gasnet_handlerarg_t from,
                           gasnet_handlerarg_t parity)
{
    (void)t;
    memcpy(g_gather_buf[parity] + (size_t)from * GATHER_MAX, buf, nbytes);
    __atomic_add_fetch(&g_gather_got[parity], 1, __ATOMIC_SEQ_CST);
}

static void barrier(void);

static void check(int rc, const char *what)
{
    if (rc != GASNET_OK) {
        fprintf(stderr, "xmpc: error: %s failed: %s (%s)\n", what, gasnet_ErrorName(rc),
                gasnet_ErrorDesc(rc));
        gasnet_exit(UMS_EXIT_FAILED);
    }
}

static void init(int *argc, char ***argv, int *me, int *n)
{
    /* The mpi conduit starts MPI itself (and only if nobody has); smp and udp spawn
     * their own processes and must not see MPI at all. */
    check(gasnet_init(argc, argv), "gasnet_init");
    static gasnet_handlerentry_t handlers[] = {
        {H_ACC, (void (*)())acc_handler},
        {H_ACC_DONE, (void (*)())acc_done_handler},
        {H_NOTIFY, (void (*)())notify_handler},
        {H_ATOMIC, (void (*)())atomic_handler},
        {H_ATOMIC_DONE, (void (*)())atomic_done_handler},
        {H_GATHER, (void (*)())gather_handler},
    };
    /* Segment: XMPC_GASNET_SEGMENT_SIZE (K/M/G suffixes) or 256 MiB, capped by what
     * the conduit can map on every node. */
    size_t want = (size_t)256 << 20;
    const char *env = getenv("XMPC_GASNET_SEGMENT_SIZE");
    if (env && ums_parse_size(env, &want) != 0) {
        fprintf(stderr, "xmpc: error: XMPC_GASNET_SEGMENT_SIZE=%s is not a size\n", env);
        gasnet_exit(UMS_EXIT_USAGE);
    }
    uintptr_t max = gasnet_getMaxGlobalSegmentSize();
    if (want > max)
        want = max;
    want -= want % GASNET_PAGESIZE;
    check(gasnet_attach(handlers, sizeof handlers / sizeof handlers[0], want, 0), "gasnet_attach");
    g_me = (int)gasnet_mynode();
    g_n = (int)gasnet_nodes();
    g_seg = xmpc_xmalloc(sizeof *g_seg * (size_t)g_n);
    check(gasnet_getSegmentInfo(g_seg, g_n), "gasnet_getSegmentInfo");
    g_seg_size = g_seg[g_me].size;
    g_notified = calloc((size_t)g_n, sizeof *g_notified);
    g_expected = calloc((size_t)g_n, sizeof *g_expected);
    /* Before the barrier: another image's first all-gather may arrive right after it. */
    for (int p = 0; p < 2; ++p)
        g_gather_buf[p] = xmpc_xmalloc((size_t)g_n * GATHER_MAX);
    barrier();
    *me = g_me;
    *n = g_n;
}

static void barrier(void)
{
    gasnet_barrier_notify(0, GASNET_BARRIERFLAG_ANONYMOUS);
    check(gasnet_barrier_wait(0, GASNET_BARRIERFLAG_ANONYMOUS), "gasnet_barrier_wait");
}

static void finalize(void)
{
    barrier();
    fflush(stdout);
    fflush(stderr);
    gasnet_exit(0); /* GASNet-1 has no finalize that returns */
}

static void abort_(int code) { gasnet_exit(code); }

static void alloc(xmpc_coarray *ca)
{
    size_t top = g_nblk ? g_blk[g_nblk - 1].off + g_blk[g_nblk - 1].size : 0;
    size_t size = (ca->bytes + 63) & ~(size_t)63; /* keep every coarray 64-byte aligned */
    if (top + size > g_seg_size)
        xmpc_fatal(ca, g_me + 1, "GASNet segment full (%zu of %zu bytes used, %zu wanted): "
                   "set XMPC_GASNET_SEGMENT_SIZE", top, g_seg_size, size);
    if (g_nblk == g_cap_blk) {
        g_cap_blk = g_cap_blk ? 2 * g_cap_blk : 16;
        g_blk = realloc(g_blk, sizeof *g_blk * (size_t)g_cap_blk);
    }
    g_blk[g_nblk].off = top;
    g_blk[g_nblk].size = size;
    g_blk[g_nblk].freed = 0;
    ca->bk = (void *)(uintptr_t)g_nblk++;
    ca->data = (char *)g_seg[g_me].addr + top;
    memset(ca->data, 0, ca->bytes);
    barrier();
}

static void free_(xmpc_coarray *ca)
{
    barrier(); /* nobody may still be accessing it */
    g_blk[(uintptr_t)ca->bk].freed = 1;
    while (g_nblk && g_blk[g_nblk - 1].freed)
        --g_nblk;
}

static char *remote(const xmpc_coarray *ca, int rank, size_t roff)
{
    return (char *)g_seg[rank].addr + g_blk[(uintptr_t)ca->bk].off + roff;
}

typedef struct {
    xmpc_coarray *ca;
    int rank;
    xmpc_op op;
} run_ctx;

static void put_run(void *ctx, size_t roff, char *laddr, size_t n)
{
    run_ctx *c = ctx;
    gasnet_put_nbi(c->rank, remote(c->ca, c->rank, roff), laddr, n);
}

static void put(xmpc_coarray *ca, int rank, const xmpc_xfer *x)
{
    run_ctx c = {ca, rank, 0};
    xmpc_xfer_runs(x, put_run, &c);
    ca->dirty = 1;
}

static void complete_all(void)
{
    gasnet_wait_syncnbi_puts();
    GASNET_BLOCKUNTIL(__atomic_load_n(&g_acc_pending, __ATOMIC_SEQ_CST) == 0);
}

static void get(xmpc_coarray *ca, int rank, const xmpc_xfer *x)
{
    if (ca->dirty)
        complete_all();
    char *src = remote(ca, rank, x->roff);
    if (x->levels == 0) {
        gasnet_get_bulk(x->laddr, rank, src, x->block);
        return;
    }
    size_t count[XMPC_MAX_DIMS + 1] = {x->block};
    for (int i = 0; i < x->levels; ++i)
        count[i + 1] = x->count[i];
    gasnet_gets_bulk(x->laddr, x->lstride, rank, src, x->rstride, count, (size_t)x->levels);
}

static void acc_run(void *ctx, size_t roff, char *laddr, size_t n)
{
    run_ctx *c = ctx;
    size_t es = c->ca->esize, chunk = gasnet_AMMaxMedium() / es * es;
    for (size_t done = 0; done < n; done += chunk) {
        size_t len = n - done < chunk ? n - done : chunk;
        uintptr_t dst = (uintptr_t)remote(c->ca, c->rank, roff + done);
        __atomic_add_fetch(&g_acc_pending, 1, __ATOMIC_SEQ_CST);
        /* A medium payload is copied before the request returns: laddr is free again. */
        gasnet_AMRequestMedium4(c->rank, H_ACC, laddr + done, len, (gasnet_handlerarg_t)(dst >> 32),
                                (gasnet_handlerarg_t)(uint32_t)dst, (gasnet_handlerarg_t)c->op,
                                (gasnet_handlerarg_t)c->ca->type);
    }
}

static void put_acc(xmpc_coarray *ca, int rank, const xmpc_xfer *x, xmpc_op op)
{
    run_ctx c = {ca, rank, op};
    xmpc_xfer_runs(x, acc_run, &c);
    ca->dirty = 1;
}

static void sync_memory(xmpc_coarray *all)
{
    complete_all();
    for (xmpc_coarray *ca = all; ca; ca = ca->next)
        ca->dirty = 0;
    gasnet_AMPoll(); /* AM-based conduits deliver others' puts to us only when we poll */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static void sync_images(int n, const int *ranks)
{
    for (int i = 0; i < n; ++i)
        gasnet_AMRequestShort1(ranks[i], H_NOTIFY, (gasnet_handlerarg_t)g_me);
    for (int i = 0; i < n; ++i) {
        unsigned want = ++g_expected[ranks[i]];
        GASNET_BLOCKUNTIL(__atomic_load_n(&g_notified[ranks[i]], __ATOMIC_SEQ_CST) >= want);
    }
}

static void atomic(xmpc_coarray *ca, int rank, size_t off, int what, long compare, long value,
                   long *old)
{
    if (ca->dirty)
        complete_all(); /* after this image's earlier puts, as a get is */
    uintptr_t at = (uintptr_t)remote(ca, rank, off);
    long arg[2] = {compare, value};
    __atomic_store_n(&g_atomic_done, 0, __ATOMIC_SEQ_CST);
    gasnet_AMRequestMedium4(rank, H_ATOMIC, arg, sizeof arg, (gasnet_handlerarg_t)(at >> 32),
                            (gasnet_handlerarg_t)(uint32_t)at, (gasnet_handlerarg_t)what,
                            (gasnet_handlerarg_t)(ca->type == XMPC_INT));
    GASNET_BLOCKUNTIL(__atomic_load_n(&g_atomic_done, __ATOMIC_SEQ_CST));
    *old = g_atomic_old;
}

/* Round k + 2 reuses round k's buffer: an image sends it only after finishing round
 * k + 1, which needed this image's round k + 1 message, sent after round k ended here. */
static void allgather(const void *mine, void *all, size_t bytes)
{
    if (bytes > GATHER_MAX || bytes > gasnet_AMMaxMedium())
        xmpc_fatal(NULL, g_me + 1, "gasnet all-gather of %zu bytes (at most %d)", bytes, GATHER_MAX);
    int p = (int)(g_gather_round++ & 1);
    for (int r = 0; r < g_n; ++r)
        if (r != g_me)
            gasnet_AMRequestMedium2(r, H_GATHER, (void *)mine, bytes, (gasnet_handlerarg_t)g_me,
                                    (gasnet_handlerarg_t)p);
    GASNET_BLOCKUNTIL(__atomic_load_n(&g_gather_got[p], __ATOMIC_SEQ_CST) == g_n - 1);
    for (int r = 0; r < g_n; ++r)
        memcpy((char *)all + (size_t)r * bytes, r == g_me ? mine : g_gather_buf[p] + (size_t)r * GATHER_MAX,
               bytes);
    __atomic_store_n(&g_gather_got[p], 0, __ATOMIC_SEQ_CST);
}

const xmpc_backend xmpc_backend_gasnet = {
    .name = "gasnet",
    .init = init,
    .finalize = finalize,
    .abort = abort_,
    .alloc = alloc,
    .free = free_,
    .put = put,
    .get = get,
    .put_acc = put_acc,
    .sync_memory = sync_memory,
    .barrier = barrier,
    .sync_images = sync_images,
    .allgather = allgather,
    .atomic = atomic,
};

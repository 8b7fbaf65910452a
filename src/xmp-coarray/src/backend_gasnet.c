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
 *   sync memory   gasnet_wait_syncnbi_puts, wait for every accumulate reply, poll
 * Not here (yet): coarray atomics and the allocation's shape comparison (both need
 * AM round trips this file does not have); the core reports the former by name. */
#include "xmpc_internal.h"

#include "umstudy/support.h"

#include <gasnet.h>
#include <gasnet_vis.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { H_ACC = 201, H_ACC_DONE, H_NOTIFY }; /* client handlers: 128..255 */

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
};

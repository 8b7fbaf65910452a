/* mpi3 backend: MPI-3 passive-target RMA.
 *
 * One window per coarray (MPI_Win_allocate), locked once for all targets with
 * MPI_Win_lock_all so every put/get is a plain RMA call with no epoch per access.
 * Strided sides are hvector datatypes built from the xfer, so nothing is packed.
 *
 * When every image runs on one node (MPI_COMM_TYPE_SHARED spans MPI_COMM_WORLD) the
 * window is MPI_Win_allocate_shared instead, and MPI_Win_shared_query gives each
 * image's segment an address here: a contiguous put or get is then a memcpy to or
 * from that address (MPI-3's load/store access to shared windows, made visible by
 * MPI_Win_sync at sync memory), with no RMA call at all.  Everything else (strided
 * transfers, accumulates, atomics) stays RMA on the same window.  XMPC_MPI3_SHARED=0
 * keeps every access RMA.
 *   put      MPI_Put + MPI_Win_flush_local (the caller may reuse its buffer); a small
 *            contiguous put is copied to a staging arena instead and needs no
 *            flush_local: the arena is recycled only after the windows it fed have
 *            been flushed (sync memory, or when it fills up)
 *   get      MPI_Win_flush to the target if this coarray has puts in flight (a get
 *            must see them), MPI_Get + MPI_Win_flush_local
 *   put-acc  MPI_Accumulate with SUM/PROD/MIN/MAX; '-' is SUM of negated values
 *            (x - y == x + (-y) bit for bit in IEEE when -y flips the sign bit, which
 *            0.0 - y does not: 0.0 - 0.0 is +0.0, and -0.0 + +0.0 gives +0.0 where
 *            -0.0 - 0.0 is -0.0); '/' has no MPI op: get + divide + put under a
 *            per-image mutex (compare-and-swap on a lock window)
 *   atomics  MPI_Accumulate(MPI_REPLACE) / MPI_Fetch_and_op(MPI_NO_OP, MPI_SUM) /
 *            MPI_Compare_and_swap on the coarray's window, flushed to the target
 *            (long elements on Open MPI 4.x: under the per-image mutex, see below)
 *   sync memory   MPI_Win_flush_all + MPI_Win_sync on every window */
#include "xmpc_internal.h"

#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* One int per image: the '/' accumulate mutex.  An int, not a long: Open MPI 4.x's
 * shared-memory transport crashes on 64-bit compare-and-swap (ompi issue #7967). */
static MPI_Win g_lock_win;

static int g_shared; /* every image on this node: coarrays are shared-memory windows */
static int g_stored; /* this image stored into another's segment since sync memory */

static void init_shared(int n)
{
    const char *e = getenv("XMPC_MPI3_SHARED");
    if (e && *e && strcmp(e, "0") && strcmp(e, "1"))
        xmpc_fatal(NULL, 0, "XMPC_MPI3_SHARED=%s: 0 (every access through RMA calls) or 1 "
                   "(load/store where every image shares this node's memory; the default)", e);
    MPI_Comm node;
    int local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &local);
    MPI_Comm_free(&node);
    g_shared = local == n && !(e && !strcmp(e, "0"));
    if (!g_shared)
        return;
    /* Only some one-sided components make shared windows (Open MPI: osc/sm, not osc/ucx
     * when a site or the user selects it): one byte tried with errors returned, and RMA
     * for every coarray unless every image got it. */
    MPI_Errhandler was;
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &was);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Win probe;
    char *base;
    int ok = MPI_Win_allocate_shared(1, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &probe) ==
             MPI_SUCCESS, all;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, was);
    MPI_Errhandler_free(&was);
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    /* A window some image failed to make cannot be freed collectively: left as it is. */
    if (all)
        MPI_Win_free(&probe);
    g_shared = all;
}

static void init(int *argc, char ***argv, int *me, int *n)
{
    xmpc_mpi_init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, me);
    MPI_Comm_size(MPI_COMM_WORLD, n);
    init_shared(*n);
    int *word;
    MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &word, &g_lock_win);
    *word = 0;
    MPI_Win_lock_all(MPI_MODE_NOCHECK, g_lock_win);
    MPI_Win_sync(g_lock_win);
    MPI_Barrier(MPI_COMM_WORLD);
}

static void finalize(void)
{
    MPI_Win_unlock_all(g_lock_win);
    MPI_Win_free(&g_lock_win);
    xmpc_mpi_finalize();
}

/* Some window of this run uses MPI's separate memory model: each needs its own
 * MPI_Win_sync.  (Never reset: one more sync than needed is only slower.) */
static int g_separate;

/* One coarray's transport state (ca->bk). */
typedef struct {
    MPI_Win win;
    char **peer; /* peer[r]: rank r's segment for load/store, or NULL (no shared window) */
} mpi3_ca;

static MPI_Win win_of(const xmpc_coarray *ca) { return ((const mpi3_ca *)ca->bk)->win; }

static void alloc(xmpc_coarray *ca)
{
    mpi3_ca *st = xmpc_xmalloc(sizeof *st);
    st->peer = NULL;
    /* A zero-size coarray still gets a byte: every image has a base address. */
    MPI_Aint bytes = (MPI_Aint)(ca->bytes ? ca->bytes : 1);
    if (g_shared) {
        /* Each image's segment on its own pages: no cache line shared with a neighbour. */
        MPI_Info info;
        MPI_Info_create(&info);
        MPI_Info_set(info, "alloc_shared_noncontig", "true");
        MPI_Win_allocate_shared(bytes, 1, info, MPI_COMM_WORLD, &ca->data, &st->win);
        MPI_Info_free(&info);
        int n;
        MPI_Comm_size(MPI_COMM_WORLD, &n);
        st->peer = xmpc_xmalloc(sizeof *st->peer * (size_t)n);
        for (int r = 0; r < n; ++r) {
            MPI_Aint size;
            int unit;
            MPI_Win_shared_query(st->win, r, &size, &unit, &st->peer[r]);
        }
    } else
        MPI_Win_allocate(bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &ca->data, &st->win);
    memset(ca->data, 0, ca->bytes);
    int *model, found = 0;
    MPI_Win_get_attr(st->win, MPI_WIN_MODEL, &model, &found);
    if (!found || *model != MPI_WIN_UNIFIED)
        g_separate = 1;
    MPI_Win_lock_all(MPI_MODE_NOCHECK, st->win);
    MPI_Win_sync(st->win); /* the zeros before anyone's first access */
    MPI_Barrier(MPI_COMM_WORLD);
    ca->bk = st;
}

static void free_(xmpc_coarray *ca)
{
    mpi3_ca *st = ca->bk;
    MPI_Win_unlock_all(st->win);
    MPI_Win_free(&st->win);
    free(st->peer);
    free(st);
}

/* The contiguous block x by load/store, when the coarray is a shared window whose
 * memory model lets loads and stores mix with RMA (unified).  0: not taken. */
static int direct(xmpc_coarray *ca, int rank, const xmpc_xfer *x, int is_put)
{
    const mpi3_ca *st = ca->bk;
    if (!st->peer || x->levels != 0 || g_separate)
        return 0;
    char *at = st->peer[rank] + x->roff;
    if (is_put) {
        memcpy(at, x->laddr, x->block);
        g_stored = 1;
    } else {
        if (ca->dirty)
            MPI_Win_flush(rank, st->win); /* this image's earlier RMA puts first */
        memcpy(x->laddr, at, x->block);
    }
    return 1;
}

static MPI_Datatype basic_type(xmpc_type t)
{
    switch (t) {
    case XMPC_INT: return MPI_INT;
    case XMPC_LONG: return MPI_LONG;
    case XMPC_FLOAT: return MPI_FLOAT;
    case XMPC_DOUBLE: return MPI_DOUBLE;
    default: return MPI_BYTE;
    }
}

/* One side of x as (count, datatype): `count` basic elements when there are no
 * levels, otherwise one element of nested hvectors (a committed type the caller
 * frees with free_type). */
static int side_type(const xmpc_coarray *ca, int rank, const xmpc_xfer *x, const size_t *stride,
                     MPI_Datatype base, size_t esize, MPI_Datatype *out)
{
    size_t block = x->block / esize; /* <= XFER_MAX: see split */
    (void)ca;
    (void)rank;
    if (x->levels == 0) {
        *out = base;
        return (int)block;
    }
    MPI_Datatype t;
    MPI_Type_contiguous((int)block, base, &t);
    for (int i = 0; i < x->levels; ++i) {
        MPI_Datatype next;
        MPI_Type_create_hvector((int)x->count[i], 1, (MPI_Aint)stride[i], t, &next);
        MPI_Type_free(&t);
        t = next;
    }
    MPI_Type_commit(&t);
    *out = t;
    return 1;
}

static void free_type(MPI_Datatype *t, MPI_Datatype base)
{
    if (*t != base)
        MPI_Type_free(t);
}

/* ca->dirty here: 0 nothing outstanding, r+1 only rank r has outstanding puts, -1 several.
 * Completing one target with MPI_Win_flush is cheaper than MPI_Win_flush_all, and a
 * single target is the common case (a ping-pong, a halo to one neighbour). */
static void mark_dirty(xmpc_coarray *ca, int rank)
{
    ca->dirty = (ca->dirty == 0 || ca->dirty == rank + 1) ? rank + 1 : -1;
}

/* Staging for small contiguous puts: the copy costs less than the MPI_Win_flush_local
 * (a progress call) that reusing the caller's buffer at once would need.  A slot is
 * reused only after every window it fed has been flushed. */
enum { STAGE_BYTES = 64 << 10, STAGE_MAX_PUT = 512, STAGE_WINS = 16 };
static struct {
    char buf[STAGE_BYTES];
    size_t used;
    int nwins;
    MPI_Win wins[STAGE_WINS]; /* windows with staged puts in flight */
} g_stage;

static void stage_recycle(int flush)
{
    for (int i = 0; flush && i < g_stage.nwins; ++i)
        MPI_Win_flush_local_all(g_stage.wins[i]);
    g_stage.used = 0;
    g_stage.nwins = 0;
}

/* A staging copy of n <= STAGE_MAX_PUT bytes for a put on win. */
static void *stage(MPI_Win win, const void *src, size_t n)
{
    /* the window of the previous put first: consecutive puts mostly share one */
    int known = g_stage.nwins > 0 && g_stage.wins[g_stage.nwins - 1] == win;
    for (int i = 0; i < g_stage.nwins && !known; ++i)
        known = g_stage.wins[i] == win;
    if (g_stage.used + n > STAGE_BYTES || (!known && g_stage.nwins == STAGE_WINS)) {
        stage_recycle(1);
        known = 0;
    }
    if (!known)
        g_stage.wins[g_stage.nwins++] = win;
    char *p = g_stage.buf + g_stage.used;
    memcpy(p, src, n);
    g_stage.used += (n + 15) & ~(size_t)15;
    return p;
}

/* MPI counts are int: a transfer with a longer block or a larger count goes in pieces
 * of at most XFER_MAX (a multiple of every element size, so accumulates split between
 * elements). */
#define XFER_MAX ((size_t)1 << 30)

typedef struct {
    xmpc_coarray *ca;
    int rank, is_put;
    xmpc_op op;
} piece_ctx;

static int fits(const xmpc_xfer *x)
{
    if (x->block > XFER_MAX)
        return 0;
    for (int i = 0; i < x->levels; ++i)
        if (x->count[i] > XFER_MAX)
            return 0;
    return 1;
}

static void transfer_one(xmpc_coarray *ca, int rank, const xmpc_xfer *x, int is_put);
static void transfer_piece(void *ctx, const xmpc_xfer *x)
{
    piece_ctx *c = ctx;
    transfer_one(c->ca, c->rank, x, c->is_put);
}

static void transfer(xmpc_coarray *ca, int rank, const xmpc_xfer *x, int is_put)
{
    if (fits(x)) {
        transfer_one(ca, rank, x, is_put);
        return;
    }
    piece_ctx c = {ca, rank, is_put, 0};
    xmpc_xfer_split(x, XFER_MAX, XFER_MAX, SIZE_MAX, transfer_piece, &c);
}

/* One put or get of x, locally complete on return (the caller may reuse or read its
 * buffer); a put stays outstanding at the target until sync memory. */
static void transfer_one(xmpc_coarray *ca, int rank, const xmpc_xfer *x, int is_put)
{
    MPI_Win win = win_of(ca);
    if (!is_put && ca->dirty)
        MPI_Win_flush(rank, win); /* a get sees this image's earlier puts */
    MPI_Datatype lt, rt;
    int lc = side_type(ca, rank, x, x->lstride, MPI_BYTE, 1, &lt);
    int rc = side_type(ca, rank, x, x->rstride, MPI_BYTE, 1, &rt);
    if (is_put)
        MPI_Put(x->laddr, lc, lt, rank, (MPI_Aint)x->roff, rc, rt, win);
    else
        MPI_Get(x->laddr, lc, lt, rank, (MPI_Aint)x->roff, rc, rt, win);
    MPI_Win_flush_local(rank, win);
    free_type(&lt, MPI_BYTE);
    free_type(&rt, MPI_BYTE);
    if (is_put)
        mark_dirty(ca, rank);
}

static void put(xmpc_coarray *ca, int rank, const xmpc_xfer *x)
{
    if (direct(ca, rank, x, 1))
        return;
    if (x->levels == 0 && x->block <= STAGE_MAX_PUT) {
        MPI_Win win = win_of(ca);
        void *staged = stage(win, x->laddr, x->block);
        MPI_Put(staged, (int)x->block, MPI_BYTE, rank, (MPI_Aint)x->roff, (int)x->block,
                MPI_BYTE, win);
        mark_dirty(ca, rank);
        return;
    }
    transfer(ca, rank, x, 1);
}
static void get(xmpc_coarray *ca, int rank, const xmpc_xfer *x)
{
    if (!direct(ca, rank, x, 0))
        transfer(ca, rank, x, 0);
}

static void mutex(int rank, int lock)
{
    int one = 1, zero = 0, old;
    if (!lock) {
        MPI_Accumulate(&zero, 1, MPI_INT, rank, 0, 1, MPI_INT, MPI_REPLACE, g_lock_win);
        MPI_Win_flush(rank, g_lock_win);
        return;
    }
    do {
        MPI_Compare_and_swap(&one, &zero, &old, MPI_INT, rank, 0, g_lock_win);
        MPI_Win_flush(rank, g_lock_win);
    } while (old != 0);
}

static void put_acc_one(xmpc_coarray *ca, int rank, const xmpc_xfer *x, xmpc_op op);
static void acc_piece(void *ctx, const xmpc_xfer *x)
{
    piece_ctx *c = ctx;
    put_acc_one(c->ca, c->rank, x, c->op);
}

static void put_acc(xmpc_coarray *ca, int rank, const xmpc_xfer *x, xmpc_op op)
{
    if (fits(x) || op == XMPC_OP_DIV) { /* '/' goes through get + put, which split */
        put_acc_one(ca, rank, x, op);
        return;
    }
    piece_ctx c = {ca, rank, 0, op};
    xmpc_xfer_split(x, XFER_MAX, XFER_MAX, SIZE_MAX, acc_piece, &c);
}

static void put_acc_one(xmpc_coarray *ca, int rank, const xmpc_xfer *x, xmpc_op op)
{
    MPI_Win win = win_of(ca);
    if (op == XMPC_OP_DIV) {
        mutex(rank, 1);
        xmpc_rmw_acc(&xmpc_backend_mpi3, ca, rank, x, op);
        MPI_Win_flush(rank, win);
        mutex(rank, 0);
        return;
    }
    MPI_Op mop = op == XMPC_OP_PROD ? MPI_PROD : op == XMPC_OP_MIN ? MPI_MIN
               : op == XMPC_OP_MAX  ? MPI_MAX  : MPI_SUM;
    xmpc_xfer nx = *x;
    size_t bytes = xmpc_xfer_bytes(x), n = bytes / ca->esize;
    void *neg = NULL;
    if (op == XMPC_OP_DIFF) { /* the core hands accumulates a contiguous local side */
        neg = xmpc_xmalloc(bytes);
        xmpc_negate(ca->type, neg, x->laddr, n);
        nx.laddr = neg;
    }
    MPI_Datatype base = basic_type(ca->type), lt, rt;
    int lc = side_type(ca, rank, &nx, nx.lstride, base, ca->esize, &lt);
    int rc = side_type(ca, rank, &nx, nx.rstride, base, ca->esize, &rt);
    MPI_Accumulate(nx.laddr, lc, lt, rank, (MPI_Aint)nx.roff, rc, rt, mop, win);
    MPI_Win_flush_local(rank, win);
    free_type(&lt, base);
    free_type(&rt, base);
    free(neg);
    mark_dirty(ca, rank);
}

/* In MPI's unified memory model a window's public and private copies are the same
 * memory, so what MPI_Win_sync adds for others' completed writes to become visible to
 * this image's loads is a memory barrier and a progress call, the same for every
 * window: one call stands for all of them, or none when a flush here has just made
 * progress, with the barrier as a fence (a separate-model window gets its own sync). */
static void sync_memory(xmpc_coarray *all)
{
    MPI_Win any = MPI_WIN_NULL;
    int progressed = 0; /* a flush waited for completion: MPI made progress in it */
    for (xmpc_coarray *ca = all; ca; ca = ca->next) {
        MPI_Win win = win_of(ca);
        if (ca->dirty > 0)
            MPI_Win_flush(ca->dirty - 1, win);
        else if (ca->dirty < 0)
            MPI_Win_flush_all(win);
        progressed |= ca->dirty != 0;
        ca->dirty = 0;
        if (g_separate)
            MPI_Win_sync(win); /* others' writes to this image become visible to loads */
        any = win;
    }
    if (!g_separate && any != MPI_WIN_NULL) {
        /* this image's stores into others' segments become visible (MPI-3 11.7): the
         * same barrier, so also after a flush */
        if (!progressed || g_stored)
            MPI_Win_sync(any);
        /* Loads after it see what was written before it (and stores before it stay
         * before): acquire and release, which a full barrier would only make slower
         * in a polling loop (x86: no instruction; Arm: dmb ish). */
        __atomic_thread_fence(__ATOMIC_ACQ_REL);
    }
    if (!progressed && !g_stored)
        xmpc_mpi_poke(); /* a polling image: others' puts may need this image's progress */
    g_stored = 0;
    /* Every window was flushed (a staged put always leaves its coarray dirty). */
    stage_recycle(0);
}

static void barrier(void) { MPI_Barrier(MPI_COMM_WORLD); }

/* Open MPI 4.x crashes in 64-bit MPI_Compare_and_swap over its shared-memory
 * transport (the issue cited at g_lock_win): there every atomic on a long coarray is a
 * get (+ op + put) under the target's mutex instead, so all of them stay atomic with
 * respect to each other. */
#if defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION < 5
#define LONG_CAS_BROKEN 1
#else
#define LONG_CAS_BROKEN 0
#endif

static void atomic_locked(xmpc_coarray *ca, MPI_Win win, int rank, size_t off, int what,
                          long compare, long value, long *old)
{
    mutex(rank, 1);
    MPI_Get(old, 1, MPI_LONG, rank, (MPI_Aint)off, 1, MPI_LONG, win);
    MPI_Win_flush(rank, win);
    long next = what == XMPC_AT_ADD ? (long)((unsigned long)*old + (unsigned long)value) : value;
    if (what == XMPC_AT_DEFINE || what == XMPC_AT_ADD || (what == XMPC_AT_CAS && *old == compare)) {
        MPI_Put(&next, 1, MPI_LONG, rank, (MPI_Aint)off, 1, MPI_LONG, win);
        MPI_Win_flush(rank, win);
    }
    mutex(rank, 0);
    (void)ca;
}

/* Accumulate-family ops only: MPI makes them atomic with respect to each other per
 * basic element (same datatype), which is what the atomic subroutines promise. */
static void atomic(xmpc_coarray *ca, int rank, size_t off, int what, long compare, long value,
                   long *old)
{
    MPI_Win win = win_of(ca);
    if (ca->dirty)
        MPI_Win_flush(rank, win); /* after this image's earlier puts, as a get is */
    if (LONG_CAS_BROKEN && ca->type == XMPC_LONG) {
        atomic_locked(ca, win, rank, off, what, compare, value, old);
        return;
    }
    MPI_Datatype t = ca->type == XMPC_INT ? MPI_INT : MPI_LONG;
    int iv = (int)value, ic = (int)compare, iold = 0;
    void *v = ca->type == XMPC_INT ? (void *)&iv : (void *)&value;
    void *c = ca->type == XMPC_INT ? (void *)&ic : (void *)&compare;
    void *o = ca->type == XMPC_INT ? (void *)&iold : (void *)old;
    switch (what) {
    case XMPC_AT_DEFINE: MPI_Accumulate(v, 1, t, rank, (MPI_Aint)off, 1, t, MPI_REPLACE, win); break;
    case XMPC_AT_REF: MPI_Fetch_and_op(NULL, o, t, rank, (MPI_Aint)off, MPI_NO_OP, win); break;
    case XMPC_AT_ADD: MPI_Fetch_and_op(v, o, t, rank, (MPI_Aint)off, MPI_SUM, win); break;
    default: MPI_Compare_and_swap(v, c, o, t, rank, (MPI_Aint)off, win); break;
    }
    MPI_Win_flush(rank, win);
    if (ca->type == XMPC_INT)
        *old = iold;
}

const xmpc_backend xmpc_backend_mpi3 = {
    .name = "mpi3",
    .init = init,
    .finalize = finalize,
    .abort = xmpc_mpi_abort,
    .alloc = alloc,
    .free = free_,
    .put = put,
    .get = get,
    .put_acc = put_acc,
    .sync_memory = sync_memory,
    .barrier = barrier,
    .atomic = atomic,
    .ctl = &xmpc_mpi_ctl,
};

/* armci backend: ARMCI, as in P002 (Global Arrays' ARMCI there; ARMCI-MPI works too).
 *
 * The xfer is already ARMCI's strided form (count[0] bytes, then levels), so:
 *   put      ARMCI_Put for one block, ARMCI_PutS otherwise (both return when the local
 *            buffer may be reused)
 *   get      ARMCI_Fence to the target if this coarray has puts in flight, ARMCI_Get
 *            for one block, ARMCI_GetS otherwise
 *   put-acc  ARMCI_AccS for '+' (scale 1) and '-' (scale -1): ARMCI's accumulate is
 *            only dst += scale*src.  '*', '/', min and max have no ARMCI form: they are
 *            get + op + put under a lock word on the target (ARMCI_Rmw swap; ARMCI's
 *            own mutexes are MPI_Win_create windows in ARMCI-MPI, which Open MPI
 *            refuses without a single-copy transport), fenced before the unlock, so
 *            they are atomic with respect to each other (not to a concurrent AccS on
 *            the same element; see coarray.h)
 *   atomics  ARMCI has fetch-and-add and swap but no compare-and-swap, so every
 *            atomic is a get (+ op + put) under the target's lock word, fenced
 *            before the unlock: atomic with respect to each other (and to the
 *            non-native accumulates, which take the same lock)
 *   sync memory   ARMCI_Fence to the one target with puts in flight (ARMCI_AllFence for
 *            several), then a fence, and progress when no fence made any
 *            (xmpc_mpi_progress)
 *
 * ARMCI_RMA_ATOMICITY defaults to 0 here (a user's setting wins): ARMCI-MPI otherwise
 * makes every put an MPI_Accumulate(REPLACE) and every get an MPI_Get_accumulate, to
 * keep concurrent puts to one element from tearing.  Coarray semantics never need
 * that: concurrent access to one element without atomics is a data race in Fortran,
 * the ordering of two unsynchronised puts is unspecified in xmpc (coarray.h), and
 * xmpc's own atomics and non-native accumulates go under the lock word. */
#include "xmpc_internal.h"

#include <armci.h>
#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

static int g_me, g_n;
static void **g_lock; /* g_lock[r]: image r's lock word (guards non-native accumulates) */

static void init(int *argc, char ***argv, int *me, int *n)
{
    xmpc_mpi_init(argc, argv); /* ARMCI-MPI and GA's ARMCI both run on MPI */
    /* ARMCI-MPI: let MPI allocate the memory it exposes (MPI_Win_allocate), not attach
     * malloc'ed memory (MPI_Win_create).  On one node that is MPI's shared-memory
     * window; Open MPI 4.1 without a single-copy transport (CMA disallowed in VMs and
     * containers) rejects MPI_Win_create outright ("invalid window").  A user's own
     * setting wins; GA's ARMCI ignores the variable. */
    setenv("ARMCI_USE_WIN_ALLOCATE", "1", 0);
    setenv("ARMCI_RMA_ATOMICITY", "0", 0);
    ARMCI_Init();
    MPI_Comm_rank(MPI_COMM_WORLD, &g_me);
    MPI_Comm_size(MPI_COMM_WORLD, &g_n);
    /* One lock word per image, in ARMCI memory (collective allocation). */
    g_lock = xmpc_xmalloc(sizeof(void *) * (size_t)g_n);
    if (ARMCI_Malloc(g_lock, sizeof(int)) != 0)
        xmpc_fatal(NULL, 0, "ARMCI_Malloc of the lock words failed");
    *(volatile int *)g_lock[g_me] = 0;
    ARMCI_Barrier();
    *me = g_me;
    *n = g_n;
}

static void lock(int rank)
{
    int v;
    do {
        v = 1; /* swap in "held"; the old value 0 means it was free */
        ARMCI_Rmw(ARMCI_SWAP, &v, g_lock[rank], 0, rank);
    } while (v != 0);
}

static void unlock(int rank)
{
    int v = 0;
    ARMCI_Fence(rank); /* the guarded update lands before the lock is seen free */
    ARMCI_Rmw(ARMCI_SWAP, &v, g_lock[rank], 0, rank);
}

static void finalize(void)
{
    ARMCI_Free(g_lock[g_me]);
    free(g_lock);
    ARMCI_Finalize();
    xmpc_mpi_finalize();
}

static void alloc(xmpc_coarray *ca)
{
    void **addr = xmpc_xmalloc(sizeof(void *) * (size_t)g_n);
    /* A zero-size coarray still gets a byte: every image has a base address. */
    if (ARMCI_Malloc(addr, (armci_size_t)(ca->bytes ? ca->bytes : 1)) != 0)
        xmpc_fatal(ca, g_me + 1, "ARMCI_Malloc of %zu bytes failed", ca->bytes);
    ca->data = addr[g_me];
    memset(ca->data, 0, ca->bytes);
    ARMCI_Barrier();
    ca->bk = addr;
}

static void free_(xmpc_coarray *ca)
{
    ARMCI_Free(ca->data);
    free(ca->bk);
}

/* ARMCI takes int counts and strides: longer blocks, larger counts and strides go in
 * pieces (xmpc_xfer_split) of at most XFER_MAX, a multiple of every element size. */
#define XFER_MAX ((size_t)1 << 30)
typedef struct {
    int count[XMPC_MAX_DIMS + 1], lstride[XMPC_MAX_DIMS], rstride[XMPC_MAX_DIMS];
    char *remote;
} strided;

/* Where x starts in image rank's segment of ca. */
static char *remote_at(const xmpc_coarray *ca, int rank, const xmpc_xfer *x)
{
    return (char *)((void *const *)ca->bk)[rank] + x->roff;
}

static strided to_armci(const xmpc_coarray *ca, int rank, const xmpc_xfer *x)
{
    strided s;
    s.count[0] = (int)x->block;
    for (int i = 0; i < x->levels; ++i) {
        s.count[i + 1] = (int)x->count[i];
        s.lstride[i] = (int)x->lstride[i];
        s.rstride[i] = (int)x->rstride[i];
    }
    s.remote = remote_at(ca, rank, x);
    return s;
}

static int fits(const xmpc_xfer *x)
{
    size_t big = x->block;
    for (int i = 0; i < x->levels; ++i)
        big |= x->count[i] | x->lstride[i] | x->rstride[i];
    return big <= XFER_MAX;
}

typedef struct {
    xmpc_coarray *ca;
    int rank;
    xmpc_op op;
} piece_ctx;

static void put_piece(void *ctx, const xmpc_xfer *x)
{
    piece_ctx *c = ctx;
    strided s = to_armci(c->ca, c->rank, x);
    ARMCI_PutS(x->laddr, s.lstride, s.remote, s.rstride, s.count, x->levels, c->rank);
}

static void get_piece(void *ctx, const xmpc_xfer *x)
{
    piece_ctx *c = ctx;
    strided s = to_armci(c->ca, c->rank, x);
    ARMCI_GetS(s.remote, s.rstride, x->laddr, s.lstride, s.count, x->levels, c->rank);
}

/* One block that fits ARMCI's int goes through ARMCI's contiguous call: ARMCI-MPI turns
 * a strided call, even with no levels, into an I/O vector allocated per call, which
 * tripled the cost of a small put.  0: not one such block. */
static int contiguous(const xmpc_xfer *x) { return x->levels == 0 && fits(x); }

static void split(xmpc_coarray *ca, int rank, const xmpc_xfer *x, xmpc_op op,
                  void (*fn)(void *, const xmpc_xfer *))
{
    piece_ctx c = {ca, rank, op};
    if (fits(x))
        fn(&c, x);
    else
        xmpc_xfer_split(x, XFER_MAX, XFER_MAX, XFER_MAX, fn, &c);
}

/* ca->dirty: 0 nothing outstanding, r+1 only rank r has outstanding puts, -1 several:
 * completing one target with ARMCI_Fence is cheaper than ARMCI_AllFence, which
 * flushes every allocation to every image. */
static void mark_dirty(xmpc_coarray *ca, int rank)
{
    ca->dirty = (ca->dirty == 0 || ca->dirty == rank + 1) ? rank + 1 : -1;
}

static void put(xmpc_coarray *ca, int rank, const xmpc_xfer *x)
{
    if (contiguous(x))
        ARMCI_Put(x->laddr, remote_at(ca, rank, x), (int)x->block, rank);
    else
        split(ca, rank, x, 0, put_piece);
    mark_dirty(ca, rank);
}

static void get(xmpc_coarray *ca, int rank, const xmpc_xfer *x)
{
    if (ca->dirty)
        ARMCI_Fence(rank);
    if (contiguous(x))
        ARMCI_Get(remote_at(ca, rank, x), x->laddr, (int)x->block, rank);
    else
        split(ca, rank, x, 0, get_piece);
}

static void acc_piece(void *ctx, const xmpc_xfer *x);

static void put_acc(xmpc_coarray *ca, int rank, const xmpc_xfer *x, xmpc_op op)
{
    if (op != XMPC_OP_SUM && op != XMPC_OP_DIFF) {
        lock(rank);
        xmpc_rmw_acc(&xmpc_backend_armci, ca, rank, x, op);
        unlock(rank);
        return;
    }
    split(ca, rank, x, op, acc_piece);
    mark_dirty(ca, rank);
}

static void acc_piece(void *ctx, const xmpc_xfer *x)
{
    piece_ctx *c = ctx;
    xmpc_coarray *ca = c->ca;
    int rank = c->rank;
    xmpc_op op = c->op;
    int sign = op == XMPC_OP_SUM ? 1 : -1;
    int si = sign;
    long sl = sign;
    float sf = (float)sign;
    double sd = sign;
    void *scale = ca->type == XMPC_INT ? (void *)&si : ca->type == XMPC_LONG ? (void *)&sl
                : ca->type == XMPC_FLOAT ? (void *)&sf : (void *)&sd;
    int dt = ca->type == XMPC_INT ? ARMCI_ACC_INT : ca->type == XMPC_LONG ? ARMCI_ACC_LNG
           : ca->type == XMPC_FLOAT ? ARMCI_ACC_FLT : ARMCI_ACC_DBL;
    strided s = to_armci(ca, rank, x);
    ARMCI_AccS(dt, scale, x->laddr, s.lstride, s.remote, s.rstride, s.count, x->levels, rank);
}

/* ARMCI_Fence(r) completes this image's operations to r on every allocation, so the
 * targets are merged over the coarrays first; with none outstanding, what is left of
 * sync memory (others' writes visible here, progress) is xmpc_mpi_progress. */
static void sync_memory(xmpc_coarray *all)
{
    int target = 0;
    for (xmpc_coarray *ca = all; ca; ca = ca->next) {
        if (ca->dirty)
            target = (target == 0 || target == ca->dirty) ? ca->dirty : -1;
        ca->dirty = 0;
    }
    if (target > 0)
        ARMCI_Fence(target - 1);
    else if (target < 0)
        ARMCI_AllFence();
    xmpc_mpi_progress(target == 0); /* a fence waited on MPI: it made progress */
}

static void barrier(void) { ARMCI_Barrier(); }

static void atomic(xmpc_coarray *ca, int rank, size_t off, int what, long compare, long value,
                   long *old)
{
    char *at = (char *)((void **)ca->bk)[rank] + off;
    int is_int = ca->type == XMPC_INT;
    union { int i; long l; } cur, next;
    lock(rank);
    if (ca->dirty)
        ARMCI_Fence(rank); /* after this image's earlier puts */
    ARMCI_Get(at, &cur, (int)ca->esize, rank);
    *old = is_int ? cur.i : cur.l;
    long v = what == XMPC_AT_ADD ? (long)((unsigned long)*old + (unsigned long)value) : value;
    if (is_int && what == XMPC_AT_ADD)
        v = (int)((unsigned)*old + (unsigned)value);
    if (what == XMPC_AT_DEFINE || what == XMPC_AT_ADD || (what == XMPC_AT_CAS && *old == compare)) {
        if (is_int)
            next.i = (int)v;
        else
            next.l = v;
        ARMCI_Put(&next, at, (int)ca->esize, rank);
    }
    unlock(rank); /* fences the put first */
}

const xmpc_backend xmpc_backend_armci = {
    .name = "armci",
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

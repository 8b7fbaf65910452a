/* xmpc internals: what the core hands a backend, and the backend interface.
 *
 * The core checks and normalises every access into one xmpc_xfer (ARMCI's strided
 * form: a contiguous block of `block` bytes repeated over up to 7 levels, with a
 * remote and a local byte stride per level), so a backend never sees sections,
 * bounds or broadcasts.  Omni libxmp splits its backends the same way: one file each
 * behind a handful of functions. */
#ifndef XMPC_INTERNAL_H
#define XMPC_INTERNAL_H

#include "xmpc/coarray.h"

#include <stdarg.h>
#include <stddef.h>

/* A handle is valid while it is on the core's live list; after xmpc_coarray_free the
 * struct is kept (magic XMPC_MAGIC_FREED, data NULL) so a stale handle is reported by
 * name, never dereferenced as memory that was given back. */
enum { XMPC_MAGIC_LIVE = 0x786d7063, XMPC_MAGIC_FREED = 0x66726565 };

struct xmpc_coarray {
    unsigned magic;
    unsigned long gen; /* allocation number (1, 2, ...: the same on every image) */
    char name[64];
    xmpc_type type;
    size_t esize;
    int ndims;
    long dims[XMPC_MAX_DIMS];
    size_t bytes;
    int ncodims;
    int codims[XMPC_MAX_DIMS];
    void *data;  /* this image's elements */
    void *bk;    /* backend state (window, remote addresses, segment offset) */
    int dirty;   /* puts/accs issued since the last completion of this coarray */
    struct xmpc_coarray *next;
};

typedef struct {
    size_t block; /* contiguous bytes per innermost run */
    int levels;   /* strided levels above the block, 0..XMPC_MAX_DIMS */
    size_t count[XMPC_MAX_DIMS];   /* runs (or groups) at each level, innermost first */
    size_t rstride[XMPC_MAX_DIMS]; /* remote byte distance between them */
    size_t lstride[XMPC_MAX_DIMS]; /* local byte distance between them */
    size_t roff;  /* byte offset of the first remote element in the coarray */
    char *laddr;  /* first local element */
} xmpc_xfer;

typedef struct xmpc_backend {
    const char *name;
    /* Sets *me (0-based) and *n.  Starts MPI/GASNet as that backend needs. */
    void (*init)(int *argc, char ***argv, int *me, int *n);
    void (*finalize)(void);
    void (*abort)(int code); /* all images; does not return */
    /* Collective: ca->data = zeroed local memory of ca->bytes, remotely accessible
     * everywhere once this returns. */
    void (*alloc)(xmpc_coarray *ca);
    void (*free)(xmpc_coarray *ca);
    /* rank is 0-based.  put/put_acc: locally complete on return.  get: complete on
     * return, and ordered after this image's earlier puts/accs to ca on rank. */
    void (*put)(xmpc_coarray *ca, int rank, const xmpc_xfer *x);
    void (*get)(xmpc_coarray *ca, int rank, const xmpc_xfer *x);
    void (*put_acc)(xmpc_coarray *ca, int rank, const xmpc_xfer *x, xmpc_op op);
    /* Completes every put/acc on every coarray in `all`, makes remote writes to
     * this image visible, and makes progress (polling loops rely on it). */
    void (*sync_memory)(xmpc_coarray *all);
    void (*barrier)(void);
    void (*sync_images)(int n, const int *ranks); /* 0-based ranks */
    /* Collective: all[r*bytes..] = image r's `mine`.  NULL: the backend cannot (then
     * the allocation's shape comparison is skipped). */
    void (*allgather)(const void *mine, void *all, size_t bytes);
    /* Atomics on the element at byte offset `off` of ca on rank (ca->type XMPC_INT or
     * XMPC_LONG), complete at the target on return.  NULL: not supported.
     *   XMPC_AT_DEFINE: *old unused; XMPC_AT_REF: *old = value; XMPC_AT_CAS:
     *   compare/value; XMPC_AT_ADD: value added.  *old gets the previous value. */
    void (*atomic)(xmpc_coarray *ca, int rank, size_t off, int what, long compare,
                   long value, long *old);
    /* Image control words and a non-blocking all-gather (xmpc_images.c); NULL: the
     * transport has none, and the core falls back to barrier / allgather / sync_images
     * (no stopped-image detection, no bounded waits). */
    const struct xmpc_ctl *ctl;
} xmpc_backend;

/* Every image owns XMPC_W_ARRIVE + 2n words (long) that any image reads and updates
 * atomically, complete at the owner when the call returns, a slot of XMPC_DESC_BYTES
 * per image and parity for collective calls, and a message area of XMPC_MSG_BYTES.
 * The core keeps every wait of an image control call a polling loop over these, so a
 * stopped, failed or deadlocked partner is seen instead of waited for.
 *   LIFE          XMPC_LIFE_*
 *   NOTIFY + r    sync images notifications received from image r
 *   ARRIVE(n) + 2r + p  the last collective call of parity p (seq & 1) image r has
 *                 arrived at: seq << 8 | kind.  Image r cannot arrive at seq + 2 before
 *                 this image has arrived at seq + 1, so the slot of seq's parity holds
 *                 r's call seq itself, or an older one while r has not arrived. */
enum { XMPC_W_LIFE, XMPC_W_NOTIFY };
#define XMPC_W_ARRIVE(n) (XMPC_W_NOTIFY + (n))
enum { XMPC_LIFE_RUNNING = 0, XMPC_LIFE_STOPPED = 1, XMPC_LIFE_FAILED = 2 };
enum { XMPC_MSG_BYTES = 512, XMPC_DESC_BYTES = 192 };
typedef struct xmpc_ctl {
    long (*read)(int rank, int word);   /* another image's word */
    long (*local)(int word);            /* this image's word; makes progress */
    void (*write)(int rank, int word, long value);
    void (*add)(int rank, int word, long value);
    void (*put_msg)(int rank, const char *msg); /* XMPC_MSG_BYTES, complete on return */
    void (*get_msg)(int rank, char *msg);
    /* Arrival at a collective call: `desc` (NULL: none) into slot (this image, parity)
     * of every other image, then `value` into their ARRIVE(n) + 2 * this image +
     * parity, both complete on return. */
    void (*arrive)(long value, const void *desc, size_t bytes, int parity);
    /* This image's slot (rank, parity), as the last arrival of rank wrote it. */
    void (*desc)(int rank, int parity, void *out, size_t bytes);
} xmpc_ctl;

enum { XMPC_AT_DEFINE, XMPC_AT_REF, XMPC_AT_CAS, XMPC_AT_ADD };

extern const xmpc_backend xmpc_backend_mpi3, xmpc_backend_armci, xmpc_backend_gasnet;

/* The runtime's state, shared by xmpc_core.c (accesses) and xmpc_images.c (image
 * control, lifetime, termination). */
enum { XMPC_NEVER_STARTED, XMPC_RUNNING, XMPC_FINALIZED };
typedef struct {
    const xmpc_backend *b; /* NULL unless RUNNING */
    int state;             /* NEVER_STARTED -> RUNNING -> FINALIZED */
    int me, n;             /* 0-based rank, image count */
    xmpc_coarray *list;    /* live coarrays, for sync memory */
    xmpc_coarray *freed;   /* freed handles, kept so a stale one is named (see above) */
    unsigned long gen;     /* allocations so far */
    const xmpc_coarray *last_ok; /* the last handle found live: the common case is cheap */
    char errmsg[512];      /* the last error a *_stat call returned */
} xmpc_state;
extern xmpc_state xmpc_g;

/* What every image must agree on for one collective allocation. */
typedef struct {
    int type, ndims;
    size_t esize;
    long dims[XMPC_MAX_DIMS];
} xmpc_shape;

/* Collective calls, compared across images before anything collective reaches the
 * transport (xmpc_images.c). */
enum { XMPC_COLL_SYNC = 1, XMPC_COLL_ALLOC, XMPC_COLL_FREE, XMPC_COLL_END };
typedef struct {
    int kind, pad;
    unsigned long gen;  /* ALLOC: the new allocation's number; FREE: the freed one's */
    xmpc_shape shape;   /* ALLOC */
    char name[48];      /* ALLOC, FREE: for messages */
} xmpc_coll;
/* One collective call: XMPC_STAT_OK when every image made the same one, or
 * XMPC_STAT_STOPPED_IMAGE (with status: set, else error termination) when an image has
 * stopped.  Different calls on different images end every image with both named. */
int xmpc_collective(const xmpc_coll *mine, int *status, const char *fn);
/* Error termination with `line` (already printed here): every image ends, those that
 * wait in an image control call with this image's message.  Does not return. */
_Noreturn void xmpc_error_termination(const char *line, int code);
void xmpc_images_init(void);
/* Normal termination of this image: announces it stopped, completes its puts and waits
 * until every image has stopped (the final collective), then frees what is left. */
void xmpc_images_end(void);
/* Records a *_stat error: with status, the code and message; without, fatal. */
int xmpc_stat_error(int *status, int code, int image, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* ---- the core's entry for the native API and the Omni entry point ------------------- */

/* A section as the core works with it: the Omni entry point gives element distances
 * rather than extents, so that is the common form; `extent` (NULL when unknown, as
 * for Omni's local side) is what bounds are checked against. */
typedef struct {
    int ndims;
    long base[XMPC_MAX_DIMS], length[XMPC_MAX_DIMS], step[XMPC_MAX_DIMS];
    size_t dist[XMPC_MAX_DIMS]; /* elements between consecutive indices of the dim */
    const long *extent;
} xmpc_section;

/* code: XMPC_RMA_*; image 1-based; ltype: type of the local elements (accumulates);
 * fn: the API name, for messages. */
void xmpc_rma(int code, xmpc_coarray *ca, int image, const xmpc_section *rs, char *laddr,
              const xmpc_section *ls, xmpc_op op, xmpc_type ltype, const char *fn);
/* a[rb:len]:[image] = l[lb:llen] (or its get, or get-accumulate) on a 1-D coarray when
 * it can take the contiguous fast path; 0 when not (the caller then takes xmpc_rma,
 * which also reports every error).  lextent: the local extent, or NULL if unknown. */
int xmpc_rma_contiguous(int code, xmpc_coarray *ca, int image, long rb, long len, char *laddr,
                        long lb, long llen, const long *lextent, xmpc_op op, xmpc_type ltype);
/* The same for a handle the caller has just checked with xmpc_check_handle. */
void xmpc_rma_live(int code, xmpc_coarray *ca, int image, const xmpc_section *rs, char *laddr,
                   const xmpc_section *ls, xmpc_op op, xmpc_type ltype, const char *fn);
/* Node indices (1-based, one per codimension, last one fastest) -> image number. */
int xmpc_image_of(const xmpc_coarray *ca, const int *idx);
/* Aborts with a named error unless the runtime runs and this is the thread that
 * started it (the thread-safety contract in coarray.h). */
void xmpc_need_init(const char *fn);
extern _Thread_local char xmpc_init_thread; /* 1 on the thread that called xmpc_init */
static inline int xmpc_on_init_thread(void) { return xmpc_init_thread; }
/* Aborts with a named error unless ca is a live coarray handle (fn: the API name).
 * The handle checked last passes in a few compares, inline: every access checks. */
void xmpc_check_handle_full(const xmpc_coarray *ca, const char *fn);
static inline void xmpc_check_handle(const xmpc_coarray *ca, const char *fn)
{
    if (!ca || ca != xmpc_g.last_ok || ca->magic != XMPC_MAGIC_LIVE ||
        xmpc_g.state != XMPC_RUNNING || !xmpc_on_init_thread())
        xmpc_check_handle_full(ca, fn);
}
/* "<fn> called before xmpc_init / after xmpc_finalize" into buf, or NULL when running. */
const char *xmpc_not_running(const char *fn, char *buf, size_t cap);
/* One error line, printed and returned (points to static storage). */
const char *xmpc_vreport(const xmpc_coarray *ca, int image, const xmpc_section *s,
                         const char *fmt, va_list ap);

/* ---- helpers the core provides to backends ---------------------------------------- */

/* Error inside a backend: message + collective abort. */
void xmpc_fatal(const xmpc_coarray *ca, int image, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4), noreturn))
#endif
    ;
void *xmpc_xmalloc(size_t bytes);
size_t xmpc_xfer_bytes(const xmpc_xfer *x);
/* Calls fn with pieces of x that fit a transport's integer limits: every block at most
 * max_block bytes, every count at most max_count, every stride at most max_stride
 * (x itself when it fits). */
void xmpc_xfer_split(const xmpc_xfer *x, size_t max_block, size_t max_count, size_t max_stride,
                     void (*fn)(void *ctx, const xmpc_xfer *piece), void *ctx);
/* Calls fn for every contiguous run (remote offset, local address, bytes). */
void xmpc_xfer_runs(const xmpc_xfer *x, void (*fn)(void *ctx, size_t roff, char *laddr, size_t n),
                    void *ctx);
/* Local data of x packed into / unpacked from the contiguous buffer buf. */
void xmpc_xfer_pack(const xmpc_xfer *x, void *buf);
void xmpc_xfer_unpack(const xmpc_xfer *x, const void *buf);
/* The same remote side with the local side contiguous at buf. */
xmpc_xfer xmpc_xfer_contiguous(const xmpc_xfer *x, void *buf);
/* dst[i] = dst[i] op src[i] for n elements, exactly the C expression (integer + - *
 * wrap).  Integer division by zero or INT_MIN / -1 changes nothing and returns
 * XMPC_ACC_DIV_ZERO / XMPC_ACC_DIV_OVERFLOW with *bad the first such element. */
enum { XMPC_ACC_OK = 0, XMPC_ACC_DIV_ZERO, XMPC_ACC_DIV_OVERFLOW };
int xmpc_apply_op(xmpc_op op, xmpc_type type, void *dst, const void *src, size_t n, size_t *bad);
/* The same, ending every image with the error's message (ca, image named). */
void xmpc_apply_op_or_die(const xmpc_coarray *ca, int image, xmpc_op op, void *dst,
                          const void *src, size_t n);
/* dst[i] = -src[i] (IEEE sign flip, so x - y == x + neg(y) bit for bit; integers wrap). */
void xmpc_negate(xmpc_type type, void *dst, const void *src, size_t n);
/* Accumulate by read-modify-write for transports without the op: get the remote
 * section, apply, put it back.  The caller holds a lock that excludes other
 * read-modify-writes on the target and completes the put before releasing it. */
void xmpc_rmw_acc(const xmpc_backend *b, xmpc_coarray *ca, int rank, const xmpc_xfer *x,
                  xmpc_op op);

/* MPI bits shared by the mpi3 and armci backends (xmpc_mpi.c). */
void xmpc_mpi_init(int *argc, char ***argv);
void xmpc_mpi_finalize(void);
extern const xmpc_ctl xmpc_mpi_ctl;
/* A fence, and progress unless the caller has just made some (poke 0): what sync
 * memory owes others' writes in MPI's unified model. */
void xmpc_mpi_progress(int poke);
/* One MPI progress step (a probe), for transports that move RMA in software. */
void xmpc_mpi_poke(void);
void xmpc_mpi_abort(int code);

#endif

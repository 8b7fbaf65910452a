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
} xmpc_backend;

enum { XMPC_AT_DEFINE, XMPC_AT_REF, XMPC_AT_CAS, XMPC_AT_ADD };

extern const xmpc_backend xmpc_backend_mpi3, xmpc_backend_armci, xmpc_backend_gasnet;

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
/* Node indices (1-based, one per codimension, last one fastest) -> image number. */
int xmpc_image_of(const xmpc_coarray *ca, const int *idx);
/* Aborts with a named error unless ca is a live coarray handle (fn: the API name). */
void xmpc_check_handle(const xmpc_coarray *ca, const char *fn);

/* ---- helpers the core provides to backends ---------------------------------------- */

/* Error inside a backend: message + collective abort. */
void xmpc_fatal(const xmpc_coarray *ca, int image, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4), noreturn))
#endif
    ;
void *xmpc_xmalloc(size_t bytes);
size_t xmpc_xfer_bytes(const xmpc_xfer *x);
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
void xmpc_mpi_sync_images(int n, const int *ranks);
void xmpc_mpi_abort(int code);
void xmpc_mpi_allgather(const void *mine, void *all, size_t bytes);

#endif

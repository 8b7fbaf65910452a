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

struct xmpc_coarray {
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
} xmpc_backend;

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
/* dst[i] = dst[i] op src[i] for n elements. */
void xmpc_apply_op(xmpc_op op, xmpc_type type, void *dst, const void *src, size_t n);
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

#endif

/* xmpc: the runtime that XcalableMP (C) local-view coarray code translates to (P002).
 *
 *   #pragma xmp coarray a:[*]          xmpc_coarray_alloc (collective)
 *   b[0:n] = a[i:n:2]:[k];             xmpc_get       (blocking)
 *   a[i:n:2]:[k] = b[0:n];             xmpc_put       (non-blocking: see below)
 *   b[0:n] += a[i:n]:[k];              xmpc_get_acc   (get to a temporary + local op)
 *   a[i:n]:[k] += b[0:n];              xmpc_put_acc   (accumulate at the target)
 *   #pragma xmp sync memory / sync all / barrier / sync images(l)
 *
 * Images are numbered 1..xmpc_num_images() as in XMP.  A section is one
 * [base:length:step] triple per dimension of a row-major (C) array; element k of the
 * remote section pairs with element k of the local section (both walked in row-major
 * order), so the two need the same element count, or a local count of 1 (a scalar
 * right-hand side is broadcast, as in `a[0:n]:[k] = 0;`).
 *
 * Completion: put and put-accumulate return as soon as the local data may be reused;
 * they are complete and visible at the target after xmpc_sync_memory() (also implied
 * by xmpc_sync_all and xmpc_sync_images).  A get observes every earlier put/put-acc of
 * the calling image to that coarray on that image.  Two puts/accumulates to the same
 * element with no sync memory between them complete in an unspecified order, as in
 * MPI RMA and GASNet.  Accumulates of one op on one element from several images are
 * atomic per element; mixing ops on one element concurrently is not.
 *
 * A loop that waits for another image's put (a flag) must call xmpc_sync_memory()
 * in its body: that is what makes progress (AM-based conduits) and orders memory.
 *
 * Every error (section out of bounds, bad image, type/op mismatch, use before
 * xmpc_init) prints one line naming the coarray, image and section to stderr and
 * aborts all images (MPI_Abort / gasnet_exit(1)): nothing is silently corrupted.
 *
 * Backend: XMPC_BACKEND=mpi3|armci|gasnet at run time (default: the first built, in
 * that order); xmpc_backend_name() says which one runs.
 */
#ifndef XMPC_COARRAY_H
#define XMPC_COARRAY_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define XMPC_MAX_DIMS 7

typedef enum {
    XMPC_BYTE = 0, /* opaque elements of any size: put/get only */
    XMPC_INT,
    XMPC_LONG,
    XMPC_FLOAT,
    XMPC_DOUBLE
} xmpc_type;

/* Accumulate ops; the values are the characters Omni passes in its `op` argument
 * ('<' and '>' are this runtime's spelling of min and max). */
typedef enum {
    XMPC_OP_SUM = '+',
    XMPC_OP_DIFF = '-',
    XMPC_OP_PROD = '*',
    XMPC_OP_DIV = '/',
    XMPC_OP_MIN = '<',
    XMPC_OP_MAX = '>'
} xmpc_op;

/* One dimension of a section: elements base, base+step, ..., length of them. */
typedef struct {
    long base, length, step;
} xmpc_range;

/* A local (non-coarray) array section: shape dims[ndims] (row-major), ranges r[ndims]. */
typedef struct {
    void *addr;
    int ndims;
    const long *dims;
    const xmpc_range *r;
} xmpc_local;

typedef struct xmpc_coarray xmpc_coarray;

/* Starts the runtime (and MPI where the backend needs it and nobody has yet).
 * Collective; returns 0.  Calling it twice is harmless. */
int xmpc_init(int *argc, char ***argv);
/* Completes all coarray operations, frees what is left, and shuts the backend (and
 * MPI if xmpc_init started it) down.  Collective.  With the gasnet backend it does
 * not return: GASNet ends the process in gasnet_exit(0), as Omni's runtime does. */
void xmpc_finalize(void);

/* Error stop: ends every image with exit status `code` (a test's failure, say). */
void xmpc_abort(int code)
#if defined(__GNUC__)
    __attribute__((noreturn))
#endif
    ;

int xmpc_this_image(void); /* 1..num_images */
int xmpc_num_images(void);
const char *xmpc_backend_name(void); /* "mpi3", "armci" or "gasnet" */

/* Collective: every image passes the same arguments.  `name` is used in messages.
 * The elements (zeroed) are at xmpc_coarray_data(); one codimension [*] unless
 * xmpc_coarray_set_codims says otherwise. */
xmpc_coarray *xmpc_coarray_alloc(const char *name, xmpc_type type, size_t elem_size,
                                 int ndims, const long *dims);
void xmpc_coarray_free(xmpc_coarray *ca); /* collective; implies sync memory */
void *xmpc_coarray_data(const xmpc_coarray *ca);
/* Image shape a:[c0][c1]...[*] (row-major, last codimension may be 0 for `*`); used
 * to turn the node indices of _XMP_coarray_rma_ARRAY into an image number. */
void xmpc_coarray_set_codims(xmpc_coarray *ca, int ncodims, const int *codims);

/* remote: one range per dimension of the coarray.  `local` elements have the
 * coarray's element type. */
void xmpc_put(xmpc_coarray *ca, int image, const xmpc_range *remote, const xmpc_local *local);
void xmpc_get(xmpc_coarray *ca, int image, const xmpc_range *remote, const xmpc_local *local);
/* remote[i] = remote[i] op local[i].  `type` is the type of the local elements and
 * must be the coarray's (checked).  Integer division by zero is an error. */
void xmpc_put_acc(xmpc_coarray *ca, int image, const xmpc_range *remote, xmpc_op op,
                  xmpc_type type, const xmpc_local *local);
/* local[i] = local[i] op remote[i]. */
void xmpc_get_acc(xmpc_coarray *ca, int image, const xmpc_range *remote, xmpc_op op,
                  xmpc_type type, const xmpc_local *local);

void xmpc_sync_memory(void); /* every earlier coarray op of this image complete+visible */
void xmpc_sync_all(void);    /* sync memory + barrier */
void xmpc_barrier(void);     /* barrier only: does not complete outstanding puts */
/* sync memory, then wait until each listed image has called sync images naming this
 * one (pairwise, counted: the k-th call pairs with the k-th call). */
void xmpc_sync_images(int n, const int *images);

/* Omni-compatible entry point (P002 fig. 1):
 *   _XMP_coarray_rma_ARRAY(code, desc, local_addr,
 *       (int)ndims_coarray, per dim (int)start, (int)length, (int)stride,
 *                                   (unsigned long long)distance_in_elements,
 *       (int)ndims_local,   per dim the same four for the local array,
 *       (char)op, (void *)operand,      accumulate: op ('+' '-' '*' '/' '<' '>'),
 *                                       operand: a scalar used instead of the local
 *                                       section (703 only) or NULL,
 *       (int)node_index...)             one 1-based index per codimension.
 * code: 700 get, 701 put, 702 get-accumulate, 703 put-accumulate. */
enum { XMPC_RMA_GET = 700, XMPC_RMA_PUT = 701, XMPC_RMA_GET_ACC = 702, XMPC_RMA_PUT_ACC = 703 };
void _XMP_coarray_rma_ARRAY(int rma_code, xmpc_coarray *desc, void *local_addr, ...);

#ifdef __cplusplus
}
#endif
#endif

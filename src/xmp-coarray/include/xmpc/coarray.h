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
 * Sections follow Fortran/XMP triplets: the step may be negative (`a[9:5:-1]` is
 * a[9], a[8], ..., a[5]) on either side; a zero step is an error.  Every index,
 * count and byte offset is computed overflow-checked before any transfer starts.
 *
 * Ordering and visibility model (compared with Fortran 2008/2018 coarrays, from which
 * the XcalableMP spec takes its local-view coarray semantics):
 *  - Completion.  A put or put-accumulate returns as soon as the local data may be
 *    reused; it is complete and visible at the target after xmpc_sync_memory() of the
 *    issuing image (also implied by xmpc_sync_all and xmpc_sync_images), and the
 *    target sees it once it has itself executed an image control call (sync memory,
 *    sync all, sync images) after that.  This is Fortran's segment model: data written
 *    in one segment is visible to another image in segments ordered after it.
 *  - Two puts to one element from one image.  Fortran orders them: statements execute
 *    in program order, so the later value wins even without sync memory.  xmpc
 *    DIFFERS: with no xmpc_sync_memory() between them the two complete in an
 *    unspecified order (as in MPI RMA and GASNet, which the backends are), so the
 *    earlier value may win.  Put xmpc_sync_memory() between them when it matters.
 *  - A get observes every earlier put/put-accumulate of the calling image to that
 *    coarray on that image (program order, as in Fortran).
 *  - Put to this image's own coarray.  As in Fortran: the put is complete and
 *    visible to this image's own loads of xmpc_coarray_data() when it returns (the
 *    runtime completes puts and accumulates to oneself at once), so a load right
 *    after it sees the new value.  Other images still need the usual sync.
 *  - Within one put nothing orders the bytes: another image that watches one byte
 *    of a put change cannot conclude that the rest has arrived (Fortran: a data
 *    race).  To signal "data ready", complete the data with xmpc_sync_memory(), then
 *    write a separate flag (a put or xmpc_atomic_define) that the other image
 *    waits on (with xmpc_atomic_ref, or by polling with xmpc_sync_memory()).
 *  - Accumulates of one op on one element from several images are atomic per
 *    element; mixing ops on one element concurrently is not.  Accumulates compute
 *    exactly the plain C expression `remote op local` in the element type (IEEE
 *    signed zeros included) on every backend; integer + - * wrap in two's
 *    complement; integer division by zero and INT_MIN / -1 are errors.
 *  - Atomics (xmpc_atomic_*) are atomic with respect to each other on the same
 *    element (Fortran's atomic subroutines); they are not ordered with puts/gets
 *    unless separated by xmpc_sync_memory(), as in Fortran.
 *
 * A loop that waits for another image's put (a flag) must call xmpc_sync_memory()
 * in its body: that is what makes progress (AM-based conduits) and orders memory.
 *
 * Every error (section out of bounds or overflowing, zero step, bad image, type/op
 * mismatch, different shapes of one coarray on different images, bad or freed
 * handle, use before xmpc_init or after xmpc_finalize) prints one line naming the
 * coarray, image and section to stderr and ends all images (error termination:
 * images waiting in an image control call print that first message too, then
 * MPI_Abort / gasnet_exit(1)): nothing is silently corrupted.  The *_stat variants
 * return a status code instead for the errors they can report.
 *
 * Waits (mpi3, armci): every image control call polls; a partner that has stopped, is
 * in error termination, or waits in a collective call this image has not made ends the
 * wait with a status or a named error.  XMPC_WAIT_TIMEOUT=<seconds> (default: none)
 * also bounds every single wait: past it, error termination names the call.
 *
 * Limits: none below the address space.  A section may have any number of elements
 * and bytes (transfers larger than a transport's int counts are split into pieces),
 * and extents may be 0.
 *
 * Backend: XMPC_BACKEND=mpi3|armci|gasnet at run time (default: the first built, in
 * that order); xmpc_backend_name() says which one runs.  armci sets ARMCI-MPI's
 * ARMCI_RMA_ATOMICITY to 0 unless the environment sets it: the per-element atomicity
 * of plain puts and gets that it buys (each put an MPI accumulate) is never needed
 * here, since unsynchronised access to one element from two images is a data race
 * (Fortran), two unsynchronised puts complete in an unspecified order (above), and
 * atomics and the accumulates ARMCI lacks go under a lock word.
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

/* Threads: xmpc calls must all come from the thread that called xmpc_init (checked:
 * another thread's call is an error).  Other threads may run meanwhile and may read and
 * write this image's coarray memory (xmpc_coarray_data) under the program's own
 * synchronisation.  When xmpc_init starts MPI it asks for what the program promises:
 * MPI_THREAD_SINGLE (no other threads: the default) or, with XMPC_MPI_THREAD=funneled,
 * MPI_THREAD_FUNNELED (other threads that call neither xmpc nor MPI, as OpenMP
 * regions), and refuses a library that provides less; a program that starts MPI
 * itself keeps the level it chose. */

/* Starts the runtime (and MPI where the backend needs it and nobody has yet).
 * Collective; returns 0.  Calling it again while running is harmless; calling it
 * after xmpc_finalize is an error (MPI cannot be restarted). */
int xmpc_init(int *argc, char ***argv);
/* Normal termination of this image (Fortran's end of program): completes its coarray
 * operations, announces it stopped (other images' synchronisations that involve it now
 * report XMPC_STAT_STOPPED_IMAGE instead of waiting), waits until every image has
 * stopped, frees what is left and shuts the backend (and MPI if xmpc_init started it)
 * down.  A second call is an error.  With the gasnet backend it does not return: GASNet
 * ends the process in gasnet_exit(0), as Omni's runtime does. */
void xmpc_finalize(void);
/* Fortran's STOP: xmpc_finalize, then exit(code) (this image only; the others go on
 * until they stop too). */
void xmpc_stop(int code)
#if defined(__GNUC__)
    __attribute__((noreturn))
#endif
    ;

/* Error stop: error termination with exit status `code` (a test's failure, say):
 * every image ends; those waiting in an image control call print this one's message. */
void xmpc_abort(int code)
#if defined(__GNUC__)
    __attribute__((noreturn))
#endif
    ;

int xmpc_this_image(void); /* 1..num_images */
int xmpc_num_images(void);
const char *xmpc_backend_name(void); /* "mpi3", "armci" or "gasnet" */

/* Collective (Fortran's allocate, with its implicit sync all): every image passes the
 * same arguments (type, size and shape are compared across images on every backend: a
 * difference ends every image with both shapes named).  `name` is used in messages.
 * Extents may be 0 (a zero-size coarray, as Fortran's allocate(z(0)[*])).  The elements
 * (zeroed) are at xmpc_coarray_data(); one codimension [*] unless
 * xmpc_coarray_set_codims says otherwise.  A handle stays recognisable after
 * xmpc_coarray_free (a use of it is reported as a use after free, never a crash). */
xmpc_coarray *xmpc_coarray_alloc(const char *name, xmpc_type type, size_t elem_size,
                                 int ndims, const long *dims);
/* Collective (Fortran's deallocate: an implicit sync all; implies sync memory).  Every
 * image frees the same coarray: images that free different coarrays, or free while
 * another image is in a different image control call (sync all, sync images naming
 * one of them), end with an error that names both calls, never a hang. */
void xmpc_coarray_free(xmpc_coarray *ca);
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

/* The C names of the element types ("int", "double", ...), for messages. */
const char *xmpc_type_name(xmpc_type type);

/* ---- atomics: one element of an XMPC_INT or XMPC_LONG coarray on `image`, named by
 * its row-major element index (0..elements-1).  Values are carried as long and must
 * fit the element type.  Each call is complete at the target when it returns (so a
 * spin loop on xmpc_atomic_ref sees an xmpc_atomic_define eventually); atomic with
 * respect to the other xmpc_atomic_* calls on that element, not to puts/accumulates
 * (as Fortran's atomic subroutines).  mpi3: MPI-3 accumulate-family ops; armci: the
 * target's lock word around a get/put; gasnet: an AM applied at the target. */
void xmpc_atomic_define(xmpc_coarray *ca, int image, long index, long value);
long xmpc_atomic_ref(xmpc_coarray *ca, int image, long index);
/* Sets the element to `value` if it equals `compare`; returns the old value. */
long xmpc_atomic_cas(xmpc_coarray *ca, int image, long index, long compare, long value);
/* Adds `value`; returns the old value (integers wrap). */
long xmpc_atomic_fetch_add(xmpc_coarray *ca, int image, long index, long value);

void xmpc_sync_memory(void); /* every earlier coarray op of this image complete+visible */
void xmpc_sync_all(void);    /* sync memory + barrier */
void xmpc_barrier(void);     /* barrier only: does not complete outstanding puts */
/* sync memory, then wait until each listed image has called sync images naming this
 * one (pairwise, counted: the k-th call pairs with the k-th call).  images == NULL is
 * sync images(*) (every image) and takes n = 0 or n = xmpc_num_images(); an empty set
 * is n = 0 with a non-NULL list. */
void xmpc_sync_images(int n, const int *images);

/* Status variants (XMP/C and Fortran's stat=): with status non-NULL, an error these
 * calls can report sets *status to an XMPC_STAT_* code and returns (xmpc_errmsg() says
 * why); success sets 0.  With status NULL they behave as the plain calls: the error
 * ends every image (error termination).  A bad list or count synchronises with
 * nobody.  XMPC_STAT_STOPPED_IMAGE: an image involved has stopped (xmpc_stop or
 * xmpc_finalize): sync all / barrier / sync images still synchronise with the images
 * that have not; an allocation returns NULL and a free leaves the coarray allocated
 * (the transport frees it at xmpc_finalize).  Mistakes that are bugs in every image's
 * program (different collective calls, shapes, bad handles) are never a status. */
enum {
    XMPC_STAT_OK = 0,
    XMPC_STAT_NOT_RUNNING = 1,     /* before xmpc_init or after xmpc_finalize */
    XMPC_STAT_BAD_IMAGE = 2,       /* an image outside 1..num_images */
    XMPC_STAT_DUPLICATE_IMAGE = 3, /* an image listed twice in sync images */
    XMPC_STAT_BAD_COUNT = 4,       /* a negative image count, or NULL with n != 0, num_images */
    XMPC_STAT_STOPPED_IMAGE = 5,   /* Fortran's STAT_STOPPED_IMAGE */
    XMPC_STAT_FAILED_IMAGE = 6     /* Fortran's STAT_FAILED_IMAGE (xmpc_image_status only:
                                      a failure ends every image) */
};
void xmpc_sync_memory_stat(int *status);
void xmpc_sync_all_stat(int *status);
void xmpc_barrier_stat(int *status);
void xmpc_sync_images_stat(int n, const int *images, int *status);
xmpc_coarray *xmpc_coarray_alloc_stat(const char *name, xmpc_type type, size_t elem_size,
                                      int ndims, const long *dims, int *status);
void xmpc_coarray_free_stat(xmpc_coarray *ca, int *status);
/* Fortran's image_status(image): XMPC_STAT_OK (running), XMPC_STAT_STOPPED_IMAGE or
 * XMPC_STAT_FAILED_IMAGE (in error termination).  gasnet: always XMPC_STAT_OK. */
int xmpc_image_status(int image);
/* The message of the last error a *_stat call returned ("" if none). */
const char *xmpc_errmsg(void);

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

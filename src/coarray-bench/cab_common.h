/* coarray-bench: what the three P002 programs share.
 *
 * - The Omni translation of a 1-D contiguous coarray section (CAB_RMA1): the programs
 *   are written as Omni XMP's translator emits them, one _XMP_coarray_rma_ARRAY call
 *   per coarray statement, with the XMP source line in a comment next to it.
 * - Starting and stopping every image the same way whatever the backend: exit codes
 *   decided collectively (2 bad input, 1 verification failed, 77 unsupported) reach
 *   the launcher (cab_exit).
 * - Collectives over coarrays (cab_allreduce_*): XMP's `reduction` directive has no
 *   counterpart in xmpc, and the gasnet backend has no MPI to fall back on, so the
 *   coarray variants reduce with puts + sync all (the same code on every backend,
 *   so backends are compared on equal terms).
 * - NPB's portable random number generator (randlc), shared by IS and CG.
 * - Best of --trials (P002 reports the best of 5): IS and CG time N runs. */
#ifndef CAB_COMMON_H
#define CAB_COMMON_H

#include "umstudy/support.h"
#include "xmpc/coarray.h"

#ifdef __cplusplus
extern "C" {
#endif

/* `a[rbase:len]:[image]` paired with `l[lbase:len]` (both 1-D, contiguous) as Omni
 * emits it: (ndims, start, length, stride, distance) for the coarray, then for the
 * local array, then (op, operand) and the node index.  code: 700 get, 701 put,
 * 702 get-accumulate, 703 put-accumulate. */
#define CAB_RMA1(code, desc, laddr, rbase, len, lbase, op, image)                          \
    _XMP_coarray_rma_ARRAY((code), (desc), (void *)(laddr), 1, (int)(rbase), (int)(len), 1, \
                           1ULL, 1, (int)(lbase), (int)(len), 1, 1ULL, (char)(op),          \
                           (void *)0, (int)(image))

/* Parses nothing: call ums_args_parse first (bad options exit 2 before any image
 * starts).  Starts the runtime, sets the JSON context (bench, backend, images). */
void cab_start(const char *bench, int *argc, char ***argv);

/* 1 when this run can use MPI directly (the baseline/reference variants): built with
 * MPI and running on an MPI-based backend (mpi3, armci), so image i is rank i-1 of
 * MPI_COMM_WORLD.  The gasnet backend (smp/udp conduits) has no MPI. */
int cab_mpi_usable(void);

/* Ends every image with `code`: 0 finalizes normally; otherwise the status reaches
 * the launcher (MPI backends: finalize, then exit(code) on every image; gasnet:
 * gasnet_exit(code)).  Every image must call it with the same code. */
void cab_exit(int code)
#if defined(__GNUC__)
    __attribute__((noreturn))
#endif
    ;

/* Bad input found once the image count is known (e.g. not a power of two): image 1
 * prints "<bench>: error: ..." to stderr, nothing goes to stdout, all exit 2. */
void cab_usage_fail(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;
/* Cannot run here (e.g. the MPI variant on the gasnet backend): image 1 prints the
 * unsupported line with the reason, all exit 77. */
void cab_unsupported(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;

/* Zeroed memory, or "<bench>: image i: out of memory" and every image ends (status 1). */
void *cab_xalloc(size_t bytes);

/* Collective (every image, same n): v[i] = sum (or max) over images of v[i], the same
 * bits on every image (summed in image order).  Coarray puts into a double-buffered
 * slot array, one sync all; created on first use for up to CAB_REDUCE_MAX values. */
enum { CAB_REDUCE_MAX = 1100 };
void cab_allreduce_sum(double *v, int n);
void cab_allreduce_max(double *v, int n);
/* Collective: frees the reduction coarray (the next reduction makes a new one), so a
 * timed loop's sync memory walks only the program's own coarrays. */
void cab_allreduce_free(void);

/* NPB randlc: x_{k+1} = a x_k mod 2^46, returns 2^-46 x_{k+1} and updates *x (NPB 3.x
 * common/c_randdp.c and is.c; exact with 48+ mantissa bits). */
double cab_randlc(double *x, double a);

int cab_is_pow2(long n);

/* --trials N: the timed section runs N times, each from NPB's initial state and each
 * verified; the fastest is reported, verified only if every trial was. */
#define CAB_TRIALS_ARG(p)                                                                 \
    {"trials", UMS_ARG_INT, (p),                                                          \
     "timed runs, each from fresh input and verified; the fastest is reported (default 1)", \
     1, 1000, NULL}
/* Call on every image after trial k (0-based) of n with the same time (the slowest
 * image's) and verdict: returns 1 when it is the fastest so far (*best = time; its
 * figures are the ones to report).  With n > 1 image 1 reports each trial on stderr. */
int cab_trial_best(long long k, long long n, double time, int verified, double *best);

#ifdef __cplusplus
}
#endif
#endif

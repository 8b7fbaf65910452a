/* Himeno benchmark (RIKEN), shared by every variant.
 *
 * Faithful to RIKEN's static C version (himenoBMTxps.c): a size name fixes the array
 * dimensions MIMAX x MJMAX x MKMAX; the grid used is imax = MIMAX-1 etc.; the Jacobi
 * sweep updates i = 1 .. imax-2 (likewise j, k); MFLOPS = 34 (imax-2)(jmax-2)(kmax-2) n / t.
 *
 * Two deliberate, documented departures that do not change the algorithm:
 *  - p and wrk2 swap pointers instead of copying wrk2 back into p.  wrk2 starts as a
 *    copy of p, so both hold the same boundary values forever and the result is the
 *    same as the original's copy-back.
 *  - gosa (sum of ss*ss over the interior, every iteration) is summed in double.  Each
 *    ss*ss is the same float product as the original; a float running sum over 2.7e8
 *    terms (XL) loses digits and depends on the order, which differs between CPU
 *    threads and GPU blocks.  Summed in double, every variant agrees to ~1e-12.
 *
 * The per-point arithmetic is one function used by host and device, with every float
 * operation in the original's order and never contracted into an FMA (see HM_* below),
 * so all variants produce bit-identical p fields and can be checked strictly.
 */
#ifndef UMSTUDY_HIMENO_H
#define UMSTUDY_HIMENO_H

#include <stddef.h>

#if defined(__CUDACC__)
#define HIMENO_HD __host__ __device__ __forceinline__
#else
#define HIMENO_HD inline
#endif

/* Round-to-nearest float operations that no compiler may fuse: on the device the
 * _rn intrinsics are never contracted; on the host the CMake targets compile with
 * -ffp-contract=off. */
#if defined(__CUDA_ARCH__)
#define HM_ADD(a, b) __fadd_rn((a), (b))
#define HM_SUB(a, b) __fsub_rn((a), (b))
#define HM_MUL(a, b) __fmul_rn((a), (b))
#else
#define HM_ADD(a, b) ((a) + (b))
#define HM_SUB(a, b) ((a) - (b))
#define HM_MUL(a, b) ((a) * (b))
#endif

enum { HIMENO_NFIELDS = 14 };

/* The benchmark's arrays; a[4], b[3], c[3] as in the original. */
typedef struct HimenoFields {
    float *a0, *a1, *a2, *a3, *b0, *b1, *b2, *c0, *c1, *c2, *p, *wrk1, *wrk2, *bnd;
} HimenoFields;

typedef struct HimenoGrid {
    int imax, jmax, kmax; /* points used in each dimension */
    const char *size;     /* XS..XL, or "custom" */
} HimenoGrid;

HIMENO_HD size_t himeno_points(HimenoGrid g) { return (size_t)g.imax * g.jmax * g.kmax; }
HIMENO_HD double himeno_interior(HimenoGrid g)
{
    return (double)(g.imax - 2) * (g.jmax - 2) * (g.kmax - 2);
}
/* The official flop count: 34 per interior point per iteration. */
HIMENO_HD double himeno_flops(HimenoGrid g, long long iterations)
{
    return 34.0 * himeno_interior(g) * (double)iterations;
}
/* Bytes one iteration must move at least: 13 float reads + 1 write per interior
 * point (p's neighbours come from cache; pointer swap, no copy-back). */
#define HIMENO_BYTES_PER_POINT 56.0

#define HIMENO_OMEGA 0.8f

/* The residual ss at one point: the original expression, operation by operation.
 * P is any callable p(di, dj, dk) returning p at the neighbour offset. */
typedef struct HimenoCoef {
    float a0, a1, a2, a3, b0, b1, b2, c0, c1, c2, wrk1, bnd;
} HimenoCoef;

#ifdef _OPENACC
#pragma acc routine seq
#endif
template <class P>
HIMENO_HD float himeno_residual(const HimenoCoef &q, const P &p)
{
    float s0 = HM_MUL(q.a0, p(1, 0, 0));
    s0 = HM_ADD(s0, HM_MUL(q.a1, p(0, 1, 0)));
    s0 = HM_ADD(s0, HM_MUL(q.a2, p(0, 0, 1)));
    s0 = HM_ADD(s0, HM_MUL(q.b0, HM_ADD(HM_SUB(HM_SUB(p(1, 1, 0), p(1, -1, 0)), p(-1, 1, 0)),
                                        p(-1, -1, 0))));
    s0 = HM_ADD(s0, HM_MUL(q.b1, HM_ADD(HM_SUB(HM_SUB(p(0, 1, 1), p(0, -1, 1)), p(0, 1, -1)),
                                        p(0, -1, -1))));
    s0 = HM_ADD(s0, HM_MUL(q.b2, HM_ADD(HM_SUB(HM_SUB(p(1, 0, 1), p(-1, 0, 1)), p(1, 0, -1)),
                                        p(-1, 0, -1))));
    s0 = HM_ADD(s0, HM_MUL(q.c0, p(-1, 0, 0)));
    s0 = HM_ADD(s0, HM_MUL(q.c1, p(0, -1, 0)));
    s0 = HM_ADD(s0, HM_MUL(q.c2, p(0, 0, -1)));
    s0 = HM_ADD(s0, q.wrk1);
    return HM_MUL(HM_SUB(HM_MUL(s0, q.a3), p(0, 0, 0)), q.bnd);
}

/* New p at a point given its residual. */
#ifdef _OPENACC
#pragma acc routine seq
#endif
HIMENO_HD float himeno_update(float p_center, float ss)
{
    return HM_ADD(p_center, HM_MUL(HIMENO_OMEGA, ss));
}

/* ---- host side, shared by all variants (himeno_common.cpp) ------------------ */

typedef struct HimenoOptions {
    HimenoGrid grid;
    long long iterations;
    long long repeat;
    int verify;
    double gosa_rtol, p_atol;
    const char *alloc; /* cuda only: explicit | managed | system */
    long long device;
    long long block_k, block_j, ichunk;
    int cache_hints;
    int allow_host; /* openacc only */
} HimenoOptions;

/* Parses the command line (variant: "cpu" or "cuda"), sets JSON parameters. */
HimenoOptions himeno_parse(int argc, char **argv, const char *variant);

/* Allocates the 14 arrays with alloc_fn (returns NULL on failure -> clear error). */
typedef void *(*himeno_alloc_fn)(size_t bytes);
HimenoFields himeno_fields_alloc(HimenoGrid g, himeno_alloc_fn alloc_fn);
void himeno_fields_free(HimenoFields *f, void (*free_fn)(void *));
/* The original initmt(), plus wrk2 = p (pointer swap, see above).  OpenMP first touch. */
void himeno_init(HimenoFields *f, HimenoGrid g);
/* `iterations` Jacobi sweeps on the CPU (OpenMP); swaps f->p and f->wrk2 each time;
 * returns the last sweep's gosa (and the first one's through gosa_first, if not NULL). */
double himeno_cpu_jacobi(HimenoFields *f, HimenoGrid g, long long iterations, double *gosa_first);
/* Sum of all p values (double), the checksum every variant reports. */
double himeno_checksum(const float *p, HimenoGrid g);
/* CPU copy bandwidth (read + write bytes / s) of an OpenMP a[i] = b[i] over `bytes`. */
double himeno_cpu_copy_bandwidth(size_t bytes);

/* Emits the JSON result lines of one variant's run: gflops, time, gosa, checksum,
 * copy bandwidth, roofline and % of roofline; times are per repeat (median taken). */
typedef struct HimenoRun {
    double *time_total; /* seconds per repeat, data movement included */
    double *time_loop;  /* seconds per repeat, the iteration loop only */
    double gosa, checksum;
    double copy_bw; /* bytes/s, read + write */
    double gosa_first;
} HimenoRun;
void himeno_report(const HimenoOptions *o, const HimenoRun *r);
/* With --verify: recomputes on the CPU and compares; emits a "verified" line and
 * returns 0 if gosa and p agree within tolerance, 1 otherwise. */
int himeno_verify(const HimenoOptions *o, const HimenoRun *r, const float *p_final);

#endif

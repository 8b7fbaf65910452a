/* umbench: the P000 (OpenACC UM vs data directives) and P001 (GH200 SAM/UM)
 * experiments.  This header is the seam between the experiment drivers (main
 * programs, shared by every backend) and the backends that move the data:
 *   CUDA     (umb_p000_cuda.cu): explicit | managed | both | prefetch, one binary;
 *   OpenACC  (umb_p000_acc.cpp): the mode is fixed when compiled (NVHPC builds three
 *            binaries with and without -gpu=managed; GCC builds explicit only),
 * so a P000 result differs between backends only in how the data moved.
 */
#ifndef UMBENCH_H
#define UMBENCH_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- P000 data movement modes ---------------------------------------------------
 * explicit: host array + device array, whole-array copies in and out (P000 "manual")
 * managed:  one managed array, no copies (P000 "auto")
 * both:     the explicit program run on managed memory (P000 "both": directives with
 *           -gpu=managed; in CUDA, the same cudaMemcpy calls between managed buffers)
 * prefetch: CUDA only: managed memory with whole-array cudaMemPrefetchAsync where the
 *           explicit program copies (what a directive can become under managed) */
#define UMB_P000_MODES "explicit|managed|both|prefetch"

/* Which elements the GPU adds 1 to: i < limit and i % stride == 0. */
typedef struct umb_touch {
    size_t limit;
    size_t stride;
} umb_touch;

typedef struct umb_p000_times {
    double init, gpu, cpu, total; /* seconds: CPU init | to GPU + kernel | back + CPU sum */
    double sum;                   /* the CPU's sum after the GPU pass */
} umb_p000_times;

typedef struct umb_p000_buf umb_p000_buf;

/* Backend identity and the modes this binary can run ("explicit", or a |-list). */
const char *umb_p000_backend(void);
const char *umb_p000_modes(void);
/* Selects the GPU (or exits 77 with the reason) and records it in the JSON params. */
void umb_p000_device(int device);
/* Allocates n doubles for `mode` (exits 77 with the reason if it cannot). */
umb_p000_buf *umb_p000_alloc(const char *mode, size_t n);
/* One pass of P000's program: CPU init a[i]=i%3343, GPU a[i]+=1 on `touch`, CPU sum. */
void umb_p000_run(umb_p000_buf *buf, umb_touch touch, umb_p000_times *t);
void umb_p000_free(umb_p000_buf *buf);

/* ---- shared host code (umb_host.cpp; OpenMP where built with it) --------------- */
void umb_p000_init(double *a, size_t n);
double umb_p000_sum(const double *a, size_t n);
/* Ends a pass: the CPU sum of a, then t from the clock readings t0 (before the init),
 * t1 (after it) and t2 (after the GPU phase); the sum closes the CPU phase. */
void umb_p000_finish(umb_p000_times *t, const double *a, size_t n, double t0, double t1, double t2);
/* The exact sum after a pass (integers below 2^53: any summation order is exact). */
double umb_p000_expected(size_t n, umb_touch touch);
size_t umb_touch_count(umb_touch touch);

/* ---- sweep analysis (umb_analysis.c) ------------------------------------------
 * x ascending; a and b the times of two modes at each x.
 * umb_last_win_boundary: the boundary of the final run of points where a < b ends,
 *   i.e. the largest x with a < b, linearly interpolated towards the next point
 *   where a >= b.  Returns -1 if a never wins; x[n-1] if a wins at the last point.
 * umb_final_win_start: the smallest x from which a < b holds at every larger x (the
 *   first grid point of the final winning run); -1 if a does not win at x[n-1].
 * umb_plateau_end: how far a flat start extends: the last index before the first run of
 *   UMB_PLATEAU_DROP consecutive points (or the whole remaining tail) below (1 - tol) x
 *   the median of v[0..min(2,n-1)]; isolated low points inside the plateau are noise. */
#define UMB_PLATEAU_DROP 3
double umb_last_win_boundary(const double *x, const double *a, const double *b, size_t n);
double umb_final_win_start(const double *x, const double *a, const double *b, size_t n);
size_t umb_plateau_end(const double *v, size_t n, double tol);

#ifdef __cplusplus
}
#endif
#endif

/* Where a sweep changes winner.  Measured sweeps are noisy near the crossover, so
 * both answers look at the final run of points (the paper's reading of its figures:
 * "managed is faster up to ~60%", "from 128 KB on, managed is faster"). */
#include <stdlib.h>
#include <string.h>

#include "umbench.h"
#include "umstudy/support.h"

double umb_last_win_boundary(const double *x, const double *a, const double *b, size_t n)
{
    size_t i = n;
    while (i > 0 && !(a[i - 1] < b[i - 1])) --i;
    if (i == 0) return -1.0;
    size_t w = i - 1; /* last point where a wins */
    if (w + 1 == n) return x[w];
    /* Linear interpolation of (a - b) between x[w] (< 0) and x[w+1] (>= 0). */
    const double d0 = a[w] - b[w], d1 = a[w + 1] - b[w + 1];
    const double t = d1 - d0 != 0.0 ? -d0 / (d1 - d0) : 0.0;
    return x[w] + t * (x[w + 1] - x[w]);
}

double umb_final_win_start(const double *x, const double *a, const double *b, size_t n)
{
    if (n == 0 || !(a[n - 1] < b[n - 1])) return -1.0;
    size_t i = n - 1;
    while (i > 0 && a[i - 1] < b[i - 1]) --i;
    return x[i];
}

size_t umb_plateau_end(const double *v, size_t n, double tol)
{
    if (n == 0) return 0;
    double head[3];
    size_t m = n < 3 ? n : 3;
    memcpy(head, v, m * sizeof *head);
    const double floor = (1.0 - tol) * ums_median(head, m);
    /* A single low point is noise (one sweep point is one run); the plateau ends where
     * UMB_PLATEAU_DROP points in a row (or all that remain) fall below the floor. */
    for (size_t i = 1; i < n; ++i) {
        size_t low = 0;
        while (i + low < n && low < UMB_PLATEAU_DROP && v[i + low] < floor) ++low;
        if (low == UMB_PLATEAU_DROP || (low > 0 && i + low == n)) return i - 1;
    }
    return n - 1;
}

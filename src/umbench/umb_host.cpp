// Host side of P000's program, the same for every backend: the init the GPU result
// is checked against, the CPU sum, and the closed form of the expected sum.
#include "umbench.h"
#include "umstudy/support.h"

extern "C" {

void umb_p000_init(double *a, size_t n)
{
    // Parallel first touch: with managed memory this also decides where pages start.
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) a[i] = (double)(i % 3343);
}

double umb_p000_sum(const double *a, size_t n)
{
    double s = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : s)
    for (size_t i = 0; i < n; ++i) s += a[i];
    return s;
}

void umb_p000_finish(umb_p000_times *t, const double *a, size_t n, double t0, double t1, double t2)
{
    t->sum = umb_p000_sum(a, n);
    const double t3 = ums_now();
    t->init = t1 - t0;
    t->gpu = t2 - t1;
    t->cpu = t3 - t2;
    t->total = t3 - t0;
}

size_t umb_touch_count(umb_touch t)
{
    return t.limit == 0 ? 0 : (t.limit - 1) / t.stride + 1;
}

double umb_p000_expected(size_t n, umb_touch t)
{
    const size_t q = n / 3343, r = n % 3343;
    // Sum of i % 3343 over [0, n): q full periods plus the partial one.
    const double base = (double)q * (3342.0 * 3343.0 / 2.0) + (double)r * ((double)r - 1.0) / 2.0;
    return base + (double)umb_touch_count(t);
}

} // extern "C"

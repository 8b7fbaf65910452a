/* Per-fault timing: sums, counts, maxima and log histograms of the points of dlm.h.
 * Recording is a handful of relaxed atomic adds, done by the thread that ends an
 * exchange after it has resumed the user threads, so nothing is added while they wait
 * but the time stamps themselves. */
#define _GNU_SOURCE
#include "dlm_internal.h"
#include "dlm_timing.h"

#include <sched.h>
#include <string.h>

int dlm_timing_on;

/* Log-linear histogram of nanoseconds: exact below 64 ns, then 64 buckets per power
 * of two, so a percentile (a bucket's midpoint) is within 1/128 of the true value. */
enum { SUB_BITS = 6, SUB = 1 << SUB_BITS, MAX_MSB = 46, NBUCKETS = SUB + (MAX_MSB - SUB_BITS + 1) * SUB };

typedef struct point_acc {
    _Atomic uint64_t n, sum_ns, max_ns;
    _Atomic uint64_t bucket[NBUCKETS];
} point_acc;
static point_acc g_pt[DLM_TP_N];
static _Atomic uint64_t g_backwards;
static _Atomic int64_t g_in_flight;

static const char *const g_names[DLM_TP_N] = {"a", "b", "q", "c", "d", "wake", "exchange", "stall"};

const char *dlm_timing_point_name(int point)
{
    return point >= 0 && point < DLM_TP_N ? g_names[point] : "?";
}

static int bucket_of(uint64_t v)
{
    if (v < SUB)
        return (int)v;
    int msb = 63 - __builtin_clzll(v);
    if (msb > MAX_MSB)
        return NBUCKETS - 1;
    int shift = msb - SUB_BITS;
    return SUB + shift * SUB + (int)((v >> shift) & (SUB - 1));
}

/* The value a bucket stands for: itself below 64 ns, else its midpoint. */
static double bucket_value(int b)
{
    if (b < SUB)
        return (double)b;
    int shift = (b - SUB) / SUB, sub = (b - SUB) % SUB;
    double lower = (double)((uint64_t)(SUB + sub) << shift);
    return lower + (double)((uint64_t)1 << shift) / 2.0;
}

void dlm_timing_ns(int point, uint64_t ns)
{
    point_acc *p = &g_pt[point];
    atomic_fetch_add_explicit(&p->n, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->sum_ns, ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->bucket[bucket_of(ns)], 1, memory_order_relaxed);
    uint64_t m = atomic_load_explicit(&p->max_ns, memory_order_relaxed);
    while (ns > m && !atomic_compare_exchange_weak_explicit(&p->max_ns, &m, ns, memory_order_relaxed,
                                                            memory_order_relaxed))
        ;
}

void dlm_timing_span(int point, uint64_t t0, uint64_t t1)
{
    /* A stamp missing or taken out of order is a bug in an engine: it is counted (and
     * the point's count falls short of the faults), never clamped into the sums. */
    if (t0 == 0 || t1 < t0) {
        atomic_fetch_add(&g_backwards, 1);
        return;
    }
    dlm_timing_ns(point, t1 - t0);
}

void dlm_timing_exchange(const dlm_fault_clock *c)
{
    static const int points[] = {DLM_TP_A, DLM_TP_B, DLM_TP_Q, DLM_TP_C, DLM_TP_D};
    for (int i = 0; i < M_DONE; ++i)
        dlm_timing_span(points[i], c->t[i], c->t[i + 1]);
    dlm_timing_span(DLM_TP_EXCHANGE, c->t[M_FAULT], c->t[M_DONE]);
}

void dlm_timing_begin(void) { atomic_fetch_add(&g_in_flight, 1); }
void dlm_timing_end(void) { atomic_fetch_sub(&g_in_flight, 1); }

void dlm_timing_settle(double timeout)
{
    /* The last exchange of a phase may still be writing its victim back (D) when the
     * program reads the statistics; it ends within one page transfer. */
    double deadline = dlm_now() + timeout;
    while (atomic_load(&g_in_flight) > 0 && dlm_now() < deadline)
        sched_yield();
}

void dlm_timing_reset(void)
{
    for (int i = 0; i < DLM_TP_N; ++i) {
        point_acc *p = &g_pt[i];
        atomic_store(&p->n, 0);
        atomic_store(&p->sum_ns, 0);
        atomic_store(&p->max_ns, 0);
        for (int b = 0; b < NBUCKETS; ++b)
            atomic_store_explicit(&p->bucket[b], 0, memory_order_relaxed);
    }
    atomic_store(&g_backwards, 0);
}

static double percentile(const point_acc *p, uint64_t n, double q)
{
    uint64_t rank = (uint64_t)(q * (double)n + 0.999999999), seen = 0;
    if (rank < 1)
        rank = 1;
    for (int b = 0; b < NBUCKETS; ++b) {
        seen += atomic_load_explicit(&p->bucket[b], memory_order_relaxed);
        if (seen >= rank)
            return bucket_value(b) * 1e-9;
    }
    return 0;
}

void dlm_fault_timing_get(dlm_fault_timing *out)
{
    memset(out, 0, sizeof *out);
    out->enabled = dlm_timing_on;
    if (!dlm_timing_on)
        return;
    dlm_timing_settle(dlm_g.cfg.timeout);
    out->in_flight = (uint64_t)(atomic_load(&g_in_flight) > 0 ? atomic_load(&g_in_flight) : 0);
    out->backwards = atomic_load(&g_backwards);
    for (int i = 0; i < DLM_TP_N; ++i) {
        const point_acc *p = &g_pt[i];
        dlm_timing_point *o = &out->pt[i];
        o->n = atomic_load(&p->n);
        o->sum = (double)atomic_load(&p->sum_ns) * 1e-9;
        o->max = (double)atomic_load(&p->max_ns) * 1e-9;
        if (o->n) {
            o->p50 = percentile(p, o->n, 0.5);
            o->p99 = percentile(p, o->n, 0.99);
        }
    }
}

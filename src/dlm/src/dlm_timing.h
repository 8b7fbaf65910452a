/* Per-fault timing (P004 figs. 2.4 and 3.2), shared by the fault engines.  Off unless
 * configured (dlm_config.fault_timing): then every engine stamps the moments of each
 * page exchange it can see and hands them here once the exchange is over, where they
 * become the points of dlm.h (sums, counts, maxima, log histograms).
 *
 * Self-contained on purpose (no page table, no MPI): any paging mechanism that can
 * stamp these moments can report through it. */
#ifndef DLM_TIMING_H
#define DLM_TIMING_H

#include <stdint.h>
#include <time.h>

/* The moments of one page exchange (P004's A1..A6) and of its faulting thread. */
enum dlm_moment {
    M_FAULT,     /* A1: the fault handler runs */
    M_DEQUEUED,  /* A2: the request is taken off the internal queue (and sent) */
    M_RECEIVED,  /* A3: the page has arrived */
    M_INSTALL,   /* A4: installing begins (the user threads are stopped) */
    M_RESUMED,   /* A5: the user threads resume */
    M_DONE,      /* A6: the exchange is over (the victim written back) */
    M_NMOMENTS
};
typedef struct dlm_fault_clock {
    uint64_t t[M_NMOMENTS];
} dlm_fault_clock;

extern int dlm_timing_on;

/* CLOCK_MONOTONIC in ns: a vDSO call, one system-wide clock for every thread. */
static inline uint64_t dlm_tick(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One interval of `point` (DLM_TP_*), from t0 to t1. */
void dlm_timing_span(int point, uint64_t t0, uint64_t t1);
/* One interval of `point` given as a length (a point made of several pieces). */
void dlm_timing_ns(int point, uint64_t ns);
/* A whole exchange of a SIGSEGV engine, A1..A6: A, B, Q, C, D and the exchange. */
void dlm_timing_exchange(const dlm_fault_clock *c);

/* Exchanges begun (counted with the fault) and not yet handed over: reading or
 * resetting the timing waits for them, so counts and sums describe whole exchanges. */
void dlm_timing_begin(void);
void dlm_timing_end(void);
void dlm_timing_settle(double timeout);
void dlm_timing_reset(void);

#endif

/* dlm-timing-cost: what --fault-timing adds to one fault, measured on this machine,
 * without MPI.  A SIGSEGV engine's fault takes 7 time stamps (A1..A6 and the faulting
 * thread's return), records one exchange (A..D and the whole) and two spans (wake,
 * stall), and moves the in-flight count twice; uffd takes 6 stamps and records 5
 * spans.  The stamps before A5 lie on the faulting thread's path to its data, the
 * recording after it.  JSON lines: ns per stamp, per exchange record, per span, per
 * in-flight count up and down, and the total per fault for each kind of engine (best of --rounds, each the mean of
 * --iterations). */
#include "../src/dlm_timing.h"
#include "dlm/dlm.h"
#include "umstudy/support.h"

#include <stdio.h>

/* Spread-out intervals (1 us .. 1 ms), so the histogram updates touch many buckets. */
static uint64_t jitter(uint64_t i) { return 1000 + (i * 2654435761u) % 1000000; }

int main(int argc, char **argv)
{
    long long iterations = 200000, rounds = 5;
    const ums_arg args[] = {
        {"iterations", UMS_ARG_INT, &iterations, "operations per round (default 200000)", 1000, 1e9, NULL},
        {"rounds", UMS_ARG_INT, &rounds, "rounds; the best is reported (default 5)", 1, 1000, NULL},
    };
    ums_args_parse(argc, argv,
                   "The cost of DLM's per-fault timing (--fault-timing): time stamps and recording, per fault; "
                   "JSON lines on stdout.",
                   args, sizeof args / sizeof args[0]);
    ums_json_init("dlm-timing-cost");
    ums_param_int("iterations", iterations);
    ums_param_int("rounds", rounds);
    double tick = 1e300, exchange = 1e300, span = 1e300, flight = 1e300;
    volatile uint64_t sink = 0;
    for (long long r = 0; r < rounds; ++r) {
        uint64_t t0 = dlm_tick();
        for (long long i = 0; i < iterations; ++i)
            sink += dlm_tick();
        uint64_t t1 = dlm_tick();
        for (long long i = 0; i < iterations; ++i) {
            dlm_fault_clock c;
            c.t[0] = 1000000000;
            for (int m = 1; m < M_NMOMENTS; ++m)
                c.t[m] = c.t[m - 1] + jitter((uint64_t)(i * M_NMOMENTS + m));
            dlm_timing_exchange(&c);
        }
        uint64_t t2 = dlm_tick();
        for (long long i = 0; i < iterations; ++i)
            dlm_timing_span(DLM_TP_WAKE, 1000, 1000 + jitter((uint64_t)i));
        uint64_t t3 = dlm_tick();
        for (long long i = 0; i < iterations; ++i) {
            dlm_timing_begin();
            dlm_timing_end();
        }
        uint64_t t4 = dlm_tick();
        double n = (double)iterations;
        tick = (double)(t1 - t0) / n < tick ? (double)(t1 - t0) / n : tick;
        exchange = (double)(t2 - t1) / n < exchange ? (double)(t2 - t1) / n : exchange;
        span = (double)(t3 - t2) / n < span ? (double)(t3 - t2) / n : span;
        flight = (double)(t4 - t3) / n < flight ? (double)(t4 - t3) / n : flight;
        dlm_timing_reset();
    }
    (void)sink;
    double sigsegv = 7 * tick + exchange + 2 * span + flight;
    double uffd = 6 * tick + 5 * span + flight;
    ums_result("tick_ns", tick, "ns");
    ums_result("exchange_record_ns", exchange, "ns");
    ums_result("span_record_ns", span, "ns");
    ums_result("in_flight_count_ns", flight, "ns");
    ums_rec rec;
    ums_rec_begin(&rec, "per_fault_ns", sigsegv, "ns");
    ums_rec_str(&rec, "engines", "r3 r58 r77");
    ums_rec_num(&rec, "on_thread_path_ns", 5 * tick); /* A1..A5 stamps before the thread resumes */
    ums_rec_emit(&rec);
    ums_rec_begin(&rec, "per_fault_ns", uffd, "ns");
    ums_rec_str(&rec, "engines", "uffd");
    ums_rec_num(&rec, "on_thread_path_ns", 4 * tick); /* read, request, received, copy */
    ums_rec_emit(&rec);
    fprintf(stderr, "dlm-timing-cost: stamp %.1f ns, exchange record %.1f ns, span %.1f ns; per fault %.0f ns "
                    "(SIGSEGV engines), %.0f ns (uffd)\n", tick, exchange, span, sigsegv, uffd);
    return 0;
}

/* dlm-micro: P004 fig. 2.2.  An array of `elements` unsigned longs (2^28 = 2 GiB by
 * default) in DLM; OpenMP threads write a[i] = i over all of it, then read one
 * element per DLM page and check it.  With the paper's configuration (800 MiB
 * compute capacity, one memory rank, 1 MiB pages) both phases page: the write brings
 * every page in once and swaps out 60% of them; the read brings those back.
 *
 * One record per thread count (--threads 1,2,4,...: each on a fresh array): the
 * total time (the paper's figure), the two phases, and the fault statistics with
 * P004's timing points A..D. */
#include "dlm_bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

int main(int argc, char **argv)
{
    dlm_bench_args a = {0};
    long long elements = 1LL << 28;
    const ums_arg args[] = {
        {"elements", UMS_ARG_INT, &elements, "unsigned longs in the DLM array (default 2^28 = 2 GiB)", 1, 1e13, NULL},
        DLM_BENCH_ARGS(a),
    };
    dlm_bench_parse(argc, argv,
                    "P004 fig. 2.2 microbenchmark: parallel write a[i]=i over a DLM array, then read one "
                    "element per page and check it; JSON lines on stdout.",
                    args, sizeof args / sizeof args[0]);
    int threads[64], nthreads = 1;
#ifdef _OPENMP
    threads[0] = omp_get_max_threads();
#else
    threads[0] = 1;
#endif
    if (a.threads)
        nthreads = dlm_bench_threads(a.threads, threads, 64);
    dlm_bench_start("dlm-micro", &argc, &argv, &a, 1 << 20);
    const dlm_config *c = dlm_get_config();
    size_t n = (size_t)elements, bytes = n * sizeof(unsigned long);
    size_t step = c->page_size / sizeof(unsigned long);
    ums_param_int("elements", elements);
    ums_param_int("bytes", (long long)bytes);
    int all_ok = 1;
    for (int ti = 0; ti < nthreads; ++ti) {
        int t = threads[ti];
#ifdef _OPENMP
        omp_set_num_threads(t);
#endif
        unsigned long *arr = dlm_bench_alloc(bytes);
        dlm_stats_reset();
        double t0 = ums_now();
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; ++i)
            arr[i] = i;
        double t1 = ums_now();
        long long bad = 0;
#pragma omp parallel for schedule(static) reduction(+ : bad)
        for (size_t i = 0; i < n; i += step)
            bad += arr[i] != i;
        double t2 = ums_now();
        all_ok &= bad == 0;
        ums_rec r;
        ums_rec_begin(&r, "time", t2 - t0, "s");
        ums_rec_int(&r, "threads", t);
        ums_rec_num(&r, "write_s", t1 - t0);
        ums_rec_num(&r, "read_s", t2 - t1);
        ums_rec_int(&r, "mismatches", bad);
        ums_rec_bool(&r, "verified", bad == 0);
        ums_rec_emit(&r);
        dlm_bench_emit_stats("write+read", t, NAN, t2 - t0);
        fprintf(stderr, "dlm-micro %-4s threads %2d: %8.3f s (write %.3f, read %.3f) %s\n", c->engine, t,
                t2 - t0, t1 - t0, t2 - t1, bad ? "MISMATCH" : "ok");
        dlm_free(arr);
    }
    if (!all_ok)
        fprintf(stderr, "dlm-micro: read-back check FAILED\n");
    dlm_exit(all_ok ? 0 : UMS_EXIT_FAILED);
}

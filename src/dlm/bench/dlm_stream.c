/* dlm-stream: P004 §4.2, STREAM (copy, scale, add, triad) on three DLM arrays with
 * 8 MiB pages, from all-resident to several times the compute capacity (--ratios:
 * the three arrays together / capacity).  Bandwidth as STREAM counts it (copy and
 * scale 2 words per element, add and triad 3; MB/s = 10^6 bytes/s), best of --ntimes
 * after the first, checked as STREAM checks (every element, read by dlm_get).
 *
 * In the same run, before the arrays: the MPI point-to-point bandwidth from one
 * memory rank to rank 0 (and from all of them at once) with messages of one DLM page
 * on the communicator pages travel on, so remote-paging STREAM can be read as a
 * fraction of what MPI itself moves between these ranks ("stream_over_mpi"). */
#include "dlm_bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

enum { COPY, SCALE, ADD, TRIAD, NK };
static const char *const k_name[NK] = {"copy", "scale", "add", "triad"};
static const int k_words[NK] = {2, 2, 3, 3};

int main(int argc, char **argv)
{
    dlm_bench_args a = {0};
    const char *ratios = "0.5,1,2,4";
    long long ntimes = 4, bw_reps = 20;
    const ums_arg args[] = {
        {"ratios", UMS_ARG_STRING, &ratios, "the three arrays / compute capacity, comma-separated (default 0.5,1,2,4)", 0, -1, NULL},
        {"ntimes", UMS_ARG_INT, &ntimes, "repetitions of the four kernels, the first is not counted (default 4)", 2, 1000, NULL},
        {"bw-reps", UMS_ARG_INT, &bw_reps, "messages per MPI bandwidth measurement (default 20)", 1, 100000, NULL},
        DLM_BENCH_ARGS(a),
    };
    dlm_bench_parse(argc, argv,
                    "P004 STREAM on DLM arrays (8 MiB pages) vs array size, with the MPI point-to-point "
                    "bandwidth between the same ranks; JSON lines on stdout.",
                    args, sizeof args / sizeof args[0]);
    double ratio[32];
    int nratio = dlm_bench_ratios(ratios, ratio, 32);
    int threads[1] = {dlm_bench_thread_count(&a)};
    dlm_bench_start("dlm-stream", &argc, &argv, &a, 8 << 20);
    const dlm_config *c = dlm_get_config();
    ums_param_int("threads", threads[0]);
    ums_param_int("ntimes", ntimes);

    size_t nmax = 0;
    for (int ri = 0; ri < nratio; ++ri) {
        size_t n = (size_t)(ratio[ri] * (double)c->capacity / (3.0 * sizeof(double)));
        if (n < 1024)
            dlm_bench_usage_fail("ratio %g of a %zu-byte capacity gives %zu elements per array: too few (>= 1024)",
                                 ratio[ri], c->capacity, n);
        nmax = n > nmax ? n : nmax;
    }
    dlm_bench_check_fits(nmax * sizeof(double), 3);

    double mpi_one = dlm_measure_bandwidth(c->page_size, (int)bw_reps, 1) / 1e6;
    double mpi_all = dlm_measure_bandwidth(c->page_size, (int)bw_reps, c->memory_ranks) / 1e6;
    if (mpi_one <= 0 || mpi_all <= 0)
        dlm_bench_fail("the MPI bandwidth measurement failed");
    ums_rec r;
    ums_rec_begin(&r, "mpi_p2p_bw", mpi_one, "MB/s");
    ums_rec_int(&r, "bytes", (long long)c->page_size);
    ums_rec_int(&r, "ranks", 1);
    ums_rec_emit(&r);
    ums_rec_begin(&r, "mpi_p2p_bw_all", mpi_all, "MB/s");
    ums_rec_int(&r, "bytes", (long long)c->page_size);
    ums_rec_int(&r, "ranks", c->memory_ranks);
    ums_rec_emit(&r);
    fprintf(stderr, "dlm-stream: MPI %zu-byte messages to rank 0: %.0f MB/s from one memory rank, %.0f MB/s from %d\n",
            c->page_size, mpi_one, mpi_all, c->memory_ranks);

    int all_ok = 1;
    const double scalar = 3.0;
    for (int ri = 0; ri < nratio; ++ri) {
        size_t n = (size_t)(ratio[ri] * (double)c->capacity / (3.0 * sizeof(double)));
        double *A = dlm_bench_alloc(n * 8), *B = dlm_bench_alloc(n * 8), *C = dlm_bench_alloc(n * 8);
#pragma omp parallel for schedule(static)
        for (size_t j = 0; j < n; ++j) {
            A[j] = 1.0;
            B[j] = 2.0;
            C[j] = 0.0;
        }
        double best[NK] = {1e300, 1e300, 1e300, 1e300};
        dlm_stats_reset();
        double total0 = ums_now();
        for (long long k = 0; k < ntimes; ++k) {
            double t[NK + 1];
            t[0] = ums_now();
#pragma omp parallel for schedule(static)
            for (size_t j = 0; j < n; ++j)
                C[j] = A[j];
            t[1] = ums_now();
#pragma omp parallel for schedule(static)
            for (size_t j = 0; j < n; ++j)
                B[j] = scalar * C[j];
            t[2] = ums_now();
#pragma omp parallel for schedule(static)
            for (size_t j = 0; j < n; ++j)
                C[j] = A[j] + B[j];
            t[3] = ums_now();
#pragma omp parallel for schedule(static)
            for (size_t j = 0; j < n; ++j)
                A[j] = B[j] + scalar * C[j];
            t[4] = ums_now();
            for (int q = 0; q < NK && k > 0; ++q)
                if (t[q + 1] - t[q] < best[q])
                    best[q] = t[q + 1] - t[q];
        }
        double total = ums_now() - total0;
        /* STREAM's check: the values every element must have after ntimes. */
        double ea = 1.0, eb = 2.0, ec = 0.0;
        for (long long k = 0; k < ntimes; ++k) {
            ec = ea;
            eb = scalar * ec;
            ec = ea + eb;
            ea = eb + scalar * ec;
        }
        long long bad = 0;
        enum { CH = 1 << 16 };
        double *buf = malloc(CH * sizeof *buf);
        double *arr[3] = {A, B, C}, want[3] = {ea, eb, ec};
        for (int q = 0; q < 3 && buf; ++q)
            for (size_t j = 0; j < n; j += CH) {
                size_t m = n - j < CH ? n - j : CH;
                dlm_get(arr[q] + j, buf, m * sizeof *buf);
                for (size_t i = 0; i < m; ++i)
                    bad += fabs(buf[i] - want[q]) > 1e-13 * fabs(want[q]);
            }
        free(buf);
        all_ok &= bad == 0;
        for (int q = 0; q < NK; ++q) {
            double mbps = (double)k_words[q] * sizeof(double) * (double)n / best[q] / 1e6;
            ums_rec_begin(&r, "bandwidth", mbps, "MB/s");
            ums_rec_str(&r, "kernel", k_name[q]);
            ums_rec_num(&r, "ratio", ratio[ri]);
            ums_rec_int(&r, "array_bytes", (long long)(n * 8));
            ums_rec_int(&r, "total_bytes", (long long)(3 * n * 8));
            ums_rec_num(&r, "stream_over_mpi", mbps / mpi_one);
            ums_rec_bool(&r, "verified", bad == 0);
            ums_rec_emit(&r);
        }
        dlm_bench_emit_stats("stream", threads[0], ratio[ri], total);
        fprintf(stderr, "dlm-stream %-4s ratio %4.2f (%.1f MiB): copy %8.0f scale %8.0f add %8.0f triad %8.0f MB/s%s\n",
                c->engine, ratio[ri], 3.0 * (double)n * 8 / 1048576.0, 16.0 * n / best[COPY] / 1e6,
                16.0 * n / best[SCALE] / 1e6, 24.0 * n / best[ADD] / 1e6, 24.0 * n / best[TRIAD] / 1e6,
                bad ? " MISMATCH" : "");
        dlm_free(C);
        dlm_free(B);
        dlm_free(A);
    }
    dlm_exit(all_ok ? 0 : UMS_EXIT_FAILED);
}

/* coarray-bench shared pieces: see cab_common.h. */
#include "cab_common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *g_bench = "cab";

void cab_start(const char *bench, int *argc, char ***argv)
{
    g_bench = bench;
    ums_json_init(bench); /* first: the runtime's own "unsupported" line names the bench */
    xmpc_init(argc, argv);
    ums_param_str("backend", xmpc_backend_name());
    ums_param_int("images", xmpc_num_images());
}

int cab_mpi_usable(void)
{
#ifdef CAB_HAVE_MPI
    const char *b = xmpc_backend_name();
    return strcmp(b, "mpi3") == 0 || strcmp(b, "armci") == 0;
#else
    return 0;
#endif
}

void cab_exit(int code)
{
    fflush(stdout);
    fflush(stderr);
    if (code != 0 && strcmp(xmpc_backend_name(), "gasnet") == 0)
        xmpc_abort(code); /* gasnet_exit(code): GASNet's only way to end with a status */
    xmpc_finalize();      /* gasnet: does not return (gasnet_exit(0)) */
    exit(code);
}

void cab_usage_fail(const char *fmt, ...)
{
    if (xmpc_this_image() == 1) {
        va_list ap;
        va_start(ap, fmt);
        ums_usage_vmessage(fmt, ap);
        va_end(ap);
    }
    cab_exit(UMS_EXIT_USAGE);
}

void cab_unsupported(const char *fmt, ...)
{
    if (xmpc_this_image() == 1) {
        va_list ap;
        va_start(ap, fmt);
        ums_status_vmessage("unsupported", fmt, ap);
        va_end(ap);
    }
    cab_exit(UMS_EXIT_UNSUPPORTED);
}

void *cab_xalloc(size_t bytes)
{
    void *p = calloc(bytes ? bytes : 1, 1);
    if (!p) {
        fprintf(stderr, "%s: image %d: out of memory (%zu bytes)\n", g_bench, xmpc_this_image(), bytes);
        xmpc_abort(UMS_EXIT_FAILED);
    }
    return p;
}

/* ---- reductions over coarrays ---------------------------------------------------------
 * double red[2][P][CAB_REDUCE_MAX]:[*];   (flattened to 1-D)
 * Reduction k uses half k%2: image j puts its values into row j of that half on every
 * image, sync all, everyone reduces the P rows in image order.  Two halves make one
 * sync all enough: an image can write half h again (reduction k+2) only after the
 * sync all of reduction k+1, which every image enters after reading half h. */
static xmpc_coarray *g_red;
static int g_half;

static void allreduce(double *v, int n, int max)
{
    const int me = xmpc_this_image(), np = xmpc_num_images();
    if (n < 1 || n > CAB_REDUCE_MAX) {
        fprintf(stderr, "%s: internal error: reduction of %d values\n", g_bench, n);
        xmpc_abort(UMS_EXIT_FAILED);
    }
    if (!g_red) {
        long dims[] = {2L * np * CAB_REDUCE_MAX};
        g_red = xmpc_coarray_alloc("reduction", XMPC_DOUBLE, sizeof(double), 1, dims);
    }
    const long row = ((long)g_half * np + (me - 1)) * CAB_REDUCE_MAX;
    for (int t = 1; t <= np; ++t)
        /* red[h][me-1][0:n]:[t] = v[0:n]; */
        CAB_RMA1(XMPC_RMA_PUT, g_red, v, row, n, 0, 0, t);
    xmpc_sync_all();
    const double *slots = (const double *)xmpc_coarray_data(g_red) + (long)g_half * np * CAB_REDUCE_MAX;
    for (int i = 0; i < n; ++i) {
        double acc = slots[i];
        for (int j = 1; j < np; ++j) {
            double x = slots[(long)j * CAB_REDUCE_MAX + i];
            acc = max ? (x > acc ? x : acc) : acc + x;
        }
        v[i] = acc;
    }
    g_half ^= 1;
}

void cab_allreduce_sum(double *v, int n) { allreduce(v, n, 0); }
void cab_allreduce_max(double *v, int n) { allreduce(v, n, 1); }

void cab_allreduce_free(void)
{
    if (g_red)
        xmpc_coarray_free(g_red);
    g_red = NULL;
    g_half = 0;
}

/* ---- NPB randlc ------------------------------------------------------------------------
 * NPB 3.x (is.c, common/randdp.f): split a and x into 23-bit halves so every product is
 * exact in a double, then reduce mod 2^46. */
double cab_randlc(double *x, double a)
{
    const double r23 = 0x1p-23, r46 = 0x1p-46, t23 = 0x1p23, t46 = 0x1p46;
    double a1 = (double)(long)(r23 * a), a2 = a - t23 * a1;
    double x1 = (double)(long)(r23 * *x), x2 = *x - t23 * x1;
    double t1 = a1 * x2 + a2 * x1;
    double z = t1 - t23 * (double)(long)(r23 * t1);
    double t3 = t23 * z + a2 * x2;
    *x = t3 - t46 * (double)(long)(r46 * t3);
    return r46 * *x;
}

int cab_is_pow2(long n) { return n > 0 && (n & (n - 1)) == 0; }

int cab_trial_best(long long k, long long n, double time, int verified, double *best)
{
    if (n > 1 && xmpc_this_image() == 1)
        fprintf(stderr, "%s: trial %lld of %lld: %.6f s, %s\n", g_bench, k + 1, n, time,
                verified ? "verified" : "NOT verified");
    if (k > 0 && !(time < *best))
        return 0;
    *best = time;
    return 1;
}

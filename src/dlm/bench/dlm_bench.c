#define _GNU_SOURCE
#include "dlm_bench.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int launcher_rank(void)
{
    const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; ++i) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return atoi(v);
    }
    return 0;
}

void dlm_bench_parse(int argc, char **argv, const char *summary, const ums_arg *args, size_t nargs)
{
    int saved_out = -1, saved_err = -1;
    if (launcher_rank() != 0) {
        int devnull = open("/dev/null", O_WRONLY);
        fflush(stdout);
        fflush(stderr);
        saved_out = dup(1);
        saved_err = dup(2);
        dup2(devnull, 1);
        dup2(devnull, 2);
        close(devnull);
    }
    ums_args_parse(argc, argv, summary, args, nargs);
    if (saved_out >= 0) {
        fflush(stdout);
        fflush(stderr);
        dup2(saved_out, 1);
        dup2(saved_err, 2);
        close(saved_out);
        close(saved_err);
    }
}

int dlm_bench_threads(const char *list, int *out, int n)
{
    double v[1024];
    int count = ums_parse_numbers(list, v, n < 1024 ? n : 1024, 1, 1024);
    for (int i = 0; i < count; ++i)
        if (v[i] != (int)v[i]) count = -1;
    if (count < 0)
        ums_usage_fail("--threads %s: want a comma-separated list of counts in 1..1024", list);
    for (int i = 0; i < count; ++i) out[i] = (int)v[i];
    return count;
}

int dlm_bench_thread_count(const dlm_bench_args *a)
{
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    if (a->threads)
        dlm_bench_threads(a->threads, &threads, 1);
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    return threads;
}

int dlm_bench_ratios(const char *list, double *out, int n)
{
    int count = ums_parse_numbers(list, out, n, 1e-9, 1000);
    if (count < 0) ums_usage_fail("--ratios %s: want comma-separated positive numbers", list);
    return count;
}

void dlm_bench_start(const char *bench, int *argc, char ***argv, const dlm_bench_args *a,
                     size_t default_page_size)
{
    ums_json_init(bench);
    dlm_options o = {a->engine, a->page_size, a->capacity, a->mem_capacity, a->timeout, (int)a->uffd_workers,
                     a->fault_timing ? 1 : 0};
    if (!o.page_size && !getenv("DLM_PAGE_SIZE"))
        o.page_size = default_page_size;
    int status = dlm_startup_opts(argc, argv, &o);
    if (status == DLM_EUSAGE) {
        fprintf(stderr, "%s: error: %s\n", bench, dlm_error());
        dlm_exit(UMS_EXIT_USAGE);
    }
    if (status == DLM_EUNSUPPORTED) {
        ums_rec r;
        ums_rec_begin_status(&r, "unsupported");
        ums_rec_str(&r, "reason", dlm_error());
        ums_rec_emit(&r);
        fprintf(stderr, "%s: unsupported: %s\n", bench, dlm_error());
        dlm_exit(UMS_EXIT_UNSUPPORTED);
    }
    if (status != DLM_OK)
        dlm_bench_fail("%s", dlm_error());
    const dlm_config *c = dlm_get_config();
    ums_param_str("engine", c->engine);
    ums_param_int("page_size", (long long)c->page_size);
    ums_param_int("capacity", (long long)c->capacity);
    ums_param_int("mem_capacity", (long long)c->mem_capacity);
    ums_param_int("memory_ranks", c->memory_ranks);
    ums_param_int("fault_timing", c->fault_timing);
    if (strcmp(c->engine, "uffd") == 0) {
        ums_param_int("uffd_workers", c->uffd_workers);
        ums_param_int("uffd_user_mode_only", c->uffd_user_mode_only);
    }
}

void dlm_bench_usage_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ums_usage_vmessage(fmt, ap);
    va_end(ap);
    dlm_exit(UMS_EXIT_USAGE);
}

void dlm_bench_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ums_status_vmessage("error", fmt, ap);
    va_end(ap);
    dlm_exit(UMS_EXIT_FAILED);
}

void dlm_bench_check_fits(size_t bytes, int count)
{
    const dlm_config *c = dlm_get_config();
    size_t per = (bytes + c->page_size - 1) / c->page_size * c->page_size;
    size_t held = (size_t)c->memory_ranks * (c->mem_capacity / c->page_size) * c->page_size;
    if (per * (size_t)count > held)
        dlm_bench_usage_fail("%d arrays of %zu bytes do not fit in the %d memory rank(s) holding %zu bytes "
                             "(DLM_MEM_CAPACITY %zu each)",
                             count, bytes, c->memory_ranks, held, c->mem_capacity);
}

void *dlm_bench_alloc(size_t bytes)
{
    void *p = dlm_alloc(bytes);
    if (!p)
        dlm_bench_usage_fail("%s", dlm_error());
    return p;
}

/* Points an engine cannot see (uffd: the kernel raises the fault and wakes the thread). */
static const char *unobservable(const char *engine, int point)
{
    if (strcmp(engine, "uffd") == 0 && (point == DLM_TP_A || point == DLM_TP_WAKE || point == DLM_TP_STALL))
        return "userfaultfd raises the fault and wakes the thread inside the kernel";
    return NULL;
}

static void emit_timing(const char *phase, int threads, double ratio, double seconds, uint64_t faults)
{
    dlm_fault_timing ft;
    dlm_fault_timing_get(&ft);
    const char *engine = dlm_get_config()->engine;
    for (int i = 0; i < DLM_TP_N; ++i) {
        const dlm_timing_point *p = &ft.pt[i];
        const char *why = unobservable(engine, i);
        ums_rec r;
        ums_rec_begin(&r, "fault_time", p->n ? p->sum / (double)p->n * 1e6 : NAN, "us");
        ums_rec_str(&r, "point", dlm_timing_point_name(i));
        ums_rec_str(&r, "phase", phase);
        ums_rec_int(&r, "threads", threads);
        if (!isnan(ratio))
            ums_rec_num(&r, "ratio", ratio);
        ums_rec_int(&r, "n", (long long)p->n);
        ums_rec_int(&r, "faults", (long long)faults);
        ums_rec_num(&r, "p50_us", p->n ? p->p50 * 1e6 : NAN);
        ums_rec_num(&r, "p99_us", p->n ? p->p99 * 1e6 : NAN);
        ums_rec_num(&r, "max_us", p->n ? p->max * 1e6 : NAN);
        ums_rec_num(&r, "sum_s", p->sum);
        ums_rec_num(&r, "wall_s", seconds);
        ums_rec_num(&r, "sum_over_wall", seconds > 0 ? p->sum / seconds : NAN);
        ums_rec_bool(&r, "observable", why == NULL);
        if (why)
            ums_rec_str(&r, "reason", why);
        ums_rec_int(&r, "backwards", (long long)ft.backwards);
        ums_rec_int(&r, "in_flight", (long long)ft.in_flight);
        ums_rec_emit(&r);
    }
    const dlm_timing_point *pt = ft.pt;
    double mean[DLM_TP_N];
    for (int i = 0; i < DLM_TP_N; ++i)
        mean[i] = pt[i].n ? pt[i].sum / (double)pt[i].n * 1e6 : NAN;
    fprintf(stderr, "  fault timing (mean us): a %.1f b %.1f q %.1f c %.1f d %.1f | wake %.1f stall %.1f exchange %.1f\n",
            mean[DLM_TP_A], mean[DLM_TP_B], mean[DLM_TP_Q], mean[DLM_TP_C], mean[DLM_TP_D], mean[DLM_TP_WAKE],
            mean[DLM_TP_STALL], mean[DLM_TP_EXCHANGE]);
}

void dlm_bench_emit_stats(const char *phase, int threads, double ratio, double seconds)
{
    dlm_stats s;
    int timing = dlm_get_config()->fault_timing;
    if (timing) { /* first: it waits for the exchanges still ending, which the counts include */
        dlm_fault_timing ft;
        dlm_fault_timing_get(&ft);
    }
    dlm_stats_get(&s);
    ums_rec r;
    ums_rec_begin(&r, "faults", (double)s.faults, "count");
    ums_rec_str(&r, "phase", phase);
    ums_rec_int(&r, "threads", threads);
    if (!isnan(ratio))
        ums_rec_num(&r, "ratio", ratio);
    ums_rec_num(&r, "fault_rate", seconds > 0 ? (double)s.faults / seconds : 0.0);
    ums_rec_int(&r, "evictions", (long long)s.evictions);
    ums_rec_int(&r, "writebacks", (long long)s.writebacks);
    ums_rec_int(&r, "stops", (long long)s.stops);
    ums_rec_int(&r, "bytes_in", (long long)s.bytes_in);
    ums_rec_int(&r, "bytes_out", (long long)s.bytes_out);
    ums_rec_emit(&r);
    if (timing)
        emit_timing(phase, threads, ratio, seconds, s.faults);
}

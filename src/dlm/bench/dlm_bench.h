/* What the three DLM benchmarks share: the DLM options as command-line arguments
 * (they override the DLM_* environment), start-up with the CLI contract's exit
 * statuses (2 bad input, 77 unsupported, 1 failed: every rank leaves together), the
 * JSON parameters every record carries, thread-count lists, and the fault statistics
 * record. */
#ifndef DLM_BENCH_H
#define DLM_BENCH_H

#include "dlm/dlm.h"
#include "umstudy/support.h"

typedef struct dlm_bench_args {
    const char *engine;
    size_t page_size, capacity, mem_capacity;
    double timeout;
    long long uffd_workers;
    const char *threads; /* comma-separated thread counts */
    int fault_timing;
} dlm_bench_args;

#define DLM_BENCH_ARGS(a)                                                                              \
    {"engine", UMS_ARG_CHOICE, &(a).engine, "fault engine (default: DLM_ENGINE or r77)", 0, -1,          \
     "r3|r58|r77|uffd"},                                                                               \
    {"page-size", UMS_ARG_SIZE, &(a).page_size, "DLM page size (default: DLM_PAGE_SIZE or the bench's)", \
     1, 1e12, NULL},                                                                                   \
    {"capacity", UMS_ARG_SIZE, &(a).capacity, "compute rank's resident capacity (DLM_CAPACITY)", 1,     \
     1e15, NULL},                                                                                      \
    {"mem-capacity", UMS_ARG_SIZE, &(a).mem_capacity, "capacity of each memory rank (DLM_MEM_CAPACITY)", \
     1, 1e15, NULL},                                                                                   \
    {"timeout", UMS_ARG_DOUBLE, &(a).timeout, "seconds before a silent memory rank is declared dead", \
     0.01, 1e6, NULL},                                                                                 \
    {"uffd-workers", UMS_ARG_INT, &(a).uffd_workers, "uffd engine: fault-handling threads", 1, 64,     \
     NULL},                                                                                            \
    {"threads", UMS_ARG_STRING, &(a).threads, "comma-separated OpenMP thread counts (default: OMP_NUM_THREADS)", \
     0, -1, NULL},                                                                                     \
    {"fault-timing", UMS_ARG_FLAG, &(a).fault_timing,                                                  \
     "time every fault: P004's points A..D per fault (DLM_FAULT_TIMING=1)", 0, -1, NULL}

/* ums_args_parse on every rank (same argv), quiet on all but rank 0 (the launcher's
 * rank variable tells which, as MPI is not up yet). */
void dlm_bench_parse(int argc, char **argv, const char *summary, const ums_arg *args, size_t nargs);
/* Parses the --threads list into out (max n); exits 2 on bad input. */
int dlm_bench_threads(const char *list, int *out, int n);
/* The one thread count of a benchmark that runs at a single count: --threads (one
 * value) or OpenMP's default; sets it for OpenMP. */
int dlm_bench_thread_count(const dlm_bench_args *a);
/* Parses a --ratios list (problem / capacity, positive) into out (max n); exits 2 on
 * bad input. */
int dlm_bench_ratios(const char *list, double *out, int n);
/* Starts DLM (memory ranks stay inside), sets the JSON context. */
void dlm_bench_start(const char *bench, int *argc, char ***argv, const dlm_bench_args *a,
                     size_t default_page_size);
/* Rank 0, after start: bad input that needs the configuration (e.g. sizes). */
void dlm_bench_usage_fail(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;
void dlm_bench_fail(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;
/* Before any output: `count` arrays of `bytes` must fit in the memory ranks (the
 * largest size of a sweep), else bad input (exit 2). */
void dlm_bench_check_fits(size_t bytes, int count);
/* A dlm_alloc that fails is bad input (more than the memory ranks hold): exit 2. */
void *dlm_bench_alloc(size_t bytes);
/* {"metric":"faults", fault rate, evictions, write-backs, bytes} for a phase of
 * `seconds` (ratio: the sweep point, NAN where none); with fault timing on, also one
 * {"metric":"fault_time","point":...} line per timing point (dlm.h): mean, median,
 * p99 and max in us, the count, the sum and the sum over the phase's wall time. */
void dlm_bench_emit_stats(const char *phase, int threads, double ratio, double seconds);

#endif

/* umstudy support library: the few things every benchmark program needs.
 *
 * - ums_now():     monotonic wall clock in seconds (CLOCK_MONOTONIC, immune to NTP steps).
 * - JSON lines:    every measurement is one JSON object on stdout, carrying the
 *                  program's parameters, so ReFrame and analysis/ parse data, not prose.
 * - ums_args_*:    a table-driven command-line parser with range checks; bad input
 *                  prints a clear message and exits 2 before anything is allocated.
 *
 * Plain C so that C runtimes (dlm, xmp-coarray), C++ and CUDA programs share it.
 */
#ifndef UMSTUDY_SUPPORT_H
#define UMSTUDY_SUPPORT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exit status of a program that ran correctly but cannot do what was asked on this
 * hardware (e.g. system-allocated memory without HMM/ATS).  77 is the automake/CTest
 * "skipped" convention; ReFrame checks turn it into a skip. */
#define UMS_EXIT_UNSUPPORTED 77
#define UMS_EXIT_USAGE 2
#define UMS_EXIT_FAILED 1

double ums_now(void);

/* ---- JSON lines ------------------------------------------------------------ */

/* Program-wide context: the benchmark name and parameters repeated in every line. */
void ums_json_init(const char *bench);
void ums_param_str(const char *key, const char *value);
void ums_param_int(const char *key, long long value);
void ums_param_num(const char *key, double value);

/* One output line.  Build with ums_rec_begin / ums_rec_* / ums_rec_emit. */
typedef struct ums_rec {
    char buf[8192];
    size_t len;
    int overflow;
} ums_rec;

/* {"bench":..., "metric": metric, "value": value, "unit": unit, <fields>, "params": {...}} */
void ums_rec_begin(ums_rec *r, const char *metric, double value, const char *unit);
/* {"bench":..., "status": status, <fields>, "params": {...}} */
void ums_rec_begin_status(ums_rec *r, const char *status);
void ums_rec_str(ums_rec *r, const char *key, const char *value);
void ums_rec_int(ums_rec *r, const char *key, long long value);
void ums_rec_num(ums_rec *r, const char *key, double value);
void ums_rec_bool(ums_rec *r, const char *key, int value);
void ums_rec_emit(ums_rec *r);

/* Shorthands for the common single-field lines. */
void ums_result(const char *metric, double value, const char *unit);
/* Emits {"status":"unsupported","reason":...} and exits UMS_EXIT_UNSUPPORTED. */
void ums_unsupported(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;
/* Emits {"status":"error","reason":...} on stdout, the reason on stderr, exits 1. */
void ums_fail(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;

/* {"status":<status>,"reason":...} on stdout and "<bench>: <status>: <reason>" on
 * stderr (the message of ums_unsupported/ums_fail, for programs that must leave in
 * their own way, e.g. all MPI ranks together). */
void ums_status_vmessage(const char *status, const char *fmt, va_list ap);
/* "<bench>: error: <reason>" on stderr (the message of ums_usage_fail, for programs
 * that must leave in their own way, e.g. all MPI ranks together). */
void ums_usage_vmessage(const char *fmt, va_list ap);
/* Bad input found after ums_args_parse (values that only make sense together):
 * "<bench>: error: <reason>" on stderr, nothing on stdout, exits UMS_EXIT_USAGE. */
void ums_usage_fail(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;

/* Median of n doubles (the array is sorted in place). */
double ums_median(double *v, size_t n);

/* ---- argument parsing ------------------------------------------------------ */

typedef enum {
    UMS_ARG_FLAG,   /* int*: set to 1 when present */
    UMS_ARG_INT,    /* long long*: integer in [min, max] */
    UMS_ARG_SIZE,   /* size_t*: bytes, with K/M/G/T (binary) suffixes, in [min, max] */
    UMS_ARG_DOUBLE, /* double*: in [min, max] */
    UMS_ARG_STRING, /* const char**: any string */
    UMS_ARG_CHOICE  /* const char**: one of `choices`, a '|' separated list */
} ums_arg_type;

typedef struct ums_arg {
    const char *name; /* long option without dashes, e.g. "iterations" */
    ums_arg_type type;
    void *dst;
    const char *help;
    double min, max;     /* INT, SIZE, DOUBLE; ignored when min > max */
    const char *choices; /* CHOICE */
} ums_arg;

/* Parses --name value / --name=value; --help prints usage and exits 0; anything
 * malformed prints the reason and the usage to stderr and exits UMS_EXIT_USAGE. */
void ums_args_parse(int argc, char **argv, const char *summary, const ums_arg *args,
                    size_t nargs);
/* Parses "AxBxC" (any count up to max_n) of positive integers; returns the count or -1. */
int ums_parse_dims(const char *text, long long *out, int max_n);
/* Parses "a,b,c" (at most max_n numbers, each in [lo, hi]) into out; the count, or -1
 * for an empty, malformed or out-of-range list. */
int ums_parse_numbers(const char *text, double *out, int max_n, double lo, double hi);
/* Parses a byte count with an optional K/M/G/T binary suffix; returns 0 on success. */
int ums_parse_size(const char *text, size_t *out);

#ifdef __cplusplus
}
#endif
#endif

#define _POSIX_C_SOURCE 200809L
#include "umstudy/support.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double ums_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- JSON lines ------------------------------------------------------------ */

static char g_bench[128] = "unknown";
static char g_params[4096]; /* "k":v,"k":v  (no braces) */
static size_t g_params_len;

static void buf_append(char *buf, size_t cap, size_t *len, int *overflow, const char *s,
                       size_t n)
{
    if (*len + n + 1 > cap) {
        *overflow = 1;
        return;
    }
    memcpy(buf + *len, s, n);
    *len += n;
    buf[*len] = '\0';
}

/* JSON string escaping: quotes, backslashes and control characters. */
static void buf_json_string(char *buf, size_t cap, size_t *len, int *overflow, const char *s)
{
    buf_append(buf, cap, len, overflow, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; ++p) {
        char esc[8];
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            buf_append(buf, cap, len, overflow, esc, 2);
        } else if (*p < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            buf_append(buf, cap, len, overflow, esc, 6);
        } else {
            buf_append(buf, cap, len, overflow, (const char *)p, 1);
        }
    }
    buf_append(buf, cap, len, overflow, "\"", 1);
}

/* JSON has no NaN/Inf: those become null so parsers never choke. */
static void buf_json_number(char *buf, size_t cap, size_t *len, int *overflow, double v)
{
    char num[64];
    int n = isfinite(v) ? snprintf(num, sizeof num, "%.10g", v) : snprintf(num, sizeof num, "null");
    buf_append(buf, cap, len, overflow, num, (size_t)n);
}

static void buf_key(char *buf, size_t cap, size_t *len, int *overflow, const char *key)
{
    if (*len > 0 && buf[*len - 1] != '{') buf_append(buf, cap, len, overflow, ",", 1);
    buf_json_string(buf, cap, len, overflow, key);
    buf_append(buf, cap, len, overflow, ":", 1);
}

void ums_json_init(const char *bench)
{
    snprintf(g_bench, sizeof g_bench, "%s", bench);
    g_params[0] = '{'; /* a sentinel so buf_key omits the first comma */
    g_params[1] = '\0';
    g_params_len = 1;
}

static int g_params_overflow;
void ums_param_str(const char *key, const char *value)
{
    if (g_params_len == 0) ums_json_init(g_bench);
    buf_key(g_params, sizeof g_params, &g_params_len, &g_params_overflow, key);
    buf_json_string(g_params, sizeof g_params, &g_params_len, &g_params_overflow, value);
}
void ums_param_int(const char *key, long long value)
{
    char num[32];
    if (g_params_len == 0) ums_json_init(g_bench);
    buf_key(g_params, sizeof g_params, &g_params_len, &g_params_overflow, key);
    int n = snprintf(num, sizeof num, "%lld", value);
    buf_append(g_params, sizeof g_params, &g_params_len, &g_params_overflow, num, (size_t)n);
}
void ums_param_num(const char *key, double value)
{
    if (g_params_len == 0) ums_json_init(g_bench);
    buf_key(g_params, sizeof g_params, &g_params_len, &g_params_overflow, key);
    buf_json_number(g_params, sizeof g_params, &g_params_len, &g_params_overflow, value);
}

static void rec_start(ums_rec *r)
{
    r->len = 0;
    r->overflow = 0;
    r->buf[0] = '\0';
    buf_append(r->buf, sizeof r->buf, &r->len, &r->overflow, "{", 1);
    buf_key(r->buf, sizeof r->buf, &r->len, &r->overflow, "bench");
    buf_json_string(r->buf, sizeof r->buf, &r->len, &r->overflow, g_bench);
}

void ums_rec_begin(ums_rec *r, const char *metric, double value, const char *unit)
{
    rec_start(r);
    ums_rec_str(r, "metric", metric);
    ums_rec_num(r, "value", value);
    ums_rec_str(r, "unit", unit);
}

void ums_rec_begin_status(ums_rec *r, const char *status)
{
    rec_start(r);
    ums_rec_str(r, "status", status);
}

void ums_rec_str(ums_rec *r, const char *key, const char *value)
{
    buf_key(r->buf, sizeof r->buf, &r->len, &r->overflow, key);
    buf_json_string(r->buf, sizeof r->buf, &r->len, &r->overflow, value);
}
void ums_rec_int(ums_rec *r, const char *key, long long value)
{
    char num[32];
    int n = snprintf(num, sizeof num, "%lld", value);
    buf_key(r->buf, sizeof r->buf, &r->len, &r->overflow, key);
    buf_append(r->buf, sizeof r->buf, &r->len, &r->overflow, num, (size_t)n);
}
void ums_rec_num(ums_rec *r, const char *key, double value)
{
    buf_key(r->buf, sizeof r->buf, &r->len, &r->overflow, key);
    buf_json_number(r->buf, sizeof r->buf, &r->len, &r->overflow, value);
}
void ums_rec_bool(ums_rec *r, const char *key, int value)
{
    buf_key(r->buf, sizeof r->buf, &r->len, &r->overflow, key);
    buf_append(r->buf, sizeof r->buf, &r->len, &r->overflow, value ? "true" : "false",
               value ? 4 : 5);
}

void ums_rec_emit(ums_rec *r)
{
    if (g_params_len == 0) ums_json_init(g_bench);
    buf_key(r->buf, sizeof r->buf, &r->len, &r->overflow, "params");
    buf_append(r->buf, sizeof r->buf, &r->len, &r->overflow, g_params, g_params_len);
    buf_append(r->buf, sizeof r->buf, &r->len, &r->overflow, "}}", 2);
    if (r->overflow || g_params_overflow) {
        /* A truncated object would be invalid JSON: say so instead of printing it. */
        fprintf(stderr, "umstudy: JSON record too long, dropped (bench %s)\n", g_bench);
        return;
    }
    fputs(r->buf, stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

void ums_result(const char *metric, double value, const char *unit)
{
    ums_rec r;
    ums_rec_begin(&r, metric, value, unit);
    ums_rec_emit(&r);
}

void ums_status_vmessage(const char *status, const char *fmt, va_list ap)
{
    char reason[1024];
    vsnprintf(reason, sizeof reason, fmt, ap);
    ums_rec r;
    ums_rec_begin_status(&r, status);
    ums_rec_str(&r, "reason", reason);
    ums_rec_emit(&r);
    fprintf(stderr, "%s: %s: %s\n", g_bench, status, reason);
}

__attribute__((noreturn)) static void status_and_exit(const char *status, int code, const char *fmt, va_list ap)
{
    ums_status_vmessage(status, fmt, ap);
    exit(code);
}

void ums_unsupported(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    status_and_exit("unsupported", UMS_EXIT_UNSUPPORTED, fmt, ap);
}

void ums_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    status_and_exit("error", UMS_EXIT_FAILED, fmt, ap);
}

void ums_usage_vmessage(const char *fmt, va_list ap)
{
    fprintf(stderr, "%s: error: ", g_bench);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void ums_usage_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ums_usage_vmessage(fmt, ap);
    va_end(ap);
    exit(UMS_EXIT_USAGE);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double ums_median(double *v, size_t n)
{
    if (n == 0) return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- argument parsing ------------------------------------------------------ */

int ums_parse_size(const char *text, size_t *out)
{
    char *end;
    errno = 0;
    if (!text || !isdigit((unsigned char)text[0])) return -1;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno) return -1;
    unsigned long long mult = 1;
    switch (toupper((unsigned char)*end)) {
    case '\0': break;
    case 'K': mult = 1ULL << 10; ++end; break;
    case 'M': mult = 1ULL << 20; ++end; break;
    case 'G': mult = 1ULL << 30; ++end; break;
    case 'T': mult = 1ULL << 40; ++end; break;
    default: return -1;
    }
    if (*end == 'i' || *end == 'I') ++end;
    if (*end == 'B' || *end == 'b') ++end;
    if (*end != '\0') return -1;
    if (v > SIZE_MAX / mult) return -1;
    *out = (size_t)(v * mult);
    return 0;
}

int ums_parse_numbers(const char *text, double *out, int max_n, double lo, double hi)
{
    int n = 0;
    for (const char *p = text; *p;) {
        char *end;
        double v = strtod(p, &end);
        if (end == p || !(v >= lo && v <= hi) || n == max_n || (*end && *end != ',')) return -1;
        out[n++] = v;
        p = *end ? end + 1 : end;
        if (end[0] == ',' && !*p) return -1; /* a trailing comma is a missing number */
    }
    return n ? n : -1;
}

int ums_parse_dims(const char *text, long long *out, int max_n)
{
    int n = 0;
    const char *p = text;
    while (*p) {
        char *end;
        if (!isdigit((unsigned char)*p) || n == max_n) return -1;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (errno || v <= 0) return -1;
        out[n++] = v;
        if (*end == 'x' || *end == 'X' || *end == ',') {
            p = end + 1;
            if (!*p) return -1;
        } else if (*end == '\0') {
            p = end;
        } else {
            return -1;
        }
    }
    return n ? n : -1;
}

static void usage(FILE *f, const char *prog, const char *summary, const ums_arg *args,
                  size_t nargs)
{
    fprintf(f, "usage: %s [options]\n%s\n\noptions:\n", prog, summary);
    for (size_t i = 0; i < nargs; ++i) {
        const char *meta = "";
        switch (args[i].type) {
        case UMS_ARG_FLAG: meta = ""; break;
        case UMS_ARG_INT: meta = " N"; break;
        case UMS_ARG_SIZE: meta = " BYTES"; break;
        case UMS_ARG_DOUBLE: meta = " X"; break;
        case UMS_ARG_STRING: meta = " TEXT"; break;
        case UMS_ARG_CHOICE: meta = " CHOICE"; break;
        }
        fprintf(f, "  --%s%s\n      %s", args[i].name, meta, args[i].help);
        if (args[i].type == UMS_ARG_CHOICE) fprintf(f, " (%s)", args[i].choices);
        fputc('\n', f);
    }
    fprintf(f, "  --help\n      print this help and exit\n");
}

static int choice_ok(const char *choices, const char *v)
{
    size_t n = strlen(v);
    for (const char *p = choices; p && *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, v, n) == 0) return 1;
        p = bar ? bar + 1 : NULL;
    }
    return 0;
}

static void usage_error(const char *prog, const char *summary, const ums_arg *args,
                        size_t nargs, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: error: ", prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    usage(stderr, prog, summary, args, nargs);
    exit(UMS_EXIT_USAGE);
}

void ums_args_parse(int argc, char **argv, const char *summary, const ums_arg *args,
                    size_t nargs)
{
    const char *prog = argc > 0 ? argv[0] : "program";
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout, prog, summary, args, nargs);
            exit(0);
        }
        if (strncmp(a, "--", 2) != 0)
            usage_error(prog, summary, args, nargs, "unexpected argument '%s'", a);
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const ums_arg *spec = NULL;
        for (size_t k = 0; k < nargs; ++k)
            if (strlen(args[k].name) == nlen && strncmp(args[k].name, name, nlen) == 0)
                spec = &args[k];
        if (!spec) usage_error(prog, summary, args, nargs, "unknown option '%s'", a);
        if (spec->type == UMS_ARG_FLAG) {
            if (eq) usage_error(prog, summary, args, nargs, "--%s takes no value", spec->name);
            *(int *)spec->dst = 1;
            continue;
        }
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!val) usage_error(prog, summary, args, nargs, "--%s needs a value", spec->name);
        int ranged = spec->min <= spec->max;
        switch (spec->type) {
        case UMS_ARG_INT: {
            char *end;
            errno = 0;
            long long v = strtoll(val, &end, 10);
            if (errno || *end || end == val)
                usage_error(prog, summary, args, nargs, "--%s: '%s' is not an integer",
                            spec->name, val);
            if (ranged && (v < spec->min || v > spec->max))
                usage_error(prog, summary, args, nargs, "--%s: %lld is outside [%.0f, %.0f]",
                            spec->name, v, spec->min, spec->max);
            *(long long *)spec->dst = v;
            break;
        }
        case UMS_ARG_SIZE: {
            size_t v;
            if (ums_parse_size(val, &v))
                usage_error(prog, summary, args, nargs,
                            "--%s: '%s' is not a byte count (e.g. 4096, 64K, 8G)", spec->name, val);
            if (ranged && ((double)v < spec->min || (double)v > spec->max))
                usage_error(prog, summary, args, nargs, "--%s: %zu is outside [%.0f, %.0f]",
                            spec->name, v, spec->min, spec->max);
            *(size_t *)spec->dst = v;
            break;
        }
        case UMS_ARG_DOUBLE: {
            char *end;
            errno = 0;
            double v = strtod(val, &end);
            if (errno || *end || end == val || !isfinite(v))
                usage_error(prog, summary, args, nargs, "--%s: '%s' is not a number",
                            spec->name, val);
            if (ranged && (v < spec->min || v > spec->max))
                usage_error(prog, summary, args, nargs, "--%s: %g is outside [%g, %g]",
                            spec->name, v, spec->min, spec->max);
            *(double *)spec->dst = v;
            break;
        }
        case UMS_ARG_CHOICE:
            if (!choice_ok(spec->choices, val))
                usage_error(prog, summary, args, nargs, "--%s: '%s' is not one of %s",
                            spec->name, val, spec->choices);
            *(const char **)spec->dst = val;
            break;
        case UMS_ARG_STRING:
            *(const char **)spec->dst = val;
            break;
        case UMS_ARG_FLAG: break;
        }
    }
}

// Host code shared by the Himeno variants: options, initialisation, the CPU
// reference sweep, reporting and verification.
#include "himeno.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "umstudy/support.h"

namespace {

struct NamedSize {
    const char *name;
    int mimax, mjmax, mkmax; // array dimensions of RIKEN's static C version
};
// himenoBMTxps.c: XS 32x32x64 ... XL 512x512x1024 grid points in 33x33x65 ... arrays.
const NamedSize kSizes[] = {
    {"XS", 33, 33, 65}, {"S", 65, 65, 129}, {"M", 129, 129, 257},
    {"L", 257, 257, 513}, {"XL", 513, 513, 1025},
};

} // namespace

HimenoOptions himeno_parse(int argc, char **argv, const char *variant)
{
    ums_json_init("himeno");
    HimenoOptions o;
    memset(&o, 0, sizeof o);
    const char *size = "S";
    const char *dims = nullptr;
    o.iterations = 100;
    o.repeat = 1;
    o.gosa_rtol = 1e-6;
    o.p_atol = 1e-6;
    o.alloc = "explicit";
    o.block_k = 64;
    o.block_j = 4;
    o.ichunk = 1;
    const char *hints = "on";
    std::vector<ums_arg> args = {
        {"size", UMS_ARG_CHOICE, &size, "RIKEN size name", 0, -1, "XS|S|M|L|XL"},
        {"dims", UMS_ARG_STRING, &dims, "explicit grid IMAXxJMAXxKMAX (points, each >= 3); overrides --size", 0, -1, nullptr},
        {"iterations", UMS_ARG_INT, &o.iterations, "Jacobi iterations (no rehearsal run)", 1, 1e9, nullptr},
        {"repeat", UMS_ARG_INT, &o.repeat, "timed runs from fresh data; the median is reported", 1, 1000, nullptr},
        {"verify", UMS_ARG_FLAG, &o.verify, "recompute on the CPU and compare gosa and p", 0, -1, nullptr},
        {"gosa-rtol", UMS_ARG_DOUBLE, &o.gosa_rtol, "relative tolerance on gosa for --verify", 0, 1, nullptr},
        {"p-atol", UMS_ARG_DOUBLE, &o.p_atol, "absolute tolerance on every p value for --verify", 0, 1, nullptr},
    };
    if (strcmp(variant, "openacc") == 0)
        args.push_back({"allow-host-fallback", UMS_ARG_FLAG, &o.allow_host, "run on the host when no OpenACC accelerator is present (for testing)", 0, -1, nullptr});
    if (strcmp(variant, "cuda") == 0) {
        args.push_back({"alloc", UMS_ARG_CHOICE, &o.alloc,
                        "explicit: cudaMalloc + copies; managed: cudaMallocManaged; system: malloc (needs pageable memory access)",
                        0, -1, "explicit|managed|system"});
        args.push_back({"device", UMS_ARG_INT, &o.device, "CUDA device ordinal", 0, 1024, nullptr});
        args.push_back({"block-k", UMS_ARG_INT, &o.block_k, "threads per block along k (multiple of 32)", 32, 1024, nullptr});
        args.push_back({"block-j", UMS_ARG_INT, &o.block_j, "threads per block along j", 1, 32, nullptr});
        args.push_back({"ichunk", UMS_ARG_INT, &o.ichunk, "i planes each thread marches through", 1, 1 << 20, nullptr});
        args.push_back({"cache-hints", UMS_ARG_CHOICE, &hints,
                        "stream coefficient loads and wrk2 stores past the caches", 0, -1, "on|off"});
    }
    ums_args_parse(argc, argv,
                   "Himeno benchmark (RIKEN): Jacobi iterations of a 3-D Poisson solver; "
                   "JSON lines on stdout.",
                   args.data(), args.size());
    o.cache_hints = strcmp(hints, "on") == 0;
    if (o.block_k % 32 || o.block_k * o.block_j > 1024) {
        ums_usage_fail("--block-k must be a multiple of 32 and block-k*block-j <= 1024");
    }
    if (dims) {
        long long d[3];
        if (ums_parse_dims(dims, d, 3) != 3 || d[0] < 3 || d[1] < 3 || d[2] < 3 ||
            d[0] > 1 << 16 || d[1] > 1 << 16 || d[2] > 1 << 16) {
            ums_usage_fail("--dims '%s' is not IMAXxJMAXxKMAX with 3 <= each <= 65536", dims);
        }
        o.grid = HimenoGrid{(int)d[0], (int)d[1], (int)d[2], "custom"};
    } else {
        for (const NamedSize &s : kSizes)
            if (strcmp(s.name, size) == 0)
                o.grid = HimenoGrid{s.mimax - 1, s.mjmax - 1, s.mkmax - 1, s.name};
    }

    ums_param_str("variant", variant);
    if (strcmp(variant, "cuda") == 0) ums_param_str("alloc", o.alloc);
    ums_param_str("size", o.grid.size);
    ums_param_int("imax", o.grid.imax);
    ums_param_int("jmax", o.grid.jmax);
    ums_param_int("kmax", o.grid.kmax);
    ums_param_int("iterations", o.iterations);
    ums_param_int("repeat", o.repeat);
    return o;
}

HimenoFields himeno_fields_alloc(HimenoGrid g, himeno_alloc_fn alloc_fn)
{
    HimenoFields f;
    float **slot = &f.a0;
    size_t bytes = himeno_points(g) * sizeof(float);
    for (int n = 0; n < HIMENO_NFIELDS; ++n) {
        slot[n] = (float *)alloc_fn(bytes);
        if (!slot[n])
            ums_fail("allocating array %d of %d (%zu bytes each, %.1f GiB in all) failed", n + 1,
                     HIMENO_NFIELDS, bytes, HIMENO_NFIELDS * (double)bytes / (1 << 30));
    }
    return f;
}

void himeno_fields_free(HimenoFields *f, void (*free_fn)(void *))
{
    float **slot = &f->a0;
    for (int n = 0; n < HIMENO_NFIELDS; ++n) {
        free_fn(slot[n]);
        slot[n] = nullptr;
    }
}

void himeno_init(HimenoFields *f, HimenoGrid g)
{
    const size_t sj = g.kmax, si = (size_t)g.jmax * g.kmax;
    const float denom = (float)((g.imax - 1) * (g.imax - 1));
#pragma omp parallel for schedule(static)
    for (int i = 0; i < g.imax; ++i) {
        const float pi = (float)(i * i) / denom;
        for (int j = 0; j < g.jmax; ++j)
            for (int k = 0; k < g.kmax; ++k) {
                size_t x = i * si + j * sj + k;
                f->a0[x] = 1.0f; f->a1[x] = 1.0f; f->a2[x] = 1.0f; f->a3[x] = 1.0f / 6.0f;
                f->b0[x] = 0.0f; f->b1[x] = 0.0f; f->b2[x] = 0.0f;
                f->c0[x] = 1.0f; f->c1[x] = 1.0f; f->c2[x] = 1.0f;
                f->p[x] = pi;
                f->wrk1[x] = 0.0f;
                f->wrk2[x] = pi; // boundary of the swap partner (see himeno.h)
                f->bnd[x] = 1.0f;
            }
    }
}

double himeno_cpu_jacobi(HimenoFields *f, HimenoGrid g, long long iterations, double *gosa_first)
{
    const long sj = g.kmax, si = (long)g.jmax * g.kmax;
    double gosa = 0.0;
    for (long long n = 0; n < iterations; ++n) {
        const float *p = f->p;
        float *wrk2 = f->wrk2;
        gosa = 0.0;
#pragma omp parallel for collapse(2) schedule(static) reduction(+ : gosa)
        for (int i = 1; i < g.imax - 1; ++i)
            for (int j = 1; j < g.jmax - 1; ++j) {
                double g_row = 0.0;
                for (int k = 1; k < g.kmax - 1; ++k) {
                    const size_t x = i * si + j * sj + k;
                    const HimenoCoef q = {f->a0[x], f->a1[x], f->a2[x], f->a3[x], f->b0[x], f->b1[x],
                                          f->b2[x], f->c0[x], f->c1[x], f->c2[x], f->wrk1[x], f->bnd[x]};
                    const float *pc = p + x;
                    auto at = [pc, si, sj](int di, int dj, int dk) { return pc[di * si + dj * sj + dk]; };
                    const float ss = himeno_residual(q, at);
                    g_row += (double)HM_MUL(ss, ss);
                    wrk2[x] = himeno_update(pc[0], ss);
                }
                gosa += g_row;
            }
        if (n == 0 && gosa_first) *gosa_first = gosa;
        float *t = f->p;
        f->p = f->wrk2;
        f->wrk2 = t;
    }
    return gosa;
}

double himeno_checksum(const float *p, HimenoGrid g)
{
    double s = 0.0;
    const long long n = (long long)himeno_points(g);
#pragma omp parallel for reduction(+ : s) schedule(static)
    for (long long x = 0; x < n; ++x) s += p[x];
    return s;
}

double himeno_cpu_copy_bandwidth(size_t bytes)
{
    const size_t n = bytes / sizeof(float);
    float *a = (float *)malloc(n * sizeof(float)), *b = (float *)malloc(n * sizeof(float));
    if (!a || !b) ums_fail("allocating 2 x %zu bytes for the copy benchmark failed", bytes);
#pragma omp parallel for schedule(static)
    for (size_t x = 0; x < n; ++x) { a[x] = 0.0f; b[x] = (float)(x & 1023); }
    enum { kSamples = 7 };
    double t[kSamples];
    for (int s = 0; s < kSamples + 1; ++s) { // sample 0 is the warm-up
        double t0 = ums_now();
#pragma omp parallel for schedule(static)
        for (size_t x = 0; x < n; ++x) a[x] = b[x];
        if (s) t[s - 1] = ums_now() - t0;
    }
    for (size_t x = 0; x < n; x += 4099)
        if (a[x] != (float)(x & 1023)) ums_fail("CPU copy benchmark produced a wrong value at %zu", x);
    free(a);
    free(b);
    return 2.0 * (double)(n * sizeof(float)) / ums_median(t, kSamples);
}

void himeno_report(const HimenoOptions *o, const HimenoRun *r)
{
    const double flops = himeno_flops(o->grid, o->iterations);
    for (long long k = 0; k < o->repeat; ++k) {
        ums_rec rec;
        ums_rec_begin(&rec, "time", r->time_total[k], "s");
        ums_rec_int(&rec, "rep", k);
        ums_rec_num(&rec, "time_loop", r->time_loop[k]);
        ums_rec_emit(&rec);
    }
    std::vector<double> tt(r->time_total, r->time_total + o->repeat),
        tl(r->time_loop, r->time_loop + o->repeat);
    const double t_total = ums_median(tt.data(), tt.size());
    const double t_loop = ums_median(tl.data(), tl.size());
    const double gflops = flops / t_total * 1e-9, gflops_loop = flops / t_loop * 1e-9;
    // The memory-bandwidth roofline: 34 flops per 56 bytes at the measured copy bandwidth.
    const double roof = 34.0 * r->copy_bw / HIMENO_BYTES_PER_POINT * 1e-9;
    ums_result("time", t_total, "s");
    ums_result("time_loop", t_loop, "s");
    ums_result("gflops", gflops, "GFLOPS");
    ums_result("gflops_loop", gflops_loop, "GFLOPS");
    ums_result("mflops", gflops * 1e3, "MFLOPS");
    ums_result("gosa", r->gosa, "1");
    ums_result("gosa_first", r->gosa_first, "1");
    ums_result("p_checksum", r->checksum, "1");
    ums_result("copy_bandwidth", r->copy_bw * 1e-9, "GB/s");
    ums_result("roofline_gflops", roof, "GFLOPS");
    ums_result("pct_roofline", 100.0 * gflops_loop / roof, "%");
    fprintf(stderr, "himeno %s %dx%dx%d n=%lld: %.1f GFLOPS (loop %.1f, %.0f%% of %.0f GFLOPS roofline at %.0f GB/s copy), gosa %.9g\n",
            o->grid.size, o->grid.imax, o->grid.jmax, o->grid.kmax, o->iterations, gflops,
            gflops_loop, 100.0 * gflops_loop / roof, roof, r->copy_bw * 1e-9, r->gosa);
}

int himeno_verify(const HimenoOptions *o, const HimenoRun *r, const float *p_final)
{
    HimenoFields ref = himeno_fields_alloc(o->grid, malloc);
    himeno_init(&ref, o->grid);
    const double gosa_ref = himeno_cpu_jacobi(&ref, o->grid, o->iterations, nullptr);
    const double sum_ref = himeno_checksum(ref.p, o->grid);
    const long long n = (long long)himeno_points(o->grid);
    double max_diff = 0.0;
#pragma omp parallel for reduction(max : max_diff)
    for (long long x = 0; x < n; ++x) {
        double d = fabs((double)p_final[x] - (double)ref.p[x]);
        if (d > max_diff || d != d) max_diff = d != d ? INFINITY : d;
    }
    himeno_fields_free(&ref, free);
    const double gosa_rel = gosa_ref != 0.0 ? fabs(r->gosa - gosa_ref) / fabs(gosa_ref)
                                            : fabs(r->gosa);
    const int pass = gosa_rel <= o->gosa_rtol && max_diff <= o->p_atol;
    ums_rec rec;
    ums_rec_begin_status(&rec, pass ? "verified" : "mismatch");
    ums_rec_bool(&rec, "pass", pass);
    ums_rec_num(&rec, "gosa", r->gosa);
    ums_rec_num(&rec, "gosa_ref", gosa_ref);
    ums_rec_num(&rec, "gosa_rel_err", gosa_rel);
    ums_rec_num(&rec, "gosa_rtol", o->gosa_rtol);
    ums_rec_num(&rec, "p_checksum", r->checksum);
    ums_rec_num(&rec, "p_checksum_ref", sum_ref);
    ums_rec_num(&rec, "p_max_abs_diff", max_diff);
    ums_rec_num(&rec, "p_atol", o->p_atol);
    ums_rec_emit(&rec);
    if (!pass)
        fprintf(stderr, "himeno: verification FAILED: gosa rel err %.3g (tol %.3g), max |p-p_ref| %.3g (tol %.3g)\n",
                gosa_rel, o->gosa_rtol, max_diff, o->p_atol);
    return pass ? 0 : 1;
}

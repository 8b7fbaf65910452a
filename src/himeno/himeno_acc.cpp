// himeno-acc: the OpenACC variant with data directives (copyin once, compute on the
// device, copy p back), built by NVHPC (-acc) or GCC (-fopenacc, nvptx offload).
// Same per-point function as every other variant (routine seq), so --verify is strict.
#include <stdlib.h>
#include <vector>

#ifdef _OPENACC
#include <openacc.h>
#endif

#include "himeno.h"
#include "umstudy/support.h"

namespace {

struct PAt {
    const float *pc;
    long si, sj;
};
#pragma acc routine seq
static inline float p_at(const PAt &a, int di, int dj, int dk) { return a.pc[di * a.si + dj * a.sj + dk]; }
// A functor without captures: compilers place it in device code reliably (GCC 12 does
// not handle lambdas in OpenACC regions).
struct PAccess {
    PAt a;
    float operator()(int di, int dj, int dk) const { return p_at(a, di, dj, dk); }
};

// One sweep on data already present on the device; returns gosa.
double sweep(const HimenoFields &f, HimenoGrid g)
{
    const long sj = g.kmax, si = (long)g.jmax * g.kmax;
    const size_t n = himeno_points(g);
    const float *a0 = f.a0, *a1 = f.a1, *a2 = f.a2, *a3 = f.a3, *b0 = f.b0, *b1 = f.b1, *b2 = f.b2,
                *c0 = f.c0, *c1 = f.c1, *c2 = f.c2, *wrk1 = f.wrk1, *bnd = f.bnd, *p = f.p;
    float *wrk2 = f.wrk2;
    const int imax = g.imax, jmax = g.jmax, kmax = g.kmax;
    double gosa = 0.0;
#pragma acc parallel loop collapse(3) reduction(+ : gosa) \
    present(a0[0:n], a1[0:n], a2[0:n], a3[0:n], b0[0:n], b1[0:n], b2[0:n], c0[0:n], c1[0:n], \
            c2[0:n], wrk1[0:n], bnd[0:n], p[0:n], wrk2[0:n])
    for (int i = 1; i < imax - 1; ++i)
        for (int j = 1; j < jmax - 1; ++j)
            for (int k = 1; k < kmax - 1; ++k) {
                const size_t x = i * si + j * sj + k;
                const HimenoCoef q = {a0[x], a1[x], a2[x], a3[x], b0[x], b1[x],
                                      b2[x], c0[x], c1[x], c2[x], wrk1[x], bnd[x]};
                const PAccess at = {{p + x, si, sj}};
                const float ss = himeno_residual(q, at);
                gosa += (double)HM_MUL(ss, ss);
                wrk2[x] = himeno_update(p[x], ss);
            }
    return gosa;
}

// Copy bandwidth (read + write bytes / s) of an OpenACC copy loop on device arrays.
double acc_copy_bandwidth(size_t bytes)
{
    const size_t n = bytes / sizeof(float);
    std::vector<float> a(n, 0.0f), b(n);
    for (size_t x = 0; x < n; ++x) b[x] = (float)(x & 1023);
    float *pa = a.data(), *pb = b.data();
    enum { kSamples = 7 };
    double t[kSamples];
#pragma acc data copyin(pb[0:n]) copy(pa[0:n])
    {
        for (int s = 0; s <= kSamples; ++s) { // sample 0 is the warm-up
            const double t0 = ums_now();
#pragma acc parallel loop present(pa[0:n], pb[0:n])
            for (size_t x = 0; x < n; ++x) pa[x] = pb[x];
            if (s) t[s - 1] = ums_now() - t0;
        }
    }
    for (size_t x = 0; x < n; x += 4099)
        if (pa[x] != (float)(x & 1023)) ums_fail("OpenACC copy benchmark produced a wrong value at %zu", x);
    return 2.0 * (double)bytes / ums_median(t, kSamples);
}

} // namespace

int main(int argc, char **argv)
{
    HimenoOptions o = himeno_parse(argc, argv, "openacc");
    const HimenoGrid g = o.grid;
#ifdef _OPENACC
    const int ndev = acc_get_num_devices(acc_device_not_host);
#else
    const int ndev = 0;
#endif
    ums_param_str("acc_device", ndev > 0 ? "accelerator" : "host");
    if (ndev == 0 && !o.allow_host)
        ums_unsupported("no OpenACC accelerator is available (the runtime would fall back to the "
                        "host); --allow-host-fallback runs there anyway");

    HimenoRun r = {};
    std::vector<double> t_total(o.repeat), t_loop(o.repeat);
    r.time_total = t_total.data();
    r.time_loop = t_loop.data();
    r.copy_bw = acc_copy_bandwidth((size_t)1 << 28);

    HimenoFields f = himeno_fields_alloc(g, malloc);
    const size_t n = himeno_points(g);
    for (long long rep = 0; rep < o.repeat; ++rep) {
        himeno_init(&f, g);
        float *a0 = f.a0, *a1 = f.a1, *a2 = f.a2, *a3 = f.a3, *b0 = f.b0, *b1 = f.b1, *b2 = f.b2,
              *c0 = f.c0, *c1 = f.c1, *c2 = f.c2, *wrk1 = f.wrk1, *bnd = f.bnd, *p = f.p, *wrk2 = f.wrk2;
        const double t0 = ums_now();
        double t_loop_start = 0.0;
        // Data directives: the "manual" mode of P000 (copy in once, copy results out).
#pragma acc data copyin(a0[0:n], a1[0:n], a2[0:n], a3[0:n], b0[0:n], b1[0:n], b2[0:n], c0[0:n], \
                        c1[0:n], c2[0:n], wrk1[0:n], bnd[0:n]) copy(p[0:n], wrk2[0:n])
        {
            t_loop_start = ums_now();
            for (long long it = 0; it < o.iterations; ++it) {
                r.gosa = sweep(f, g); // the reduction returns to the host: each sweep is complete
                if (it == 0) r.gosa_first = r.gosa;
                float *t = f.p;
                f.p = f.wrk2;
                f.wrk2 = t;
            }
            t_loop[rep] = ums_now() - t_loop_start;
        }
        t_total[rep] = ums_now() - t0;
    }
    r.checksum = himeno_checksum(f.p, g);
    himeno_report(&o, &r);
    const int rc = o.verify ? himeno_verify(&o, &r, f.p) : 0;
    himeno_fields_free(&f, free);
    return rc;
}

// Checks the shared stencil against an independent, literal transcription of RIKEN's
// himenoBMTxps.c jacobi() (copy-back, float gosa, its own loops), on odd and named
// sizes: p must be bit-identical and gosa must agree.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>

#include "himeno.h"

namespace {

struct Original {
    int imax, jmax, kmax;
    std::vector<float> a[4], b[3], c[3], p, wrk1, wrk2, bnd;
    size_t at(int i, int j, int k) const { return ((size_t)i * jmax + j) * kmax + k; }
    explicit Original(HimenoGrid g) : imax(g.imax), jmax(g.jmax), kmax(g.kmax)
    {
        const size_t n = (size_t)imax * jmax * kmax;
        for (auto &v : a) v.assign(n, 0.0f);
        for (auto &v : b) v.assign(n, 0.0f);
        for (auto &v : c) v.assign(n, 0.0f);
        p.assign(n, 0.0f); wrk1.assign(n, 0.0f); wrk2.assign(n, 0.0f); bnd.assign(n, 0.0f);
        for (int i = 0; i < imax; i++)          // initmt()
            for (int j = 0; j < jmax; j++)
                for (int k = 0; k < kmax; k++) {
                    a[0][at(i, j, k)] = 1.0; a[1][at(i, j, k)] = 1.0; a[2][at(i, j, k)] = 1.0;
                    a[3][at(i, j, k)] = 1.0 / 6.0;
                    b[0][at(i, j, k)] = 0.0; b[1][at(i, j, k)] = 0.0; b[2][at(i, j, k)] = 0.0;
                    c[0][at(i, j, k)] = 1.0; c[1][at(i, j, k)] = 1.0; c[2][at(i, j, k)] = 1.0;
                    p[at(i, j, k)] = (float)(i * i) / (float)((imax - 1) * (imax - 1));
                    wrk1[at(i, j, k)] = 0.0; bnd[at(i, j, k)] = 1.0;
                }
    }
    // Returns the original's float gosa; also the same sum in double.
    float jacobi(int nn, double *gosa_double)
    {
        const float omega = 0.8f;
        float gosa = 0.0f, s0, ss;
        for (int n = 0; n < nn; ++n) {
            gosa = 0.0f;
            *gosa_double = 0.0;
            for (int i = 1; i < imax - 1; i++)
                for (int j = 1; j < jmax - 1; j++)
                    for (int k = 1; k < kmax - 1; k++) {
                        s0 = a[0][at(i, j, k)] * p[at(i + 1, j, k)] + a[1][at(i, j, k)] * p[at(i, j + 1, k)] +
                             a[2][at(i, j, k)] * p[at(i, j, k + 1)] +
                             b[0][at(i, j, k)] * (p[at(i + 1, j + 1, k)] - p[at(i + 1, j - 1, k)] -
                                                  p[at(i - 1, j + 1, k)] + p[at(i - 1, j - 1, k)]) +
                             b[1][at(i, j, k)] * (p[at(i, j + 1, k + 1)] - p[at(i, j - 1, k + 1)] -
                                                  p[at(i, j + 1, k - 1)] + p[at(i, j - 1, k - 1)]) +
                             b[2][at(i, j, k)] * (p[at(i + 1, j, k + 1)] - p[at(i - 1, j, k + 1)] -
                                                  p[at(i + 1, j, k - 1)] + p[at(i - 1, j, k - 1)]) +
                             c[0][at(i, j, k)] * p[at(i - 1, j, k)] + c[1][at(i, j, k)] * p[at(i, j - 1, k)] +
                             c[2][at(i, j, k)] * p[at(i, j, k - 1)] + wrk1[at(i, j, k)];
                        ss = (s0 * a[3][at(i, j, k)] - p[at(i, j, k)]) * bnd[at(i, j, k)];
                        gosa += ss * ss;
                        *gosa_double += (double)(ss * ss);
                        wrk2[at(i, j, k)] = p[at(i, j, k)] + omega * ss;
                    }
            for (int i = 1; i < imax - 1; ++i)
                for (int j = 1; j < jmax - 1; ++j)
                    for (int k = 1; k < kmax - 1; ++k) p[at(i, j, k)] = wrk2[at(i, j, k)];
        }
        return gosa;
    }
};

int check(HimenoGrid g, int iterations)
{
    Original orig(g);
    double orig_gosa_d = 0.0;
    const float orig_gosa_f = orig.jacobi(iterations, &orig_gosa_d);

    HimenoFields f = himeno_fields_alloc(g, malloc);
    himeno_init(&f, g);
    const double gosa = himeno_cpu_jacobi(&f, g, iterations, nullptr);
    size_t mismatches = 0;
    for (size_t x = 0; x < himeno_points(g); ++x)
        if (f.p[x] != orig.p[x]) ++mismatches;
    himeno_fields_free(&f, free);

    const double rel_d = fabs(gosa - orig_gosa_d) / orig_gosa_d;
    const double rel_f = fabs(gosa - orig_gosa_f) / orig_gosa_d;
    // Double sums of identical terms differ only by summation order (~1e-15 per
    // term); the original's float running sum may be off by ~n*eps_float.
    const double n_terms = himeno_interior(g);
    const int ok = mismatches == 0 && rel_d < 1e-12 && rel_f < 2.0 * n_terms * 6e-8 && gosa > 0;
    printf("%s %dx%dx%d n=%d: p mismatches %zu, gosa %.12g vs original %.12g (double) / %.9g (float): %s\n",
           g.size, g.imax, g.jmax, g.kmax, iterations, mismatches, gosa, orig_gosa_d, orig_gosa_f,
           ok ? "ok" : "FAIL");
    return ok ? 0 : 1;
}

} // namespace

int main()
{
    int fails = 0;
    fails += check(HimenoGrid{32, 32, 64, "XS"}, 12);
    fails += check(HimenoGrid{7, 11, 13, "custom"}, 5); // odd, non-cubic, tiny
    fails += check(HimenoGrid{3, 3, 3, "custom"}, 3);   // one interior point
    fails += check(HimenoGrid{64, 40, 33, "custom"}, 7);
    return fails ? 1 : 0;
}

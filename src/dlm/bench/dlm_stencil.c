/* dlm-stencil: P004 §4.1, a 7-point stencil with spatial and temporal blocking over
 * DLM arrays (fig. 4.1): the grid (two nx x ny x nz arrays of doubles, old and new)
 * lives in DLM; two local blocks that fit in the compute node hold one slab of
 * `slab` z-planes plus `tblock` halo planes on each side.  Per slab: copy it in from
 * the old grid (page faults, in parallel), run tblock time steps locally (the valid
 * region shrinks by one plane per step), copy the slab's planes out to the new grid.
 * Each pass over the grid advances tblock steps; the grids swap roles between passes.
 *
 *   u'(i,j,k) = c0 u(i,j,k) + c1 (u(i±1,j,k) + u(i,j±1,k) + u(i,j,k±1))   (8 flops)
 *
 * Sizes come as ratios of the problem (both grids) to the compute capacity (0.5 ..
 * 4, the paper's 64..512 GiB over 120 GiB): nz follows from the ratio and the plane.
 * Effective MFLOPS = 8 (nx-2)(ny-2)(nz-2) steps / time (redundant halo work is not
 * counted).  --check compares the result with a plain sweep in local memory (small
 * sizes only): the arithmetic is the same, so the results must be bit-identical. */
#include "dlm_bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static const double C0 = 0.4, C1 = 0.1;
static size_t NX, NY;

static double initial(size_t i, size_t j, size_t k)
{
    return sin(0.1 * (double)i) + cos(0.07 * (double)j) + 0.01 * (double)(k % 97);
}

/* One step on planes [k_lo, k_hi) of a block whose plane 0 is grid plane `base`;
 * boundary points (grid faces) are copied. */
static void step(const double *src, double *dst, size_t base, size_t k_lo, size_t k_hi, size_t nz)
{
    const size_t P = NX * NY;
#pragma omp parallel for collapse(2) schedule(static)
    for (size_t k = k_lo; k < k_hi; ++k)
        for (size_t j = 0; j < NY; ++j) {
            size_t gk = k;
            const double *s = src + (k - base) * P + j * NX;
            double *d = dst + (k - base) * P + j * NX;
            if (gk == 0 || gk == nz - 1 || j == 0 || j == NY - 1) {
                memcpy(d, s, NX * sizeof *d);
                continue;
            }
            d[0] = s[0];
            for (size_t i = 1; i < NX - 1; ++i)
                d[i] = C0 * s[i] + C1 * (s[i - 1] + s[i + 1] + s[i - NX] + s[i + NX] + s[i - P] + s[i + P]);
            d[NX - 1] = s[NX - 1];
        }
}

/* Copies planes [k0, k1) between a DLM grid and a local block starting at plane base:
 * one plane per iteration, so the threads fault on different pages at once. */
static void copy_planes(double *grid, double *block, size_t base, size_t k0, size_t k1, int in)
{
    const size_t P = NX * NY;
#pragma omp parallel for schedule(static)
    for (size_t k = k0; k < k1; ++k) {
        if (in)
            memcpy(block + (k - base) * P, grid + k * P, P * sizeof *grid);
        else
            memcpy(grid + k * P, block + (k - base) * P, P * sizeof *grid);
    }
}

/* steps time steps (a multiple of tb) on grid a (b is scratch); returns the grid
 * holding the result. */
static double *run(double *a, double *b, size_t nz, size_t slab, size_t tb, long long steps, double *blk0,
                   double *blk1)
{
    for (long long done = 0; done < steps; done += (long long)tb) {
        for (size_t k0 = 0; k0 < nz; k0 += slab) {
            size_t k1 = k0 + slab < nz ? k0 + slab : nz;
            size_t lo = k0 > tb ? k0 - tb : 0, hi = k1 + tb < nz ? k1 + tb : nz;
            copy_planes(a, blk0, lo, lo, hi, 1);
            memcpy(blk1, blk0, (hi - lo) * NX * NY * sizeof *blk0);
            double *s = blk0, *d = blk1;
            for (size_t t = 1; t <= tb; ++t) {
                /* Valid after t steps: shrinks by t from an inner edge, not at a face. */
                size_t vlo = lo == 0 ? 0 : lo + t, vhi = hi == nz ? nz : hi - t;
                step(s, d, lo, vlo, vhi, nz);
                double *x = s;
                s = d;
                d = x;
            }
            copy_planes(b, s, lo, k0, k1, 0);
        }
        double *x = a;
        a = b;
        b = x;
    }
    return a;
}

int main(int argc, char **argv)
{
    dlm_bench_args a = {0};
    const char *ratios = "0.5,1,2,4";
    long long nx = 256, ny = 256, slab = 16, tblock = 4, steps = 8;
    int check = 0;
    const ums_arg args[] = {
        {"ratios", UMS_ARG_STRING, &ratios, "problem (both grids) / compute capacity, comma-separated (default 0.5,1,2,4)", 0, -1, NULL},
        {"nx", UMS_ARG_INT, &nx, "plane width (default 256)", 3, 1e6, NULL},
        {"ny", UMS_ARG_INT, &ny, "plane height (default 256)", 3, 1e6, NULL},
        {"slab", UMS_ARG_INT, &slab, "z-planes per spatial block (default 16)", 1, 1e6, NULL},
        {"tblock", UMS_ARG_INT, &tblock, "time steps per pass, the temporal block (default 4)", 1, 1000, NULL},
        {"steps", UMS_ARG_INT, &steps, "time steps, a multiple of --tblock (default 8)", 1, 1e6, NULL},
        {"check", UMS_ARG_FLAG, &check, "compare with a plain sweep in local memory (small sizes)", 0, -1, NULL},
        DLM_BENCH_ARGS(a),
    };
    dlm_bench_parse(argc, argv,
                    "P004 7-point stencil with spatial + temporal blocking over DLM grids, Effective MFLOPS "
                    "vs problem/capacity ratio; JSON lines on stdout.",
                    args, sizeof args / sizeof args[0]);
    if (steps % tblock)
        ums_usage_fail("--steps %lld is not a multiple of --tblock %lld", steps, tblock);
    double ratio[32];
    int nratio = dlm_bench_ratios(ratios, ratio, 32);
    int threads[1] = {dlm_bench_thread_count(&a)};
    dlm_bench_start("dlm-stencil", &argc, &argv, &a, 1 << 20);
    const dlm_config *c = dlm_get_config();
    NX = (size_t)nx;
    NY = (size_t)ny;
    const size_t P = NX * NY;
    ums_param_int("nx", nx);
    ums_param_int("ny", ny);
    ums_param_int("slab", slab);
    ums_param_int("tblock", tblock);
    ums_param_int("steps", steps);
    ums_param_int("threads", threads[0]);
    size_t tb = (size_t)tblock, maxplanes = (size_t)slab + 2 * tb;
    double *blk0 = malloc(maxplanes * P * sizeof(double)), *blk1 = malloc(maxplanes * P * sizeof(double));
    if (!blk0 || !blk1)
        dlm_bench_fail("cannot allocate the local blocks (%zu planes of %zu bytes)", maxplanes, P * 8);
    size_t nzmax = 0;
    for (int r = 0; r < nratio; ++r) {
        size_t nz = (size_t)(ratio[r] * (double)c->capacity / (2.0 * (double)P * sizeof(double)));
        if (nz < 3)
            dlm_bench_usage_fail("ratio %g of a %zu-byte capacity gives %zu planes of %zux%zu: too few (>= 3)",
                                 ratio[r], c->capacity, nz, NX, NY);
        nzmax = nz > nzmax ? nz : nzmax;
    }
    dlm_bench_check_fits(nzmax * P * sizeof(double), 2);
    double base_mflops = 0;
    int all_ok = 1;
    for (int r = 0; r < nratio; ++r) {
        size_t nz = (size_t)(ratio[r] * (double)c->capacity / (2.0 * (double)P * sizeof(double)));
        size_t bytes = nz * P * sizeof(double);
        double *ga = dlm_bench_alloc(bytes), *gb = dlm_bench_alloc(bytes);
#pragma omp parallel for schedule(static)
        for (size_t k = 0; k < nz; ++k)
            for (size_t j = 0; j < NY; ++j)
                for (size_t i = 0; i < NX; ++i)
                    ga[(k * NY + j) * NX + i] = initial(i, j, k);
        dlm_stats_reset();
        double t0 = ums_now();
        double *res = run(ga, gb, nz, (size_t)slab, tb, steps, blk0, blk1);
        double secs = ums_now() - t0;
        double mflops = 8.0 * (double)(NX - 2) * (double)(NY - 2) * (double)(nz - 2) * (double)steps / secs / 1e6;
        if (r == 0)
            base_mflops = mflops;
        int verified = -1;
        if (check) {
            double *u = malloc(bytes), *v = malloc(bytes), *got = malloc(bytes);
            if (!u || !v || !got)
                dlm_bench_usage_fail("--check needs 3 x %zu bytes of local memory", bytes);
            for (size_t k = 0; k < nz; ++k)
                for (size_t j = 0; j < NY; ++j)
                    for (size_t i = 0; i < NX; ++i)
                        u[(k * NY + j) * NX + i] = initial(i, j, k);
            for (long long s = 0; s < steps; ++s) {
                step(u, v, 0, 0, nz, nz);
                double *x = u;
                u = v;
                v = x;
            }
            dlm_get(res, got, bytes);
            verified = memcmp(got, u, bytes) == 0;
            all_ok &= verified;
            free(u);
            free(v);
            free(got);
        }
        ums_rec rec;
        ums_rec_begin(&rec, "mflops", mflops, "MFLOPS");
        ums_rec_num(&rec, "ratio", ratio[r]);
        ums_rec_int(&rec, "nz", (long long)nz);
        ums_rec_int(&rec, "problem_bytes", (long long)(2 * bytes));
        ums_rec_num(&rec, "seconds", secs);
        ums_rec_num(&rec, "retention", mflops / base_mflops);
        ums_rec_num(&rec, "base_ratio", ratio[0]);
        if (verified >= 0)
            ums_rec_bool(&rec, "verified", verified);
        ums_rec_emit(&rec);
        dlm_bench_emit_stats("stencil", threads[0], ratio[r], secs);
        fprintf(stderr, "dlm-stencil %-4s ratio %4.2f (nz %zu, %.1f MiB): %9.1f MFLOPS, %5.1f%% of ratio %g%s\n",
                c->engine, ratio[r], nz, 2.0 * (double)bytes / 1048576.0, mflops, 100 * mflops / base_mflops,
                ratio[0], verified < 0 ? "" : verified ? ", verified" : ", MISMATCH");
        dlm_free(gb);
        dlm_free(ga);
    }
    free(blk0);
    free(blk1);
    dlm_exit(all_ok ? 0 : UMS_EXIT_FAILED);
}

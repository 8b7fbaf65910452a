// remd host side: initial state, CPU reference, ladder, exchange, CPU backend.
#include "remd_host.h"

#include <math.h>
#include <string.h>

#include "umstudy/support.h"

namespace {
enum : uint64_t { kStreamVelocity = 1, kStreamExchange = 2 };
}

void RemdState::resize(int nrep_, int natom_, int mexch_)
{
    nrep = nrep_, natom = natom_, mexch = mexch_;
    const size_t n = (size_t)nrep * natom * 3;
    pos.assign(n, 0.0f);
    vel.assign(n, 0.0f);
    frc.assign(n, 0.0f);
    tcur.assign(nrep, 0.0f);
    energy.assign((size_t)nrep * mexch, 0.0f);
}

double remd_kinetic(const RemdSystem &s, const float *v)
{
    double sum = 0.0;
    for (int k = 0; k < 3 * s.natom; ++k) sum += (double)v[k] * v[k];
    return 0.5 * REMD_MASS * sum;
}

void remd_init_replica(const RemdSystem &s, uint64_t seed, int r, double t, float *x, float *v)
{
    // FCC: 4 atoms per cubic cell, shifted by a quarter cell so no atom sits on a face.
    // Atom order: the 4 atoms of a cell are consecutive, and with an even a so are the
    // 32 atoms of each 2x2x2 block of cells, so the fast kernel's warps and its
    // neighbour tests work on compact groups (remd.h, RemdBox).
    static const double basis[4][3] = {{0, 0, 0}, {0.5, 0.5, 0}, {0.5, 0, 0.5}, {0, 0.5, 0.5}};
    const double cell = (double)s.box / s.cells;
    const int blk = s.cells % 2 == 0 ? 2 : 1, nb = s.cells / blk;
    int i = 0;
    for (int bx = 0; bx < nb; ++bx)
        for (int by = 0; by < nb; ++by)
            for (int bz = 0; bz < nb; ++bz)
                for (int ux = 0; ux < blk; ++ux)
                    for (int uy = 0; uy < blk; ++uy)
                        for (int uz = 0; uz < blk; ++uz)
                            for (int b = 0; b < 4; ++b, ++i) {
                                const int c[3] = {bx * blk + ux, by * blk + uy, bz * blk + uz};
                                for (int d = 0; d < 3; ++d) x[3 * i + d] = (float)((c[d] + basis[b][d] + 0.25) * cell);
                            }
    // Box-Muller pairs; then zero momentum and the exact kinetic energy of t.
    const double sd = sqrt(REMD_KB * t / REMD_MASS);
    double mean[3] = {0, 0, 0};
    std::vector<double> g(3 * (size_t)s.natom);
    for (size_t k = 0; k < g.size(); k += 2) {
        const double u1 = remd_uniform(seed, kStreamVelocity + 16 * (uint64_t)r, k);
        const double u2 = remd_uniform(seed, kStreamVelocity + 16 * (uint64_t)r, k + 1);
        const double rad = sqrt(-2.0 * log(u1));
        g[k] = sd * rad * cos(2 * M_PI * u2);
        if (k + 1 < g.size()) g[k + 1] = sd * rad * sin(2 * M_PI * u2);
    }
    for (size_t k = 0; k < g.size(); ++k) mean[k % 3] += g[k] / s.natom;
    double ke = 0.0;
    for (size_t k = 0; k < g.size(); ++k) {
        g[k] -= mean[k % 3];
        ke += 0.5 * REMD_MASS * g[k] * g[k];
    }
    const double scale = ke > 0 ? sqrt(0.5 * s.ndof * REMD_KB * t / ke) : 0.0;
    for (size_t k = 0; k < g.size(); ++k) v[k] = (float)(g[k] * scale);
}

double remd_cpu_forces(const RemdSystem &s, const float *x, float *f)
{
    // Atoms in parallel where this is not already inside a parallel loop over replicas
    // (verification), the energy summed in atom order so every thread count agrees.
    std::vector<float> ui(s.natom);
#pragma omp parallel for schedule(static) if (s.natom >= 512)
    for (int i = 0; i < s.natom; ++i) {
        float fx = 0, fy = 0, fz = 0, u = 0;
        const float xi = x[3 * i], yi = x[3 * i + 1], zi = x[3 * i + 2];
        for (int j = 0; j < s.natom; ++j)
            remd_pair(xi, yi, zi, x[3 * j], x[3 * j + 1], x[3 * j + 2], s, fx, fy, fz, u);
        if (f) {
            f[3 * i] = fx;
            f[3 * i + 1] = fy;
            f[3 * i + 2] = fz;
        }
        ui[i] = u;
    }
    double total = 0.0;
    for (float u : ui) total += u;
    return total;
}

double remd_cpu_replica(const RemdSystem &s, float *x, float *v, float *f, float t0, int flag,
                        float *tcur, int nsteps, int init_forces, float *U)
{
    const int n3 = 3 * s.natom;
    if (flag && *tcur > 0.0f) {
        const float scale = sqrtf(t0 / *tcur);
        for (int k = 0; k < n3; ++k) v[k] *= scale;
    }
    *tcur = t0;
    if (init_forces) remd_cpu_forces(s, x, f);
    double ke = remd_kinetic(s, v);
    for (int step = 0; step < nsteps; ++step) {
        for (int k = 0; k < n3; ++k) {
            v[k] = remd_kick(v[k], f[k], s);
            x[k] = remd_drift(x[k], v[k], s);
        }
        const double u = remd_cpu_forces(s, x, f);
        for (int k = 0; k < n3; ++k) v[k] = remd_kick(v[k], f[k], s);
        ke = remd_kinetic(s, v);
        const float lambda = remd_berendsen(ke, t0, s);
        if (lambda != 1.0f) {
            for (int k = 0; k < n3; ++k) v[k] *= lambda;
            ke *= (double)lambda * lambda;
        }
        U[step] = (float)u;
    }
    return ke;
}

void RemdLadder::init(int nrep, double tmin, double tmax, bool geometric)
{
    temp.resize(nrep);
    for (int k = 0; k < nrep; ++k) {
        const double f = nrep > 1 ? (double)k / (nrep - 1) : 0.0;
        temp[k] = geometric ? tmin * pow(tmax / tmin, f) : tmin + (tmax - tmin) * f;
    }
    rep_at.resize(nrep);
    index_of.resize(nrep);
    for (int k = 0; k < nrep; ++k) rep_at[k] = index_of[k] = k;
    tries.assign(nrep > 1 ? nrep - 1 : 0, 0);
    accepts.assign(tries.size(), 0);
}

int remd_exchange(RemdLadder &L, const double *U, uint64_t seed, long long iter, int *flag)
{
    const int nrep = (int)L.temp.size();
    for (int r = 0; r < nrep; ++r) flag[r] = 0;
    int accepted = 0;
    for (int k = (int)(iter & 1); k + 1 < nrep; k += 2) {
        const int a = L.rep_at[k], b = L.rep_at[k + 1];
        const double delta = (1.0 / (REMD_KB * L.temp[k]) - 1.0 / (REMD_KB * L.temp[k + 1])) * (U[a] - U[b]);
        ++L.tries[k];
        if (delta >= 0.0 ||
            remd_uniform(seed, kStreamExchange, (uint64_t)iter * (uint64_t)nrep + (uint64_t)k) < exp(delta)) {
            ++L.accepts[k];
            ++accepted;
            L.rep_at[k] = b, L.rep_at[k + 1] = a;
            L.index_of[a] = k + 1, L.index_of[b] = k;
            flag[a] = flag[b] = 1;
        }
    }
    return accepted;
}

// ---- CPU backend: the same host loop, the replicas integrated by the reference ----

namespace {

struct CpuBackend : RemdBackend {
    RemdSystem s;
    int mexch;
    RemdState *st = nullptr;
    std::vector<float> temp, ubuf; // ubuf: the "device" U[nrep][steps] of the last run
    std::vector<int> flag;
    double t_launch = 0;

    CpuBackend(const RemdSystem &s_, const RemdOptions &o) : s(s_), mexch(o.mexch) {}
    const char *name() const override { return "cpu"; }
    int devices() const override { return 1; }

    void run(int steps, int init_forces)
    {
        const int nrep = st->nrep;
        ubuf.resize((size_t)nrep * (steps > 0 ? steps : 1));
#pragma omp parallel for schedule(dynamic)
        for (int r = 0; r < nrep; ++r)
            remd_cpu_replica(s, st->x(r), st->v(r), st->f(r), temp[r], flag[r], &st->tcur[r], steps,
                             init_forces, ubuf.data() + (size_t)r * steps);
    }
    void setup(RemdState &state, const float *t, int steps) override
    {
        st = &state;
        temp.assign(t, t + st->nrep);
        flag.assign(st->nrep, 0);
        run(steps, 1);
    }
    void upload(const float *t, const int *f) override
    {
        temp.assign(t, t + st->nrep);
        flag.assign(f, f + st->nrep);
    }
    void launch() override
    {
        const double t0 = ums_now();
        run(mexch, 0);
        t_launch = ums_now() - t0;
    }
    double download(float *U) override
    {
        memcpy(U, ubuf.data(), (size_t)st->nrep * mexch * sizeof(float));
        return t_launch;
    }
    void fetch(int r, float *x, float *v, float *f) override
    {
        const size_t n = (size_t)3 * st->natom * sizeof(float);
        memcpy(x, st->x(r), n);
        memcpy(v, st->v(r), n);
        memcpy(f, st->f(r), n);
    }
};

} // namespace

RemdBackend *remd_cpu_backend(const RemdSystem &s, const RemdOptions &o) { return new CpuBackend(s, o); }

// remd host side: initial state, CPU reference, ladder, exchange, CPU backend.
#include "remd_host.h"

#include <math.h>
#include <string.h>

#include <algorithm>

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
    struct Dev {
        int nloc = 0;
        std::vector<float> pos, vel, frc, tcur, temp, U;
        std::vector<int> flag;
        double seconds = 0;
    };
    RemdSystem s;
    int mexch;
    std::vector<Dev> dev;

    CpuBackend(const RemdSystem &s_, const RemdOptions &o, int ndev) : s(s_), mexch((int)o.mexch), dev(ndev) {}
    const char *name() const override { return "cpu"; }
    int devices() const override { return (int)dev.size(); }

    // The kernels' work on the CPU: replicas `slots` of g (all when null), into U with
    // `steps` energies per replica.
    void run(Dev &g, const int *slots, int count, int steps, int init_forces, float *U, float *x, float *v,
             float *f, float *tcur, const float *temp, const int *flag)
    {
        const size_t n3 = 3 * (size_t)s.natom;
#pragma omp parallel for schedule(dynamic)
        for (int i = 0; i < count; ++i) {
            const int j = slots ? slots[i] : i;
            remd_cpu_replica(s, x + i * n3, v + i * n3, f + i * n3, temp[j], flag ? flag[j] : 0, &tcur[i], steps,
                             init_forces, U + (size_t)i * steps);
        }
        (void)g;
    }
    void setup(int d, int nloc, const float *x, const float *v, const float *tcur, const float *temp,
               int steps) override
    {
        Dev &g = dev[d];
        const size_t n3 = 3 * (size_t)s.natom;
        g.nloc = nloc;
        g.pos.assign(x, x + nloc * n3);
        g.vel.assign(v, v + nloc * n3);
        g.frc.assign(nloc * n3, 0.0f);
        g.tcur.assign(tcur, tcur + nloc);
        g.temp.assign(temp, temp + nloc);
        g.flag.assign(nloc, 0);
        g.U.assign((size_t)nloc * std::max(mexch, std::max(steps, 1)), 0.0f);
        run(g, nullptr, nloc, steps, 1, g.U.data(), g.pos.data(), g.vel.data(), g.frc.data(), g.tcur.data(),
            g.temp.data(), g.flag.data());
    }
    void setup_wait(int) override {}
    void upload(int d, const void *temp_flag, int) override
    {
        Dev &g = dev[d];
        const float *t = static_cast<const float *>(temp_flag);
        g.temp.assign(t, t + g.nloc);
        const int *f = reinterpret_cast<const int *>(t + g.nloc);
        g.flag.assign(f, f + g.nloc);
    }
    void launch(int d) override
    {
        Dev &g = dev[d];
        const double t0 = ums_now();
        run(g, nullptr, g.nloc, mexch, 0, g.U.data(), g.pos.data(), g.vel.data(), g.frc.data(), g.tcur.data(),
            g.temp.data(), g.flag.data());
        g.seconds = ums_now() - t0;
    }
    double download(int d, float *U) override
    {
        memcpy(U, dev[d].U.data(), (size_t)dev[d].nloc * mexch * sizeof(float));
        return dev[d].seconds;
    }
    void fetch(int d, int slot, float *x, float *v, float *f) override
    {
        const size_t n3 = 3 * (size_t)s.natom, off = slot * n3;
        memcpy(x, dev[d].pos.data() + off, n3 * sizeof(float));
        memcpy(v, dev[d].vel.data() + off, n3 * sizeof(float));
        memcpy(f, dev[d].frc.data() + off, n3 * sizeof(float));
    }
    double time_copies(int d, const std::vector<int> &slots, int nsteps) override
    {
        Dev &g = dev[d];
        const size_t n3 = 3 * (size_t)s.natom, m = slots.size();
        std::vector<float> x(m * n3), v(m * n3), f(m * n3), tc(m), U(m * std::max(nsteps, 1));
        for (size_t i = 0; i < m; ++i) {
            memcpy(&x[i * n3], &g.pos[slots[i] * n3], n3 * sizeof(float));
            memcpy(&v[i * n3], &g.vel[slots[i] * n3], n3 * sizeof(float));
            memcpy(&f[i * n3], &g.frc[slots[i] * n3], n3 * sizeof(float));
            tc[i] = g.tcur[slots[i]];
        }
        const double t0 = ums_now();
        run(g, slots.data(), (int)m, nsteps, 0, U.data(), x.data(), v.data(), f.data(), tc.data(), g.tcur.data(),
            nullptr);
        return ums_now() - t0;
    }
    RemdKernelInfo kernel_info(int) override { return RemdKernelInfo(); }
    std::vector<RemdTuneTrial> tune(int, int) override
    {
        ums_usage_fail("--tune sweeps the GPU kernel's threads per block; the CPU reference has none");
    }
    void params() const override {}
    void pin(void *, size_t) override {}
};

} // namespace

RemdBackend *remd_cpu_backend(const RemdSystem &s, const RemdOptions &o, int ndev)
{
    return new CpuBackend(s, o, ndev);
}

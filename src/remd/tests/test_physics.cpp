// Physics of the shared functions (remd.h, remd_host.cpp), on the CPU reference:
// box sizes of P003, Newton's third law (forces sum to zero), force = -dU/dx, NVE energy
// drift (and that a too-long time step breaks the same bound), the Berendsen coupling
// and the velocity rescaling on exchange.
#include <math.h>
#include <stdio.h>

#include <algorithm>
#include <vector>

#include "remd_host.h"

namespace {

int failures = 0;

void expect(bool ok, const char *what, double got, double bound)
{
    printf("%-58s %12.5g (bound %.5g): %s\n", what, got, bound, ok ? "ok" : "FAIL");
    failures += !ok;
}

struct Replica {
    RemdSystem s;
    std::vector<float> x, v, f, U;
    float tcur;
    Replica(int cells, double dt_fs, double tau_ps, double t, uint64_t seed = 7)
        : s(remd_system(cells, dt_fs * 1e-3, tau_ps)), x(3 * s.natom), v(3 * s.natom), f(3 * s.natom), tcur((float)t)
    {
        remd_init_replica(s, seed, 0, t, x.data(), v.data());
        remd_cpu_forces(s, x.data(), f.data());
    }
    // Runs n steps at t0; returns U after the last one.
    double run(int n, float t0)
    {
        U.resize(n > 0 ? n : 1);
        remd_cpu_replica(s, x.data(), v.data(), f.data(), t0, 0, &tcur, n, 0, U.data());
        return n > 0 ? U[n - 1] : remd_cpu_forces(s, x.data(), nullptr);
    }
    double temperature() const { return 2.0 * remd_kinetic(s, v.data()) / (s.ndof * REMD_KB); }
};

// Largest |E(t) - E(0)| / KE(0) over an NVE run (checked every 10 steps), after 5 ps
// with the thermostat: leaving the lattice moves thousands of pairs of the 7th FCC shell
// (1.017 nm) across the 3-sigma cutoff (1.0215 nm), and each crossing steps the truncated
// potential by U(rc) = -0.0055 eps; that one-off shift is the model's, not the integrator's.
double nve_drift(double dt_fs, int steps)
{
    Replica r(4, 5.0, 0.1, 100.0);
    r.run(1000, 100.0f);
    r.s = remd_system(4, dt_fs * 1e-3, 0.0);
    const double ke0 = remd_kinetic(r.s, r.v.data());
    const double e0 = remd_cpu_forces(r.s, r.x.data(), nullptr) + ke0;
    double worst = 0.0;
    for (int done = 0; done < steps; done += 10) {
        const double e = r.run(10, 100.0f) + remd_kinetic(r.s, r.v.data());
        worst = std::max(worst, fabs(e - e0) / ke0);
    }
    return worst;
}

} // namespace

int main()
{
    // P003: box edge 2.18 nm (256 atoms) and 4.35 nm (2,048) at 1.65 g/cm^3.
    expect(fabs(remd_box_nm(256) - 2.18) < 0.005, "box of 256 atoms = 2.18 nm", remd_box_nm(256), 2.18);
    expect(fabs(remd_box_nm(2048) - 4.35) < 0.005, "box of 2,048 atoms = 4.35 nm", remd_box_nm(2048), 4.35);

    // Off the lattice (on it every force vanishes by symmetry): 100 steps at 250 K.
    Replica hot(4, 5.0, 0.5, 250.0);
    hot.run(100, 250.0f);
    remd_cpu_forces(hot.s, hot.x.data(), hot.f.data());
    double sum[3] = {0, 0, 0}, mag = 0.0, fmax = 0.0;
    for (int i = 0; i < hot.s.natom; ++i)
        for (int c = 0; c < 3; ++c) {
            sum[c] += hot.f[3 * i + c];
            mag += fabs(hot.f[3 * i + c]);
            fmax = fmax > fabs(hot.f[3 * i + c]) ? fmax : fabs(hot.f[3 * i + c]);
        }
    const double net = sqrt(sum[0] * sum[0] + sum[1] * sum[1] + sum[2] * sum[2]);
    expect(fmax > 10.0, "largest force component (kJ/mol/nm) is not ~0", fmax, 10.0);
    expect(net <= 1e-5 * mag, "|sum of forces| / sum |f| (Newton's third law)", net / mag, 1e-5);

    // Force = -dU/dx by central differences on a few atoms and directions.
    double worst = 0.0;
    for (int i : {0, 17, 101, 255})
        for (int c = 0; c < 3; ++c) {
            const double h = 1e-4;
            std::vector<float> xp = hot.x, xm = hot.x;
            xp[3 * i + c] += (float)h;
            xm[3 * i + c] -= (float)h;
            const double dh = (double)xp[3 * i + c] - xm[3 * i + c]; // the float step actually taken
            const double grad = (remd_cpu_forces(hot.s, xp.data(), nullptr) - remd_cpu_forces(hot.s, xm.data(), nullptr)) / dh;
            worst = fmax > 0 ? std::max(worst, fabs(-grad - hot.f[3 * i + c]) / fmax) : worst;
        }
    expect(worst < 0.01, "max |F + dU/dx| / max |F| (finite differences)", worst, 0.01);

    // The fast kernel's neighbour test never drops a pair inside the cutoff: every such
    // pair's (32-atom tile of i, 4-atom cell of j) passes remd_boxes_near, in the hot
    // 256-atom replica above and in a 2,048-atom one after 0.5 ps at 250 K (atoms have
    // left their lattice sites); it keeps about a third of the tile-cell pairs (all pairs: 1).
    auto check_pruning = [](const RemdSystem &s, const std::vector<float> &x, const char *what, double max_kept) {
        const int ntile = (s.natom + 31) / 32, ncell = s.natom / 4;
        std::vector<RemdBox> tile(ntile), cell(ncell);
        for (int t = 0; t < ntile; ++t) tile[t] = remd_group_box(x.data(), 32 * t, std::min(32, s.natom - 32 * t), s);
        for (int c = 0; c < ncell; ++c) cell[c] = remd_group_box(x.data(), 4 * c, 4, s);
        long long missed = 0, kept = 0;
        for (int t = 0; t < ntile; ++t)
            for (int c = 0; c < ncell; ++c) kept += remd_boxes_near(tile[t], cell[c], s);
        for (int i = 0; i < s.natom; ++i)
            for (int j = 0; j < s.natom; ++j) {
                float fx = 0, fy = 0, fz = 0, u = 0;
                remd_pair(x[3 * i], x[3 * i + 1], x[3 * i + 2], x[3 * j], x[3 * j + 1], x[3 * j + 2], s, fx, fy, fz, u);
                if (u != 0.0f && !remd_boxes_near(tile[i / 32], cell[j / 4], s)) ++missed;
            }
        char label[120];
        snprintf(label, sizeof label, "%s: pairs in the cutoff the box test drops", what);
        expect(missed == 0, label, (double)missed, 0);
        snprintf(label, sizeof label, "%s: tile-cell pairs kept", what);
        expect(max_kept <= 0 || (double)kept / ((double)ntile * ncell) <= max_kept, label,
               (double)kept / ((double)ntile * ncell), max_kept);
    };
    check_pruning(hot.s, hot.x, "256 atoms, 250 K", 0);
    Replica big(8, 5.0, 0.5, 250.0);
    check_pruning(big.s, big.x, "2,048 atoms, lattice", 0.35);
    big.run(100, 250.0f);
    check_pruning(big.s, big.x, "2,048 atoms, 0.5 ps at 250 K", 0.5);

    // NVE: velocity Verlet at 5 fs keeps E within 0.25% of KE over 2,000 steps (10 ps);
    // at 60 fs the same bound fails, so the bound measures the integrator.
    const double drift = nve_drift(5.0, 2000);
    expect(drift < 0.0025, "NVE max |E - E0| / KE0, dt 5 fs, 10 ps", drift, 0.0025);
    const double bad = nve_drift(60.0, 167);
    expect(!(bad < 0.0025), "NVE max |E - E0| / KE0 at dt 60 fs exceeds the same bound", bad, 0.0025);

    // Berendsen (tau 0.1 ps) takes a 50 K start to 150 K.
    Replica cold(4, 5.0, 0.1, 50.0);
    cold.run(1000, 150.0f);
    const double t_end = cold.temperature();
    expect(fabs(t_end - 150.0) < 7.5, "Berendsen: T after 5 ps towards 150 K (K)", t_end, 150.0);

    // Exchange: flag = 1 rescales the velocities from 100 K to 200 K exactly.
    Replica ex(4, 5.0, 0.5, 100.0);
    float tc = 100.0f;
    float dummy;
    remd_cpu_replica(ex.s, ex.x.data(), ex.v.data(), ex.f.data(), 200.0f, 1, &tc, 0, 0, &dummy);
    expect(fabs(ex.temperature() - 200.0) < 1e-3 && tc == 200.0f, "rescaled temperature on exchange (K)",
           ex.temperature(), 200.0);

    return failures ? 1 : 0;
}

/* remd: replica-exchange MD of Lennard-Jones argon, as in P003 (Oikawa et al., IPSJ
 * Trans. ACS 2014).  This header holds the physics every path shares: the CPU
 * reference, the faithful GPU kernel and the fast one call the same functions.
 *
 * Model (P003 sec. 2.2): FCC argon, Natom = 4a^3, density 1.65 g/cm^3, m = 39.948 g/mol,
 * LJ eps = 0.9661 kJ/mol, sigma = 0.3405 nm, plain truncation at rc = 3 sigma (no shift,
 * as the paper's eq. 2), periodic cube with the minimum image, float positions and
 * velocities.  Units: nm, ps, g/mol, kJ/mol, K; then force / mass is in nm/ps^2.
 *
 * The paper names neither integrator nor thermostat; the choices here are standard:
 *  - velocity Verlet: symplectic and time-reversible, one force evaluation per step,
 *    the usual MD integrator (energy drift is testable: see tests/test_physics.cpp);
 *  - Berendsen weak coupling (velocity rescaling towards T0 with time constant tau):
 *    deterministic, so GPU and CPU trajectories can be compared step by step and a
 *    fixed seed reproduces a run bit for bit; it needs only the kinetic energy the
 *    block already reduces each step.  It does not sample the canonical ensemble
 *    exactly (a stochastic rescaling would); for REMD's exchange statistics the
 *    potential energy distribution matters and at 14,336 replicas neighbours overlap
 *    strongly either way.  tau = 0 switches the thermostat off (NVE, for the drift test).
 * On exchange the velocities are rescaled by sqrt(T_new / T_old) (Sugita & Okamoto).
 */
#ifndef UMSTUDY_REMD_H
#define UMSTUDY_REMD_H

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define REMD_HD __host__ __device__ __forceinline__
#else
#define REMD_HD inline
#endif

/* 1/x: the GPU's approximate reciprocal (MUFU, ~1 ulp) instead of a correctly rounded
 * division sequence in the innermost loop; the host divides.  GPU and CPU are compared
 * with a tolerance, never bit for bit. */
#if defined(__CUDA_ARCH__)
#define REMD_RCP(x) __fdividef(1.0f, (x))
#else
#define REMD_RCP(x) (1.0f / (x))
#endif

#define REMD_KB 0.00831446261815324     /* kJ/mol/K */
#define REMD_NA 6.02214076e23           /* 1/mol */
#define REMD_MASS 39.948                /* g/mol */
#define REMD_EPS 0.9661                 /* kJ/mol */
#define REMD_SIGMA 0.3405               /* nm */
#define REMD_RC_SIGMA 3.0
#define REMD_DENSITY 1.65               /* g/cm^3 */
/* Arithmetic of one pair inside the cutoff, counting an FMA as 2: d (3), image (3),
 * r^2 (5), 1/r^2 (1), s^2, s^6 (3), force factor (4), force update (6), energy (4). */
#define REMD_FLOPS_PAIR_IN 29
/* A pair beyond the cutoff stops after d, image and r^2. */
#define REMD_FLOPS_PAIR_OUT 11

/* One replica's geometry and the LJ constants in the form the pair loop uses. */
typedef struct RemdSystem {
    int cells;   /* a: FCC unit cells per side */
    int natom;   /* 4 a^3 */
    float box;   /* L (nm) */
    float half;  /* L / 2 */
    float rc2;   /* (3 sigma)^2 */
    float sig2;  /* sigma^2 */
    float c12, c6;  /* force: f(r)/r = (c12 s^6 - c6) s^6 / r^2, c12 = 48 eps, c6 = 24 eps */
    float e12, e6;  /* energy per atom (half of each pair): 2 eps (s^12 - s^6) */
    float dt;       /* ps */
    float half_dt_over_m;
    float tau;      /* Berendsen time constant (ps); 0: NVE */
    int ndof;       /* 3 N - 3 (the centre of mass does not move) */
} RemdSystem;

/* Box length from the number of atoms and the density (P003: 2.18 nm for 256,
 * 4.35 nm for 2,048). */
static inline double remd_box_nm(int natom)
{
    const double grams = natom * REMD_MASS / REMD_NA;
    const double cm3 = grams / REMD_DENSITY;
    return cbrt(cm3 * 1e21); /* 1 cm^3 = 1e21 nm^3 */
}

static inline RemdSystem remd_system(int cells, double dt_ps, double tau_ps)
{
    RemdSystem s;
    s.cells = cells;
    s.natom = 4 * cells * cells * cells;
    const double box = remd_box_nm(s.natom), rc = REMD_RC_SIGMA * REMD_SIGMA;
    s.box = (float)box;
    s.half = (float)(box / 2);
    s.rc2 = (float)(rc * rc);
    s.sig2 = (float)(REMD_SIGMA * REMD_SIGMA);
    s.c12 = (float)(48 * REMD_EPS);
    s.c6 = (float)(24 * REMD_EPS);
    s.e12 = (float)(2 * REMD_EPS);
    s.e6 = (float)(2 * REMD_EPS);
    s.dt = (float)dt_ps;
    s.half_dt_over_m = (float)(0.5 * dt_ps / REMD_MASS);
    s.tau = (float)tau_ps;
    s.ndof = 3 * s.natom - 3;
    return s;
}

/* The minimum image of a coordinate difference of two wrapped positions (|d| < L):
 * two selects, no rounding instruction in the pair loop. */
REMD_HD float remd_image(float d, float box, float half)
{
    return d > half ? d - box : (d < -half ? d + box : d);
}

/* Back into [0, L) after a drift of much less than L. */
REMD_HD float remd_wrap(float x, float box)
{
    return x >= box ? x - box : (x < 0.0f ? x + box : x);
}

/* Velocity Verlet, per coordinate: the half kick (v + dt/2 f/m) before and after the
 * force evaluation, and the drift (x + dt v, wrapped) between them. */
REMD_HD float remd_kick(float v, float f, const RemdSystem &s) { return v + s.half_dt_over_m * f; }
REMD_HD float remd_drift(float x, float v, const RemdSystem &s) { return remd_wrap(x + s.dt * v, s.box); }

/* Adds the LJ force on atom i from atom j and half their pair energy.  j == i (r^2 = 0)
 * contributes nothing, so callers loop over all j. */
REMD_HD void remd_pair(float xi, float yi, float zi, float xj, float yj, float zj,
                       const RemdSystem &s, float &fx, float &fy, float &fz, float &u)
{
    const float dx = remd_image(xj - xi, s.box, s.half);
    const float dy = remd_image(yj - yi, s.box, s.half);
    const float dz = remd_image(zj - zi, s.box, s.half);
    const float r2 = dx * dx + dy * dy + dz * dz;
    if (r2 < s.rc2 && r2 > 0.0f) {
        const float inv = REMD_RCP(r2);
        const float s2 = s.sig2 * inv;
        const float s6 = s2 * s2 * s2;
        const float fr = (s.c12 * s6 - s.c6) * s6 * inv;
        fx -= fr * dx; /* d points from i to j: repulsion pushes i away from j */
        fy -= fr * dy;
        fz -= fr * dz;
        u += (s.e12 * s6 - s.e6) * s6;
    }
}

/* Berendsen factor for the velocities after a step: lambda^2 = 1 + dt/tau (T0/T - 1),
 * limited to [0.8, 1.25] as GROMACS does so a hot start cannot blow up; 1 when tau = 0. */
REMD_HD float remd_berendsen(double ke, float t0, const RemdSystem &s)
{
    if (s.tau <= 0.0f || ke <= 0.0) return 1.0f;
    const double t = 2.0 * ke / (s.ndof * REMD_KB);
    double l2 = 1.0 + (double)s.dt / s.tau * ((double)t0 / t - 1.0);
    l2 = l2 < 0.64 ? 0.64 : (l2 > 1.5625 ? 1.5625 : l2);
    return (float)sqrt(l2);
}

/* ---- neighbour tests of the fast kernel ------------------------------------------- */

/* A cube around a group of atoms: centre (wrapped into the box) and half-width (the
 * largest over x, y, z), plus a margin that absorbs float rounding.  Groups are the
 * 4 atoms of an FCC cell and the 32 atoms of a warp (2x2x2 cells at start). */
typedef struct alignas(16) RemdBox {
    float x, y, z, h;
} RemdBox;

#define REMD_BOX_MARGIN 1e-3f /* nm */

/* From the group's extent [lo, hi] per dimension, as offsets (minimum image) from a
 * reference atom ref, so a group straddling the periodic boundary stays compact. */
REMD_HD RemdBox remd_box_from(const float ref[3], const float lo[3], const float hi[3], const RemdSystem &s)
{
    RemdBox b;
    b.x = remd_wrap(ref[0] + 0.5f * (lo[0] + hi[0]), s.box);
    b.y = remd_wrap(ref[1] + 0.5f * (lo[1] + hi[1]), s.box);
    b.z = remd_wrap(ref[2] + 0.5f * (lo[2] + hi[2]), s.box);
    const float hx = 0.5f * (hi[0] - lo[0]), hy = 0.5f * (hi[1] - lo[1]), hz = 0.5f * (hi[2] - lo[2]);
    b.h = fmaxf(hx, fmaxf(hy, hz)) + REMD_BOX_MARGIN;
    return b;
}

/* Whether any atom of box a may lie within the cutoff of any atom of box b: per
 * dimension the periodic gap between the cubes is at least |image(centre difference)|
 * minus both half-widths (triangle inequality), so a pair the test rejects is beyond
 * the cutoff and contributes exactly nothing in remd_pair; skipping it changes no sum. */
REMD_HD bool remd_boxes_near(const RemdBox &a, const RemdBox &b, const RemdSystem &s)
{
    const float reach = a.h + b.h;
    const float gx = fmaxf(fabsf(remd_image(b.x - a.x, s.box, s.half)) - reach, 0.0f);
    const float gy = fmaxf(fabsf(remd_image(b.y - a.y, s.box, s.half)) - reach, 0.0f);
    const float gz = fmaxf(fabsf(remd_image(b.z - a.z, s.box, s.half)) - reach, 0.0f);
    return gx * gx + gy * gy + gz * gz < s.rc2;
}

/* The box of atoms [first, first + count) of one replica (host; the kernel computes
 * the same with warp shuffles). */
static inline RemdBox remd_group_box(const float *x, int first, int count, const RemdSystem &s)
{
    const float *ref = x + 3 * first;
    float lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0};
    for (int i = first; i < first + count; ++i)
        for (int c = 0; c < 3; ++c) {
            const float o = remd_image(x[3 * i + c] - ref[c], s.box, s.half);
            lo[c] = fminf(lo[c], o);
            hi[c] = fmaxf(hi[c], o);
        }
    return remd_box_from(ref, lo, hi, s);
}

/* ---- counter-based random numbers (host) ----------------------------------------- */

/* splitmix64 finaliser of (seed, stream, counter): any draw is a pure function of its
 * coordinates, so results do not depend on thread count or visiting order. */
static inline uint64_t remd_hash(uint64_t seed, uint64_t stream, uint64_t counter)
{
    uint64_t z = seed * 0x9E3779B97F4A7C15ull ^ (stream + 0x632BE59BD9B4E019ull) * 0xD1B54A32D192ED03ull ^
                 (counter + 0x2545F4914F6CDD1Dull) * 0x94D049BB133111EBull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in (0, 1). */
static inline double remd_uniform(uint64_t seed, uint64_t stream, uint64_t counter)
{
    return ((double)(remd_hash(seed, stream, counter) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

#endif

// remd host side: initial state, the CPU reference, the temperature ladder and the
// exchange step, and the interface the GPU code implements.  The driver (remd_main.cpp)
// runs P003's list 1 over a backend: the GPUs (remd_cuda.cu) or the CPU (here).
#ifndef UMSTUDY_REMD_HOST_H
#define UMSTUDY_REMD_HOST_H

#include <stdint.h>
#include <string>
#include <vector>

#include "remd.h"

// All replicas' state, replica-major like P003's pos[Nrep][Natom][3].
struct RemdState {
    int nrep = 0, natom = 0, mexch = 0;
    std::vector<float> pos, vel, frc; // nrep * natom * 3
    std::vector<float> tcur;          // temperature the velocities belong to
    std::vector<float> energy;        // U[nrep][mexch]: potential energy after each step
    void resize(int nrep_, int natom_, int mexch_);
    float *x(int r) { return pos.data() + (size_t)r * natom * 3; }
    float *v(int r) { return vel.data() + (size_t)r * natom * 3; }
    float *f(int r) { return frc.data() + (size_t)r * natom * 3; }
    float *u(int r) { return energy.data() + (size_t)r * mexch; }
};

// FCC lattice and Maxwell-Boltzmann velocities at temperature t (centre-of-mass
// momentum removed, scaled to exactly t), from counter-based draws of (seed, r).
void remd_init_replica(const RemdSystem &s, uint64_t seed, int r, double t, float *x, float *v);

// Potential energy of one configuration and every atom's force (f may be null).
double remd_cpu_forces(const RemdSystem &s, const float *x, float *f);

// The kernels' algorithm for one replica, serially: on flag, rescale v to t0; with
// init_forces, compute f from x first; then nsteps of velocity Verlet + Berendsen,
// U[step] = potential energy after the step.  Returns the last step's kinetic energy.
double remd_cpu_replica(const RemdSystem &s, float *x, float *v, float *f, float t0, int flag,
                        float *tcur, int nsteps, int init_forces, float *U);

double remd_kinetic(const RemdSystem &s, const float *v);

// ---- temperature ladder and exchange ---------------------------------------------

struct RemdLadder {
    std::vector<double> temp;   // temperature of ladder index k (ascending)
    std::vector<int> rep_at;    // replica at index k
    std::vector<int> index_of;  // index of replica r
    std::vector<long long> tries, accepts; // pair (k, k+1)
    // Geometric spacing (constant acceptance for a constant heat capacity), or linear.
    void init(int nrep, double tmin, double tmax, bool geometric);
    double temp_of(int r) const { return temp[index_of[r]]; }
};

// One Metropolis exchange sweep (P003 eq. 1): pairs (k, k+1) with k % 2 == iter % 2,
// accepted with min(1, exp((beta_k - beta_k+1)(U_a - U_b))) where a, b sit at k, k+1;
// draws are (seed, iter, k), so a sweep is reproducible on its own.  flag[r] = 1 for
// each replica whose temperature changed (velocities to be rescaled), else 0.
// Returns the number of accepted swaps.
int remd_exchange(RemdLadder &L, const double *U, uint64_t seed, long long iter, int *flag);

// ---- backends ---------------------------------------------------------------------

// What the host loop needs of the place where replicas are integrated.  The GPU
// backend issues, per call, one cudaSetDevice loop as P003's list 1 does.
struct RemdBackend {
    virtual ~RemdBackend() = default;
    virtual const char *name() const = 0;
    virtual int devices() const = 0;
    // Initial state to the devices, then `steps` steps (0: forces only), untimed.
    virtual void setup(RemdState &st, const float *temp, int steps) = 0;
    // One exchange interval: H2D temp + flag (2 copies per device), the kernel for
    // mexch steps, D2H of U[nrep][mexch].  Returns the GPU time (max over devices, s).
    virtual void upload(const float *temp, const int *flag) = 0;
    virtual void launch() = 0;
    virtual double download(float *U) = 0;
    // Each device's own kernel time of the last interval (its events, s), filled by
    // download(); empty where there is no such split (the CPU backend).  The maximum is
    // what download() returns; their spread shows devices waiting for the slowest.
    std::vector<double> device_seconds;
    // One replica's state (verification).
    virtual void fetch(int r, float *x, float *v, float *f) = 0;
};

struct RemdOptions {
    long long cells = 8, nrep = 14336, mexch = 100, iterations = 1, warmup = 0, gpus = 0;
    long long threads = 0, bins = 32, verify_replicas = 0;
    double tmin = 50, tmax = 250, dt_fs = 5, tau_ps = 0.5, fp32_peak_tflops = 0;
    double verify_dx_nm = 1e-3, verify_du_rel = 1e-4;
    long long seed = 20140101;
    const char *kernel = "faithful", *ladder = "geometric";
    int cpu = 0;
};

RemdBackend *remd_cpu_backend(const RemdSystem &s, const RemdOptions &o);
// The CUDA backend, or exit 77 with the reason (no device, too few, no CUDA build).
RemdBackend *remd_gpu_backend(const RemdSystem &s, const RemdOptions &o);

#endif

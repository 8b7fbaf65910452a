// remd host side: initial state, the CPU reference, the temperature ladder and the
// exchange step, and the interface the GPU code implements.  The driver (remd_main.cpp)
// runs P003's list 1 over a backend: the GPUs (remd_cuda.cu) or the CPU (here).
#ifndef UMSTUDY_REMD_HOST_H
#define UMSTUDY_REMD_HOST_H

#include <stdint.h>
#include <stdlib.h>

#include <new>
#include <string>
#include <vector>

#include "remd.h"

// Whole pages of their own (page-aligned, the size rounded up to pages) for host buffers
// that are pinned (RemdBackend::pin): two pinned ranges never share a page, which the
// runtime would refuse as registered twice.
template <class T>
struct RemdPageAllocator {
    using value_type = T;
    static constexpr size_t kPage = 4096;
    RemdPageAllocator() = default;
    template <class U>
    RemdPageAllocator(const RemdPageAllocator<U> &) {}
    T *allocate(size_t n)
    {
        const size_t bytes = (n * sizeof(T) + kPage - 1) / kPage * kPage;
        void *p = aligned_alloc(kPage, bytes ? bytes : kPage);
        if (!p) throw std::bad_alloc();
        return static_cast<T *>(p);
    }
    void deallocate(T *p, size_t) { free(p); }
    template <class U>
    bool operator==(const RemdPageAllocator<U> &) const { return true; }
    template <class U>
    bool operator!=(const RemdPageAllocator<U> &) const { return false; }
};
template <class T>
using RemdPinnable = std::vector<T, RemdPageAllocator<T>>;

// All replicas' state, replica-major like P003's pos[Nrep][Natom][3].
struct RemdState {
    int nrep = 0, natom = 0, mexch = 0;
    std::vector<float> pos, vel, frc; // nrep * natom * 3
    std::vector<float> tcur;          // temperature the velocities belong to
    RemdPinnable<float> energy;       // U: potential energy after each step, mexch per row;
                                      // replica r's row is RemdPlacement::row(r)
    void resize(int nrep_, int natom_, int mexch_);
    float *x(int r) { return pos.data() + (size_t)r * natom * 3; }
    float *v(int r) { return vel.data() + (size_t)r * natom * 3; }
    float *f(int r) { return frc.data() + (size_t)r * natom * 3; }
    float *u(int row) { return energy.data() + (size_t)row * mexch; }
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

// The kernel as configured on a device (GPU backend; zeros where there is no such thing,
// the CPU).  One block integrates one replica, so blocks_per_sm x sms replicas run at once.
struct RemdKernelInfo {
    int sms = 0;           // multiprocessors (cudaDevAttrMultiProcessorCount)
    int blocks_per_sm = 0; // cudaOccupancyMaxActiveBlocksPerMultiprocessor
    int threads = 0, atoms_per_thread = 0, regs = 0;
    long long shm_bytes = 0; // dynamic shared memory per block
};

// One threads-per-block configuration timed by a tuning sweep.
struct RemdTuneTrial {
    int threads, atoms_per_thread, blocks_per_sm;
    double seconds;
};

// Where replicas are integrated: n devices, each holding nloc replicas in its own slot
// order (RemdPlacement says which replica sits in which slot).  The host loop
// (remd_loop.h) calls a device's methods from one thread at a time; with one host
// thread per device, different devices' methods run concurrently.
struct RemdBackend {
    virtual ~RemdBackend() = default;
    virtual const char *name() const = 0;
    virtual int devices() const = 0;
    // Device d's nloc replicas (slot order) to the device, then their initial forces and
    // `steps` untimed steps; setup_wait(d) returns once that is done.
    virtual void setup(int d, int nloc, const float *x, const float *v, const float *tcur, const float *temp,
                       int steps) = 0;
    virtual void setup_wait(int d) = 0;
    // One exchange interval on device d (P003 list 1).  temp_flag holds nloc temperatures
    // (float) then nloc flags (int) of its slots; `copies` 2 sends them as two copies (list
    // 1), 1 as one.  launch: the kernel for mexch steps; download: U[nloc][mexch] back (the
    // copy waits for the kernel), returning d's own kernel time (its events, s).
    virtual void upload(int d, const void *temp_flag, int copies) = 0;
    virtual void launch(int d) = 0;
    virtual double download(int d, float *U) = 0;
    virtual void fetch(int d, int slot, float *x, float *v, float *f) = 0;
    // Seconds of `nsteps` steps of the kernel over copies of device d's slots `slots`, each
    // at its current temperature; the replicas themselves are not touched.
    virtual double time_copies(int d, const std::vector<int> &slots, int nsteps) = 0;
    virtual RemdKernelInfo kernel_info(int d) = 0;
    // Every threads-per-block configuration of the kernel timed over `nsteps` steps of
    // copies of device d's replicas; the fastest is used from then on, on every device.
    virtual std::vector<RemdTuneTrial> tune(int d, int nsteps) = 0;
    // The configuration's parameters (threads, atoms per thread) for the output lines.
    virtual void params() const = 0;
    // Host memory the copies use every interval, pinned where that makes them faster
    // (page-locked memory is what vcuda-bench's copy fit measures); kept until the end.
    virtual void pin(void *p, size_t bytes) = 0;
};

struct RemdOptions {
    long long cells = 8, nrep = 14336, mexch = 100, iterations = 1, warmup = 0, gpus = 0;
    long long threads = 0, bins = 32, verify_replicas = 0;
    long long tune_steps = 10, profile_segments = 0, profile_steps = 0;
    double tmin = 50, tmax = 250, dt_fs = 5, tau_ps = 0.5, fp32_peak_tflops = 0;
    double verify_dx_nm = 1e-3, verify_du_rel = 1e-4;
    long long seed = 20140101;
    const char *kernel = "faithful", *ladder = "geometric", *placement = "interleaved", *host_loop = "threads";
    int cpu = 0, tune = 0;
};

// The CPU reference as `ndev` devices (each its own copy of its replicas' state, placed
// and driven like GPUs), so the host loop's placements and threads run without a GPU.
RemdBackend *remd_cpu_backend(const RemdSystem &s, const RemdOptions &o, int ndev);
// The CUDA backend, or exit 77 with the reason (no device, too few, no CUDA build).
RemdBackend *remd_gpu_backend(const RemdSystem &s, const RemdOptions &o);

#endif

// remd on GPUs: the kernels and the CUDA backend of the host loop (P003 list 1).
//
// Only runtime calls that an API-remoting layer forwards are used (cudaGetDeviceCount,
// cudaSetDevice, cudaMalloc/Free, cudaMemcpy, events, cudaGetLastError,
// cudaDeviceSynchronize, cudaDeviceGetAttribute, cudaOccupancyMaxActiveBlocksPerMultiprocessor,
// cudaFuncGetAttributes, cudaHostRegister, <<<>>> launches; no __constant__/__device__ variables, no
// symbols, textures or cooperative launches), and the binary links libcudart.so, so
// vcuda can stand in for it unmodified.  Each call names its device (cudaSetDevice), so
// the host loop may drive every device from a thread of its own (remd_loop.h).
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "remd_host.h"
#include "umstudy/cuda_check.h"
#include "umstudy/support.h"

namespace {

// Kernel arguments: one GPU's slice of the replicas (P003 keeps them on the GPU only).
struct RemdDev {
    float *pos, *vel, *frc; // [nloc][natom][3]
    float *tcur;            // temperature the velocities belong to
    float *U;               // [nloc][ustride]
    const float *temp;      // ladder temperature of each replica (H2D every interval)
    const int *flag;        // 1: the temperature changed (H2D every interval)
    int nsteps, ustride, init_forces;
};

// Sum of a and b over the block, returned to every thread (blockDim % 32 == 0).
__device__ __forceinline__ void block_sum2(double &a, double &b, double (*red)[32])
{
    for (int off = 16; off > 0; off >>= 1) {
        a += __shfl_down_sync(0xffffffffu, a, off);
        b += __shfl_down_sync(0xffffffffu, b, off);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    if (lane == 0) red[0][warp] = a, red[1][warp] = b;
    __syncthreads();
    if (warp == 0) {
        a = lane < nwarps ? red[0][lane] : 0.0;
        b = lane < nwarps ? red[1][lane] : 0.0;
        for (int off = 16; off > 0; off >>= 1) {
            a += __shfl_down_sync(0xffffffffu, a, off);
            b += __shfl_down_sync(0xffffffffu, b, off);
        }
        if (lane == 0) red[0][0] = a, red[1][0] = b;
    }
    __syncthreads();
    a = red[0][0], b = red[1][0];
    __syncthreads(); // red is reused by the next call
}

// P003's kernel: one block per replica, each thread a strided set of atoms, every
// atom's force from all N-1 others read from global memory, nsteps in one launch.
__global__ void remd_faithful(RemdSystem s, RemdDev d)
{
    __shared__ double red[2][32];
    const int r = blockIdx.x, n = s.natom, n3 = 3 * n;
    float *x = d.pos + (size_t)r * n3, *v = d.vel + (size_t)r * n3, *f = d.frc + (size_t)r * n3;
    const float t0 = d.temp[r], told = d.tcur[r];
    if (d.flag[r] && told > 0.0f) {
        const float scale = sqrtf(t0 / told);
        for (int k = threadIdx.x; k < n3; k += blockDim.x) v[k] *= scale;
    }
    __syncthreads();
    if (threadIdx.x == 0) d.tcur[r] = t0;
    if (d.init_forces)
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            float fx = 0, fy = 0, fz = 0, u = 0;
            for (int j = 0; j < n; ++j)
                remd_pair(x[3 * i], x[3 * i + 1], x[3 * i + 2], x[3 * j], x[3 * j + 1], x[3 * j + 2], s, fx, fy, fz, u);
            f[3 * i] = fx, f[3 * i + 1] = fy, f[3 * i + 2] = fz;
        }
    for (int step = 0; step < d.nsteps; ++step) {
        for (int i = threadIdx.x; i < n; i += blockDim.x)
            for (int c = 0; c < 3; ++c) {
                v[3 * i + c] = remd_kick(v[3 * i + c], f[3 * i + c], s);
                x[3 * i + c] = remd_drift(x[3 * i + c], v[3 * i + c], s);
            }
        __syncthreads();
        double u_sum = 0.0, v2_sum = 0.0;
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            float fx = 0, fy = 0, fz = 0, u = 0;
            const float xi = x[3 * i], yi = x[3 * i + 1], zi = x[3 * i + 2];
            for (int j = 0; j < n; ++j) remd_pair(xi, yi, zi, x[3 * j], x[3 * j + 1], x[3 * j + 2], s, fx, fy, fz, u);
            f[3 * i] = fx, f[3 * i + 1] = fy, f[3 * i + 2] = fz;
            for (int c = 0; c < 3; ++c) {
                v[3 * i + c] = remd_kick(v[3 * i + c], f[3 * i + c], s);
                v2_sum += (double)v[3 * i + c] * v[3 * i + c];
            }
            u_sum += u;
        }
        block_sum2(u_sum, v2_sum, red);
        const float lambda = remd_berendsen(0.5 * REMD_MASS * v2_sum, t0, s);
        if (lambda != 1.0f)
            for (int i = threadIdx.x; i < n; i += blockDim.x)
                for (int c = 0; c < 3; ++c) v[3 * i + c] *= lambda;
        if (threadIdx.x == 0) d.U[(size_t)r * d.ustride + step] = (float)u_sum;
    }
}

// Forces on a thread's K atoms from all n positions in shared memory ("shared").
template <int K>
__device__ __forceinline__ void all_pairs_forces(const float4 *sx, int n, const RemdSystem &s,
                                                 const float (&x)[K][3], float (&f)[K][3], float (&u)[K])
{
#pragma unroll
    for (int k = 0; k < K; ++k) f[k][0] = f[k][1] = f[k][2] = u[k] = 0.0f;
#pragma unroll 2
    for (int j = 0; j < n; ++j) {
        const float4 p = sx[j];
#pragma unroll
        for (int k = 0; k < K; ++k) remd_pair(x[k][0], x[k][1], x[k][2], p.x, p.y, p.z, s, f[k][0], f[k][1], f[k][2], u[k]);
    }
}

// The box (remd.h) of the aligned group of W lanes (W = 4: one FCC cell, 32: the warp),
// given to every lane of the group; lanes without an atom count as the group's first.
template <int W>
__device__ __forceinline__ RemdBox group_box(const float (&x)[3], bool live, const RemdSystem &s)
{
    const int leader = (threadIdx.x & 31) & ~(W - 1);
    float ref[3], lo[3], hi[3];
#pragma unroll
    for (int c = 0; c < 3; ++c) {
        ref[c] = __shfl_sync(0xffffffffu, x[c], leader);
        lo[c] = hi[c] = live ? remd_image(x[c] - ref[c], s.box, s.half) : 0.0f;
    }
#pragma unroll
    for (int off = W / 2; off > 0; off >>= 1)
#pragma unroll
        for (int c = 0; c < 3; ++c) {
            lo[c] = fminf(lo[c], __shfl_xor_sync(0xffffffffu, lo[c], off));
            hi[c] = fmaxf(hi[c], __shfl_xor_sync(0xffffffffu, hi[c], off));
        }
    return remd_box_from(ref, lo, hi, s);
}

// The same pairs within the cutoff, found by cluster pairs ("fast"): for each of its K
// tiles (the warp's 32 atoms) a warp tests 32 cells (4 atoms) at a time, one per lane,
// against the tile's box, and only the cells that may hold a neighbour are computed.
// Both the tests and the skips are warp-uniform; no pair within the cutoff is dropped
// (remd_boxes_near, checked on the CPU by tests/test_physics.cpp).
template <int K>
__device__ __forceinline__ void pruned_forces(const float4 *sx, const RemdBox *cbox, int n, const RemdSystem &s,
                                              const float (&x)[K][3], const bool (&live)[K], float (&f)[K][3],
                                              float (&u)[K])
{
    const int lane = threadIdx.x & 31, ncell = n >> 2;
#pragma unroll
    for (int k = 0; k < K; ++k) {
        float fx = 0.0f, fy = 0.0f, fz = 0.0f, uk = 0.0f;
        const RemdBox tile = group_box<32>(x[k], live[k], s);
        for (int c0 = 0; c0 < ncell; c0 += 32) {
            const int c = c0 + lane;
            unsigned near = __ballot_sync(0xffffffffu, c < ncell && remd_boxes_near(tile, cbox[c], s));
            while (near) {
                const int cell = c0 + __ffs(near) - 1;
                near &= near - 1;
#pragma unroll
                for (int m = 0; m < 4; ++m) {
                    const float4 p = sx[4 * cell + m];
                    remd_pair(x[k][0], x[k][1], x[k][2], p.x, p.y, p.z, s, fx, fy, fz, uk);
                }
            }
        }
        f[k][0] = fx, f[k][1] = fy, f[k][2] = fz, u[k] = uk;
    }
}

// Shared-memory kernels: the replica's positions live in shared memory for the whole
// launch (one float4 broadcast per j instead of three global loads) and each thread
// keeps K atoms (i = tid + k blockDim) in registers.  kPrune = false ("shared") computes
// all N (N-1) pairs like P003; kPrune = true ("fast") only the cells near each tile.
// Block-size bound per atoms per thread, so that registers never exceed 64 K per block.
constexpr int smem_max_threads(int k) { return k <= 2 ? 1024 : 2048 / k; }

template <int K, bool kPrune>
__global__ void __launch_bounds__(smem_max_threads(K)) remd_smem(RemdSystem s, RemdDev d)
{
    extern __shared__ float4 sx[];                           // n positions
    RemdBox *cbox = reinterpret_cast<RemdBox *>(sx + s.natom); // n/4 cell boxes (kPrune)
    __shared__ double red[2][32];
    const int r = blockIdx.x, n = s.natom, n3 = 3 * n;
    float *gx = d.pos + (size_t)r * n3, *gv = d.vel + (size_t)r * n3, *gf = d.frc + (size_t)r * n3;
    float x[K][3], v[K][3], f[K][3], u[K];
    bool live[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int i = threadIdx.x + k * blockDim.x;
        live[k] = i < n;
        for (int c = 0; c < 3; ++c) {
            x[k][c] = live[k] ? gx[3 * i + c] : 0.0f;
            v[k][c] = live[k] ? gv[3 * i + c] : 0.0f;
            f[k][c] = live[k] ? gf[3 * i + c] : 0.0f;
        }
    }
    // Positions (and cell boxes) of this thread's atoms to shared memory; a barrier
    // must follow before anyone reads them.
    auto publish = [&]() {
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int i = threadIdx.x + k * blockDim.x;
            if (live[k]) sx[i] = make_float4(x[k][0], x[k][1], x[k][2], 0.0f);
            if (kPrune) {
                const RemdBox b = group_box<4>(x[k], live[k], s);
                if (live[k] && (i & 3) == 0) cbox[i >> 2] = b;
            }
        }
    };
    auto forces = [&]() {
        if (kPrune)
            pruned_forces<K>(sx, cbox, n, s, x, live, f, u);
        else
            all_pairs_forces<K>(sx, n, s, x, f, u);
    };

    const float t0 = d.temp[r], told = d.tcur[r];
    if (d.flag[r] && told > 0.0f) {
        const float scale = sqrtf(t0 / told);
#pragma unroll
        for (int k = 0; k < K; ++k)
            for (int c = 0; c < 3; ++c) v[k][c] *= scale;
    }
    publish();
    __syncthreads();
    if (threadIdx.x == 0) d.tcur[r] = t0;
    if (d.init_forces) forces();
    for (int step = 0; step < d.nsteps; ++step) {
        __syncthreads(); // the last reads of sx and cbox (init forces) before they change
#pragma unroll
        for (int k = 0; k < K; ++k)
            for (int c = 0; c < 3; ++c) {
                v[k][c] = remd_kick(v[k][c], f[k][c], s);
                x[k][c] = remd_drift(x[k][c], v[k][c], s);
            }
        publish();
        __syncthreads();
        forces();
        double u_sum = 0.0, v2_sum = 0.0;
#pragma unroll
        for (int k = 0; k < K; ++k) {
            for (int c = 0; c < 3; ++c) v[k][c] = remd_kick(v[k][c], f[k][c], s);
            if (live[k]) {
                u_sum += u[k];
                for (int c = 0; c < 3; ++c) v2_sum += (double)v[k][c] * v[k][c];
            }
        }
        block_sum2(u_sum, v2_sum, red);
        const float lambda = remd_berendsen(0.5 * REMD_MASS * v2_sum, t0, s);
#pragma unroll
        for (int k = 0; k < K; ++k)
            for (int c = 0; c < 3; ++c) v[k][c] *= lambda;
        if (threadIdx.x == 0) d.U[(size_t)r * d.ustride + step] = (float)u_sum;
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
        if (!live[k]) continue;
        const int i = threadIdx.x + k * blockDim.x;
        for (int c = 0; c < 3; ++c) gx[3 * i + c] = x[k][c], gv[3 * i + c] = v[k][c], gf[3 * i + c] = f[k][c];
    }
}

// Shared memory of the smem kernels without opting in to more (an attribute call a
// remoting layer need not forward): 48 KiB less the reduction scratch.
constexpr size_t kSmemBytes = 48 * 1024 - 2 * 32 * sizeof(double);
constexpr int kMaxPerThread = 8; // atoms per thread (registers); 8 x 256 threads = 2,048 atoms

// Copies of replicas `idx` of one device into scratch arrays (time_copies): block i
// copies replica idx[i]'s positions, velocities and forces, and starts it at its current
// temperature with no flag.
__global__ void remd_gather(const float *pos, const float *vel, const float *frc, const float *tcur,
                            const int *idx, int n3, float *spos, float *svel, float *sfrc, float *stcur,
                            float *stemp, int *sflag)
{
    const size_t from = (size_t)idx[blockIdx.x] * n3, to = (size_t)blockIdx.x * n3;
    for (int k = threadIdx.x; k < n3; k += blockDim.x) {
        spos[to + k] = pos[from + k];
        svel[to + k] = vel[from + k];
        sfrc[to + k] = frc[from + k];
    }
    if (threadIdx.x == 0) {
        stcur[blockIdx.x] = stemp[blockIdx.x] = tcur[idx[blockIdx.x]];
        sflag[blockIdx.x] = 0;
    }
}

struct GpuBackend : RemdBackend {
    // One device's replicas (nloc slots) and its scratch copies for time_copies.
    struct Dev {
        int nloc = 0;
        float *pos = nullptr, *vel = nullptr, *frc = nullptr, *tcur = nullptr, *U = nullptr;
        float *tf = nullptr; // nloc temperatures, then nloc flags (int): one H2D copy or two
        cudaEvent_t e0 = nullptr, e1 = nullptr;
        size_t scratch_cap = 0, scratch_ucap = 0;
        float *spos = nullptr, *svel = nullptr, *sfrc = nullptr, *stcur = nullptr, *stf = nullptr, *sU = nullptr;
        int *sidx = nullptr;
    };
    enum Variant { kFaithful, kShared, kFast };
    RemdSystem s;
    int ndev, mexch, threads = 0, per_thread = 0;
    Variant variant;
    const char *kernel_name;
    size_t shm = 0;
    std::vector<Dev> dev;
    std::vector<void *> pinned;

    GpuBackend(const RemdSystem &s_, const RemdOptions &o, int ndev_)
        : s(s_), ndev(ndev_), mexch((int)o.mexch),
          variant(strcmp(o.kernel, "faithful") == 0 ? kFaithful : strcmp(o.kernel, "shared") == 0 ? kShared : kFast),
          kernel_name(o.kernel), dev(ndev_)
    {
        const int n = s.natom;
        if (variant != kFaithful) {
            shm = (size_t)n * sizeof(float4) + (variant == kFast ? (size_t)(n / 4) * sizeof(RemdBox) : 0);
            if (shm > kSmemBytes)
                ums_usage_fail("--kernel %s keeps a replica's %d atoms in %zu bytes of shared memory, more than the "
                               "%zu available without opting in (use --kernel faithful, or fewer --cells)",
                               o.kernel, n, shm, kSmemBytes);
            if (n > kMaxPerThread * smem_max_threads(kMaxPerThread))
                ums_usage_fail("--kernel %s holds at most %d atoms per replica (%d per thread at %d threads); "
                               "use --kernel faithful", o.kernel, kMaxPerThread * smem_max_threads(kMaxPerThread),
                               kMaxPerThread, smem_max_threads(kMaxPerThread));
        }
        const char *why = configure(o.threads ? (int)o.threads : default_threads());
        if (why) ums_usage_fail("%s", why);
    }
    ~GpuBackend() override
    {
        for (void *p : pinned) cudaHostUnregister(p);
        for (int d = 0; d < ndev; ++d) {
            cudaSetDevice(d);
            const Dev &g = dev[d];
            for (void *p : {(void *)g.pos, (void *)g.vel, (void *)g.frc, (void *)g.tcur, (void *)g.tf, (void *)g.U,
                            (void *)g.spos, (void *)g.svel, (void *)g.sfrc, (void *)g.stcur, (void *)g.stf,
                            (void *)g.sU, (void *)g.sidx})
                cudaFree(p);
        }
    }
    const char *name() const override { return "gpu"; }
    int devices() const override { return ndev; }

    int default_threads() const
    {
        const int n = s.natom;
        // P003: one thread per atom up to the 1,024-thread block limit (2 atoms per thread
        // at 2,048 atoms).  Shared-memory kernels: 4 atoms per thread (512 threads at 2,048
        // atoms): each shared-memory load feeds 4 pair evaluations ("shared"), a warp holds
        // 4 tiles ("fast").
        return variant == kFaithful ? std::min(1024, round_warp(n)) : std::max(32, round_warp((n + 3) / 4));
    }
    static int round_warp(int x) { return (x + 31) / 32 * 32; }

    // Threads per block and the atoms per thread that follow; the reason where the
    // kernel cannot run so (nothing changed then).
    const char *configure(int t)
    {
        static char why[256];
        const int n = s.natom, k = (n + t - 1) / t;
        if (variant == kFaithful) {
            threads = t, per_thread = k;
            return nullptr;
        }
        const int pt = k <= 1 ? 1 : k <= 2 ? 2 : k <= 4 ? 4 : k <= 8 ? 8 : 0;
        if (!pt || t > smem_max_threads(pt)) {
            snprintf(why, sizeof why, "--threads %d gives %d atoms per thread; kernel %s takes 1, 2, 4 or 8 with at "
                                      "most 1024, 1024, 512 or 256 threads", t, k, kernel_name);
            return why;
        }
        threads = t, per_thread = pt;
        return nullptr;
    }

    // The kernel as configured, for the occupancy query.
    const void *kernel_fn() const
    {
        if (variant == kFaithful) return (const void *)remd_faithful;
        const bool prune = variant == kFast;
        switch (per_thread) {
        case 1: return prune ? (const void *)remd_smem<1, true> : (const void *)remd_smem<1, false>;
        case 2: return prune ? (const void *)remd_smem<2, true> : (const void *)remd_smem<2, false>;
        case 4: return prune ? (const void *)remd_smem<4, true> : (const void *)remd_smem<4, false>;
        default: return prune ? (const void *)remd_smem<8, true> : (const void *)remd_smem<8, false>;
        }
    }

    void pin(void *p, size_t bytes) override
    {
        // Through vcuda (its libcudart stand-in says so by a symbol of its own) a copy
        // crosses a socket and gains nothing from page-locked memory, and the stand-in
        // would watch every launch's arguments for addresses inside the range.
        if (dlsym(RTLD_DEFAULT, "vcuda_stand_in")) return;
        UMS_CUDA_CHECK(cudaHostRegister(p, bytes, cudaHostRegisterPortable));
        pinned.push_back(p);
    }

    void params() const override
    {
        ums_param_int("threads", threads);
        ums_param_int("atoms_per_thread", per_thread);
    }

    template <bool kPrune>
    void launch_smem(int blocks, const RemdDev &a)
    {
        switch (per_thread) {
        case 1: remd_smem<1, kPrune><<<blocks, threads, shm>>>(s, a); break;
        case 2: remd_smem<2, kPrune><<<blocks, threads, shm>>>(s, a); break;
        case 4: remd_smem<4, kPrune><<<blocks, threads, shm>>>(s, a); break;
        default: remd_smem<8, kPrune><<<blocks, threads, shm>>>(s, a); break;
        }
    }

    void run_kernel(int blocks, const RemdDev &a)
    {
        if (variant == kFaithful)
            remd_faithful<<<blocks, threads>>>(s, a);
        else if (variant == kShared)
            launch_smem<false>(blocks, a);
        else
            launch_smem<true>(blocks, a);
        UMS_CUDA_CHECK_LAUNCH(0);
    }

    RemdDev args(const Dev &g, int nsteps, int ustride, int init_forces) const
    {
        return RemdDev{g.pos, g.vel, g.frc, g.tcur, g.U, g.tf, reinterpret_cast<const int *>(g.tf + g.nloc),
                       nsteps, ustride, init_forces};
    }

    void setup(int d, int nloc, const float *x, const float *v, const float *tcur, const float *temp,
               int steps) override
    {
        Dev &g = dev[d];
        g.nloc = nloc;
        const size_t bytes = (size_t)nloc * s.natom * 3 * sizeof(float);
        const size_t ubytes = (size_t)nloc * std::max(mexch, steps) * sizeof(float);
        std::vector<float> tf(2 * (size_t)nloc, 0.0f); // temperatures, flags 0
        std::copy(temp, temp + nloc, tf.begin());
        UMS_CUDA_CHECK(cudaSetDevice(d));
        UMS_CUDA_CHECK(cudaMalloc(&g.pos, bytes));
        UMS_CUDA_CHECK(cudaMalloc(&g.vel, bytes));
        UMS_CUDA_CHECK(cudaMalloc(&g.frc, bytes));
        UMS_CUDA_CHECK(cudaMalloc(&g.tcur, nloc * sizeof(float)));
        UMS_CUDA_CHECK(cudaMalloc(&g.tf, 2 * nloc * sizeof(float)));
        UMS_CUDA_CHECK(cudaMalloc(&g.U, ubytes));
        UMS_CUDA_CHECK(cudaEventCreate(&g.e0));
        UMS_CUDA_CHECK(cudaEventCreate(&g.e1));
        UMS_CUDA_CHECK(cudaMemcpy(g.pos, x, bytes, cudaMemcpyHostToDevice));
        UMS_CUDA_CHECK(cudaMemcpy(g.vel, v, bytes, cudaMemcpyHostToDevice));
        UMS_CUDA_CHECK(cudaMemcpy(g.tcur, tcur, nloc * sizeof(float), cudaMemcpyHostToDevice));
        UMS_CUDA_CHECK(cudaMemcpy(g.tf, tf.data(), tf.size() * sizeof(float), cudaMemcpyHostToDevice));
        run_kernel(nloc, args(g, steps, std::max(steps, 1), 1)); // initial forces (+ relaxation steps)
    }
    void setup_wait(int d) override
    {
        UMS_CUDA_CHECK(cudaSetDevice(d));
        UMS_CUDA_CHECK(cudaDeviceSynchronize());
    }

    void upload(int d, const void *temp_flag, int copies) override
    {
        const Dev &g = dev[d];
        const size_t half = g.nloc * sizeof(float);
        UMS_CUDA_CHECK(cudaSetDevice(d));
        if (copies == 1) {
            UMS_CUDA_CHECK(cudaMemcpy(g.tf, temp_flag, 2 * half, cudaMemcpyHostToDevice));
        } else { // list 1: the temperatures, then the flags
            UMS_CUDA_CHECK(cudaMemcpy(g.tf, temp_flag, half, cudaMemcpyHostToDevice));
            UMS_CUDA_CHECK(cudaMemcpy(g.tf + g.nloc, static_cast<const char *>(temp_flag) + half, half,
                                      cudaMemcpyHostToDevice));
        }
    }
    void launch(int d) override
    {
        const Dev &g = dev[d];
        UMS_CUDA_CHECK(cudaSetDevice(d));
        UMS_CUDA_CHECK(cudaEventRecord(g.e0));
        run_kernel(g.nloc, args(g, mexch, mexch, 0));
        UMS_CUDA_CHECK(cudaEventRecord(g.e1));
    }
    double download(int d, float *U) override
    {
        const Dev &g = dev[d];
        UMS_CUDA_CHECK(cudaSetDevice(d));
        // The copy waits for the kernel and e1 before it (one stream), so both events are
        // complete when it returns: no cudaEventSynchronize (a round trip through vcuda).
        UMS_CUDA_CHECK(cudaMemcpy(U, g.U, (size_t)g.nloc * mexch * sizeof(float), cudaMemcpyDeviceToHost));
        float ms = 0.0f;
        UMS_CUDA_CHECK(cudaEventElapsedTime(&ms, g.e0, g.e1));
        return ms * 1e-3;
    }
    void fetch(int d, int slot, float *x, float *v, float *f) override
    {
        const size_t off = (size_t)slot * s.natom * 3, bytes = (size_t)s.natom * 3 * sizeof(float);
        UMS_CUDA_CHECK(cudaSetDevice(d));
        UMS_CUDA_CHECK(cudaMemcpy(x, dev[d].pos + off, bytes, cudaMemcpyDeviceToHost));
        UMS_CUDA_CHECK(cudaMemcpy(v, dev[d].vel + off, bytes, cudaMemcpyDeviceToHost));
        UMS_CUDA_CHECK(cudaMemcpy(f, dev[d].frc + off, bytes, cudaMemcpyDeviceToHost));
    }

    // Scratch for m replicas and nsteps energies each on device d (kept for later calls).
    void scratch(Dev &g, size_t m, int nsteps)
    {
        const size_t n3 = 3 * (size_t)s.natom;
        if (m > g.scratch_cap) {
            for (void *p : {(void *)g.spos, (void *)g.svel, (void *)g.sfrc, (void *)g.stcur, (void *)g.stf,
                            (void *)g.sidx})
                UMS_CUDA_CHECK(cudaFree(p));
            UMS_CUDA_CHECK(cudaMalloc(&g.spos, m * n3 * sizeof(float)));
            UMS_CUDA_CHECK(cudaMalloc(&g.svel, m * n3 * sizeof(float)));
            UMS_CUDA_CHECK(cudaMalloc(&g.sfrc, m * n3 * sizeof(float)));
            UMS_CUDA_CHECK(cudaMalloc(&g.stcur, m * sizeof(float)));
            UMS_CUDA_CHECK(cudaMalloc(&g.stf, 2 * m * sizeof(float)));
            UMS_CUDA_CHECK(cudaMalloc(&g.sidx, m * sizeof(int)));
            g.scratch_cap = m;
        }
        const size_t u = m * (size_t)std::max(nsteps, 1);
        if (u > g.scratch_ucap) {
            UMS_CUDA_CHECK(cudaFree(g.sU));
            UMS_CUDA_CHECK(cudaMalloc(&g.sU, u * sizeof(float)));
            g.scratch_ucap = u;
        }
    }
    void gather(Dev &g, int m)
    {
        const int n3 = 3 * s.natom;
        remd_gather<<<m, 256>>>(g.pos, g.vel, g.frc, g.tcur, g.sidx, n3, g.spos, g.svel, g.sfrc, g.stcur, g.stf,
                                reinterpret_cast<int *>(g.stf + m));
        UMS_CUDA_CHECK_LAUNCH(0);
    }
    double time_copies(int d, const std::vector<int> &slots, int nsteps) override
    {
        Dev &g = dev[d];
        const int m = (int)slots.size();
        UMS_CUDA_CHECK(cudaSetDevice(d));
        scratch(g, m, nsteps);
        UMS_CUDA_CHECK(cudaMemcpy(g.sidx, slots.data(), m * sizeof(int), cudaMemcpyHostToDevice));
        const RemdDev a{g.spos, g.svel, g.sfrc, g.stcur, g.sU, g.stf, reinterpret_cast<const int *>(g.stf + m),
                        nsteps, std::max(nsteps, 1), 0};
        // One untimed step first: the first launch of a kernel loads its module (lazy
        // loading), which is no part of its time; then the copies afresh.
        gather(g, m);
        run_kernel(m, RemdDev{a.pos, a.vel, a.frc, a.tcur, a.U, a.temp, a.flag, 1, 1, 0});
        gather(g, m);
        UMS_CUDA_CHECK(cudaEventRecord(g.e0));
        run_kernel(m, a);
        UMS_CUDA_CHECK(cudaEventRecord(g.e1));
        UMS_CUDA_CHECK(cudaEventSynchronize(g.e1));
        float ms = 0.0f;
        UMS_CUDA_CHECK(cudaEventElapsedTime(&ms, g.e0, g.e1));
        return ms * 1e-3;
    }

    RemdKernelInfo kernel_info(int d) override
    {
        RemdKernelInfo k;
        UMS_CUDA_CHECK(cudaSetDevice(d));
        UMS_CUDA_CHECK(cudaDeviceGetAttribute(&k.sms, cudaDevAttrMultiProcessorCount, d));
        UMS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&k.blocks_per_sm, kernel_fn(), threads, shm));
        cudaFuncAttributes fa;
        UMS_CUDA_CHECK(cudaFuncGetAttributes(&fa, kernel_fn()));
        k.regs = fa.numRegs;
        k.threads = threads, k.atoms_per_thread = per_thread, k.shm_bytes = (long long)shm;
        return k;
    }

    // Candidates: one per atoms-per-thread count the kernel has (its fewest threads for
    // it), or for the faithful kernel one thread per atom and halvings of it down to 128.
    std::vector<int> candidates() const
    {
        std::vector<int> out;
        const int n = s.natom;
        if (variant == kFaithful) {
            for (int t = std::min(1024, round_warp(n)); t >= 128; t = round_warp(t / 2)) out.push_back(t);
        } else {
            for (int k : {1, 2, 4, 8}) {
                const int t = std::max(32, round_warp((n + k - 1) / k));
                if (t <= smem_max_threads(k) && (n + t - 1) / t <= k) out.push_back(t);
            }
        }
        std::sort(out.begin(), out.end());
        out.erase(std::unique(out.begin(), out.end()), out.end());
        return out;
    }
    std::vector<RemdTuneTrial> tune(int d, int nsteps) override
    {
        std::vector<int> slots(dev[d].nloc);
        for (int j = 0; j < dev[d].nloc; ++j) slots[j] = j;
        std::vector<RemdTuneTrial> trials;
        for (int t : candidates()) {
            if (configure(t)) continue;
            const RemdKernelInfo k = kernel_info(d);
            trials.push_back({threads, per_thread, k.blocks_per_sm, time_copies(d, slots, nsteps)});
        }
        if (trials.empty()) ums_fail("--tune: no threads-per-block configuration of kernel %s to try", kernel_name);
        const RemdTuneTrial best = *std::min_element(
            trials.begin(), trials.end(), [](const RemdTuneTrial &a, const RemdTuneTrial &b) { return a.seconds < b.seconds; });
        configure(best.threads);
        // The chosen kernel once on every device (no step: the state stays as it is), so
        // its module is loaded before the first timed interval (lazy loading, and through
        // vcuda the function's lookup, would otherwise fall inside it).
        for (int e = 0; e < ndev; ++e) {
            UMS_CUDA_CHECK(cudaSetDevice(e));
            run_kernel(1, args(dev[e], 0, 1, 0));
            UMS_CUDA_CHECK(cudaDeviceSynchronize());
        }
        return trials;
    }
};

} // namespace

RemdBackend *remd_gpu_backend(const RemdSystem &s, const RemdOptions &o)
{
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0)
        ums_unsupported("no CUDA device available (%s); --cpu runs the CPU reference",
                        err == cudaSuccess ? "0 devices" : cudaGetErrorString(err));
    const int ndev = o.gpus ? (int)o.gpus : count;
    if (ndev > count) ums_unsupported("--gpus %lld asked for, %d present", o.gpus, count);
    if (o.nrep % ndev)
        ums_usage_fail("--replicas %lld is not a multiple of the %d GPUs (each GPU takes Nrep/n replicas)", o.nrep, ndev);
    return new GpuBackend(s, o, ndev);
}

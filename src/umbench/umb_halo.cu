// umb-halo (P000 experiment 4, list 4): 2D 4-point Jacobi on an N x N periodic grid
// split into two tall halves, one MPI rank (and GPU, if there are two) per half;
// halo columns go through host memory with MPI.  Variants:
//   pack cpu: the CPU packs/unpacks the halo columns, so in explicit mode the whole
//             half crosses the bus twice per iteration (the paper's copyout/copyin);
//             in managed mode only the pages holding halo elements migrate;
//   pack gpu: kernels pack/unpack, only the halo buffers cross the bus.
// Times cover the iterations (stencil, pack/unpack and their transfers) and exclude
// MPI itself, as in the paper; the first placement of the array on the GPU and its
// final return are timed apart (place_ms, back_ms) - otherwise a managed run would be
// charged for migrating the whole array once, which the paper's ratios (GPU pack
// 1.03 / 1.04) show it was not.  The managed/explicit ratio per pack is the paper's
// result (1.87 / 0.782 for CPU pack, 1.03 / 1.04 for GPU pack).
#include <mpi.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <vector>

#include "umb_cuda.h"
#include "umstudy/support.h"

namespace {

struct Half {
    size_t ny, nx, pitch; // interior rows, interior columns, row length with halo
    size_t count() const { return (ny + 2) * pitch; }
};

__global__ void stencil(const double *__restrict__ a, double *__restrict__ anew, Half h)
{
    const size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x + 1;
    const size_t i = blockIdx.y * (size_t)blockDim.y + threadIdx.y + 1;
    if (i <= h.ny && j <= h.nx) {
        const size_t x = i * h.pitch + j;
        anew[x] = (a[x - h.pitch] + a[x + h.pitch] + a[x - 1] + a[x + 1]) * 0.25;
    }
}

// a = anew on the interior (the paper's second loop), and the periodic rows:
// row 0 <- row ny, row ny+1 <- row 1, each rank's own halves of the torus.
__global__ void copy_back(double *__restrict__ a, const double *__restrict__ anew, Half h)
{
    const size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x + 1;
    const size_t i = blockIdx.y * (size_t)blockDim.y + threadIdx.y + 1;
    if (i <= h.ny && j <= h.nx) {
        const size_t x = i * h.pitch + j;
        a[x] = anew[x];
        if (i == h.ny) a[j] = anew[x];
        if (i == 1) a[(h.ny + 1) * h.pitch + j] = anew[x];
    }
}

// Places both arrays on the GPU by touching them there (managed first touch / migration).
__global__ void place(const double *a, double *anew, size_t count)
{
    const size_t step = (size_t)gridDim.x * blockDim.x;
    for (size_t x = blockIdx.x * (size_t)blockDim.x + threadIdx.x; x < count; x += step) anew[x] = a[x];
}

// send[0][i] = a[i][1] (to the left neighbour), send[1][i] = a[i][nx] (to the right).
__global__ void pack(const double *a, double *send, Half h)
{
    const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < h.ny) {
        send[i] = a[(i + 1) * h.pitch + 1];
        send[h.ny + i] = a[(i + 1) * h.pitch + h.nx];
    }
}
// a[i][0] = recv[0][i] (from the left), a[i][nx+1] = recv[1][i] (from the right).
__global__ void unpack(double *a, const double *recv, Half h)
{
    const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < h.ny) {
        a[(i + 1) * h.pitch] = recv[i];
        a[(i + 1) * h.pitch + h.nx + 1] = recv[h.ny + i];
    }
}

void cpu_pack(const double *a, double *send, Half h)
{
#pragma omp parallel for
    for (size_t i = 0; i < h.ny; ++i) {
        send[i] = a[(i + 1) * h.pitch + 1];
        send[h.ny + i] = a[(i + 1) * h.pitch + h.nx];
    }
}
void cpu_unpack(double *a, const double *recv, Half h)
{
#pragma omp parallel for
    for (size_t i = 0; i < h.ny; ++i) {
        a[(i + 1) * h.pitch] = recv[i];
        a[(i + 1) * h.pitch + h.nx + 1] = recv[h.ny + i];
    }
}

// The global grid value at (row, col): both ranks and the reference agree on it.
inline double initial(size_t row, size_t col) { return (double)((row + col) % 3343); }

// Both halo columns go to the other rank; with two ranks on a torus the left and the
// right neighbour are the same rank, so tags tell the two columns apart.
double exchange(double *send, double *recv, Half h, int other)
{
    const double t0 = MPI_Wtime();
    MPI_Request req[4];
    const int n = (int)h.ny;
    MPI_Irecv(recv, n, MPI_DOUBLE, other, 1, MPI_COMM_WORLD, &req[0]);          // its right column
    MPI_Irecv(recv + h.ny, n, MPI_DOUBLE, other, 0, MPI_COMM_WORLD, &req[1]);   // its left column
    MPI_Isend(send, n, MPI_DOUBLE, other, 0, MPI_COMM_WORLD, &req[2]);
    MPI_Isend(send + h.ny, n, MPI_DOUBLE, other, 1, MPI_COMM_WORLD, &req[3]);
    MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
    return MPI_Wtime() - t0;
}

struct Result {
    double total, mpi, sum, place, back;
};

Result run(const std::string &mode, const std::string &packing, Half h, int rank, long long iters)
{
    const bool managed = mode == "managed", gpu_pack = packing == "gpu";
    const size_t bytes = h.count() * sizeof(double), hbytes = 2 * h.ny * sizeof(double);
    double *a = nullptr, *anew = nullptr, *host = nullptr;
    double *send_d = nullptr, *recv_d = nullptr;
    std::vector<double> send(2 * h.ny), recv(2 * h.ny);
    if (managed) {
        UMS_CUDA_CHECK(cudaMallocManaged(&a, bytes));
        UMS_CUDA_CHECK(cudaMallocManaged(&anew, bytes));
        host = a;
        if (gpu_pack) {
            UMS_CUDA_CHECK(cudaMallocManaged(&send_d, hbytes));
            UMS_CUDA_CHECK(cudaMallocManaged(&recv_d, hbytes));
        }
    } else {
        UMS_CUDA_CHECK(cudaMalloc(&a, bytes));
        UMS_CUDA_CHECK(cudaMalloc(&anew, bytes));
        UMS_CUDA_CHECK(cudaMallocHost(&host, bytes));
        if (gpu_pack) {
            UMS_CUDA_CHECK(cudaMalloc(&send_d, hbytes));
            UMS_CUDA_CHECK(cudaMalloc(&recv_d, hbytes));
        }
    }
    // Global column of local column j: rank 0 owns [0, nx), rank 1 [nx, 2nx).
    const size_t col0 = (size_t)rank * h.nx;
    const size_t N = 2 * h.nx;
#pragma omp parallel for
    for (size_t i = 0; i < h.ny + 2; ++i)
        for (size_t j = 0; j < h.pitch; ++j)
            host[i * h.pitch + j] = initial((i + h.ny - 1) % h.ny, (col0 + j + N - 1) % N);
    const dim3 blk(128, 4), grd((unsigned)((h.nx + 127) / 128), (unsigned)((h.ny + 3) / 4));
    const unsigned pblocks = (unsigned)((h.ny + 255) / 256);
    const int other = 1 - rank;

    MPI_Barrier(MPI_COMM_WORLD);
    double mpi = 0.0;
    const double tp = MPI_Wtime();
    if (!managed) UMS_CUDA_CHECK(cudaMemcpy(a, host, bytes, cudaMemcpyHostToDevice));
    place<<<1024, 256>>>(a, anew, h.count());
    UMS_CUDA_CHECK_LAUNCH(1);
    const double t0 = MPI_Wtime();
    for (long long it = 0; it < iters; ++it) {
        stencil<<<grd, blk>>>(a, anew, h);
        copy_back<<<grd, blk>>>(a, anew, h);
        UMS_CUDA_CHECK_LAUNCH(0);
        if (gpu_pack) {
            pack<<<pblocks, 256>>>(a, send_d, h);
            UMS_CUDA_CHECK_LAUNCH(1);
            // Managed: the CPU copies the GPU-packed buffer into MPI's host buffer,
            // which is where the migration happens (the paper did the same).
            if (managed) memcpy(send.data(), send_d, hbytes);
            else UMS_CUDA_CHECK(cudaMemcpy(send.data(), send_d, hbytes, cudaMemcpyDeviceToHost));
            mpi += exchange(send.data(), recv.data(), h, other);
            if (managed) memcpy(recv_d, recv.data(), hbytes);
            else UMS_CUDA_CHECK(cudaMemcpy(recv_d, recv.data(), hbytes, cudaMemcpyHostToDevice));
            unpack<<<pblocks, 256>>>(a, recv_d, h);
            UMS_CUDA_CHECK_LAUNCH(0);
        } else {
            if (managed) UMS_CUDA_CHECK(cudaDeviceSynchronize());
            else UMS_CUDA_CHECK(cudaMemcpy(host, a, bytes, cudaMemcpyDeviceToHost));
            cpu_pack(host, send.data(), h);
            mpi += exchange(send.data(), recv.data(), h, other);
            cpu_unpack(host, recv.data(), h);
            if (!managed) UMS_CUDA_CHECK(cudaMemcpy(a, host, bytes, cudaMemcpyHostToDevice));
        }
    }
    UMS_CUDA_CHECK(cudaDeviceSynchronize());
    const double t1 = MPI_Wtime();
    if (!managed) UMS_CUDA_CHECK(cudaMemcpy(host, a, bytes, cudaMemcpyDeviceToHost));
    double sum = 0.0;
#pragma omp parallel for reduction(+ : sum)
    for (size_t i = 1; i <= h.ny; ++i)
        for (size_t j = 1; j <= h.nx; ++j) sum += host[i * h.pitch + j];
    const double back = MPI_Wtime() - t1;

    if (managed) {
        cudaFree(a);
        cudaFree(anew);
        cudaFree(send_d);
        cudaFree(recv_d);
    } else {
        cudaFree(a);
        cudaFree(anew);
        cudaFreeHost(host);
        cudaFree(send_d);
        cudaFree(recv_d);
    }
    double global_sum = 0.0;
    MPI_Allreduce(&sum, &global_sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return {t1 - t0, mpi, global_sum, t0 - tp, back};
}

// Serial reference of the whole torus (small N only): the sum after `iters` sweeps.
double reference(size_t N, long long iters)
{
    std::vector<double> a(N * N), b(N * N);
    for (size_t i = 0; i < N; ++i)
        for (size_t j = 0; j < N; ++j) a[i * N + j] = initial(i, j);
    for (long long it = 0; it < iters; ++it) {
        for (size_t i = 0; i < N; ++i)
            for (size_t j = 0; j < N; ++j)
                b[i * N + j] = (a[((i + N - 1) % N) * N + j] + a[((i + 1) % N) * N + j] +
                                a[i * N + (j + N - 1) % N] + a[i * N + (j + 1) % N]) * 0.25;
        a.swap(b);
    }
    double s = 0.0;
    for (double v : a) s += v;
    return s;
}

std::vector<std::string> split(const char *list)
{
    std::vector<std::string> out;
    std::string s = list;
    for (size_t pos = 0; pos <= s.size();) {
        size_t end = s.find(',', pos);
        if (end == std::string::npos) end = s.size();
        out.push_back(s.substr(pos, end - pos));
        pos = end + 1;
    }
    return out;
}

} // namespace

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ums_json_init("umb-halo");
    long long n = 30720, iters = 20, device = -1;
    const char *packs = "cpu,gpu", *modes = "explicit,managed";
    int verify = 0;
    const ums_arg args[] = {
        {"n", UMS_ARG_INT, &n, "global grid side N (even; paper: 30720 and 61440)", 4, 1 << 20, nullptr},
        {"iterations", UMS_ARG_INT, &iters, "Jacobi iterations (default 20, the paper's)", 1, 1e6, nullptr},
        {"packs", UMS_ARG_STRING, &packs, "comma list of cpu,gpu (default both)", 0, -1, nullptr},
        {"modes", UMS_ARG_STRING, &modes, "comma list of explicit,managed (default both)", 0, -1, nullptr},
        {"device", UMS_ARG_INT, &device, "GPU ordinal; default rank % number of GPUs", -1, 1024, nullptr},
        {"verify", UMS_ARG_FLAG, &verify, "also compare with a serial CPU reference (N <= 2048)", 0, -1, nullptr},
    };
    // Only rank 0 speaks: usage errors would otherwise print twice.
    if (rank != 0) freopen("/dev/null", "w", stderr);
    ums_args_parse(argc, argv, "P000 exp. 4: 2-rank halo-exchange stencil, explicit vs managed", args,
                   sizeof args / sizeof *args);
    if (rank != 0) freopen("/dev/null", "w", stdout);
    if (size != 2) ums_fail("umb-halo needs exactly 2 MPI ranks (one per half of the grid), got %d", size);
    if (n % 2) ums_fail("--n %lld must be even (two halves)", n);
    if (verify && n > 2048) ums_fail("--verify needs --n <= 2048 (the reference is serial)");
    const auto pack_list = split(packs), mode_list = split(modes);
    for (const auto &p : pack_list)
        if (p != "cpu" && p != "gpu") ums_fail("unknown pack '%s' (cpu|gpu)", p.c_str());
    for (const auto &m : mode_list)
        if (m != "explicit" && m != "managed") ums_fail("unknown mode '%s' (explicit|managed)", m.c_str());

    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) ums_unsupported("no CUDA device available");
    const UmbDevice dev = umb_cuda_device(device >= 0 ? (int)device : rank % ndev);
    Half h = {(size_t)n, (size_t)n / 2, (size_t)n / 2 + 2};
    int shared = 0, gpus = ndev < 2 ? 1 : 2;
    if (device < 0 && ndev < 2) shared = 1;
    // Per rank: a and anew on the GPU; two ranks on one GPU need twice that.
    umb_cuda_require(dev, 2 * h.count() * sizeof(double) * (shared ? 2 : 1), "the two arrays of both halves");
    ums_param_int("n", n);
    ums_param_int("iterations", iters);
    ums_param_int("ranks", size);
    ums_param_int("gpus", gpus);
    ums_param_num("halo_spacing_kib", h.pitch * sizeof(double) / 1024.0);

    const double ref = verify ? reference((size_t)n, iters) : 0.0;
    std::vector<double> ms(4, -1.0), sums;
    for (const auto &p : pack_list)
        for (const auto &m : mode_list) {
            Result r = run(m, p, h, rank, iters);
            double busy = r.total - r.mpi, worst = 0.0, mpi_max = 0.0;
            MPI_Reduce(&busy, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            MPI_Reduce(&r.mpi, &mpi_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            ums_rec rec;
            ums_rec_begin(&rec, "time", worst * 1e3, "ms");
            ums_rec_str(&rec, "mode", m.c_str());
            ums_rec_str(&rec, "pack", p.c_str());
            ums_rec_num(&rec, "mpi_ms", mpi_max * 1e3);
            ums_rec_num(&rec, "place_ms", r.place * 1e3);
            ums_rec_num(&rec, "back_ms", r.back * 1e3);
            ums_rec_num(&rec, "checksum", r.sum);
            if (verify) ums_rec_num(&rec, "reference", ref);
            ums_rec_emit(&rec);
            ms[(p == "gpu") * 2 + (m == "managed")] = worst * 1e3;
            if (verify && fabs(r.sum - ref) > 1e-12 * fabs(ref))
                ums_fail("%s/%s pack: checksum %.17g differs from the CPU reference %.17g", m.c_str(), p.c_str(), r.sum, ref);
            if (!sums.empty() && r.sum != sums.front())
                ums_fail("%s/%s pack: checksum %.17g differs from the first variant's %.17g", m.c_str(), p.c_str(), r.sum, sums.front());
            sums.push_back(r.sum);
        }
    for (int p = 0; p < 2; ++p)
        if (ms[p * 2] > 0 && ms[p * 2 + 1] > 0)
            ums_result(p ? "ratio_gpu_pack" : "ratio_cpu_pack", ms[p * 2 + 1] / ms[p * 2], "ratio");
    MPI_Finalize();
    return 0;
}

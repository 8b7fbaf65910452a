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
// result (1.87 / 0.782 for CPU pack, 1.03 / 1.04 for GPU pack).  The grid, the CPU
// side of the exchange and the reporting are shared with umb-halo-acc (umb_halo_common.h).
#include <string.h>
#include <string>
#include <vector>

#include "umb_cuda.h"
#include "umb_halo_common.h"
#include "umstudy/support.h"

namespace {

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

HaloResult run(const std::string &mode, const std::string &packing, const HaloOptions &o)
{
    const Half h = o.h;
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
    halo_fill(host, o);
    const dim3 blk(128, 4), grd((unsigned)((h.nx + 127) / 128), (unsigned)((h.ny + 3) / 4));
    const unsigned pblocks = (unsigned)((h.ny + 255) / 256);
    const int other = 1 - o.rank;

    MPI_Barrier(MPI_COMM_WORLD);
    double mpi = 0.0;
    const double tp = MPI_Wtime();
    if (!managed) UMS_CUDA_CHECK(cudaMemcpy(a, host, bytes, cudaMemcpyHostToDevice));
    place<<<1024, 256>>>(a, anew, h.count());
    UMS_CUDA_CHECK_LAUNCH(1);
    const double t0 = MPI_Wtime();
    for (long long it = 0; it < o.iters; ++it) {
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
            mpi += halo_exchange(send.data(), recv.data(), h, other);
            if (managed) memcpy(recv_d, recv.data(), hbytes);
            else UMS_CUDA_CHECK(cudaMemcpy(recv_d, recv.data(), hbytes, cudaMemcpyHostToDevice));
            unpack<<<pblocks, 256>>>(a, recv_d, h);
            UMS_CUDA_CHECK_LAUNCH(0);
        } else {
            if (managed) UMS_CUDA_CHECK(cudaDeviceSynchronize());
            else UMS_CUDA_CHECK(cudaMemcpy(host, a, bytes, cudaMemcpyDeviceToHost));
            halo_cpu_pack(host, send.data(), h);
            mpi += halo_exchange(send.data(), recv.data(), h, other);
            halo_cpu_unpack(host, recv.data(), h);
            if (!managed) UMS_CUDA_CHECK(cudaMemcpy(a, host, bytes, cudaMemcpyHostToDevice));
        }
    }
    UMS_CUDA_CHECK(cudaDeviceSynchronize());
    const double t1 = MPI_Wtime();
    if (!managed) UMS_CUDA_CHECK(cudaMemcpy(host, a, bytes, cudaMemcpyDeviceToHost));
    const double sum = halo_sum(host, h);
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
    return {t1 - t0, mpi, sum, t0 - tp, back};
}

} // namespace

int main(int argc, char **argv)
{
    const HaloOptions o = halo_setup(&argc, &argv, "explicit|managed", "explicit,managed");
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) ums_unsupported("no CUDA device available");
    const HaloGpu g = halo_gpu(o, ndev);
    const UmbDevice dev = umb_cuda_device(g.ordinal);
    // Per rank: a and anew on the GPU; two ranks on one GPU need twice that.
    umb_cuda_require(dev, 2 * o.h.count() * sizeof(double) * g.sharing, "the two arrays of both halves");
    halo_params(o, g);
    return halo_measure(o, run);
}

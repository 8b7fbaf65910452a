// A program whose module is a few KiB of image declaring a 1 GiB __device__ array: what
// a tenant's quota must count before the driver loads the module (vcuda-server charges
// the module's data to the tenant, see server_gpu.h):
//   vcuda-tenancy-global [HOLD_MS]   a kernel writes the array (the module loads at the
//                                    first launch), prints the error and the free device
//                                    memory before and after, holds HOLD_MS: exit 0 when
//                                    the kernel ran, 1 otherwise (e.g. refused by a quota)
// Results are JSON lines on stdout; 77 with no GPU.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

__device__ char big[1u << 30];

__global__ void touch(char *out)
{
    big[(size_t)threadIdx.x << 20] = 1;
    *out = big[0];
}

int main(int argc, char **argv)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("{\"bench\":\"vcuda-tenancy\",\"status\":\"unsupported\",\"reason\":\"no CUDA device\"}\n");
        return 77;
    }
    int hold = argc > 1 ? atoi(argv[1]) : 0;
    size_t f0 = 0, f1 = 0, total = 0;
    char *d = nullptr, h = 0;
    cudaMalloc(&d, 1);
    cudaMemGetInfo(&f0, &total);
    touch<<<1, 32>>>(d);
    cudaError_t e = cudaGetLastError();
    if (!e) e = cudaMemcpy(&h, d, 1, cudaMemcpyDeviceToHost);
    cudaMemGetInfo(&f1, &total);
    printf("{\"bench\":\"vcuda-tenancy\",\"mode\":\"big-global\",\"global_mib\":1024,\"error\":\"%s\",\"value\":%d,"
           "\"free_before_mib\":%zu,\"free_after_mib\":%zu}\n", cudaGetErrorName(e), h, f0 >> 20, f1 >> 20);
    fflush(stdout);
    if (!e && hold > 0) std::this_thread::sleep_for(std::chrono::milliseconds(hold));
    return e == cudaSuccess && h == 1 ? 0 : 1;
}

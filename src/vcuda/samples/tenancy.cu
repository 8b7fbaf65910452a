// What one tenant of a shared vcuda server may observe, as an ordinary CUDA program
// (-cudart shared; runs the same on the real runtime):
//   vcuda-tenancy device-state   increments a __device__ counter once and prints it:
//                                every run prints 1 unless module state leaks between runs
//   vcuda-tenancy assert         a device-side assert: expects cudaErrorAssert (710)
//   vcuda-tenancy spin MS        a kernel that runs MS milliseconds, then 64 MiB H2D
//                                behind it and a synchronize: expects success however
//                                long MS is (exit 1 and the error otherwise)
//   vcuda-tenancy latency N      medians of N calls: 1 KiB H2D, launch + synchronize
//   vcuda-tenancy hold MIB MS    allocates MIB MiB, holds it MS milliseconds: exit 0 when
//                                the allocation succeeded (a tenant's quota refuses it)
//   vcuda-tenancy limit-stack KIB  sets cudaLimitStackSize to KIB KiB and launches a
//                                kernel; prints the free device memory before and after
//                                (the driver reserves the stack for every resident thread):
//                                exit 0 when the limit was set
//   vcuda-tenancy limits         prints the stack, heap and printf FIFO limits and the
//                                free device memory: what the next client finds
//   vcuda-tenancy local          a kernel with a 64 KiB local array per thread: prints the
//                                free device memory before and after (the driver grows its
//                                local memory reservation at the launch; not charged to a
//                                tenant, see server_gpu.h: this measures what that leaves)
// Results are JSON lines on stdout; exit 0 when the expectation holds, 77 with no GPU.
// (A module declaring a 1 GiB __device__ array: vcuda-tenancy-global, tenancy_global.cu.)
#undef NDEBUG // the device-side assert must stay in a release build
#include <cassert>
#include <chrono>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

__device__ int counter;

__global__ void bump(int *out)
{
    counter += 1;
    *out = counter;
}

__global__ void must_fail(int v) { assert(v == 0); }

__global__ void spin(unsigned long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); while (t - t0 < ns);
}

__global__ void nothing() {}

__global__ void local_frame(int n, int *out)
{
    volatile char buf[64 << 10]; // indexed at run time: in local memory
    for (int i = 0; i < n; ++i) buf[(i * 4099) & 0xffff] = (char)i;
    *out = buf[n & 0xffff];
}

static double now_us()
{
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char **argv)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("{\"bench\":\"vcuda-tenancy\",\"status\":\"unsupported\",\"reason\":\"no CUDA device\"}\n");
        return 77;
    }
    const char *mode = argc > 1 ? argv[1] : "device-state";
    if (!strcmp(mode, "device-state")) {
        int *d, h = -1;
        cudaMalloc(&d, sizeof h);
        bump<<<1, 1>>>(d);
        cudaError_t e = cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
        printf("{\"bench\":\"vcuda-tenancy\",\"mode\":\"device-state\",\"counter\":%d,\"error\":\"%s\"}\n", h, cudaGetErrorName(e));
        return e == cudaSuccess && h == 1 ? 0 : 1;
    }
    if (!strcmp(mode, "assert")) {
        must_fail<<<1, 1>>>(1);
        cudaError_t e = cudaDeviceSynchronize();
        printf("{\"bench\":\"vcuda-tenancy\",\"mode\":\"assert\",\"error\":%d,\"name\":\"%s\"}\n", (int)e, cudaGetErrorName(e));
        return e == cudaErrorAssert ? 0 : 1;
    }
    if (!strcmp(mode, "spin")) {
        double ms = argc > 2 ? atof(argv[2]) : 1000;
        size_t bytes = 64u << 20;
        std::vector<char> h(bytes, 1);
        char *d;
        cudaMalloc(&d, bytes);
        double t0 = now_us();
        spin<<<1, 1>>>((unsigned long long)(ms * 1e6));
        cudaError_t e1 = cudaMemcpy(d, h.data(), bytes, cudaMemcpyHostToDevice); // waits behind the kernel
        cudaError_t e2 = cudaDeviceSynchronize();
        double t = (now_us() - t0) / 1e3;
        printf("{\"bench\":\"vcuda-tenancy\",\"mode\":\"spin\",\"kernel_ms\":%.0f,\"elapsed_ms\":%.0f,\"memcpy\":\"%s\",\"sync\":\"%s\"}\n",
               ms, t, cudaGetErrorName(e1), cudaGetErrorName(e2));
        return e1 == cudaSuccess && e2 == cudaSuccess ? 0 : 1;
    }
    if (!strcmp(mode, "latency")) {
        int calls = argc > 2 ? atoi(argv[2]) : 2000;
        char h[1024] = {0}, *d;
        cudaMalloc(&d, sizeof h);
        std::vector<double> a(calls), b(calls);
        for (int i = 0; i < 100; ++i) cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice); // warm-up
        for (int i = 0; i < calls; ++i) {
            double t0 = now_us();
            cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
            a[i] = now_us() - t0;
        }
        for (int i = 0; i < 100; ++i) nothing<<<1, 1>>>(), cudaDeviceSynchronize();
        for (int i = 0; i < calls; ++i) {
            double t0 = now_us();
            nothing<<<1, 1>>>();
            cudaDeviceSynchronize();
            b[i] = now_us() - t0;
        }
        std::sort(a.begin(), a.end()), std::sort(b.begin(), b.end());
        printf("{\"bench\":\"vcuda-tenancy\",\"mode\":\"latency\",\"calls\":%d,\"h2d_1k_us\":%.2f,\"h2d_1k_p10_us\":%.2f,"
               "\"h2d_1k_p90_us\":%.2f,\"launch_sync_us\":%.2f,\"launch_sync_p10_us\":%.2f,\"launch_sync_p90_us\":%.2f}\n",
               calls, a[calls / 2], a[calls / 10], a[calls * 9 / 10], b[calls / 2], b[calls / 10], b[calls * 9 / 10]);
        return 0;
    }
    if (!strcmp(mode, "hold")) {
        size_t mib = argc > 2 ? strtoull(argv[2], NULL, 10) : 64;
        int ms = argc > 3 ? atoi(argv[3]) : 1000;
        void *d = NULL;
        cudaError_t e = cudaMalloc(&d, mib << 20);
        if (!e) e = cudaMemset(d, 1, mib << 20);
        printf("{\"bench\":\"vcuda-tenancy\",\"mode\":\"hold\",\"mib\":%zu,\"error\":\"%s\"}\n", mib, cudaGetErrorName(e));
        fflush(stdout);
        if (!e) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        return e == cudaSuccess ? 0 : 1;
    }
    if (!strcmp(mode, "limit-stack")) {
        size_t kib = argc > 2 ? strtoull(argv[2], NULL, 10) : 64, f0 = 0, f1 = 0, total = 0, got = 0;
        cudaMemGetInfo(&f0, &total);
        cudaError_t e = cudaDeviceSetLimit(cudaLimitStackSize, kib << 10);
        cudaDeviceGetLimit(&got, cudaLimitStackSize);
        nothing<<<1, 1>>>(); // (where the driver reserves it at the next launch)
        cudaError_t e2 = cudaDeviceSynchronize();
        cudaMemGetInfo(&f1, &total);
        printf("{\"bench\":\"vcuda-tenancy\",\"mode\":\"limit-stack\",\"kib\":%zu,\"error\":\"%s\",\"stack\":%zu,"
               "\"sync\":\"%s\",\"free_before_mib\":%zu,\"free_after_mib\":%zu}\n", kib, cudaGetErrorName(e), got,
               cudaGetErrorName(e2), f0 >> 20, f1 >> 20);
        return e == cudaSuccess && e2 == cudaSuccess ? 0 : 1;
    }
    if (!strcmp(mode, "local")) {
        size_t f0 = 0, f1 = 0, total = 0;
        int *d = nullptr;
        cudaMalloc(&d, sizeof(int));
        cudaMemGetInfo(&f0, &total);
        local_frame<<<1, 32>>>(1000, d);
        cudaError_t e = cudaDeviceSynchronize();
        cudaMemGetInfo(&f1, &total);
        printf("{\"bench\":\"vcuda-tenancy\",\"mode\":\"local\",\"local_kib\":64,\"error\":\"%s\",\"free_before_mib\":%zu,"
               "\"free_after_mib\":%zu}\n", cudaGetErrorName(e), f0 >> 20, f1 >> 20);
        return e == cudaSuccess ? 0 : 1;
    }
    if (!strcmp(mode, "limits")) {
        size_t stack = 0, heap = 0, fifo = 0, f = 0, total = 0;
        cudaError_t e = cudaDeviceGetLimit(&stack, cudaLimitStackSize);
        cudaDeviceGetLimit(&heap, cudaLimitMallocHeapSize);
        cudaDeviceGetLimit(&fifo, cudaLimitPrintfFifoSize);
        cudaMemGetInfo(&f, &total);
        printf("{\"bench\":\"vcuda-tenancy\",\"mode\":\"limits\",\"error\":\"%s\",\"stack\":%zu,\"heap\":%zu,"
               "\"printf_fifo\":%zu,\"free_mib\":%zu,\"total_mib\":%zu}\n", cudaGetErrorName(e), stack, heap, fifo, f >> 20,
               total >> 20);
        return e == cudaSuccess ? 0 : 1;
    }
    fprintf(stderr, "vcuda-tenancy: unknown mode %s\n", mode);
    return 2;
}

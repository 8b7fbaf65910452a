// What one tenant of a shared vcuda server may observe, as an ordinary CUDA program
// (-cudart shared; runs the same on the real runtime):
//   vcuda-tenancy device-state   increments a __device__ counter once and prints it:
//                                every run prints 1 unless module state leaks between runs
//   vcuda-tenancy assert         a device-side assert: expects cudaErrorAssert (710)
//   vcuda-tenancy spin MS        a kernel that runs MS milliseconds, then 64 MiB H2D
//                                behind it and a synchronize: expects success however
//                                long MS is (exit 1 and the error otherwise)
//   vcuda-tenancy latency N      medians of N calls: 1 KiB H2D, launch + synchronize
//   vcuda-tenancy alloc MIB MS   allocates MIB MiB, holds it MS milliseconds: exit 0 when
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
//   vcuda-tenancy hold FILE      client A: fills 256 MiB with a pattern of the word
//                                addresses and a seed, prints a device pointer into it and
//                                the seed, waits until FILE exists, then checks every word
//                                (a kernel, which must still run) and reads back the 4 KiB
//                                at the pointer: exit 0 if all are intact
//   vcuda-tenancy peek PTR SEED [write]
//                                client B: a kernel copies 4 KiB at PTR (A's pointer) into
//                                B's own buffer (with write: then overwrites them); prints
//                                the error and how many words were A's pattern; exit 0
//                                whatever happened to the kernel (the caller judges what
//                                the isolation mode allows), 1 if B failed before it
// Results are JSON lines on stdout; exit 0 when the expectation holds, 77 with no GPU.
// (A module declaring a 1 GiB __device__ array: vcuda-tenancy-global, tenancy_global.cu.)
#undef NDEBUG // the device-side assert must stay in a release build
#include <cassert>
#include <chrono>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <ctime>
#include <thread>
#include <unistd.h>
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

// The pattern of hold/peek: a word's value follows from its address, so the reader needs
// only the seed to tell whether the words it read are A's.
__host__ __device__ unsigned pattern(unsigned long long addr, unsigned seed)
{
    return (unsigned)((addr / 4 * 0x9E3779B97F4A7C15ull) >> 32) ^ seed;
}

__global__ void fill(unsigned *p, size_t n, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = pattern((unsigned long long)(p + i), seed);
}

__global__ void check(const unsigned *p, size_t n, unsigned seed, unsigned long long *bad)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        if (p[i] != pattern((unsigned long long)(p + i), seed)) atomicAdd(bad, 1ull);
}

__global__ void copy_words(unsigned *src, unsigned *dst, int n, int overwrite)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        dst[i] = src[i];
        if (overwrite) src[i] = ~src[i];
    }
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
    if (!strcmp(mode, "alloc")) {
        size_t mib = argc > 2 ? strtoull(argv[2], NULL, 10) : 64;
        int ms = argc > 3 ? atoi(argv[3]) : 1000;
        void *d = NULL;
        cudaError_t e = cudaMalloc(&d, mib << 20);
        if (!e) e = cudaMemset(d, 1, mib << 20);
        printf("{\"bench\":\"vcuda-tenancy\",\"mode\":\"alloc\",\"mib\":%zu,\"error\":\"%s\"}\n", mib, cudaGetErrorName(e));
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
    if (!strcmp(mode, "hold") && argc > 2) {
        const size_t bytes = 256u << 20, n = bytes / 4, words = 1024;
        unsigned seed = (unsigned)now_us() ^ 0x5eedu, *d;
        unsigned long long *bad, nbad = ~0ull;
        if (cudaMalloc(&d, bytes) != cudaSuccess || cudaMalloc(&bad, sizeof *bad) != cudaSuccess) {
            printf("{\"bench\":\"vcuda-tenancy\",\"mode\":\"hold\",\"error\":\"%s\"}\n", cudaGetErrorName(cudaGetLastError()));
            return 1;
        }
        fill<<<1024, 256>>>(d, n, seed);
        cudaError_t e = cudaDeviceSynchronize();
        unsigned *at = d + n / 4 * 3; // well inside: another process's first allocations do not reach it
        printf("{\"bench\":\"vcuda-tenancy\",\"mode\":\"hold\",\"ptr\":\"%p\",\"seed\":%u,\"bytes\":%zu,\"fill\":\"%s\"}\n",
               (void *)at, seed, bytes, cudaGetErrorName(e));
        fflush(stdout);
        if (e != cudaSuccess) return 1;
        double t0 = now_us();
        while (access(argv[2], F_OK) != 0) {
            if (now_us() - t0 > 300e6) {
                printf("{\"bench\":\"vcuda-tenancy\",\"mode\":\"hold-verify\",\"error\":\"no %s within 300 s\"}\n", argv[2]);
                return 1;
            }
            struct timespec ts = {0, 50000000};
            nanosleep(&ts, nullptr);
        }
        std::vector<unsigned> h(words);
        cudaError_t e1 = cudaMemset(bad, 0, sizeof *bad);
        if (e1 == cudaSuccess) check<<<1024, 256>>>(d, n, seed, bad), e1 = cudaDeviceSynchronize();
        if (e1 == cudaSuccess) e1 = cudaMemcpy(&nbad, bad, sizeof nbad, cudaMemcpyDeviceToHost);
        cudaError_t e2 = cudaMemcpy(h.data(), at, words * 4, cudaMemcpyDeviceToHost);
        size_t same = 0;
        for (size_t i = 0; i < words; ++i) same += h[i] == pattern((unsigned long long)(at + i), seed);
        bool intact = e1 == cudaSuccess && e2 == cudaSuccess && nbad == 0 && same == words;
        printf("{\"bench\":\"vcuda-tenancy\",\"mode\":\"hold-verify\",\"check_kernel\":\"%s\",\"bad_words\":%lld,"
               "\"readback\":\"%s\",\"readback_intact_words\":%zu,\"intact\":%s}\n",
               cudaGetErrorName(e1), e1 == cudaSuccess ? (long long)nbad : -1LL, cudaGetErrorName(e2), same,
               intact ? "true" : "false");
        return intact ? 0 : 1;
    }
    if (!strcmp(mode, "peek") && argc > 3) {
        const int words = 1024;
        unsigned *src = (unsigned *)(uintptr_t)strtoull(argv[2], nullptr, 0), *dst;
        unsigned seed = (unsigned)strtoul(argv[3], nullptr, 0);
        int overwrite = argc > 4 && !strcmp(argv[4], "write");
        std::vector<unsigned> h(words, 0);
        if (cudaMalloc(&dst, words * 4) != cudaSuccess || cudaMemset(dst, 0, words * 4) != cudaSuccess) {
            printf("{\"bench\":\"vcuda-tenancy\",\"mode\":\"peek\",\"setup\":\"%s\"}\n", cudaGetErrorName(cudaGetLastError()));
            return 1;
        }
        copy_words<<<words / 256, 256>>>(src, dst, words, overwrite);
        cudaError_t el = cudaGetLastError(), e = cudaDeviceSynchronize();
        cudaError_t ec = e == cudaSuccess ? cudaMemcpy(h.data(), dst, words * 4, cudaMemcpyDeviceToHost) : e;
        int same = 0;
        for (int i = 0; i < words && ec == cudaSuccess; ++i) same += h[i] == pattern((unsigned long long)(src + i), seed);
        printf("{\"bench\":\"vcuda-tenancy\",\"mode\":\"peek\",\"ptr\":\"%p\",\"write\":%s,\"launch\":\"%s\",\"sync\":\"%s\","
               "\"sync_code\":%d,\"words\":%d,\"words_of_other\":%d,\"read_other\":%s}\n",
               (void *)src, overwrite ? "true" : "false", cudaGetErrorName(el), cudaGetErrorName(e), (int)e, words, same,
               same > 0 ? "true" : "false");
        return 0;
    }
    fprintf(stderr, "vcuda-tenancy: unknown mode %s\n", mode);
    return 2;
}

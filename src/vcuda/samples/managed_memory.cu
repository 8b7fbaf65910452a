// Managed memory as programs use it, every result checked on the host: run on the local
// runtime and through vcuda, it must print the same ok lines.
//   - cudaMallocManaged arrays written by the host, a kernel, read back after
//     synchronizing (a SAXPY over `--elements`, several rounds);
//   - a __managed__ counter and array, written on both sides in turn;
//   - cudaMemPrefetchAsync to the device and back to the host, cudaMemAdvise, and the
//     attributes reported for the range;
//   - memory attached to the host (cudaMemAttachHost) and to one stream;
//   - a linked list in managed memory whose pointers the kernel follows;
//   - what the device says about concurrent access, and the host waiting for the
//     device before touching managed memory where that is 0 (as the programming guide
//     asks).
// One JSON line per timed phase on stdout ({"metric": ..., "value": seconds}).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>

#include "sample_checks.h"

__managed__ int counter;
__managed__ float table[256];

__global__ void saxpy(float a, const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void bump(int by)
{
    atomicAdd(&counter, by);
    for (int i = threadIdx.x; i < 256; i += blockDim.x) table[i] = table[i] * 2.0f + 1.0f;
}

struct node {
    node *next;
    int value;
};

__global__ void walk(const node *head, int *sum)
{
    int s = 0;
    for (const node *n = head; n; n = n->next) s += n->value;
    *sum = s;
}

static double now()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static void phase(const char *what, double seconds, size_t bytes)
{
    printf("{\"bench\":\"vcuda-sample-managed\",\"metric\":\"%s\",\"value\":%.6f,\"unit\":\"s\",\"bytes\":%zu}\n", what,
           seconds, bytes);
}

int main(int argc, char **argv)
{
    long long n = 1 << 24;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--elements") && i + 1 < argc) n = atoll(argv[++i]);
        else return fprintf(stderr, "usage: managed_memory [--elements N]\n"), 2;
    }
    if (n <= 0 || n > (1ll << 31)) return fprintf(stderr, "managed_memory: --elements must be in 1..2^31\n"), 2;
    int dev = 0, managed = 0, concurrent = 0;
    CHECK(cudaGetDevice(&dev));
    CHECK(cudaDeviceGetAttribute(&managed, cudaDevAttrManagedMemory, dev));
    CHECK(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, dev));
    printf("managed memory %d, concurrent managed access %d\n", managed, concurrent);
    if (!managed) return printf("the device has no managed memory\n"), 77;

    // SAXPY rounds: the host writes, the kernel reads and writes, the host checks
    size_t bytes = (size_t)n * sizeof(float);
    float *x = nullptr, *y = nullptr;
    CHECK(cudaMallocManaged(&x, bytes));
    CHECK(cudaMallocManaged(&y, bytes));
    double t = now();
    for (long long i = 0; i < n; ++i) x[i] = (float)(i % 1000), y[i] = 1.0f;
    phase("host_init", now() - t, 2 * bytes);
    int threads = 256, blocks = (int)((n + threads - 1) / threads);
    bool good = true;
    for (int round = 1; round <= 3; ++round) {
        t = now();
        saxpy<<<blocks, threads>>>(2.0f, x, y, (int)n);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        phase("saxpy", now() - t, 2 * bytes);
        t = now();
        for (long long i = 0; i < n; i += 1 + (i % 7)) // every page, not every element
            if (y[i] != 1.0f + 2.0f * round * (float)(i % 1000)) good = false;
        phase("host_check", now() - t, bytes);
    }
    EXPECT(good, "saxpy results read by the host after each synchronize");

    // a host write to a few elements only, then the device again
    y[0] = 5.0f;
    y[n - 1] = 7.0f;
    saxpy<<<blocks, threads>>>(1.0f, x, y, (int)n);
    CHECK(cudaDeviceSynchronize());
    EXPECT(y[0] == 5.0f + x[0] && y[n - 1] == 7.0f + x[n - 1] && y[n / 2] == 7.0f * (float)((n / 2) % 1000) + 1.0f,
           "host writes to single elements reach the kernel");

    // prefetch and advice
    cudaMemLocation to_dev = {cudaMemLocationTypeDevice, dev}, to_host = {cudaMemLocationTypeHost, 0};
    for (long long i = 0; i < n; ++i) x[i] = 1.0f;
    t = now();
    CHECK(cudaMemPrefetchAsync(x, bytes, to_dev, 0, 0));
    CHECK(cudaDeviceSynchronize());
    phase("prefetch_to_device", now() - t, bytes);
    int last = -9;
    CHECK(cudaMemRangeGetAttribute(&last, 4, cudaMemRangeAttributeLastPrefetchLocation, x, bytes));
    EXPECT(last == dev, "the last prefetch location is the device");
    saxpy<<<blocks, threads>>>(3.0f, x, y, (int)n);
    CHECK(cudaDeviceSynchronize());
    t = now();
    CHECK(cudaMemPrefetchAsync(y, bytes, to_host, 0, 0));
    CHECK(cudaDeviceSynchronize());
    phase("prefetch_to_host", now() - t, bytes);
    EXPECT(y[1] == 3.0f + 7.0f * 1.0f + 1.0f, "prefetched to the host, the results are there");
    CHECK(cudaMemAdvise(x, bytes, cudaMemAdviseSetReadMostly, to_dev));
    int read_mostly = 0;
    CHECK(cudaMemRangeGetAttribute(&read_mostly, 4, cudaMemRangeAttributeReadMostly, x, bytes));
    EXPECT(read_mostly == 1, "read-mostly advice is reported");

    // __managed__ variables, both sides in turn
    counter = 10;
    for (int i = 0; i < 256; ++i) table[i] = (float)i;
    bump<<<1, 64>>>(5);
    CHECK(cudaDeviceSynchronize());
    bool tgood = counter == 10 + 64 * 5;
    for (int i = 0; i < 256; ++i) tgood &= table[i] == 2.0f * (float)i + 1.0f;
    EXPECT(tgood, "__managed__ variables written by the host, then the device");

    // memory attached to the host, then to a stream
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    int *sum = nullptr;
    node *nodes = nullptr;
    CHECK(cudaMallocManaged(&sum, sizeof(int), cudaMemAttachHost));
    *sum = -1; // the host may touch it while kernels run elsewhere
    const int kNodes = 1000;
    CHECK(cudaMallocManaged(&nodes, kNodes * sizeof(node)));
    for (int i = 0; i < kNodes; ++i) nodes[i].value = i, nodes[i].next = i + 1 < kNodes ? &nodes[i + 1] : nullptr;
    CHECK(cudaStreamAttachMemAsync(s, sum, 0, cudaMemAttachSingle));
    CHECK(cudaStreamSynchronize(s));
    walk<<<1, 1, 0, s>>>(nodes, sum);
    CHECK(cudaStreamSynchronize(s));
    if (!concurrent) CHECK(cudaDeviceSynchronize()); // nodes is attached globally
    EXPECT(*sum == kNodes * (kNodes - 1) / 2, "a kernel follows pointers stored in managed memory");

    cudaPointerAttributes pa;
    CHECK(cudaPointerGetAttributes(&pa, y));
    EXPECT(pa.type == cudaMemoryTypeManaged, "a managed pointer is reported as managed");

    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
    CHECK(cudaFree(sum));
    CHECK(cudaFree(nodes));
    CHECK(cudaStreamDestroy(s));
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}

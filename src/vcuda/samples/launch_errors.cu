// Launch errors through vcuda behave as CUDA documents them: a bad configuration is
// reported by the launch itself; a failure only the driver can see (too much dynamic
// shared memory) by the launch or, asynchronously, by the next call, and reading it
// (cudaGetLastError) clears it; neither leaves the device unusable.  Runs the same on
// the real runtime (exit 0 both ways; 77: no GPU).
#include <cstdio>

__global__ void fill(int *out, int value)
{
    extern __shared__ int scratch[];
    scratch[threadIdx.x] = value;
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = scratch[threadIdx.x];
}

static int failures;
static void expect(bool ok, const char *what, cudaError_t e)
{
    printf("%s: %s (%s)\n", ok ? "ok" : "FAIL", what, cudaGetErrorName(e));
    failures += !ok;
}

int main()
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("no CUDA device\n");
        return 77;
    }
    int *d = nullptr, h[256];
    cudaMalloc(&d, sizeof h);

    fill<<<1, 2048, 2048 * sizeof(int)>>>(d, 1); // more threads than a block may have
    cudaError_t e = cudaGetLastError(); // CUDA 13 says invalid value; older ones configuration
    expect(e == cudaErrorInvalidValue || e == cudaErrorInvalidConfiguration, "2048-thread block refused at launch", e);

    fill<<<1, 256, 200 << 10>>>(d, 2); // 200 KiB dynamic shared memory: over any limit
    cudaError_t at_launch = cudaGetLastError();
    cudaError_t later = cudaDeviceSynchronize();
    e = at_launch != cudaSuccess ? at_launch : later;
    expect(e != cudaSuccess, "oversized shared memory reported by the launch or the next call", e);
    cudaGetLastError(); // handled: clear it, as a careful program does

    fill<<<1, 256, 256 * sizeof(int)>>>(d, 7); // and the device still works
    e = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    bool ok = e == cudaSuccess;
    for (int i = 0; i < 256 && ok; ++i) ok = h[i] == 7;
    expect(ok, "a good launch afterwards computes the right values", e);
    e = cudaGetLastError();
    expect(e == cudaSuccess, "no error left behind", e);
    cudaFree(d);
    return failures ? 1 : 0;
}

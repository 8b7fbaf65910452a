// An ordinary CUDA sample (vector add, every call checked), kept unmodified on purpose:
// the vcuda tests run this binary as nvcc built it, once on the local runtime and once
// with the vcuda stand-in first on LD_LIBRARY_PATH.
#include <cstdio>
#include <cstdlib>

#define CHECK(call)                                                                          \
    do {                                                                                     \
        cudaError_t err = (call);                                                            \
        if (err != cudaSuccess) {                                                            \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err)); \
            return 1;                                                                        \
        }                                                                                    \
    } while (0)

__global__ void vector_add(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1 << 20;
    if (n <= 0) {
        fprintf(stderr, "usage: vector_add [elements > 0]\n");
        return 2;
    }
    size_t bytes = (size_t)n * sizeof(float);
    float *a = (float *)malloc(bytes), *b = (float *)malloc(bytes), *c = (float *)malloc(bytes);
    for (int i = 0; i < n; ++i) a[i] = (float)i, b[i] = 2.0f * (float)i;
    int devices = 0;
    CHECK(cudaGetDeviceCount(&devices));
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    float *da, *db, *dc;
    CHECK(cudaMalloc(&da, bytes));
    CHECK(cudaMalloc(&db, bytes));
    CHECK(cudaMalloc(&dc, bytes));
    CHECK(cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice));
    vector_add<<<(n + 255) / 256, 256>>>(da, db, dc, n);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(c, dc, bytes, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i)
        if (c[i] != 3.0f * (float)i) {
            fprintf(stderr, "mismatch at %d: %f\n", i, c[i]);
            return 1;
        }
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dc));
    printf("vector_add: %d elements on %s (%d device(s)): PASSED\n", n, prop.name, devices);
    return 0;
}

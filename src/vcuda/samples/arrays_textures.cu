// CUDA arrays, texture and surface objects: an ordinary program (nvcc -cudart shared)
// whose output through vcuda must equal the real runtime's.  Each part checks its
// values on the host where they are exact (point sampling, integer-valued data) and
// prints a line; linear filtering prints its sum, which the same GPU computes alike.
#include <cstdio>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>

#define CK(x)                                                                               \
    do {                                                                                    \
        cudaError_t e_ = (x);                                                               \
        if (e_ != cudaSuccess) {                                                            \
            printf("%s failed: %s\n", #x, cudaGetErrorString(e_));                          \
            return 1;                                                                       \
        }                                                                                   \
    } while (0)

__global__ void read2d(cudaTextureObject_t t, float *out, int w, int h, float shift)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h) out[y * w + x] = tex2D<float>(t, x + 0.5f + shift, y + 0.5f + shift);
}

__global__ void write_surface(cudaSurfaceObject_t s, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h) surf2Dwrite(make_float2(x * 2.0f, y * 3.0f), s, x * (int)sizeof(float2), y);
}

__global__ void read3d(cudaTextureObject_t t, float *out, int w, int h, int d)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < w * h * d) {
        int x = i % w, y = i / w % h, z = i / (w * h);
        out[i] = tex3D<float>(t, x + 0.5f, y + 0.5f, z + 0.5f);
    }
}

__global__ void read_layers(cudaTextureObject_t t, float *out, int w, int h, int layers)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < w * h * layers) {
        int x = i % w, y = i / w % h, l = i / (w * h);
        out[i] = tex2DLayered<float>(t, x + 0.5f, y + 0.5f, l);
    }
}

__global__ void fetch1d(cudaTextureObject_t t, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex1Dfetch<int>(t, n - 1 - i);
}

static cudaTextureDesc point_desc()
{
    cudaTextureDesc td;
    memset(&td, 0, sizeof td);
    td.addressMode[0] = td.addressMode[1] = td.addressMode[2] = cudaAddressModeClamp;
    td.filterMode = cudaFilterModePoint;
    td.readMode = cudaReadModeElementType;
    return td;
}

int main()
{
    int bad = 0;
    const int W = 64, H = 48;
    std::vector<float> img(W * H), out(W * H);
    for (int i = 0; i < W * H; ++i) img[i] = (float)((i * 37) % 1000);
    float *d_out;
    CK(cudaMalloc(&d_out, sizeof(float) * W * H * 4));
    dim3 b(16, 16), g((W + 15) / 16, (H + 15) / 16);

    // 1. a 2-D float array and a texture object on it: point, then linear filtering
    cudaChannelFormatDesc fd = cudaCreateChannelDesc<float>();
    cudaArray_t arr;
    CK(cudaMallocArray(&arr, &fd, W, H));
    CK(cudaMemcpy2DToArray(arr, 0, 0, img.data(), W * sizeof(float), W * sizeof(float), H, cudaMemcpyHostToDevice));
    cudaResourceDesc rd;
    memset(&rd, 0, sizeof rd);
    rd.resType = cudaResourceTypeArray, rd.res.array.array = arr;
    cudaTextureDesc td = point_desc();
    cudaTextureObject_t t;
    CK(cudaCreateTextureObject(&t, &rd, &td, NULL));
    read2d<<<g, b>>>(t, d_out, W, H, 0.0f);
    CK(cudaMemcpy(out.data(), d_out, sizeof(float) * W * H, cudaMemcpyDeviceToHost));
    int ok = out == img;
    bad += !ok;
    printf("texture on a 2-D array, point sampling: %s\n", ok ? "exact" : "WRONG");
    cudaTextureObject_t tl;
    td.filterMode = cudaFilterModeLinear;
    CK(cudaCreateTextureObject(&tl, &rd, &td, NULL));
    read2d<<<g, b>>>(tl, d_out, W, H, 0.25f);
    CK(cudaMemcpy(out.data(), d_out, sizeof(float) * W * H, cudaMemcpyDeviceToHost));
    double sum = 0;
    for (float v : out) sum += v;
    printf("texture on a 2-D array, linear filtering at +0.25: sum %.4f\n", sum);
    cudaResourceDesc back;
    CK(cudaGetTextureObjectResourceDesc(&back, t));
    printf("resource of the texture: type %d, same array %s\n", (int)back.resType, back.res.array.array == arr ? "yes" : "no");
    CK(cudaDestroyTextureObject(tl));
    CK(cudaDestroyTextureObject(t));

    // 2. surface writes into a float2 array, read back through a 2-D copy
    cudaChannelFormatDesc f2 = cudaCreateChannelDesc<float2>();
    cudaArray_t sarr;
    CK(cudaMallocArray(&sarr, &f2, W, H, cudaArraySurfaceLoadStore));
    memset(&rd, 0, sizeof rd);
    rd.resType = cudaResourceTypeArray, rd.res.array.array = sarr;
    cudaSurfaceObject_t s;
    CK(cudaCreateSurfaceObject(&s, &rd));
    write_surface<<<g, b>>>(s, W, H);
    std::vector<float2> got(W * H);
    CK(cudaMemcpy2DFromArray(got.data(), W * sizeof(float2), sarr, 0, 0, W * sizeof(float2), H, cudaMemcpyDeviceToHost));
    ok = 1;
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) ok &= got[y * W + x].x == x * 2.0f && got[y * W + x].y == y * 3.0f;
    bad += !ok;
    printf("surface writes into a float2 array: %s\n", ok ? "exact" : "WRONG");
    CK(cudaDestroySurfaceObject(s));

    // 3. a 3-D array filled with cudaMemcpy3D, read with tex3D
    const int X = 16, Y = 8, Z = 4;
    std::vector<float> vol(X * Y * Z), vout(X * Y * Z);
    for (int i = 0; i < X * Y * Z; ++i) vol[i] = (float)(i * 3 + 1);
    cudaArray_t varr;
    CK(cudaMalloc3DArray(&varr, &fd, make_cudaExtent(X, Y, Z)));
    cudaMemcpy3DParms p;
    memset(&p, 0, sizeof p);
    p.srcPtr = make_cudaPitchedPtr(vol.data(), X * sizeof(float), X, Y);
    p.dstArray = varr, p.extent = make_cudaExtent(X, Y, Z), p.kind = cudaMemcpyHostToDevice;
    CK(cudaMemcpy3D(&p));
    memset(&rd, 0, sizeof rd);
    rd.resType = cudaResourceTypeArray, rd.res.array.array = varr;
    td = point_desc();
    CK(cudaCreateTextureObject(&t, &rd, &td, NULL));
    read3d<<<(X * Y * Z + 127) / 128, 128>>>(t, d_out, X, Y, Z);
    CK(cudaMemcpy(vout.data(), d_out, sizeof(float) * X * Y * Z, cudaMemcpyDeviceToHost));
    ok = vout == vol;
    // and back out of the array, slice 2 only
    std::vector<float> slice(X * Y);
    memset(&p, 0, sizeof p);
    p.srcArray = varr, p.srcPos = make_cudaPos(0, 0, 2);
    p.dstPtr = make_cudaPitchedPtr(slice.data(), X * sizeof(float), X, Y);
    p.extent = make_cudaExtent(X, Y, 1), p.kind = cudaMemcpyDeviceToHost;
    CK(cudaMemcpy3D(&p));
    ok &= !memcmp(slice.data(), vol.data() + 2 * X * Y, sizeof(float) * X * Y);
    bad += !ok;
    printf("3-D array through cudaMemcpy3D and tex3D: %s\n", ok ? "exact" : "WRONG");
    CK(cudaDestroyTextureObject(t));

    // 4. a layered 2-D array (3 layers)
    cudaArray_t larr;
    CK(cudaMalloc3DArray(&larr, &fd, make_cudaExtent(X, Y, 3), cudaArrayLayered));
    memset(&p, 0, sizeof p);
    p.srcPtr = make_cudaPitchedPtr(vol.data(), X * sizeof(float), X, Y);
    p.dstArray = larr, p.extent = make_cudaExtent(X, Y, 3), p.kind = cudaMemcpyHostToDevice;
    CK(cudaMemcpy3D(&p));
    rd.res.array.array = larr;
    CK(cudaCreateTextureObject(&t, &rd, &td, NULL));
    read_layers<<<(X * Y * 3 + 127) / 128, 128>>>(t, d_out, X, Y, 3);
    CK(cudaMemcpy(vout.data(), d_out, sizeof(float) * X * Y * 3, cudaMemcpyDeviceToHost));
    ok = !memcmp(vout.data(), vol.data(), sizeof(float) * X * Y * 3);
    bad += !ok;
    printf("layered array through tex2DLayered: %s\n", ok ? "exact" : "WRONG");
    CK(cudaDestroyTextureObject(t));

    // 5. pitched and linear memory as textures
    float *pitched;
    size_t pitch;
    CK(cudaMallocPitch(&pitched, &pitch, W * sizeof(float), H));
    CK(cudaMemcpy2D(pitched, pitch, img.data(), W * sizeof(float), W * sizeof(float), H, cudaMemcpyHostToDevice));
    memset(&rd, 0, sizeof rd);
    rd.resType = cudaResourceTypePitch2D, rd.res.pitch2D.devPtr = pitched, rd.res.pitch2D.desc = fd;
    rd.res.pitch2D.width = W, rd.res.pitch2D.height = H, rd.res.pitch2D.pitchInBytes = pitch;
    CK(cudaCreateTextureObject(&t, &rd, &td, NULL));
    read2d<<<g, b>>>(t, d_out, W, H, 0.0f);
    CK(cudaMemcpy(out.data(), d_out, sizeof(float) * W * H, cudaMemcpyDeviceToHost));
    ok = out == img;
    bad += !ok;
    printf("texture on pitched memory: %s\n", ok ? "exact" : "WRONG");
    CK(cudaDestroyTextureObject(t));
    const int N = 1000;
    std::vector<int> ints(N), iout(N);
    for (int i = 0; i < N; ++i) ints[i] = i * i;
    int *lin, *d_iout;
    CK(cudaMalloc(&lin, N * sizeof(int)));
    CK(cudaMalloc(&d_iout, N * sizeof(int)));
    CK(cudaMemcpy(lin, ints.data(), N * sizeof(int), cudaMemcpyHostToDevice));
    memset(&rd, 0, sizeof rd);
    rd.resType = cudaResourceTypeLinear, rd.res.linear.devPtr = lin, rd.res.linear.desc = cudaCreateChannelDesc<int>();
    rd.res.linear.sizeInBytes = N * sizeof(int);
    CK(cudaCreateTextureObject(&t, &rd, &td, NULL));
    fetch1d<<<(N + 255) / 256, 256>>>(t, d_iout, N);
    CK(cudaMemcpy(iout.data(), d_iout, N * sizeof(int), cudaMemcpyDeviceToHost));
    ok = 1;
    for (int i = 0; i < N; ++i) ok &= iout[i] == ints[N - 1 - i];
    bad += !ok;
    printf("texture on linear memory (tex1Dfetch): %s\n", ok ? "exact" : "WRONG");
    CK(cudaDestroyTextureObject(t));

    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    // every texture/surface limit and the fields filled from attributes beyond them (the
    // managed, mapped and pageable ones are left out: vcuda reports them absent on purpose)
    const cudaDeviceProp &q = prop;
    printf("textures: 1D %d mip %d, 2D %d %d mip %d %d linear %d %d %d gather %d %d, 3D %d %d %d alt %d %d %d, cubemap %d\n",
           q.maxTexture1D, q.maxTexture1DMipmap, q.maxTexture2D[0], q.maxTexture2D[1], q.maxTexture2DMipmap[0],
           q.maxTexture2DMipmap[1], q.maxTexture2DLinear[0], q.maxTexture2DLinear[1], q.maxTexture2DLinear[2],
           q.maxTexture2DGather[0], q.maxTexture2DGather[1], q.maxTexture3D[0], q.maxTexture3D[1], q.maxTexture3D[2],
           q.maxTexture3DAlt[0], q.maxTexture3DAlt[1], q.maxTexture3DAlt[2], q.maxTextureCubemap);
    printf("layered textures: 1D %d x %d, 2D %d %d x %d, cubemap %d x %d\n", q.maxTexture1DLayered[0],
           q.maxTexture1DLayered[1], q.maxTexture2DLayered[0], q.maxTexture2DLayered[1], q.maxTexture2DLayered[2],
           q.maxTextureCubemapLayered[0], q.maxTextureCubemapLayered[1]);
    printf("surfaces: 1D %d, 2D %d %d, 3D %d %d %d, 1D layered %d x %d, 2D layered %d %d x %d, cubemap %d, layered %d x %d\n",
           q.maxSurface1D, q.maxSurface2D[0], q.maxSurface2D[1], q.maxSurface3D[0], q.maxSurface3D[1], q.maxSurface3D[2],
           q.maxSurface1DLayered[0], q.maxSurface1DLayered[1], q.maxSurface2DLayered[0], q.maxSurface2DLayered[1],
           q.maxSurface2DLayered[2], q.maxSurfaceCubemap, q.maxSurfaceCubemapLayered[0], q.maxSurfaceCubemapLayered[1]);
    printf("alignment: texture %zu, texture pitch %zu, surface %zu\n", q.textureAlignment, q.texturePitchAlignment,
           q.surfaceAlignment);
    printf("more: sparse %d, read-only register %d, timeline %d, rdma %d %u %d, pool handles %u, deferred %d, ipc event %d, "
           "unified fp %d, numa %d %d, mps %d, host numa %d, pci %08x %08x, multinode ipc %d\n",
           q.sparseCudaArraySupported, q.hostRegisterReadOnlySupported, q.timelineSemaphoreInteropSupported,
           q.gpuDirectRDMASupported, q.gpuDirectRDMAFlushWritesOptions, q.gpuDirectRDMAWritesOrdering,
           q.memoryPoolSupportedHandleTypes, q.deferredMappingCudaArraySupported, q.ipcEventSupported,
           q.unifiedFunctionPointers, q.deviceNumaConfig, q.deviceNumaId, q.mpsEnabled, q.hostNumaId, q.gpuPciDeviceID,
           q.gpuPciSubsystemID, q.hostNumaMultinodeIpcSupported);
    printf("uuid:");
    for (int i = 0; i < 16; ++i) printf(" %02x", (unsigned char)q.uuid.bytes[i]);
    printf("\n");
    CK(cudaFreeArray(arr));
    CK(cudaFreeArray(sarr));
    CK(cudaFreeArray(varr));
    CK(cudaFreeArray(larr));
    CK(cudaFree(pitched));
    CK(cudaFree(lin));
    CK(cudaFree(d_iout));
    CK(cudaFree(d_out));
    printf("arrays_textures: %s\n", bad ? "FAIL" : "PASS");
    return bad != 0;
}

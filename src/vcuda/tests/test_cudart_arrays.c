/* CUDA arrays, texture and surface objects through the libcudart stand-in, against the
 * real vcuda-server on the CPU stand-in driver: `vcuda_cudart_arrays_test SERVER
 * FAKE_LIB_DIR`.  A plain C program calling the runtime API as a program would: data
 * through a 2-D array (pitched host rows in and out, the deprecated linear forms, an
 * array-to-array copy), through a 3-D array with cudaMemcpy3D (host and device sides),
 * a texture object on the array and one on pitched memory with their descriptors read
 * back, a surface object, unknown objects refused, and the device properties the
 * texture limits come in. */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vcuda_test.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations" /* cudaMemcpyToArray and co. */

static const char TOKEN[] = "arrays-test-token";

/* driver_functions.h's helpers are for C++ and CUDA C; the same by hand */
static struct cudaExtent extent(size_t w, size_t h, size_t d) { struct cudaExtent e = {w, h, d}; return e; }
static struct cudaPos pos(size_t x, size_t y, size_t z) { struct cudaPos p = {x, y, z}; return p; }
static struct cudaPitchedPtr pitched_ptr(void *p, size_t pitch, size_t xsize, size_t ysize)
{
    struct cudaPitchedPtr r = {p, pitch, xsize, ysize};
    return r;
}

int main(int argc, char **argv)
{
    if (argc != 3) return fprintf(stderr, "usage: %s SERVER FAKE_LIB_DIR\n", argv[0]), 2;
    vcuda_test_server s;
    start_server_for_me(&s, argv[1], argv[2], TOKEN);

    /* 2-D: a 10 x 6 array of float, rows written from a host block of pitch 64 bytes */
    enum { W = 10, H = 6 };
    float in[H][16], out[H][16], lin[W * H], back[W * H];
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < 16; ++x) in[y][x] = (float)(100 * y + x), out[y][x] = -1;
    struct cudaChannelFormatDesc fd = cudaCreateChannelDesc(32, 0, 0, 0, cudaChannelFormatKindFloat), got;
    cudaArray_t a, b;
    struct cudaExtent ext;
    unsigned flags = 7;
    CHECK(cudaMallocArray(&a, &fd, W, H, cudaArraySurfaceLoadStore) == cudaSuccess);
    CHECK(cudaArrayGetInfo(&got, &ext, &flags, a) == cudaSuccess && got.x == 32 && got.f == cudaChannelFormatKindFloat &&
          ext.width == W && ext.height == H && ext.depth == 0 && flags == cudaArraySurfaceLoadStore);
    CHECK(cudaGetChannelDesc(&got, a) == cudaSuccess && got.x == 32 && got.y == 0);
    CHECK(cudaMemcpy2DToArray(a, 0, 0, in, sizeof in[0], W * sizeof(float), H, cudaMemcpyHostToDevice) == cudaSuccess);
    CHECK(cudaMemcpy2DFromArray(out, sizeof out[0], a, 0, 0, W * sizeof(float), H, cudaMemcpyDeviceToHost) == cudaSuccess);
    int good2d = 1;
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < 16; ++x) good2d &= out[y][x] == (x < W ? in[y][x] : -1);
    /* a window: rows 2..3, columns 4..7 -> host; the deprecated linear forms from (3, 1) */
    float win[2][4];
    CHECK(cudaMemcpy2DFromArray(win, sizeof win[0], a, 4 * sizeof(float), 2, sizeof win[0], 2, cudaMemcpyDeviceToHost) == cudaSuccess);
    good2d &= win[0][0] == 204 && win[1][3] == 307;
    for (int i = 0; i < W * H; ++i) lin[i] = (float)(1000 + i);
    CHECK(cudaMemcpyToArray(a, 3 * sizeof(float), 1, lin, 25 * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
    CHECK(cudaMemcpyFromArray(back, a, 0, 0, sizeof back, cudaMemcpyDeviceToHost) == cudaSuccess);
    /* 25 elements: row 1 from column 3 on (7), row 2 whole (10), 8 of row 3 */
    good2d &= back[12] == 102 && back[13] == 1000 && back[19] == 1006 && back[20] == 1007 && back[37] == 1024 &&
              back[38] == 308 && back[40] == 400 && back[0] == 0;
    /* array to array, then through device memory (cudaMemcpyDefault finds it) */
    float *dev;
    CHECK(cudaMallocArray(&b, &fd, W, H, 0) == cudaSuccess && cudaMalloc((void **)&dev, sizeof back) == cudaSuccess);
    CHECK(cudaMemcpy2DArrayToArray(b, 0, 0, a, 0, 0, W * sizeof(float), H, cudaMemcpyDeviceToDevice) == cudaSuccess);
    CHECK(cudaMemcpy2DFromArray(dev, W * sizeof(float), b, 0, 0, W * sizeof(float), H, cudaMemcpyDefault) == cudaSuccess);
    memset(lin, 0, sizeof lin);
    CHECK(cudaMemcpy(lin, dev, sizeof lin, cudaMemcpyDeviceToHost) == cudaSuccess);
    good2d &= !memcmp(lin, back, sizeof lin);
    CHECK(good2d);

    /* strided rows into pitched memory, from the host and from device rows, in one copy
     * each on the server: the bytes between the rows stay as they were */
    uint8_t *pa, *pb, rows[H][16 * sizeof(float)], check[2][512];
    size_t pp;
    CHECK(cudaMallocPitch((void **)&pa, &pp, 40, H) == cudaSuccess && pp >= 64);
    CHECK(cudaMallocPitch((void **)&pb, &pp, 40, H) == cudaSuccess);
    CHECK(cudaMemset(pa, 0x77, pp * H) == cudaSuccess && cudaMemset(pb, 0x55, pp * H) == cudaSuccess);
    memcpy(rows, in, sizeof rows);
    CHECK(cudaMemcpy2D(pa + 8, pp, rows, sizeof rows[0], 40, H, cudaMemcpyHostToDevice) == cudaSuccess);
    CHECK(cudaMemcpy2DAsync(pb, pp, pa + 8, pp, 40, H, cudaMemcpyDeviceToDevice, NULL) == cudaSuccess);
    CHECK(cudaMemcpy(check[0], pa + 2 * pp, 2 * pp < sizeof check ? 2 * pp : sizeof check, cudaMemcpyDeviceToHost) == cudaSuccess);
    int strided = check[0][0] == 0x77 && check[0][7] == 0x77 && !memcmp(check[0] + 8, rows[2], 40) && check[0][48] == 0x77;
    CHECK(cudaMemcpy(check[0], pb + 5 * pp, 64, cudaMemcpyDeviceToHost) == cudaSuccess);
    strided &= !memcmp(check[0], rows[5], 40) && check[0][40] == 0x55;
    CHECK(strided);
    CHECK(cudaFree(pa) == cudaSuccess && cudaFree(pb) == cudaSuccess);

    /* 3-D: 5 x 4 x 3 uchar4, in from a host box with padding, out to device and back */
    enum { X = 5, Y = 4, Z = 3 };
    uint8_t hin[Z][Y + 1][8][4], hout[Z][Y][X][4];
    for (size_t i = 0; i < sizeof hin; ++i) ((uint8_t *)hin)[i] = (uint8_t)(i * 7 + 1);
    struct cudaChannelFormatDesc c4 = cudaCreateChannelDesc(8, 8, 8, 8, cudaChannelFormatKindUnsigned);
    cudaArray_t v;
    CHECK(cudaMalloc3DArray(&v, &c4, extent(X, Y, Z), 0) == cudaSuccess);
    struct cudaMemcpy3DParms p;
    memset(&p, 0, sizeof p);
    p.srcPtr = pitched_ptr(hin, sizeof hin[0][0], 8, Y + 1);
    p.dstArray = v, p.extent = extent(X, Y, Z), p.kind = cudaMemcpyHostToDevice;
    CHECK(cudaMemcpy3D(&p) == cudaSuccess);
    struct cudaPitchedPtr dp;
    CHECK(cudaMalloc3D(&dp, extent(X * 4, Y, Z)) == cudaSuccess);
    memset(&p, 0, sizeof p);
    p.srcArray = v, p.dstPtr = dp, p.extent = extent(X, Y, Z), p.kind = cudaMemcpyDeviceToDevice;
    CHECK(cudaMemcpy3D(&p) == cudaSuccess);
    memset(&p, 0, sizeof p);
    p.srcPtr = dp, p.dstPtr = pitched_ptr(hout, sizeof hout[0][0], X * 4, Y);
    p.extent = extent(X * 4, Y, Z), p.kind = cudaMemcpyDeviceToHost;
    CHECK(cudaMemcpy3D(&p) == cudaSuccess);
    int good3d = 1;
    for (int z = 0; z < Z; ++z)
        for (int y = 0; y < Y; ++y) good3d &= !memcmp(hout[z][y], hin[z][y], sizeof hout[z][y]);
    /* one slice (z = 2) array -> host, through cudaMemcpy3DAsync on a stream */
    cudaStream_t st;
    uint8_t slice[Y][X][4];
    CHECK(cudaStreamCreate(&st) == cudaSuccess);
    memset(&p, 0, sizeof p);
    p.srcArray = v, p.srcPos = pos(0, 0, 2), p.dstPtr = pitched_ptr(slice, sizeof slice[0], X * 4, Y);
    p.extent = extent(X, Y, 1), p.kind = cudaMemcpyDeviceToHost;
    CHECK(cudaMemcpy3DAsync(&p, st) == cudaSuccess && cudaStreamSynchronize(st) == cudaSuccess);
    for (int y = 0; y < Y; ++y) good3d &= !memcmp(slice[y], hin[2][y], sizeof slice[y]);
    /* outside the array: refused, nothing written */
    p.srcPos = pos(0, 0, 3);
    CHECK(cudaMemcpy3D(&p) == cudaErrorInvalidValue);
    cudaGetLastError();
    CHECK(good3d);

    /* texture objects: on the array and on pitched memory; descriptors read back */
    struct cudaResourceDesc rd, rback;
    struct cudaTextureDesc td, tback;
    memset(&rd, 0, sizeof rd), memset(&td, 0, sizeof td);
    rd.resType = cudaResourceTypeArray, rd.res.array.array = a;
    td.addressMode[0] = td.addressMode[1] = cudaAddressModeClamp, td.filterMode = cudaFilterModeLinear;
    td.readMode = cudaReadModeElementType, td.normalizedCoords = 1;
    cudaTextureObject_t t1 = 0, t2 = 0;
    CHECK(cudaCreateTextureObject(&t1, &rd, &td, NULL) == cudaSuccess && t1);
    CHECK(cudaGetTextureObjectResourceDesc(&rback, t1) == cudaSuccess && rback.resType == cudaResourceTypeArray &&
          rback.res.array.array == a);
    CHECK(cudaGetTextureObjectTextureDesc(&tback, t1) == cudaSuccess && tback.normalizedCoords == 1 &&
          tback.filterMode == cudaFilterModeLinear);
    float *pitched;
    size_t pitch;
    CHECK(cudaMallocPitch((void **)&pitched, &pitch, W * sizeof(float), H) == cudaSuccess);
    memset(&rd, 0, sizeof rd);
    rd.resType = cudaResourceTypePitch2D, rd.res.pitch2D.devPtr = pitched, rd.res.pitch2D.desc = fd;
    rd.res.pitch2D.width = W, rd.res.pitch2D.height = H, rd.res.pitch2D.pitchInBytes = pitch;
    td.normalizedCoords = 0, td.filterMode = cudaFilterModePoint;
    CHECK(cudaCreateTextureObject(&t2, &rd, &td, NULL) == cudaSuccess && t2 && t2 != t1);
    /* rows past the allocation: refused by the server */
    cudaTextureObject_t t3 = 0;
    rd.res.pitch2D.height = H + 1000;
    CHECK(cudaCreateTextureObject(&t3, &rd, &td, NULL) == cudaErrorInvalidValue && !t3);
    cudaGetLastError();
    /* a surface object on the array made for load/store */
    struct cudaResourceDesc sd;
    memset(&sd, 0, sizeof sd);
    sd.resType = cudaResourceTypeArray, sd.res.array.array = a;
    cudaSurfaceObject_t so = 0;
    CHECK(cudaCreateSurfaceObject(&so, &sd) == cudaSuccess && so);
    /* unknown objects and a surface destroyed as a texture: refused */
    CHECK(cudaDestroyTextureObject(987654) == cudaErrorInvalidResourceHandle);
    CHECK(cudaDestroyTextureObject(so) == cudaErrorInvalidResourceHandle);
    cudaGetLastError();
    CHECK(cudaDestroySurfaceObject(so) == cudaSuccess);
    CHECK(cudaDestroyTextureObject(t1) == cudaSuccess && cudaDestroyTextureObject(t2) == cudaSuccess);
    CHECK(cudaDestroyTextureObject(t1) == cudaErrorInvalidResourceHandle);
    cudaGetLastError();
    CHECK(cudaFreeArray(a) == cudaSuccess && cudaFreeArray(b) == cudaSuccess && cudaFreeArray(v) == cudaSuccess);

    /* the texture limits and the uuid come from the server (the stand-in driver: 1s) */
    struct cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
    CHECK(prop.maxTexture1D == 1 && prop.maxTexture3D[2] == 1 && prop.maxSurfaceCubemapLayered[1] == 1 &&
          prop.textureAlignment == 1 && (uint8_t)prop.uuid.bytes[0] == 0xa0 && (uint8_t)prop.uuid.bytes[15] == 0xaf);

    static char text[1 << 20];
    char *log = stop_server_read_log(s.pid, s.log, text, sizeof text);
    CHECK(strstr(log, "texture 1 format 0x20 address 1 1 0 filter 1 flags 0x2 ") != NULL); /* float: not read as integer */
    CHECK(strstr(log, "texture 2 format 0x20 address 1 1 0 filter 0 flags 0x0 ") != NULL);
    printf("{\"test\":\"cudart_arrays\",\"array_2d_ok\":%s,\"array_3d_ok\":%s,\"strided_ok\":%s,\"failed_checks\":%d}\n",
           good2d ? "true" : "false", good3d ? "true" : "false", strided ? "true" : "false", failures);
    return failures != 0;
}

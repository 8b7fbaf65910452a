/* The node parameter structs of the driver's graph calls that vcuda-server makes, as
 * cuda.h (CUDA 12.0 and later) lays them out -- CUDA_KERNEL_NODE_PARAMS_v2,
 * CUDA_MEMSET_NODE_PARAMS, CUDA_MEMCPY3D -- so that neither the server nor the CPU
 * stand-in driver of its tests needs the CUDA toolkit to build.  (CUcontext, CUfunction
 * and CUdeviceptr are declared by the includer.) */
#ifndef VCUDA_DRIVER_GRAPH_H
#define VCUDA_DRIVER_GRAPH_H

#include <stddef.h>

typedef struct {
    void *func; /* CUfunction */
    unsigned grid[3], block[3], shmem;
    void **params, **extra;
    void *kern;
    void *ctx;
} kernel_node_params;

typedef struct {
    unsigned long long dst;
    size_t pitch;
    unsigned value, element_size;
    size_t width, height;
} memset_node_params;

#define VCUDA_CU_MEMORYTYPE_DEVICE 2
typedef struct {
    size_t src_x, src_y, src_z, src_lod;
    int src_type; /* CUmemorytype */
    const void *src_host;
    unsigned long long src_device;
    void *src_array, *reserved0;
    size_t src_pitch, src_height;
    size_t dst_x, dst_y, dst_z, dst_lod;
    int dst_type;
    void *dst_host;
    unsigned long long dst_device;
    void *dst_array, *reserved1;
    size_t dst_pitch, dst_height;
    size_t width, height, depth;
} memcpy3d_params;

#endif

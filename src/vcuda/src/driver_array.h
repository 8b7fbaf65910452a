/* The descriptor structs of the driver's array, texture and surface calls that
 * vcuda-server makes, as cuda.h (CUDA 11 and later) lays them out --
 * CUDA_ARRAY3D_DESCRIPTOR, CUDA_RESOURCE_DESC, CUDA_TEXTURE_DESC,
 * CUDA_RESOURCE_VIEW_DESC -- so that neither the server nor the CPU stand-in driver of
 * its tests needs the CUDA toolkit to build.  (CUDA_MEMCPY3D is memcpy3d_params in
 * driver_graph.h.) */
#ifndef VCUDA_DRIVER_ARRAY_H
#define VCUDA_DRIVER_ARRAY_H

#include <stddef.h>

typedef struct {
    size_t width, height, depth;
    int format; /* CUarray_format */
    unsigned channels, flags;
} array3d_desc;

typedef struct {
    int type; /* CUresourcetype */
    union {
        struct { void *array; } array;
        struct { unsigned long long ptr; int format; unsigned channels; size_t bytes; } linear;
        struct { unsigned long long ptr; int format; unsigned channels; size_t width, height, pitch; } pitch2d;
        int reserved[32];
    } res;
    unsigned flags;
} resource_desc;

typedef struct {
    int address[3]; /* CUaddress_mode */
    int filter;     /* CUfilter_mode */
    unsigned flags; /* CU_TRSF_* */
    unsigned max_anisotropy;
    int mip_filter;
    float mip_bias, mip_min, mip_max;
    float border[4];
    int reserved[12];
} texture_desc;

typedef struct {
    int format; /* CUresourceViewFormat */
    size_t width, height, depth;
    unsigned first_mip, last_mip, first_layer, last_layer;
    unsigned reserved[16];
} view_desc;

#endif

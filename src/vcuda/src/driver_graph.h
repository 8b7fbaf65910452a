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

/* cuGraphAddNode_v2's CUgraphNodeParams (CUDA 12.3 and later: 256 bytes, the node's
 * parameters at offset 16) as the server uses it: for conditional nodes, whose
 * CUDA_CONDITIONAL_NODE_PARAMS gets the driver's own array of body graphs back. */
#define VCUDA_CU_GRAPH_NODE_TYPE_CONDITIONAL 13
typedef struct {
    int type; /* CUgraphNodeType */
    int reserved0[3];
    union {
        long long reserved1[29];
        struct {
            unsigned long long handle; /* CUgraphConditionalHandle */
            int type;                  /* CUgraphConditionalNodeType */
            unsigned size;
            void **bodies; /* out: CUgraph *phGraph_out, valid while the node is */
            void *ctx;     /* CUcontext */
        } conditional;
    } u;
    long long reserved2;
} graph_node_params;

/* cuGraphAddMemAllocNode's CUDA_MEM_ALLOC_NODE_PARAMS (CUmemPoolProps: 88 bytes). */
#define VCUDA_CU_MEM_ALLOCATION_TYPE_PINNED 1
#define VCUDA_CU_MEM_LOCATION_TYPE_DEVICE 1
typedef struct {
    struct {
        int alloc_type, handle_types;
        int location_type, location_id;
        void *win32_security;
        size_t max_size;
        unsigned short usage;
        unsigned char reserved[54];
    } pool;
    const void *access_descs;
    size_t access_desc_count;
    size_t bytesize;
    unsigned long long dptr; /* out */
} mem_alloc_node_params;

/* cuLaunchKernelEx's CUlaunchConfig and CUlaunchAttribute (CUDA 11.8 and later): an
 * attribute is its id, padding to 8 bytes, and a 64-byte value union. */
enum {
    VCUDA_CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2,
    VCUDA_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4,
    VCUDA_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6,
    VCUDA_CU_LAUNCH_ATTRIBUTE_PRIORITY = 8,
    VCUDA_CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN = 10
};
typedef struct {
    int id;
    char pad[4];
    union {
        char bytes[64];
        int cooperative, programmatic, priority, sync_domain;
        struct {
            unsigned x, y, z;
        } cluster;
    } value;
} launch_attribute;

typedef struct {
    unsigned grid[3], block[3], shmem;
    void *stream; /* CUstream */
    launch_attribute *attrs;
    unsigned nattrs;
} launch_config;

#endif

/* The driver structs vcuda-server declares itself (driver_graph.h, driver_array.h, so
 * that it builds without the CUDA toolkit) laid out exactly as the toolkit's cuda.h
 * has them: checked at compile time wherever the toolkit is installed. */
#include <cuda.h>
#include <stddef.h>

#include "../src/driver_array.h"
#include "../src/driver_graph.h"

#define SAME(ours, theirs, a, b) _Static_assert(offsetof(ours, a) == offsetof(theirs, b), #ours "." #a)
#define SIZE(ours, theirs) _Static_assert(sizeof(ours) == sizeof(theirs), "sizeof " #ours)

SIZE(array3d_desc, CUDA_ARRAY3D_DESCRIPTOR);
SAME(array3d_desc, CUDA_ARRAY3D_DESCRIPTOR, depth, Depth);
SAME(array3d_desc, CUDA_ARRAY3D_DESCRIPTOR, format, Format);
SAME(array3d_desc, CUDA_ARRAY3D_DESCRIPTOR, flags, Flags);
SIZE(resource_desc, CUDA_RESOURCE_DESC);
SAME(resource_desc, CUDA_RESOURCE_DESC, res.array.array, res.array.hArray);
SAME(resource_desc, CUDA_RESOURCE_DESC, res.linear.bytes, res.linear.sizeInBytes);
SAME(resource_desc, CUDA_RESOURCE_DESC, res.linear.channels, res.linear.numChannels);
SAME(resource_desc, CUDA_RESOURCE_DESC, res.pitch2d.format, res.pitch2D.format);
SAME(resource_desc, CUDA_RESOURCE_DESC, res.pitch2d.pitch, res.pitch2D.pitchInBytes);
SAME(resource_desc, CUDA_RESOURCE_DESC, flags, flags);
SIZE(texture_desc, CUDA_TEXTURE_DESC);
SAME(texture_desc, CUDA_TEXTURE_DESC, flags, flags);
SAME(texture_desc, CUDA_TEXTURE_DESC, mip_filter, mipmapFilterMode);
SAME(texture_desc, CUDA_TEXTURE_DESC, mip_max, maxMipmapLevelClamp);
SAME(texture_desc, CUDA_TEXTURE_DESC, border, borderColor);
SIZE(view_desc, CUDA_RESOURCE_VIEW_DESC);
SAME(view_desc, CUDA_RESOURCE_VIEW_DESC, width, width);
SAME(view_desc, CUDA_RESOURCE_VIEW_DESC, first_mip, firstMipmapLevel);
SAME(view_desc, CUDA_RESOURCE_VIEW_DESC, last_layer, lastLayer);
SIZE(memcpy3d_params, CUDA_MEMCPY3D);
SAME(memcpy3d_params, CUDA_MEMCPY3D, src_type, srcMemoryType);
SAME(memcpy3d_params, CUDA_MEMCPY3D, src_array, srcArray);
SAME(memcpy3d_params, CUDA_MEMCPY3D, src_height, srcHeight);
SAME(memcpy3d_params, CUDA_MEMCPY3D, dst_x, dstXInBytes);
SAME(memcpy3d_params, CUDA_MEMCPY3D, dst_array, dstArray);
SAME(memcpy3d_params, CUDA_MEMCPY3D, dst_height, dstHeight);
SAME(memcpy3d_params, CUDA_MEMCPY3D, depth, Depth);
SIZE(memset_node_params, CUDA_MEMSET_NODE_PARAMS);
SAME(memset_node_params, CUDA_MEMSET_NODE_PARAMS, element_size, elementSize);
SAME(memset_node_params, CUDA_MEMSET_NODE_PARAMS, height, height);
SIZE(graph_node_params, CUgraphNodeParams);
SAME(graph_node_params, CUgraphNodeParams, u.conditional.handle, conditional.handle);
SAME(graph_node_params, CUgraphNodeParams, u.conditional.type, conditional.type);
SAME(graph_node_params, CUgraphNodeParams, u.conditional.size, conditional.size);
SAME(graph_node_params, CUgraphNodeParams, u.conditional.bodies, conditional.phGraph_out);
SAME(graph_node_params, CUgraphNodeParams, u.conditional.ctx, conditional.ctx);
SAME(graph_node_params, CUgraphNodeParams, reserved2, reserved2);
_Static_assert(VCUDA_CU_GRAPH_NODE_TYPE_CONDITIONAL == CU_GRAPH_NODE_TYPE_CONDITIONAL, "conditional node type");
SIZE(mem_alloc_node_params, CUDA_MEM_ALLOC_NODE_PARAMS);
SAME(mem_alloc_node_params, CUDA_MEM_ALLOC_NODE_PARAMS, pool.location_type, poolProps.location.type);
SAME(mem_alloc_node_params, CUDA_MEM_ALLOC_NODE_PARAMS, pool.location_id, poolProps.location.id);
SAME(mem_alloc_node_params, CUDA_MEM_ALLOC_NODE_PARAMS, pool.max_size, poolProps.maxSize);
SAME(mem_alloc_node_params, CUDA_MEM_ALLOC_NODE_PARAMS, pool.usage, poolProps.usage);
SAME(mem_alloc_node_params, CUDA_MEM_ALLOC_NODE_PARAMS, access_descs, accessDescs);
SAME(mem_alloc_node_params, CUDA_MEM_ALLOC_NODE_PARAMS, bytesize, bytesize);
SAME(mem_alloc_node_params, CUDA_MEM_ALLOC_NODE_PARAMS, dptr, dptr);
_Static_assert(VCUDA_CU_MEM_ALLOCATION_TYPE_PINNED == CU_MEM_ALLOCATION_TYPE_PINNED, "pinned");
_Static_assert(VCUDA_CU_MEM_LOCATION_TYPE_DEVICE == CU_MEM_LOCATION_TYPE_DEVICE, "device location");

int main(void) { return 0; }

/* vcuda wire protocol: the frames a client library and a per-GPU server exchange.
 *
 * Frame = 24-byte header + payload, and after the handshake a 16-byte tag (see
 * "authentication"; payload_len never counts it), every integer little-endian, written
 * byte by byte (never a memcpy of a host struct, so layout/endianness/padding of either
 * side do not matter):
 *
 *   off size field
 *    0   4   magic        "VCUD" (0x44554356)
 *    4   2   version      VCUDA_PROTO_VERSION; any other value is rejected
 *    6   2   opcode       VCUDA_OPCODES below
 *    8   4   flags        VCUDA_FLAG_*; unknown bits are rejected
 *   12   8   request id   echoed in the reply, so replies can be matched when pipelined
 *   20   4   payload len  <= VCUDA_MAX_PAYLOAD, checked before anything is allocated
 *
 * The payload of each opcode is described by a layout string in VCUDA_OPCODES; one
 * generic encoder/decoder walks it, so every field of every frame gets the same
 * checks and adding a call is one line.  Layout characters (name in parentheses is
 * documentation only):
 *   u u32 any        i i32 any          f f32 (IEEE bits)
 *   d i32 device ordinal in [0, VCUDA_MAX_DEVICES)     n u32 device count <= MAX_DEVICES
 *   e i32 cudaError code in [1, VCUDA_MAX_CUDA_ERROR]  g u32 grid/block dim in [1, 2^31-1]
 *   z u64 byte size <= VCUDA_MAX_SIZE                  h u64 opaque handle (server checks)
 *   s string: u32 len in [1, VCUDA_MAX_STRING] + bytes, no NUL  -> msg.str
 *   t token:  u32 len in [1, VCUDA_MAX_TOKEN] + bytes           -> msg.blob
 *   b bytes:  u32 len <= VCUDA_MAX_CHUNK + bytes                -> msg.blob
 *   H 32-byte content hash (SHA-256 of a module image)          -> msg.hash
 *   a u32 count <= VCUDA_MAX_PARAMS + count u32 sizes, each in [1, MAX_PARAM_BYTES],
 *     sum <= VCUDA_MAX_PARAM_BYTES                               -> msg.sizes
 *   p 'a' followed by exactly sum(sizes) bytes: packed kernel arguments in order
 *                                                                -> msg.sizes + msg.blob
 * Scalars land in msg.v[] in layout order (signed values sign-extended, f32 as bits).
 * A layout has at most one s, one t/b/p and one a/p (checked by a test).
 *
 * Bulk copies are split by the client into chunks of <= VCUDA_MAX_CHUNK bytes sent
 * back to back with VCUDA_FLAG_MORE on all but the last (replies likewise for D2H),
 * so a transfer is pipelined and no side ever buffers more than one chunk.
 */
#ifndef VCUDA_PROTO_H
#define VCUDA_PROTO_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VCUDA_MAGIC 0x44554356u /* "VCUD" as little-endian bytes */
#define VCUDA_PROTO_VERSION 6u /* 2: challenge-response HELLO/AUTH, PROGRESS; 3: graphs; 4: LAUNCH_EX, GRAPH_EXEC_KERNEL_SET, arrays, textures; 5: graph twins (conditional and memory nodes, GRAPH_TWIN_*); 6: the tenant in HELLO, VCUDA_FLAG_SYNC, every frame after AUTH tagged */
#define VCUDA_HEADER_SIZE 24u

/* Limits; compile-time configurable.  The payload bound is what a server is willing to
 * allocate for one frame from a client-supplied length. */
#ifndef VCUDA_MAX_CHUNK
#define VCUDA_MAX_CHUNK (64u << 20)
#endif
#define VCUDA_MAX_PAYLOAD (VCUDA_MAX_CHUNK + 4096u) /* a chunk plus its other fields */
#define VCUDA_MAX_SIZE (1ull << 48)                 /* no GPU has 256 TiB */
#define VCUDA_MAX_DEVICES 64
#define VCUDA_MAX_STRING 1024   /* mangled C++ kernel names can be long */
#define VCUDA_MAX_TOKEN 256
#define VCUDA_MAX_PARAMS 512
#define VCUDA_MAX_PARAM_BYTES 32764u /* CUDA's kernel parameter limit (12.1+) */
#define VCUDA_MAX_CUDA_ERROR 10000
#define VCUDA_MAX_SCALARS 16
#define VCUDA_HASH_SIZE 32
#define VCUDA_WHY_LEN 160
/* Writes a reason into a caller's why[VCUDA_WHY_LEN] buffer (nothing if why is NULL). */
void vcuda_vwhy(char *why, const char *fmt, va_list ap);
/* The same with a format, returning `ret`: every failure path of vcuda in one line. */
int vcuda_fail(char *why, int ret, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

enum {
    VCUDA_FLAG_REPLY = 1u << 0, /* server -> client */
    VCUDA_FLAG_ERROR = 1u << 1, /* reply carrying "e(cuda_error) s(message)" instead */
    VCUDA_FLAG_MORE = 1u << 2,  /* another chunk of the same copy follows */
    VCUDA_FLAG_NOREPLY = 1u << 3, /* asynchronous kernel launch: no reply (errors: see server_gpu.h) */
    VCUDA_FLAG_OUTPUT = 1u << 4,  /* reply: device printf output waits (PRINTF_FETCH) */
    /* request, the last chunk of a MEMCPY_H2D: a host-synchronous copy (cudaMemcpy and
     * the others without a stream), complete with the stream's earlier work when the
     * reply comes, as CUDA's synchronous copies from host memory are */
    VCUDA_FLAG_SYNC = 1u << 5,
    VCUDA_FLAG_KNOWN = 63u
};

#define VCUDA_LAUNCH_LAYOUT                                                                 \
    "h(function) g(grid_x) g(grid_y) g(grid_z) g(block_x) g(block_y) g(block_z) "           \
    "u(shared_mem) h(stream) p(params)"

/* A launch with the attributes the driver takes beside the configuration: flags
 * (VCUDA_LAUNCH_*), the cluster dimensions (1x1x1 without VCUDA_LAUNCH_CLUSTER), the
 * priority and the memory sync domain (0 default, 1 remote). */
#define VCUDA_LAUNCH_EX_LAYOUT                                                              \
    "h(function) g(grid_x) g(grid_y) g(grid_z) g(block_x) g(block_y) g(block_z) "           \
    "u(shared_mem) h(stream) u(attributes) g(cluster_x) g(cluster_y) g(cluster_z) "         \
    "i(priority) u(sync_domain) p(params)"
enum {
    VCUDA_LAUNCH_COOPERATIVE = 1u << 0,
    VCUDA_LAUNCH_PROGRAMMATIC = 1u << 1, /* programmatic stream serialization (PDL) */
    VCUDA_LAUNCH_CLUSTER = 1u << 2,
    VCUDA_LAUNCH_PRIORITY = 1u << 3,
    VCUDA_LAUNCH_SYNC_DOMAIN = 1u << 4,
    VCUDA_LAUNCH_KNOWN = 31u
};

/* X(name, code, request layout, success reply layout).  Codes are wire values: never
 * renumber, only append. */
#define VCUDA_OPCODES(X)                                                                    \
    X(HELLO, 1, "u(proto_version) t(client_nonce) s(tenant)", "u(proto_version) t(server_nonce)") \
    X(PING, 2, "", "")                                                                      \
    X(GET_DEVICE_COUNT, 3, "", "n(count)")                                                  \
    X(SET_DEVICE, 4, "d(device)", "")                                                       \
    X(GET_DEVICE, 5, "", "d(device)")                                                       \
    X(GET_DEVICE_PROPERTIES, 6, "d(device)",                                                \
      "s(name) z(total_global_mem) z(shared_mem_per_block) z(l2_cache_size) i(major) "      \
      "i(minor) i(multiprocessors) i(warp_size) i(max_threads_per_block) i(clock_khz) "     \
      "i(memory_clock_khz) i(memory_bus_width)")                                            \
    X(DEVICE_SYNCHRONIZE, 7, "", "")                                                        \
    X(DEVICE_RESET, 8, "", "")                                                              \
    X(MALLOC, 9, "z(size)", "h(dptr)")                                                      \
    X(FREE, 10, "h(dptr)", "")                                                              \
    X(MEMCPY_H2D, 11, "h(dst) h(stream) b(data)", "")                                       \
    X(MEMCPY_D2H, 12, "h(src) z(size) h(stream)", "b(data)")                                \
    X(MEMCPY_D2D, 13, "h(dst) h(src) z(size) h(stream)", "")                                \
    X(MEMSET, 14, "h(dst) i(value) z(size) h(stream)", "")                                  \
    X(STREAM_CREATE, 15, "u(flags)", "h(stream)")                                           \
    X(STREAM_DESTROY, 16, "h(stream)", "")                                                  \
    X(STREAM_SYNCHRONIZE, 17, "h(stream)", "")                                              \
    X(EVENT_CREATE, 18, "u(flags)", "h(event)")                                             \
    X(EVENT_DESTROY, 19, "h(event)", "")                                                    \
    X(EVENT_RECORD, 20, "h(event) h(stream)", "")                                           \
    X(EVENT_SYNCHRONIZE, 21, "h(event)", "")                                                \
    X(EVENT_ELAPSED, 22, "h(start) h(end)", "f(ms)")                                        \
    X(MODULE_LOOKUP, 23, "H(sha256)", "h(module)") /* cached? then no image is sent */      \
    X(MODULE_LOAD, 24, "H(sha256) b(image)", "h(module)")                                   \
    X(MODULE_UNLOAD, 25, "h(module)", "")                                                   \
    X(FUNCTION_GET, 26, "h(module) s(name)", "h(function) a(param_sizes)")                  \
    X(LAUNCH, 27, VCUDA_LAUNCH_LAYOUT, "")                                                  \
    X(DEVICE_GET_ATTRIBUTE, 28, "i(attribute)", "i(value)")                                 \
    X(MEM_GET_INFO, 29, "", "z(free) z(total)")                                             \
    X(DRIVER_GET_VERSION, 30, "", "i(version)")                                             \
    X(SINK, 31, "b(data)", "") /* transport benchmark: bytes received and dropped */        \
    X(TOUCH, 32, "", "") /* keep-alive: a 4-byte D2H copy, P003's "dummy transfer" */   \
    X(EVENT_QUERY, 33, "h(event)", "")  /* not ready: error 600 */                          \
    X(STREAM_QUERY, 34, "h(stream)", "")                                                    \
    X(STREAM_WAIT_EVENT, 35, "h(stream) h(event) u(flags)", "")                             \
    X(STREAM_CREATE_PRIORITY, 36, "u(flags) i(priority)", "h(stream)")                      \
    X(STREAM_PRIORITY_RANGE, 37, "", "i(least) i(greatest)")                                \
    X(LIMIT_SET, 38, "u(limit) z(value)", "")                                               \
    X(LIMIT_GET, 39, "u(limit)", "z(value)")                                                \
    X(FUNC_ATTRIBUTES, 40, "h(function)", /* CUfunction_attribute 0..15, in order */        \
      "i(max_threads) i(shared) i(const) i(local) i(regs) i(ptx) i(binary) i(cache_ca) "    \
      "i(max_dynamic_shared) i(carveout) i(cluster_must_be_set) i(cluster_x) i(cluster_y) " \
      "i(cluster_z) i(non_portable_cluster) i(cluster_policy)")                             \
    X(FUNC_SET_ATTRIBUTE, 41, "h(function) i(attribute) i(value)", "")                      \
    X(OCCUPANCY_BLOCKS, 42, "h(function) g(block_size) z(dynamic_smem) u(flags)", "i(blocks)") \
    X(OCCUPANCY_DYNAMIC_SMEM, 43, "h(function) g(blocks) g(block_size)", "z(bytes)")        \
    X(MODULE_GLOBAL, 44, "h(module) s(name)", "h(dptr) z(size)") /* __device__ variable */  \
    X(LAUNCH_COOPERATIVE, 45, VCUDA_LAUNCH_LAYOUT, "")                                      \
    X(MALLOC_PITCH, 46, "z(width) z(height)", "h(dptr) z(pitch)")                           \
    X(MEMSET_2D, 47, "h(dst) z(pitch) i(value) z(width) z(height) h(stream)", "")           \
    X(PRINTF_FETCH, 48, "", "u(stream) b(text)") /* device output: 1 printf, 2 assertions */ \
    X(GRAPH_INSTANTIATE, 49, "u(node_count) b(nodes)", "h(graph_exec)") /* see "graphs" */  \
    X(GRAPH_LAUNCH, 50, "h(graph_exec) h(stream)", "")                                      \
    X(GRAPH_EXEC_DESTROY, 51, "h(graph_exec)", "")                                          \
    X(LAUNCH_EX, 52, VCUDA_LAUNCH_EX_LAYOUT, "") /* cudaLaunchKernelEx: see "launch attributes" */ \
    X(GRAPH_EXEC_KERNEL_SET, 53, "h(graph_exec) u(node) h(function) g(grid_x) g(grid_y) g(grid_z) " \
      "g(block_x) g(block_y) g(block_z) u(shared_mem) p(params)", "")                        \
    /* 60..69: CUDA arrays, texture and surface objects (see "arrays" below) */            \
    X(ARRAY_CREATE, 60, "u(format) u(channels) z(width) z(height) z(depth) u(flags)", "h(array)") \
    X(ARRAY_DESTROY, 61, "h(array)", "")                                                    \
    X(MEMCPY_3D, 62, "h(stream) b(copy)", "")                                               \
    X(TEX_CREATE, 63, "b(texture)", "h(tex_object)")                                        \
    X(TEX_DESTROY, 64, "h(tex_object)", "")                                                 \
    X(SURF_CREATE, 65, "h(array)", "h(surf_object)")                                        \
    X(SURF_DESTROY, 66, "h(surf_object)", "")                                               \
    X(DEVICE_UUID, 67, "", "b(uuid)") /* cuDeviceGetUuid: 16 bytes */                         \
    /* 80..89: graphs with a server twin (see "graph twins" below) */                      \
    X(GRAPH_TWIN_CREATE, 80, "", "h(graph)")                                                \
    X(GRAPH_TWIN_DESTROY, 81, "h(graph)", "")                                               \
    X(GRAPH_TWIN_ADD_NODE, 82, "h(graph) u(index) b(node)", "h(dptr) b(bodies)")            \
    X(GRAPH_TWIN_ADD_EDGE, 83, "h(graph) u(from) u(to)", "")                                \
    X(GRAPH_COND_CREATE, 84, "h(graph) u(default_value) u(flags)", "h(cond_handle)")        \
    X(GRAPH_TWIN_INSTANTIATE, 85, "h(graph) u(flags)", "h(graph_exec)")                     \
    X(GRAPH_MEM_ATTR_GET, 86, "u(attribute)", "z(value)")                                   \
    X(GRAPH_MEM_ATTR_RESET, 87, "u(attribute)", "") /* the high watermarks: set to 0 */     \
    X(GRAPH_MEM_TRIM, 88, "", "")                                                           \
    /* 100..127: connection control (see "authentication" and "liveness" below) */         \
    X(AUTH, 100, "t(client_proof) u(heartbeat_ms) u(options)",                                \
      "t(server_proof) d(server_device) u(options)")                                       \
    X(PROGRESS, 101, "", "u(elapsed_ms)") /* server -> client only: still working */

typedef enum {
#define VCUDA_X_ENUM(name, code, req, rep) VCUDA_OP_##name = code,
    VCUDA_OPCODES(VCUDA_X_ENUM)
#undef VCUDA_X_ENUM
} vcuda_opcode;

/* The only frames that may carry VCUDA_FLAG_MORE: chunks of a copy to the server (no
 * reply until the last one) and the chunks of a D2H reply. */
#define VCUDA_CHUNKED_REQUEST(op) ((op) == VCUDA_OP_MEMCPY_H2D || (op) == VCUDA_OP_SINK)
#define VCUDA_CHUNKED_REPLY(op) ((op) == VCUDA_OP_MEMCPY_D2H)
/* The only request that may be host-synchronous (VCUDA_FLAG_SYNC). */
#define VCUDA_SYNC_REQUEST(op) ((op) == VCUDA_OP_MEMCPY_H2D)
/* The only requests that may go without a reply (VCUDA_FLAG_NOREPLY): launches. */
#define VCUDA_NOREPLY_REQUEST(op) \
    ((op) == VCUDA_OP_LAUNCH || (op) == VCUDA_OP_GRAPH_LAUNCH || (op) == VCUDA_OP_LAUNCH_EX)

/* Layout of error replies, whatever the opcode. */
#define VCUDA_ERROR_LAYOUT "e(cuda_error) s(message)"

typedef enum {
    VCUDA_OK = 0,
    VCUDA_E_SHORT_HEADER,  /* fewer than VCUDA_HEADER_SIZE bytes */
    VCUDA_E_BAD_MAGIC,
    VCUDA_E_BAD_VERSION,
    VCUDA_E_BAD_OPCODE,
    VCUDA_E_BAD_FLAGS,
    VCUDA_E_OVERSIZE,      /* declared payload length > VCUDA_MAX_PAYLOAD */
    VCUDA_E_TRUNCATED,     /* buffer shorter than header + declared payload */
    VCUDA_E_TRAILING,      /* buffer longer than header + declared payload */
    VCUDA_E_FIELD_OVERRUN, /* a field runs past the end of the payload */
    VCUDA_E_EXTRA_BYTES,   /* payload bytes left after the last field */
    VCUDA_E_BAD_LENGTH,    /* string/token/bytes length outside its limits */
    VCUDA_E_BAD_COUNT,     /* parameter count over VCUDA_MAX_PARAMS */
    VCUDA_E_BAD_SIZE,      /* byte size or parameter size out of bounds */
    VCUDA_E_BAD_STRING,    /* string contains NUL */
    VCUDA_E_BAD_VALUE,     /* device ordinal, dimension or error code out of range */
    VCUDA_E_NO_SPACE,      /* encoder: output buffer too small */
    VCUDA_E_NO_TOKEN,      /* neither VCUDA_TOKEN nor VCUDA_TOKEN_FILE set */
    VCUDA_E_TOKEN_FILE,    /* token file unreadable, not a regular file, or empty */
    VCUDA_E_TOKEN_PERMS    /* token file readable/writable by group or others */
} vcuda_status;

typedef struct {
    uint32_t magic;
    uint16_t version;
    uint16_t opcode;
    uint32_t flags;
    uint64_t request_id;
    uint32_t payload_len;
} vcuda_header;

/* A decoded (or to-be-encoded) frame.  Decoding never allocates: str/blob point into
 * the caller's buffer and are valid as long as it is. */
typedef struct {
    vcuda_header hdr;
    uint64_t v[VCUDA_MAX_SCALARS];
    unsigned nv;
    const uint8_t *str;
    uint32_t str_len;
    const uint8_t *blob;
    uint32_t blob_len;
    uint8_t hash[VCUDA_HASH_SIZE];
    uint32_t nsizes;
    uint32_t sizes[VCUDA_MAX_PARAMS];
} vcuda_msg;

const char *vcuda_status_name(vcuda_status s);
/* NULL for unknown opcodes. */
const char *vcuda_opcode_name(unsigned opcode);
/* Layout of the payload this header announces (request, reply or error). */
const char *vcuda_layout(unsigned opcode, uint32_t flags);

/* Header only: for stream transports that read 24 bytes, validate, then read exactly
 * payload_len (already bounded) bytes.  `why` (VCUDA_WHY_LEN bytes, may be NULL)
 * receives a human-readable reason on failure. */
vcuda_status vcuda_decode_header(const uint8_t *buf, size_t len, vcuda_header *h, char *why);
/* Payload of a validated header; len must equal h->payload_len. */
vcuda_status vcuda_decode_payload(const vcuda_header *h, const uint8_t *payload, size_t len,
                                  vcuda_msg *m, char *why);
/* A whole frame: exactly header + declared payload. */
vcuda_status vcuda_decode(const uint8_t *buf, size_t len, vcuda_msg *m, char *why);

/* Encodes m (hdr.magic/version/payload_len are filled in; opcode, flags, request_id
 * and the fields are the caller's).  Applies the decoder's checks, so a frame that
 * encodes also decodes.  *out_len gets the frame size, also on VCUDA_E_NO_SPACE. */
vcuda_status vcuda_encode(const vcuda_msg *m, uint8_t *buf, size_t cap, size_t *out_len,
                          char *why);

/* The same frame in two parts, so that bulk data is sent from where it lies: buf gets
 * the first *head_len bytes, and when the layout ends in a bytes field ('b') those bytes
 * (m->blob) are the rest, not copied (*head_len == *out_len otherwise). */
vcuda_status vcuda_encode_split(const vcuda_msg *m, uint8_t *buf, size_t cap, size_t *out_len,
                                size_t *head_len, char *why);
/* Whether a payload layout is a single bytes field (e.g. a D2H reply chunk). */
int vcuda_layout_is_bytes_only(const char *layout);

/* Number of chunk frames a copy of `size` bytes takes (at least 1). */
uint64_t vcuda_chunk_count(uint64_t size);

/* ---- graphs ------------------------------------------------------------------------ *
 * GRAPH_INSTANTIATE carries a whole graph in its bytes field, node after node, each:
 *   u32 kind, u32 ndeps, ndeps x u32 dependency indices (strictly increasing, each below
 *   the node's own index: so no duplicate edge and no cycle can be expressed), then
 *   KERNEL: u64 function handle, 6 x u32 grid/block dims in [1, 2^31-1], u32 dynamic
 *           shared memory, u32 argument bytes <= VCUDA_MAX_PARAM_BYTES + the bytes
 *           (packed as LAUNCH's, the server unpacks them by the kernel's own sizes)
 *   COPY:   u64 dst, u64 src, u64 size (device to device)
 *   SET:    u64 dst, u64 pitch, u32 value (a byte), u64 width, u64 height
 *   EMPTY:  nothing more;
 * and, only in a GRAPH_TWIN_ADD_NODE (GRAPH_INSTANTIATE refuses them),
 *   COND:   u64 conditional handle (a GRAPH_COND_CREATE's), u32 type (VCUDA_COND_*),
 *           u32 body count (IF 1 or 2, WHILE 1, SWITCH 1..VCUDA_MAX_COND_BODIES)
 *   ALLOC:  u64 size in [1, VCUDA_MAX_SIZE] (a graph allocation on the server's device)
 *   FREE:   u64 the address a graph allocation of the client's starts at.
 * node_count in [1, VCUDA_MAX_GRAPH_NODES], every byte consumed, the kernels' argument
 * bytes together <= VCUDA_MAX_GRAPH_PARAM_BYTES, sizes <= VCUDA_MAX_SIZE.  Handles and
 * ranges are the server's to check (against the client's own tables).
 *
 * Graph twins.  A graph that needs its identity on the server before it is
 * instantiated -- a conditional handle (kernels take its value as an argument), a
 * conditional node (its body graphs), a memory allocation node (the address is fixed
 * when the node is made) -- gets a twin there: GRAPH_TWIN_CREATE makes a CUgraph held
 * as the client's handle, and from then on every node of the graph is sent as it is
 * added, one GRAPH_TWIN_ADD_NODE each: `index` is the twin's node count (the node's own
 * index, so its dependencies, encoded as above, are the twin's earlier nodes), and the
 * reply carries an allocation's address (ALLOC) or the body graphs' twin handles, u64
 * each (COND; the bodies belong to their node and go with the graph that holds it).
 * GRAPH_TWIN_ADD_EDGE adds a dependency (from, to: node indices; refused if it would
 * close a cycle); GRAPH_TWIN_INSTANTIATE instantiates the twin itself. */
#define VCUDA_MAX_GRAPH_NODES 4096u
#define VCUDA_MAX_GRAPH_PARAM_BYTES (4u << 20)
#define VCUDA_MAX_COND_BODIES 64u
enum {
    VCUDA_GNODE_EMPTY = 0, VCUDA_GNODE_KERNEL, VCUDA_GNODE_COPY, VCUDA_GNODE_SET,
    VCUDA_GNODE_COND, VCUDA_GNODE_ALLOC, VCUDA_GNODE_FREE, VCUDA_GNODE_KINDS
};
enum { VCUDA_COND_IF = 0, VCUDA_COND_WHILE = 1, VCUDA_COND_SWITCH = 2 }; /* CUgraphConditionalNodeType */

typedef struct {
    uint32_t kind, ndeps;
    const uint32_t *deps;   /* encoding: the dependency indices */
    const uint8_t *deps_le; /* decoding: where they lie in the frame (see vcuda_graph_dep) */
    uint64_t function, dst, src, size, pitch, width, height;
    uint32_t dim[6], shmem, value;
    uint64_t cond;                 /* COND: the conditional handle */
    uint32_t cond_type, cond_size; /* COND: VCUDA_COND_*, body count */
    const uint8_t *params; /* kernel argument bytes (decoding: into the frame) */
    uint32_t params_len;
} vcuda_graph_node;

/* Dependency k of a node, whether made for encoding or decoded. */
uint32_t vcuda_graph_dep(const vcuda_graph_node *n, uint32_t k);
/* Decodes `count` nodes (the caller's array, count already within the limit) from the
 * bytes of a GRAPH_INSTANTIATE; never allocates, keeps pointers into p. */
vcuda_status vcuda_graph_decode(const uint8_t *p, size_t len, uint32_t count, vcuda_graph_node *out, char *why);
/* The inverse, with the decoder's checks: buf NULL (or too small) sizes only; *len gets
 * the bytes needed either way. */
vcuda_status vcuda_graph_encode(const vcuda_graph_node *n, uint32_t count, uint8_t *buf, size_t cap, size_t *len,
                                char *why);
/* The same for nodes numbered from `first` on (a GRAPH_TWIN_ADD_NODE: first is its
 * index, count 1), which may take the kinds only a twin takes. */
vcuda_status vcuda_graph_decode_from(const uint8_t *p, size_t len, uint32_t first, uint32_t count,
                                     vcuda_graph_node *out, char *why);
vcuda_status vcuda_graph_encode_from(const vcuda_graph_node *n, uint32_t first, uint32_t count, uint8_t *buf,
                                     size_t cap, size_t *len, char *why);

/* ---- arrays ------------------------------------------------------------------------ *
 * MEMCPY_3D and TEX_CREATE carry a descriptor in their bytes field: exactly
 * VCUDA_COPY_WORDS or VCUDA_TEX_WORDS u64 words (little-endian), each checked against its
 * range by vcuda_desc_decode (the encoder applies the same checks).  The values are the
 * driver's (CUmemorytype, CUarray_format, CUaddress_mode, CU_TRSF_* flags,
 * CUresourceViewFormat ...); array handles and device ranges are the server's to check.
 * Host data never travels in a MEMCPY_3D: the client stages it through a device buffer
 * of its own with the ordinary chunked copies. */
enum { /* MEMCPY_3D: one side is device memory (2) or an array (3), as in CUDA_MEMCPY3D */
    VCUDA_C_SRC_TYPE, VCUDA_C_SRC, VCUDA_C_SRC_X, VCUDA_C_SRC_Y, VCUDA_C_SRC_Z, VCUDA_C_SRC_PITCH, VCUDA_C_SRC_HEIGHT,
    VCUDA_C_DST_TYPE, VCUDA_C_DST, VCUDA_C_DST_X, VCUDA_C_DST_Y, VCUDA_C_DST_Z, VCUDA_C_DST_PITCH, VCUDA_C_DST_HEIGHT,
    VCUDA_C_WIDTH, VCUDA_C_HEIGHT, VCUDA_C_DEPTH, VCUDA_COPY_WORDS
};
enum { /* TEX_CREATE: CUDA_RESOURCE_DESC, CUDA_TEXTURE_DESC, optional CUDA_RESOURCE_VIEW_DESC */
    VCUDA_T_RES_TYPE, VCUDA_T_RES, VCUDA_T_FORMAT, VCUDA_T_CHANNELS, VCUDA_T_WIDTH, VCUDA_T_HEIGHT, VCUDA_T_PITCH,
    VCUDA_T_ADDRESS0, VCUDA_T_ADDRESS1, VCUDA_T_ADDRESS2, VCUDA_T_FILTER, VCUDA_T_FLAGS, VCUDA_T_MAX_ANISOTROPY,
    VCUDA_T_MIP_FILTER, VCUDA_T_MIP_BIAS, VCUDA_T_MIP_MIN, VCUDA_T_MIP_MAX, VCUDA_T_BORDER0, VCUDA_T_BORDER1,
    VCUDA_T_BORDER2, VCUDA_T_BORDER3, VCUDA_T_VIEW, VCUDA_T_VIEW_FORMAT, VCUDA_T_VIEW_WIDTH, VCUDA_T_VIEW_HEIGHT,
    VCUDA_T_VIEW_DEPTH, VCUDA_T_FIRST_MIP, VCUDA_T_LAST_MIP, VCUDA_T_FIRST_LAYER, VCUDA_T_LAST_LAYER, VCUDA_TEX_WORDS
};
enum { VCUDA_MEM_DEVICE = 2, VCUDA_MEM_ARRAY = 3 };
/* CU_RESOURCE_TYPE_*: array, linear, pitch2D (mipmapped arrays are not remoted) */
enum { VCUDA_RES_ARRAY = 0, VCUDA_RES_LINEAR = 2, VCUDA_RES_PITCH2D = 3 };
typedef enum { VCUDA_DESC_COPY, VCUDA_DESC_TEX } vcuda_desc_kind;
/* Bytes per element of a CUarray_format the protocol takes (1..4 channels), 0 if it takes
 * no such format: UNSIGNED/SIGNED_INT8/16/32, HALF, FLOAT. */
unsigned vcuda_format_bytes(uint64_t format);
/* The words of a descriptor (count: VCUDA_COPY_WORDS or VCUDA_TEX_WORDS) from p. */
vcuda_status vcuda_desc_decode(vcuda_desc_kind kind, const uint8_t *p, size_t len, uint64_t *w, char *why);
/* The inverse, with the same checks: buf needs 8 * words bytes. */
vcuda_status vcuda_desc_encode(vcuda_desc_kind kind, const uint64_t *w, uint8_t *buf, size_t cap, size_t *len,
                               char *why);

/* ---- authentication ------------------------------------------------------------- *
 * The token -- the secret of the client's tenant -- never crosses the wire.  The client
 * sends HELLO with a fresh random nonce Nc and the name of its tenant (VCUDA_TENANT,
 * "default" unless set; tenants.h); the server answers with its own fresh nonce Ns; the
 * client proves it holds the tenant's secret with AUTH carrying HMAC-SHA256(secret,
 * "vcuda client" Nc Ns) and the server answers with HMAC-SHA256(secret, "vcuda server"
 * Nc Ns), so the client learns that the server holds the secret too (a rogue server
 * cannot answer).  A HELLO naming a tenant the server does not know gets a nonce like
 * any other, and its AUTH the same "authentication failed" as a wrong secret, after the
 * same work: a client cannot tell which tenants exist.  Ns is new for every connection,
 * so recorded HELLO/AUTH frames replayed on another connection fail; the server also
 * refuses a HELLO whose Nc it saw recently.
 *
 * Frames after the handshake.  Both sides then hold a session key
 *   K = HMAC-SHA256(secret, "vcuda session" || Nc || Ns || heartbeat_ms || server_device)
 * with the secret of the tenant that proved itself (the one its proofs were made with),
 * the last two as the AUTH request and reply carried them, u32 little-endian (a relay
 * that altered either leaves the sides with different keys), and every frame after the
 * AUTH reply, either way -- requests, the chunks of a chunked copy, replies, D2H reply
 * chunks, error replies, PROGRESS, PING/TOUCH/SINK -- is followed on the wire by a
 * 16-byte tag: AES-256-GCM's tag (NIST SP 800-38D) under K with an empty plaintext and
 * the frame (header and payload as sent) as additional data -- GMAC -- with the 96-bit
 * IV = u32 direction (0 client to server, 1 server to client) || u64 sequence number
 * (both little-endian), the number of frames that side sent before this one after AUTH.
 * The sequence number is never sent: both sides count, so a frame injected, replayed
 * (also from another connection: K is new with every Ns), reordered, dropped or altered
 * fails its tag, and the receiver closes the connection ("frame N from PEER: bad
 * authentication tag (injected, replayed or corrupted)"; N is the sequence number it
 * expected); an IV is never used twice under one K (the direction and the count tell
 * every frame of a connection apart), which GCM's tag needs.  payload_len does not count
 * the tag; a receiver checks the header, reads payload and tag, and checks the tag before
 * it decodes the payload (mac.h; net.c and server_loop.c).
 *
 * What this protects: integrity and authenticity of every frame, and their order and
 * completeness within a connection.  What it does not: confidentiality.  Frames travel
 * in clear -- kernel arguments, copied data, module images can be read by anyone on the
 * path.  A site that needs confidentiality runs vcuda over an encrypted network (a VPN,
 * IPsec or WireGuard between the nodes, or an encrypting fabric).  The handshake frames
 * themselves carry no tag: what they carry is bound by the proofs and by K.  AUTH's
 * options (VCUDA_AUTH_TAGS below) let both ends agree on no tags; each proof covers its
 * sender's options.
 *
 * Liveness: AUTH carries the interval at which the client wants to hear from a server
 * that is still working on its request (heartbeat_ms).  While a request takes longer,
 * the server sends PROGRESS frames (REPLY flag, the request's id); the client restarts
 * its deadline on each, so a wait on long GPU work succeeds while a dead, stopped or
 * unreachable server is still detected within the client's timeout. */
#define VCUDA_NONCE_SIZE 32
#define VCUDA_PROOF_SIZE 32
/* HMAC-SHA256(token, "vcuda client"|"vcuda server" || nc || ns || options, u32 LE). */
/* AUTH's options, each side's own, covered by its proof (so a relay cannot change them):
 * VCUDA_AUTH_TAGS, frames after the handshake carry tags (mac.h).  A server and a client
 * that differ are refused by name: without tags only where both ends were told so
 * (vcuda-server --frame-tags off, VCUDA_FRAME_TAGS=off), for a network the site trusts. */
#define VCUDA_AUTH_TAGS 1u
#define VCUDA_AUTH_KNOWN 1u
void vcuda_auth_proof(const uint8_t *token, size_t tlen, int server, const uint8_t nc[VCUDA_NONCE_SIZE],
                      const uint8_t ns[VCUDA_NONCE_SIZE], uint32_t options, uint8_t out[VCUDA_PROOF_SIZE]);
/* n bytes from the kernel's random source (getrandom); 0 or -1. */
int vcuda_random(uint8_t *out, size_t n);

/* Time depends only on VCUDA_MAX_TOKEN, never on where the tokens differ or on their
 * lengths (lengths > VCUDA_MAX_TOKEN never compare equal). */
int vcuda_token_equal(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen);
/* VCUDA_TOKEN if set, else the file named by VCUDA_TOKEN_FILE, which must be a regular
 * file owned by us and not accessible by group or others (trailing whitespace is
 * stripped).  out holds VCUDA_MAX_TOKEN bytes. */
vcuda_status vcuda_token_load(uint8_t *out, size_t *len, char *why);
/* Opens a file that holds secrets (a token file, a tenants file) for reading: it must be
 * a regular file, not a symbolic link, owned by this process's user and not accessible
 * by group or others.  The checks are made on the opened file, so the file checked is
 * the file read.  VCUDA_OK with *fd open, else VCUDA_E_TOKEN_FILE or VCUDA_E_TOKEN_PERMS
 * with the reason (`what` names the file's role in it, e.g. "token file"). */
vcuda_status vcuda_private_file_open(const char *path, const char *what, int *fd, char *why);

#ifdef __cplusplus
}
#endif
#endif

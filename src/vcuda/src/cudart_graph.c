/* CUDA graphs and stream capture in the libcudart stand-in.  The graph, its nodes and
 * the capture state of streams live here: the other families only ask whether a stream
 * is capturing and hand over what it was given (rt_capture_*). */
#define _GNU_SOURCE
#include "cudart_internal.h"

/* A graph is kept here, as the list of its nodes and their dependencies, built by the
 * cudaGraphAdd* calls or by stream capture (a capturing stream, and every stream that
 * waits on an event recorded in it, appends what it is given instead of sending it).
 * Instantiation fixes an order that respects every dependency.  A graph of kernels,
 * device-to-device copies, sets and empty nodes is then sent whole to the server
 * (GRAPH_INSTANTIATE), which builds and instantiates it as a CUgraph: cudaGraphLaunch
 * is one frame, and the GPU runs independent branches concurrently.  A graph that
 * touches this process's memory -- host nodes (the function runs here), copies from or
 * to host memory (read or written here when the node runs), 3-D copies -- or exceeds
 * the server's graph limits is replayed instead: cudaGraphLaunch issues its nodes in
 * that order into the launch stream, each executed on the server as the call it was
 * made from or run here (host nodes); only the concurrency between independent branches
 * is given up, results are the same.  VCUDA_GRAPHS=client replays every graph.
 *
 * A graph that needs its identity on the server before it is instantiated -- a
 * conditional handle (kernels take its value as an argument, and set it on the GPU), a
 * conditional node (its body graphs), a memory allocation node (its address is fixed
 * when the node is made), a cudaMallocAsync or cudaFreeAsync in a capture -- gets a twin
 * there (proto.h, "graph twins"): from then on each node is sent as it is added, and
 * instantiating it instantiates the twin; such a graph is never replayed, and cloning
 * it or updating its exec is refused by name.  Other graphs keep the one-frame path. */

#define GRAPH_MAGIC 0x47524150u
#define EXEC_MAGIC 0x47455845u

static pthread_mutex_t graph_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic unsigned long long capture_ids;

static graph *as_graph(const void *g, uint32_t magic)
{
    const graph *x = g;
    return x && x->magic == magic ? (graph *)x : NULL;
}

cudaError_t rt_join_capture(graph *g, remote_object *so)
{
    pthread_mutex_lock(&graph_mu);
    int full = g->njoined == sizeof g->joined / sizeof *g->joined;
    if (!full) g->joined[g->njoined++] = so, so->capture = g;
    pthread_mutex_unlock(&graph_mu);
    return full ? unsupported("cudaStreamWaitEvent", "more than 64 streams joining one capture") : cudaSuccess;
}

graph *rt_capturing(cudaStream_t s)
{
    const remote_object *o = (const remote_object *)rt_existing_stream(s);
    return o && o->magic == STREAM_MAGIC ? o->capture : NULL;
}

/* The capture's dependency set becomes (add: also holds) nodes[0..n); room for at least
 * one node is made.  -1 if out of memory. */
static int set_front(graph *g, graph_node *const *nodes, size_t n, int add)
{
    size_t need = (add ? g->nfront : 0) + n + 1;
    if (n && nodes >= g->front && nodes < g->front + g->cap_front) { /* (the set itself, from cudaStreamGetCaptureInfo) */
        graph_node **copy = malloc(n * sizeof *copy);
        if (!copy) return -1;
        memcpy(copy, nodes, n * sizeof *copy);
        int r = set_front(g, copy, n, add);
        free(copy);
        return r;
    }
    if (need > g->cap_front) {
        graph_node **f = realloc(g->front, need * sizeof *f);
        if (f) g->front = f;
        cudaGraphEdgeData *e = f ? realloc(g->front_edges, need * sizeof *e) : NULL;
        if (!e) return -1;
        g->front_edges = e, g->cap_front = need;
    }
    if (!add) g->nfront = 0;
    for (size_t i = 0; i < n; ++i) g->front[g->nfront++] = nodes[i];
    memset(g->front_edges, 0, g->cap_front * sizeof *g->front_edges);
    return 0;
}

/* A new node of g after deps (or, when capturing, after the capture's dependency set). */
static graph_node *add_node(graph *g, node_kind kind, graph_node *const *deps, size_t ndeps, int capture)
{
    if (capture && set_front(g, NULL, 0, 1)) return NULL; /* (room for the node itself, made first) */
    graph_node *n = calloc(1, sizeof *n);
    graph_node *const *d = capture ? g->front : deps;
    size_t nd = capture ? g->nfront : ndeps;
    if (!n || (nd && !(n->deps = malloc(nd * sizeof *n->deps)))) return free(n), NULL;
    for (size_t i = 0; i < nd; ++i) {
        if (!d[i] || d[i]->owner != g) return free(n->deps), free(n), NULL;
        n->deps[i] = d[i];
    }
    n->ndeps = nd, n->kind = kind, n->owner = g, n->tidx = UINT32_MAX;
    if (rt_grow(&g->nodes, &g->cap, g->nnodes, sizeof *g->nodes)) return free(n->deps), free(n), NULL;
    n->index = g->nnodes;
    g->nodes[g->nnodes++] = n;
    if (capture) g->front[0] = n, g->nfront = 1;
    return n;
}

static cudaError_t kernel_node(graph_node *n, kernel *k, dim3 grid, dim3 block, size_t shmem, void **args)
{
    uint64_t fn;
    cudaError_t e;
    if (!k) return rt_record(cudaErrorInvalidDeviceFunction);
    if ((e = rt_resolve(k, &fn))) return e; /* the argument sizes */
    size_t total = 0;
    for (uint32_t i = 0; i < k->nparams; ++i) total += k->sizes[i];
    if (!(n->args = malloc(total ? total : 1))) return rt_record(cudaErrorMemoryAllocation);
    for (uint32_t i = 0, at = 0; i < k->nparams; at += k->sizes[i++]) memcpy(n->args + at, args[i], k->sizes[i]);
    n->k = k, n->grid = grid, n->block = block, n->shmem = shmem;
    return cudaSuccess;
}

/* ---- graph twins (see "graphs" above, and proto.h) ---- */
static void free_graph(graph *g);
static int server_node(const graph_node *n);
static int cmp_u32(const void *a, const void *b);

/* The wire form of node n's own fields (its dependencies aside), resolving a kernel on
 * the current device. */
static cudaError_t wire_node(const graph_node *n, vcuda_graph_node *x)
{
    cudaError_t e = cudaSuccess;
    switch (n->kind) {
    case NODE_KERNEL: {
        uint64_t fn;
        if ((e = rt_resolve(n->k, &fn))) break;
        x->kind = VCUDA_GNODE_KERNEL, x->function = fn;
        uint32_t dims[6] = {n->grid.x, n->grid.y, n->grid.z, n->block.x, n->block.y, n->block.z};
        memcpy(x->dim, dims, sizeof dims);
        x->shmem = (uint32_t)n->shmem, x->params = n->args, x->params_len = 0;
        for (uint32_t p = 0; p < n->k->nparams; ++p) x->params_len += n->k->sizes[p];
        break;
    }
    case NODE_COPY: x->kind = VCUDA_GNODE_COPY, x->dst = (uintptr_t)n->dst, x->src = (uintptr_t)n->src, x->size = n->n; break;
    case NODE_SET:
        x->kind = VCUDA_GNODE_SET, x->dst = (uintptr_t)n->dst, x->pitch = n->pitch, x->value = (uint32_t)n->value & 0xff;
        x->width = n->width, x->height = n->height;
        break;
    case NODE_COND:
        x->kind = VCUDA_GNODE_COND, x->cond = n->cond, x->cond_type = (uint32_t)n->cond_type, x->cond_size = n->nbodies;
        break;
    case NODE_ALLOC: x->kind = VCUDA_GNODE_ALLOC, x->size = n->n; break;
    case NODE_FREE: x->kind = VCUDA_GNODE_FREE, x->dst = (uintptr_t)n->dst; break;
    default: x->kind = VCUDA_GNODE_EMPTY; break;
    }
    return e;
}

/* A request about g's twin, to the device that holds it; the server's reason on stderr. */
static cudaError_t twin_call(const graph *g, vcuda_msg *m, vcuda_msg *r, const char *api)
{
    char why[VCUDA_WHY_LEN];
    cudaError_t e = rt_ready();
    if (e) return rt_record(e);
    int saved = rt_current_device;
    rt_current_device = g->twin_device;
    vcuda_client_status st = vcuda_client_call(rt_current_device, m, r, 0, why);
    if (st == VCUDA_CLIENT_REMOTE_ERROR) fprintf(stderr, "vcuda: %s: %.*s\n", api, (int)r->str_len, (const char *)r->str);
    e = rt_result(st, r, api, why);
    rt_current_device = saved;
    return e;
}

/* Node n (its dependencies there already) goes to g's twin: an allocation gets its
 * address, a conditional node its body graphs (twins of their own).  graph_mu held. */
static cudaError_t twin_push(graph *g, graph_node *n, const char *api)
{
    char why[VCUDA_WHY_LEN];
    vcuda_graph_node x;
    vcuda_msg m, r;
    size_t len = 0;
    int saved = rt_current_device;
    rt_current_device = g->twin_device; /* (server_node and wire_node ask it) */
    int ok = n->kind == NODE_COND || n->kind == NODE_ALLOC || n->kind == NODE_FREE || server_node(n);
    rt_current_device = saved;
    if (!ok)
        return unsupported(api, "host nodes, copies from or to host memory and 3-D copies in a graph with conditional "
                                "or memory nodes");
    memset(&x, 0, sizeof x);
    uint32_t *d = malloc((n->ndeps ? n->ndeps : 1) * sizeof *d);
    uint8_t *blob = NULL;
    if (!d) return rt_record(cudaErrorMemoryAllocation);
    for (size_t k = 0; k < n->ndeps; ++k) d[x.ndeps++] = n->deps[k]->tidx;
    qsort(d, x.ndeps, sizeof *d, cmp_u32);
    uint32_t nd = x.ndeps;
    x.ndeps = 0, x.deps = d;
    for (uint32_t k = 0; k < nd; ++k)
        if (!x.ndeps || d[k] != d[x.ndeps - 1]) d[x.ndeps++] = d[k];
    rt_current_device = g->twin_device;
    cudaError_t e = nd && d[nd - 1] == UINT32_MAX ? cudaErrorInvalidValue : wire_node(n, &x);
    rt_current_device = saved;
    if (!e && (vcuda_graph_encode_from(&x, g->tn, 1, NULL, 0, &len, why) || !(blob = malloc(len)) ||
               vcuda_graph_encode_from(&x, g->tn, 1, blob, len, &len, why)))
        e = blob ? cudaErrorInvalidValue : cudaErrorMemoryAllocation;
    if (!e) {
        memset(&m, 0, sizeof m);
        m.hdr.opcode = VCUDA_OP_GRAPH_TWIN_ADD_NODE;
        m.v[0] = g->twin, m.v[1] = g->tn, m.nv = 2;
        m.blob = blob, m.blob_len = (uint32_t)len;
        e = twin_call(g, &m, &r, api);
    }
    free(d), free(blob);
    if (e) return rt_record(e);
    if (n->kind == NODE_ALLOC) { /* device memory from the node's creation on, as with the driver */
        n->dst = (void *)(uintptr_t)r.v[0];
        if (rt_table_add(g->twin_device, r.v[0], n->n)) return rt_record(cudaErrorMemoryAllocation);
    }
    if (n->kind == NODE_COND) {
        if (r.blob_len != 8u * n->nbodies) return rt_record(cudaErrorUnknown);
        for (unsigned k = 0; k < n->nbodies; ++k) {
            graph *b = calloc(1, sizeof *b);
            if (!b) return rt_record(cudaErrorMemoryAllocation);
            b->magic = GRAPH_MAGIC, b->body = 1, b->twin_device = g->twin_device;
            for (int i = 0; i < 8; ++i) b->twin |= (uint64_t)r.blob[8 * k + i] << (8 * i);
            n->bodies[k] = b;
        }
    }
    n->tidx = g->tn++;
    return cudaSuccess;
}

/* g gets a twin on the current device, holding the nodes it has (each after those it
 * depends on); none if anything fails.  graph_mu held. */
static cudaError_t twin_graph(graph *g, const char *api)
{
    vcuda_msg r;
    g->twin_device = rt_current_device;
    cudaError_t e = rt_call(VCUDA_OP_GRAPH_TWIN_CREATE, NULL, 0, &r, api);
    uint8_t *done = calloc(g->nnodes ? g->nnodes : 1, 1);
    if (!e && !done) e = rt_record(cudaErrorMemoryAllocation);
    if (e) return free(done), e;
    g->twin = r.v[0], g->tn = 0;
    for (size_t pushed = 0; !e && pushed < g->nnodes;) {
        size_t before = pushed;
        for (size_t i = 0; i < g->nnodes && !e; ++i) {
            int ready_ = !done[i];
            for (size_t k = 0; ready_ && k < g->nodes[i]->ndeps; ++k) ready_ = done[g->nodes[i]->deps[k]->index];
            if (ready_) e = twin_push(g, g->nodes[i], api), done[i] = 1, ++pushed;
        }
        if (!e && pushed == before) e = rt_record(cudaErrorInvalidValue); /* a cycle */
    }
    free(done);
    if (e) {
        rt_call(VCUDA_OP_GRAPH_TWIN_DESTROY, &g->twin, 1, &r, api);
        g->twin = 0;
        for (size_t i = 0; i < g->nnodes; ++i) g->nodes[i]->tidx = UINT32_MAX;
    }
    return e;
}

/* After node n was added to g: to the twin, if g has one or n needs it.  graph_mu held. */
static cudaError_t node_added(graph *g, graph_node *n, const char *api)
{
    if (g->twin) return twin_push(g, n, api);
    if (n->kind == NODE_COND || n->kind == NODE_ALLOC || n->kind == NODE_FREE) return twin_graph(g, api);
    return cudaSuccess;
}

/* The last node added to g goes again (it could not be added); a capture's dependency
 * set is what it was before.  graph_mu held. */
static void drop_node(graph *g, graph_node *n, int capture)
{
    if (capture) set_front(g, n->deps, n->ndeps, 0);
    --g->nnodes;
    free(n->deps), free(n->args), free(n->bodies), free(n);
}

/* A node made by a capture: kept unless the twin refused it (then the error). */
static cudaError_t captured(graph *g, graph_node *n, cudaError_t e, const char *api)
{
    cudaError_t t = node_added(g, n, api);
    if (t) drop_node(g, n, 1);
    return t ? t : e;
}

int rt_capture_kernel(cudaStream_t s, void *k, dim3 grid, dim3 block, void **args, size_t shmem, cudaError_t *e)
{
    graph *g = rt_capturing(s);
    if (!g) return 0;
    pthread_mutex_lock(&graph_mu);
    graph_node *n = add_node(g, NODE_KERNEL, NULL, 0, 1);
    *e = n ? kernel_node(n, k, grid, block, shmem, args) : rt_record(cudaErrorMemoryAllocation);
    if (n && *e) n->kind = NODE_EMPTY; /* keeps the order; the error is the capture's */
    if (n) *e = captured(g, n, *e, "cudaLaunchKernel");
    pthread_mutex_unlock(&graph_mu);
    return 1;
}

int rt_capture_copy(cudaStream_t s, void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaError_t *e)
{
    graph *g = rt_capturing(s);
    if (!g) return 0;
    pthread_mutex_lock(&graph_mu);
    graph_node *x = add_node(g, NODE_COPY, NULL, 0, 1);
    if (x) x->dst = dst, x->src = src, x->n = n, x->copy_kind = kind;
    *e = x ? captured(g, x, cudaSuccess, "cudaMemcpyAsync") : rt_record(cudaErrorMemoryAllocation);
    pthread_mutex_unlock(&graph_mu);
    return 1;
}

int rt_capture_set(cudaStream_t s, void *p, size_t pitch, int value, size_t width, size_t height, cudaError_t *e)
{
    graph *g = rt_capturing(s);
    if (!g) return 0;
    pthread_mutex_lock(&graph_mu);
    graph_node *x = add_node(g, NODE_SET, NULL, 0, 1);
    if (x) x->dst = p, x->pitch = pitch, x->value = value, x->width = width, x->height = height;
    *e = x ? captured(g, x, cudaSuccess, "cudaMemsetAsync") : rt_record(cudaErrorMemoryAllocation);
    pthread_mutex_unlock(&graph_mu);
    return 1;
}

int rt_capture_host(cudaStream_t s, cudaHostFn_t fn, void *data, cudaError_t *e)
{
    graph *g = rt_capturing(s);
    if (!g) return 0;
    pthread_mutex_lock(&graph_mu);
    graph_node *x = add_node(g, NODE_HOST, NULL, 0, 1);
    if (x) x->fn = fn, x->data = data;
    *e = x ? captured(g, x, cudaSuccess, "cudaLaunchHostFunc") : rt_record(cudaErrorMemoryAllocation);
    pthread_mutex_unlock(&graph_mu);
    return 1;
}

EXPORT cudaError_t cudaGraphCreate(cudaGraph_t *out, unsigned flags)
{
    if (!out || flags) return rt_record(cudaErrorInvalidValue);
    graph *g = calloc(1, sizeof *g);
    if (!g) return rt_record(cudaErrorMemoryAllocation);
    g->magic = GRAPH_MAGIC;
    *out = (cudaGraph_t)g;
    return cudaSuccess;
}

static void free_graph(graph *g)
{
    for (size_t i = 0; i < g->nnodes; ++i) {
        graph_node *n = g->nodes[i];
        if (g->magic == GRAPH_MAGIC) /* (an exec's copies share the graph's bodies) */
            for (unsigned k = 0; n->bodies && k < n->nbodies; ++k)
                if (n->bodies[k]) free_graph(n->bodies[k]);
        if (g->magic == GRAPH_MAGIC) free(n->bodies);
        free(n->deps), free(n->args), free(n);
    }
    free(g->nodes), free(g->front), free(g->front_edges);
    g->magic = 0;
    free(g);
}

/* cudaGraphDestroy and cudaGraphExecDestroy: a graph or an instantiated one. */
static cudaError_t destroy_graph(void *p, uint32_t magic)
{
    graph *g = as_graph(p, magic);
    if (!g) return rt_record(cudaErrorInvalidValue);
    pthread_mutex_lock(&graph_mu);
    free_graph(g);
    pthread_mutex_unlock(&graph_mu);
    return cudaSuccess;
}

/* A graph with a twin: the twin goes first (the server keeps it while execs of it live). */
EXPORT cudaError_t cudaGraphDestroy(cudaGraph_t gr)
{
    graph *g = as_graph(gr, GRAPH_MAGIC);
    vcuda_msg r;
    if (!g || g->body) return rt_record(cudaErrorInvalidValue); /* (a body goes with its node) */
    if (g->twin) {
        int saved = rt_current_device;
        rt_current_device = g->twin_device;
        rt_call(VCUDA_OP_GRAPH_TWIN_DESTROY, &g->twin, 1, &r, "cudaGraphDestroy");
        rt_current_device = saved;
    }
    return destroy_graph(gr, GRAPH_MAGIC);
}

/* Node creation for the cudaGraphAdd* calls: checks, adds, fills (fill may fail). */
#define ADD_NODE(kind_, fill) ADD_NODE_THEN(kind_, fill, (void)0)
/* ... and once it is made (and in the graph's twin, if it has one): then. */
#define ADD_NODE_THEN(kind_, fill, then)                                                       \
    do {                                                                                       \
        graph *g = as_graph(gr, GRAPH_MAGIC);                                                  \
        cudaError_t e_ = cudaSuccess;                                                          \
        if (!out || !g || (ndeps && !deps)) return rt_record(cudaErrorInvalidValue);           \
        pthread_mutex_lock(&graph_mu);                                                         \
        graph_node *n = add_node(g, kind_, (graph_node *const *)deps, ndeps, 0);               \
        if (!n) e_ = cudaErrorInvalidValue;                                                    \
        else {                                                                                 \
            fill;                                                                              \
            if (!e_) e_ = node_added(g, n, __func__);                                          \
            if (e_) drop_node(g, n, 0);                                                        \
            else *out = (cudaGraphNode_t)n, then;                                              \
        }                                                                                      \
        pthread_mutex_unlock(&graph_mu);                                                       \
        return e_ ? rt_record(e_) : cudaSuccess;                                               \
    } while (0)

EXPORT cudaError_t cudaGraphAddEmptyNode(cudaGraphNode_t *out, cudaGraph_t gr, const cudaGraphNode_t *deps, size_t ndeps)
{
    ADD_NODE(NODE_EMPTY, (void)0);
}

EXPORT cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t *out, cudaGraph_t gr, const cudaGraphNode_t *deps, size_t ndeps,
                                          const struct cudaKernelNodeParams *p)
{
    if (!p || p->extra) return p ? unsupported("cudaGraphAddKernelNode", "arguments through 'extra'") : rt_record(cudaErrorInvalidValue);
    ADD_NODE(NODE_KERNEL, e_ = kernel_node(n, rt_find_kernel(p->func), p->gridDim, p->blockDim, p->sharedMemBytes, p->kernelParams));
}

EXPORT cudaError_t cudaGraphAddMemcpyNode(cudaGraphNode_t *out, cudaGraph_t gr, const cudaGraphNode_t *deps, size_t ndeps,
                                          const struct cudaMemcpy3DParms *p)
{
    if (!p) return rt_record(cudaErrorInvalidValue);
    if (p->srcArray || p->dstArray) return unsupported("cudaGraphAddMemcpyNode", "CUDA arrays are not remoted");
    ADD_NODE(NODE_COPY3D, n->p3 = *p);
}

EXPORT cudaError_t cudaGraphAddMemcpyNode1D(cudaGraphNode_t *out, cudaGraph_t gr, const cudaGraphNode_t *deps,
                                            size_t ndeps, void *dst, const void *src, size_t count,
                                            enum cudaMemcpyKind kind)
{
    ADD_NODE(NODE_COPY, (n->dst = dst, n->src = src, n->n = count, n->copy_kind = kind));
}

EXPORT cudaError_t cudaGraphAddMemsetNode(cudaGraphNode_t *out, cudaGraph_t gr, const cudaGraphNode_t *deps, size_t ndeps,
                                          const struct cudaMemsetParams *p)
{
    if (!p || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4)) return rt_record(cudaErrorInvalidValue);
    /* sets are bytewise here: a wider element must repeat one byte (0 and -1 do) */
    unsigned v = p->value, b = v & 0xff;
    if (p->elementSize > 1 && v != (b * (p->elementSize == 2 ? 0x0101u : 0x01010101u)))
        return unsupported("cudaGraphAddMemsetNode", "a 2- or 4-byte pattern whose bytes differ");
    ADD_NODE(NODE_SET, (n->dst = p->dst, n->pitch = p->pitch ? p->pitch : p->width * p->elementSize,
                        n->value = (int)b, n->width = p->width * p->elementSize, n->height = p->height ? p->height : 1));
}

EXPORT cudaError_t cudaGraphAddHostNode(cudaGraphNode_t *out, cudaGraph_t gr, const cudaGraphNode_t *deps, size_t ndeps,
                                        const struct cudaHostNodeParams *p)
{
    if (!p || !p->fn) return rt_record(cudaErrorInvalidValue);
    ADD_NODE(NODE_HOST, (n->fn = p->fn, n->data = p->userData));
}

/* ---- conditional and memory nodes (their graph gets a twin: see "graphs") ---- */

EXPORT cudaError_t cudaGraphConditionalHandleCreate(cudaGraphConditionalHandle *out, cudaGraph_t gr, unsigned dflt,
                                                    unsigned flags)
{
    graph *g = as_graph(gr, GRAPH_MAGIC);
    vcuda_msg m, r;
    if (!out || !g) return rt_record(cudaErrorInvalidValue);
    pthread_mutex_lock(&graph_mu);
    cudaError_t e = g->twin ? cudaSuccess : twin_graph(g, "cudaGraphConditionalHandleCreate");
    if (!e) {
        memset(&m, 0, sizeof m);
        m.hdr.opcode = VCUDA_OP_GRAPH_COND_CREATE;
        m.v[0] = g->twin, m.v[1] = dflt, m.v[2] = flags, m.nv = 3;
        if (!(e = twin_call(g, &m, &r, "cudaGraphConditionalHandleCreate"))) *out = r.v[0];
    }
    pthread_mutex_unlock(&graph_mu);
    return e;
}

/* A conditional node; its body graphs (p->phGraph_out) are the node's, filled by the
 * program with nodes or a capture. */
static cudaError_t add_conditional(cudaGraphNode_t *out, cudaGraph_t gr, const cudaGraphNode_t *deps, size_t ndeps,
                                   struct cudaConditionalNodeParams *p)
{
    if (!p || p->size < 1 || p->size > VCUDA_MAX_COND_BODIES) return rt_record(cudaErrorInvalidValue);
    ADD_NODE(NODE_COND, (n->cond = p->handle, n->cond_type = (int)p->type, n->nbodies = p->size,
                         e_ = (n->bodies = calloc(p->size, sizeof *n->bodies)) ? cudaSuccess : cudaErrorMemoryAllocation,
                         p->phGraph_out = (cudaGraph_t *)n->bodies));
}

/* Allocation properties vcuda takes: pinned memory of the current device, no IPC, no
 * peer access (the address is the server's device's). */
static cudaError_t alloc_props(const struct cudaMemPoolProps *pp, size_t naccess, size_t size, const char *api)
{
    if (pp->allocType != cudaMemAllocationTypePinned || pp->location.type != cudaMemLocationTypeDevice ||
        pp->handleTypes != cudaMemHandleTypeNone || !size)
        return rt_record(cudaErrorInvalidValue);
    if (pp->location.id != rt_current_device) return unsupported(api, "an allocation node for another device than the current one");
    if (naccess) return unsupported(api, "peer access descriptors of a graph allocation");
    return cudaSuccess;
}

EXPORT cudaError_t cudaGraphAddMemAllocNode(cudaGraphNode_t *out, cudaGraph_t gr, const cudaGraphNode_t *deps,
                                            size_t ndeps, struct cudaMemAllocNodeParams *p)
{
    cudaError_t e = p ? alloc_props(&p->poolProps, p->accessDescCount, p->bytesize, "cudaGraphAddMemAllocNode")
                      : rt_record(cudaErrorInvalidValue);
    if (e) return e;
    ADD_NODE_THEN(NODE_ALLOC, (n->n = p->bytesize), p->dptr = n->dst);
}

EXPORT cudaError_t cudaGraphAddMemFreeNode(cudaGraphNode_t *out, cudaGraph_t gr, const cudaGraphNode_t *deps,
                                           size_t ndeps, void *dptr)
{
    if (!dptr) return rt_record(cudaErrorInvalidValue);
    ADD_NODE(NODE_FREE, (n->dst = dptr));
}

/* cudaGraphAddNode: each type as its own cudaGraphAdd*Node call would make it. */
EXPORT cudaError_t cudaGraphAddNode(cudaGraphNode_t *out, cudaGraph_t gr, const cudaGraphNode_t *deps,
                                    const cudaGraphEdgeData *edges, size_t ndeps, struct cudaGraphNodeParams *p)
{
    (void)edges; /* edge data (programmatic ports) only tunes overlap, as in cudaGraphAddDependencies */
    if (!p) return rt_record(cudaErrorInvalidValue);
    switch (p->type) {
    case cudaGraphNodeTypeKernel: {
        struct cudaKernelNodeParams k = {.func = p->kernel.func, .gridDim = p->kernel.gridDim, .blockDim = p->kernel.blockDim,
                                         .sharedMemBytes = p->kernel.sharedMemBytes, .kernelParams = p->kernel.kernelParams,
                                         .extra = p->kernel.extra};
        return cudaGraphAddKernelNode(out, gr, deps, ndeps, &k);
    }
    case cudaGraphNodeTypeMemcpy:
        if (p->memcpy.flags) return rt_record(cudaErrorInvalidValue);
        return cudaGraphAddMemcpyNode(out, gr, deps, ndeps, &p->memcpy.copyParams);
    case cudaGraphNodeTypeMemset: {
        struct cudaMemsetParams m = {.dst = p->memset.dst, .pitch = p->memset.pitch, .value = p->memset.value,
                                     .elementSize = p->memset.elementSize, .width = p->memset.width, .height = p->memset.height};
        return cudaGraphAddMemsetNode(out, gr, deps, ndeps, &m);
    }
    case cudaGraphNodeTypeHost: {
        struct cudaHostNodeParams h = {.fn = p->host.fn, .userData = p->host.userData};
        return cudaGraphAddHostNode(out, gr, deps, ndeps, &h);
    }
    case cudaGraphNodeTypeEmpty: return cudaGraphAddEmptyNode(out, gr, deps, ndeps);
    case cudaGraphNodeTypeMemAlloc: {
        struct cudaMemAllocNodeParams a = {.poolProps = p->alloc.poolProps, .accessDescs = p->alloc.accessDescs,
                                           .accessDescCount = p->alloc.accessDescCount, .bytesize = p->alloc.bytesize};
        cudaError_t e = cudaGraphAddMemAllocNode(out, gr, deps, ndeps, &a);
        if (!e) p->alloc.dptr = a.dptr;
        return e;
    }
    case cudaGraphNodeTypeMemFree: return cudaGraphAddMemFreeNode(out, gr, deps, ndeps, p->free.dptr);
    case cudaGraphNodeTypeConditional: return add_conditional(out, gr, deps, ndeps, &p->conditional);
    default: return unsupported("cudaGraphAddNode", "child graph, event and external semaphore nodes");
    }
}

/* cudaMallocAsync and cudaFreeAsync in a capture: an allocation node (the address is
 * known at once, as with the driver) and a free node. */
cudaError_t rt_capture_memory(graph *g, void **p, void *dptr, size_t size, const char *api)
{
    pthread_mutex_lock(&graph_mu);
    graph_node *n = add_node(g, p ? NODE_ALLOC : NODE_FREE, NULL, 0, 1);
    cudaError_t e = n ? cudaSuccess : rt_record(cudaErrorMemoryAllocation);
    if (n) n->n = size, n->dst = dptr, e = captured(g, n, cudaSuccess, api);
    if (!e && p) *p = n->dst;
    pthread_mutex_unlock(&graph_mu);
    return e;
}

/* ---- graph memory (the server's device's: its driver's own accounting) ---- */

/* A request with scalars v about device (valid), on its server. */
static cudaError_t device_call(int device, unsigned op, const uint64_t *v, unsigned nv, vcuda_msg *r, const char *api)
{
    cudaError_t e = rt_valid_device(device);
    if (e) return e;
    int saved = rt_current_device;
    rt_current_device = device;
    e = rt_call(op, v, nv, r, api);
    rt_current_device = saved;
    return e;
}

EXPORT cudaError_t cudaDeviceGetGraphMemAttribute(int device, enum cudaGraphMemAttributeType attr, void *value)
{
    vcuda_msg r;
    uint64_t a = (uint64_t)attr;
    if (!value || a > cudaGraphMemAttrReservedMemHigh) return rt_record(cudaErrorInvalidValue);
    cudaError_t e = device_call(device, VCUDA_OP_GRAPH_MEM_ATTR_GET, &a, 1, &r, "cudaDeviceGetGraphMemAttribute");
    if (!e) *(unsigned long long *)value = r.v[0];
    return e;
}

/* Only the high watermarks can be set, and only to 0 (a reset), as with the driver. */
EXPORT cudaError_t cudaDeviceSetGraphMemAttribute(int device, enum cudaGraphMemAttributeType attr, void *value)
{
    vcuda_msg r;
    uint64_t a = (uint64_t)attr;
    if (!value || (attr != cudaGraphMemAttrUsedMemHigh && attr != cudaGraphMemAttrReservedMemHigh) ||
        *(const unsigned long long *)value)
        return rt_record(cudaErrorInvalidValue);
    return device_call(device, VCUDA_OP_GRAPH_MEM_ATTR_RESET, &a, 1, &r, "cudaDeviceSetGraphMemAttribute");
}

EXPORT cudaError_t cudaDeviceGraphMemTrim(int device)
{
    vcuda_msg r;
    return device_call(device, VCUDA_OP_GRAPH_MEM_TRIM, NULL, 0, &r, "cudaDeviceGraphMemTrim");
}

/* The twin's node b waits for its node a too (refused there if that closes a cycle). */
static cudaError_t twin_edge(graph *g, const graph_node *a, const graph_node *b)
{
    vcuda_msg m, r;
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_GRAPH_TWIN_ADD_EDGE;
    m.v[0] = g->twin, m.v[1] = a->tidx, m.v[2] = b->tidx, m.nv = 3;
    return twin_call(g, &m, &r, "cudaGraphAddDependencies");
}

EXPORT cudaError_t cudaGraphAddDependencies(cudaGraph_t gr, const cudaGraphNode_t *from, const cudaGraphNode_t *to,
                                            const cudaGraphEdgeData *edge, size_t count)
{
    graph *g = as_graph(gr, GRAPH_MAGIC);
    cudaError_t e = cudaSuccess;
    (void)edge; /* edge data (programmatic ports) only tunes overlap */
    if (!g || (count && (!from || !to))) return rt_record(cudaErrorInvalidValue);
    pthread_mutex_lock(&graph_mu);
    for (size_t i = 0; i < count && !e; ++i) {
        graph_node *a = (graph_node *)from[i], *b = (graph_node *)to[i];
        graph_node **q;
        if (!a || !b || a->owner != g || b->owner != g) e = cudaErrorInvalidValue;
        else if (!(q = realloc(b->deps, (b->ndeps + 1) * sizeof *q))) e = cudaErrorMemoryAllocation;
        else if (g->twin && (e = twin_edge(g, a, b))) b->deps = q;
        else b->deps = q, b->deps[b->ndeps++] = a;
    }
    pthread_mutex_unlock(&graph_mu);
    return e ? rt_record(e) : cudaSuccess;
}

EXPORT cudaError_t cudaGraphGetNodes(cudaGraph_t gr, cudaGraphNode_t *nodes, size_t *count)
{
    graph *g = as_graph(gr, GRAPH_MAGIC);
    if (!g || !count) return rt_record(cudaErrorInvalidValue);
    pthread_mutex_lock(&graph_mu);
    if (nodes)
        for (size_t i = 0; i < *count; ++i) nodes[i] = i < g->nnodes ? (cudaGraphNode_t)g->nodes[i] : NULL;
    *count = g->nnodes;
    pthread_mutex_unlock(&graph_mu);
    return cudaSuccess;
}

EXPORT cudaError_t cudaGraphGetRootNodes(cudaGraph_t gr, cudaGraphNode_t *nodes, size_t *count)
{
    graph *g = as_graph(gr, GRAPH_MAGIC);
    size_t k = 0;
    if (!g || !count) return rt_record(cudaErrorInvalidValue);
    pthread_mutex_lock(&graph_mu);
    for (size_t i = 0; i < g->nnodes; ++i)
        if (!g->nodes[i]->ndeps) {
            if (nodes && k < *count) nodes[k] = (cudaGraphNode_t)g->nodes[i];
            ++k;
        }
    if (nodes)
        for (size_t i = k; i < *count; ++i) nodes[i] = NULL;
    *count = k;
    pthread_mutex_unlock(&graph_mu);
    return cudaSuccess;
}

EXPORT cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, enum cudaGraphNodeType *type)
{
    static const enum cudaGraphNodeType types[] = {cudaGraphNodeTypeEmpty,    cudaGraphNodeTypeKernel,
                                                   cudaGraphNodeTypeMemcpy,   cudaGraphNodeTypeMemcpy,
                                                   cudaGraphNodeTypeMemset,   cudaGraphNodeTypeHost,
                                                   cudaGraphNodeTypeConditional, cudaGraphNodeTypeMemAlloc,
                                                   cudaGraphNodeTypeMemFree};
    if (!node || !type) return rt_record(cudaErrorInvalidValue);
    *type = types[((graph_node *)node)->kind];
    return cudaSuccess;
}

/* A copy of g whose nodes are in an order that respects every dependency (Kahn's,
 * stable: among ready nodes, the one made first), under the given magic.  graph_mu held. */
static cudaError_t copy_graph(const graph *g, uint32_t magic, int ordered, graph **out)
{
    size_t n = g->nnodes, done = 0;
    graph *c = calloc(1, sizeof *c);
    size_t *new_index = calloc(n ? n : 1, sizeof *new_index), *order = calloc(n ? n : 1, sizeof *order);
    uint8_t *placed = calloc(n ? n : 1, 1);
    cudaError_t e = cudaSuccess;
    if (!c || !new_index || !order || !placed || (n && !(c->nodes = calloc(n, sizeof *c->nodes)))) e = cudaErrorMemoryAllocation;
    while (!e && done < n) {
        size_t pick = n;
        for (size_t i = 0; i < n && pick == n; ++i) {
            if (placed[i]) continue;
            size_t waiting = 0;
            for (size_t d = 0; d < g->nodes[i]->ndeps; ++d) waiting += !placed[g->nodes[i]->deps[d]->index];
            if (!waiting || !ordered) pick = i;
        }
        if (pick == n) e = cudaErrorInvalidValue; /* a cycle */
        else placed[pick] = 1, order[done++] = pick;
    }
    for (size_t i = 0; !e && i < n; ++i) { /* order[i]: the original index of the i-th node */
        const graph_node *o = g->nodes[order[i]];
        graph_node *x = calloc(1, sizeof *x);
        if (!x) { e = cudaErrorMemoryAllocation; break; }
        *x = *o;
        x->owner = c, x->origin = o, x->index = i, x->deps = NULL, x->args = NULL, c->nodes[c->nnodes++] = x;
        new_index[order[i]] = i;
        size_t total = 0;
        if (o->kind == NODE_KERNEL)
            for (uint32_t p = 0; p < o->k->nparams; ++p) total += o->k->sizes[p];
        if ((o->ndeps && !(x->deps = malloc(o->ndeps * sizeof *x->deps))) ||
            (o->kind == NODE_KERNEL && !(x->args = malloc(total ? total : 1))))
            e = cudaErrorMemoryAllocation;
        else if (o->kind == NODE_KERNEL) memcpy(x->args, o->args, total);
    }
    for (size_t i = 0; !e && i < c->nnodes; ++i) /* dependencies, in the copy's nodes */
        for (size_t d = 0; d < c->nodes[i]->ndeps; ++d)
            c->nodes[i]->deps[d] = c->nodes[new_index[g->nodes[order[i]]->deps[d]->index]];
    free(new_index), free(order), free(placed);
    if (e) {
        if (c) free_graph(c);
        return rt_record(e);
    }
    c->magic = magic, c->cap = c->nnodes;
    *out = c;
    return cudaSuccess;
}

/* copy_graph under graph_mu: cudaGraphClone (a graph) and cudaGraphInstantiate (an
 * executable one). */
static cudaError_t copy_graph_locked(graph *g, uint32_t magic, int exec, graph **c)
{
    pthread_mutex_lock(&graph_mu);
    cudaError_t e = copy_graph(g, magic, exec, c);
    pthread_mutex_unlock(&graph_mu);
    return e;
}

EXPORT cudaError_t cudaGraphClone(cudaGraph_t *out, cudaGraph_t gr)
{
    graph *g = as_graph(gr, GRAPH_MAGIC), *c = NULL;
    if (!out || !g) return rt_record(cudaErrorInvalidValue);
    if (g->twin || g->body) return unsupported("cudaGraphClone", "a graph with conditional or memory nodes (or a body of one)");
    cudaError_t e = copy_graph_locked(g, GRAPH_MAGIC, 0, &c);
    if (!e) *out = (cudaGraph_t)c;
    return e;
}

/* Whether the server can run node n as it is (see "graphs" above); a copy's direction
 * is resolved here, on the current device, as cudaMemcpyDefault would be at launch. */
static int server_node(const graph_node *n)
{
    switch (n->kind) {
    case NODE_EMPTY: return 1;
    case NODE_KERNEL: return n->shmem <= UINT32_MAX;
    case NODE_SET: return 1;
    case NODE_COPY:
        return n->copy_kind == cudaMemcpyDeviceToDevice ||
               (n->copy_kind == cudaMemcpyDefault && rt_is_device_pointer(n->dst) && rt_is_device_pointer(n->src));
    default: return 0;
    }
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Instantiates the ordered copy c on the current device's server, where it can run
 * there (c->exec stays 0 otherwise: replayed).  Errors are the server's. */
static cudaError_t server_instantiate(graph *c)
{
    char why[VCUDA_WHY_LEN];
    size_t total_deps = 0, len = 0;
    cudaError_t e = rt_ready();
    if (e) return rt_record(e);
    if (!rt_server_graphs || !c->nnodes || c->nnodes > VCUDA_MAX_GRAPH_NODES) return cudaSuccess;
    for (size_t i = 0; i < c->nnodes; ++i) {
        if (!server_node(c->nodes[i])) return cudaSuccess;
        total_deps += c->nodes[i]->ndeps;
    }
    vcuda_graph_node *w = calloc(c->nnodes, sizeof *w);
    uint32_t *deps = malloc((total_deps ? total_deps : 1) * sizeof *deps), *d = deps;
    uint8_t *blob = NULL;
    if (!w || !deps) e = cudaErrorMemoryAllocation;
    for (size_t i = 0; !e && i < c->nnodes; ++i) {
        const graph_node *n = c->nodes[i];
        vcuda_graph_node *x = &w[i];
        /* dependencies: earlier nodes (c is ordered), increasing, each once */
        uint32_t nd = 0;
        for (size_t k = 0; k < n->ndeps; ++k) d[nd++] = (uint32_t)n->deps[k]->index;
        qsort(d, nd, sizeof *d, cmp_u32);
        x->ndeps = 0, x->deps = d;
        for (uint32_t k = 0; k < nd; ++k)
            if (!x->ndeps || d[k] != d[x->ndeps - 1]) d[x->ndeps++] = d[k];
        d += x->ndeps;
        e = wire_node(n, x);
    }
    uint32_t count = (uint32_t)c->nnodes;
    /* beyond the codec's limits (argument bytes, sizes): replayed, as it always could be */
    if (!e && !vcuda_graph_encode(w, count, NULL, 0, &len, why) && len <= VCUDA_MAX_CHUNK) {
        if (!(blob = malloc(len))) e = cudaErrorMemoryAllocation;
        else if (!vcuda_graph_encode(w, count, blob, len, &len, why)) {
            vcuda_msg m, r;
            memset(&m, 0, sizeof m);
            m.hdr.opcode = VCUDA_OP_GRAPH_INSTANTIATE;
            m.v[0] = count, m.nv = 1;
            m.blob = blob, m.blob_len = (uint32_t)len;
            vcuda_client_status s = vcuda_client_call(rt_current_device, &m, &r, 0, why);
            if (s == VCUDA_CLIENT_REMOTE_ERROR)
                fprintf(stderr, "vcuda: cudaGraphInstantiate: %.*s\n", (int)r.str_len, (const char *)r.str);
            if (!(e = rt_result(s, &r, "cudaGraphInstantiate", why))) c->exec = r.v[0], c->exec_device = rt_current_device;
        }
    }
    free(w), free(deps), free(blob);
    return e ? rt_record(e) : cudaSuccess;
}

/* Kernel nodes of g whose arguments point into pinned host memory are refused by name
 * at api (see rt_host_arg): they could only fault on the server's GPU. */
static cudaError_t graph_host_args(const graph *g, const char *api)
{
    cudaError_t e = cudaSuccess;
    for (size_t i = 0; i < g->nnodes && !e; ++i)
        if (g->nodes[i]->kind == NODE_KERNEL) e = rt_host_arg(api, g->nodes[i]->args, g->nodes[i]->k->nparams, g->nodes[i]->k->sizes);
    return e;
}

/* An exec updated since it was instantiated (cudaGraphExecKernelNodeSetParams,
 * cudaGraphExecUpdate): the copy here holds the new parameters; where the server holds
 * an instance, that one is replaced by one of the updated copy (the driver's own update
 * would need the server to keep every node's handle; a new instance has the same
 * results, at one instantiation per launch that follows an update). */
static cudaError_t reinstantiate(graph *g)
{
    cudaError_t e = cudaSuccess;
    int saved = rt_current_device;
    if (g->exec) {
        vcuda_msg r;
        rt_current_device = g->exec_device;
        e = rt_call(VCUDA_OP_GRAPH_EXEC_DESTROY, &g->exec, 1, &r, "cudaGraphLaunch");
        g->exec = 0;
    }
    if (!e) e = server_instantiate(g);
    rt_current_device = saved;
    if (!e) g->stale = 0;
    return e;
}

/* The exec c of a graph with a twin is an instance of the twin itself. */
static cudaError_t twin_instantiate(graph *g, graph *c, unsigned long long flags)
{
    vcuda_msg m, r;
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_GRAPH_TWIN_INSTANTIATE;
    m.v[0] = g->twin, m.v[1] = flags, m.nv = 2;
    cudaError_t e = twin_call(g, &m, &r, "cudaGraphInstantiate");
    if (!e) c->exec = r.v[0], c->exec_device = g->twin_device, c->twin_exec = 1;
    return e;
}

EXPORT cudaError_t cudaGraphInstantiate(cudaGraphExec_t *out, cudaGraph_t gr, unsigned long long flags)
{
    graph *g = as_graph(gr, GRAPH_MAGIC), *c = NULL;
    if (!out || !g) return rt_record(cudaErrorInvalidValue);
    if (flags & ~(unsigned long long)(cudaGraphInstantiateFlagAutoFreeOnLaunch | cudaGraphInstantiateFlagUseNodePriority))
        return unsupported("cudaGraphInstantiate", "device launch and upload flags");
    if (g->body) return rt_record(cudaErrorInvalidValue);
    cudaError_t e = copy_graph_locked(g, EXEC_MAGIC, 1, &c);
    if (!e && ((e = graph_host_args(c, "cudaGraphInstantiate")) ||
               (e = g->twin ? twin_instantiate(g, c, flags) : server_instantiate(c))))
        destroy_graph(c, EXEC_MAGIC);
    if (!e) *out = (cudaGraphExec_t)c;
    return e;
}

EXPORT cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *out, cudaGraph_t gr, unsigned long long flags)
{
    return cudaGraphInstantiate(out, gr, flags);
}

EXPORT cudaError_t cudaGraphExecDestroy(cudaGraphExec_t ex)
{
    graph *g = as_graph(ex, EXEC_MAGIC);
    cudaError_t e = cudaSuccess;
    if (g && g->exec) { /* the server's first; the copy here goes whatever it says */
        vcuda_msg r;
        int saved = rt_current_device;
        rt_current_device = g->exec_device;
        e = rt_call(VCUDA_OP_GRAPH_EXEC_DESTROY, &g->exec, 1, &r, "cudaGraphExecDestroy");
        rt_current_device = saved;
    }
    cudaError_t d = destroy_graph(ex, EXEC_MAGIC);
    return e ? e : d;
}

/* The server's instance of exec g takes node n's new kernel configuration and arguments
 * (GRAPH_EXEC_KERNEL_SET; the driver checks them as cuGraphExecKernelNodeSetParams). */
static cudaError_t server_kernel_set(graph *g, const graph_node *n)
{
    char why[VCUDA_WHY_LEN];
    vcuda_msg m, r;
    uint64_t fn;
    int saved = rt_current_device;
    rt_current_device = g->exec_device;
    cudaError_t e = rt_resolve(n->k, &fn);
    if (!e) {
        memset(&m, 0, sizeof m);
        m.hdr.opcode = VCUDA_OP_GRAPH_EXEC_KERNEL_SET;
        uint64_t v[] = {g->exec, g->twin_exec ? n->tidx : n->index, fn, n->grid.x, n->grid.y, n->grid.z, n->block.x, n->block.y, n->block.z, n->shmem};
        memcpy(m.v, v, sizeof v);
        m.nv = 10;
        m.nsizes = n->k->nparams;
        memcpy(m.sizes, n->k->sizes, n->k->nparams * sizeof *n->k->sizes);
        m.blob = n->args;
        for (uint32_t i = 0; i < n->k->nparams; ++i) m.blob_len += n->k->sizes[i];
        vcuda_client_status st = vcuda_client_call(rt_current_device, &m, &r, 0, why);
        if (st == VCUDA_CLIENT_REMOTE_ERROR)
            fprintf(stderr, "vcuda: cudaGraphExecKernelNodeSetParams: %.*s\n", (int)r.str_len, (const char *)r.str);
        e = rt_result(st, &r, "cudaGraphExecKernelNodeSetParams", why);
    }
    rt_current_device = saved;
    return e;
}

/* A kernel node of an exec takes new parameters (the next launch uses them); the
 * node is named by the graph's node it was instantiated from.  Where the server holds
 * the exec, its node is updated there too. */
EXPORT cudaError_t cudaGraphExecKernelNodeSetParams(cudaGraphExec_t ex, cudaGraphNode_t node,
                                                    const struct cudaKernelNodeParams *p)
{
    graph *g = as_graph(ex, EXEC_MAGIC);
    graph_node *x = NULL, fresh;
    if (!g || !node || !p) return rt_record(cudaErrorInvalidValue);
    if (p->extra) return unsupported("cudaGraphExecKernelNodeSetParams", "arguments through 'extra'");
    pthread_mutex_lock(&graph_mu);
    for (size_t i = 0; i < g->nnodes && !x; ++i)
        if (g->nodes[i]->origin == (const graph_node *)node) x = g->nodes[i];
    memset(&fresh, 0, sizeof fresh);
    cudaError_t e = !x || x->kind != NODE_KERNEL ? cudaErrorInvalidValue
                    : kernel_node(&fresh, rt_find_kernel(p->func), p->gridDim, p->blockDim, p->sharedMemBytes, p->kernelParams);
    if (!e) {
        fresh.index = x->index, fresh.tidx = x->tidx;
        e = fresh.shmem > UINT32_MAX ? cudaErrorInvalidValue
                                     : rt_host_arg("cudaGraphExecKernelNodeSetParams", fresh.args, fresh.k->nparams, fresh.k->sizes);
        if (!e && g->exec && !g->stale) e = server_kernel_set(g, &fresh); /* (stale: instantiated anew at launch) */
        if (e) free(fresh.args);
    }
    if (!e) {
        free(x->args);
        x->k = fresh.k, x->grid = fresh.grid, x->block = fresh.block, x->shmem = fresh.shmem, x->args = fresh.args;
    }
    pthread_mutex_unlock(&graph_mu);
    return e ? rt_record(e) : cudaSuccess;
}

/* The whole exec takes the parameters of gr's nodes, where gr has the exec's topology:
 * as many nodes, in the same (dependency) order, each of the same kind with the same
 * dependencies; else nothing changes and info says why, as the driver does. */
EXPORT cudaError_t cudaGraphExecUpdate(cudaGraphExec_t ex, cudaGraph_t gr, cudaGraphExecUpdateResultInfo *info)
{
    graph *g = as_graph(ex, EXEC_MAGIC), *src = as_graph(gr, GRAPH_MAGIC), *c = NULL;
    if (info) memset(info, 0, sizeof *info);
    if (!g || !src) return rt_record(cudaErrorInvalidValue);
    if (g->twin_exec || src->twin || src->body)
        return unsupported("cudaGraphExecUpdate", "graphs with conditional or memory nodes");
    cudaError_t e = copy_graph_locked(src, EXEC_MAGIC, 1, &c);
    if (e) return e;
    enum cudaGraphExecUpdateResult why = cudaGraphExecUpdateSuccess;
    cudaGraphNode_t bad = NULL;
    if (c->nnodes != g->nnodes) why = cudaGraphExecUpdateErrorTopologyChanged;
    for (size_t i = 0; i < c->nnodes && !why; ++i) {
        const graph_node *a = c->nodes[i], *b = g->nodes[i];
        bad = (cudaGraphNode_t)a->origin;
        if (a->kind != b->kind) why = cudaGraphExecUpdateErrorNodeTypeChanged;
        else if (a->ndeps != b->ndeps) why = cudaGraphExecUpdateErrorTopologyChanged;
        for (size_t d = 0; d < a->ndeps && !why; ++d)
            if (a->deps[d]->index != b->deps[d]->index) why = cudaGraphExecUpdateErrorTopologyChanged;
    }
    if (!why && (e = graph_host_args(c, "cudaGraphExecUpdate"))) {
        destroy_graph(c, EXEC_MAGIC);
        return e;
    }
    if (why) {
        if (info) info->result = why, info->errorNode = bad, info->errorFromNode = NULL;
        destroy_graph(c, EXEC_MAGIC);
        return rt_record(cudaErrorGraphExecUpdateFailure);
    }
    /* the exec takes c's nodes, which keep the names the old ones had (the nodes of the
     * graph it was instantiated from, as with the driver); c goes with the old ones */
    pthread_mutex_lock(&graph_mu);
    graph_node **nodes = g->nodes;
    size_t cap = g->cap;
    g->nodes = c->nodes, g->cap = c->cap, c->nodes = nodes, c->cap = cap;
    for (size_t i = 0; i < g->nnodes; ++i)
        g->nodes[i]->owner = g, g->nodes[i]->origin = c->nodes[i]->origin, c->nodes[i]->owner = c;
    g->stale = 1;
    free_graph(c);
    pthread_mutex_unlock(&graph_mu);
    if (info) info->result = cudaGraphExecUpdateSuccess;
    return cudaSuccess;
}

EXPORT cudaError_t cudaGraphUpload(cudaGraphExec_t ex, cudaStream_t s)
{
    (void)s; /* nothing to upload: nodes are sent when launched */
    return as_graph(ex, EXEC_MAGIC) ? cudaSuccess : rt_record(cudaErrorInvalidValue);
}

EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t ex, cudaStream_t s)
{
    graph *g = as_graph(ex, EXEC_MAGIC);
    cudaError_t e = cudaSuccess;
    void *argv[VCUDA_MAX_PARAMS];
    if (!g) return rt_record(cudaErrorInvalidValue);
    if (rt_capturing(s)) return unsupported("cudaGraphLaunch", "a graph launched into a capturing stream (child graphs)");
    if (g->twin_exec && g->exec_device != rt_stream_device(s))
        return unsupported("cudaGraphLaunch", "a graph with conditional or memory nodes on a stream of another device");
    if (g->stale) { /* (once, whichever thread launches it first) */
        pthread_mutex_lock(&graph_mu);
        if (g->stale) e = reinstantiate(g);
        pthread_mutex_unlock(&graph_mu);
        if (e) return e;
    }
    if (g->exec && g->exec_device == rt_stream_device(s)) {
        /* one frame to the server holding it (the stream's); like a kernel launch,
         * unanswered unless VCUDA_LAUNCH=sync (a failure there is returned by that
         * device's next call) */
        char why[VCUDA_WHY_LEN];
        vcuda_msg m, r;
        uint64_t sh;
        int saved = rt_current_device;
        rt_current_device = g->exec_device;
        if (!(e = rt_stream_handle(s, &sh)) && !(e = rt_managed_launch(s, "cudaGraphLaunch"))) {
            memset(&m, 0, sizeof m);
            m.hdr.opcode = VCUDA_OP_GRAPH_LAUNCH;
            m.v[0] = g->exec, m.v[1] = sh, m.nv = 2;
            r.hdr.flags = 0; /* (no reply when posted) */
            e = rt_result(rt_async_launch ? vcuda_client_post(rt_current_device, &m, why)
                          : vcuda_client_call(rt_current_device, &m, &r, 0, why), &r, "cudaGraphLaunch", why);
        }
        rt_current_device = saved;
        return e;
    }
    for (size_t i = 0; i < g->nnodes && !e; ++i) {
        graph_node *n = g->nodes[i];
        switch (n->kind) {
        case NODE_EMPTY: break;
        case NODE_KERNEL:
            for (uint32_t p = 0, at = 0; p < n->k->nparams; at += n->k->sizes[p++]) argv[p] = n->args + at;
            e = rt_launch(n->k, n->grid, n->block, argv, n->shmem, s, "cudaGraphLaunch");
            break;
        case NODE_COPY: e = rt_memcpy_remote(n->dst, n->src, n->n, n->copy_kind, s, "cudaGraphLaunch"); break;
        case NODE_COPY3D: e = rt_copy_3d(&n->p3, s, "cudaGraphLaunch"); break;
        case NODE_SET: e = rt_set_2d(n->dst, n->pitch, n->value, n->width, n->height, s); break;
        case NODE_HOST: e = cudaLaunchHostFunc(s, n->fn, n->data); break;
        case NODE_COND:
        case NODE_ALLOC:
        case NODE_FREE: e = rt_record(cudaErrorInvalidValue); break; /* (only in a twin's exec: never replayed) */
        }
    }
    return e;
}

EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    cudaGraph_t gr;
    (void)mode; /* the modes police other threads' unsafe calls; nothing here is unsafe */
    if (rt_legacy_stream(s)) return rt_record(cudaErrorStreamCaptureUnsupported);
    cudaError_t e = rt_own_stream(&s);
    if (e) return e;
    remote_object *o = (remote_object *)s;
    if (o->magic != STREAM_MAGIC) return rt_record(cudaErrorInvalidResourceHandle);
    if (o->capture) return rt_record(cudaErrorIllegalState);
    if ((e = cudaGraphCreate(&gr, 0))) return e;
    o->capture = (graph *)gr;
    o->capture->origin = s;
    o->capture->capture_id = atomic_fetch_add(&capture_ids, 1) + 1;
    return cudaSuccess;
}

/* Capture into a graph the program made (a conditional node's body, say), after deps. */
EXPORT cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t s, cudaGraph_t gr, const cudaGraphNode_t *deps,
                                                 const cudaGraphEdgeData *edges, size_t ndeps, enum cudaStreamCaptureMode mode)
{
    graph *g = as_graph(gr, GRAPH_MAGIC);
    (void)mode, (void)edges; /* (see cudaStreamBeginCapture; edge data only tunes overlap) */
    if (rt_legacy_stream(s)) return rt_record(cudaErrorStreamCaptureUnsupported);
    cudaError_t e = rt_own_stream(&s);
    if (e) return e;
    remote_object *o = (remote_object *)s;
    if (o->magic != STREAM_MAGIC) return rt_record(cudaErrorInvalidResourceHandle);
    if (!g || (ndeps && !deps)) return rt_record(cudaErrorInvalidValue);
    if (o->capture || g->origin) return rt_record(cudaErrorIllegalState);
    pthread_mutex_lock(&graph_mu);
    for (size_t i = 0; i < ndeps && !e; ++i)
        if (!deps[i] || ((graph_node *)deps[i])->owner != g) e = cudaErrorInvalidValue;
    if (!e && set_front(g, (graph_node *const *)deps, ndeps, 0)) e = cudaErrorMemoryAllocation;
    if (!e) {
        g->origin = s, g->captured_to = 1, g->capture_id = atomic_fetch_add(&capture_ids, 1) + 1;
        o->capture = g;
    }
    pthread_mutex_unlock(&graph_mu);
    return e ? rt_record(e) : cudaSuccess;
}

EXPORT cudaError_t cudaStreamGetCaptureInfo(cudaStream_t s, enum cudaStreamCaptureStatus *status, unsigned long long *id,
                                            cudaGraph_t *graph_out, const cudaGraphNode_t **deps,
                                            const cudaGraphEdgeData **edges, size_t *ndeps)
{
    graph *g = rt_capturing(s);
    if (!status) return rt_record(cudaErrorInvalidValue);
    *status = g ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    if (!g) return cudaSuccess;
    pthread_mutex_lock(&graph_mu);
    if (id) *id = g->capture_id;
    if (graph_out) *graph_out = (cudaGraph_t)g;
    if (deps) *deps = (const cudaGraphNode_t *)g->front;
    if (edges) *edges = g->front_edges;
    if (ndeps) *ndeps = g->nfront;
    pthread_mutex_unlock(&graph_mu);
    return cudaSuccess;
}

/* The nodes the capture's next node waits for: these (cudaStreamSetCaptureDependencies)
 * or these too (cudaStreamAddCaptureDependencies). */
EXPORT cudaError_t cudaStreamUpdateCaptureDependencies(cudaStream_t s, cudaGraphNode_t *nodes, const cudaGraphEdgeData *edges,
                                                       size_t n, unsigned flags)
{
    graph *g = rt_capturing(s);
    cudaError_t e = cudaSuccess;
    (void)edges;
    if (!g) return rt_record(cudaErrorIllegalState);
    if ((n && !nodes) || flags > cudaStreamSetCaptureDependencies) return rt_record(cudaErrorInvalidValue);
    pthread_mutex_lock(&graph_mu);
    for (size_t i = 0; i < n && !e; ++i)
        if (!nodes[i] || ((graph_node *)nodes[i])->owner != g) e = cudaErrorInvalidValue;
    if (!e && set_front(g, (graph_node *const *)nodes, n, flags == cudaStreamAddCaptureDependencies))
        e = cudaErrorMemoryAllocation;
    pthread_mutex_unlock(&graph_mu);
    return e ? rt_record(e) : cudaSuccess;
}

EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *out)
{
    remote_object *o = (remote_object *)rt_existing_stream(s);
    graph *g = rt_capturing(s);
    if (!g) return rt_record(out ? cudaErrorIllegalState : cudaErrorInvalidValue);
    if (!out && !g->captured_to) return rt_record(cudaErrorInvalidValue);
    if (g->origin != (cudaStream_t)o) return rt_record(cudaErrorStreamCaptureUnmatched);
    o->capture = NULL;
    /* the streams that joined leave with it */
    pthread_mutex_lock(&graph_mu);
    for (size_t i = 0; i < g->njoined; ++i)
        if (g->joined[i]->magic == STREAM_MAGIC && g->joined[i]->capture == g) g->joined[i]->capture = NULL;
    g->nfront = 0, g->origin = NULL, g->njoined = 0, g->captured_to = 0;
    pthread_mutex_unlock(&graph_mu);
    if (out) *out = (cudaGraph_t)g;
    return cudaSuccess;
}

EXPORT cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    static _Thread_local enum cudaStreamCaptureMode current = cudaStreamCaptureModeGlobal;
    if (!mode) return rt_record(cudaErrorInvalidValue);
    enum cudaStreamCaptureMode m = *mode;
    *mode = current, current = m;
    return cudaSuccess;
}

/* Graphs of the vcuda server: whole graphs sent at instantiation (GRAPH_INSTANTIATE)
 * and graph twins built node by node (proto.h, "graph twins"), checked node by node
 * against the client's tables, instantiated and launched.  The execs and twins are the
 * client's handles; their layout is this file's alone. */
#define _GNU_SOURCE
#include "server_gpu_internal.h"

/* ---- graphs ----------------------------------------------------------------------- *
 * GRAPH_INSTANTIATE brings a whole graph (proto.h, "graphs"); it is checked here as
 * LAUNCH, MEMCPY_D2D and MEMSET are, node by node (function handles the client's own,
 * argument bytes the kernel's own total, every copied or set range inside one of the
 * client's allocations), then built as a CUgraph of the client's context, instantiated,
 * and kept as a handle: GRAPH_LAUNCH is then one frame and one cuGraphLaunch.  The
 * ranges are checked again at every launch (memory freed since then may be someone
 * else's), and unloading a module destroys the execs whose kernels it holds. */
typedef struct {
    uint64_t p, n;
} mem_range;

/* The graph and its nodes are kept with the exec: GRAPH_EXEC_KERNEL_SET names a node
 * by its index, and the driver by the graph's node. */
struct graph_exec {
    CUgraphExec exec;
    CUgraph graph;
    CUgraphNode *made;
    uint8_t *kinds; /* VCUDA_GNODE_* per node */
    uint32_t nodes, nranges, nmodules, cap_modules;
    mem_range *ranges;
    CUmodule *modules;
    twin *tw; /* instantiated from a twin (which then holds graph and made), else NULL */
};

static void twin_unref(vcuda_gpu *g, client *cl, twin *t, int alive);
static void twin_launched(twin *t);

void sg_graph_exec_free(vcuda_gpu *g, client *cl, graph_exec *x, int alive)
{
    if (alive && x->exec) g->cu.cuGraphExecDestroy(x->exec);
    if (x->tw) twin_unref(g, cl, x->tw, alive); /* (its nodes count with the twin) */
    else {
        if (alive && x->graph) g->cu.cuGraphDestroy(x->graph);
        cl->graph_nodes -= x->nodes;
    }
    free(x->made), free(x->kinds);
    free(x->ranges);
    free(x->modules);
    free(x);
}

/* Module m among those whose unloading destroys exec x. */
static int graph_exec_uses(graph_exec *x, CUmodule m)
{
    uint32_t k = 0;
    while (k < x->nmodules && x->modules[k] != m) ++k;
    if (k < x->nmodules) return 0;
    if (x->nmodules == x->cap_modules) {
        CUmodule *q = realloc(x->modules, (x->cap_modules + 8) * sizeof *q);
        if (!q) return -1;
        x->modules = q, x->cap_modules += 8;
    }
    x->modules[x->nmodules++] = m;
    return 0;
}

/* The client's execs whose kernels are in module m (NULL: all of them) go. */
void sg_graph_execs_drop(vcuda_gpu *g, client *cl, CUmodule m, int alive)
{
    for (uint32_t i = cl->nhandle; i-- > 0;) {
        if (cl->handles[i].kind != H_GRAPH_EXEC) continue;
        graph_exec *x = cl->handles[i].obj;
        int uses = !m;
        for (uint32_t k = 0; k < x->nmodules && !uses; ++k) uses = x->modules[k] == m;
        if (!uses) continue;
        sg_graph_exec_free(g, cl, x, alive);
        sg_remove_handle(cl, &cl->handles[i]);
    }
}

/* Checks one decoded node against the client's tables; records what launches recheck. */
static int graph_node_check(client *cl, const vcuda_graph_node *n, uint32_t i, graph_exec *x, vcuda_msg *r, const char *what)
{
    switch (n->kind) {
    case VCUDA_GNODE_KERNEL: {
        handle *h = sg_find_handle(cl, n->function, H_FUNCTION);
        if (!h) return sg_reply_invalid(cl, r, 98, "%s: node %u: unknown function handle", what, i), -1;
        const function_info *fi = h->obj;
        uint32_t total = 0;
        for (uint32_t k = 0; k < fi->n; ++k) total += fi->sizes[k];
        if (n->params_len != total)
            return sg_reply_invalid(cl, r, 1, "%s: node %u: %u argument bytes, the kernel takes %u", what, i,
                                    n->params_len, total), -1;
        x->kinds[i] = VCUDA_GNODE_KERNEL;
        return graph_exec_uses(x, fi->owner) ? sg_reply_invalid(cl, r, 2, "%s: server out of memory", what), -1 : 0;
    }
    case VCUDA_GNODE_COPY:
        if (!n->size) return 0;
        if (!sg_find_range(cl, n->dst, n->size) || !sg_find_range(cl, n->src, n->size))
            return sg_reply_invalid(cl, r, 1, "%s: node %u: a copied range is not inside an allocation of "
                                    "this client", what, i), -1;
        x->ranges[x->nranges++] = (mem_range){n->dst, n->size};
        x->ranges[x->nranges++] = (mem_range){n->src, n->size};
        return 0;
    case VCUDA_GNODE_SET: {
        if (!n->width || !n->height) return 0;
        if (n->width > n->pitch || n->height - 1 > VCUDA_MAX_SIZE / n->pitch)
            return sg_reply_invalid(cl, r, 1, "%s: node %u: width over pitch", what, i), -1;
        uint64_t span = (n->height - 1) * n->pitch + n->width;
        if (!sg_find_range(cl, n->dst, span))
            return sg_reply_invalid(cl, r, 1, "%s: node %u: the set rows are not inside an allocation of "
                                    "this client", what, i), -1;
        x->ranges[x->nranges++] = (mem_range){n->dst, span};
        return 0;
    }
    default: return 0;
    }
}

/* Adds checked node i to the CUgraph (deps: the CUgraphNodes it waits for). */
static CUresult graph_node_add(vcuda_gpu *g, client *cl, CUgraph graph, const vcuda_graph_node *n, CUgraphNode *out,
                               const CUgraphNode *deps)
{
    CUcontext cx = cl->own ? cl->own : g->ctx;
    if (n->kind == VCUDA_GNODE_KERNEL) {
        const function_info *fi = sg_find_handle(cl, n->function, H_FUNCTION)->obj;
        kernel_node_params p = {fi->f, {n->dim[0], n->dim[1], n->dim[2]}, {n->dim[3], n->dim[4], n->dim[5]}, n->shmem,
                                sg_unpack_params(fi, n->params), NULL, NULL, NULL};
        return g->cu.cuGraphAddKernelNode_v2(out, graph, deps, n->ndeps, &p); /* copies the arguments */
    }
    if (n->kind == VCUDA_GNODE_COPY && n->size) {
        memcpy3d_params p;
        memset(&p, 0, sizeof p);
        p.src_type = p.dst_type = VCUDA_CU_MEMORYTYPE_DEVICE;
        p.src_device = n->src, p.dst_device = n->dst;
        p.src_pitch = p.dst_pitch = p.width = n->size;
        p.src_height = p.dst_height = p.height = p.depth = 1;
        return g->cu.cuGraphAddMemcpyNode(out, graph, deps, n->ndeps, &p, cx);
    }
    if (n->kind == VCUDA_GNODE_SET && n->width && n->height) {
        memset_node_params p = {n->dst, n->pitch, n->value, 1, n->width, n->height};
        return g->cu.cuGraphAddMemsetNode(out, graph, deps, n->ndeps, &p, cx);
    }
    /* empty nodes, and copies and sets of nothing, only order */
    return g->cu.cuGraphAddEmptyNode(out, graph, deps, n->ndeps);
}

int sg_graph_instantiate(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    uint32_t count = (uint32_t)q->v[0];
    char bad[VCUDA_WHY_LEN];
    if (count < 1 || count > VCUDA_MAX_GRAPH_NODES)
        return sg_reply_invalid(cl, r, 1, "GRAPH_INSTANTIATE: %u nodes outside [1,%u]", count, VCUDA_MAX_GRAPH_NODES);
    if (count > MAX_CLIENT_GRAPH_NODES - cl->graph_nodes)
        return sg_reply_invalid(cl, r, 2, "GRAPH_INSTANTIATE: this client's graphs would exceed %u nodes",
                                MAX_CLIENT_GRAPH_NODES);
    vcuda_graph_node *nodes = calloc(count, sizeof *nodes);
    CUgraphNode *made = calloc(count, sizeof *made), *deps = calloc(count, sizeof *deps);
    graph_exec *x = calloc(1, sizeof *x);
    CUgraph graph = NULL;
    CUresult rc = 0;
    int refused = 0;
    if (x) x->ranges = calloc(2 * (size_t)count, sizeof *x->ranges), x->made = made, x->kinds = calloc(count, 1);
    if (!nodes || !made || !deps || !x || !x->ranges || !x->kinds)
        refused = sg_reply_invalid(cl, r, 2, "GRAPH_INSTANTIATE: server out of memory") + 1;
    else if (vcuda_graph_decode(q->blob, q->blob_len, count, nodes, bad))
        refused = sg_reply_invalid(cl, r, 1, "GRAPH_INSTANTIATE: %s", bad) + 1;
    for (uint32_t i = 0; i < count && !refused; ++i) refused = graph_node_check(cl, &nodes[i], i, x, r, "GRAPH_INSTANTIATE") != 0;
    if (!refused && !(rc = g->cu.cuGraphCreate(&graph, 0)))
        for (uint32_t i = 0; i < count && !rc; ++i) {
            for (uint32_t k = 0; k < nodes[i].ndeps; ++k) deps[k] = made[vcuda_graph_dep(&nodes[i], k)];
            rc = graph_node_add(g, cl, graph, &nodes[i], &made[i], deps);
        }
    if (!refused && !rc) rc = g->cu.cuGraphInstantiateWithFlags(&x->exec, graph, 0);
    if (x) x->graph = graph; /* kept for GRAPH_EXEC_KERNEL_SET (see graph_exec) */
    else if (graph) g->cu.cuGraphDestroy(graph);
    if (!x) free(made);
    free(nodes), free(deps);
    uint64_t id = 0;
    if (!refused && !rc) {
        x->nodes = count, cl->graph_nodes += count;
        if (!(id = sg_add_handle(cl, H_GRAPH_EXEC, x))) sg_reply_invalid(cl, r, 2, "GRAPH_INSTANTIATE: handle limit reached");
    } else if (rc)
        sg_reply_cu(g, cl, r, "GRAPH_INSTANTIATE", rc);
    if (!id) {
        if (x) sg_graph_exec_free(g, cl, x, 1);
        return 0;
    }
    r->v[0] = id, r->nv = 1;
    return 0;
}

/* GRAPH_EXEC_KERNEL_SET: a kernel node of an exec takes a new configuration and new
 * arguments (cudaGraphExecKernelNodeSetParams), checked as LAUNCH's are. */
int sg_graph_exec_kernel_set(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    handle *h = sg_find_handle(cl, q->v[0], H_GRAPH_EXEC);
    if (!h) return sg_reply_invalid(cl, r, 400, "GRAPH_EXEC_KERNEL_SET: unknown graph exec");
    graph_exec *x = h->obj;
    uint64_t i = q->v[1];
    if (i >= x->nodes || x->kinds[i] != VCUDA_GNODE_KERNEL)
        return sg_reply_invalid(cl, r, 1, "GRAPH_EXEC_KERNEL_SET: node %llu is not a kernel node of the exec",
                                (unsigned long long)i);
    const function_info *fi = sg_launch_function(cl, q->v[2], q, r, "GRAPH_EXEC_KERNEL_SET");
    if (!fi) return 0;
    if (graph_exec_uses(x, fi->owner))
        return sg_reply_invalid(cl, r, 2, "GRAPH_EXEC_KERNEL_SET: server out of memory");
    kernel_node_params p = {fi->f, {(unsigned)q->v[3], (unsigned)q->v[4], (unsigned)q->v[5]},
                            {(unsigned)q->v[6], (unsigned)q->v[7], (unsigned)q->v[8]}, (unsigned)q->v[9],
                            sg_unpack_params(fi, q->blob), NULL, NULL, NULL};
    CUresult rc = g->cu.cuGraphExecKernelNodeSetParams_v2(x->exec, x->made[i], &p); /* copies the arguments */
    return rc ? sg_reply_cu(g, cl, r, "GRAPH_EXEC_KERNEL_SET", rc) : 0;
}

int sg_graph_launch(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    handle *h = sg_find_handle(cl, q->v[0], H_GRAPH_EXEC);
    CUstream s;
    CUresult rc;
    if (!h) return sg_reply_invalid(cl, r, 400, "GRAPH_LAUNCH: unknown graph exec");
    if (sg_stream_of(cl, q->v[1], &s)) return sg_reply_invalid(cl, r, 400, "GRAPH_LAUNCH: unknown stream");
    const graph_exec *x = h->obj;
    for (uint32_t i = 0; i < x->nranges; ++i)
        if (!sg_find_range(cl, x->ranges[i].p, x->ranges[i].n))
            return sg_reply_invalid(cl, r, 1, "GRAPH_LAUNCH: memory the graph copies or sets was freed since it was "
                                    "instantiated");
    if ((rc = g->cu.cuGraphLaunch(x->exec, s))) return sg_reply_cu(g, cl, r, "GRAPH_LAUNCH", rc);
    if (x->tw) twin_launched(x->tw);
    return 0;
}

/* ---- graph twins (proto.h, "graph twins") ------------------------------------------ *
 * A twin is a CUgraph of the client's context built node by node as the client adds
 * them, so that what the driver decides when a node is made -- a conditional handle's
 * value (kernels take it as an argument), an allocation's address, the body graphs of a
 * conditional node -- is the driver's own.  A top twin is held by the client's handle
 * and by each exec made from it (GRAPH_EXEC_KERNEL_SET names the twin's nodes); the
 * bodies of its conditional nodes are twins too, addressed by handles of their own but
 * owned by their node: they go with the top twin.  Nodes are checked as in
 * GRAPH_INSTANTIATE; what launches recheck (ranges) and the modules whose unloading
 * ends the twin are kept on the top twin (`shape`), and copied into its execs.
 *
 * Graph allocations are entries of the client's allocation table (so copies, sets and
 * FREE take them, and they count against its quota) from the node's creation on.  When
 * the top twin goes, the addresses its FREE nodes freed (if it was ever launched) and
 * those its ALLOC nodes never made real (if it never was) leave the table: the driver
 * may give those addresses to another graph, perhaps another client's.  An allocation
 * no graph of it freed stays the client's until FREE, as with the driver. */
#define MAX_TWIN_EDGES (16u * VCUDA_MAX_GRAPH_NODES)

struct twin {
    CUgraph graph;
    twin *root; /* the top twin (itself for one) */
    CUgraphNode *nodes;
    uint8_t *kinds;
    uint32_t n, cap_nodes, cap_kinds;
    uint32_t *edges; /* pairs (from, to): every dependency, for the cycle check */
    uint32_t nedges, cap_edges;
    /* top twin only */
    uint32_t refs;      /* its handle (until GRAPH_TWIN_DESTROY) and each exec */
    uint32_t nodes_all; /* its nodes and its bodies' (counted in cl->graph_nodes) */
    int launched, dead; /* dead: a module its kernels are in was unloaded */
    twin **bodies;      /* every body twin, nested ones too */
    uint64_t *conds, *allocs, *frees; /* its conditional handles; addresses of ALLOC / FREE nodes */
    uint32_t nbodies, cap_bodies, nconds, cap_conds, nallocs, cap_allocs, nfrees, cap_frees, cap_ranges;
    graph_exec shape; /* ranges and modules (see above) */
};

static void twin_launched(twin *t) { t->root->launched = 1; }

/* Appends v to a growing u64 list (-1: out of room). */
static int push_u64(uint64_t **a, uint32_t *n, uint32_t *cap, uint64_t v, uint32_t max)
{
    if (sg_grow((void **)a, cap, *n + 1, sizeof **a, max)) return -1;
    (*a)[(*n)++] = v;
    return 0;
}

static twin *twin_new(client *cl, CUgraph graph, twin *root, uint64_t *id)
{
    twin *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->graph = graph;
    t->root = root ? root : t;
    if (root && sg_grow((void **)&root->bodies, &root->cap_bodies, root->nbodies + 1, sizeof *root->bodies, MAX_HANDLES))
        return free(t), NULL;
    if (!(*id = sg_add_handle(cl, H_GRAPH, t))) return free(t), NULL;
    if (root) root->bodies[root->nbodies++] = t;
    else t->refs = 1;
    return t;
}

static void twin_free_one(twin *t)
{
    free(t->nodes), free(t->kinds), free(t->edges);
    free(t->bodies), free(t->conds), free(t->allocs), free(t->frees);
    free(t->shape.ranges), free(t->shape.modules);
    free(t);
}

/* A graph allocation's entry leaves the client's table (no driver call). */
static void forget_graph_alloc(client *cl, uint64_t p)
{
    for (uint32_t i = 0; i < cl->nalloc; ++i)
        if (cl->allocs[i].graph && cl->allocs[i].base == p) {
            sg_uncharge(cl, cl->allocs[i].size);
            cl->allocs[i] = cl->allocs[--cl->nalloc];
            return;
        }
}

/* One reference to top twin t goes; with the last, the twin and its bodies. */
static void twin_unref(vcuda_gpu *g, client *cl, twin *t, int alive)
{
    if (--t->refs) return;
    for (uint32_t i = 0; i < t->nfrees && t->launched; ++i) forget_graph_alloc(cl, t->frees[i]);
    for (uint32_t i = 0; i < t->nallocs && !t->launched; ++i) forget_graph_alloc(cl, t->allocs[i]);
    if (alive) g->cu.cuGraphDestroy(t->graph); /* and the body graphs, its nodes' */
    cl->graph_nodes -= t->nodes_all;
    for (uint32_t i = 0; i < t->nbodies; ++i) twin_free_one(t->bodies[i]);
    twin_free_one(t);
}

/* GRAPH_TWIN_DESTROY: the client's handles to t and its bodies go, then its reference. */
static void twin_destroy(vcuda_gpu *g, client *cl, twin *t)
{
    for (uint32_t i = cl->nhandle; i-- > 0;) {
        handle *h = &cl->handles[i];
        if (h->kind == H_GRAPH && ((twin *)h->obj)->root == t) sg_remove_handle(cl, h);
    }
    twin_unref(g, cl, t, 1);
}

/* The client's twins, when it goes (after its execs). */
void sg_twins_drop(vcuda_gpu *g, client *cl, int alive)
{
    for (uint32_t i = cl->nhandle; i-- > 0;) {
        handle *h = &cl->handles[i];
        if (h->kind == H_GRAPH && ((twin *)h->obj)->root == h->obj) {
            twin *t = h->obj;
            for (uint32_t k = cl->nhandle; k-- > 0;) /* (its bodies' handles, then its own) */
                if (cl->handles[k].kind == H_GRAPH && ((twin *)cl->handles[k].obj)->root == t) cl->handles[k].kind = 0;
            twin_unref(g, cl, t, alive);
            i = cl->nhandle; /* restart: entries were marked */
        }
    }
}

/* Whether `to` already waits for `from`, through the twin's dependencies: adding the
 * edge to -> from (from waits for to) would close a cycle. */
static int twin_reaches(const twin *t, uint32_t from, uint32_t to, uint8_t *seen, uint32_t *stack)
{
    uint32_t top = 0;
    memset(seen, 0, t->n);
    stack[top++] = from, seen[from] = 1;
    while (top) {
        uint32_t v = stack[--top];
        if (v == to) return 1;
        for (uint32_t e = 0; e < t->nedges; ++e)
            if (t->edges[2 * e + 1] == v && !seen[t->edges[2 * e]]) seen[t->edges[2 * e]] = 1, stack[top++] = t->edges[2 * e];
    }
    return 0;
}

static int twin_edge(twin *t, uint32_t from, uint32_t to)
{
    if (sg_grow((void **)&t->edges, &t->cap_edges, 2 * (t->nedges + 1), sizeof *t->edges, 2 * MAX_TWIN_EDGES)) return -1;
    t->edges[2 * t->nedges] = from, t->edges[2 * t->nedges + 1] = to, ++t->nedges;
    return 0;
}

static twin *twin_of(client *cl, uint64_t id)
{
    handle *h = sg_find_handle(cl, id, H_GRAPH);
    return h ? h->obj : NULL;
}

/* GRAPH_TWIN_ADD_NODE: node `index` of the twin, checked, made by the driver. */
static int twin_add_node(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    static _Thread_local uint8_t bodies[8 * VCUDA_MAX_COND_BODIES];
    static _Thread_local CUgraphNode deps[VCUDA_MAX_GRAPH_NODES];
    const char *what = "GRAPH_TWIN_ADD_NODE";
    twin *t = twin_of(cl, q->v[0]);
    uint32_t index = (uint32_t)q->v[1];
    vcuda_graph_node n;
    char bad[VCUDA_WHY_LEN];
    CUcontext cx = cl->own ? cl->own : g->ctx;
    CUgraphNode made = NULL;
    CUresult rc = 0;
    if (!t) return sg_reply_invalid(cl, r, 400, "%s: unknown graph", what);
    twin *root = t->root;
    if (root->dead) return sg_reply_invalid(cl, r, 400, "%s: a module the graph's kernels are in was unloaded", what);
    if (q->v[1] != t->n) return sg_reply_invalid(cl, r, 1, "%s: node %llu, the graph has %u", what, (unsigned long long)q->v[1], t->n);
    if (cl->graph_nodes >= MAX_CLIENT_GRAPH_NODES)
        return sg_reply_invalid(cl, r, 2, "%s: this client's graphs would exceed %u nodes", what, MAX_CLIENT_GRAPH_NODES);
    if (vcuda_graph_decode_from(q->blob, q->blob_len, index, 1, &n, bad)) return sg_reply_invalid(cl, r, 1, "%s: %s", what, bad);
    if (sg_grow((void **)&t->nodes, &t->cap_nodes, t->n + 1, sizeof *t->nodes, VCUDA_MAX_GRAPH_NODES) ||
        sg_grow((void **)&t->kinds, &t->cap_kinds, t->n + 1, 1, VCUDA_MAX_GRAPH_NODES) ||
        sg_grow((void **)&root->shape.ranges, &root->cap_ranges, root->shape.nranges + 2, sizeof(mem_range),
                2 * MAX_CLIENT_GRAPH_NODES) ||
                t->nedges + n.ndeps > MAX_TWIN_EDGES)
        return sg_reply_invalid(cl, r, 2, "%s: server out of memory or the graph's edge limit (%u)", what, MAX_TWIN_EDGES);
    for (uint32_t k = 0; k < n.ndeps; ++k) deps[k] = t->nodes[vcuda_graph_dep(&n, k)];
    r->v[0] = 0, r->nv = 1, r->blob = bodies, r->blob_len = 0;
    switch (n.kind) {
    case VCUDA_GNODE_COND: {
        uint32_t k = 0;
        while (k < root->nconds && root->conds[k] != n.cond) ++k;
        if (k == root->nconds) return sg_reply_invalid(cl, r, 400, "%s: unknown conditional handle", what);
        if (sg_grow((void **)&cl->handles, &cl->cap_handle, cl->nhandle + n.cond_size, sizeof(handle), MAX_HANDLES))
            return sg_reply_invalid(cl, r, 2, "%s: handle limit reached", what);
        graph_node_params p;
        memset(&p, 0, sizeof p);
        p.type = VCUDA_CU_GRAPH_NODE_TYPE_CONDITIONAL;
        p.u.conditional.handle = n.cond, p.u.conditional.type = (int)n.cond_type, p.u.conditional.size = n.cond_size;
        p.u.conditional.ctx = cx;
        if ((rc = g->cu.cuGraphAddNode_v2(&made, t->graph, deps, NULL, n.ndeps, &p))) break;
        for (k = 0; k < n.cond_size; ++k) {
            uint64_t id = 0;
            if (!p.u.conditional.bodies || !twin_new(cl, p.u.conditional.bodies[k], root, &id))
                return sg_reply_invalid(cl, r, 2, "%s: server out of memory", what); /* (the node stays, unusable) */
            for (int b = 0; b < 8; ++b) bodies[8 * k + b] = (uint8_t)(id >> (8 * b));
        }
        r->blob_len = 8 * n.cond_size;
        break;
    }
    case VCUDA_GNODE_ALLOC: {
        size_t total = 0;
        if (!g->cu.cuDeviceTotalMem_v2(&total, g->dev) && n.size > total)
            return sg_reply_invalid(cl, r, 2, "%s: an allocation of %llu bytes on a device of %zu", what,
                                    (unsigned long long)n.size, total);
        if (sg_alloc_refused(cl, r, what, n.size)) return 0;
        if (sg_grow((void **)&root->allocs, &root->cap_allocs, root->nallocs + 1, sizeof(uint64_t), MAX_ALLOCS))
            return sg_uncharge(cl, n.size), sg_reply_invalid(cl, r, 2, "%s: server out of memory", what);
        mem_alloc_node_params p;
        memset(&p, 0, sizeof p);
        p.pool.alloc_type = VCUDA_CU_MEM_ALLOCATION_TYPE_PINNED;
        p.pool.location_type = VCUDA_CU_MEM_LOCATION_TYPE_DEVICE, p.pool.location_id = g->dev;
        p.bytesize = n.size;
        if ((rc = g->cu.cuGraphAddMemAllocNode(&made, t->graph, deps, n.ndeps, &p))) {
            sg_uncharge(cl, n.size);
            break;
        }
        cl->allocs[cl->nalloc++] = (allocation){p.dptr, n.size, NULL, 1};
        root->allocs[root->nallocs++] = p.dptr;
        r->v[0] = p.dptr;
        break;
    }
    case VCUDA_GNODE_FREE: {
        /* By base, among graph allocations only: a range lookup would also match the end
         * of an ordinary allocation that the driver placed right before this one. */
        allocation *a = NULL;
        for (uint32_t k = 0; k < cl->nalloc && !a; ++k)
            if (cl->allocs[k].graph && cl->allocs[k].base == n.dst) a = &cl->allocs[k];
        if (!a)
            return sg_reply_invalid(cl, r, 1, "%s: 0x%llx is not a graph allocation of this client", what,
                                    (unsigned long long)n.dst);
        if (push_u64(&root->frees, &root->nfrees, &root->cap_frees, n.dst, MAX_ALLOCS))
            return sg_reply_invalid(cl, r, 2, "%s: server out of memory", what);
        if ((rc = g->cu.cuGraphAddMemFreeNode(&made, t->graph, deps, n.ndeps, n.dst))) --root->nfrees;
        break;
    }
    default: {
        uint8_t *saved = root->shape.kinds;
        root->shape.kinds = t->kinds;
        int refused = graph_node_check(cl, &n, index, &root->shape, r, what);
        root->shape.kinds = saved;
        if (refused) return 0;
        rc = graph_node_add(g, cl, t->graph, &n, &made, deps);
    }
    }
    if (rc) return sg_reply_cu(g, cl, r, what, rc);
    for (uint32_t k = 0; k < n.ndeps; ++k) twin_edge(t, vcuda_graph_dep(&n, k), index); /* (room checked) */
    t->nodes[t->n] = made, t->kinds[t->n++] = (uint8_t)n.kind;
    ++root->nodes_all, ++cl->graph_nodes;
    return 0;
}

/* GRAPH_TWIN_ADD_EDGE: `to` waits for `from` too. */
static int twin_add_edge(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    static _Thread_local uint8_t seen[VCUDA_MAX_GRAPH_NODES];
    static _Thread_local uint32_t stack[VCUDA_MAX_GRAPH_NODES];
    twin *t = twin_of(cl, q->v[0]);
    uint64_t from = q->v[1], to = q->v[2];
    CUresult rc;
    if (!t) return sg_reply_invalid(cl, r, 400, "GRAPH_TWIN_ADD_EDGE: unknown graph");
    if (from >= t->n || to >= t->n || from == to)
        return sg_reply_invalid(cl, r, 1, "GRAPH_TWIN_ADD_EDGE: nodes %llu -> %llu of a graph of %u", (unsigned long long)from,
                                (unsigned long long)to, t->n);
    for (uint32_t e = 0; e < t->nedges; ++e)
        if (t->edges[2 * e] == from && t->edges[2 * e + 1] == to)
            return sg_reply_invalid(cl, r, 1, "GRAPH_TWIN_ADD_EDGE: the dependency exists");
    if (twin_reaches(t, (uint32_t)from, (uint32_t)to, seen, stack))
        return sg_reply_invalid(cl, r, 1, "GRAPH_TWIN_ADD_EDGE: node %llu already waits for node %llu: a cycle",
                                (unsigned long long)from, (unsigned long long)to);
    if (t->nedges >= MAX_TWIN_EDGES || twin_edge(t, (uint32_t)from, (uint32_t)to))
        return sg_reply_invalid(cl, r, 2, "GRAPH_TWIN_ADD_EDGE: the graph's edge limit (%u)", MAX_TWIN_EDGES);
    if ((rc = g->cu.cuGraphAddDependencies_v2(t->graph, &t->nodes[from], &t->nodes[to], NULL, 1))) {
        --t->nedges;
        return sg_reply_cu(g, cl, r, "GRAPH_TWIN_ADD_EDGE", rc);
    }
    return 0;
}

/* GRAPH_TWIN_INSTANTIATE: an exec of the top twin itself. */
static int twin_instantiate(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    twin *t = twin_of(cl, q->v[0]);
    const uint64_t known = 1 /* auto free on launch */ | 8 /* use node priority */;
    if (!t) return sg_reply_invalid(cl, r, 400, "GRAPH_TWIN_INSTANTIATE: unknown graph");
    if (t->root != t) return sg_reply_invalid(cl, r, 1, "GRAPH_TWIN_INSTANTIATE: a conditional node's body graph");
    if (t->dead) return sg_reply_invalid(cl, r, 400, "GRAPH_TWIN_INSTANTIATE: a module the graph's kernels are in was unloaded");
    if (q->v[1] & ~known)
        return sg_reply_invalid(cl, r, 1, "GRAPH_TWIN_INSTANTIATE: flags 0x%llx", (unsigned long long)q->v[1]);
    graph_exec *x = calloc(1, sizeof *x);
    size_t nr = t->shape.nranges, nm = t->shape.nmodules;
    if (x) {
        x->made = malloc((t->n ? t->n : 1) * sizeof *x->made), x->kinds = malloc(t->n ? t->n : 1);
        x->ranges = malloc((nr ? nr : 1) * sizeof *x->ranges), x->modules = malloc((nm ? nm : 1) * sizeof *x->modules);
    }
    if (!x || !x->made || !x->kinds || !x->ranges || !x->modules) {
        if (x) free(x->made), free(x->kinds), free(x->ranges), free(x->modules), free(x);
        return sg_reply_invalid(cl, r, 2, "GRAPH_TWIN_INSTANTIATE: server out of memory");
    }
    if (t->n) memcpy(x->made, t->nodes, t->n * sizeof *x->made), memcpy(x->kinds, t->kinds, t->n);
    if (nr) memcpy(x->ranges, t->shape.ranges, nr * sizeof *x->ranges);
    if (nm) memcpy(x->modules, t->shape.modules, nm * sizeof *x->modules);
    x->nodes = t->n, x->nranges = (uint32_t)nr, x->nmodules = x->cap_modules = (uint32_t)nm;
    x->tw = t, ++t->refs;
    CUresult rc = g->cu.cuGraphInstantiateWithFlags(&x->exec, t->graph, q->v[1]);
    uint64_t id = rc ? 0 : sg_add_handle(cl, H_GRAPH_EXEC, x);
    if (!id) {
        if (rc) sg_reply_cu(g, cl, r, "GRAPH_TWIN_INSTANTIATE", rc);
        else sg_reply_invalid(cl, r, 2, "GRAPH_TWIN_INSTANTIATE: handle limit reached");
        sg_graph_exec_free(g, cl, x, 1);
        return 0;
    }
    r->v[0] = id, r->nv = 1;
    return 0;
}

/* Module m is unloaded: the client's twins with kernels in it cannot be instantiated or
 * grown any more (their execs went with sg_graph_execs_drop). */
void sg_twins_module_gone(client *cl, CUmodule m)
{
    for (uint32_t i = 0; i < cl->nhandle; ++i)
        if (cl->handles[i].kind == H_GRAPH) {
            twin *t = ((twin *)cl->handles[i].obj)->root;
            for (uint32_t k = 0; k < t->shape.nmodules; ++k) t->dead |= t->shape.modules[k] == m;
        }
}

/* The twin and graph-memory requests (wire codes 80..). */
int sg_twin_requests(vcuda_gpu *g, client *cl, const vcuda_msg *q, vcuda_msg *r)
{
    const char *op = vcuda_opcode_name(q->hdr.opcode);
    CUcontext cx = cl->own ? cl->own : g->ctx;
    CUresult rc = 0;
    twin *t;
    switch (q->hdr.opcode) {
    case VCUDA_OP_GRAPH_TWIN_CREATE: {
        CUgraph graph;
        uint64_t id = 0;
        if (cl->nhandle >= MAX_HANDLES) return sg_reply_invalid(cl, r, 2, "%s: handle limit reached", op);
        if ((rc = g->cu.cuGraphCreate(&graph, 0))) return sg_reply_cu(g, cl, r, op, rc);
        if (!twin_new(cl, graph, NULL, &id)) {
            g->cu.cuGraphDestroy(graph);
            return sg_reply_invalid(cl, r, 2, "%s: server out of memory", op);
        }
        r->v[0] = id, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_GRAPH_TWIN_DESTROY:
        if (!(t = twin_of(cl, q->v[0]))) return sg_reply_invalid(cl, r, 400, "%s: unknown graph", op);
        if (t->root != t) return sg_reply_invalid(cl, r, 1, "%s: a conditional node's body graph goes with its node", op);
        twin_destroy(g, cl, t);
        return 0;
    case VCUDA_OP_GRAPH_TWIN_ADD_NODE: return twin_add_node(g, cl, q, r);
    case VCUDA_OP_GRAPH_TWIN_ADD_EDGE: return twin_add_edge(g, cl, q, r);
    case VCUDA_OP_GRAPH_TWIN_INSTANTIATE: return twin_instantiate(g, cl, q, r);
    case VCUDA_OP_GRAPH_COND_CREATE: {
        unsigned long long v;
        if (!(t = twin_of(cl, q->v[0]))) return sg_reply_invalid(cl, r, 400, "%s: unknown graph", op);
        if (q->v[2] > 1) return sg_reply_invalid(cl, r, 1, "%s: flags 0x%llx", op, (unsigned long long)q->v[2]);
        if (sg_grow((void **)&t->root->conds, &t->root->cap_conds, t->root->nconds + 1, sizeof(uint64_t), MAX_HANDLES))
            return sg_reply_invalid(cl, r, 2, "%s: conditional handle limit reached", op);
        if ((rc = g->cu.cuGraphConditionalHandleCreate(&v, t->graph, cx, (unsigned)q->v[1], (unsigned)q->v[2])))
            return sg_reply_cu(g, cl, r, op, rc);
        t->root->conds[t->root->nconds++] = v;
        r->v[0] = v, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_GRAPH_MEM_ATTR_GET: {
        unsigned long long v = 0;
        if (q->v[0] > 3) return sg_reply_invalid(cl, r, 1, "%s: attribute %llu", op, (unsigned long long)q->v[0]);
        if ((rc = g->cu.cuDeviceGetGraphMemAttribute(g->dev, (int)q->v[0], &v))) return sg_reply_cu(g, cl, r, op, rc);
        r->v[0] = v > VCUDA_MAX_SIZE ? VCUDA_MAX_SIZE : v, r->nv = 1;
        return 0;
    }
    case VCUDA_OP_GRAPH_MEM_ATTR_RESET: {
        unsigned long long zero = 0;
        if (q->v[0] != 1 && q->v[0] != 3) /* the high watermarks, USED_MEM_HIGH and RESERVED_MEM_HIGH */
            return sg_reply_invalid(cl, r, 1, "%s: attribute %llu cannot be set", op, (unsigned long long)q->v[0]);
        return (rc = g->cu.cuDeviceSetGraphMemAttribute(g->dev, (int)q->v[0], &zero)) ? sg_reply_cu(g, cl, r, op, rc) : 0;
    }
    case VCUDA_OP_GRAPH_MEM_TRIM: return (rc = g->cu.cuDeviceGraphMemTrim(g->dev)) ? sg_reply_cu(g, cl, r, op, rc) : 0;
    default: return sg_reply_invalid(cl, r, 801, "%s is not served by vcuda-server", op);
    }
}

/* xmpc core: backend selection, coarray bookkeeping, and the checks and section
 * normalisation every access goes through before a backend sees it. */
#define _POSIX_C_SOURCE 200809L
#include "xmpc_internal.h"

#include "umstudy/support.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const xmpc_backend *const k_backends[] = {
#ifdef XMPC_HAVE_MPI3
    &xmpc_backend_mpi3,
#endif
#ifdef XMPC_HAVE_ARMCI
    &xmpc_backend_armci,
#endif
#ifdef XMPC_HAVE_GASNET
    &xmpc_backend_gasnet,
#endif
};
#define N_BACKENDS (sizeof k_backends / sizeof k_backends[0])

static struct {
    const xmpc_backend *b; /* NULL until xmpc_init: the use-before-init check */
    int me, n;             /* 0-based rank, image count */
    xmpc_coarray *list;    /* live coarrays, for sync memory */
} g;

/* ---- errors ------------------------------------------------------------------------ */

static void format_section(char *buf, size_t cap, const xmpc_section *s)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int d = 0; s && d < s->ndims && len < cap; ++d)
        len += (size_t)snprintf(buf + len, cap - len, "[%ld:%ld:%ld]", s->base[d], s->length[d],
                                s->step[d]);
}

static _Noreturn void die(void)
{
    fflush(stdout);
    fflush(stderr);
    if (g.b)
        g.b->abort(UMS_EXIT_FAILED);
    exit(UMS_EXIT_FAILED); /* not started: nothing collective to abort */
}

static void vreport(const xmpc_coarray *ca, int image, const xmpc_section *s, const char *fmt,
                    va_list ap)
{
    char reason[512], sec[256];
    vsnprintf(reason, sizeof reason, fmt, ap);
    format_section(sec, sizeof sec, s);
    if (g.b)
        fprintf(stderr, "xmpc: error: image %d of %d (%s): ", g.me + 1, g.n, g.b->name);
    else
        fprintf(stderr, "xmpc: error: ");
    if (ca)
        fprintf(stderr, "coarray '%s'%s%s on image %d: ", ca->name, sec[0] ? " section " : "", sec,
                image);
    fprintf(stderr, "%s\n", reason);
}

static _Noreturn void fail(const xmpc_coarray *ca, int image, const xmpc_section *s, const char *fmt,
                           ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(ca, image, s, fmt, ap);
    va_end(ap);
    die();
}

void xmpc_fatal(const xmpc_coarray *ca, int image, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(ca, image, NULL, fmt, ap);
    va_end(ap);
    die();
}

static void need_init(const char *fn)
{
    if (!g.b)
        fail(NULL, 0, NULL, "%s called before xmpc_init", fn);
}

void *xmpc_xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        xmpc_fatal(NULL, 0, "out of memory (%zu bytes)", bytes);
    return p;
}

/* ---- start and stop ---------------------------------------------------------------- */

int xmpc_init(int *argc, char ***argv)
{
    if (g.b)
        return 0;
    const char *want = getenv("XMPC_BACKEND");
    char built[64] = "";
    for (size_t i = 0; i < N_BACKENDS; ++i)
        snprintf(built + strlen(built), sizeof built - strlen(built), "%s%s", i ? " " : "",
                 k_backends[i]->name);
    const xmpc_backend *b = N_BACKENDS ? k_backends[0] : NULL;
    if (want && *want) {
        b = NULL;
        for (size_t i = 0; i < N_BACKENDS; ++i)
            if (strcmp(want, k_backends[i]->name) == 0)
                b = k_backends[i];
        if (!b) {
            int known = !strcmp(want, "mpi3") || !strcmp(want, "armci") || !strcmp(want, "gasnet");
            /* A real backend this build lacks (no GASNet on the site, say) is "cannot run
             * here" (exit 77, a skip with the reason); a misspelt one is bad input. */
            if (known)
                ums_unsupported("XMPC_BACKEND=%s: backend not built (this build has: %s)", want,
                                built[0] ? built : "none");
            fprintf(stderr, "xmpc: error: XMPC_BACKEND=%s: unknown backend (mpi3|armci|gasnet)\n", want);
            exit(UMS_EXIT_USAGE);
        }
    }
    if (!b) {
        fprintf(stderr, "xmpc: error: built without any backend\n");
        exit(UMS_EXIT_FAILED);
    }
    b->init(argc, argv, &g.me, &g.n);
    g.b = b;
    return 0;
}

void xmpc_finalize(void)
{
    need_init("xmpc_finalize");
    xmpc_sync_all();
    while (g.list)
        xmpc_coarray_free(g.list);
    const xmpc_backend *b = g.b;
    g.b = NULL;
    b->finalize();
}

void xmpc_abort(int code)
{
    fflush(stdout);
    fflush(stderr);
    if (g.b)
        g.b->abort(code);
    exit(code);
}

int xmpc_this_image(void) { need_init("xmpc_this_image"); return g.me + 1; }
int xmpc_num_images(void) { need_init("xmpc_num_images"); return g.n; }
const char *xmpc_backend_name(void) { need_init("xmpc_backend_name"); return g.b->name; }

/* ---- coarrays ---------------------------------------------------------------------- */

xmpc_coarray *xmpc_coarray_alloc(const char *name, xmpc_type type, size_t elem_size, int ndims,
                                 const long *dims)
{
    need_init("xmpc_coarray_alloc");
    static const size_t type_size[] = {0, sizeof(int), sizeof(long), sizeof(float), sizeof(double)};
    xmpc_coarray tmp = {.type = type, .esize = elem_size, .ndims = ndims, .ncodims = 1};
    snprintf(tmp.name, sizeof tmp.name, "%s", name ? name : "?");
    if ((unsigned)type > XMPC_DOUBLE || elem_size == 0 || (type != XMPC_BYTE && elem_size != type_size[type]))
        fail(&tmp, g.me + 1, NULL, "element type %d does not match element size %zu", (int)type, elem_size);
    if (ndims < 1 || ndims > XMPC_MAX_DIMS)
        fail(&tmp, g.me + 1, NULL, "%d dimensions (1..%d supported)", ndims, XMPC_MAX_DIMS);
    tmp.bytes = elem_size;
    for (int d = 0; d < ndims; ++d) {
        if (dims[d] < 1)
            fail(&tmp, g.me + 1, NULL, "dimension %d has extent %ld", d, dims[d]);
        tmp.dims[d] = dims[d];
        tmp.bytes *= (size_t)dims[d];
    }
    xmpc_coarray *ca = xmpc_xmalloc(sizeof *ca);
    *ca = tmp;
    g.b->alloc(ca);
    ca->next = g.list;
    g.list = ca;
    return ca;
}

void xmpc_coarray_free(xmpc_coarray *ca)
{
    need_init("xmpc_coarray_free");
    xmpc_sync_memory();
    xmpc_coarray **p = &g.list;
    while (*p && *p != ca)
        p = &(*p)->next;
    if (!*p)
        fail(NULL, 0, NULL, "xmpc_coarray_free: not a live coarray");
    *p = ca->next;
    g.b->free(ca);
    free(ca);
}

void *xmpc_coarray_data(const xmpc_coarray *ca) { return ca->data; }

void xmpc_coarray_set_codims(xmpc_coarray *ca, int ncodims, const int *codims)
{
    need_init("xmpc_coarray_set_codims");
    if (ncodims < 1 || ncodims > XMPC_MAX_DIMS)
        fail(ca, g.me + 1, NULL, "%d codimensions (1..%d supported)", ncodims, XMPC_MAX_DIMS);
    for (int k = 0; k < ncodims; ++k) {
        if (codims[k] < 0 || (codims[k] == 0 && k != ncodims - 1))
            fail(ca, g.me + 1, NULL, "codimension %d has extent %d", k, codims[k]);
        ca->codims[k] = codims[k];
    }
    ca->ncodims = ncodims;
}

/* Node indices (1-based, one per codimension, last one fastest) -> image number. */
int xmpc_image_of(const xmpc_coarray *ca, const int *idx)
{
    long image = 0, known = 1;
    for (int k = 0; k + 1 < ca->ncodims; ++k)
        known *= ca->codims[k];
    for (int k = 0; k < ca->ncodims; ++k) {
        /* A trailing `*` stretches to cover every image. */
        long ext = ca->codims[k] > 0 ? ca->codims[k] : (g.n + known - 1) / known;
        if (idx[k] < 1 || idx[k] > ext)
            fail(ca, 0, NULL, "node index %d of codimension %d is outside 1..%ld", idx[k], k, ext);
        image = image * ext + (idx[k] - 1);
    }
    return (int)image + 1;
}

/* ---- sections -> transfers ----------------------------------------------------------- */

/* The strided shape of one side: block bytes, then levels innermost first. */
typedef struct {
    size_t block;
    int levels;
    size_t count[XMPC_MAX_DIMS], stride[XMPC_MAX_DIMS];
} shape;

static size_t section_count(const xmpc_section *s)
{
    size_t n = 1;
    for (int d = 0; d < s->ndims; ++d)
        n *= (size_t)s->length[d];
    return n;
}

static size_t section_offset(const xmpc_section *s, size_t esize)
{
    size_t off = 0;
    for (int d = 0; d < s->ndims; ++d)
        off += (size_t)s->base[d] * s->dist[d];
    return off * esize;
}

/* Dimensions of length 1 vanish; a dimension whose stride continues the block (or the
 * level below) merges into it, so `a[0:4][0:8]` of an [4][8] array is one block. */
static shape make_shape(const xmpc_section *s, size_t esize)
{
    shape sh = {.block = esize};
    for (int d = s->ndims - 1; d >= 0; --d) {
        size_t len = (size_t)s->length[d], stride = (size_t)s->step[d] * s->dist[d] * esize;
        if (len == 1)
            continue;
        if (sh.levels == 0 && stride == sh.block)
            sh.block *= len;
        else if (sh.levels > 0 && stride == sh.count[sh.levels - 1] * sh.stride[sh.levels - 1])
            sh.count[sh.levels - 1] *= len;
        else {
            sh.count[sh.levels] = len;
            sh.stride[sh.levels++] = stride;
        }
    }
    return sh;
}

/* rs: the coarray section, named in every message; s: the side being checked. */
static void check_section(const xmpc_coarray *ca, int image, const xmpc_section *rs,
                          const xmpc_section *s, const char *fn)
{
    for (int d = 0; d < s->ndims; ++d) {
        long last = s->base[d] + (s->length[d] - 1) * s->step[d];
        if (s->length[d] < 0 || s->step[d] < 1 || s->base[d] < 0 ||
            (s->extent && s->length[d] > 0 && last >= s->extent[d])) {
            char sec[256] = "";
            if (s != rs)
                format_section(sec, sizeof sec, s);
            fail(ca, image, rs, "%s: %s section%s%s out of bounds in dimension %d (extent %ld)",
                 fn, s == rs ? "coarray" : "local", sec[0] ? " " : "", sec, d,
                 s->extent ? s->extent[d] : -1L);
        }
    }
}

static xmpc_section section_of(int ndims, const long *dims, const xmpc_range *r)
{
    xmpc_section s = {.ndims = ndims, .extent = dims};
    size_t dist = 1;
    for (int d = ndims - 1; d >= 0; --d) {
        s.base[d] = r[d].base;
        s.length[d] = r[d].length;
        s.step[d] = r[d].step;
        s.dist[d] = dist;
        dist *= (size_t)dims[d];
    }
    return s;
}

static int overlaps(const char *a, size_t an, const char *b, size_t bn)
{
    return (uintptr_t)a < (uintptr_t)b + bn && (uintptr_t)b < (uintptr_t)a + an;
}

static int is_int_type(xmpc_type t) { return t == XMPC_INT || t == XMPC_LONG; }

static int has_zero(xmpc_type t, const void *v, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        if ((t == XMPC_INT && ((const int *)v)[i] == 0) || (t == XMPC_LONG && ((const long *)v)[i] == 0))
            return 1;
    return 0;
}

/* Every access: checks, then one xmpc_xfer whose local side is either the caller's
 * memory (when its strides can follow the remote shape) or a contiguous temporary. */
void xmpc_rma(int code, xmpc_coarray *ca, int image, const xmpc_section *rs, char *laddr,
              const xmpc_section *ls, xmpc_op op, xmpc_type ltype, const char *fn)
{
    need_init(fn);
    if (!ca)
        fail(NULL, image, rs, "%s: NULL coarray", fn);
    if (image < 1 || image > g.n)
        fail(ca, image, rs, "%s: image %d is outside 1..%d", fn, image, g.n);
    if (rs->ndims != ca->ndims)
        fail(ca, image, rs, "%s: %d subscripts for a %d-dimensional coarray", fn, rs->ndims, ca->ndims);
    if (ls->ndims < 1 || ls->ndims > XMPC_MAX_DIMS)
        fail(ca, image, rs, "%s: local section has %d dimensions (1..%d)", fn, ls->ndims, XMPC_MAX_DIMS);
    if (!laddr)
        fail(ca, image, rs, "%s: NULL local address", fn);
    check_section(ca, image, rs, rs, fn);
    check_section(ca, image, rs, ls, fn);
    int acc = code == XMPC_RMA_GET_ACC || code == XMPC_RMA_PUT_ACC;
    if (acc) {
        if (ca->type == XMPC_BYTE || ltype != ca->type)
            fail(ca, image, rs, "%s: element type mismatch (coarray type %d, local type %d; "
                 "accumulates need int, long, float or double)", fn, (int)ca->type, (int)ltype);
        if (!strchr("+-*/<>", (int)op) || op == 0)
            fail(ca, image, rs, "%s: unknown accumulate op '%c' (+ - * / < >)", fn, (char)op);
    }
    size_t nr = section_count(rs), nl = section_count(ls);
    if (nr == 0)
        return;
    int bcast = nl == 1 && nr > 1 && code != XMPC_RMA_GET && code != XMPC_RMA_GET_ACC;
    if (nl != nr && !bcast)
        fail(ca, image, rs, "%s: the local section has %zu elements, the coarray section %zu",
             fn, nl, nr);

    size_t es = ca->esize, bytes = nr * es;
    shape r = make_shape(rs, es), l = make_shape(ls, es);
    xmpc_xfer x = {.block = r.block, .levels = r.levels, .roff = section_offset(rs, es),
                   .laddr = laddr + section_offset(ls, es)};
    memcpy(x.count, r.count, sizeof x.count);
    memcpy(x.rstride, r.stride, sizeof x.rstride);
    /* The local side can be used in place when it has the remote shape or is one
     * block (then it takes the remote counts), except that a transfer from/to this
     * image's own coarray memory goes through a temporary so nothing overlaps. */
    size_t lspan = l.block;
    for (int i = 0; i < l.levels; ++i)
        lspan += (l.count[i] - 1) * l.stride[i];
    int same = l.block == r.block && l.levels == r.levels &&
               !memcmp(l.count, r.count, (size_t)r.levels * sizeof(size_t));
    int in_place = !bcast && !acc && (same || l.levels == 0) &&
                   !(image == g.me + 1 && overlaps(x.laddr, lspan, ca->data, ca->bytes));
    if (in_place && same)
        memcpy(x.lstride, l.stride, sizeof x.lstride);
    else if (in_place)
        x = xmpc_xfer_contiguous(&x, x.laddr);

    if (in_place) {
        if (code == XMPC_RMA_PUT)
            g.b->put(ca, image - 1, &x);
        else
            g.b->get(ca, image - 1, &x);
        return;
    }
    /* Temporary: the local elements in row-major order, contiguous. */
    char *tmp = xmpc_xmalloc(bytes);
    xmpc_xfer lx = {.block = l.block, .levels = l.levels, .laddr = x.laddr};
    memcpy(lx.count, l.count, sizeof lx.count);
    memcpy(lx.lstride, l.stride, sizeof lx.lstride);
    xmpc_xfer tx = xmpc_xfer_contiguous(&x, tmp);
    if (code == XMPC_RMA_PUT || code == XMPC_RMA_PUT_ACC) {
        if (bcast)
            for (size_t i = 0; i < nr; ++i)
                memcpy(tmp + i * es, x.laddr, es);
        else
            xmpc_xfer_pack(&lx, tmp);
        if (code == XMPC_RMA_PUT)
            g.b->put(ca, image - 1, &tx);
        else {
            if (op == XMPC_OP_DIV && is_int_type(ca->type) && has_zero(ca->type, tmp, nr))
                fail(ca, image, rs, "%s: integer division by zero", fn);
            g.b->put_acc(ca, image - 1, &tx, op);
        }
    } else {
        g.b->get(ca, image - 1, &tx);
        if (code == XMPC_RMA_GET_ACC) {
            if (op == XMPC_OP_DIV && is_int_type(ca->type) && has_zero(ca->type, tmp, nr))
                fail(ca, image, rs, "%s: integer division by zero", fn);
            char *cur = xmpc_xmalloc(bytes);
            xmpc_xfer_pack(&lx, cur);
            xmpc_apply_op(op, ca->type, cur, tmp, nr);
            memcpy(tmp, cur, bytes);
            free(cur);
        }
        xmpc_xfer_unpack(&lx, tmp);
    }
    free(tmp);
}

static xmpc_section local_section(const xmpc_local *l)
{
    if (!l || !l->addr || !l->dims || !l->r)
        fail(NULL, 0, NULL, "local section without address, dims or ranges");
    if (l->ndims < 1 || l->ndims > XMPC_MAX_DIMS)
        fail(NULL, 0, NULL, "local section has %d dimensions (1..%d)", l->ndims, XMPC_MAX_DIMS);
    return section_of(l->ndims, l->dims, l->r);
}

static void rma_native(int code, xmpc_coarray *ca, int image, const xmpc_range *remote,
                       const xmpc_local *local, xmpc_op op, xmpc_type t, const char *fn)
{
    need_init(fn);
    if (!ca || !remote)
        fail(ca, image, NULL, "%s: NULL coarray or section", fn);
    xmpc_section rs = section_of(ca->ndims, ca->dims, remote), ls = local_section(local);
    xmpc_rma(code, ca, image, &rs, local->addr, &ls, op, t, fn);
}

void xmpc_put(xmpc_coarray *ca, int image, const xmpc_range *remote, const xmpc_local *local)
{
    rma_native(XMPC_RMA_PUT, ca, image, remote, local, 0, XMPC_BYTE, "xmpc_put");
}
void xmpc_get(xmpc_coarray *ca, int image, const xmpc_range *remote, const xmpc_local *local)
{
    rma_native(XMPC_RMA_GET, ca, image, remote, local, 0, XMPC_BYTE, "xmpc_get");
}
void xmpc_put_acc(xmpc_coarray *ca, int image, const xmpc_range *remote, xmpc_op op,
                  xmpc_type type, const xmpc_local *local)
{
    rma_native(XMPC_RMA_PUT_ACC, ca, image, remote, local, op, type, "xmpc_put_acc");
}
void xmpc_get_acc(xmpc_coarray *ca, int image, const xmpc_range *remote, xmpc_op op,
                  xmpc_type type, const xmpc_local *local)
{
    rma_native(XMPC_RMA_GET_ACC, ca, image, remote, local, op, type, "xmpc_get_acc");
}

/* ---- synchronisation ----------------------------------------------------------------- */

void xmpc_sync_memory(void)
{
    need_init("xmpc_sync_memory");
    g.b->sync_memory(g.list);
}

void xmpc_barrier(void)
{
    need_init("xmpc_barrier");
    g.b->barrier();
}

void xmpc_sync_all(void)
{
    xmpc_sync_memory();
    g.b->barrier();
    /* Again after the barrier: the others' puts, complete before it, must also become
     * visible to this image's loads (MPI-3 RMA: MPI_Win_sync after the synchronisation). */
    g.b->sync_memory(g.list);
}

void xmpc_sync_images(int n, const int *images)
{
    need_init("xmpc_sync_images");
    int *ranks = xmpc_xmalloc(sizeof(int) * (size_t)(images ? (n > 0 ? n : 1) : g.n));
    if (!images) /* sync images(*) */
        for (n = 0; n < g.n; ++n)
            ranks[n] = n;
    for (int i = 0; images && i < n; ++i) {
        if (images[i] < 1 || images[i] > g.n)
            fail(NULL, images[i], NULL, "sync images: image %d is outside 1..%d", images[i], g.n);
        ranks[i] = images[i] - 1;
    }
    g.b->sync_memory(g.list);
    g.b->sync_images(n, ranks);
    g.b->sync_memory(g.list); /* as in sync all: the partners' puts become visible here */
    free(ranks);
}

/* ---- helpers for backends ------------------------------------------------------------ */

size_t xmpc_xfer_bytes(const xmpc_xfer *x)
{
    size_t n = x->block;
    for (int i = 0; i < x->levels; ++i)
        n *= x->count[i];
    return n;
}

void xmpc_xfer_runs(const xmpc_xfer *x, void (*fn)(void *, size_t, char *, size_t), void *ctx)
{
    size_t idx[XMPC_MAX_DIMS] = {0};
    for (;;) {
        size_t roff = x->roff;
        char *la = x->laddr;
        for (int i = 0; i < x->levels; ++i) {
            roff += idx[i] * x->rstride[i];
            la += idx[i] * x->lstride[i];
        }
        fn(ctx, roff, la, x->block);
        int i = 0; /* odometer, innermost level first */
        while (i < x->levels && ++idx[i] == x->count[i])
            idx[i++] = 0;
        if (i == x->levels)
            return;
    }
}

struct copy_ctx { char *buf; int pack; };
static void copy_run(void *ctx, size_t roff, char *la, size_t n)
{
    struct copy_ctx *c = ctx;
    (void)roff;
    if (c->pack)
        memcpy(c->buf, la, n);
    else
        memcpy(la, c->buf, n);
    c->buf += n;
}

void xmpc_xfer_pack(const xmpc_xfer *x, void *buf)
{
    struct copy_ctx c = {buf, 1};
    xmpc_xfer_runs(x, copy_run, &c);
}

void xmpc_xfer_unpack(const xmpc_xfer *x, const void *buf)
{
    struct copy_ctx c = {(char *)buf, 0};
    xmpc_xfer_runs(x, copy_run, &c);
}

xmpc_xfer xmpc_xfer_contiguous(const xmpc_xfer *x, void *buf)
{
    xmpc_xfer c = *x;
    c.laddr = buf;
    size_t s = x->block;
    for (int i = 0; i < x->levels; ++i) {
        c.lstride[i] = s;
        s *= x->count[i];
    }
    return c;
}

#define APPLY(T)                                                                          \
    do {                                                                                  \
        T *d = dst;                                                                       \
        const T *s = src;                                                                 \
        for (size_t i = 0; i < n; ++i)                                                    \
            switch (op) {                                                                 \
            case XMPC_OP_SUM: d[i] += s[i]; break;                                        \
            case XMPC_OP_DIFF: d[i] -= s[i]; break;                                       \
            case XMPC_OP_PROD: d[i] *= s[i]; break;                                       \
            case XMPC_OP_DIV: d[i] /= s[i]; break;                                        \
            case XMPC_OP_MIN: d[i] = s[i] < d[i] ? s[i] : d[i]; break;                    \
            case XMPC_OP_MAX: d[i] = s[i] > d[i] ? s[i] : d[i]; break;                    \
            }                                                                             \
    } while (0)

void xmpc_apply_op(xmpc_op op, xmpc_type type, void *dst, const void *src, size_t n)
{
    switch (type) {
    case XMPC_INT: APPLY(int); break;
    case XMPC_LONG: APPLY(long); break;
    case XMPC_FLOAT: APPLY(float); break;
    case XMPC_DOUBLE: APPLY(double); break;
    default: break;
    }
}

void xmpc_rmw_acc(const xmpc_backend *b, xmpc_coarray *ca, int rank, const xmpc_xfer *x,
                  xmpc_op op)
{
    size_t bytes = xmpc_xfer_bytes(x);
    char *cur = xmpc_xmalloc(bytes), *val = xmpc_xmalloc(bytes);
    xmpc_xfer cx = xmpc_xfer_contiguous(x, cur);
    xmpc_xfer_pack(x, val);
    b->get(ca, rank, &cx);
    xmpc_apply_op(op, ca->type, cur, val, bytes / ca->esize);
    b->put(ca, rank, &cx);
    free(cur);
    free(val);
}

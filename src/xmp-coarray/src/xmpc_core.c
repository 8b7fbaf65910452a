/* xmpc core: backend selection, coarray bookkeeping, and the checks and section
 * normalisation every access goes through before a backend sees it. */
#define _POSIX_C_SOURCE 200809L
#include "xmpc_internal.h"

#include "umstudy/support.h"

#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
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

xmpc_state xmpc_g;
#define g xmpc_g

static const char *const k_type_names[] = {"byte", "int", "long", "float", "double"};

const char *xmpc_type_name(xmpc_type type)
{
    static _Thread_local char other[32];
    if ((unsigned)type <= XMPC_DOUBLE)
        return k_type_names[type];
    snprintf(other, sizeof other, "unknown type %d", (int)type);
    return other;
}

/* ---- errors ------------------------------------------------------------------------ */

static void format_section(char *buf, size_t cap, const xmpc_section *s)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int d = 0; s && d < s->ndims && len < cap; ++d)
        len += (size_t)snprintf(buf + len, cap - len, "[%ld:%ld:%ld]", s->base[d], s->length[d],
                                s->step[d]);
}

static _Noreturn void die(const char *line)
{
    fflush(stdout);
    fflush(stderr);
    if (g.b)
        xmpc_error_termination(line, UMS_EXIT_FAILED);
    exit(UMS_EXIT_FAILED); /* not started: nothing collective to abort */
}

const char *xmpc_vreport(const xmpc_coarray *ca, int image, const xmpc_section *s,
                         const char *fmt, va_list ap)
{
    static char line[XMPC_MSG_BYTES];
    char reason[512], sec[256];
    size_t len = 0;
    vsnprintf(reason, sizeof reason, fmt, ap);
    format_section(sec, sizeof sec, s);
    if (g.b)
        len = (size_t)snprintf(line, sizeof line, "xmpc: error: image %d of %d (%s): ", g.me + 1,
                               g.n, g.b->name);
    else
        len = (size_t)snprintf(line, sizeof line, "xmpc: error: ");
    if (ca && len < sizeof line)
        len += (size_t)snprintf(line + len, sizeof line - len, "coarray '%s'%s%s on image %d: ",
                                ca->name, sec[0] ? " section " : "", sec, image);
    if (len < sizeof line)
        snprintf(line + len, sizeof line - len, "%s", reason);
    fprintf(stderr, "%s\n", line);
    return line;
}

static _Noreturn void fail(const xmpc_coarray *ca, int image, const xmpc_section *s, const char *fmt,
                           ...)
{
    va_list ap;
    va_start(ap, fmt);
    const char *line = xmpc_vreport(ca, image, s, fmt, ap);
    va_end(ap);
    die(line);
}

void xmpc_fatal(const xmpc_coarray *ca, int image, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const char *line = xmpc_vreport(ca, image, NULL, fmt, ap);
    va_end(ap);
    die(line);
}

const char *xmpc_not_running(const char *fn, char *buf, size_t cap)
{
    if (g.state == XMPC_RUNNING)
        return NULL;
    snprintf(buf, cap, "%s called %s", fn,
             g.state == XMPC_FINALIZED ? "after xmpc_finalize" : "before xmpc_init");
    return buf;
}

/* Set on the thread that called xmpc_init: the check is one thread-local load, cheap
 * enough for sync memory's polling loops. */
_Thread_local char xmpc_init_thread;

void xmpc_need_init(const char *fn)
{
    char why[160];
    if (xmpc_not_running(fn, why, sizeof why))
        fail(NULL, 0, NULL, "%s", why);
    if (!xmpc_on_init_thread())
        fail(NULL, 0, NULL, "%s called from a thread other than the one that called xmpc_init "
             "(xmpc calls must come from that thread only)", fn);
}
#define need_init xmpc_need_init

/* Pointer comparisons only: an unknown pointer is never dereferenced. */
void xmpc_check_handle_full(const xmpc_coarray *ca, const char *fn)
{
    need_init(fn);
    if (!ca)
        fail(NULL, 0, NULL, "%s: NULL coarray handle", fn);
    for (const xmpc_coarray *p = g.list; p; p = p->next)
        if (p == ca) {
            if (ca->magic != XMPC_MAGIC_LIVE)
                fail(NULL, 0, NULL, "%s: coarray handle %p is corrupted (magic 0x%x)", fn,
                     (const void *)ca, ca->magic);
            g.last_ok = ca;
            return;
        }
    for (const xmpc_coarray *p = g.freed; p; p = p->next)
        if (p == ca)
            fail(NULL, 0, NULL, "%s: coarray '%s' (allocation #%lu) used after xmpc_coarray_free",
                 fn, ca->name, ca->gen);
    fail(NULL, 0, NULL, "%s: %p is not a coarray handle (from xmpc_coarray_alloc)", fn,
         (const void *)ca);
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
    if (g.state == XMPC_RUNNING)
        return 0;
    if (g.state == XMPC_FINALIZED) {
        /* Not collective any more: every image that does this says so and stops. */
        fprintf(stderr, "xmpc: error: xmpc_init called after xmpc_finalize: the runtime "
                        "(and MPI) cannot be restarted\n");
        exit(UMS_EXIT_FAILED);
    }
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
    xmpc_init_thread = 1;
    b->init(argc, argv, &g.me, &g.n);
    g.b = b;
    g.state = XMPC_RUNNING;
    xmpc_images_init();
    return 0;
}

void xmpc_finalize(void)
{
    if (g.state == XMPC_FINALIZED)
        fail(NULL, 0, NULL, "xmpc_finalize called twice");
    need_init("xmpc_finalize");
    xmpc_images_end();
    const xmpc_backend *b = g.b;
    g.b = NULL;
    g.state = XMPC_FINALIZED;
    b->finalize();
}

void xmpc_stop(int code)
{
    xmpc_finalize();
    fflush(stdout);
    fflush(stderr);
    exit(code);
}

void xmpc_abort(int code)
{
    fflush(stdout);
    fflush(stderr);
    if (g.b) {
        char line[96];
        snprintf(line, sizeof line, "xmpc: error: image %d of %d (%s): error stop (xmpc_abort(%d))",
                 g.me + 1, g.n, g.b->name, code);
        xmpc_error_termination(line, code);
    }
    exit(code);
}

int xmpc_this_image(void) { need_init("xmpc_this_image"); return g.me + 1; }
int xmpc_num_images(void) { need_init("xmpc_num_images"); return g.n; }
const char *xmpc_backend_name(void) { need_init("xmpc_backend_name"); return g.b->name; }

/* ---- coarrays ---------------------------------------------------------------------- */

xmpc_coarray *xmpc_coarray_alloc_stat(const char *name, xmpc_type type, size_t elem_size,
                                      int ndims, const long *dims, int *status)
{
    need_init("xmpc_coarray_alloc");
    static const size_t type_size[] = {0, sizeof(int), sizeof(long), sizeof(float), sizeof(double)};
    xmpc_coarray tmp = {.type = type, .esize = elem_size, .ndims = ndims, .ncodims = 1,
                        .gen = g.gen + 1};
    snprintf(tmp.name, sizeof tmp.name, "%s", name ? name : "?");
    if ((unsigned)type > XMPC_DOUBLE || elem_size == 0 || (type != XMPC_BYTE && elem_size != type_size[type]))
        fail(&tmp, g.me + 1, NULL, "xmpc_coarray_alloc: element type %s does not match element size %zu",
             xmpc_type_name(type), elem_size);
    if (ndims < 1 || ndims > XMPC_MAX_DIMS)
        fail(&tmp, g.me + 1, NULL, "xmpc_coarray_alloc: %d dimensions (1..%d supported)", ndims,
             XMPC_MAX_DIMS);
    if (!dims)
        fail(&tmp, g.me + 1, NULL, "xmpc_coarray_alloc: NULL dims");
    tmp.bytes = elem_size;
    for (int d = 0; d < ndims; ++d) {
        /* Extent 0 is a zero-size coarray, legal as Fortran's allocate(z(0)[*]). */
        if (dims[d] < 0)
            fail(&tmp, g.me + 1, NULL, "xmpc_coarray_alloc: dimension %d has extent %ld", d, dims[d]);
        tmp.dims[d] = dims[d];
        /* Bytes must fit a signed byte offset: sections are walked with signed strides. */
        if (__builtin_mul_overflow(tmp.bytes, (size_t)dims[d], &tmp.bytes) || tmp.bytes > PTRDIFF_MAX)
            fail(&tmp, g.me + 1, NULL, "xmpc_coarray_alloc: size overflows (dimension %d)", d);
    }
    xmpc_coll c;
    memset(&c, 0, sizeof c); /* padding too: shapes are compared bytewise */
    c.kind = XMPC_COLL_ALLOC;
    c.gen = tmp.gen;
    c.shape.type = (int)type;
    c.shape.ndims = ndims;
    c.shape.esize = elem_size;
    memcpy(c.shape.dims, tmp.dims, sizeof c.shape.dims);
    snprintf(c.name, sizeof c.name, "%s", tmp.name);
    if (xmpc_collective(&c, status, "xmpc_coarray_alloc") != XMPC_STAT_OK)
        return NULL;
    ++g.gen;
    xmpc_coarray *ca = xmpc_xmalloc(sizeof *ca);
    *ca = tmp;
    g.b->alloc(ca);
    ca->magic = XMPC_MAGIC_LIVE;
    ca->next = g.list;
    g.list = ca;
    if (status)
        *status = XMPC_STAT_OK;
    return ca;
}

xmpc_coarray *xmpc_coarray_alloc(const char *name, xmpc_type type, size_t elem_size, int ndims,
                                 const long *dims)
{
    return xmpc_coarray_alloc_stat(name, type, elem_size, ndims, dims, NULL);
}

void xmpc_coarray_free_stat(xmpc_coarray *ca, int *status)
{
    xmpc_check_handle(ca, "xmpc_coarray_free");
    xmpc_sync_memory();
    xmpc_coll c;
    memset(&c, 0, sizeof c);
    c.kind = XMPC_COLL_FREE;
    c.gen = ca->gen;
    snprintf(c.name, sizeof c.name, "%s", ca->name);
    /* Every image frees this allocation now, so nobody still accesses it (the
     * deallocation's implicit sync all), and the transport's collective free below
     * is entered by all of them or by none. */
    if (xmpc_collective(&c, status, "xmpc_coarray_free") != XMPC_STAT_OK)
        return;
    xmpc_coarray **p = &g.list;
    while (*p != ca)
        p = &(*p)->next;
    *p = ca->next;
    g.b->free(ca);
    /* Kept, not freed: see XMPC_MAGIC_FREED. */
    ca->magic = XMPC_MAGIC_FREED;
    ca->data = ca->bk = NULL;
    ca->next = g.freed;
    g.freed = ca;
    if (g.last_ok == ca)
        g.last_ok = NULL;
    if (status)
        *status = XMPC_STAT_OK;
}

void xmpc_coarray_free(xmpc_coarray *ca) { xmpc_coarray_free_stat(ca, NULL); }

void *xmpc_coarray_data(const xmpc_coarray *ca)
{
    xmpc_check_handle(ca, "xmpc_coarray_data");
    return ca->data;
}

void xmpc_coarray_set_codims(xmpc_coarray *ca, int ncodims, const int *codims)
{
    xmpc_check_handle(ca, "xmpc_coarray_set_codims");
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
    /* a:[*], the common case: the index is the image (no division per access) */
    if (ca->ncodims == 1 && ca->codims[0] == 0 && idx[0] >= 1 && idx[0] <= g.n)
        return idx[0];
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

/* A section walked element by element in its own (row-major) order with signed byte
 * strides: what negative steps need, on either side. */
typedef struct {
    int ndims;
    long len[XMPC_MAX_DIMS];
    ptrdiff_t stride[XMPC_MAX_DIMS];
    char *start; /* the first element in section order */
} walker;

/* A section after check_section: all of its arithmetic is known not to overflow. */
typedef struct {
    size_t count;              /* elements */
    ptrdiff_t stride[XMPC_MAX_DIMS]; /* signed byte distance between consecutive indices */
    size_t first;              /* byte offset of the first element (base) */
} checked;

/* rs: the coarray section, named in every message; s: the side being checked. */
static _Noreturn void section_error(const xmpc_coarray *ca, int image, const xmpc_section *rs,
                                    const xmpc_section *s, const char *fn, const char *why)
{
    char sec[256] = "";
    if (s != rs)
        format_section(sec, sizeof sec, s);
    fail(ca, image, rs, "%s: %s section%s%s %s", fn, s == rs ? "coarray" : "local",
         sec[0] ? " " : "", sec, why);
}

/* Every index, count and byte offset of the section, overflow-checked, before any
 * transfer: a wrapped product must never pass a bounds check. */
static checked check_section(const xmpc_coarray *ca, int image, const xmpc_section *rs,
                             const xmpc_section *s, size_t esize, const char *fn)
{
    checked c = {.count = 1};
    char why[256];
    int empty = 0;
    for (int d = 0; d < s->ndims; ++d) {
        if (s->length[d] < 0) {
            snprintf(why, sizeof why, "has negative length %ld in dimension %d", s->length[d], d);
            section_error(ca, image, rs, s, fn, why);
        }
        if (s->step[d] == 0) {
            snprintf(why, sizeof why, "has stride 0 in dimension %d (a section's stride must "
                     "not be zero)", d);
            section_error(ca, image, rs, s, fn, why);
        }
        empty |= s->length[d] == 0;
    }
    if (empty) /* no element is accessed: the bases do not matter (Fortran) */
        return (checked){.count = 0};
    size_t first = 0;
    for (int d = 0; d < s->ndims; ++d) {
        long last, span, ext = s->extent ? s->extent[d] : -1;
        int ovf = __builtin_mul_overflow(s->length[d] - 1, s->step[d], &span) ||
                  __builtin_add_overflow(s->base[d], span, &last);
        long lo = s->step[d] > 0 ? s->base[d] : last, hi = s->step[d] > 0 ? last : s->base[d];
        if (ovf || lo < 0 || (s->extent && hi >= ext)) {
            if (ovf)
                snprintf(why, sizeof why, "out of bounds in dimension %d (extent %ld): the last "
                         "index base+(length-1)*step overflows", d, ext);
            else
                snprintf(why, sizeof why, "out of bounds in dimension %d (extent %ld): indices "
                         "%ld..%ld", d, ext, lo, hi);
            section_error(ca, image, rs, s, fn, why);
        }
        /* Byte offsets of base and of hi, and the signed stride: within the array when its
         * extent is known; checked here for Omni's local side, which gives only distances. */
        size_t boff, hoff, sbytes;
        long astep = s->step[d] < 0 ? -s->step[d] : s->step[d];
        if (__builtin_mul_overflow((size_t)s->base[d], s->dist[d], &boff) ||
            __builtin_mul_overflow(boff, esize, &boff) ||
            __builtin_mul_overflow((size_t)hi, s->dist[d], &hoff) ||
            __builtin_mul_overflow(hoff, esize, &hoff) || hoff > PTRDIFF_MAX ||
            __builtin_add_overflow(first, boff, &first) || first > PTRDIFF_MAX ||
            __builtin_mul_overflow((size_t)astep, s->dist[d], &sbytes) ||
            __builtin_mul_overflow(sbytes, esize, &sbytes) || sbytes > PTRDIFF_MAX) {
            snprintf(why, sizeof why, "addresses overflow in dimension %d (element distance %zu)",
                     d, s->dist[d]);
            section_error(ca, image, rs, s, fn, why);
        }
        c.stride[d] = s->length[d] == 1 ? 0
                    : s->step[d] < 0 ? -(ptrdiff_t)sbytes : (ptrdiff_t)sbytes;
        if (__builtin_mul_overflow(c.count, (size_t)s->length[d], &c.count)) {
            snprintf(why, sizeof why, "has more elements than fit in a size_t");
            section_error(ca, image, rs, s, fn, why);
        }
    }
    size_t bytes;
    if (__builtin_mul_overflow(c.count, esize, &bytes) || bytes > PTRDIFF_MAX) {
        snprintf(why, sizeof why, "has %zu elements of %zu bytes: too large", c.count, esize);
        section_error(ca, image, rs, s, fn, why);
    }
    c.first = first;
    return c;
}

static walker walker_of(const xmpc_section *s, const checked *c, char *base)
{
    walker w = {.ndims = s->ndims, .start = base + c->first};
    for (int d = 0; d < s->ndims; ++d) {
        w.len[d] = s->length[d];
        w.stride[d] = c->stride[d];
    }
    return w;
}

/* Copies the walker's elements to (pack) or from (unpack) the contiguous buf, in the
 * section's order; runs of consecutive elements go in one memcpy. */
static void walk_copy(const walker *w, size_t esize, char *buf, int pack)
{
    int inner = w->ndims - 1;
    size_t run = esize;
    if (w->stride[inner] == (ptrdiff_t)esize || w->len[inner] == 1) {
        run = esize * (size_t)w->len[inner];
        --inner; /* the innermost dimension is one run */
    }
    long idx[XMPC_MAX_DIMS] = {0};
    for (;;) {
        char *p = w->start;
        for (int d = 0; d <= inner; ++d)
            p += idx[d] * w->stride[d];
        if (pack)
            memcpy(buf, p, run);
        else
            memcpy(p, buf, run);
        buf += run;
        int d = inner;
        while (d >= 0 && ++idx[d] == w->len[d])
            idx[d--] = 0;
        if (d < 0)
            return;
    }
}

/* The coarray section with negative steps turned around (Fortran's a(9:5:-1) is
 * a(5:9) read backwards): backends only see ascending strides.  *flip: a walker over
 * a dense buffer of the section's shape (section order) that visits it in the order
 * of the turned-around section, starting *flip_start bytes into the buffer;
 * flip->ndims == 0 when nothing was turned. */
static xmpc_section ascending(const xmpc_section *s, size_t esize, walker *flip,
                              ptrdiff_t *flip_start)
{
    xmpc_section a = *s;
    int turned = 0;
    ptrdiff_t dstride = (ptrdiff_t)esize;
    *flip = (walker){.ndims = s->ndims};
    *flip_start = 0; /* flip->start is this offset into the dense buffer */
    for (int d = s->ndims - 1; d >= 0; --d) {
        flip->len[d] = s->length[d];
        flip->stride[d] = dstride;
        if (s->step[d] < 0 && s->length[d] > 1) {
            a.base[d] = s->base[d] + (s->length[d] - 1) * s->step[d]; /* checked */
            a.step[d] = -s->step[d];
            *flip_start += (s->length[d] - 1) * dstride;
            flip->stride[d] = -dstride;
            turned = 1;
        }
        dstride *= s->length[d];
    }
    if (!turned)
        flip->ndims = 0;
    return a;
}

static size_t section_offset(const xmpc_section *s, size_t esize)
{
    size_t off = 0;
    for (int d = 0; d < s->ndims; ++d)
        off += (size_t)s->base[d] * s->dist[d]; /* checked by check_section */
    return off * esize;
}

/* Dimensions of length 1 vanish; a dimension whose stride continues the block (or the
 * level below) merges into it, so `a[0:4][0:8]` of an [4][8] array is one block.
 * Ascending sections only. */
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

static int is_ascending(const xmpc_section *s)
{
    for (int d = 0; d < s->ndims; ++d)
        if (s->step[d] < 0 && s->length[d] > 1)
            return 0;
    return 1;
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
        dist *= (size_t)dims[d]; /* the coarray's: checked at allocation; local: below */
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

/* A put (or accumulate) to this image completes before it returns, so the image's own
 * loads see it (Fortran's program order; see coarray.h). */
static void complete_if_self(int image)
{
    if (image == g.me + 1)
        g.b->sync_memory(g.list);
}

/* l[c:n] op= a[b:n]:[k]: the remote values into a temporary, then local = local op
 * remote.  Kept out of line: its 4 KiB buffer in the fast path's frame made every put
 * pay for a frame of several pages (and, where stack-clash protection is the compiler's
 * default, a probe of each). */
static __attribute__((noinline)) void get_acc_contiguous(xmpc_coarray *ca, int image,
                                                         const xmpc_xfer *x, xmpc_op op,
                                                         size_t n)
{
    char small[4096], *tmp = x->block <= sizeof small ? small : xmpc_xmalloc(x->block);
    xmpc_xfer t = *x;
    t.laddr = tmp;
    g.b->get(ca, image - 1, &t);
    xmpc_apply_op_or_die(ca, image, op, x->laddr, tmp, n);
    if (tmp != small)
        free(tmp);
}

/* The common statement a[b:n]:[k] = l[c:n] (or its get) on another image, for a 1-D
 * coarray and unit steps: the same checks as the general path (image, bounds of both
 * sides, equal counts, offsets that cannot overflow) in a few comparisons, and one
 * contiguous transfer with none of the section machinery.  Anything else, including
 * every error, is left to the general path, which reports it.  lextent: the local
 * array's extent, or NULL when unknown (Omni).  0: not handled. */
int xmpc_rma_contiguous(int code, xmpc_coarray *ca, int image, long rb, long len, char *laddr,
                        long lb, long llen, const long *lextent, xmpc_op op, xmpc_type ltype)
{
    /* get-accumulate too (l[c:n] op= a[b:n]:[k], NPB CG's exchange), with the general
     * path's type and op checks */
    int gacc = code == XMPC_RMA_GET_ACC && ca->type != XMPC_BYTE && ltype == ca->type &&
               op != 0 && strchr("+-*/<>", (int)op);
    if ((code != XMPC_RMA_PUT && code != XMPC_RMA_GET && !gacc) || image < 1 || image > g.n ||
        image == g.me + 1 || !laddr || ca->ndims != 1)
        return 0;
    size_t es = ca->esize, lend;
    /* The coarray's bytes fit PTRDIFF_MAX (checked at allocation); the local side's
     * byte offset is bounded the same way when its extent is unknown. */
    if (len < 1 || llen != len || rb < 0 || lb < 0 || len > ca->dims[0] - rb ||
        (lextent ? len > lextent[0] - lb
                 : __builtin_mul_overflow((size_t)lb + (size_t)len, es, &lend) ||
                       lend > PTRDIFF_MAX))
        return 0;
    /* Only the fields a block without levels has: zeroing the whole struct (7-level
     * arrays) cost more than the rest of this function. */
    xmpc_xfer x;
    x.block = (size_t)len * es;
    x.levels = 0;
    x.roff = (size_t)rb * es;
    x.laddr = laddr + (size_t)lb * es;
    if (code == XMPC_RMA_PUT)
        g.b->put(ca, image - 1, &x);
    else if (code == XMPC_RMA_GET)
        g.b->get(ca, image - 1, &x);
    else
        get_acc_contiguous(ca, image, &x, op, (size_t)len);
    return 1;
}

static int fast_contiguous(int code, xmpc_coarray *ca, int image, const xmpc_section *rs,
                           char *laddr, const xmpc_section *ls, xmpc_op op, xmpc_type ltype)
{
    if (rs->ndims != 1 || ls->ndims != 1 || rs->step[0] != 1 || ls->step[0] != 1 ||
        rs->dist[0] != 1 || ls->dist[0] != 1)
        return 0;
    return xmpc_rma_contiguous(code, ca, image, rs->base[0], rs->length[0], laddr, ls->base[0],
                               ls->length[0], ls->extent, op, ltype);
}

static void rma_general(int code, xmpc_coarray *ca, int image, const xmpc_section *rs,
                        char *laddr, const xmpc_section *ls, xmpc_op op, xmpc_type ltype,
                        const char *fn);

void xmpc_rma(int code, xmpc_coarray *ca, int image, const xmpc_section *rs, char *laddr,
              const xmpc_section *ls, xmpc_op op, xmpc_type ltype, const char *fn)
{
    xmpc_check_handle(ca, fn);
    xmpc_rma_live(code, ca, image, rs, laddr, ls, op, ltype, fn);
}

void xmpc_rma_live(int code, xmpc_coarray *ca, int image, const xmpc_section *rs, char *laddr,
                   const xmpc_section *ls, xmpc_op op, xmpc_type ltype, const char *fn)
{
    if (!fast_contiguous(code, ca, image, rs, laddr, ls, op, ltype))
        rma_general(code, ca, image, rs, laddr, ls, op, ltype, fn);
}

/* Every access: checks, then one xmpc_xfer whose local side is either the caller's
 * memory (when its strides can follow the remote shape) or a contiguous temporary.
 * Out of line, so its temporaries never enlarge the fast path's frame. */
static __attribute__((noinline)) void rma_general(int code, xmpc_coarray *ca, int image,
                                                  const xmpc_section *rs, char *laddr,
                                                  const xmpc_section *ls, xmpc_op op,
                                                  xmpc_type ltype, const char *fn)
{
    if (image < 1 || image > g.n)
        fail(ca, image, rs, "%s: image %d is outside 1..%d", fn, image, g.n);
    if (rs->ndims != ca->ndims)
        fail(ca, image, rs, "%s: %d subscripts for a %d-dimensional coarray", fn, rs->ndims, ca->ndims);
    if (ls->ndims < 1 || ls->ndims > XMPC_MAX_DIMS)
        fail(ca, image, rs, "%s: local section has %d dimensions (1..%d)", fn, ls->ndims, XMPC_MAX_DIMS);
    if (!laddr)
        fail(ca, image, rs, "%s: NULL local address", fn);
    size_t es = ca->esize;
    checked rc = check_section(ca, image, rs, rs, es, fn);
    checked lc = check_section(ca, image, rs, ls, es, fn);
    int acc = code == XMPC_RMA_GET_ACC || code == XMPC_RMA_PUT_ACC;
    if (acc) {
        if (ca->type == XMPC_BYTE || ltype != ca->type)
            fail(ca, image, rs, "%s: element type mismatch (coarray type %s, local type %s; "
                 "accumulates need int, long, float or double)", fn, xmpc_type_name(ca->type),
                 xmpc_type_name(ltype));
        if (!strchr("+-*/<>", (int)op) || op == 0)
            fail(ca, image, rs, "%s: unknown accumulate op '%c' (+ - * / < >)", fn, (char)op);
    }
    size_t nr = rc.count, nl = lc.count;
    /* Compared before anything else returns: an empty coarray section takes an empty
     * local section (or a broadcast scalar), as any other size does. */
    int bcast = nl == 1 && nr != 1 && code != XMPC_RMA_GET && code != XMPC_RMA_GET_ACC;
    if (nl != nr && !bcast)
        fail(ca, image, rs, "%s: the local section has %zu elements, the coarray section %zu",
             fn, nl, nr);
    if (nr == 0)
        return;

    size_t bytes = nr * es; /* checked */
    walker flip, lw = walker_of(ls, &lc, laddr);
    ptrdiff_t flip_start;
    xmpc_section ra = ascending(rs, es, &flip, &flip_start);
    shape r = make_shape(&ra, es);
    xmpc_xfer x = {.block = r.block, .levels = r.levels, .roff = section_offset(&ra, es),
                   .laddr = lw.start};
    memcpy(x.count, r.count, sizeof x.count);
    memcpy(x.rstride, r.stride, sizeof x.rstride);
    int fast = flip.ndims == 0 && is_ascending(ls);
    int in_place = 0;
    if (fast && !bcast && !acc) {
        /* The local side can be used in place when it has the remote shape or is one
         * block (then it takes the remote counts), except that a transfer from/to this
         * image's own coarray memory goes through a temporary so nothing overlaps. */
        shape l = make_shape(ls, es);
        size_t lspan = l.block;
        for (int i = 0; i < l.levels; ++i)
            lspan += (l.count[i] - 1) * l.stride[i];
        int same = l.block == r.block && l.levels == r.levels &&
                   !memcmp(l.count, r.count, (size_t)r.levels * sizeof(size_t));
        in_place = (same || l.levels == 0) &&
                   !(image == g.me + 1 && overlaps(x.laddr, lspan, ca->data, ca->bytes));
        if (in_place && same)
            memcpy(x.lstride, l.stride, sizeof x.lstride);
        else if (in_place)
            x = xmpc_xfer_contiguous(&x, x.laddr);
    }
    if (in_place) {
        if (code == XMPC_RMA_PUT) {
            g.b->put(ca, image - 1, &x);
            complete_if_self(image);
        } else
            g.b->get(ca, image - 1, &x);
        return;
    }
    /* Temporaries: `sec` holds the elements in section order, `tmp` in the order of
     * the ascending remote transfer (the same buffer unless steps were turned). */
    char *tmp = xmpc_xmalloc(bytes), *sec = flip.ndims ? xmpc_xmalloc(bytes) : tmp;
    flip.start = sec + flip_start;
    xmpc_xfer tx = xmpc_xfer_contiguous(&x, tmp);
    if (code == XMPC_RMA_PUT || code == XMPC_RMA_PUT_ACC) {
        if (bcast)
            for (size_t i = 0; i < nr; ++i)
                memcpy(sec + i * es, lw.start, es);
        else
            walk_copy(&lw, es, sec, 1);
        if (flip.ndims)
            walk_copy(&flip, es, tmp, 1);
        if (code == XMPC_RMA_PUT)
            g.b->put(ca, image - 1, &tx);
        else {
            if (op == XMPC_OP_DIV && is_int_type(ca->type) && has_zero(ca->type, tmp, nr))
                fail(ca, image, rs, "%s: integer division by zero", fn);
            g.b->put_acc(ca, image - 1, &tx, op);
        }
        complete_if_self(image);
    } else {
        g.b->get(ca, image - 1, &tx);
        if (flip.ndims)
            walk_copy(&flip, es, tmp, 0);
        if (code == XMPC_RMA_GET_ACC) {
            char *cur = xmpc_xmalloc(bytes);
            walk_copy(&lw, es, cur, 1);
            xmpc_apply_op_or_die(ca, image, op, cur, sec, nr);
            memcpy(sec, cur, bytes);
            free(cur);
        }
        walk_copy(&lw, es, sec, 0);
    }
    if (sec != tmp)
        free(sec);
    free(tmp);
}

static xmpc_section local_section(const xmpc_coarray *ca, int image, const xmpc_range *remote,
                                  const xmpc_local *l, const char *fn)
{
    xmpc_section rs = section_of(ca->ndims, ca->dims, remote);
    const char *what = !l ? "NULL local section" : !l->addr ? "local section with a NULL address"
                     : !l->dims ? "local section with NULL dims" : !l->r ? "local section with NULL ranges"
                     : NULL;
    if (what)
        fail(ca, image, &rs, "%s: %s", fn, what);
    if (l->ndims < 1 || l->ndims > XMPC_MAX_DIMS)
        fail(ca, image, &rs, "%s: local section has %d dimensions (1..%d)", fn, l->ndims, XMPC_MAX_DIMS);
    size_t elems = 1;
    for (int d = 0; d < l->ndims; ++d)
        if (l->dims[d] < 0 || __builtin_mul_overflow(elems, (size_t)l->dims[d], &elems) ||
            elems > PTRDIFF_MAX / ca->esize)
            fail(ca, image, &rs, "%s: local array extent %ld in dimension %d is not a valid size",
                 fn, l->dims[d], d);
    return section_of(l->ndims, l->dims, l->r);
}

static void rma_native(int code, xmpc_coarray *ca, int image, const xmpc_range *remote,
                       const xmpc_local *local, xmpc_op op, xmpc_type t, const char *fn)
{
    xmpc_check_handle(ca, fn);
    /* a(b:n)[k] = l(c:n) on 1-D arrays with unit steps: straight to the contiguous
     * transfer, without building the two sections below; what it does not take (every
     * error included) goes on to them. */
    const xmpc_local *l = local;
    if (remote && l && l->addr && l->dims && l->r && l->ndims == 1 && ca->ndims == 1 &&
        remote->step == 1 && l->r->step == 1 && l->dims[0] >= 0 &&
        (size_t)l->dims[0] <= PTRDIFF_MAX / ca->esize &&
        xmpc_rma_contiguous(code, ca, image, remote->base, remote->length, l->addr, l->r->base,
                            l->r->length, l->dims, op, t))
        return;
    if (!remote)
        fail(ca, image, NULL, "%s: NULL coarray section", fn);
    xmpc_section rs = section_of(ca->ndims, ca->dims, remote);
    xmpc_section ls = local_section(ca, image, remote, local, fn);
    xmpc_rma_live(code, ca, image, &rs, local->addr, &ls, op, t, fn);
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

/* ---- atomics -------------------------------------------------------------------------- */

static long atomic_op(const char *fn, int what, xmpc_coarray *ca, int image, long index,
                      long compare, long value)
{
    xmpc_check_handle(ca, fn);
    if (image < 1 || image > g.n)
        fail(ca, image, NULL, "%s: image %d is outside 1..%d", fn, image, g.n);
    if (ca->type != XMPC_INT && ca->type != XMPC_LONG)
        fail(ca, image, NULL, "%s: atomics need an int or long coarray, not %s", fn,
             xmpc_type_name(ca->type));
    size_t elems = ca->bytes / ca->esize;
    if (index < 0 || (size_t)index >= elems) {
        if (elems == 0)
            fail(ca, image, NULL, "%s: element index %ld of a zero-size coarray", fn, index);
        fail(ca, image, NULL, "%s: element index %ld is outside 0..%zu", fn, index, elems - 1);
    }
    if (ca->type == XMPC_INT && (what == XMPC_AT_DEFINE || what == XMPC_AT_CAS) &&
        (value < INT_MIN || value > INT_MAX || compare < INT_MIN || compare > INT_MAX))
        fail(ca, image, NULL, "%s: value %ld does not fit the coarray's int elements", fn, value);
    if (!g.b->atomic)
        fail(ca, image, NULL, "%s: coarray atomics are not supported by the %s backend", fn,
             g.b->name);
    long old = 0;
    g.b->atomic(ca, image - 1, (size_t)index * ca->esize, what, compare, value, &old);
    return old;
}

void xmpc_atomic_define(xmpc_coarray *ca, int image, long index, long value)
{
    atomic_op("xmpc_atomic_define", XMPC_AT_DEFINE, ca, image, index, 0, value);
}
long xmpc_atomic_ref(xmpc_coarray *ca, int image, long index)
{
    return atomic_op("xmpc_atomic_ref", XMPC_AT_REF, ca, image, index, 0, 0);
}
long xmpc_atomic_cas(xmpc_coarray *ca, int image, long index, long compare, long value)
{
    return atomic_op("xmpc_atomic_cas", XMPC_AT_CAS, ca, image, index, compare, value);
}
long xmpc_atomic_fetch_add(xmpc_coarray *ca, int image, long index, long value)
{
    return atomic_op("xmpc_atomic_fetch_add", XMPC_AT_ADD, ca, image, index, 0, value);
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

struct chunk_ctx {
    size_t max;
    void (*fn)(void *, const xmpc_xfer *);
    void *ctx;
};
static void chunk_run(void *ctx, size_t roff, char *laddr, size_t n)
{
    struct chunk_ctx *c = ctx;
    for (size_t done = 0; done < n; done += c->max) {
        xmpc_xfer piece = {.block = n - done < c->max ? n - done : c->max, .levels = 0,
                           .roff = roff + done, .laddr = laddr + done};
        c->fn(c->ctx, &piece);
    }
}

/* Blocks too long: every run in pieces.  Otherwise the outermost level that does not
 * fit: its count in pieces when only the count is too large, else one sub-transfer per
 * index of that level (and of the levels above it); the levels below are split by the
 * recursion. */
void xmpc_xfer_split(const xmpc_xfer *x, size_t max_block, size_t max_count, size_t max_stride,
                     void (*fn)(void *, const xmpc_xfer *), void *ctx)
{
    if (x->block > max_block) {
        struct chunk_ctx c = {max_block, fn, ctx};
        xmpc_xfer_runs(x, chunk_run, &c);
        return;
    }
    int bad = -1;
    for (int i = x->levels - 1; i >= 0 && bad < 0; --i)
        if (x->count[i] > max_count || x->rstride[i] > max_stride || x->lstride[i] > max_stride)
            bad = i;
    if (bad < 0) {
        fn(ctx, x);
        return;
    }
    int top = x->levels - 1;
    int by_count = bad == top && x->rstride[top] <= max_stride && x->lstride[top] <= max_stride;
    size_t step = by_count ? max_count : 1;
    for (size_t k = 0; k < x->count[top]; k += step) {
        xmpc_xfer y = *x;
        y.roff += k * x->rstride[top];
        y.laddr += k * x->lstride[top];
        if (by_count)
            y.count[top] = x->count[top] - k < step ? x->count[top] - k : step;
        else
            y.levels = top;
        xmpc_xfer_split(&y, max_block, max_count, max_stride, fn, ctx);
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

/* Integer + - * in unsigned arithmetic: two's-complement wrap-around, what MPI's and
 * ARMCI's accumulates do, and no undefined behaviour in C.  Division is checked
 * whole before anything changes. */
#define APPLY(T, ADD, SUB, MUL, MIN_T)                                                    \
    do {                                                                                  \
        T *d = dst;                                                                       \
        const T *s = src;                                                                 \
        for (size_t i = 0; MIN_T != 0 && op == XMPC_OP_DIV && i < n; ++i)                  \
            if (s[i] == 0 || (s[i] == (T)-1 && d[i] == MIN_T)) {                          \
                *bad = i;                                                                 \
                return s[i] == 0 ? XMPC_ACC_DIV_ZERO : XMPC_ACC_DIV_OVERFLOW;             \
            }                                                                             \
        for (size_t i = 0; i < n; ++i)                                                    \
            switch (op) {                                                                 \
            case XMPC_OP_SUM: d[i] = ADD(d[i], s[i]); break;                              \
            case XMPC_OP_DIFF: d[i] = SUB(d[i], s[i]); break;                             \
            case XMPC_OP_PROD: d[i] = MUL(d[i], s[i]); break;                             \
            case XMPC_OP_DIV: d[i] /= s[i]; break;                                        \
            case XMPC_OP_MIN: d[i] = s[i] < d[i] ? s[i] : d[i]; break;                    \
            case XMPC_OP_MAX: d[i] = s[i] > d[i] ? s[i] : d[i]; break;                    \
            }                                                                             \
    } while (0)
#define I_ADD(a, b) (int)((unsigned)(a) + (unsigned)(b))
#define I_SUB(a, b) (int)((unsigned)(a) - (unsigned)(b))
#define I_MUL(a, b) (int)((unsigned)(a) * (unsigned)(b))
#define L_ADD(a, b) (long)((unsigned long)(a) + (unsigned long)(b))
#define L_SUB(a, b) (long)((unsigned long)(a) - (unsigned long)(b))
#define L_MUL(a, b) (long)((unsigned long)(a) * (unsigned long)(b))
#define F_ADD(a, b) ((a) + (b))
#define F_SUB(a, b) ((a) - (b))
#define F_MUL(a, b) ((a) * (b))

int xmpc_apply_op(xmpc_op op, xmpc_type type, void *dst, const void *src, size_t n, size_t *bad)
{
    switch (type) {
    case XMPC_INT: APPLY(int, I_ADD, I_SUB, I_MUL, INT_MIN); break;
    case XMPC_LONG: APPLY(long, L_ADD, L_SUB, L_MUL, LONG_MIN); break;
    case XMPC_FLOAT: APPLY(float, F_ADD, F_SUB, F_MUL, 0); break;
    case XMPC_DOUBLE: APPLY(double, F_ADD, F_SUB, F_MUL, 0); break;
    default: break;
    }
    return XMPC_ACC_OK;
}

void xmpc_apply_op_or_die(const xmpc_coarray *ca, int image, xmpc_op op, void *dst,
                          const void *src, size_t n)
{
    size_t bad = 0;
    int rc = xmpc_apply_op(op, ca->type, dst, src, n, &bad);
    if (rc == XMPC_ACC_DIV_ZERO)
        xmpc_fatal(ca, image, "integer division by zero (element %zu of the section)", bad);
    if (rc == XMPC_ACC_DIV_OVERFLOW)
        xmpc_fatal(ca, image, "integer division overflows: %s / -1 (element %zu of the section)",
                   ca->type == XMPC_INT ? "INT_MIN" : "LONG_MIN", bad);
}

void xmpc_negate(xmpc_type type, void *dst, const void *src, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        switch (type) {
        case XMPC_INT: ((int *)dst)[i] = (int)(0u - (unsigned)((const int *)src)[i]); break;
        case XMPC_LONG: ((long *)dst)[i] = (long)(0ul - (unsigned long)((const long *)src)[i]); break;
        case XMPC_FLOAT: ((float *)dst)[i] = -((const float *)src)[i]; break;
        case XMPC_DOUBLE: ((double *)dst)[i] = -((const double *)src)[i]; break;
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
    xmpc_apply_op_or_die(ca, rank + 1, op, cur, val, bytes / ca->esize); /* before any put */
    b->put(ca, rank, &cx);
    free(cur);
    free(val);
}

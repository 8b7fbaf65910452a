/* vcuda wire protocol: one table-driven encoder and decoder (see proto.h).
 *
 * The decoder is the server's first line of defence against a hostile client: it
 * bounds every length before using it, compares lengths as "need <= remaining" (no
 * pointer arithmetic that could overflow), keeps nothing but pointers into the input,
 * and reports each rejection with its own status and a reason the server can log. */
#define _POSIX_C_SOURCE 200809L
#include "vcuda/proto.h"

#include "vcuda/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    const char *name, *req, *rep;
} op_info;

#define VCUDA_X_INFO(n, code, rq, rp) [code] = {#n, rq, rp},
static const op_info ops[] = {VCUDA_OPCODES(VCUDA_X_INFO)};
#undef VCUDA_X_INFO
#define NOPS (sizeof ops / sizeof ops[0])

const char *vcuda_opcode_name(unsigned op) { return op < NOPS ? ops[op].name : NULL; }

const char *vcuda_layout(unsigned op, uint32_t flags)
{
    if (op >= NOPS || !ops[op].name) return NULL;
    if (flags & VCUDA_FLAG_ERROR) return VCUDA_ERROR_LAYOUT;
    return (flags & VCUDA_FLAG_REPLY) ? ops[op].rep : ops[op].req;
}

const char *vcuda_status_name(vcuda_status s)
{
    static const char *const names[] = {
        "ok", "short header", "bad magic", "bad version", "bad opcode", "bad flags",
        "oversize payload", "truncated frame", "trailing bytes", "field overrun",
        "extra payload bytes", "bad length", "bad count", "bad size", "bad string",
        "bad value", "no space", "no token", "token file", "token file permissions"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "unknown status";
}

void vcuda_vwhy(char *why, const char *fmt, va_list ap)
{
    if (why)
        vsnprintf(why, VCUDA_WHY_LEN, fmt, ap);
}

int vcuda_fail(char *why, int ret, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vcuda_vwhy(why, fmt, ap);
    va_end(ap);
    return ret;
}

#define fail(why, s, ...) ((vcuda_status)vcuda_fail(why, s, __VA_ARGS__))


/* ---- little-endian primitives ---------------------------------------------------- */

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; ++i, v >>= 8) p[i] = (uint8_t)v;
}

/* Next layout field: its type character, skipping blanks and "(name)". */
static const char *next_field(const char *l, char *type)
{
    while (*l == ' ') ++l;
    if (!*l) return NULL;
    *type = *l++;
    if (*l == '(')
        while (*l && *l++ != ')') {}
    return l;
}

/* Range checks shared by encoder and decoder for one scalar (value as stored in v[]). */
static vcuda_status check_scalar(char t, uint64_t v, unsigned idx, char *why)
{
    int64_t s = (int64_t)v;
    switch (t) {
    case 'd':
        if (s < 0 || s >= VCUDA_MAX_DEVICES)
            return fail(why, VCUDA_E_BAD_VALUE, "field %u: device ordinal %lld outside [0,%d)",
                        idx, (long long)s, VCUDA_MAX_DEVICES);
        break;
    case 'n':
        if (v > VCUDA_MAX_DEVICES)
            return fail(why, VCUDA_E_BAD_VALUE, "field %u: device count %llu > %d", idx,
                        (unsigned long long)v, VCUDA_MAX_DEVICES);
        break;
    case 'e':
        if (s < 1 || s > VCUDA_MAX_CUDA_ERROR)
            return fail(why, VCUDA_E_BAD_VALUE, "field %u: error code %lld outside [1,%d]", idx,
                        (long long)s, VCUDA_MAX_CUDA_ERROR);
        break;
    case 'g':
        if (v < 1 || v > INT32_MAX)
            return fail(why, VCUDA_E_BAD_VALUE, "field %u: dimension %llu outside [1,2^31-1]",
                        idx, (unsigned long long)v);
        break;
    case 'z':
        if (v > VCUDA_MAX_SIZE)
            return fail(why, VCUDA_E_BAD_SIZE, "field %u: size %llu > 2^48", idx,
                        (unsigned long long)v);
        break;
    default:
        break;
    }
    return VCUDA_OK;
}

static int width(char t) { return (t == 'z' || t == 'h') ? 8 : 4; }
static int is_scalar(char t) { return t && strchr("uifdnegzh", t) != NULL; }

static vcuda_status check_sizes(const uint32_t *sizes, uint32_t n, uint32_t *sum, char *why)
{
    uint32_t total = 0;
    if (n > VCUDA_MAX_PARAMS)
        return fail(why, VCUDA_E_BAD_COUNT, "parameter count %u > %d", n, VCUDA_MAX_PARAMS);
    for (uint32_t i = 0; i < n; ++i) {
        if (sizes[i] < 1 || sizes[i] > VCUDA_MAX_PARAM_BYTES - total)
            return fail(why, VCUDA_E_BAD_SIZE,
                        "parameter %u: size %u is 0 or brings the total over %u bytes", i,
                        sizes[i], VCUDA_MAX_PARAM_BYTES);
        total += sizes[i];
    }
    *sum = total;
    return VCUDA_OK;
}

static vcuda_status check_span(char t, const uint8_t *p, uint32_t len, char *why)
{
    uint32_t lo = (t == 'b') ? 0 : 1;
    uint32_t hi = t == 's' ? VCUDA_MAX_STRING : t == 't' ? VCUDA_MAX_TOKEN : VCUDA_MAX_CHUNK;
    if (len < lo || len > hi)
        return fail(why, VCUDA_E_BAD_LENGTH, "%s length %u outside [%u,%u]",
                    t == 's' ? "string" : t == 't' ? "token" : "byte field", len, lo, hi);
    if (t == 's' && p && len && memchr(p, 0, len)) /* p == NULL: length-only check */
        return fail(why, VCUDA_E_BAD_STRING, "string contains a NUL byte");
    return VCUDA_OK;
}

/* ---- decoder --------------------------------------------------------------------- */

vcuda_status vcuda_decode_header(const uint8_t *b, size_t len, vcuda_header *h, char *why)
{
    if (len < VCUDA_HEADER_SIZE)
        return fail(why, VCUDA_E_SHORT_HEADER, "frame of %zu bytes is shorter than the %u-byte header",
                    len, VCUDA_HEADER_SIZE);
    h->magic = (uint32_t)get_le(b, 4);
    h->version = (uint16_t)get_le(b + 4, 2);
    h->opcode = (uint16_t)get_le(b + 6, 2);
    h->flags = (uint32_t)get_le(b + 8, 4);
    h->request_id = get_le(b + 12, 8);
    h->payload_len = (uint32_t)get_le(b + 20, 4);
    if (h->magic != VCUDA_MAGIC)
        return fail(why, VCUDA_E_BAD_MAGIC, "magic 0x%08x is not a vcuda frame", h->magic);
    if (h->version != VCUDA_PROTO_VERSION)
        return fail(why, VCUDA_E_BAD_VERSION, "protocol version %u, this side speaks %u",
                    h->version, VCUDA_PROTO_VERSION);
    if (!vcuda_opcode_name(h->opcode))
        return fail(why, VCUDA_E_BAD_OPCODE, "unknown opcode %u", h->opcode);
    if ((h->flags & ~(uint32_t)VCUDA_FLAG_KNOWN) ||
        ((h->flags & VCUDA_FLAG_ERROR) && !(h->flags & VCUDA_FLAG_REPLY)))
        return fail(why, VCUDA_E_BAD_FLAGS, "flags 0x%x: unknown bits or error without reply",
                    h->flags);
    if (h->payload_len > VCUDA_MAX_PAYLOAD)
        return fail(why, VCUDA_E_OVERSIZE, "payload length %u > limit %u", h->payload_len,
                    VCUDA_MAX_PAYLOAD);
    return VCUDA_OK;
}

vcuda_status vcuda_decode_payload(const vcuda_header *h, const uint8_t *p, size_t len,
                                  vcuda_msg *m, char *why)
{
    const char *l = vcuda_layout(h->opcode, h->flags);
    size_t at = 0;
    unsigned idx = 0;
    char t;
    vcuda_status s;
    if (!l) return fail(why, VCUDA_E_BAD_OPCODE, "unknown opcode %u", h->opcode);
    if (len != h->payload_len)
        return fail(why, len < h->payload_len ? VCUDA_E_TRUNCATED : VCUDA_E_TRAILING,
                    "payload of %zu bytes, header declares %u", len, h->payload_len);
    memset(m, 0, offsetof(vcuda_msg, sizes)); /* sizes[] is only valid up to nsizes */
    m->hdr = *h;
    for (; (l = next_field(l, &t)); ++idx) {
#define NEED(n, what)                                                                      \
    if ((uint64_t)(n) > len - at)                                                          \
        return fail(why, VCUDA_E_FIELD_OVERRUN,                                            \
                    "%s %s: field %u needs %llu bytes, %zu left", vcuda_opcode_name(h->opcode), \
                    what, idx, (unsigned long long)(n), len - at)
        if (is_scalar(t)) {
            int w = width(t);
            NEED(w, "scalar");
            uint64_t v = get_le(p + at, w);
            if (t == 'i' || t == 'd' || t == 'e') v = (uint64_t)(int64_t)(int32_t)v;
            if ((s = check_scalar(t, v, idx, why))) return s;
            m->v[m->nv++] = v;
            at += w;
        } else if (t == 'H') {
            NEED(VCUDA_HASH_SIZE, "hash");
            memcpy(m->hash, p + at, VCUDA_HASH_SIZE);
            at += VCUDA_HASH_SIZE;
        } else if (t == 'a' || t == 'p') {
            uint32_t sum = 0;
            NEED(4, "parameter count");
            m->nsizes = (uint32_t)get_le(p + at, 4);
            at += 4;
            /* count is bounded before it sizes a read or indexes sizes[] */
            if (m->nsizes > VCUDA_MAX_PARAMS)
                return fail(why, VCUDA_E_BAD_COUNT, "parameter count %u > %d", m->nsizes,
                            VCUDA_MAX_PARAMS);
            NEED(4ull * m->nsizes, "parameter sizes");
            for (uint32_t i = 0; i < m->nsizes; ++i) m->sizes[i] = (uint32_t)get_le(p + at + 4 * i, 4);
            at += 4ull * m->nsizes;
            if ((s = check_sizes(m->sizes, m->nsizes, &sum, why))) return s;
            if (t == 'p') {
                NEED(sum, "parameter bytes");
                m->blob = p + at;
                m->blob_len = sum;
                at += sum;
            }
        } else { /* s, t, b: u32 length + bytes */
            NEED(4, "length");
            uint32_t n = (uint32_t)get_le(p + at, 4);
            at += 4;
            if ((s = check_span(t, NULL, n, why))) return s; /* bound before the read */
            NEED(n, "bytes");
            if ((s = check_span(t, p + at, n, why))) return s;
            if (t == 's') m->str = p + at, m->str_len = n;
            else m->blob = p + at, m->blob_len = n;
            at += n;
        }
#undef NEED
    }
    if (at != len)
        return fail(why, VCUDA_E_EXTRA_BYTES, "%s: %zu bytes after the last field",
                    vcuda_opcode_name(h->opcode), len - at);
    return VCUDA_OK;
}

vcuda_status vcuda_decode(const uint8_t *buf, size_t len, vcuda_msg *m, char *why)
{
    vcuda_header h;
    vcuda_status s = vcuda_decode_header(buf, len, &h, why);
    if (s) return s;
    size_t body = len - VCUDA_HEADER_SIZE;
    if (body != h.payload_len)
        return fail(why, body < h.payload_len ? VCUDA_E_TRUNCATED : VCUDA_E_TRAILING,
                    "frame carries %zu payload bytes, header declares %u", body, h.payload_len);
    return vcuda_decode_payload(&h, buf + VCUDA_HEADER_SIZE, body, m, why);
}

/* ---- encoder --------------------------------------------------------------------- */

/* Two passes over the layout: the first (out == NULL) validates and sizes, the second
 * writes, so nothing is written for a message that would not decode. */
static vcuda_status encode_fields(const vcuda_msg *m, const char *l, uint8_t *out,
                                  size_t *size, int omit_tail_blob, char *why)
{
    size_t at = 0;
    unsigned idx = 0, vi = 0;
    char t;
    vcuda_status s;
    for (; (l = next_field(l, &t)); ++idx) {
        if (is_scalar(t)) {
            if (vi >= m->nv)
                return fail(why, VCUDA_E_BAD_VALUE, "field %u: only %u scalars given", idx, m->nv);
            uint64_t v = m->v[vi++];
            int sgn = t == 'i' || t == 'd' || t == 'e';
            /* refuse values the 32-bit wire field would silently truncate */
            if (width(t) == 4 && (sgn ? (int64_t)v != (int32_t)v : v > UINT32_MAX))
                return fail(why, VCUDA_E_BAD_VALUE, "field %u: %lld does not fit 32 bits", idx,
                            (long long)v);
            if ((s = check_scalar(t, v, idx, why))) return s;
            if (out) put_le(out + at, v, width(t));
            at += width(t);
        } else if (t == 'H') {
            if (out) memcpy(out + at, m->hash, VCUDA_HASH_SIZE);
            at += VCUDA_HASH_SIZE;
        } else if (t == 'a' || t == 'p') {
            uint32_t sum = 0;
            if ((s = check_sizes(m->sizes, m->nsizes, &sum, why))) return s;
            if (t == 'p' && (m->blob_len != sum || (sum && !m->blob)))
                return fail(why, VCUDA_E_BAD_SIZE, "parameter bytes %u != sum of sizes %u",
                            m->blob_len, sum);
            if (out) {
                put_le(out + at, m->nsizes, 4);
                for (uint32_t i = 0; i < m->nsizes; ++i) put_le(out + at + 4 + 4 * i, m->sizes[i], 4);
                if (t == 'p' && sum) memcpy(out + at + 4 + 4 * m->nsizes, m->blob, sum);
            }
            at += 4 + 4 * (size_t)m->nsizes + (t == 'p' ? sum : 0);
        } else {
            const uint8_t *p = t == 's' ? m->str : m->blob;
            uint32_t n = t == 's' ? m->str_len : m->blob_len;
            if ((s = check_span(t, p, n, why))) return s;
            if (n && !p) return fail(why, VCUDA_E_BAD_LENGTH, "field %u: %u bytes from NULL", idx, n);
            if (out) {
                put_le(out + at, n, 4);
                /* the tail blob of a split encoding is sent from the caller's memory */
                if (n && !(omit_tail_blob && t == 'b' && !next_field(l, &t))) memcpy(out + at + 4, p, n);
            }
            at += 4 + (size_t)n;
        }
    }
    if (vi != m->nv)
        return fail(why, VCUDA_E_BAD_VALUE, "%u scalars given, layout has %u", m->nv, vi);
    *size = at;
    return VCUDA_OK;
}

/* Whether a layout ends in a bytes field (its bytes are then the frame's last). */
static int ends_in_bytes(const char *l)
{
    char t = 0, u;
    while ((l = next_field(l, &u))) t = u;
    return t == 'b';
}

int vcuda_layout_is_bytes_only(const char *l)
{
    char t;
    return l && (l = next_field(l, &t)) && t == 'b' && !next_field(l, &t);
}

static vcuda_status encode(const vcuda_msg *m, uint8_t *buf, size_t cap, size_t *out_len,
                           size_t *head_len, char *why)
{
    const vcuda_header *h = &m->hdr;
    const char *l = vcuda_layout(h->opcode, h->flags);
    size_t body = 0;
    vcuda_status s;
    *out_len = 0;
    if (!l) return fail(why, VCUDA_E_BAD_OPCODE, "unknown opcode %u", h->opcode);
    if ((h->flags & ~(uint32_t)VCUDA_FLAG_KNOWN) ||
        ((h->flags & VCUDA_FLAG_ERROR) && !(h->flags & VCUDA_FLAG_REPLY)))
        return fail(why, VCUDA_E_BAD_FLAGS, "flags 0x%x: unknown bits or error without reply",
                    h->flags);
    if ((s = encode_fields(m, l, NULL, &body, 0, why))) return s;
    if (body > VCUDA_MAX_PAYLOAD)
        return fail(why, VCUDA_E_OVERSIZE, "payload of %zu bytes > limit %u", body,
                    VCUDA_MAX_PAYLOAD);
    *out_len = VCUDA_HEADER_SIZE + body;
    int split = head_len && ends_in_bytes(l);
    size_t need = *out_len - (split ? m->blob_len : 0);
    if (head_len) *head_len = need;
    if (cap < need)
        return fail(why, VCUDA_E_NO_SPACE, "frame needs %zu bytes, buffer has %zu", need, cap);
    put_le(buf, VCUDA_MAGIC, 4);
    put_le(buf + 4, VCUDA_PROTO_VERSION, 2);
    put_le(buf + 6, h->opcode, 2);
    put_le(buf + 8, h->flags, 4);
    put_le(buf + 12, h->request_id, 8);
    put_le(buf + 20, body, 4);
    return encode_fields(m, l, buf + VCUDA_HEADER_SIZE, &body, split, why);
}

vcuda_status vcuda_encode(const vcuda_msg *m, uint8_t *buf, size_t cap, size_t *out_len,
                          char *why)
{
    return encode(m, buf, cap, out_len, NULL, why);
}

vcuda_status vcuda_encode_split(const vcuda_msg *m, uint8_t *buf, size_t cap, size_t *out_len,
                                size_t *head_len, char *why)
{
    return encode(m, buf, cap, out_len, head_len, why);
}

uint64_t vcuda_chunk_count(uint64_t size)
{
    return size == 0 ? 1 : (size + VCUDA_MAX_CHUNK - 1) / VCUDA_MAX_CHUNK;
}

/* ---- graphs (see proto.h) ------------------------------------------------------------ */

uint32_t vcuda_graph_dep(const vcuda_graph_node *n, uint32_t k)
{
    return n->deps ? n->deps[k] : (uint32_t)get_le(n->deps_le + 4ull * k, 4);
}

/* One walk serves both directions, so the encoder cannot write what the decoder would
 * refuse: reading (r) fills the node from the bytes, writing (w) puts the node's fields
 * there, neither (sizing) only moves on; every value is checked after either. */
typedef struct {
    uint8_t *w;
    const uint8_t *r;
    size_t len, at;
} graph_cursor;

static vcuda_status graph_field(graph_cursor *c, uint64_t *v, int w, uint32_t node, char *why)
{
    if ((size_t)w > c->len - c->at)
        return fail(why, VCUDA_E_FIELD_OVERRUN, "graph node %u: a field runs past the end of the graph", node);
    if (w == 4 && *v > UINT32_MAX)
        return fail(why, VCUDA_E_BAD_VALUE, "graph node %u: %llu does not fit 32 bits", node, (unsigned long long)*v);
    if (c->w) put_le(c->w + c->at, *v, w);
    else if (c->r) *v = get_le(c->r + c->at, w);
    c->at += (size_t)w;
    return VCUDA_OK;
}

static vcuda_status graph_node_walk(graph_cursor *c, vcuda_graph_node *x, uint32_t i, int twin, uint32_t *param_total,
                                    char *why)
{
    vcuda_status s;
    uint64_t v;
#define FIELD(lvalue, width, bad, ...)                                                     \
    do {                                                                                   \
        v = (lvalue);                                                                      \
        if ((s = graph_field(c, &v, width, i, why))) return s;                             \
        (lvalue) = (__typeof__(lvalue))v;                                                  \
        if (bad) return fail(why, VCUDA_E_BAD_VALUE, __VA_ARGS__);                         \
    } while (0)
    FIELD(x->kind, 4, x->kind >= (twin ? VCUDA_GNODE_KINDS : VCUDA_GNODE_COND),
          "graph node %u: kind %u unknown%s", i, x->kind, twin || x->kind >= VCUDA_GNODE_KINDS ? "" : " outside a twin");
    FIELD(x->ndeps, 4, x->ndeps > i, "graph node %u: %u dependencies, %u nodes before it", i, x->ndeps, i);
    if (c->r) x->deps = NULL, x->deps_le = c->r + c->at;
    for (uint32_t k = 0, prev = 0; k < x->ndeps; ++k) {
        uint32_t d = c->r ? 0 : vcuda_graph_dep(x, k);
        FIELD(d, 4, d >= i || (k && d <= prev),
              "graph node %u: dependency %u is not an earlier node in increasing order", i, d);
        prev = d;
    }
    switch (x->kind) {
    case VCUDA_GNODE_KERNEL:
        FIELD(x->function, 8, 0, "graph node %u", i);
        for (int d = 0; d < 6; ++d)
            FIELD(x->dim[d], 4, x->dim[d] < 1 || x->dim[d] > INT32_MAX, "graph node %u: dimension %u outside [1,2^31-1]",
                  i, x->dim[d]);
        FIELD(x->shmem, 4, 0, "graph node %u", i);
        FIELD(x->params_len, 4, x->params_len > VCUDA_MAX_PARAM_BYTES ||
                                    x->params_len > VCUDA_MAX_GRAPH_PARAM_BYTES - *param_total,
              "graph node %u: %u argument bytes over the kernel's or the graph's limit", i, x->params_len);
        *param_total += x->params_len;
        if (x->params_len > c->len - c->at)
            return fail(why, VCUDA_E_FIELD_OVERRUN, "graph node %u: arguments run past the end of the graph", i);
        if (c->w && x->params_len && !x->params)
            return fail(why, VCUDA_E_BAD_LENGTH, "graph node %u: %u argument bytes from NULL", i, x->params_len);
        if (c->w && x->params_len) memcpy(c->w + c->at, x->params, x->params_len);
        else if (c->r) x->params = c->r + c->at;
        c->at += x->params_len;
        break;
    case VCUDA_GNODE_COPY:
        FIELD(x->dst, 8, 0, "graph node %u", i);
        FIELD(x->src, 8, 0, "graph node %u", i);
        FIELD(x->size, 8, x->size > VCUDA_MAX_SIZE, "graph node %u: copy of %llu bytes", i, (unsigned long long)x->size);
        break;
    case VCUDA_GNODE_SET:
        FIELD(x->dst, 8, 0, "graph node %u", i);
        FIELD(x->pitch, 8, x->pitch > VCUDA_MAX_SIZE, "graph node %u: pitch out of range", i);
        FIELD(x->value, 4, x->value > 255, "graph node %u: set value %u is not a byte", i, x->value);
        FIELD(x->width, 8, x->width > VCUDA_MAX_SIZE, "graph node %u: width out of range", i);
        FIELD(x->height, 8, x->height > VCUDA_MAX_SIZE, "graph node %u: height out of range", i);
        break;
    case VCUDA_GNODE_COND:
        FIELD(x->cond, 8, 0, "graph node %u", i);
        FIELD(x->cond_type, 4, x->cond_type > VCUDA_COND_SWITCH, "graph node %u: conditional type %u unknown", i,
              x->cond_type);
        FIELD(x->cond_size, 4,
              x->cond_size < 1 || x->cond_size > (x->cond_type == VCUDA_COND_IF ? 2u : x->cond_type == VCUDA_COND_WHILE ? 1u
                                                                                  : VCUDA_MAX_COND_BODIES),
              "graph node %u: %u bodies for conditional type %u", i, x->cond_size, x->cond_type);
        break;
    case VCUDA_GNODE_ALLOC:
        FIELD(x->size, 8, x->size < 1 || x->size > VCUDA_MAX_SIZE, "graph node %u: allocation of %llu bytes", i,
              (unsigned long long)x->size);
        break;
    case VCUDA_GNODE_FREE: FIELD(x->dst, 8, 0, "graph node %u", i); break;
    default: break;
    }
#undef FIELD
    return VCUDA_OK;
}

/* first: the index of the first node (0 but in a twin's node, which may be of any kind) */
static vcuda_status graph_walk(graph_cursor *c, const vcuda_graph_node *in, vcuda_graph_node *out, uint32_t first,
                               int twin, uint32_t count, char *why)
{
    uint32_t param_total = 0;
    vcuda_status s;
    if (count < 1 || count > VCUDA_MAX_GRAPH_NODES || first > VCUDA_MAX_GRAPH_NODES - count)
        return fail(why, VCUDA_E_BAD_COUNT, "graph of %u nodes from %u outside [1,%u]", count, first,
                    VCUDA_MAX_GRAPH_NODES);
    for (uint32_t i = 0; i < count; ++i) {
        vcuda_graph_node x;
        if (in) x = in[i];
        else memset(&x, 0, sizeof x);
        if ((s = graph_node_walk(c, &x, first + i, twin, &param_total, why))) return s;
        if (out) out[i] = x;
    }
    if (c->r && c->at != c->len)
        return fail(why, VCUDA_E_EXTRA_BYTES, "%zu bytes after the graph's last node", c->len - c->at);
    return VCUDA_OK;
}

static vcuda_status graph_decode(const uint8_t *p, size_t len, uint32_t first, int twin, uint32_t count,
                                 vcuda_graph_node *out, char *why)
{
    graph_cursor c = {NULL, p, len, 0};
    return graph_walk(&c, NULL, out, first, twin, count, why);
}

static vcuda_status graph_encode(const vcuda_graph_node *n, uint32_t first, int twin, uint32_t count, uint8_t *buf,
                                 size_t cap, size_t *len, char *why)
{
    graph_cursor c = {NULL, NULL, SIZE_MAX, 0};
    vcuda_status s = graph_walk(&c, n, NULL, first, twin, count, why);
    *len = c.at;
    if (s || !buf) return s;
    if (cap < c.at) return fail(why, VCUDA_E_NO_SPACE, "graph needs %zu bytes, buffer has %zu", c.at, cap);
    c = (graph_cursor){buf, NULL, cap, 0};
    return graph_walk(&c, n, NULL, first, twin, count, why);
}

vcuda_status vcuda_graph_decode(const uint8_t *p, size_t len, uint32_t count, vcuda_graph_node *out, char *why)
{
    return graph_decode(p, len, 0, 0, count, out, why);
}

vcuda_status vcuda_graph_encode(const vcuda_graph_node *n, uint32_t count, uint8_t *buf, size_t cap, size_t *len,
                                char *why)
{
    return graph_encode(n, 0, 0, count, buf, cap, len, why);
}

vcuda_status vcuda_graph_decode_from(const uint8_t *p, size_t len, uint32_t first, uint32_t count,
                                     vcuda_graph_node *out, char *why)
{
    return graph_decode(p, len, first, 1, count, out, why);
}

vcuda_status vcuda_graph_encode_from(const vcuda_graph_node *n, uint32_t first, uint32_t count, uint8_t *buf,
                                     size_t cap, size_t *len, char *why)
{
    return graph_encode(n, first, 1, count, buf, cap, len, why);
}

/* ---- authentication -------------------------------------------------------------- */

/* ---- array copies and texture descriptors (proto.h, "arrays") -------------------- */

unsigned vcuda_format_bytes(uint64_t f)
{
    switch (f) {
    case 0x01: case 0x08: return 1;           /* UNSIGNED_INT8, SIGNED_INT8 */
    case 0x02: case 0x09: case 0x10: return 2; /* UNSIGNED_INT16, SIGNED_INT16, HALF */
    case 0x03: case 0x0a: case 0x20: return 4; /* UNSIGNED_INT32, SIGNED_INT32, FLOAT */
    default: return 0;
    }
}

#define U32 0xffffffffull
#define SZ VCUDA_MAX_SIZE
#define ANY UINT64_MAX
typedef struct {
    uint64_t lo, hi;
} word_range;
static const word_range copy_ranges[VCUDA_COPY_WORDS] = {
    {2, 3}, {0, ANY}, {0, SZ}, {0, SZ}, {0, SZ}, {0, SZ}, {0, SZ}, /* source */
    {2, 3}, {0, ANY}, {0, SZ}, {0, SZ}, {0, SZ}, {0, SZ}, {0, SZ}, /* destination */
    {0, SZ}, {0, SZ}, {0, SZ}};
static const word_range tex_ranges[VCUDA_TEX_WORDS] = {
    {0, 3}, {0, ANY}, {1, 0x20}, {1, 4}, {0, SZ}, {0, SZ}, {0, SZ}, /* resource */
    {0, 3}, {0, 3}, {0, 3}, {0, 1}, {0, 0x73}, {0, 16}, {0, 1},      /* address, filter, flags, anisotropy */
    {0, U32}, {0, U32}, {0, U32}, {0, U32}, {0, U32}, {0, U32}, {0, U32}, /* f32 bits: mipmap bias/clamps, border */
    {0, 1}, {0, 0x22}, {0, SZ}, {0, SZ}, {0, SZ}, {0, U32}, {0, U32}, {0, U32}, {0, U32}}; /* view */

static vcuda_status desc_check(vcuda_desc_kind kind, const uint64_t *w, char *why)
{
    const word_range *r = kind == VCUDA_DESC_COPY ? copy_ranges : tex_ranges;
    unsigned n = kind == VCUDA_DESC_COPY ? VCUDA_COPY_WORDS : VCUDA_TEX_WORDS;
    for (unsigned i = 0; i < n; ++i)
        if (w[i] < r[i].lo || w[i] > r[i].hi)
            return fail(why, VCUDA_E_BAD_VALUE, "%s descriptor word %u: %llu outside [%llu, %llu]",
                        kind == VCUDA_DESC_COPY ? "copy" : "texture", i, (unsigned long long)w[i],
                        (unsigned long long)r[i].lo, (unsigned long long)r[i].hi);
    if (kind == VCUDA_DESC_COPY) return VCUDA_OK;
    if (w[VCUDA_T_RES_TYPE] == 1) return fail(why, VCUDA_E_BAD_VALUE, "texture descriptor: mipmapped arrays are not remoted");
    if (!vcuda_format_bytes(w[VCUDA_T_FORMAT]) || w[VCUDA_T_CHANNELS] == 3)
        return fail(why, VCUDA_E_BAD_VALUE, "texture descriptor: format 0x%llx x %llu channels",
                    (unsigned long long)w[VCUDA_T_FORMAT], (unsigned long long)w[VCUDA_T_CHANNELS]);
    if (w[VCUDA_T_FLAGS] & ~0x73ull) /* READ_AS_INTEGER, NORMALIZED_COORDINATES, SRGB, no trilinear, seamless cubemap */
        return fail(why, VCUDA_E_BAD_VALUE, "texture descriptor: flags 0x%llx", (unsigned long long)w[VCUDA_T_FLAGS]);
    return VCUDA_OK;
}

vcuda_status vcuda_desc_decode(vcuda_desc_kind kind, const uint8_t *p, size_t len, uint64_t *w, char *why)
{
    size_t n = kind == VCUDA_DESC_COPY ? VCUDA_COPY_WORDS : VCUDA_TEX_WORDS;
    if (len != 8 * n) return fail(why, VCUDA_E_BAD_LENGTH, "descriptor of %zu bytes, want %zu", len, 8 * n);
    for (size_t i = 0; i < n; ++i) w[i] = get_le(p + 8 * i, 8);
    return desc_check(kind, w, why);
}

vcuda_status vcuda_desc_encode(vcuda_desc_kind kind, const uint64_t *w, uint8_t *buf, size_t cap, size_t *len, char *why)
{
    size_t n = kind == VCUDA_DESC_COPY ? VCUDA_COPY_WORDS : VCUDA_TEX_WORDS;
    vcuda_status s = desc_check(kind, w, why);
    *len = 8 * n;
    if (s) return s;
    if (cap < 8 * n) return fail(why, VCUDA_E_NO_SPACE, "descriptor needs %zu bytes", 8 * n);
    for (size_t i = 0; i < n; ++i) put_le(buf + 8 * i, w[i], 8);
    return VCUDA_OK;
}
#undef U32
#undef SZ
#undef ANY

int vcuda_token_equal(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    /* Always VCUDA_MAX_TOKEN iterations, no early exit, no data-dependent branch:
     * a client learns nothing from timing but "wrong".  volatile keeps the compiler
     * from turning the accumulation back into a short-circuiting compare. */
    volatile uint8_t diff = (uint8_t)((alen != blen) | (alen > VCUDA_MAX_TOKEN) | (alen == 0));
    for (size_t i = 0; i < VCUDA_MAX_TOKEN; ++i) {
        uint8_t x = i < alen ? a[i] : 0, y = i < blen ? b[i] : 0;
        diff = diff | (uint8_t)(x ^ y);
    }
    return diff == 0;
}

vcuda_status vcuda_token_load(uint8_t *out, size_t *len, char *why)
{
    const char *env = getenv("VCUDA_TOKEN"), *path = getenv("VCUDA_TOKEN_FILE");
    char buf[VCUDA_MAX_TOKEN + 3]; /* token + CRLF, one more byte means too long */
    size_t n;
    *len = 0;
    if (env && *env) {
        n = strlen(env);
        if (n > VCUDA_MAX_TOKEN)
            return fail(why, VCUDA_E_BAD_LENGTH, "VCUDA_TOKEN longer than %d bytes", VCUDA_MAX_TOKEN);
        memcpy(out, env, n);
        *len = n;
        return VCUDA_OK;
    }
    if (!path || !*path)
        return fail(why, VCUDA_E_NO_TOKEN, "set VCUDA_TOKEN or VCUDA_TOKEN_FILE");
    int fd;
    vcuda_status st = vcuda_private_file_open(path, "token file", &fd, why);
    if (st) return st;
    ssize_t r = read(fd, buf, sizeof buf);
    int e = errno;
    close(fd);
    n = r > 0 ? (size_t)r : 0;
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '\t'))
        --n;
    if (r < 0)
        st = fail(why, VCUDA_E_TOKEN_FILE, "cannot read token file %s: %s", path, strerror(e));
    else if ((size_t)r == sizeof buf)
        st = fail(why, VCUDA_E_BAD_LENGTH, "token file %s is longer than %d bytes", path, VCUDA_MAX_TOKEN);
    else if (n == 0)
        st = fail(why, VCUDA_E_TOKEN_FILE, "token file %s is empty", path);
    else if (n > VCUDA_MAX_TOKEN || memchr(buf, 0, n))
        st = fail(why, VCUDA_E_BAD_LENGTH, "token in %s is longer than %d bytes or has NUL", path, VCUDA_MAX_TOKEN);
    else
        memcpy(out, buf, n), *len = n;
    vcuda_wipe(buf, sizeof buf); /* (the token's only copy is the caller's) */
    return st;
}

vcuda_status vcuda_private_file_open(const char *path, const char *what, int *fd_out, char *why)
{
    /* fstat the opened file, not the path, so the checked file is the one read */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return fail(why, VCUDA_E_TOKEN_FILE, "cannot open %s %s: %s", what, path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return fail(why, VCUDA_E_TOKEN_FILE, "%s %s is not a regular file", what, path);
    }
    if ((st.st_mode & 077) || st.st_uid != geteuid()) {
        close(fd);
        return fail(why, VCUDA_E_TOKEN_PERMS,
                    "%s %s has mode %03o owner %u: it must be owned by uid %u and "
                    "not accessible by group or others (chmod 600)",
                    what, path, (unsigned)(st.st_mode & 0777), (unsigned)st.st_uid, (unsigned)geteuid());
    }
    *fd_out = fd;
    return VCUDA_OK;
}

void vcuda_auth_proof(const uint8_t *token, size_t tlen, int server, const uint8_t nc[VCUDA_NONCE_SIZE],
                      const uint8_t ns[VCUDA_NONCE_SIZE], uint32_t options, uint8_t out[VCUDA_PROOF_SIZE])
{
    /* distinct labels: a server's answer can never serve as a client's proof */
    uint8_t msg[12 + 2 * VCUDA_NONCE_SIZE + 4];
    memcpy(msg, server ? "vcuda server" : "vcuda client", 12);
    memcpy(msg + 12, nc, VCUDA_NONCE_SIZE);
    memcpy(msg + 12 + VCUDA_NONCE_SIZE, ns, VCUDA_NONCE_SIZE);
    for (int i = 0; i < 4; ++i) msg[12 + 2 * VCUDA_NONCE_SIZE + i] = (uint8_t)(options >> (8 * i));
    vcuda_hmac_sha256(token, tlen, msg, sizeof msg, out);
}

int vcuda_random(uint8_t *out, size_t n)
{
    while (n) {
        ssize_t r = getrandom(out, n, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        out += r, n -= (size_t)r;
    }
    return 0;
}

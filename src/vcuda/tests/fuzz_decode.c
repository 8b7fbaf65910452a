/* libFuzzer target for the frame decoder the server runs on every client frame.
 * Beyond "no crash, no leak, no UB" (the sanitizers), it checks that anything the
 * decoder accepts re-encodes to the identical bytes: the wire format is canonical,
 * so decoder and encoder cannot silently disagree about a field.  A GRAPH_INSTANTIATE or
 * GRAPH_TWIN_ADD_NODE the frame decoder accepts goes on through the graph decoder, and a MEMCPY_3D or
 * TEX_CREATE through the descriptor decoder, the same way.  (The tag after each frame
 * past the handshake is the transport's, checked before this decoder runs; what the
 * decoder sees, and so the seed corpus, is unchanged by it.  A client holding the token
 * can still send any frame it likes, so the decoder is fuzzed on its own.) */
#include "vcuda/proto.h"

#include <stdlib.h>
#include <string.h>

/* A GRAPH_INSTANTIATE's nodes (first 0, count from the frame) or a GRAPH_TWIN_ADD_NODE's
 * one node (first: its index). */
static void graph(const vcuda_msg *m, int twin)
{
    static vcuda_graph_node nodes[VCUDA_MAX_GRAPH_NODES];
    char why[VCUDA_WHY_LEN];
    uint32_t first = twin ? (uint32_t)m->v[1] : 0, count = twin ? 1 : (uint32_t)m->v[0];
    if (count < 1 || count > VCUDA_MAX_GRAPH_NODES) return; /* (the server refuses it so) */
    if ((twin ? vcuda_graph_decode_from(m->blob, m->blob_len, first, count, nodes, why)
              : vcuda_graph_decode(m->blob, m->blob_len, count, nodes, why)) != VCUDA_OK)
        return;
    size_t n;
    uint8_t *out = malloc(m->blob_len ? m->blob_len : 1);
    if (!out ||
        (twin ? vcuda_graph_encode_from(nodes, first, count, out, m->blob_len, &n, why)
              : vcuda_graph_encode(nodes, count, out, m->blob_len, &n, why)) != VCUDA_OK ||
        n != m->blob_len || memcmp(out, m->blob, n) != 0)
        abort();
    for (uint32_t i = 0; i < count; ++i) { /* what the server relies on */
        for (uint32_t k = 0; k < nodes[i].ndeps; ++k)
            if (vcuda_graph_dep(&nodes[i], k) >= first + i ||
                (k && vcuda_graph_dep(&nodes[i], k) <= vcuda_graph_dep(&nodes[i], k - 1)))
                abort();
        if (nodes[i].kind >= (twin ? VCUDA_GNODE_KINDS : VCUDA_GNODE_COND)) abort();
        if (nodes[i].kind == VCUDA_GNODE_COND && (nodes[i].cond_size < 1 || nodes[i].cond_size > VCUDA_MAX_COND_BODIES))
            abort();
        if (nodes[i].kind == VCUDA_GNODE_ALLOC && (nodes[i].size < 1 || nodes[i].size > VCUDA_MAX_SIZE)) abort();
    }
    free(out);
}

static void descriptor(const vcuda_msg *m, vcuda_desc_kind kind)
{
    char why[VCUDA_WHY_LEN];
    uint64_t w[VCUDA_TEX_WORDS];
    uint8_t out[8 * VCUDA_TEX_WORDS];
    size_t n;
    if (vcuda_desc_decode(kind, m->blob, m->blob_len, w, why) != VCUDA_OK) return;
    if (vcuda_desc_encode(kind, w, out, sizeof out, &n, why) != VCUDA_OK || n != m->blob_len || memcmp(out, m->blob, n))
        abort();
    /* what the server relies on: element sizes known, sizes bounded */
    if (kind == VCUDA_DESC_TEX && (!vcuda_format_bytes(w[VCUDA_T_FORMAT]) || w[VCUDA_T_CHANNELS] == 3 || w[VCUDA_T_WIDTH] > VCUDA_MAX_SIZE))
        abort();
    if (kind == VCUDA_DESC_COPY && (w[VCUDA_C_WIDTH] > VCUDA_MAX_SIZE || w[VCUDA_C_SRC_TYPE] < 2 || w[VCUDA_C_SRC_TYPE] > 3))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static vcuda_msg m, m2; /* static: 2 KiB of sizes[] each, and no per-run zeroing */
    char why[VCUDA_WHY_LEN];
    vcuda_header h;
    vcuda_status s = vcuda_decode(data, size, &m, why);
    /* the streaming path (header, then exactly the declared payload) must agree */
    if (vcuda_decode_header(data, size, &h, why) == VCUDA_OK &&
        size - VCUDA_HEADER_SIZE >= h.payload_len) {
        vcuda_status s2 = vcuda_decode_payload(&h, data + VCUDA_HEADER_SIZE, h.payload_len, &m2, why);
        if (size - VCUDA_HEADER_SIZE == h.payload_len && s2 != s) abort();
    }
    if (s == VCUDA_OK) {
        size_t n;
        uint8_t *out = malloc(size); /* size is bounded by the input, never by a field */
        if (!out || vcuda_encode(&m, out, size, &n, why) != VCUDA_OK || n != size ||
            memcmp(out, data, size) != 0)
            abort();
        free(out);
        if (m.hdr.opcode == VCUDA_OP_GRAPH_INSTANTIATE && !(m.hdr.flags & VCUDA_FLAG_REPLY)) graph(&m, 0);
        if (m.hdr.opcode == VCUDA_OP_GRAPH_TWIN_ADD_NODE && !(m.hdr.flags & VCUDA_FLAG_REPLY)) graph(&m, 1);
        if (m.hdr.opcode == VCUDA_OP_MEMCPY_3D && !(m.hdr.flags & VCUDA_FLAG_REPLY)) descriptor(&m, VCUDA_DESC_COPY);
        if (m.hdr.opcode == VCUDA_OP_TEX_CREATE && !(m.hdr.flags & VCUDA_FLAG_REPLY)) descriptor(&m, VCUDA_DESC_TEX);
    }
    return 0;
}

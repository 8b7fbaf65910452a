/* CPU-only tests of the vcuda wire protocol: one binary, one CTest per case
 * (`vcuda_proto_test CASE`), plus `write_corpus DIR` for the fuzzer's seed corpus and
 * `gmac_stdin` for tests/test_mac.py (frame tags against Python's cryptography). */
#define _POSIX_C_SOURCE 200809L
#include "vcuda/mac.h"
#include "vcuda/proto.h"
#include "vcuda/sha256.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vcuda_test.h"

static uint8_t frame[VCUDA_HEADER_SIZE + 8192];
static char why[VCUDA_WHY_LEN];
static const uint8_t param_bytes[28] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
static uint8_t data_bytes[64];

/* A valid message for any opcode and direction, built from its layout, with values
 * chosen to exercise sign extension, high bits and the 8-byte fields. */
static void sample(vcuda_msg *m, unsigned op, uint32_t flags)
{
    const char *l = vcuda_layout(op, flags);
    memset(m, 0, sizeof *m);
    m->hdr.opcode = (uint16_t)op;
    m->hdr.flags = flags;
    m->hdr.request_id = 0x1122334455667788ull + op;
    for (unsigned i = 0; i < sizeof data_bytes; ++i) data_bytes[i] = (uint8_t)(i * 37 + op);
    for (unsigned idx = 0; *l; ++l) {
        if (*l == '(') { while (*l != ')') ++l; continue; }
        float f = 1.5f;
        uint32_t fb;
        switch (*l) {
        case 'u': m->v[m->nv++] = 0xA0000000u + idx++; break;
        case 'i': m->v[m->nv++] = (uint64_t)(int64_t)(-3 - (int)idx++); break;
        case 'd': m->v[m->nv++] = idx++ % 4; break;
        case 'n': m->v[m->nv++] = 2; break;
        case 'e': m->v[m->nv++] = 700; break; /* cudaErrorIllegalAddress */
        case 'g': m->v[m->nv++] = 1 + idx++; break;
        case 'z': m->v[m->nv++] = (1ull << 40) + idx++; break;
        case 'h': m->v[m->nv++] = 0xDEADBEEF00000000ull | idx++; break;
        case 'f': memcpy(&fb, &f, 4); m->v[m->nv++] = fb; break;
        case 's': m->str = (const uint8_t *)"_Z6vecAddPfS_S_i"; m->str_len = 16; break;
        case 't': m->blob = (const uint8_t *)"secret-token"; m->blob_len = 12; break;
        case 'b': m->blob = data_bytes; m->blob_len = sizeof data_bytes; break;
        case 'H': for (int i = 0; i < VCUDA_HASH_SIZE; ++i) m->hash[i] = (uint8_t)(i * 7); break;
        case 'a': case 'p':
            m->nsizes = 4;
            m->sizes[0] = m->sizes[1] = m->sizes[2] = 8;
            m->sizes[3] = 4;
            if (*l == 'p') m->blob = param_bytes, m->blob_len = 28;
            break;
        }
    }
}

static size_t encode_ok(unsigned op, uint32_t flags)
{
    vcuda_msg m;
    size_t n;
    sample(&m, op, flags);
    vcuda_status s = vcuda_encode(&m, frame, sizeof frame, &n, why);
    if (s) fprintf(stderr, "encode %s: %s\n", vcuda_status_name(s), why);
    CHECK(s == VCUDA_OK);
    return n;
}

static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; ++i) p[i] = (uint8_t)(v >> 8 * i); }

static void expect(const uint8_t *buf, size_t len, vcuda_status want)
{
    vcuda_msg m;
    vcuda_status s = vcuda_decode(buf, len, &m, why);
    if (s != want)
        fprintf(stderr, "decode: got %s (%s), want %s\n", vcuda_status_name(s),
                s ? why : "", vcuda_status_name(want));
    else if (s)
        printf("rejected as expected: %s: %s\n", vcuda_status_name(s), why);
    CHECK(s == want);
    CHECK(s == VCUDA_OK || strlen(why) > 0);
}

static const uint32_t directions[] = {0, VCUDA_FLAG_REPLY, VCUDA_FLAG_REPLY | VCUDA_FLAG_ERROR,
                                      VCUDA_FLAG_MORE, VCUDA_FLAG_REPLY | VCUDA_FLAG_MORE};

static void layout_table(void)
{
    for (unsigned op = 0; op < 1024; ++op) {
        if (!vcuda_opcode_name(op)) continue;
        for (int d = 0; d < 3; ++d) {
            const char *l = vcuda_layout(op, directions[d]);
            int spans = 0, strs = 0, arrays = 0, scalars = 0;
            for (; *l; ++l) {
                if (*l == '(') { while (*l && *l != ')') ++l; CHECK(*l == ')'); continue; }
                if (*l == ' ') continue;
                CHECK(strchr("uifdnegzhstbHap", *l) != NULL);
                scalars += strchr("uifdnegzh", *l) != NULL;
                strs += *l == 's';
                spans += strchr("tbp", *l) != NULL;
                arrays += strchr("ap", *l) != NULL;
            }
            CHECK(spans <= 1 && strs <= 1 && arrays <= 1 && scalars <= VCUDA_MAX_SCALARS);
        }
    }
}

static void roundtrip_all_opcodes(void)
{
    int count = 0;
    for (unsigned op = 0; op < 1024; ++op) {
        if (!vcuda_opcode_name(op)) continue;
        for (size_t d = 0; d < sizeof directions / sizeof directions[0]; ++d) {
            vcuda_msg in, out;
            uint8_t again[sizeof frame];
            size_t n = encode_ok(op, directions[d]), n2;
            sample(&in, op, directions[d]);
            CHECK(vcuda_decode(frame, n, &out, why) == VCUDA_OK);
            CHECK(out.hdr.opcode == op && out.hdr.flags == directions[d]);
            CHECK(out.hdr.request_id == in.hdr.request_id && out.nv == in.nv);
            CHECK(memcmp(out.v, in.v, sizeof in.v) == 0 && memcmp(out.hash, in.hash, 32) == 0);
            CHECK(out.str_len == in.str_len && (!in.str_len || !memcmp(out.str, in.str, in.str_len)));
            CHECK(out.blob_len == in.blob_len && (!in.blob_len || !memcmp(out.blob, in.blob, in.blob_len)));
            CHECK(out.nsizes == in.nsizes && !memcmp(out.sizes, in.sizes, 4 * in.nsizes));
            CHECK(vcuda_encode(&out, again, sizeof again, &n2, why) == VCUDA_OK);
            CHECK(n2 == n && memcmp(again, frame, n) == 0);
            /* every cut-short frame is rejected, and one byte too many as well */
            for (size_t cut = 0; cut < n; ++cut)
                CHECK(vcuda_decode(frame, cut, &out, why) ==
                      (cut < VCUDA_HEADER_SIZE ? VCUDA_E_SHORT_HEADER : VCUDA_E_TRUNCATED));
            CHECK(vcuda_decode(frame, n + 1, &out, why) == VCUDA_E_TRAILING);
            ++count;
        }
    }
    printf("%d opcode/direction round trips\n", count);
    CHECK(count >= 27 * 5);
}

/* Pins the wire layout: a change here breaks every deployed peer. */
static void header_bytes(void)
{
    vcuda_msg m;
    size_t n;
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_SET_DEVICE;
    m.hdr.flags = VCUDA_FLAG_MORE;
    m.hdr.request_id = 0x0102030405060708ull;
    m.v[0] = 3;
    m.nv = 1;
    CHECK(vcuda_encode(&m, frame, sizeof frame, &n, why) == VCUDA_OK);
    /* (the version byte is the build's own: every version lays the header out so) */
    static const uint8_t want[] = {'V', 'C', 'U', 'D', VCUDA_PROTO_VERSION, 0, 4, 0, 4, 0, 0, 0, 8, 7, 6, 5,
                                   4, 3, 2, 1, 4, 0, 0, 0, 3, 0, 0, 0};
    CHECK(n == sizeof want && memcmp(frame, want, n) == 0);
}

static void reject_header(void)
{
    size_t n = encode_ok(VCUDA_OP_PING, 0);
    expect(frame, 0, VCUDA_E_SHORT_HEADER);
    expect(frame, VCUDA_HEADER_SIZE - 1, VCUDA_E_SHORT_HEADER);
    frame[0] ^= 0xFF;
    expect(frame, n, VCUDA_E_BAD_MAGIC);
    frame[0] ^= 0xFF;
    frame[4] = 1; /* a peer from before the challenge-response handshake */
    expect(frame, n, VCUDA_E_BAD_VERSION);
    frame[4] = 2; /* a peer from before graphs ran on the server */
    expect(frame, n, VCUDA_E_BAD_VERSION);
    frame[4] = 3; /* a peer from before launch attributes and exec updates */
    expect(frame, n, VCUDA_E_BAD_VERSION);
    frame[4] = VCUDA_PROTO_VERSION;
    /* the first unused runtime opcode; 99: in the gap before the control opcodes;
     * 102: one past the last control opcode */
    uint16_t unused = 1;
    while (vcuda_opcode_name(unused)) ++unused;
    uint16_t bad_ops[] = {0, unused, 99, 102, 1000, 0xFFFF};
    for (size_t i = 0; i < sizeof bad_ops / sizeof bad_ops[0]; ++i) {
        frame[6] = (uint8_t)bad_ops[i], frame[7] = (uint8_t)(bad_ops[i] >> 8);
        expect(frame, n, VCUDA_E_BAD_OPCODE);
    }
    frame[6] = VCUDA_OP_PING, frame[7] = 0;
    put32(frame + 8, VCUDA_FLAG_KNOWN + 1u);
    expect(frame, n, VCUDA_E_BAD_FLAGS);
    put32(frame + 8, VCUDA_FLAG_ERROR); /* an error that is not a reply */
    expect(frame, n, VCUDA_E_BAD_FLAGS);
    put32(frame + 8, 0);
    put32(frame + 20, VCUDA_MAX_PAYLOAD + 1);
    expect(frame, n, VCUDA_E_OVERSIZE);
    put32(frame + 20, 0xFFFFFFFFu);
    expect(frame, n, VCUDA_E_OVERSIZE);
    put32(frame + 20, 0);
    expect(frame, n, VCUDA_OK);
}

static void reject_payload_length(void)
{
    size_t n = encode_ok(VCUDA_OP_MALLOC, 0);
    expect(frame, n - 1, VCUDA_E_TRUNCATED); /* shorter than declared */
    expect(frame, n + 3, VCUDA_E_TRAILING);  /* longer than declared */
    put32(frame + 20, 4);                    /* declared and carried agree, layout wants 8 */
    expect(frame, VCUDA_HEADER_SIZE + 4, VCUDA_E_FIELD_OVERRUN);
    n = encode_ok(VCUDA_OP_PING, 0);
    put32(frame + 20, 4);
    expect(frame, n + 4, VCUDA_E_EXTRA_BYTES);
    /* a length field pointing past the payload: h(dst) h(stream) b(data) */
    n = encode_ok(VCUDA_OP_MEMCPY_H2D, 0);
    put32(frame + VCUDA_HEADER_SIZE + 16, 65);
    expect(frame, n, VCUDA_E_FIELD_OVERRUN);
    put32(frame + VCUDA_HEADER_SIZE + 16, 0xFFFFFFFFu); /* bounded before it is used */
    expect(frame, n, VCUDA_E_BAD_LENGTH);
    /* the split API used by stream transports agrees */
    vcuda_header h;
    vcuda_msg m;
    n = encode_ok(VCUDA_OP_MEMCPY_H2D, 0);
    CHECK(vcuda_decode_header(frame, VCUDA_HEADER_SIZE, &h, why) == VCUDA_OK);
    CHECK(vcuda_decode_payload(&h, frame + VCUDA_HEADER_SIZE, n - VCUDA_HEADER_SIZE - 1, &m, why) == VCUDA_E_TRUNCATED);
    CHECK(vcuda_decode_payload(&h, frame + VCUDA_HEADER_SIZE, n - VCUDA_HEADER_SIZE, &m, why) == VCUDA_OK);
    CHECK(m.blob_len == 64 && m.blob == frame + VCUDA_HEADER_SIZE + 20);
}

/* LAUNCH payload: h + 6 g + u + h = 44 bytes, then p(params) */
#define PARAMS_AT (VCUDA_HEADER_SIZE + 44)
static void reject_counts(void)
{
    size_t n = encode_ok(VCUDA_OP_LAUNCH, 0);
    put32(frame + PARAMS_AT, VCUDA_MAX_PARAMS + 1);
    expect(frame, n, VCUDA_E_BAD_COUNT);
    put32(frame + PARAMS_AT, 0xFFFFFFFFu);
    expect(frame, n, VCUDA_E_BAD_COUNT);
    put32(frame + PARAMS_AT, 12); /* 48 bytes of sizes claimed, 44 follow */
    expect(frame, n, VCUDA_E_FIELD_OVERRUN);
    n = encode_ok(VCUDA_OP_LAUNCH, 0);
    put32(frame + PARAMS_AT + 4, 0);
    expect(frame, n, VCUDA_E_BAD_SIZE);
    put32(frame + PARAMS_AT + 4, VCUDA_MAX_PARAM_BYTES);
    expect(frame, n, VCUDA_E_BAD_SIZE); /* sum over the limit */
    put32(frame + PARAMS_AT + 4, 12);   /* sizes sum to 32, only 28 bytes follow */
    expect(frame, n, VCUDA_E_FIELD_OVERRUN);
    put32(frame + PARAMS_AT + 4, 4);    /* sizes sum to 24, 4 bytes left over */
    expect(frame, n, VCUDA_E_EXTRA_BYTES);
}

static void reject_strings(void)
{
    /* FUNCTION_GET: h(module) s(name) */
    size_t n = encode_ok(VCUDA_OP_FUNCTION_GET, 0);
    frame[VCUDA_HEADER_SIZE + 12 + 3] = 0;
    expect(frame, n, VCUDA_E_BAD_STRING);
    put32(frame + VCUDA_HEADER_SIZE + 8, 0);
    put32(frame + 20, 12);
    expect(frame, VCUDA_HEADER_SIZE + 12, VCUDA_E_BAD_LENGTH); /* empty name */
    put32(frame + VCUDA_HEADER_SIZE + 8, VCUDA_MAX_STRING + 1);
    expect(frame, VCUDA_HEADER_SIZE + 12, VCUDA_E_BAD_LENGTH);
    n = encode_ok(VCUDA_OP_HELLO, 0); /* u(version) t(token) */
    put32(frame + VCUDA_HEADER_SIZE + 4, VCUDA_MAX_TOKEN + 1);
    expect(frame, n, VCUDA_E_BAD_LENGTH);
    /* the encoder refuses what the decoder would */
    vcuda_msg m;
    char long_name[VCUDA_MAX_STRING + 1];
    memset(long_name, 'x', sizeof long_name);
    sample(&m, VCUDA_OP_FUNCTION_GET, 0);
    m.str = (const uint8_t *)"a\0b";
    m.str_len = 3;
    CHECK(vcuda_encode(&m, frame, sizeof frame, &n, why) == VCUDA_E_BAD_STRING);
    m.str = (const uint8_t *)long_name;
    m.str_len = sizeof long_name;
    CHECK(vcuda_encode(&m, frame, sizeof frame, &n, why) == VCUDA_E_BAD_LENGTH);
}

static void reject_values(void)
{
    size_t n = encode_ok(VCUDA_OP_SET_DEVICE, 0);
    put32(frame + VCUDA_HEADER_SIZE, 0xFFFFFFFFu); /* -1 */
    expect(frame, n, VCUDA_E_BAD_VALUE);
    put32(frame + VCUDA_HEADER_SIZE, VCUDA_MAX_DEVICES);
    expect(frame, n, VCUDA_E_BAD_VALUE);
    n = encode_ok(VCUDA_OP_LAUNCH, 0);
    put32(frame + VCUDA_HEADER_SIZE + 8 + 4, 0); /* grid_y = 0 */
    expect(frame, n, VCUDA_E_BAD_VALUE);
    put32(frame + VCUDA_HEADER_SIZE + 8 + 4, 0x80000000u);
    expect(frame, n, VCUDA_E_BAD_VALUE);
    n = encode_ok(VCUDA_OP_MALLOC, 0);
    frame[VCUDA_HEADER_SIZE + 6] = 1; /* 2^48 + ... */
    expect(frame, n, VCUDA_E_BAD_SIZE);
    n = encode_ok(VCUDA_OP_FREE, VCUDA_FLAG_REPLY | VCUDA_FLAG_ERROR);
    put32(frame + VCUDA_HEADER_SIZE, 0); /* cudaSuccess is not an error */
    expect(frame, n, VCUDA_E_BAD_VALUE);
    /* encoder: values that do not fit, counts that disagree, small buffers */
    vcuda_msg m;
    sample(&m, VCUDA_OP_STREAM_CREATE, 0);
    m.v[0] = 1ull << 32;
    CHECK(vcuda_encode(&m, frame, sizeof frame, &n, why) == VCUDA_E_BAD_VALUE);
    sample(&m, VCUDA_OP_STREAM_CREATE, 0);
    m.nv = 2;
    CHECK(vcuda_encode(&m, frame, sizeof frame, &n, why) == VCUDA_E_BAD_VALUE);
    sample(&m, VCUDA_OP_LAUNCH, 0);
    m.blob_len = 27;
    CHECK(vcuda_encode(&m, frame, sizeof frame, &n, why) == VCUDA_E_BAD_SIZE);
    sample(&m, VCUDA_OP_MEMCPY_H2D, 0);
    CHECK(vcuda_encode(&m, frame, 50, &n, why) == VCUDA_E_NO_SPACE && n == VCUDA_HEADER_SIZE + 84);
    m.blob_len = VCUDA_MAX_CHUNK + 1;
    CHECK(vcuda_encode(&m, frame, sizeof frame, &n, why) == VCUDA_E_BAD_LENGTH);
}

static void chunking(void)
{
    CHECK(vcuda_chunk_count(0) == 1 && vcuda_chunk_count(1) == 1);
    CHECK(vcuda_chunk_count(VCUDA_MAX_CHUNK) == 1 && vcuda_chunk_count(VCUDA_MAX_CHUNK + 1ull) == 2);
    CHECK(vcuda_chunk_count(VCUDA_MAX_SIZE) == VCUDA_MAX_SIZE / VCUDA_MAX_CHUNK);
    CHECK(VCUDA_MAX_CHUNK + 4u + 16u <= VCUDA_MAX_PAYLOAD); /* an H2D chunk fits a frame */
}

static void token_equal(void)
{
    const uint8_t *a = (const uint8_t *)"correct horse", *b = (const uint8_t *)"correct horsf";
    uint8_t big[VCUDA_MAX_TOKEN + 1];
    memset(big, 'k', sizeof big);
    CHECK(vcuda_token_equal(a, 13, a, 13));
    CHECK(!vcuda_token_equal(a, 13, b, 13));
    CHECK(!vcuda_token_equal(a, 12, a, 13)); /* prefix */
    CHECK(!vcuda_token_equal(a, 0, a, 0));   /* empty tokens never authenticate */
    CHECK(vcuda_token_equal(big, VCUDA_MAX_TOKEN, big, VCUDA_MAX_TOKEN));
    CHECK(!vcuda_token_equal(big, sizeof big, big, sizeof big));
}

/* FIPS 180-4 / NIST CAVP vectors, including the padding edge (55/56/64 bytes) and a
 * long message. */
static void sha256(void)
{
    static const struct { const char *msg; size_t repeat; const char *hex; } v[] = {
        {"", 1, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", 1, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 1,
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"a", 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
        {"a", 55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
        {"a", 56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
        {"a", 64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
    };
    for (size_t i = 0; i < sizeof v / sizeof *v; ++i) {
        size_t len = strlen(v[i].msg), n = len * v[i].repeat;
        uint8_t *buf = malloc(n ? n : 1), h[32];
        char hex[65];
        for (size_t k = 0; k < v[i].repeat; ++k) memcpy(buf + k * len, v[i].msg, len);
        vcuda_sha256(buf, n, h);
        for (int k = 0; k < 32; ++k) snprintf(hex + 2 * k, 3, "%02x", h[k]);
        if (strcmp(hex, v[i].hex)) fprintf(stderr, "vector %zu: got %s\n", i, hex);
        CHECK(strcmp(hex, v[i].hex) == 0);
        free(buf);
    }
}

/* ---- frame authentication (mac.h) -------------------------------------------------- */

/* hex -> bytes (n: capacity); the byte count. */
static size_t unhex(const char *hex, uint8_t *out, size_t n)
{
    size_t k = 0;
    for (; hex[0] && hex[1] && k < n; hex += 2) {
        unsigned v;
        if (sscanf(hex, "%2x", &v) != 1) break;
        out[k++] = (uint8_t)v;
    }
    return k;
}

static int same_hex(const uint8_t *got, size_t n, const char *want, const char *what)
{
    uint8_t w[256];
    size_t wn = unhex(want, w, sizeof w);
    if (wn == n && !memcmp(got, w, n)) return 1;
    fprintf(stderr, "%s: got ", what);
    for (size_t i = 0; i < n; ++i) fprintf(stderr, "%02x", got[i]);
    fprintf(stderr, "\n%s: want %s\n", what, want);
    return 0;
}

static void gmac_once(const uint8_t *key, const uint8_t *iv, const uint8_t *m, size_t n, uint8_t tag[16])
{
    vcuda_gcm_key k;
    vcuda_aead a;
    vcuda_gcm_init(&k, key);
    vcuda_aead_begin(&a, &k, iv);
    vcuda_aead_aad(&a, m, n);
    vcuda_aead_tag(&a, NULL, 0, tag);
}

/* Known answers: AES-256 (FIPS 197 C.3) and AES-256-GCM tags from NIST: CAVP's
 * gcmEncryptExtIV256.rsp (96-bit IV, 128-bit tag; the groups without plaintext, with and
 * without additional data, and two with a ciphertext, which the tag covers after the
 * additional data: a 90-byte AAD and a 51-byte ciphertext reach the padding of both) and
 * the GCM specification's test cases 13 and 16 (McGrew and Viega).  The additional data
 * goes in pieces, as frames do. */
static void mac_vectors(void)
{
    printf("path: %s\n", vcuda_mac_impl());
    uint8_t key[32], iv[12], in[16], out[16], aad[128], ct[128], tag[16];
    vcuda_gcm_key k;
    unhex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", key, 32);
    unhex("00112233445566778899aabbccddeeff", in, 16);
    vcuda_gcm_init(&k, key);
    vcuda_aes256_block(&k, in, out);
    CHECK(same_hex(out, 16, "8ea2b7ca516745bfeafc49904b496089", "FIPS 197 C.3 AES-256"));
    static const struct { const char *what, *key, *iv, *aad, *ct, *tag; } v[] = {
        {"CAVP PTlen=0 AADlen=0 #0", "b52c505a37d78eda5dd34f20c22540ea1b58963cf8e5bf8ffa85f9f2492505b4",
         "516c33929df5a3284ff463d7", "", "", "bdc1ac884d332457a1d2664f168c76f0"},
        {"CAVP PTlen=0 AADlen=0 #1", "5fe0861cdc2690ce69b3658c7f26f8458eec1c9243c5ba0845305d897e96ca0f",
         "770ac1a5a3d476d5d96944a1", "", "", "196d691e1047093ca4b3d2ef4baba216"},
        {"CAVP PTlen=0 AADlen=128 #0", "78dc4e0aaf52d935c3c01eea57428f00ca1fd475f5da86a49c8dd73d68c8e223",
         "d79cf22d504cc793c3fb6c8a", "b96baa8c1c75a671bfb2d08d06be5f36", "", "3e5d486aa2e30b22e040b85723a06e76"},
        {"CAVP PTlen=0 AADlen=128 #1", "4457ff33683cca6ca493878bdc00373893a9763412eef8cddb54f91318e0da88",
         "699d1f29d7b8c55300bb1fd2", "6749daeea367d0e9809e2dc2f309e6e3", "", "d60c74d2517fde4a74e0cd4709ed43a9"},
        {"CAVP PTlen=128 AADlen=128 #0", "92e11dcdaa866f5ce790fd24501f92509aacf4cb8b1339d50c9c1240935dd08b",
         "ac93a1a6145299bde902f21a", "1e0889016f67601c8ebea4943bc23ad6", "8995ae2e6df3dbf96fac7b7137bae67f",
         "eca5aa77d51d4a0a14d9c51e1da474ab"},
        {"CAVP PTlen=408 AADlen=720 #0", "148579a3cbca86d5520d66c0ec71ca5f7e41ba78e56dc6eebd566fed547fe691",
         "b08a5ea1927499c6ecbfd4e0",
         "e4f963f015ffbb99ee3349bbaf7e8e8e6c2a71c230a48f9d59860a29091d2747e01a5ca572347e247d25f56ba7ae8e05cd"
         "e2be3c97931292c02370208ecd097ef692687fecf2f419d3200162a6480a57dad408a0dfeb492e2c5d",
         "2097e372950a5e9383c675e89eea1c314f999159f5611344b298cda45e62843716f215f82ee663919c64002a5c198d78"
         "78fd3f",
         "adbecdb0d5c2224d804d2886ff9a5760"},
        {"GCM spec test case 13", "0000000000000000000000000000000000000000000000000000000000000000",
         "000000000000000000000000", "", "", "530f8afbc74536b9a963b4f1c4cb738b"},
        {"GCM spec test case 16", "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308",
         "cafebabefacedbaddecaf888", "feedfacedeadbeeffeedfacedeadbeefabaddad2",
         "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838"
         "c5f61e6393ba7a0abcc9f662",
         "76fc6ece0f4e1768cddf8853bb2d551b"},
    };
    for (size_t i = 0; i < sizeof v / sizeof *v; ++i) {
        CHECK(unhex(v[i].key, key, 32) == 32 && unhex(v[i].iv, iv, 12) == 12);
        size_t an = unhex(v[i].aad, aad, sizeof aad), cn = unhex(v[i].ct, ct, sizeof ct);
        vcuda_aead a;
        vcuda_gcm_init(&k, key);
        vcuda_aead_begin(&a, &k, iv);
        vcuda_aead_aad(&a, aad, an / 3); /* in pieces, as frames are tagged */
        vcuda_aead_aad(&a, aad + an / 3, an - an / 3);
        vcuda_aead_tag(&a, ct, cn, tag);
        CHECK(same_hex(tag, 16, v[i].tag, v[i].what));
    }

    uint8_t t2[16];
    memcpy(t2, tag, 16);
    CHECK(vcuda_tag_equal(tag, t2));
    for (int i = 0; i < 128; ++i) { /* every single-bit difference */
        t2[i / 8] ^= (uint8_t)(1u << (i % 8));
        CHECK(!vcuda_tag_equal(tag, t2));
        t2[i / 8] ^= (uint8_t)(1u << (i % 8));
    }
}

/* Any split into pieces gives the tag of the whole (frames are tagged where they lie:
 * header, payload head, bulk data), at every length around the block size and across
 * the 128 bytes that wait for more and the groups of 16 blocks hashed together, also
 * with a short piece first (whole groups then start off the block boundary); long
 * messages against Python's cryptography package (AESGCM with an empty plaintext; the
 * live comparison over random lengths is tests/test_mac.py), also all-ones data under an
 * all-ones key. */
/* The tag of m[0, n) fed in three pieces, [0, a), [a, b), [b, n), under the session key k
 * (made from key) is the tag of it whole. */
static int split_tag_same(const vcuda_gcm_key *k, const uint8_t *key, const uint8_t *iv, const uint8_t *m, size_t n,
                          size_t a, size_t b)
{
    uint8_t whole[16], part[16];
    vcuda_aead x;
    gmac_once(key, iv, m, n, whole);
    vcuda_aead_begin(&x, k, iv);
    vcuda_aead_aad(&x, m, a);
    vcuda_aead_aad(&x, m + a, b - a);
    vcuda_aead_aad(&x, m + b, n - b);
    vcuda_aead_tag(&x, NULL, 0, part);
    return memcmp(whole, part, 16) == 0;
}

static void mac_pieces(void)
{
    static uint8_t big[70001];
    uint8_t key[32], iv[12], m[700], whole[16], part[16];
    vcuda_gcm_key k;
    printf("path: %s\n", vcuda_mac_impl());
    for (int i = 0; i < 32; ++i) key[i] = (uint8_t)(i * 29 + 3);
    for (int i = 0; i < 12; ++i) iv[i] = (uint8_t)i;
    for (size_t i = 0; i < sizeof m; ++i) m[i] = (uint8_t)(i * 131 + (i >> 3));
    vcuda_gcm_init(&k, key);
    int bad = 0;
    for (size_t n = 0; n <= 300; n += n < 40 || n > 240 ? 1 : 3)
        for (size_t a = 0; a <= n; a += 1 + n / 40)
            for (size_t b = a; b <= n; b += 7) bad += !split_tag_same(&k, key, iv, m, n, a, b);
    CHECK(bad == 0);
    for (size_t i = 0; i < sizeof big; ++i) big[i] = (uint8_t)(i * 131 + (i >> 3));
    static const struct { size_t n; const char *tag; } kat[] = {
        {255, "4e60a6e900b462f696f418621849248c"},   {256, "6f759d866ab8fdac879a9199166a2805"},
        {257, "da5040ff4e369ed4cc92cf088989e315"},   {512, "4f5931e6048fd78fb4fd6703f523c855"},
        {1000, "323327d5ad663be87d87612d393c8cb0"},  {4113, "42a9fcbba49ab22ed76148f1b8c3a562"},
        {65536, "835c39e2e0fbd76eb98b4bb96c9dec80"}, {70001, "4b63d4685268b53026afeec20db9c694"}};
    for (size_t i = 0; i < sizeof kat / sizeof *kat; ++i) {
        char what[32];
        snprintf(what, sizeof what, "GMAC of %zu bytes", kat[i].n);
        gmac_once(key, iv, big, kat[i].n, whole);
        CHECK(same_hex(whole, 16, kat[i].tag, what));
    }
    bad = 0;
    for (size_t n = 500; n <= 2200; n += 37)
        for (size_t a = 0; a <= 130; a += 13) /* a short piece first, then a long one, then the rest */
            bad += !split_tag_same(&k, key, iv, big, n, a, n - (n - a) / 7);
    CHECK(bad == 0);
    memset(key, 0xff, sizeof key);
    memset(iv, 0xff, sizeof iv);
    memset(big, 0xff, 5000);
    gmac_once(key, iv, big, 5000, whole);
    CHECK(same_hex(whole, 16, "babdde7467923e2264acf717abdcc230", "GMAC of 5000 x 0xff, key and IV 0xff"));
    /* a frame's pieces as they lie when sent (24 + head + bulk) and received (28 + bulk) */
    vcuda_session s;
    uint8_t nc[32] = {1}, ns[32] = {2}, t1[16], t2[16];
    vcuda_session_start(&s, 0, (const uint8_t *)"tok", 3, nc, ns, 250, 0, "here");
    vcuda_session_seal(&s, m, 52, m + 52, 600, t1);
    s.sent = 0;
    vcuda_session_seal(&s, m, 28, m + 28, 624, t2);
    CHECK(!memcmp(t1, t2, 16) && s.sent == 1);
    /* E_K(J0) made ahead (both ways at once) is the one made on the spot */
    s.sent = 0, s.received = 3;
    vcuda_session_prepare(&s);
    CHECK(s.tx_ahead == 0 && s.rx_ahead == 3);
    vcuda_session_seal(&s, m, 52, m + 52, 600, t2);
    CHECK(!memcmp(t1, t2, 16));
    vcuda_session r; /* the server's frame 3, opened with E_K(J0) made ahead, then made on the spot */
    vcuda_session_start(&r, 1, (const uint8_t *)"tok", 3, nc, ns, 250, 0, "there");
    r.sent = 3;
    vcuda_session_seal(&r, m, 100, NULL, 0, t1);
    CHECK(vcuda_session_open(&s, m, 100, NULL, 0, t1, why) && s.received == 4);
    s.received = 3, s.rx_ahead = UINT64_MAX;
    CHECK(vcuda_session_open(&s, m, 100, NULL, 0, t1, why) && s.received == 4);
}

/* The session: its key and tags against an independent implementation (Python's
 * hmac and cryptography packages: HMAC-SHA256, then AESGCM with nonce = direction
 * (u32 LE) || sequence number (u64 LE), an empty plaintext and the frame as associated
 * data), and what it refuses. */
static void mac_session(void)
{
    const char *token = "s3cret-test-token";
    uint8_t nc[32], ns[32], frame[32], tag[16];
    for (int i = 0; i < 32; ++i) nc[i] = (uint8_t)i, ns[i] = (uint8_t)(32 + i);
    /* a MALLOC request's bytes as sent (a header with version 6: any bytes serve) and z(size) = 1 MiB */
    CHECK(unhex("5643554406000900000000008877665544332211080000000000100000000000", frame, sizeof frame) == 32);
    vcuda_session c, sv;
    vcuda_session_start(&c, 0, (const uint8_t *)token, strlen(token), nc, ns, 250, 3, "the server");
    vcuda_session_start(&sv, 1, (const uint8_t *)token, strlen(token), nc, ns, 250, 3, "the client");
    CHECK(same_hex(c.key, 32, "e9c344c4cd3169b131edaf1253e0eafc0ee32a967ff1fce000a0bdb7673d18a9", "session key"));
    CHECK(!memcmp(c.key, sv.key, 32));
    static const struct { int server; uint64_t seq; const char *tag; } v[] = {
        {0, 0, "808070d8e0d883b3dde0e407432643cc"},
        {0, 5, "91b307a4176aec91963012fd2457498d"},
        {1, 0, "7ebb2e3dd092cf736dabd7b1e59737df"},
        {1, 1ull << 40, "56101332d1f5096540115b2a486264c2"},
    };
    for (size_t i = 0; i < sizeof v / sizeof *v; ++i) {
        vcuda_session *s = v[i].server ? &sv : &c;
        s->sent = v[i].seq;
        vcuda_session_seal(s, frame, 24, frame + 24, 8, tag);
        CHECK(same_hex(tag, 16, v[i].tag, "frame tag") && s->sent == v[i].seq + 1);
    }
    /* the two sides in step: a client's frames open at the server, in order, once */
    uint8_t t[4][16];
    c.sent = sv.received = 0;
    for (int i = 0; i < 4; ++i) vcuda_session_seal(&c, frame, 24, frame + 24, 8, t[i]);
    CHECK(vcuda_session_open(&sv, frame, 24, frame + 24, 8, t[0], why) && sv.received == 1);
    CHECK(!vcuda_session_open(&sv, frame, 24, frame + 24, 8, t[0], why)); /* replayed */
    printf("refused as expected: %s\n", why);
    CHECK(strstr(why, "frame 1 from the client: bad authentication tag (injected, replayed or corrupted)"));
    CHECK(!vcuda_session_open(&sv, frame, 24, frame + 24, 8, t[2], why)); /* reordered (1 dropped) */
    CHECK(sv.received == 1);                                               /* refusals do not count */
    frame[30] ^= 4;
    CHECK(!vcuda_session_open(&sv, frame, 24, frame + 24, 8, t[1], why)); /* a payload bit flipped */
    frame[30] ^= 4;
    frame[6] ^= 1;
    CHECK(!vcuda_session_open(&sv, frame, 24, frame + 24, 8, t[1], why)); /* the opcode changed */
    frame[6] ^= 1;
    CHECK(!vcuda_session_open(&sv, frame, 24, frame + 24, 4, t[1], why)); /* truncated */
    CHECK(vcuda_session_open(&sv, frame, 24, frame + 24, 8, t[1], why) && sv.received == 2);
    /* reflected: the client's own frame sent back to it is not a server frame */
    c.received = 0, c.sent = 0;
    vcuda_session_seal(&c, frame, 32, NULL, 0, tag);
    CHECK(!vcuda_session_open(&c, frame, 32, NULL, 0, tag, why));
    /* another connection (other nonces), another token, another heartbeat: other keys */
    vcuda_session o;
    const uint8_t *tk = (const uint8_t *)token;
    size_t tl = strlen(token);
    c.sent = 0;
    vcuda_session_seal(&c, frame, 32, NULL, 0, tag);
    for (int k = 0; k < 4; ++k) {
        ns[0] ^= (uint8_t)(k == 0);
        vcuda_session_start(&o, 1, k == 1 ? (const uint8_t *)"s3cret-test-tokem" : tk, tl, nc, ns, k == 2 ? 251 : 250,
                            k == 3 ? 2 : 3, "x");
        CHECK(!vcuda_session_open(&o, frame, 32, NULL, 0, tag, why));
        ns[0] ^= (uint8_t)(k == 0);
    }
    vcuda_session_start(&o, 1, tk, tl, nc, ns, 250, 3, "x");
    CHECK(vcuda_session_open(&o, frame, 32, NULL, 0, tag, why));
    /* vcuda_encode_sealed: the frame, then its tag, the same as sealing it in place */
    vcuda_msg m;
    uint8_t buf[64];
    size_t n = 0;
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_PING;
    c.sent = 9;
    CHECK(vcuda_encode_sealed(&c, &m, buf, 39, &n, why) == VCUDA_E_NO_SPACE && n == 40);
    CHECK(c.sent == 9); /* nothing sealed when nothing encodes */
    CHECK(vcuda_encode_sealed(&c, &m, buf, sizeof buf, &n, why) == VCUDA_OK && n == 40 && c.sent == 10);
    c.sent = 9;
    vcuda_session_seal(&c, buf, 24, NULL, 0, tag);
    CHECK(!memcmp(buf + 24, tag, 16));
    CHECK(vcuda_encode_sealed(NULL, &m, buf, sizeof buf, &n, why) == VCUDA_OK && n == 24);
}

static void token_file(void)
{
    char path[] = "/tmp/vcuda-token-XXXXXX";
    uint8_t tok[VCUDA_MAX_TOKEN];
    size_t len;
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, "s3cret\n", 7) == 7);
    close(fd);
    unsetenv("VCUDA_TOKEN");
    unsetenv("VCUDA_TOKEN_FILE");
    CHECK(vcuda_token_load(tok, &len, why) == VCUDA_E_NO_TOKEN);
    setenv("VCUDA_TOKEN_FILE", path, 1);
    CHECK(chmod(path, 0644) == 0);
    CHECK(vcuda_token_load(tok, &len, why) == VCUDA_E_TOKEN_PERMS);
    printf("refused as expected: %s\n", why);
    CHECK(chmod(path, 0620) == 0);
    CHECK(vcuda_token_load(tok, &len, why) == VCUDA_E_TOKEN_PERMS);
    CHECK(chmod(path, 0600) == 0);
    CHECK(vcuda_token_load(tok, &len, why) == VCUDA_OK && len == 6 && !memcmp(tok, "s3cret", 6));
    setenv("VCUDA_TOKEN", "from-env", 1); /* the environment wins */
    CHECK(vcuda_token_load(tok, &len, why) == VCUDA_OK && len == 8 && !memcmp(tok, "from-env", 8));
    unsetenv("VCUDA_TOKEN");
    fd = open(path, O_WRONLY | O_TRUNC);
    CHECK(fd >= 0 && write(fd, "\n", 1) == 1);
    close(fd);
    CHECK(vcuda_token_load(tok, &len, why) == VCUDA_E_TOKEN_FILE);
    unlink(path);
    CHECK(vcuda_token_load(tok, &len, why) == VCUDA_E_TOKEN_FILE);
}

/* ---- graphs: the GRAPH_INSTANTIATE bytes (proto.h, "graphs") ---------------------- */

static const uint32_t g_dep0[] = {0}, g_dep12[] = {1, 2};
static const uint8_t g_args[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};

/* set -> {kernel, copy} -> empty: one node of every kind, a join and a fork */
static void graph_sample(vcuda_graph_node n[4])
{
    memset(n, 0, 4 * sizeof *n);
    n[0].kind = VCUDA_GNODE_SET, n[0].dst = 0x7f0000001000ull, n[0].pitch = 512, n[0].value = 0xab;
    n[0].width = 500, n[0].height = 3;
    n[1].kind = VCUDA_GNODE_KERNEL, n[1].ndeps = 1, n[1].deps = g_dep0, n[1].function = 0x8000000000000001ull;
    for (int d = 0; d < 6; ++d) n[1].dim[d] = (uint32_t)(d + 1) << (d * 4);
    n[1].shmem = 4096, n[1].params = g_args, n[1].params_len = sizeof g_args;
    n[2].kind = VCUDA_GNODE_COPY, n[2].ndeps = 1, n[2].deps = g_dep0, n[2].dst = 0x7f0000002000ull;
    n[2].src = 0x7f0000001000ull, n[2].size = 1500;
    n[3].kind = VCUDA_GNODE_EMPTY, n[3].ndeps = 2, n[3].deps = g_dep12;
}

static uint8_t g_blob[8 << 20];

/* A twin's nodes (GRAPH_TWIN_ADD_NODE): one node numbered `first`, of any kind; the kinds
 * only a twin takes are refused in a GRAPH_INSTANTIATE, and their fields are checked. */
static uint32_t twin_deps[] = {2, 6};
static void twin_sample(vcuda_graph_node x[3])
{
    memset(x, 0, 3 * sizeof *x);
    x[0].kind = VCUDA_GNODE_COND, x[0].cond = 0x123456789ull, x[0].cond_type = VCUDA_COND_SWITCH, x[0].cond_size = 4;
    x[0].ndeps = 2, x[0].deps = twin_deps;
    x[1].kind = VCUDA_GNODE_ALLOC, x[1].size = 64ull << 20;
    x[2].kind = VCUDA_GNODE_FREE, x[2].dst = 0x7f0000000000ull, x[2].ndeps = 1, x[2].deps = twin_deps;
}

static void twin_nodes(void)
{
    vcuda_graph_node x[3], d;
    size_t len;
    twin_sample(x);
    for (int i = 0; i < 3; ++i) {
        CHECK(vcuda_graph_encode_from(&x[i], 7, 1, g_blob, sizeof g_blob, &len, why) == VCUDA_OK);
        CHECK(vcuda_graph_decode_from(g_blob, len, 7, 1, &d, why) == VCUDA_OK);
        CHECK(d.kind == x[i].kind && d.ndeps == x[i].ndeps && d.cond == x[i].cond && d.cond_type == x[i].cond_type &&
              d.cond_size == x[i].cond_size && d.size == x[i].size && d.dst == x[i].dst);
        for (uint32_t k = 0; k < x[i].ndeps; ++k) CHECK(vcuda_graph_dep(&d, k) == x[i].deps[k]);
        /* numbered too low for its dependencies (node 6 cannot wait for node 6) */
        if (i == 0) CHECK(vcuda_graph_decode_from(g_blob, len, 6, 1, &d, why) == VCUDA_E_BAD_VALUE);
        /* not in a GRAPH_INSTANTIATE */
        CHECK(vcuda_graph_encode(&x[i], 1, NULL, 0, &len, why) == VCUDA_E_BAD_VALUE);
    }
    CHECK(vcuda_graph_encode_from(&x[1], VCUDA_MAX_GRAPH_NODES, 1, NULL, 0, &len, why) == VCUDA_E_BAD_COUNT);
    static const char *const cases[] = {"IF with 3 bodies", "WHILE with 2", "SWITCH with none", "SWITCH over the limit",
                                        "type 3", "allocation of 0", "allocation over 2^48"};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        twin_sample(x);
        switch (c) {
        case 0: x[0].cond_type = VCUDA_COND_IF, x[0].cond_size = 3; break;
        case 1: x[0].cond_type = VCUDA_COND_WHILE, x[0].cond_size = 2; break;
        case 2: x[0].cond_size = 0; break;
        case 3: x[0].cond_size = VCUDA_MAX_COND_BODIES + 1; break;
        case 4: x[0].cond_type = 3; break;
        case 5: x[1].size = 0; break;
        case 6: x[1].size = VCUDA_MAX_SIZE + 1; break;
        }
        int k = c < 5 ? 0 : 1;
        vcuda_status s = vcuda_graph_encode_from(&x[k], 7, 1, g_blob, sizeof g_blob, &len, why);
        if (s) printf("twin node refused as expected: %s: %s\n", cases[c], why);
        CHECK(s == VCUDA_E_BAD_VALUE);
    }
}

static void graph_codec(void)
{
    vcuda_graph_node n[4], d[4];
    size_t len = 0, len2 = 0;
    graph_sample(n);
    CHECK(vcuda_graph_encode(n, 4, NULL, 0, &len, why) == VCUDA_OK && len > 0);
    CHECK(vcuda_graph_encode(n, 4, g_blob, len - 1, &len2, why) == VCUDA_E_NO_SPACE && len2 == len);
    CHECK(vcuda_graph_encode(n, 4, g_blob, sizeof g_blob, &len, why) == VCUDA_OK);
    CHECK(vcuda_graph_decode(g_blob, len, 4, d, why) == VCUDA_OK);
    for (int i = 0; i < 4; ++i) {
        CHECK(d[i].kind == n[i].kind && d[i].ndeps == n[i].ndeps && d[i].dst == n[i].dst && d[i].src == n[i].src &&
              d[i].size == n[i].size && d[i].pitch == n[i].pitch && d[i].width == n[i].width &&
              d[i].height == n[i].height && d[i].value == n[i].value && d[i].function == n[i].function &&
              d[i].shmem == n[i].shmem && !memcmp(d[i].dim, n[i].dim, sizeof n[i].dim) &&
              d[i].params_len == n[i].params_len);
        for (uint32_t k = 0; k < n[i].ndeps; ++k) CHECK(vcuda_graph_dep(&d[i], k) == n[i].deps[k]);
    }
    CHECK(!memcmp(d[1].params, g_args, sizeof g_args));
    /* decoded nodes re-encode to the same bytes: one canonical form */
    static uint8_t again[4096];
    CHECK(vcuda_graph_encode(d, 4, again, sizeof again, &len2, why) == VCUDA_OK && len2 == len &&
          !memcmp(again, g_blob, len));
    /* every prefix, the bytes with one more, and a wrong count are refused */
    for (size_t cut = 0; cut < len; ++cut) CHECK(vcuda_graph_decode(g_blob, cut, 4, d, why) != VCUDA_OK);
    CHECK(vcuda_graph_decode(g_blob, len + 1, 4, d, why) == VCUDA_E_EXTRA_BYTES);
    CHECK(vcuda_graph_decode(g_blob, len, 3, d, why) == VCUDA_E_EXTRA_BYTES);
    CHECK(vcuda_graph_decode(g_blob, len, 0, d, why) == VCUDA_E_BAD_COUNT);
    CHECK(vcuda_graph_decode(g_blob, len, VCUDA_MAX_GRAPH_NODES + 1, d, why) == VCUDA_E_BAD_COUNT);
    /* what no graph may say, refused by the encoder and (patched in) by the decoder */
    static const char *const cases[] = {"dependency on itself", "dependencies out of order", "kind 4", "dimension 0",
                                        "set value 256", "copy over 2^48", "too many argument bytes"};
    static const uint32_t self[] = {1}, twice[] = {2, 1};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        graph_sample(n);
        switch (c) {
        case 0: n[1].deps = self; break;
        case 1: n[3].deps = twice; break;
        case 2: n[2].kind = VCUDA_GNODE_KINDS; break;
        case 3: n[1].dim[4] = 0; break;
        case 4: n[0].value = 256; break;
        case 5: n[2].size = VCUDA_MAX_SIZE + 1; break;
        case 6: n[1].params_len = VCUDA_MAX_PARAM_BYTES + 1; break;
        }
        vcuda_status s = vcuda_graph_encode(n, 4, g_blob, sizeof g_blob, &len, why);
        if (s) printf("graph refused as expected: %s: %s\n", cases[c], why);
        CHECK(s != VCUDA_OK);
    }
    /* patched bytes: a forward dependency (node 1 on node 1) and an unknown kind */
    graph_sample(n);
    CHECK(vcuda_graph_encode(n, 4, g_blob, sizeof g_blob, &len, why) == VCUDA_OK);
    size_t dep_at = 44 + 8; /* node 0 (a set) is 44 bytes; node 1's kind and count, then its dependency */
    g_blob[dep_at] = 1;
    CHECK(vcuda_graph_decode(g_blob, len, 4, d, why) == VCUDA_E_BAD_VALUE);
    g_blob[dep_at] = 0, g_blob[44] = 7;
    CHECK(vcuda_graph_decode(g_blob, len, 4, d, why) == VCUDA_E_BAD_VALUE);
    /* the graph's argument bytes together are bounded, not only each kernel's */
    static vcuda_graph_node big[200];
    uint32_t per = VCUDA_MAX_PARAM_BYTES, fit = VCUDA_MAX_GRAPH_PARAM_BYTES / per;
    for (uint32_t i = 0; i <= fit; ++i) {
        big[i] = n[1];
        big[i].ndeps = 0, big[i].params = g_blob + 4096, big[i].params_len = per;
    }
    CHECK(vcuda_graph_encode(big, fit, NULL, 0, &len, why) == VCUDA_OK);
    CHECK(vcuda_graph_encode(big, fit + 1, NULL, 0, &len, why) == VCUDA_E_BAD_VALUE);
    twin_nodes();
}

/* ---- array copy and texture descriptors (proto.h, "arrays") ----------------------- */

static void desc_samples(uint64_t copy[VCUDA_COPY_WORDS], uint64_t tex[VCUDA_TEX_WORDS])
{
    memset(copy, 0, VCUDA_COPY_WORDS * sizeof *copy), memset(tex, 0, VCUDA_TEX_WORDS * sizeof *tex);
    copy[VCUDA_C_SRC_TYPE] = VCUDA_MEM_DEVICE, copy[VCUDA_C_SRC] = 0x7f0000001000ull, copy[VCUDA_C_SRC_PITCH] = 512;
    copy[VCUDA_C_DST_TYPE] = VCUDA_MEM_ARRAY, copy[VCUDA_C_DST] = 3, copy[VCUDA_C_DST_Z] = 2;
    copy[VCUDA_C_WIDTH] = 64, copy[VCUDA_C_HEIGHT] = 4, copy[VCUDA_C_DEPTH] = 1;
    tex[VCUDA_T_RES_TYPE] = VCUDA_RES_PITCH2D, tex[VCUDA_T_RES] = 0x7f0000001000ull, tex[VCUDA_T_FORMAT] = 0x20;
    tex[VCUDA_T_CHANNELS] = 4, tex[VCUDA_T_WIDTH] = 32, tex[VCUDA_T_HEIGHT] = 4, tex[VCUDA_T_PITCH] = 512;
    tex[VCUDA_T_ADDRESS0] = 3, tex[VCUDA_T_FILTER] = 1, tex[VCUDA_T_FLAGS] = 0x42, tex[VCUDA_T_BORDER0] = 0x3f800000;
    tex[VCUDA_T_VIEW] = 1, tex[VCUDA_T_VIEW_FORMAT] = 0x22, tex[VCUDA_T_LAST_LAYER] = 5;
}

static void desc_codec(void)
{
    uint64_t copy[VCUDA_COPY_WORDS], tex[VCUDA_TEX_WORDS], back[VCUDA_TEX_WORDS];
    uint8_t buf[8 * VCUDA_TEX_WORDS + 8];
    size_t len;
    desc_samples(copy, tex);
    CHECK(vcuda_desc_encode(VCUDA_DESC_COPY, copy, buf, sizeof buf, &len, why) == VCUDA_OK && len == 8 * VCUDA_COPY_WORDS);
    CHECK(vcuda_desc_decode(VCUDA_DESC_COPY, buf, len, back, why) == VCUDA_OK && !memcmp(back, copy, sizeof copy));
    CHECK(vcuda_desc_decode(VCUDA_DESC_COPY, buf, len - 1, back, why) == VCUDA_E_BAD_LENGTH);
    CHECK(vcuda_desc_decode(VCUDA_DESC_COPY, buf, len + 8, back, why) == VCUDA_E_BAD_LENGTH);
    CHECK(vcuda_desc_encode(VCUDA_DESC_TEX, tex, buf, 8, &len, why) == VCUDA_E_NO_SPACE && len == 8 * VCUDA_TEX_WORDS);
    CHECK(vcuda_desc_encode(VCUDA_DESC_TEX, tex, buf, sizeof buf, &len, why) == VCUDA_OK);
    CHECK(vcuda_desc_decode(VCUDA_DESC_TEX, buf, len, back, why) == VCUDA_OK && !memcmp(back, tex, sizeof tex));
    /* each out-of-range value refused by both sides (written into the bytes for the decoder) */
    static const struct { int tex, word; uint64_t value; } bad[] = {
        {0, VCUDA_C_SRC_TYPE, 1}, {0, VCUDA_C_DST_TYPE, 4}, {0, VCUDA_C_DEPTH, VCUDA_MAX_SIZE + 1},
        {0, VCUDA_C_SRC_PITCH, UINT64_MAX}, {1, VCUDA_T_RES_TYPE, 1}, {1, VCUDA_T_RES_TYPE, 4}, {1, VCUDA_T_FORMAT, 0x04},
        {1, VCUDA_T_FORMAT, 0xb0}, {1, VCUDA_T_CHANNELS, 3}, {1, VCUDA_T_CHANNELS, 0}, {1, VCUDA_T_ADDRESS2, 4},
        {1, VCUDA_T_FILTER, 2}, {1, VCUDA_T_FLAGS, 0x04}, {1, VCUDA_T_FLAGS, 0x80}, {1, VCUDA_T_MAX_ANISOTROPY, 17},
        {1, VCUDA_T_BORDER3, 1ull << 32}, {1, VCUDA_T_VIEW, 2}, {1, VCUDA_T_VIEW_FORMAT, 0x23},
        {1, VCUDA_T_LAST_LAYER, 1ull << 32}, {1, VCUDA_T_WIDTH, VCUDA_MAX_SIZE + 1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        vcuda_desc_kind k = bad[i].tex ? VCUDA_DESC_TEX : VCUDA_DESC_COPY;
        uint64_t *w = bad[i].tex ? tex : copy;
        desc_samples(copy, tex);
        CHECK(vcuda_desc_encode(k, w, buf, sizeof buf, &len, why) == VCUDA_OK);
        uint64_t keep = w[bad[i].word];
        w[bad[i].word] = bad[i].value;
        CHECK(vcuda_desc_encode(k, w, buf, sizeof buf, &len, why) == VCUDA_E_BAD_VALUE);
        for (int b = 0; b < 8; ++b) buf[8 * bad[i].word + b] = (uint8_t)(bad[i].value >> 8 * b);
        CHECK(vcuda_desc_decode(k, buf, len, back, why) == VCUDA_E_BAD_VALUE);
        printf("descriptor refused as expected: %s\n", why);
        w[bad[i].word] = keep;
    }
    CHECK(vcuda_format_bytes(0x01) == 1 && vcuda_format_bytes(0x10) == 2 && vcuda_format_bytes(0x0a) == 4 &&
          vcuda_format_bytes(0x20) == 4 && vcuda_format_bytes(0x04) == 0);
}

/* gmac_stdin: records of u32 n (little-endian), a 32-byte key, a 12-byte IV and n bytes
 * from stdin until its end; prints "path: ..." (vcuda_mac_impl) and then each record's
 * GCM tag with the n bytes as additional data, in hex, one a line.  The bytes go in
 * pieces whose lengths come from a generator seeded by n: runs of short pieces and long
 * ones, so partial blocks, the bytes that wait and whole groups meet in every way. */
static int gmac_stdin(void)
{
    printf("path: %s\n", vcuda_mac_impl());
    uint8_t hdr[4 + 32 + 12], tag[16];
    size_t cap = 0;
    uint8_t *m = NULL;
    while (fread(hdr, 1, sizeof hdr, stdin) == sizeof hdr) {
        size_t n = (size_t)hdr[0] | (size_t)hdr[1] << 8 | (size_t)hdr[2] << 16 | (size_t)hdr[3] << 24;
        if (n > cap) {
            uint8_t *more = realloc(m, n);
            if (!more) return free(m), fprintf(stderr, "gmac_stdin: out of memory\n"), 2;
            m = more, cap = n;
        }
        if (fread(m, 1, n, stdin) != n) return free(m), fprintf(stderr, "gmac_stdin: a record cut short\n"), 2;
        vcuda_gcm_key k;
        vcuda_aead a;
        vcuda_gcm_init(&k, hdr + 4);
        vcuda_aead_begin(&a, &k, hdr + 36);
        uint64_t r = n * 0x9E3779B97F4A7C15ull + 1;
        for (size_t at = 0; at < n;) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            size_t bound = (r >> 60) & 1 ? 40 : n / 3 + 1, piece = (size_t)(r >> 33) % (bound + 1);
            if (piece > n - at) piece = n - at;
            vcuda_aead_aad(&a, m + at, piece);
            at += piece;
        }
        vcuda_aead_tag(&a, NULL, 0, tag);
        for (int i = 0; i < 16; ++i) printf("%02x", tag[i]);
        printf("\n");
    }
    free(m);
    return ferror(stdin) ? 2 : 0;
}

static int write_corpus(const char *dir)
{
    char path[4096];
    mkdir(dir, 0700);
    for (unsigned op = 0; op < 1024; ++op) {
        if (!vcuda_opcode_name(op)) continue;
        for (int d = 0; d < 3; ++d) {
            size_t n = encode_ok(op, directions[d]);
            snprintf(path, sizeof path, "%s/%s-%d", dir, vcuda_opcode_name(op), d);
            FILE *f = fopen(path, "wb");
            if (!f || fwrite(frame, 1, n, f) != n || fclose(f) != 0) return perror(path), 1;
        }
    }
    /* a GRAPH_INSTANTIATE carrying a real graph, so the fuzzer starts inside the graph codec */
    vcuda_graph_node g[4];
    vcuda_msg m;
    size_t len = 0, n = 0;
    graph_sample(g);
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_GRAPH_INSTANTIATE;
    m.v[0] = 4, m.nv = 1;
    CHECK(vcuda_graph_encode(g, 4, g_blob, sizeof g_blob, &len, why) == VCUDA_OK);
    m.blob = g_blob, m.blob_len = (uint32_t)len;
    CHECK(vcuda_encode(&m, frame, sizeof frame, &n, why) == VCUDA_OK);
    snprintf(path, sizeof path, "%s/GRAPH_INSTANTIATE-graph", dir);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(frame, 1, n, f) != n || fclose(f) != 0) return perror(path), 1;
    /* a GRAPH_TWIN_ADD_NODE carrying a conditional node, likewise */
    vcuda_graph_node t[3];
    twin_sample(t);
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_GRAPH_TWIN_ADD_NODE;
    m.v[0] = 1, m.v[1] = 7, m.nv = 2;
    CHECK(vcuda_graph_encode_from(t, 7, 1, g_blob, sizeof g_blob, &len, why) == VCUDA_OK);
    m.blob = g_blob, m.blob_len = (uint32_t)len;
    CHECK(vcuda_encode(&m, frame, sizeof frame, &n, why) == VCUDA_OK);
    snprintf(path, sizeof path, "%s/GRAPH_TWIN_ADD_NODE-node", dir);
    f = fopen(path, "wb");
    if (!f || fwrite(frame, 1, n, f) != n || fclose(f) != 0) return perror(path), 1;
    /* a MEMCPY_3D and a TEX_CREATE with valid descriptors, for the descriptor decoder */
    uint64_t copy[VCUDA_COPY_WORDS], tex[VCUDA_TEX_WORDS];
    static uint8_t desc[8 * VCUDA_TEX_WORDS];
    desc_samples(copy, tex);
    for (int k = 0; k < 2; ++k) {
        memset(&m, 0, sizeof m);
        m.hdr.opcode = k ? VCUDA_OP_TEX_CREATE : VCUDA_OP_MEMCPY_3D;
        if (!k) m.v[0] = 5, m.nv = 1;
        CHECK(vcuda_desc_encode(k ? VCUDA_DESC_TEX : VCUDA_DESC_COPY, k ? tex : copy, desc, sizeof desc, &len, why) == VCUDA_OK);
        m.blob = desc, m.blob_len = (uint32_t)len;
        CHECK(vcuda_encode(&m, frame, sizeof frame, &n, why) == VCUDA_OK);
        snprintf(path, sizeof path, "%s/%s-descriptor", dir, k ? "TEX_CREATE" : "MEMCPY_3D");
        f = fopen(path, "wb");
        if (!f || fwrite(frame, 1, n, f) != n || fclose(f) != 0) return perror(path), 1;
    }
    return failures != 0;
}

int main(int argc, char **argv)
{
    static const struct { const char *name; void (*fn)(void); } cases[] = {
        {"layout_table", layout_table}, {"roundtrip_all_opcodes", roundtrip_all_opcodes},
        {"header_bytes", header_bytes}, {"reject_header", reject_header},
        {"reject_payload_length", reject_payload_length}, {"reject_counts", reject_counts},
        {"reject_strings", reject_strings}, {"reject_values", reject_values},
        {"chunking", chunking}, {"token_equal", token_equal}, {"token_file", token_file}, {"sha256", sha256},
        {"graph_codec", graph_codec}, {"desc_codec", desc_codec}, {"mac_vectors", mac_vectors},
        {"mac_pieces", mac_pieces}, {"mac_session", mac_session}};
    if (argc == 3 && !strcmp(argv[1], "write_corpus")) return write_corpus(argv[2]);
    if (argc == 2 && !strcmp(argv[1], "gmac_stdin")) return gmac_stdin();
    for (size_t i = 0; argc == 2 && i < sizeof cases / sizeof cases[0]; ++i)
        if (!strcmp(argv[1], cases[i].name)) {
            cases[i].fn();
            printf("%s: %s (%d failed checks)\n", argv[1], failures ? "FAIL" : "PASS", failures);
            return failures != 0;
        }
    fprintf(stderr, "usage: %s CASE | write_corpus DIR | gmac_stdin\n", argv[0]);
    return 2;
}

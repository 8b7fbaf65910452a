/* vcuda frame authentication (see mac.h): ChaCha20 and Poly1305 from RFC 8439's
 * definitions, checked against its test vectors in tests/test_proto.c. */
#include "vcuda/mac.h"

#include "vcuda/sha256.h"

#include <stdio.h>
#include <string.h>

typedef unsigned __int128 u128;

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t le64(const uint8_t *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }
static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; ++i) p[i] = (uint8_t)(v >> 8 * i);
}
static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; ++i) p[i] = (uint8_t)(v >> 8 * i);
}

/* ---- ChaCha20 (RFC 8439 2.3) ------------------------------------------------------- */

#define ROTL(x, n) (((x) << (n)) | ((x) >> (32 - (n))))
#define QR(a, b, c, d)                                                                         \
    (a += b, d ^= a, d = ROTL(d, 16), c += d, b ^= c, b = ROTL(b, 12), a += b, d ^= a,        \
     d = ROTL(d, 8), c += d, b ^= c, b = ROTL(b, 7))

void vcuda_chacha20_block(const uint8_t key[VCUDA_KEY_SIZE], uint32_t counter, const uint8_t nonce[12],
                          uint8_t out[64])
{
    uint32_t in[16] = {0x61707865, 0x3320646e, 0x79622d32, 0x6b206574}, x[16];
    for (int i = 0; i < 8; ++i) in[4 + i] = le32(key + 4 * i);
    in[12] = counter;
    for (int i = 0; i < 3; ++i) in[13 + i] = le32(nonce + 4 * i);
    memcpy(x, in, sizeof x);
    for (int i = 0; i < 10; ++i) { /* a column round and a diagonal round */
        QR(x[0], x[4], x[8], x[12]), QR(x[1], x[5], x[9], x[13]);
        QR(x[2], x[6], x[10], x[14]), QR(x[3], x[7], x[11], x[15]);
        QR(x[0], x[5], x[10], x[15]), QR(x[1], x[6], x[11], x[12]);
        QR(x[2], x[7], x[8], x[13]), QR(x[3], x[4], x[9], x[14]);
    }
    for (int i = 0; i < 16; ++i) put32(out + 4 * i, x[i] + in[i]);
}

/* ---- Poly1305 (RFC 8439 2.5), h and r in radix 2^64 -------------------------------- *
 * h = h0 + h1 2^64 + h2 2^128, r = r0 + r1 2^64.  Modulo p = 2^130 - 5, 2^130 is 5, so
 * the product's 2^128 r1 terms fold in as 5 r1 / 4 = s1 (exact: clamping clears r1's
 * low two bits), and the bits above 2^130 of the result fold back as 5 times their
 * value: h stays below 2^131 between blocks, fully reduced only in final. */

static void blocks(vcuda_poly1305 *p, const uint8_t *m, size_t n, uint64_t hibit)
{
    const uint64_t r0 = p->r0, r1 = p->r1, s1 = p->s1;
    uint64_t h0 = p->h0, h1 = p->h1, h2 = p->h2;
    for (; n >= 16; m += 16, n -= 16) {
        u128 t = (u128)h0 + le64(m);
        h0 = (uint64_t)t;
        t = (u128)h1 + le64(m + 8) + (uint64_t)(t >> 64);
        h1 = (uint64_t)t;
        h2 += (uint64_t)(t >> 64) + hibit;
        u128 d0 = (u128)h0 * r0 + (u128)h1 * s1;
        u128 d1 = (u128)h0 * r1 + (u128)h1 * r0 + (u128)(h2 * s1);
        h2 *= r0;
        h0 = (uint64_t)d0;
        d1 += (uint64_t)(d0 >> 64);
        h1 = (uint64_t)d1;
        h2 += (uint64_t)(d1 >> 64);
        uint64_t c = (h2 >> 2) + (h2 & ~(uint64_t)3); /* 5 x (the bits above 2^130) */
        h2 &= 3;
        t = (u128)h0 + c;
        h0 = (uint64_t)t;
        t = (u128)h1 + (uint64_t)(t >> 64);
        h1 = (uint64_t)t;
        h2 += (uint64_t)(t >> 64);
    }
    p->h0 = h0, p->h1 = h1, p->h2 = h2;
}

/* ---- Poly1305, four blocks at a time (AVX2) ------------------------------------------ *
 * Four interleaved accumulators, lane j taking blocks j, j+4, j+8, ...: each step adds
 * four blocks and multiplies every lane by r^4; the last step multiplies the lanes by
 * r^4, r^3, r^2, r instead, so that their sum is the sequential result.  26-bit limbs
 * (vpmuludq takes 32-bit operands): 2^130 = 5 mod p folds the products above limb 4
 * back as 5 times the multiplier's limbs. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_AVX2_PATH 1
#define M26 0x3ffffffu

static void to26(uint64_t h0, uint64_t h1, uint64_t h2, uint64_t l[5])
{
    l[0] = h0 & M26, l[1] = (h0 >> 26) & M26, l[2] = ((h0 >> 52) | (h1 << 12)) & M26;
    l[3] = (h1 >> 14) & M26, l[4] = (h1 >> 40) | (h2 << 24);
}

/* a * b mod p in 26-bit limbs (limbs up to a few bits over 26 in, the same out: carried once) */
static void mul26(const uint64_t a[5], const uint64_t b[5], uint64_t o[5])
{
    const uint64_t s1 = b[1] * 5, s2 = b[2] * 5, s3 = b[3] * 5, s4 = b[4] * 5;
    u128 d[5] = {(u128)a[0] * b[0] + (u128)a[1] * s4 + (u128)a[2] * s3 + (u128)a[3] * s2 + (u128)a[4] * s1,
                 (u128)a[0] * b[1] + (u128)a[1] * b[0] + (u128)a[2] * s4 + (u128)a[3] * s3 + (u128)a[4] * s2,
                 (u128)a[0] * b[2] + (u128)a[1] * b[1] + (u128)a[2] * b[0] + (u128)a[3] * s4 + (u128)a[4] * s3,
                 (u128)a[0] * b[3] + (u128)a[1] * b[2] + (u128)a[2] * b[1] + (u128)a[3] * b[0] + (u128)a[4] * s4,
                 (u128)a[0] * b[4] + (u128)a[1] * b[3] + (u128)a[2] * b[2] + (u128)a[3] * b[1] + (u128)a[4] * b[0]};
    uint64_t c = 0;
    for (int i = 0; i < 5; ++i) d[i] += c, o[i] = (uint64_t)d[i] & M26, c = (uint64_t)(d[i] >> 26);
    o[0] += c * 5, c = o[0] >> 26, o[0] &= M26, o[1] += c;
}

__attribute__((target("avx2"))) static void blocks4(vcuda_poly1305 *p, const uint8_t *m, size_t n)
{
    if (!p->have_pw) { /* r, r^2, r^3, r^4 once per key */
        uint64_t r[4][5];
        to26(p->r0, p->r1, 0, r[0]);
        mul26(r[0], r[0], r[1]), mul26(r[1], r[0], r[2]), mul26(r[1], r[1], r[3]);
        for (int k = 0; k < 4; ++k)
            for (int i = 0; i < 5; ++i) p->pw[k][i] = (uint32_t)r[k][i];
        p->have_pw = 1;
    }
    uint64_t h[5];
    to26(p->h0, p->h1, p->h2, h);
    const __m256i mask = _mm256_set1_epi64x(M26), hibit = _mm256_set1_epi64x(1 << 24);
    __m256i R[5], S[5], H[5];
    for (int i = 0; i < 5; ++i) {
        R[i] = _mm256_set1_epi64x(p->pw[3][i]), S[i] = _mm256_set1_epi64x(5ll * p->pw[3][i]);
        H[i] = _mm256_set_epi64x(0, 0, 0, (long long)h[i]); /* the state so far goes into lane 0 */
    }
#define MUL(x, y) _mm256_mul_epu32(x, y)
#define ADD(x, y) _mm256_add_epi64(x, y)
#define CARRY(a, b) (c = _mm256_srli_epi64(a, 26), a = _mm256_and_si256(a, mask), b = ADD(b, c))
    for (; n >= 64; m += 64, n -= 64) {
        /* four blocks, transposed: lane j gets block j's low and high 64 bits */
        __m256i a = _mm256_loadu_si256((const __m256i *)m), b = _mm256_loadu_si256((const __m256i *)(m + 32));
        __m256i lo = _mm256_permute4x64_epi64(_mm256_unpacklo_epi64(a, b), 0xd8);
        __m256i hi = _mm256_permute4x64_epi64(_mm256_unpackhi_epi64(a, b), 0xd8);
        H[0] = ADD(H[0], _mm256_and_si256(lo, mask));
        H[1] = ADD(H[1], _mm256_and_si256(_mm256_srli_epi64(lo, 26), mask));
        H[2] = ADD(H[2], _mm256_and_si256(_mm256_or_si256(_mm256_srli_epi64(lo, 52), _mm256_slli_epi64(hi, 12)), mask));
        H[3] = ADD(H[3], _mm256_and_si256(_mm256_srli_epi64(hi, 14), mask));
        H[4] = ADD(H[4], _mm256_or_si256(_mm256_srli_epi64(hi, 40), hibit));
        if (n < 128) /* the last step: lane j by r^(4-j) */
            for (int i = 0; i < 5; ++i) {
                R[i] = _mm256_set_epi64x(p->pw[0][i], p->pw[1][i], p->pw[2][i], p->pw[3][i]);
                S[i] = _mm256_set_epi64x(5ll * p->pw[0][i], 5ll * p->pw[1][i], 5ll * p->pw[2][i], 5ll * p->pw[3][i]);
            }
        __m256i d0 = ADD(ADD(ADD(MUL(H[0], R[0]), MUL(H[1], S[4])), ADD(MUL(H[2], S[3]), MUL(H[3], S[2]))), MUL(H[4], S[1]));
        __m256i d1 = ADD(ADD(ADD(MUL(H[0], R[1]), MUL(H[1], R[0])), ADD(MUL(H[2], S[4]), MUL(H[3], S[3]))), MUL(H[4], S[2]));
        __m256i d2 = ADD(ADD(ADD(MUL(H[0], R[2]), MUL(H[1], R[1])), ADD(MUL(H[2], R[0]), MUL(H[3], S[4]))), MUL(H[4], S[3]));
        __m256i d3 = ADD(ADD(ADD(MUL(H[0], R[3]), MUL(H[1], R[2])), ADD(MUL(H[2], R[1]), MUL(H[3], R[0]))), MUL(H[4], S[4]));
        __m256i d4 = ADD(ADD(ADD(MUL(H[0], R[4]), MUL(H[1], R[3])), ADD(MUL(H[2], R[2]), MUL(H[3], R[1]))), MUL(H[4], R[0]));
        __m256i c;
        CARRY(d0, d1), CARRY(d3, d4), CARRY(d1, d2);
        c = _mm256_srli_epi64(d4, 26), d4 = _mm256_and_si256(d4, mask), d0 = ADD(d0, ADD(c, _mm256_slli_epi64(c, 2)));
        CARRY(d2, d3), CARRY(d0, d1), CARRY(d3, d4);
        H[0] = d0, H[1] = d1, H[2] = d2, H[3] = d3, H[4] = d4;
    }
#undef MUL
#undef ADD
#undef CARRY
    /* the lanes' sum, carried, back into radix 2^64 (below 2^131: the scalar code's bound) */
    uint64_t t[5][4], o[5], c = 0;
    for (int i = 0; i < 5; ++i) _mm256_storeu_si256((__m256i *)t[i], H[i]);
    for (int i = 0; i < 5; ++i) {
        u128 l = (u128)t[i][0] + t[i][1] + t[i][2] + t[i][3] + c;
        o[i] = (uint64_t)l & M26, c = (uint64_t)(l >> 26);
    }
    o[0] += c * 5; /* (limbs may exceed 26 bits a little: the sums below add, never OR) */
    u128 v = (u128)o[0] + ((u128)o[1] << 26) + ((u128)o[2] << 52);
    p->h0 = (uint64_t)v;
    v = (v >> 64) + ((u128)o[3] << 14) + ((u128)o[4] << 40); /* o3 2^78, o4 2^104, over 2^64 */
    p->h1 = (uint64_t)v, p->h2 = (uint64_t)(v >> 64);
}

static int avx2_ok(void)
{
    static int ok = -1; /* the CPU does not change under us: a benign race at worst */
    if (ok < 0) ok = __builtin_cpu_supports("avx2") ? 1 : 0;
    return ok;
}
#endif

/* Whole blocks: four at a time where that pays (runs of 512 bytes and more, AVX2). */
static void whole_blocks(vcuda_poly1305 *p, const uint8_t *m, size_t n)
{
#ifdef HAVE_AVX2_PATH
    if (n >= 512 && avx2_ok()) {
        size_t k = n & ~(size_t)63;
        blocks4(p, m, k);
        m += k, n -= k;
    }
#endif
    if (n) blocks(p, m, n, 1);
}

void vcuda_poly1305_init(vcuda_poly1305 *p, const uint8_t key[VCUDA_KEY_SIZE])
{
    p->r0 = le64(key) & 0x0ffffffc0fffffffull; /* RFC 8439's clamp */
    p->r1 = le64(key + 8) & 0x0ffffffc0ffffffcull;
    p->s1 = p->r1 + (p->r1 >> 2);
    p->h0 = p->h1 = p->h2 = 0;
    p->k0 = le64(key + 16), p->k1 = le64(key + 24);
    p->nbuf = 0;
    p->have_pw = 0;
}

void vcuda_poly1305_update(vcuda_poly1305 *p, const void *msg, size_t n)
{
    const uint8_t *m = msg;
    if (p->nbuf) { /* complete the block a previous piece left open */
        size_t k = 16 - p->nbuf < n ? 16 - p->nbuf : n;
        memcpy(p->buf + p->nbuf, m, k);
        p->nbuf += k, m += k, n -= k;
        if (p->nbuf < 16) return;
        blocks(p, p->buf, 16, 1);
        p->nbuf = 0;
    }
    size_t whole = n & ~(size_t)15;
    if (whole) whole_blocks(p, m, whole); /* straight from where the bytes lie */
    if (n > whole) memcpy(p->buf, m + whole, n - whole), p->nbuf = n - whole;
}

void vcuda_poly1305_final(vcuda_poly1305 *p, uint8_t tag[VCUDA_TAG_SIZE])
{
    if (p->nbuf) { /* the last, short block: its bytes, a 1, zeros (and no 2^128 bit) */
        p->buf[p->nbuf] = 1;
        memset(p->buf + p->nbuf + 1, 0, 15 - p->nbuf);
        blocks(p, p->buf, 16, 0);
    }
    /* h mod p: h + 5 reaches 2^130 exactly when h >= p; then h - p is the low bits of h + 5 */
    u128 t = (u128)p->h0 + 5;
    uint64_t g0 = (uint64_t)t;
    t = (u128)p->h1 + (uint64_t)(t >> 64);
    uint64_t g1 = (uint64_t)t, g2 = p->h2 + (uint64_t)(t >> 64);
    uint64_t take = 0 - (g2 >> 2); /* all ones if h >= p: no branch on the secret */
    uint64_t h0 = (p->h0 & ~take) | (g0 & take), h1 = (p->h1 & ~take) | (g1 & take);
    t = (u128)h0 + p->k0;
    put64(tag, (uint64_t)t);
    put64(tag + 8, h1 + p->k1 + (uint64_t)(t >> 64));
}

/* ---- the AEAD tag (RFC 8439 2.8) --------------------------------------------------- */

static const uint8_t zeros[16];

void vcuda_aead_otk(const uint8_t key[VCUDA_KEY_SIZE], const uint8_t nonce[12], uint8_t otk[VCUDA_KEY_SIZE])
{
    uint8_t block[64];
    vcuda_chacha20_block(key, 0, nonce, block); /* 2.6: the one-time key is its first half */
    memcpy(otk, block, VCUDA_KEY_SIZE);
}

void vcuda_aead_start(vcuda_aead *a, const uint8_t otk[VCUDA_KEY_SIZE])
{
    vcuda_poly1305_init(&a->p, otk);
    a->aad_len = 0;
}

void vcuda_aead_begin(vcuda_aead *a, const uint8_t key[VCUDA_KEY_SIZE], const uint8_t nonce[12])
{
    uint8_t otk[VCUDA_KEY_SIZE];
    vcuda_aead_otk(key, nonce, otk);
    vcuda_aead_start(a, otk);
}

void vcuda_aead_aad(vcuda_aead *a, const void *p, size_t n)
{
    vcuda_poly1305_update(&a->p, p, n);
    a->aad_len += n;
}

void vcuda_aead_tag(vcuda_aead *a, const uint8_t *ct, size_t ct_len, uint8_t tag[VCUDA_TAG_SIZE])
{
    uint8_t lens[16];
    vcuda_poly1305_update(&a->p, zeros, (16 - a->aad_len % 16) % 16);
    if (ct_len) vcuda_poly1305_update(&a->p, ct, ct_len);
    vcuda_poly1305_update(&a->p, zeros, (16 - ct_len % 16) % 16);
    put64(lens, a->aad_len), put64(lens + 8, (uint64_t)ct_len);
    vcuda_poly1305_update(&a->p, lens, 16);
    vcuda_poly1305_final(&a->p, tag);
}

int vcuda_tag_equal(const uint8_t a[VCUDA_TAG_SIZE], const uint8_t b[VCUDA_TAG_SIZE])
{
    /* both halves always, no early exit: volatile keeps the compiler from testing the
     * first half on its own (which would tell a forger how much of a guess was right) */
    volatile uint64_t diff = le64(a) ^ le64(b);
    diff = diff | (le64(a + 8) ^ le64(b + 8));
    return diff == 0;
}

/* ---- the session ------------------------------------------------------------------- */

void vcuda_session_start(vcuda_session *s, int server, const uint8_t *token, size_t token_len,
                         const uint8_t nc[VCUDA_NONCE_SIZE], const uint8_t ns[VCUDA_NONCE_SIZE],
                         uint32_t heartbeat_ms, uint32_t device, const char *peer)
{
    uint8_t msg[13 + 2 * VCUDA_NONCE_SIZE + 8];
    memcpy(msg, "vcuda session", 13); /* a label of its own: never equal to a proof */
    memcpy(msg + 13, nc, VCUDA_NONCE_SIZE);
    memcpy(msg + 13 + VCUDA_NONCE_SIZE, ns, VCUDA_NONCE_SIZE);
    put32(msg + 13 + 2 * VCUDA_NONCE_SIZE, heartbeat_ms);
    put32(msg + 17 + 2 * VCUDA_NONCE_SIZE, device);
    vcuda_hmac_sha256(token, token_len, msg, sizeof msg, s->key);
    s->tx_dir = server ? 1 : 0, s->rx_dir = server ? 0 : 1;
    s->sent = s->received = 0;
    s->tx_ahead = s->rx_ahead = UINT64_MAX;
    if (peer) snprintf(s->peer, sizeof s->peer, "%s", peer);
}

/* A frame's one-time key: ChaCha20 block 0 under the session key, nonce = direction
 * word || sequence number. */
static void one_time_key(const vcuda_session *s, uint32_t dir, uint64_t seq, uint8_t otk[VCUDA_KEY_SIZE])
{
    uint8_t nonce[12];
    put32(nonce, dir), put64(nonce + 4, seq);
    vcuda_aead_otk(s->key, nonce, otk);
}

void vcuda_session_prepare(vcuda_session *s)
{
    if (s->tx_ahead != s->sent) one_time_key(s, s->tx_dir, s->sent, s->tx_otk), s->tx_ahead = s->sent;
    if (s->rx_ahead != s->received) one_time_key(s, s->rx_dir, s->received, s->rx_otk), s->rx_ahead = s->received;
}

void vcuda_session_begin(vcuda_session *s, int tx, vcuda_aead *x)
{
    uint8_t otk[VCUDA_KEY_SIZE];
    uint64_t seq = tx ? s->sent : s->received;
    if ((tx ? s->tx_ahead : s->rx_ahead) == seq) memcpy(otk, tx ? s->tx_otk : s->rx_otk, sizeof otk); /* made ahead */
    else one_time_key(s, tx ? s->tx_dir : s->rx_dir, seq, otk);
    vcuda_aead_start(x, otk);
}

void vcuda_session_seal_end(vcuda_session *s, vcuda_aead *x, uint8_t tag[VCUDA_TAG_SIZE])
{
    vcuda_aead_tag(x, NULL, 0, tag);
    ++s->sent;
}

int vcuda_session_open_end(vcuda_session *s, vcuda_aead *x, const uint8_t tag[VCUDA_TAG_SIZE], char *why)
{
    uint8_t want[VCUDA_TAG_SIZE];
    vcuda_aead_tag(x, NULL, 0, want);
    if (!vcuda_tag_equal(want, tag))
        return vcuda_fail(why, 0, "frame %llu from %s: bad authentication tag (injected, replayed or corrupted)",
                          (unsigned long long)s->received, s->peer[0] ? s->peer : "peer");
    ++s->received;
    return 1;
}

void vcuda_session_seal(vcuda_session *s, const void *a, size_t an, const void *b, size_t bn,
                        uint8_t tag[VCUDA_TAG_SIZE])
{
    vcuda_aead x;
    vcuda_session_begin(s, 1, &x);
    vcuda_aead_aad(&x, a, an);
    if (bn) vcuda_aead_aad(&x, b, bn);
    vcuda_session_seal_end(s, &x, tag);
}

int vcuda_session_open(vcuda_session *s, const void *a, size_t an, const void *b, size_t bn,
                       const uint8_t tag[VCUDA_TAG_SIZE], char *why)
{
    vcuda_aead x;
    vcuda_session_begin(s, 0, &x);
    vcuda_aead_aad(&x, a, an);
    if (bn) vcuda_aead_aad(&x, b, bn);
    return vcuda_session_open_end(s, &x, tag, why);
}

vcuda_status vcuda_encode_sealed(vcuda_session *s, const vcuda_msg *m, uint8_t *buf, size_t cap, size_t *len,
                                 char *why)
{
    size_t extra = s ? VCUDA_TAG_SIZE : 0, n = 0;
    vcuda_status st = vcuda_encode(m, buf, cap >= extra ? cap - extra : 0, &n, why);
    *len = n + extra;
    if (st || !s) return st;
    vcuda_session_seal(s, buf, n, NULL, 0, buf + n);
    return VCUDA_OK;
}

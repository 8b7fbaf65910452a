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

void vcuda_poly1305_init(vcuda_poly1305 *p, const uint8_t key[VCUDA_KEY_SIZE])
{
    p->r0 = le64(key) & 0x0ffffffc0fffffffull; /* RFC 8439's clamp */
    p->r1 = le64(key + 8) & 0x0ffffffc0ffffffcull;
    p->s1 = p->r1 + (p->r1 >> 2);
    p->h0 = p->h1 = p->h2 = 0;
    p->k0 = le64(key + 16), p->k1 = le64(key + 24);
    p->nbuf = 0;
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
    if (whole) blocks(p, m, whole, 1); /* straight from where the bytes lie */
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

/* vcuda frame authentication (see mac.h): AES-256 (FIPS 197) and GCM's GHASH (NIST SP
 * 800-38D) with the CPU's instructions where it has them and a portable constant-time
 * path elsewhere, checked against NIST's vectors and Python's cryptography package in
 * tests/test_proto.c and tests/test_mac.py.
 *
 * GHASH arithmetic, all paths.  A block's 16 bytes read big-endian are a 128-bit
 * integer whose bit 127-i is the coefficient of x^i (GCM's bit order).  The carry-less
 * product of two such integers A, B, taken as 256 bits (Q3 Q2 Q1 Q0, 64 each, Q0 low),
 * holds x * a * b with bit 255-m the coefficient of x^m: one x too many, so every
 * stored power of H is H x^-1 ("twisted": a one-bit shift, and x^-1 = x^127 + x^6 + x + 1
 * folded in when x^0 shifts out), and a product with it is a * H exactly.  Reducing the
 * 256 bits modulo g = x^128 + x^7 + x^2 + x + 1 folds 64 coefficients at a time from
 * the top degrees (Q0, then Q1) down by 128: x^128 = 1 + x c with c = 1 + x + x^6, whose
 * 64-bit reflection is 0xC2 << 56 -- two carry-less 64 x 64 products by that constant,
 * each giving its qword to the two above it. */
#include "vcuda/mac.h"

#include "vcuda/sha256.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned __int128 u128;

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t le64(const uint8_t *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }
static uint64_t be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = v << 8 | p[i];
    return v;
}
static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; ++i) p[i] = (uint8_t)(v >> 8 * i);
}
static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; ++i) p[i] = (uint8_t)(v >> 8 * i);
}
static void putbe64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; ++i) p[i] = (uint8_t)(v >> (56 - 8 * i));
}

#define GCM_C 0xC200000000000000ull /* x^128 = 1 + x c mod g, c reflected (see above) */
#define GROUP VCUDA_GHASH_GROUP       /* blocks per reduction with the instructions */

/* ---- portable AES, bitsliced --------------------------------------------------------- *
 * Eight 32-bit words: word i holds bit i of every byte, byte j of the first block at
 * bit j, of the second at bit 16 + j (byte j = row j % 4, column j / 4).  SubBytes is
 * GF(2^8) inversion as x^254 (four multiplies, seven squarings) and the affine map;
 * ShiftRows and MixColumns move bits within the 4-bit columns and 16-bit blocks. */

/* An 8 x 8 bit matrix (byte r = row r) transposed: bit 8r + c <-> bit 8c + r. */
static uint64_t transpose8(uint64_t x)
{
    uint64_t t;
    t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAull, x ^= t ^ (t << 7);
    t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCull, x ^= t ^ (t << 14);
    t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ull, x ^= t ^ (t << 28);
    return x;
}

static void bs_in(uint32_t s[8], const uint8_t *b0, const uint8_t *b1)
{
    const uint8_t *blk[2] = {b0, b1};
    memset(s, 0, 8 * sizeof *s);
    for (int b = 0; b < 2; ++b)
        for (int half = 0; half < 2; ++half) {
            uint64_t t = transpose8(le64(blk[b] + 8 * half));
            for (int i = 0; i < 8; ++i) s[i] |= (uint32_t)((t >> 8 * i) & 0xff) << (16 * b + 8 * half);
        }
}

static void bs_out(const uint32_t s[8], uint8_t *b0, uint8_t *b1)
{
    uint8_t *blk[2] = {b0, b1};
    for (int b = 0; b < 2; ++b)
        for (int half = 0; b < 2 && blk[b] && half < 2; ++half) {
            uint64_t t = 0;
            for (int i = 0; i < 8; ++i) t |= (uint64_t)((s[i] >> (16 * b + 8 * half)) & 0xff) << 8 * i;
            put64(blk[b] + 8 * half, transpose8(t));
        }
}

/* GF(2^8) modulo x^8 + x^4 + x^3 + x + 1, bitsliced: the 15 product terms, then
 * x^k for k >= 8 folded as x^(k-8) (x^4 + x^3 + x + 1), from the top down. */
static void gf8_mul(const uint32_t a[8], const uint32_t b[8], uint32_t o[8])
{
#define AB(i, j) (a[i] & b[j])
    uint32_t t0 = AB(0, 0), t1 = AB(0, 1) ^ AB(1, 0), t2 = AB(0, 2) ^ AB(1, 1) ^ AB(2, 0);
    uint32_t t3 = AB(0, 3) ^ AB(1, 2) ^ AB(2, 1) ^ AB(3, 0), t4 = AB(0, 4) ^ AB(1, 3) ^ AB(2, 2) ^ AB(3, 1) ^ AB(4, 0);
    uint32_t t5 = AB(0, 5) ^ AB(1, 4) ^ AB(2, 3) ^ AB(3, 2) ^ AB(4, 1) ^ AB(5, 0);
    uint32_t t6 = AB(0, 6) ^ AB(1, 5) ^ AB(2, 4) ^ AB(3, 3) ^ AB(4, 2) ^ AB(5, 1) ^ AB(6, 0);
    uint32_t t7 = AB(0, 7) ^ AB(1, 6) ^ AB(2, 5) ^ AB(3, 4) ^ AB(4, 3) ^ AB(5, 2) ^ AB(6, 1) ^ AB(7, 0);
    uint32_t t8 = AB(1, 7) ^ AB(2, 6) ^ AB(3, 5) ^ AB(4, 4) ^ AB(5, 3) ^ AB(6, 2) ^ AB(7, 1);
    uint32_t t9 = AB(2, 7) ^ AB(3, 6) ^ AB(4, 5) ^ AB(5, 4) ^ AB(6, 3) ^ AB(7, 2);
    uint32_t t10 = AB(3, 7) ^ AB(4, 6) ^ AB(5, 5) ^ AB(6, 4) ^ AB(7, 3);
    uint32_t t11 = AB(4, 7) ^ AB(5, 6) ^ AB(6, 5) ^ AB(7, 4);
    uint32_t t12 = AB(5, 7) ^ AB(6, 6) ^ AB(7, 5), t13 = AB(6, 7) ^ AB(7, 6), t14 = AB(7, 7);
#undef AB
    t10 ^= t14, t9 ^= t14, t7 ^= t14, t6 ^= t14;
    t9 ^= t13, t8 ^= t13, t6 ^= t13, t5 ^= t13;
    t8 ^= t12, t7 ^= t12, t5 ^= t12, t4 ^= t12;
    t7 ^= t11, t6 ^= t11, t4 ^= t11, t3 ^= t11;
    t6 ^= t10, t5 ^= t10, t3 ^= t10, t2 ^= t10;
    t5 ^= t9, t4 ^= t9, t2 ^= t9, t1 ^= t9;
    t4 ^= t8, t3 ^= t8, t1 ^= t8, t0 ^= t8;
    o[0] = t0, o[1] = t1, o[2] = t2, o[3] = t3, o[4] = t4, o[5] = t5, o[6] = t6, o[7] = t7;
}

/* a^2: bit i of a goes to x^2i, which for i >= 4 is x^8 = 0x1b, x^10 = 0x6c,
 * x^12 = 0xab, x^14 = 0x9a. */
static void gf8_sq(const uint32_t a[8], uint32_t o[8])
{
    uint32_t r[8] = {a[0] ^ a[4] ^ a[6], a[4] ^ a[6] ^ a[7], a[1] ^ a[5], a[4] ^ a[5] ^ a[6] ^ a[7],
                     a[2] ^ a[4] ^ a[7], a[5] ^ a[6],        a[3] ^ a[5], a[6] ^ a[7]};
    memcpy(o, r, sizeof r);
}

static void bs_sbox(uint32_t s[8])
{
    uint32_t x2[8], x3[8], x12[8], t[8], u[8];
    gf8_sq(s, x2), gf8_mul(x2, s, x3);
    gf8_sq(x3, t), gf8_sq(t, x12);
    gf8_mul(x12, x3, t);                                   /* x^15 */
    gf8_sq(t, u), gf8_sq(u, t), gf8_sq(t, u), gf8_sq(u, t); /* x^240 */
    gf8_mul(t, x12, u), gf8_mul(u, x2, t);                 /* x^252, x^254 = 1/x (0 for 0) */
    for (int i = 0; i < 8; ++i) /* FIPS 197 5.1.1: b_i + b_i+4 + b_i+5 + b_i+6 + b_i+7 + 0x63_i */
        s[i] = t[i] ^ t[(i + 4) % 8] ^ t[(i + 5) % 8] ^ t[(i + 6) % 8] ^ t[(i + 7) % 8] ^
               (0x63 >> i & 1 ? 0xffffffffu : 0);
}

/* Row r (bits r, r+4, r+8, r+12 of each block) rotated by r columns: 4r bits right. */
static void bs_shiftrows(uint32_t s[8])
{
    for (int i = 0; i < 8; ++i) {
        uint32_t v = s[i], r1 = v & 0x22222222u, r2 = v & 0x44444444u, r3 = v & 0x88888888u;
        s[i] = (v & 0x11111111u) | ((r1 >> 4) & 0x0fff0fffu) | ((r1 << 12) & 0xf000f000u) |
               ((r2 >> 8) & 0x00ff00ffu) | ((r2 << 8) & 0xff00ff00u) | ((r3 << 4) & 0xfff0fff0u) |
               ((r3 >> 12) & 0x000f000fu);
    }
}

/* out_r = 2 (a_r + a_r+1) + a_r+1 + a_r+2 + a_r+3 in each column (a 4-bit group). */
static void bs_mixcolumns(uint32_t s[8])
{
    uint32_t r1[8], t[8];
    for (int i = 0; i < 8; ++i) {
        r1[i] = ((s[i] >> 1) & 0x77777777u) | ((s[i] << 3) & 0x88888888u);
        t[i] = s[i] ^ r1[i];
    }
    const uint32_t x2[8] = {t[7], t[0] ^ t[7], t[1], t[2] ^ t[7], t[3] ^ t[7], t[4], t[5], t[6]};
    for (int i = 0; i < 8; ++i)
        s[i] = x2[i] ^ r1[i] ^ ((t[i] >> 2) & 0x33333333u) ^ ((t[i] << 2) & 0xccccccccu);
}

static void bs_encrypt(const uint32_t rk[15][8], uint32_t s[8])
{
    for (int i = 0; i < 8; ++i) s[i] ^= rk[0][i];
    for (int r = 1; r < 15; ++r) {
        bs_sbox(s);
        bs_shiftrows(s);
        if (r < 14) bs_mixcolumns(s);
        for (int i = 0; i < 8; ++i) s[i] ^= rk[r][i];
    }
}

static void sub_word_portable(uint8_t w[4])
{
    uint8_t b[16] = {w[0], w[1], w[2], w[3]};
    uint32_t s[8];
    bs_in(s, b, b);
    bs_sbox(s);
    bs_out(s, b, NULL);
    memcpy(w, b, 4);
}

/* ---- portable GHASH ------------------------------------------------------------------ *
 * A carry-less 64 x 64 product from integer multiplies: each operand split into five
 * parts holding every fifth bit, so a part-by-part product sums at most 13 one-bit
 * terms into each kept position and its carries stay inside the four bits above it,
 * which belong to the other parts' positions and are masked off. */

static const uint64_t M5[5] = {0x1084210842108421ull, 0x2108421084210842ull, 0x4210842108421084ull,
                               0x8421084210842108ull, 0x0842108421084210ull};

/* The parts of b, each thinned to every fifth bit. */
static void thin(uint64_t b, uint64_t bm[5])
{
    for (int i = 0; i < 5; ++i) bm[i] = b & M5[i];
}

static u128 clmul64(uint64_t a, const uint64_t bm[5])
{
    const uint64_t a0 = a & M5[0], a1 = a & M5[1], a2 = a & M5[2], a3 = a & M5[3], a4 = a & M5[4];
#define P(i, j) ((u128)a##i * bm[j])
    /* part i times part j lands on positions i + j mod 5 */
    u128 z0 = P(0, 0) ^ P(1, 4) ^ P(2, 3) ^ P(3, 2) ^ P(4, 1), z1 = P(0, 1) ^ P(1, 0) ^ P(2, 4) ^ P(3, 3) ^ P(4, 2);
    u128 z2 = P(0, 2) ^ P(1, 1) ^ P(2, 0) ^ P(3, 4) ^ P(4, 3), z3 = P(0, 3) ^ P(1, 2) ^ P(2, 1) ^ P(3, 0) ^ P(4, 4);
    u128 z4 = P(0, 4) ^ P(1, 3) ^ P(2, 2) ^ P(3, 1) ^ P(4, 0);
#undef P
#define KEEP(t) ((u128)M5[((t) + 1) % 5] << 64 | M5[t]) /* positions t mod 5 of 128 */
    return (z0 & KEEP(0)) | (z1 & KEEP(1)) | (z2 & KEEP(2)) | (z3 & KEEP(3)) | (z4 & KEEP(4));
#undef KEEP
}

static u128 clmul_c(uint64_t w) /* w times GCM_C (bits 63, 62, 57) */
{
    u128 x = w;
    return x << 63 ^ x << 62 ^ x << 57;
}

/* y = y * H; hm: H twisted (see above), its halves and their XOR thinned. */
static void gf_mul(uint64_t y[2], const uint64_t hm[3][5])
{
    u128 lo = clmul64(y[0], hm[0]), hi = clmul64(y[1], hm[1]);
    u128 mid = clmul64(y[0] ^ y[1], hm[2]) ^ lo ^ hi;
    uint64_t q0 = (uint64_t)lo, q1 = (uint64_t)(lo >> 64) ^ (uint64_t)mid;
    uint64_t q2 = (uint64_t)hi ^ (uint64_t)(mid >> 64), q3 = (uint64_t)(hi >> 64);
    u128 t = clmul_c(q0); /* Q0 folded: into Q2 itself, times c into Q2:Q1 */
    uint64_t x2 = q0 ^ (uint64_t)(t >> 64), x1 = q1 ^ (uint64_t)t;
    t = clmul_c(x1); /* Q1 folded: into Q3, times c into Q3:Q2 */
    y[1] = q3 ^ x1 ^ (uint64_t)(t >> 64);
    y[0] = q2 ^ x2 ^ (uint64_t)t;
}

static void thin_h(const uint64_t h[2], uint64_t hm[3][5])
{
    thin(h[0], hm[0]), thin(h[1], hm[1]), thin(h[0] ^ h[1], hm[2]);
}

static void ghash_portable(const vcuda_gcm_key *k, uint64_t y[2], const uint8_t *p, size_t nb)
{
    for (; nb; --nb, p += 16) {
        y[1] ^= be64(p), y[0] ^= be64(p + 8);
        gf_mul(y, k->h1m);
    }
}

/* ---- x86-64: AES-NI and PCLMULQDQ ---------------------------------------------------- */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_X86 1
#define X86 __attribute__((target("aes,pclmul,sse4.1")))
#define X86_INLINE __attribute__((target("aes,pclmul,sse4.1"), always_inline)) static inline

X86 static __m128i x86_encrypt(const vcuda_gcm_key *k, __m128i b)
{
    b = _mm_xor_si128(b, _mm_loadu_si128((const __m128i *)k->rk[0]));
    for (int r = 1; r < 14; ++r) b = _mm_aesenc_si128(b, _mm_loadu_si128((const __m128i *)k->rk[r]));
    return _mm_aesenclast_si128(b, _mm_loadu_si128((const __m128i *)k->rk[14]));
}

/* SubWord: AESENCLAST of the word in all four columns (ShiftRows then moves nothing). */
X86 static void sub_word_x86(uint8_t w[4])
{
    __m128i x = _mm_set1_epi32((int)le32(w));
    put32(w, (uint32_t)_mm_cvtsi128_si32(_mm_aesenclast_si128(x, _mm_setzero_si128())));
}

X86 static void x86_block(const vcuda_gcm_key *k, const uint8_t in[16], uint8_t out[16])
{
    _mm_storeu_si128((__m128i *)out, x86_encrypt(k, _mm_loadu_si128((const __m128i *)in)));
}

/* Karatsuba: lo, hi and middle products summed over a group, reduced once; h and hk
 * are the power for this block. */
X86_INLINE void x86_mul_acc(__m128i x, const uint64_t h[2], const uint64_t hk[2], __m128i *lo, __m128i *hi,
                            __m128i *mid)
{
    __m128i hv = _mm_loadu_si128((const __m128i *)h), hkv = _mm_loadu_si128((const __m128i *)hk);
    *lo = _mm_xor_si128(*lo, _mm_clmulepi64_si128(x, hv, 0x00));
    *hi = _mm_xor_si128(*hi, _mm_clmulepi64_si128(x, hv, 0x11));
    *mid = _mm_xor_si128(*mid, _mm_clmulepi64_si128(_mm_xor_si128(x, _mm_shuffle_epi32(x, 0x4e)), hkv, 0x00));
}

X86_INLINE __m128i x86_reduce(__m128i lo, __m128i hi, __m128i mid)
{
    const __m128i c = _mm_set_epi64x(0, (long long)GCM_C);
    mid = _mm_xor_si128(mid, _mm_xor_si128(lo, hi));
    lo = _mm_xor_si128(lo, _mm_slli_si128(mid, 8));
    hi = _mm_xor_si128(hi, _mm_srli_si128(mid, 8));
    lo = _mm_xor_si128(_mm_shuffle_epi32(lo, 0x4e), _mm_clmulepi64_si128(lo, c, 0x00));
    lo = _mm_xor_si128(_mm_shuffle_epi32(lo, 0x4e), _mm_clmulepi64_si128(lo, c, 0x00));
    return _mm_xor_si128(hi, lo);
}

#define BSWAP128 _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15) /* big-endian */

/* Y = (Y + X_0) H^n + X_1 H^(n-1) + ... + X_n-1 H, one reduction (n <= GROUP). */
X86_INLINE __m128i x86_group(const vcuda_gcm_key *k, __m128i y, const uint8_t *p, size_t n)
{
    __m128i lo = _mm_setzero_si128(), hi = lo, mid = lo;
    for (size_t i = 0; i < n; ++i) {
        __m128i x = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), BSWAP128);
        x86_mul_acc(i ? x : _mm_xor_si128(x, y), k->h[GROUP - n + i], k->hk[GROUP - n + i], &lo, &hi, &mid);
    }
    return x86_reduce(lo, hi, mid);
}

X86 static void ghash_x86(const vcuda_gcm_key *k, uint64_t y[2], const uint8_t *p, size_t nb)
{
    __m128i Y = _mm_loadu_si128((const __m128i *)y);
    for (; nb >= GROUP; nb -= GROUP, p += 16 * GROUP) Y = x86_group(k, Y, p, GROUP);
    if (nb) Y = x86_group(k, Y, p, nb);
    _mm_storeu_si128((__m128i *)y, Y);
}

/* The same two blocks per instruction: VPCLMULQDQ on 256-bit registers (AVX2), a block
 * and its power in each 128-bit lane, the lanes summed before the one reduction. */
#define X86V_TARGET "aes,pclmul,sse4.1,avx2,vpclmulqdq"
#define X86V_INLINE __attribute__((target(X86V_TARGET), always_inline)) static inline

X86V_INLINE __m128i x86v_group(const vcuda_gcm_key *k, __m128i y, const uint8_t *p, size_t n)
{
    const __m256i bswap = _mm256_broadcastsi128_si256(BSWAP128);
    __m256i lo = _mm256_setzero_si256(), hi = lo, mid = lo;
    size_t i = 0;
    for (; i + 2 <= n; i += 2) {
        __m256i x = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)(p + 16 * i)), bswap);
        if (i == 0) x = _mm256_xor_si256(x, _mm256_set_m128i(_mm_setzero_si128(), y));
        __m256i h = _mm256_loadu_si256((const __m256i *)k->h[GROUP - n + i]);
        __m256i hk = _mm256_loadu_si256((const __m256i *)k->hk[GROUP - n + i]);
        lo = _mm256_xor_si256(lo, _mm256_clmulepi64_epi128(x, h, 0x00));
        hi = _mm256_xor_si256(hi, _mm256_clmulepi64_epi128(x, h, 0x11));
        __m256i xk = _mm256_xor_si256(x, _mm256_shuffle_epi32(x, 0x4e));
        mid = _mm256_xor_si256(mid, _mm256_clmulepi64_epi128(xk, hk, 0x00));
    }
    __m128i l = _mm_xor_si128(_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1));
    __m128i h = _mm_xor_si128(_mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1));
    __m128i m = _mm_xor_si128(_mm256_castsi256_si128(mid), _mm256_extracti128_si256(mid, 1));
    if (i < n) { /* an odd block last (or alone) */
        __m128i x = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), BSWAP128);
        x86_mul_acc(i ? x : _mm_xor_si128(x, y), k->h[GROUP - n + i], k->hk[GROUP - n + i], &l, &h, &m);
    }
    return x86_reduce(l, h, m);
}

__attribute__((target(X86V_TARGET))) static void ghash_x86v(const vcuda_gcm_key *k, uint64_t y[2], const uint8_t *p,
                                                          size_t nb)
{
    __m128i Y = _mm_loadu_si128((const __m128i *)y);
    for (; nb >= GROUP; nb -= GROUP, p += 16 * GROUP) Y = x86v_group(k, Y, p, GROUP);
    if (nb) Y = x86v_group(k, Y, p, nb);
    _mm_storeu_si128((__m128i *)y, Y);
}

/* ---- aarch64: the ARMv8 crypto extension (AESE/AESMC, PMULL) ------------------------- *
 * GCC declares the intrinsics for functions that ask for +crypto; clang (before 16)
 * only where the whole file is built for it (-march=armv8-a+crypto, -mcpu=neoverse-v2,
 * ...), so a clang build without that keeps aarch64 on the portable path. */
#elif defined(__aarch64__) && ((defined(__GNUC__) && !defined(__clang__)) || defined(__ARM_FEATURE_CRYPTO) || \
                               defined(__ARM_FEATURE_AES))
#include <arm_neon.h>
#include <sys/auxv.h>
#define HAVE_ARM 1
#ifndef HWCAP_AES
#define HWCAP_AES (1ul << 3)
#endif
#ifndef HWCAP_PMULL
#define HWCAP_PMULL (1ul << 4)
#endif
#if defined(__ARM_FEATURE_CRYPTO) || defined(__ARM_FEATURE_AES)
#define ARM
#define ARM_INLINE __attribute__((always_inline)) static inline
#else
#define ARM __attribute__((target("+crypto")))
#define ARM_INLINE __attribute__((target("+crypto"), always_inline)) static inline
#endif

ARM static uint8x16_t arm_encrypt(const vcuda_gcm_key *k, uint8x16_t b)
{
    for (int r = 0; r < 13; ++r) b = vaesmcq_u8(vaeseq_u8(b, vld1q_u8(k->rk[r])));
    return veorq_u8(vaeseq_u8(b, vld1q_u8(k->rk[13])), vld1q_u8(k->rk[14]));
}

/* SubWord: AESE of the word in all four columns (ShiftRows then moves nothing). */
ARM static void sub_word_arm(uint8_t w[4])
{
    uint8x16_t x = vreinterpretq_u8_u32(vdupq_n_u32(le32(w)));
    put32(w, vgetq_lane_u32(vreinterpretq_u32_u8(vaeseq_u8(x, vdupq_n_u8(0))), 0));
}

ARM static void arm_block(const vcuda_gcm_key *k, const uint8_t in[16], uint8_t out[16])
{
    vst1q_u8(out, arm_encrypt(k, vld1q_u8(in)));
}

ARM_INLINE uint64x2_t arm_pmull_lo(uint64x2_t a, uint64x2_t b)
{
    return vreinterpretq_u64_p128(vmull_p64((poly64_t)vgetq_lane_u64(a, 0), (poly64_t)vgetq_lane_u64(b, 0)));
}

ARM_INLINE void arm_mul_acc(uint64x2_t x, const uint64_t hp[2], uint64_t hk, uint64x2_t *lo, uint64x2_t *hi,
                            uint64x2_t *mid)
{
    uint64x2_t h = vld1q_u64(hp);
    *lo = veorq_u64(*lo, arm_pmull_lo(x, h));
    *hi = veorq_u64(*hi, vreinterpretq_u64_p128(vmull_high_p64(vreinterpretq_p64_u64(x), vreinterpretq_p64_u64(h))));
    *mid = veorq_u64(*mid, arm_pmull_lo(veorq_u64(x, vextq_u64(x, x, 1)), vdupq_n_u64(hk)));
}

ARM_INLINE uint64x2_t arm_reduce(uint64x2_t lo, uint64x2_t hi, uint64x2_t mid)
{
    const uint64x2_t zero = vdupq_n_u64(0), c = vdupq_n_u64(GCM_C);
    mid = veorq_u64(mid, veorq_u64(lo, hi));
    lo = veorq_u64(lo, vextq_u64(zero, mid, 1));
    hi = veorq_u64(hi, vextq_u64(mid, zero, 1));
    lo = veorq_u64(vextq_u64(lo, lo, 1), arm_pmull_lo(lo, c));
    lo = veorq_u64(vextq_u64(lo, lo, 1), arm_pmull_lo(lo, c));
    return veorq_u64(hi, lo);
}

ARM_INLINE uint64x2_t arm_group(const vcuda_gcm_key *k, uint64x2_t y, const uint8_t *p, size_t n)
{
    uint64x2_t lo = vdupq_n_u64(0), hi = lo, mid = lo;
    for (size_t i = 0; i < n; ++i) {
        uint8x16_t b = vrev64q_u8(vld1q_u8(p + 16 * i)); /* big-endian: bytes reversed, halves swapped */
        uint64x2_t x = vreinterpretq_u64_u8(vextq_u8(b, b, 8));
        arm_mul_acc(i ? x : veorq_u64(x, y), k->h[GROUP - n + i], k->hk[GROUP - n + i][0], &lo, &hi, &mid);
    }
    return arm_reduce(lo, hi, mid);
}

ARM static void ghash_arm(const vcuda_gcm_key *k, uint64_t y[2], const uint8_t *p, size_t nb)
{
    uint64x2_t Y = vld1q_u64(y);
    for (; nb >= GROUP; nb -= GROUP, p += 16 * GROUP) Y = arm_group(k, Y, p, GROUP);
    if (nb) Y = arm_group(k, Y, p, nb);
    vst1q_u64(y, Y);
}
#endif

/* ---- which path ---------------------------------------------------------------------- */

enum { PORTABLE, X86_NI, X86_NI_V, ARM_CE };

/* The best the CPU has, or less where VCUDA_MAC_IMPL asks for less (mac.h). */
static int path(void)
{
    static atomic_int chosen = -1; /* the CPU and the setting do not change under us */
    int p = atomic_load_explicit(&chosen, memory_order_relaxed);
    if (p >= 0) return p;
    const char *e = getenv("VCUDA_MAC_IMPL");
    int cap = 2;
    if (e && !strcmp(e, "portable")) cap = 0;
    else if (e && !strcmp(e, "pclmul")) cap = 1;
    else if (e && *e && strcmp(e, "auto"))
        fprintf(stderr, "vcuda: VCUDA_MAC_IMPL=%s is none of auto, pclmul, portable: auto\n", e);
    p = PORTABLE;
#if defined(HAVE_X86)
    __builtin_cpu_init();
    if (cap >= 1 && __builtin_cpu_supports("aes") && __builtin_cpu_supports("pclmul") &&
        __builtin_cpu_supports("sse4.1"))
        p = cap >= 2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("vpclmulqdq") ? X86_NI_V : X86_NI;
#elif defined(HAVE_ARM)
    unsigned long hw = getauxval(AT_HWCAP);
    if (cap >= 1 && (hw & HWCAP_AES) && (hw & HWCAP_PMULL)) p = ARM_CE;
#else
    (void)cap; /* no instructions to use here */
#endif
    atomic_store_explicit(&chosen, p, memory_order_relaxed);
    return p;
}

const char *vcuda_mac_impl(void)
{
    switch (path()) {
    case X86_NI: return "x86-64 AES-NI + PCLMULQDQ";
    case X86_NI_V: return "x86-64 AES-NI + VPCLMULQDQ (AVX2)";
    case ARM_CE: return "ARMv8 AES + PMULL";
    default: return "portable (bitsliced AES, constant-time GHASH)";
    }
}

static void ghash(const vcuda_gcm_key *k, uint64_t y[2], const uint8_t *p, size_t nb)
{
    switch (path()) {
#if defined(HAVE_X86)
    case X86_NI: return ghash_x86(k, y, p, nb);
    case X86_NI_V: return ghash_x86v(k, y, p, nb);
#elif defined(HAVE_ARM)
    case ARM_CE: return ghash_arm(k, y, p, nb);
#endif
    default: return ghash_portable(k, y, p, nb);
    }
}

/* One block, or two at once (in1/out1 not NULL: the bitsliced path does both for the
 * price of one). */
static void aes_blocks(const vcuda_gcm_key *k, const uint8_t *in0, uint8_t *out0, const uint8_t *in1, uint8_t *out1)
{
    switch (path()) {
#if defined(HAVE_X86)
    case X86_NI:
    case X86_NI_V:
        x86_block(k, in0, out0);
        if (in1) x86_block(k, in1, out1);
        return;
#elif defined(HAVE_ARM)
    case ARM_CE:
        arm_block(k, in0, out0);
        if (in1) arm_block(k, in1, out1);
        return;
#endif
    default: {
        uint32_t s[8];
        bs_in(s, in0, in1 ? in1 : in0);
        bs_encrypt(k->rks, s);
        bs_out(s, out0, in1 ? out1 : NULL);
    }
    }
}

void vcuda_aes256_block(const vcuda_gcm_key *k, const uint8_t in[16], uint8_t out[16])
{
    aes_blocks(k, in, out, NULL, NULL);
}

/* x^-1 times a (see the top of the file) */
static void twist(const uint64_t a[2], uint64_t o[2])
{
    uint64_t c = 0 - (a[1] >> 63);
    o[1] = (a[1] << 1 | a[0] >> 63) ^ (c & GCM_C);
    o[0] = (a[0] << 1) ^ (c & 1);
}

void vcuda_gcm_init(vcuda_gcm_key *k, const uint8_t key[VCUDA_KEY_SIZE])
{
    /* FIPS 197 5.2 for Nk = 8; SubWord by whatever does AES here */
    void (*sub_word)(uint8_t w[4]) = sub_word_portable;
#if defined(HAVE_X86)
    if (path() == X86_NI || path() == X86_NI_V) sub_word = sub_word_x86;
#elif defined(HAVE_ARM)
    if (path() == ARM_CE) sub_word = sub_word_arm;
#endif
    uint8_t w[240], rcon = 1;
    memcpy(w, key, VCUDA_KEY_SIZE);
    for (int i = 32; i < 240; i += 4) {
        uint8_t t[4] = {w[i - 4], w[i - 3], w[i - 2], w[i - 1]};
        if (i % 32 == 0) { /* RotWord, SubWord, Rcon */
            uint8_t r = t[0];
            t[0] = t[1], t[1] = t[2], t[2] = t[3], t[3] = r;
            sub_word(t);
            t[0] ^= rcon;
            rcon = (uint8_t)(rcon << 1 ^ (rcon >> 7) * 0x1b);
        } else if (i % 32 == 16) {
            sub_word(t);
        }
        for (int j = 0; j < 4; ++j) w[i + j] = w[i - 32 + j] ^ t[j];
    }
    memcpy(k->rk, w, sizeof k->rk);
    for (int r = 0; r < 15; ++r) bs_in(k->rks[r], k->rk[r], k->rk[r]);
    /* H = E_K(0); the powers H^1..H^16, each twisted */
    uint8_t hb[16] = {0};
    vcuda_aes256_block(k, hb, hb);
    uint64_t p[2] = {be64(hb + 8), be64(hb)}, ht[2];
    twist(p, ht);
    thin_h(ht, k->h1m);
    for (int i = 1; i <= GROUP; ++i) {
        uint64_t *h = k->h[GROUP - i];
        twist(p, h);
        k->hk[GROUP - i][0] = k->hk[GROUP - i][1] = h[0] ^ h[1];
        gf_mul(p, k->h1m);
    }
    vcuda_wipe(w, sizeof w), vcuda_wipe(hb, sizeof hb), vcuda_wipe(p, sizeof p), vcuda_wipe(ht, sizeof ht);
}

/* ---- the GCM tag ----------------------------------------------------------------------- */

static void j0_of(const uint8_t iv[VCUDA_IV_SIZE], uint8_t j0[16])
{
    memcpy(j0, iv, VCUDA_IV_SIZE); /* SP 800-38D 7.1: a 96-bit IV, then the block counter 1 */
    j0[12] = j0[13] = j0[14] = 0, j0[15] = 1;
}

void vcuda_aead_mask(const vcuda_gcm_key *k, const uint8_t iv[VCUDA_IV_SIZE], uint8_t mask[16])
{
    uint8_t j0[16];
    j0_of(iv, j0);
    aes_blocks(k, j0, mask, NULL, NULL);
}

void vcuda_aead_start(vcuda_aead *a, const vcuda_gcm_key *k, const uint8_t mask[16])
{
    a->k = k;
    a->y[0] = a->y[1] = 0;
    a->aad_len = 0;
    memcpy(a->mask, mask, 16);
    a->nbuf = 0;
}

void vcuda_aead_begin(vcuda_aead *a, const vcuda_gcm_key *k, const uint8_t iv[VCUDA_IV_SIZE])
{
    uint8_t mask[16];
    vcuda_aead_mask(k, iv, mask);
    vcuda_aead_start(a, k, mask);
}

/* Whole groups of eight blocks go straight from where the bytes lie; what is left waits
 * in buf (up to 127 bytes) for more, or for the tag. */
static void feed(vcuda_aead *a, const uint8_t *m, size_t n)
{
    if (!n) return; /* (m may be NULL then) */
    if (a->nbuf) {
        size_t k = 128 - a->nbuf < n ? 128 - a->nbuf : n;
        memcpy(a->buf + a->nbuf, m, k);
        a->nbuf += k, m += k, n -= k;
        if (a->nbuf < 128) return;
        ghash(a->k, a->y, a->buf, 8);
        a->nbuf = 0;
    }
    size_t whole = n & ~(size_t)127;
    if (whole) ghash(a->k, a->y, m, whole / 16);
    if (n > whole) memcpy(a->buf, m + whole, n - whole), a->nbuf = n - whole;
}

/* What waits, zero-padded to whole blocks (SP 800-38D: A and C each padded), with
 * `more` bytes after it (the lengths block, at most 16) hashed too. */
static void flush(vcuda_aead *a, const uint8_t *more, size_t mn)
{
    size_t n = (a->nbuf + 15) & ~(size_t)15;
    memset(a->buf + a->nbuf, 0, n - a->nbuf);
    if (mn) memcpy(a->buf + n, more, mn), n += mn;
    if (n) ghash(a->k, a->y, a->buf, n / 16);
    a->nbuf = 0;
}

void vcuda_aead_aad(vcuda_aead *a, const void *p, size_t n)
{
    feed(a, p, n);
    a->aad_len += n;
}

void vcuda_aead_tag(vcuda_aead *a, const uint8_t *ct, size_t ct_len, uint8_t tag[VCUDA_TAG_SIZE])
{
    uint8_t lens[16];
    putbe64(lens, a->aad_len * 8), putbe64(lens + 8, (uint64_t)ct_len * 8);
    if (ct_len) flush(a, NULL, 0), feed(a, ct, ct_len);
    flush(a, lens, 16); /* up to nine blocks: the last group of eight, then one */
    putbe64(tag, a->y[1]), putbe64(tag + 8, a->y[0]);
    for (int i = 0; i < VCUDA_TAG_SIZE; ++i) tag[i] ^= a->mask[i];
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
    vcuda_gcm_init(&s->gk, s->key);
    s->tx_dir = server ? 1 : 0, s->rx_dir = server ? 0 : 1;
    s->sent = s->received = 0;
    s->tx_ahead = s->rx_ahead = UINT64_MAX;
    s->untagged = 0;
    if (peer) snprintf(s->peer, sizeof s->peer, "%s", peer);
}

/* A frame's J0: nonce = direction word || sequence number, then the counter 1. */
static void frame_j0(uint32_t dir, uint64_t seq, uint8_t j0[16])
{
    uint8_t iv[VCUDA_IV_SIZE];
    put32(iv, dir), put64(iv + 4, seq);
    j0_of(iv, j0);
}

void vcuda_session_prepare(vcuda_session *s)
{
    uint8_t jt[16], jr[16];
    int tx = s->tx_ahead != s->sent, rx = s->rx_ahead != s->received;
    if (tx) frame_j0(s->tx_dir, s->sent, jt), s->tx_ahead = s->sent;
    if (rx) frame_j0(s->rx_dir, s->received, jr), s->rx_ahead = s->received;
    if (tx && rx) aes_blocks(&s->gk, jt, s->tx_mask, jr, s->rx_mask);
    else if (tx || rx) aes_blocks(&s->gk, tx ? jt : jr, tx ? s->tx_mask : s->rx_mask, NULL, NULL);
}

void vcuda_session_begin(vcuda_session *s, int tx, vcuda_aead *x)
{
    uint8_t mask[16];
    uint64_t seq = tx ? s->sent : s->received;
    if ((tx ? s->tx_ahead : s->rx_ahead) == seq) { /* made ahead */
        vcuda_aead_start(x, &s->gk, tx ? s->tx_mask : s->rx_mask);
        return;
    }
    uint8_t j0[16];
    frame_j0(tx ? s->tx_dir : s->rx_dir, seq, j0);
    aes_blocks(&s->gk, j0, mask, NULL, NULL);
    vcuda_aead_start(x, &s->gk, mask);
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
    if (s && s->untagged) s = NULL;
    size_t extra = s ? VCUDA_TAG_SIZE : 0, n = 0;
    vcuda_status st = vcuda_encode(m, buf, cap >= extra ? cap - extra : 0, &n, why);
    *len = n + extra;
    if (st || !s) return st;
    vcuda_session_seal(s, buf, n, NULL, 0, buf + n);
    return VCUDA_OK;
}

/* vcuda frame authentication after the handshake (proto.h, "authentication"): the
 * primitive -- AES-256-GCM's tag (NIST SP 800-38D) with an empty plaintext and the frame
 * as additional data, i.e. GMAC: GHASH under H = E_K(0^128) over the frame, zero-padded,
 * and a block of its bit length, then XOR E_K(J0), J0 = the 12-byte IV || 0^31 || 1 --
 * and the per-connection session that tags every frame a side sends and checks every
 * frame it receives, each against a sequence number both sides count and never send.
 *
 * Where the CPU has them, its AES and carry-less multiply instructions do the work,
 * chosen at run time: on x86-64 AES-NI (key schedule and encryption) with PCLMULQDQ, two
 * blocks per instruction with VPCLMULQDQ (AVX2) where it exists; on aarch64 the ARMv8
 * crypto extension (AESE/AESMC, PMULL; getauxval's HWCAP_AES and HWCAP_PMULL; built with
 * GCC, or with clang for a -march/-mcpu that has it).  GHASH there takes 16 blocks per
 * reduction (the sum of X_i H^(16-i), H^1..H^16 made once per session).  On a 2.6 GHz
 * EPYC core (vcuda-mac-bench): GHASH at ~17 GB/s with VPCLMULQDQ, ~8.5 GB/s with PCLMULQDQ
 * alone; a 1 KiB frame tagged and checked in ~0.27 us (~0.23 us with E_K(J0) made
 * ahead, as the session does); E_K(J0) itself ~25 ns.
 *
 * Elsewhere a portable path gives the same tags: AES bitsliced (the S-box computed as
 * the GF(2^8) inverse x^254 and the affine map, with AND/XOR only; both blocks of a
 * session's two E_K(J0) at once), GHASH with carry-less products built from ordinary
 * 64 x 64 -> 128-bit integer multiplies on operands thinned to every fifth bit, so no
 * carry reaches a bit that is kept.  Nothing on any path indexes memory or branches by
 * secret data (on the portable one given a multiplier whose timing does not depend on
 * its operands, as on x86-64 and ARMv8 server cores).  It is slow beside the
 * instructions -- ~1.5 us per AES block (two at once), GHASH ~0.45 GB/s, which then
 * bounds one connection's large copies -- and is only chosen where they are missing.
 *
 * VCUDA_MAC_IMPL (read once per process) asks for less than the best the CPU has:
 * "pclmul" (no 256-bit VPCLMULQDQ; on aarch64 the same as the default) or "portable";
 * unset or "auto": the best.  The tests use it to check every path; the tags do not
 * depend on it, and the key material is the same on every path, so a session made on
 * one works on another. */
#ifndef VCUDA_MAC_H
#define VCUDA_MAC_H

#include "vcuda/proto.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VCUDA_TAG_SIZE 16
#define VCUDA_KEY_SIZE 32
#define VCUDA_IV_SIZE 12

/* An AES-256 key ready for GCM: the round keys twice (as bytes for the instructions,
 * bitsliced for the portable path) and H^1..H^16 for GHASH. */
#define VCUDA_GHASH_GROUP 16 /* blocks per reduction with the instructions */
typedef struct {
    uint8_t rk[15][16];  /* round keys, FIPS 197's byte order */
    uint32_t rks[15][8]; /* the same bitsliced: word i holds bit i of every byte, twice */
    /* h[16-k] = H^k times x^-1 mod the GCM polynomial, the block's bits reflected into a
     * 128-bit integer (bit 127 = the coefficient of x^0): [0] the low 64 bits, [1] the
     * high (descending: a group of n blocks takes the last n in order); hk: the two halves
     * XORed (Karatsuba's middle product), twice; h1m: H's halves and their XOR, each
     * thinned to every fifth bit (the portable multiply) */
    uint64_t h[VCUDA_GHASH_GROUP][2], hk[VCUDA_GHASH_GROUP][2], h1m[3][5];
} vcuda_gcm_key;
void vcuda_gcm_init(vcuda_gcm_key *k, const uint8_t key[VCUDA_KEY_SIZE]);
/* One AES-256 block (FIPS 197). */
void vcuda_aes256_block(const vcuda_gcm_key *k, const uint8_t in[16], uint8_t out[16]);
/* Which path runs here: "x86-64 AES-NI + VPCLMULQDQ (AVX2)", "x86-64 AES-NI +
 * PCLMULQDQ", "ARMv8 AES + PMULL" or "portable (bitsliced AES, constant-time GHASH)". */
const char *vcuda_mac_impl(void);

/* The GCM tag, streamed: start from E_K(J0) (vcuda_aead_mask; made ahead by the session),
 * the additional data in any number of pieces of any length, then the ciphertext (none
 * for a vcuda frame) and the tag. */
typedef struct {
    const vcuda_gcm_key *k;
    uint64_t y[2]; /* GHASH so far, reflected as vcuda_gcm_key's h */
    uint64_t aad_len;
    uint8_t mask[16]; /* E_K(J0) */
    /* bytes not yet hashed: up to eight blocks wait, so that a small frame's pieces
     * (header, fields, data, padding, lengths) go through GHASH together */
    uint8_t buf[144];
    size_t nbuf;
} vcuda_aead;
void vcuda_aead_mask(const vcuda_gcm_key *k, const uint8_t iv[VCUDA_IV_SIZE], uint8_t mask[16]);
void vcuda_aead_start(vcuda_aead *a, const vcuda_gcm_key *k, const uint8_t mask[16]);
void vcuda_aead_begin(vcuda_aead *a, const vcuda_gcm_key *k, const uint8_t iv[VCUDA_IV_SIZE]);
void vcuda_aead_aad(vcuda_aead *a, const void *p, size_t n);
void vcuda_aead_tag(vcuda_aead *a, const uint8_t *ct, size_t ct_len, uint8_t tag[VCUDA_TAG_SIZE]);

/* Constant time: 1 if equal. */
int vcuda_tag_equal(const uint8_t a[VCUDA_TAG_SIZE], const uint8_t b[VCUDA_TAG_SIZE]);

/* One connection's authentication state after the handshake.  Its users serialize
 * themselves: the client holds the device's lock, the server's worker owns the
 * receiving side and every sender takes the connection's write lock. */
typedef struct {
    uint8_t key[VCUDA_KEY_SIZE]; /* K */
    vcuda_gcm_key gk;            /* K expanded (no pointers: a session is copied between processes) */
    uint32_t tx_dir, rx_dir;     /* the nonce's direction word: 0 client to server, 1 back */
    uint64_t sent, received;     /* frames so far each way: the next frame's sequence number */
    /* E_K(J0) of the next frames, made ahead (vcuda_session_prepare), and the sequence
     * numbers they are for (UINT64_MAX: none) */
    uint8_t tx_mask[16], rx_mask[16];
    uint64_t tx_ahead, rx_ahead;
    char peer[288];              /* who the frames come from ("addr:port"), for a refusal's message */
    int untagged;                /* both ends agreed on no tags (proto.h, VCUDA_AUTH_TAGS): frames go
                                  * without them and nothing here is used for them */
} vcuda_session;

/* The session of a completed handshake, for either side: K = HMAC-SHA256(token,
 * "vcuda session" || Nc || Ns || heartbeat_ms || server device), token being the secret
 * of the tenant the handshake's proofs were made with, the last two as the AUTH
 * frames carried them (u32 little-endian), so a relay that changed them leaves the two
 * sides with different keys; a frame's nonce (GCM's IV) is its direction word (u32) ||
 * its sequence number (u64), both little-endian.  peer may be NULL (keeps s->peer as
 * the caller set it). */
void vcuda_session_start(vcuda_session *s, int server, const uint8_t *token, size_t token_len,
                         const uint8_t nc[VCUDA_NONCE_SIZE], const uint8_t ns[VCUDA_NONCE_SIZE],
                         uint32_t heartbeat_ms, uint32_t device, const char *peer);

/* The tag of the next frame this side sends, over its bytes as they lie in up to two
 * pieces (header and payload, or head and bulk data: nothing is copied); the send count
 * advances, so the frame must then go out whole (or the connection be given up). */
void vcuda_session_seal(vcuda_session *s, const void *a, size_t an, const void *b, size_t bn,
                        uint8_t tag[VCUDA_TAG_SIZE]);

/* Checks a received frame's tag against the next receive count: 1 (the count
 * advances), or 0 with why = "frame N from PEER: bad authentication tag (injected,
 * replayed or corrupted)". */
int vcuda_session_open(vcuda_session *s, const void *a, size_t an, const void *b, size_t bn,
                       const uint8_t tag[VCUDA_TAG_SIZE], char *why);

/* The same, streamed, for bulk data: begin the next frame sent (tx 1) or received
 * (tx 0), feed its bytes in order with vcuda_aead_aad as they go out or come in (each
 * portion while it is still in cache, and the peer's side of the copy going on
 * meanwhile), then end: seal_end gives the tag (the send count advances), open_end
 * checks it as vcuda_session_open does.  Nothing else may be sealed (tx) or opened (rx)
 * on the session in between. */
#define VCUDA_MAC_PORTION (64u << 10) /* bytes fed at a time by the transport */
void vcuda_session_begin(vcuda_session *s, int tx, vcuda_aead *x);
void vcuda_session_seal_end(vcuda_session *s, vcuda_aead *x, uint8_t tag[VCUDA_TAG_SIZE]);
int vcuda_session_open_end(vcuda_session *s, vcuda_aead *x, const uint8_t tag[VCUDA_TAG_SIZE], char *why);

/* Makes E_K(J0) of the next frame each way ahead of it (an AES block each: next to
 * nothing with the instructions, most of a small frame's cost on the portable path,
 * which makes the two together), so that the time a side waits for its peer pays for
 * them rather than its next call: net.c's send does it once a frame is out (the client
 * then waits for the reply, the server's worker for the next request).  Only a caller
 * that owns both directions may (the client; the server's worker, under the write
 * lock); seal and open make one that was not made ahead themselves. */
void vcuda_session_prepare(vcuda_session *s);

/* m encoded whole into buf with its tag after it (s NULL: no tag, as a handshake
 * frame); *len: the bytes to send, also on VCUDA_E_NO_SPACE.  Seals (see above). */
vcuda_status vcuda_encode_sealed(vcuda_session *s, const vcuda_msg *m, uint8_t *buf, size_t cap, size_t *len,
                                 char *why);

#ifdef __cplusplus
}
#endif
#endif

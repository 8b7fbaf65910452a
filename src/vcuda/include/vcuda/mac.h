/* vcuda frame authentication after the handshake (proto.h, "authentication"): the
 * primitives -- ChaCha20 and Poly1305 as in RFC 8439, and that RFC's AEAD tag, which
 * vcuda uses with an empty plaintext and the frame as additional data -- and the
 * per-connection session that tags every frame a side sends and checks every frame it
 * receives, each against a sequence number both sides count and never send.
 *
 * Poly1305 here works on 64-bit limbs (h in 2^64 radix, products in unsigned __int128):
 * about 0.75 cycles a byte, so a 1 KiB frame costs well under a microsecond to tag and
 * to check; longer runs go four blocks at a time through AVX2 where the CPU has it
 * (26-bit limbs, the lanes multiplied by r^4 and at the end by r^4..r), about 0.45
 * cycles a byte, for bulk data.  Nothing in either branches on secret data. */
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

/* RFC 8439 2.3: one 64-byte block of the ChaCha20 keystream. */
void vcuda_chacha20_block(const uint8_t key[VCUDA_KEY_SIZE], uint32_t counter, const uint8_t nonce[12],
                          uint8_t out[64]);

/* RFC 8439 2.5: Poly1305, streamed (update takes any number of pieces of any length). */
typedef struct {
    uint64_t r0, r1, s1; /* clamped r; s1 = r1 + r1/4, i.e. 5 r1 / 4 (r1's low 2 bits are 0) */
    uint64_t h0, h1, h2; /* the accumulator, 130 bits and a few of carry */
    uint64_t k0, k1;     /* the key's second half, added at the end */
    uint8_t buf[16];
    size_t nbuf;
    uint32_t pw[4][5]; /* AVX2 path: r, r^2, r^3, r^4 in 26-bit limbs, made at its first use */
    int have_pw;
} vcuda_poly1305;
void vcuda_poly1305_init(vcuda_poly1305 *p, const uint8_t key[VCUDA_KEY_SIZE]);
void vcuda_poly1305_update(vcuda_poly1305 *p, const void *m, size_t n);
void vcuda_poly1305_final(vcuda_poly1305 *p, uint8_t tag[VCUDA_TAG_SIZE]);

/* RFC 8439 2.8: the AEAD_CHACHA20_POLY1305 tag, streamed: begin (the one-time Poly1305
 * key is block 0 of ChaCha20 under key and nonce, 2.6), the additional data in any
 * number of pieces, then the ciphertext (none for a vcuda frame). */
typedef struct {
    vcuda_poly1305 p;
    uint64_t aad_len;
} vcuda_aead;
void vcuda_aead_begin(vcuda_aead *a, const uint8_t key[VCUDA_KEY_SIZE], const uint8_t nonce[12]);
/* The same from a one-time key made beforehand (vcuda_aead_otk: the block-0 half). */
void vcuda_aead_otk(const uint8_t key[VCUDA_KEY_SIZE], const uint8_t nonce[12], uint8_t otk[VCUDA_KEY_SIZE]);
void vcuda_aead_start(vcuda_aead *a, const uint8_t otk[VCUDA_KEY_SIZE]);
void vcuda_aead_aad(vcuda_aead *a, const void *p, size_t n);
void vcuda_aead_tag(vcuda_aead *a, const uint8_t *ct, size_t ct_len, uint8_t tag[VCUDA_TAG_SIZE]);

/* Constant time: 1 if equal. */
int vcuda_tag_equal(const uint8_t a[VCUDA_TAG_SIZE], const uint8_t b[VCUDA_TAG_SIZE]);

/* One connection's authentication state after the handshake.  Its users serialize
 * themselves: the client holds the device's lock, the server's worker owns the
 * receiving side and every sender takes the connection's write lock. */
typedef struct {
    uint8_t key[VCUDA_KEY_SIZE];
    uint32_t tx_dir, rx_dir; /* the nonce's direction word: 0 client to server, 1 back */
    uint64_t sent, received; /* frames so far each way: the next frame's sequence number */
    /* the one-time keys of the next frames, made ahead (vcuda_session_prepare), and the
     * sequence numbers they are for (UINT64_MAX: none) */
    uint8_t tx_otk[VCUDA_KEY_SIZE], rx_otk[VCUDA_KEY_SIZE];
    uint64_t tx_ahead, rx_ahead;
    char peer[288];          /* who the frames come from ("addr:port"), for a refusal's message */
} vcuda_session;

/* The session of a completed handshake, for either side: K = HMAC-SHA256(token,
 * "vcuda session" || Nc || Ns || heartbeat_ms || server device), token being the secret
 * of the tenant the handshake's proofs were made with, the last two as the AUTH
 * frames carried them (u32 little-endian), so a relay that changed them leaves the two
 * sides with different keys.  peer may be NULL (keeps s->peer as the caller set it). */
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

/* Makes the one-time keys of the next frame each way (a ChaCha20 block each, a quarter
 * of a small frame's cost) ahead of it, so that the time a side waits for its peer pays
 * for them rather than its next call: net.c's send does it once a frame is out (the
 * client then waits for the reply, the server's worker for the next request).  Only a
 * caller that owns both directions may (the client; the server's worker, under the
 * write lock); seal and open make a key that was not made ahead themselves. */
void vcuda_session_prepare(vcuda_session *s);

/* m encoded whole into buf with its tag after it (s NULL: no tag, as a handshake
 * frame); *len: the bytes to send, also on VCUDA_E_NO_SPACE.  Seals (see above). */
vcuda_status vcuda_encode_sealed(vcuda_session *s, const vcuda_msg *m, uint8_t *buf, size_t cap, size_t *len,
                                 char *why);

#ifdef __cplusplus
}
#endif
#endif

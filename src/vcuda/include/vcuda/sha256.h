/* SHA-256 (FIPS 180-4): the server names cached module images by the hash it computes
 * itself, so a client can neither poison the cache nor make the server trust a name. */
#ifndef VCUDA_SHA256_H
#define VCUDA_SHA256_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

void vcuda_sha256(const void *data, size_t len, uint8_t out[32]);
/* HMAC-SHA256 of a message of at most 256 bytes.  The key (a token, a tenant's secret)
 * is not left behind in its buffers or on the stack below the caller's frame: a
 * process forked later (a tenant's serving process) does not inherit it. */
void vcuda_hmac_sha256(const uint8_t *key, size_t klen, const uint8_t *msg, size_t n, uint8_t out[32]);
/* Zeroes n bytes at p in a way the compiler keeps even where the memory is freed or
 * goes out of scope next (secrets). */
void vcuda_wipe(void *p, size_t n);

#ifdef __cplusplus
}
#endif
#endif

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
/* HMAC-SHA256 of a message of at most 256 bytes. */
void vcuda_hmac_sha256(const uint8_t *key, size_t klen, const uint8_t *msg, size_t n, uint8_t out[32]);

#ifdef __cplusplus
}
#endif
#endif

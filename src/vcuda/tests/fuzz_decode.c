/* libFuzzer target for the frame decoder the server runs on every client frame.
 * Beyond "no crash, no leak, no UB" (the sanitizers), it checks that anything the
 * decoder accepts re-encodes to the identical bytes: the wire format is canonical,
 * so decoder and encoder cannot silently disagree about a field. */
#include "vcuda/proto.h"

#include <stdlib.h>
#include <string.h>

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
    }
    return 0;
}

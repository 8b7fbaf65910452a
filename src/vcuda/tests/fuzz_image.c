/* libFuzzer target: the module image validator (image.h) must never read outside the
 * image, whatever it is sent; and for an image it accepts, neither may the reading of
 * what its data takes on the device (vcuda_image_footprint: section headers, fatbin
 * entries, PTX declarations). */
#include "vcuda/image.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A PTX variable the reader cannot size: its name must lie within the image. */
static void count_name(const char *name, size_t len, void *arg)
{
    volatile char sink = 0;
    for (size_t i = 0; i < len; ++i) sink = (char)(sink ^ name[i]);
    ++*(size_t *)arg;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exact-size copy: any read past the end is a heap overflow ASan reports */
    uint8_t *p = malloc(size ? size : 1);
    if (!p) return 0;
    memcpy(p, data, size);
    char why[160];
    if (vcuda_image_check(p, size, why) == 0) {
        uint64_t bytes;
        size_t names = 0;
        vcuda_image_footprint(p, size, &bytes, count_name, &names, why);
    }
    free(p);
    return 0;
}

/* libFuzzer target: the module image validator (image.h) must never read outside the
 * image, whatever it is sent; an image it accepts must be one the stand-in's strict
 * reading (below) can walk without leaving the bytes either. */
#include "vcuda/image.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exact-size copy: any read past the end is a heap overflow ASan reports */
    uint8_t *p = malloc(size ? size : 1);
    if (!p) return 0;
    memcpy(p, data, size);
    char why[160];
    vcuda_image_check(p, size, why);
    free(p);
    return 0;
}

/* libFuzzer target: the module image validator (image.h) must never read outside the
 * image, whatever it is sent; neither may the reading of what its data takes on the
 * device (vcuda_image_footprint: section headers, fatbin entries, PTX declarations),
 * which checks the image in the same walk and so must refuse whatever the validator
 * refuses, with the same result. */
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
    int checked = vcuda_image_check(p, size, why);
    uint64_t bytes;
    size_t names = 0;
    int sized = vcuda_image_footprint(p, size, &bytes, count_name, &names, why);
    if (checked && sized != checked) abort();
    free(p);
    return 0;
}

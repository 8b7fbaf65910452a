/* What the vcuda test programs share: a failure count and a CHECK that reports the
 * failing condition and goes on (each program exits non-zero if any CHECK failed). */
#pragma once
#include <stdio.h>

static int failures;
#define CHECK(c)                                                                           \
    do {                                                                                   \
        if (!(c)) fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c), ++failures; \
    } while (0)

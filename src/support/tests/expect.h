/* The support library's C tests: a failed expectation is counted and named, the test
 * goes on, and main returns the count (0: passed). */
#pragma once
#include <stdio.h>

static int fails;
#define EXPECT(cond)                                                                   \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);            \
            ++fails;                                                                   \
        }                                                                              \
    } while (0)

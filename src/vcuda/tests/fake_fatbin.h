/* What nvcc's start-up code does, for the tests that drive the libcudart stand-in as a
 * program would: the fake cubin (fake_cubin.h) in a fatbinary (header, one ELF entry),
 * registered, and kernels named under it.  Include after cuda_runtime_api.h. */
#ifndef VCUDA_FAKE_FATBIN_H
#define VCUDA_FAKE_FATBIN_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cubin.h"
#include "vcuda_test.h"

void **__cudaRegisterFatBinary(void *fat_cubin);
void __cudaRegisterFunction(void **handle, const char *host_fun, char *device_fun, const char *device_name,
                            int thread_limit, uint3 *tid, uint3 *bid, dim3 *bdim, dim3 *gdim, int *wsize);

/* The fatbinary of the fake cubin made with `tag`, registered (once per process). */
static void **register_fake_fatbin(const char *tag)
{
    static uint8_t img[2048], fat[4096];
    size_t n = fake_cubin(img, tag);
    fc_put(fat, 0xba55ed50u, 4), fc_put(fat + 4, 1, 2), fc_put(fat + 6, 16, 2), fc_put(fat + 8, 64 + n, 8);
    fc_put(fat + 16, 2, 2), fc_put(fat + 18, 0x101, 2), fc_put(fat + 20, 64, 4), fc_put(fat + 24, n, 8);
    fc_put(fat + 16 + 0x28, 0x11, 8);
    memcpy(fat + 80, img, n);
    static struct { int magic, version; const void *data; void *unused; } wrapper = {0x466243b1, 1, fat, NULL};
    return __cudaRegisterFatBinary(&wrapper);
}

/* Kernel `name` of the registered fatbinary h, launched by the host-side address stub. */
static void register_kernel(void **h, const void *stub, const char *name)
{
    __cudaRegisterFunction(h, stub, (char *)name, name, -1, NULL, NULL, NULL, NULL, NULL);
}

/* A graph test's start: its arguments ("server|client SERVER FAKE_LIB_DIR": graphs kept
 * on the server or replayed by the client) checked, a server started for this process,
 * the fake fatbinary `tag` registered.  NULL, with the usage on stderr, on bad arguments. */
static inline void **graph_test_start(int argc, char **argv, vcuda_test_server *s, const char *token, const char *tag)
{
    if (argc != 4 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
        fprintf(stderr, "usage: %s server|client SERVER FAKE_LIB_DIR\n", argv[0]);
        return NULL;
    }
    start_server_for_me(s, argv[2], argv[3], token);
    setenv("VCUDA_GRAPHS", argv[1], 1);
    return register_fake_fatbin(tag);
}

/* How often `what` occurs in text (a server log). */
static inline int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)); ++p) ++n;
    return n;
}

#endif

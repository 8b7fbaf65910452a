/* A small, well-formed CUDA ELF (EM_CUDA, section and program headers, string and symbol
 * tables, .nv.info records) with the kernels the CPU stand-in driver models: busy,
 * sticky, counter, pair and setcond (the last two's text sections after .tag).  `tag` goes into a section of its own, so different tags make
 * different images (hashes).  Returns the image size (out holds at least 2048 bytes).
 * fake_cubin_global adds a .nv.global section of `global_bytes` (NOBITS, as nvcc writes
 * the uninitialized __device__ data: no byte of it is in the image). */
#ifndef VCUDA_FAKE_CUBIN_H
#define VCUDA_FAKE_CUBIN_H

#include <stdint.h>
#include <string.h>

static void fc_put(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; ++i) p[i] = (uint8_t)(v >> (8 * i));
}

static size_t fake_cubin_global(uint8_t *out, const char *tag, uint64_t global_bytes)
{
    static const char shstr[] =
        "\0.shstrtab\0.strtab\0.symtab\0.text.busy\0.text.sticky\0.text.counter\0.nv.info\0.tag\0.text.pair"
        "\0.text.setcond\0.nv.global";
    static const char str[] = "\0busy\0sticky\0counter\0pair\0setcond";
    const unsigned shname[] = {0, 1, 11, 19, 27, 38, 51, 65, 74, 79, 90, 104};
    const unsigned nsec = global_bytes ? 12 : 11;
    const unsigned symname[] = {1, 6, 13, 21, 26}, symsec[] = {4, 5, 6, 9, 10};
    uint8_t *p = out;
    size_t at = 64;
    uint64_t off[11] = {0}, size[11] = {0};
    memset(out, 0, 2048);
    /* 1 .shstrtab, 2 .strtab */
    off[1] = at, size[1] = sizeof shstr, memcpy(p + at, shstr, sizeof shstr), at += sizeof shstr;
    off[2] = at, size[2] = sizeof str, memcpy(p + at, str, sizeof str), at += sizeof str;
    at = (at + 7) & ~(size_t)7;
    /* 3 .symtab: null + five functions, each in its text section */
    off[3] = at, size[3] = 6 * 24;
    for (int k = 0; k < 5; ++k) {
        uint8_t *sym = p + at + 24 * (k + 1);
        fc_put(sym, symname[k], 4);
        sym[4] = 0x12; /* global function */
        fc_put(sym + 6, symsec[k], 2);
        fc_put(sym + 16, 16, 8);
    }
    at += 6 * 24;
    for (int k = 0; k < 3; ++k) off[4 + k] = at, size[4 + k] = 16, at += 16; /* 4-6 text */
    /* 7 .nv.info: a sized record and a half-word record */
    off[7] = at, size[7] = 12;
    p[at] = 4, p[at + 1] = 0x17, fc_put(p + at + 2, 4, 2), fc_put(p + at + 4, 0x1000, 4);
    p[at + 8] = 3, p[at + 9] = 0x1b, fc_put(p + at + 10, 0xff, 2);
    at += 12;
    size_t tl = strlen(tag) + 1; /* 8 .tag */
    off[8] = at, size[8] = tl, memcpy(p + at, tag, tl), at += tl;
    at = (at + 7) & ~(size_t)7;
    off[9] = at, size[9] = 16, at += 16;   /* 9 pair's text */
    off[10] = at, size[10] = 16, at += 16; /* 10 setcond's text */
    size_t phoff = at; /* one program header over the text */
    fc_put(p + at, 1, 4), fc_put(p + at + 8, off[4], 8), fc_put(p + at + 32, 48, 8), fc_put(p + at + 40, 48, 8);
    at += 56;
    size_t shoff = at;
    for (unsigned i = 1; i < nsec; ++i) {
        uint8_t *sh = p + shoff + 64 * (size_t)i;
        if (i == 11) { /* .nv.global: NOBITS, write + alloc */
            fc_put(sh, shname[i], 4), fc_put(sh + 4, 8, 4), fc_put(sh + 8, 3, 8);
            fc_put(sh + 32, global_bytes, 8), fc_put(sh + 48, 16, 8);
            continue;
        }
        unsigned type = i <= 2 ? 3 : i == 3 ? 2 : i == 7 ? 0x70000000u : 1;
        fc_put(sh, shname[i], 4), fc_put(sh + 4, type, 4);
        fc_put(sh + 24, off[i], 8), fc_put(sh + 32, size[i], 8);
        if (i == 3) fc_put(sh + 40, 2, 4), fc_put(sh + 44, 1, 4), fc_put(sh + 56, 24, 8);
        if (i == 7) fc_put(sh + 40, 3, 4);
        fc_put(sh + 48, i == 3 ? 8 : 1, 8);
    }
    at += nsec * 64;
    memcpy(p, "\177ELF", 4);
    p[4] = 2, p[5] = 1, p[6] = 1, p[7] = 0x41;
    fc_put(p + 16, 2, 2), fc_put(p + 18, 190, 2), fc_put(p + 20, 1, 4);
    fc_put(p + 32, phoff, 8), fc_put(p + 40, shoff, 8), fc_put(p + 48, 0x5a, 4);
    fc_put(p + 52, 64, 2), fc_put(p + 54, 56, 2), fc_put(p + 56, 1, 2);
    fc_put(p + 58, 64, 2), fc_put(p + 60, nsec, 2), fc_put(p + 62, 1, 2);
    return at;
}

static size_t fake_cubin(uint8_t *out, const char *tag) { return fake_cubin_global(out, tag, 0); }
#endif

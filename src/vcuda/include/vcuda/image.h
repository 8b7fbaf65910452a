/* vcuda module image validation: what a client sends as a module is checked completely
 * before the CUDA driver sees a byte of it (the driver takes an image with no length
 * and trusts every offset in it, so one patched header field can crash the server).
 *
 * Accepted: a CUDA ELF (cubin: ELF64, little-endian, EM_CUDA) or a fatbin container
 * holding only cubin and PTX entries.  For an ELF every header, the program and section
 * header tables, each section's bytes, string tables (NUL-terminated), symbol tables
 * (names, section indices, values within their section), relocation tables (symbol
 * indices, offsets within the target section), notes and the .nv.info attribute records
 * must lie within the image.  For a fatbin the entries must tile the container exactly;
 * a zstd-compressed entry is decompressed (libzstd.so.1, loaded at run time) and its
 * contents validated like an uncompressed one; PTX must be text ending in a NUL.  What
 * cannot be validated -- LZ4-compressed entries (older nvcc), or zstd entries where no
 * libzstd is found -- is refused by name, never passed on. */
#ifndef VCUDA_IMAGE_H
#define VCUDA_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 0 if the n bytes at p are a valid image, else -1 with the reason in why
 * (VCUDA_WHY_LEN bytes, may be NULL). */
int vcuda_image_check(const uint8_t *p, size_t n, char *why);
/* The ELF check alone (a cubin, or a fatbin entry's contents). */
int vcuda_elf_check(const uint8_t *p, size_t n, char *why);

#ifdef __cplusplus
}
#endif
#endif

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

/* The bytes of device memory a module loaded from the image takes for its data, as far
 * as the image tells before the driver loads it (what a tenant's quota is charged for a
 * module, server_gpu.h):
 *   a cubin: every section, NOBITS ones included (.nv.global, uninitialized __device__
 *     data, has no bytes in the image however large it is), each rounded up to its
 *     alignment, or its loadable segments' memory sizes if they add up to more;
 *   PTX (JIT-compiled by the driver): the module-scope .global and .const variables,
 *     sized from their declarations (image.c says how they are read);
 *   a fatbin: the largest of its entries -- the driver loads one, the one for its GPU,
 *     and which one is the driver's choice; the entries of one program built for several
 *     targets take about the same.
 * A PTX variable of a type this reader does not know is passed to unsized(name, length,
 * arg), to be sized by the driver once loaded (cuModuleGetGlobal); with unsized NULL it
 * fails the call.  The image must have passed vcuda_image_check (the function checks
 * what it reads again).  0 with *bytes set (saturating at UINT64_MAX), or -1 with the
 * reason in why (a PTX declaration this reader cannot follow). */
typedef void vcuda_image_unsized_fn(const char *name, size_t len, void *arg);
int vcuda_image_footprint(const uint8_t *p, size_t n, uint64_t *bytes, vcuda_image_unsized_fn *unsized, void *arg,
                          char *why);

#ifdef __cplusplus
}
#endif
#endif

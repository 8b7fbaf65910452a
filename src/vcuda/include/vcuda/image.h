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
 * libzstd is found -- is refused by name, never passed on.
 *
 * Decompression is bounded before it starts (a few KiB of zstd can declare, and
 * inflate to, a GiB): every entry header of a fatbin is checked first, and an image is
 * refused, with nothing decompressed, when one compressed entry declares more than
 * max_entry bytes decompressed or all of them together more than max_image.  An entry
 * is then decompressed into exactly the size it declares (data that would inflate
 * further is refused, never followed), within a budget shared by every thread of the
 * process: a check that would take the bytes being decompressed at one time beyond
 * `budget` waits up to wait_ms for others to finish, then is refused as busy.  So one
 * check costs at most max_image bytes of decompression, and the process holds at most
 * `budget` bytes of decompressed images at any time, whatever its clients send. */
#ifndef VCUDA_IMAGE_H
#define VCUDA_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The bounds on decompression (see above); vcuda-server's --max-entry-mib,
 * --max-image-mib and --inflate-budget-mib. */
typedef struct {
    uint64_t max_entry; /* decompressed bytes one compressed fatbin entry may declare */
    uint64_t max_image; /* ... all compressed entries of one image together */
    uint64_t budget;    /* bytes being decompressed in this process at one time */
    int wait_ms;        /* how long a check waits for room in the budget */
} vcuda_image_limits;
#define VCUDA_IMAGE_LIMITS_DEFAULT {(uint64_t)64 << 20, (uint64_t)256 << 20, (uint64_t)512 << 20, 2000}
/* Before the first check (not thread-safe against checks running). */
void vcuda_image_set_limits(const vcuda_image_limits *limits);
/* Bytes being decompressed now, and the most at one time since the last call that
 * asked for it (from then on the peak counts anew); either may be NULL. */
void vcuda_image_inflight(uint64_t *now, uint64_t *peak);

#define VCUDA_IMAGE_BUSY (-2)
/* 0 if the n bytes at p are a valid image; -1 if not (or it exceeds a bound), with the
 * reason in why (VCUDA_WHY_LEN bytes, may be NULL); VCUDA_IMAGE_BUSY if it could be
 * valid but the decompression budget had no room for it within wait_ms (why says so:
 * the same image may be sent again). */
int vcuda_image_check(const uint8_t *p, size_t n, char *why);
/* The ELF check alone (a cubin, or a fatbin entry's contents). */
int vcuda_elf_check(const uint8_t *p, size_t n, char *why);

/* The image checked as vcuda_image_check does (the same bounds, budget and results:
 * -1, or VCUDA_IMAGE_BUSY), and, in the same walk, the bytes of device memory a module
 * loaded from it takes for its data, as far as the image tells before the driver loads
 * it (what a tenant's quota is charged for a module, server_gpu.h).  Each compressed
 * entry is decompressed once, within the bounds, and both checked and sized from that
 * buffer: sizing never decompresses anything a check would not.
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
 * fails the call (the name lies in a buffer freed once the entry is read: copy it).  0
 * with *bytes set (saturating at UINT64_MAX), else as vcuda_image_check, also -1 for a
 * PTX declaration this reader cannot follow (why says which). */
typedef void vcuda_image_unsized_fn(const char *name, size_t len, void *arg);
int vcuda_image_footprint(const uint8_t *p, size_t n, uint64_t *bytes, vcuda_image_unsized_fn *unsized, void *arg,
                          char *why);

#ifdef __cplusplus
}
#endif
#endif

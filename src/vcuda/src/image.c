/* vcuda module image validation (see image.h).  Every offset and size read from the
 * image is compared as "need <= remaining" against the bytes present, so no check can
 * overflow; nothing outside [p, p+n) is ever read. */
#define _POSIX_C_SOURCE 200809L
#include "vcuda/image.h"

#include "vcuda/proto.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define bad(...) vcuda_fail(why, -1, __VA_ARGS__)

static uint64_t rd(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = v << 8 | p[i];
    return v;
}
#define U16(p) ((uint32_t)rd(p, 2))
#define U32(p) ((uint32_t)rd(p, 4))
#define U64(p) rd(p, 8)

/* [off, off+len) within n bytes. */
static int within(uint64_t off, uint64_t len, uint64_t n) { return off <= n && len <= n - off; }

enum {
    EM_CUDA = 190,
    SHT_SYMTAB = 2, SHT_STRTAB = 3, SHT_RELA = 4, SHT_NOTE = 7, SHT_NOBITS = 8, SHT_REL = 9,
    SHT_LOPROC = 0x70000000,
    SHN_LORESERVE = 0xff00,
    NV_INFO = 0x70000000 /* SHT_CUDA_INFO: attribute records */
};

typedef struct {
    uint32_t name, type;
    uint64_t flags, offset, size;
    uint32_t link, info;
    uint64_t align, entsize;
} shdr;

static void get_shdr(const uint8_t *p, shdr *s)
{
    s->name = U32(p), s->type = U32(p + 4), s->flags = U64(p + 8);
    s->offset = U64(p + 24), s->size = U64(p + 32);
    s->link = U32(p + 40), s->info = U32(p + 44), s->align = U64(p + 48), s->entsize = U64(p + 56);
}

/* .nv.info records: a 4-byte head (format byte, attribute byte, a 16-bit field) and, for
 * the sized format, that many bytes after it.  The 16-bit field is the value of the
 * half-word format, holds a byte value (and a pad byte) for the byte format and is
 * unused for the no-value format: every record is at least 4 bytes (as nvcc writes
 * them).  The driver walks them; they must tile the section. */
static int check_nv_info(const uint8_t *q, uint64_t size, unsigned sec, char *why)
{
    uint64_t at = 0;
    while (at < size) {
        if (size - at < 4) return bad("ELF section %u: truncated .nv.info record at +%llu", sec, (unsigned long long)at);
        unsigned fmt = q[at];
        uint64_t need;
        switch (fmt) {
        case 1:                                    /* no value */
        case 2:                                    /* byte */
        case 3: need = 4; break;                   /* half */
        case 4:                                    /* sized value */
            need = 4 + (uint64_t)U16(q + at + 2);
            break;
        default: return bad("ELF section %u: .nv.info record of unknown format %u at +%llu", sec, fmt, (unsigned long long)at);
        }
        if (need > size - at)
            return bad("ELF section %u: .nv.info record at +%llu runs past the section", sec, (unsigned long long)at);
        at += need;
    }
    return 0;
}

static int check_notes(const uint8_t *q, uint64_t size, unsigned sec, char *why)
{
    uint64_t at = 0;
    while (at < size) {
        if (size - at < 12) return bad("ELF section %u: truncated note header", sec);
        uint64_t nsz = (U32(q + at) + 3ull) & ~3ull, dsz = (U32(q + at + 4) + 3ull) & ~3ull;
        at += 12;
        if (nsz > size - at || dsz > size - at - nsz) return bad("ELF section %u: a note runs past the section", sec);
        at += nsz + dsz;
    }
    return 0;
}

int vcuda_elf_check(const uint8_t *p, size_t n, char *why)
{
    if (n < 64 || memcmp(p, "\177ELF", 4)) return bad("not an ELF image (%zu bytes)", n);
    if (p[4] != 2 || p[5] != 1 || p[6] != 1) return bad("ELF: not 64-bit little-endian version 1");
    if (U16(p + 18) != EM_CUDA) return bad("ELF: machine %u is not EM_CUDA (190)", U16(p + 18));
    if (U32(p + 20) != 1) return bad("ELF: e_version %u", U32(p + 20));
    uint64_t phoff = U64(p + 32), shoff = U64(p + 40);
    uint32_t ehsize = U16(p + 52), phentsize = U16(p + 54), phnum = U16(p + 56);
    uint32_t shentsize = U16(p + 58), shnum = U16(p + 60), shstrndx = U16(p + 62);
    if (ehsize != 64) return bad("ELF: header size %u, not 64", ehsize);
    /* program headers */
    if (phnum) {
        if (phentsize != 56) return bad("ELF: program header size %u, not 56", phentsize);
        if (!within(phoff, (uint64_t)phnum * 56, n))
            return bad("ELF: program header table (offset 0x%llx, %u x 56 bytes) runs past the image (%zu bytes)",
                       (unsigned long long)phoff, phnum, n);
        for (uint32_t i = 0; i < phnum; ++i) {
            const uint8_t *ph = p + phoff + (uint64_t)i * 56;
            uint64_t off = U64(ph + 8), filesz = U64(ph + 32), memsz = U64(ph + 40);
            if (!within(off, filesz, n))
                return bad("ELF: program header %u (offset 0x%llx, %llu bytes) runs past the image", i,
                           (unsigned long long)off, (unsigned long long)filesz);
            if (U32(ph) == 1 /* PT_LOAD */ && filesz > memsz) return bad("ELF: program header %u: file size > memory size", i);
        }
    }
    /* section headers */
    if (shnum == 0 || shnum >= SHN_LORESERVE) return bad("ELF: %u section headers", shnum);
    if (shentsize != 64) return bad("ELF: section header size %u, not 64", shentsize);
    if (!within(shoff, (uint64_t)shnum * 64, n))
        return bad("ELF: section header table (offset 0x%llx, %u x 64 bytes) runs past the image (%zu bytes)",
                   (unsigned long long)shoff, shnum, n);
    if (shstrndx == 0 || shstrndx >= shnum) return bad("ELF: section name table index %u of %u", shstrndx, shnum);
    const uint8_t *sh = p + shoff;
    shdr s, str;
    for (uint32_t i = 1; i < shnum; ++i) {
        get_shdr(sh + (uint64_t)i * 64, &s);
        if (s.type != SHT_NOBITS && !within(s.offset, s.size, n))
            return bad("ELF: section %u (offset 0x%llx, %llu bytes) runs past the image (%zu bytes)", i,
                       (unsigned long long)s.offset, (unsigned long long)s.size, n);
        if (s.link >= shnum) return bad("ELF: section %u links to section %u of %u", i, s.link, shnum);
        if (s.align & (s.align - 1)) return bad("ELF: section %u alignment %llu", i, (unsigned long long)s.align);
    }
    get_shdr(sh + (uint64_t)shstrndx * 64, &str);
    if (str.type != SHT_STRTAB) return bad("ELF: section name table (section %u) is not a string table", shstrndx);
    for (uint32_t i = 0; i < shnum; ++i) {
        get_shdr(sh + (uint64_t)i * 64, &s);
        if (i == 0) {
            if (s.type || s.size || s.offset) return bad("ELF: section 0 is not empty");
            continue;
        }
        /* (a NOBITS section's offset was never checked: no pointer is made from it) */
        const uint8_t *q = s.type == SHT_NOBITS ? p : p + s.offset;
        if (s.name >= str.size) return bad("ELF: section %u name offset %u outside the name table", i, s.name);
        switch (s.type) {
        case SHT_STRTAB:
            if (s.size == 0 || q[s.size - 1] != 0) return bad("ELF: string table (section %u) does not end in NUL", i);
            break;
        case SHT_SYMTAB: {
            shdr strs;
            if (s.entsize != 24 || s.size % 24) return bad("ELF: symbol table (section %u) entries of %llu bytes", i,
                                                          (unsigned long long)s.entsize);
            get_shdr(sh + (uint64_t)s.link * 64, &strs);
            if (strs.type != SHT_STRTAB) return bad("ELF: symbol table (section %u) names are not in a string table", i);
            for (uint64_t k = 0; k < s.size / 24; ++k) {
                const uint8_t *sym = q + k * 24;
                uint32_t name = U32(sym), shndx = U16(sym + 6);
                uint64_t value = U64(sym + 8), size = U64(sym + 16);
                if (name >= strs.size) return bad("ELF: symbol %llu name outside its string table", (unsigned long long)k);
                if (shndx >= shnum && shndx < SHN_LORESERVE)
                    return bad("ELF: symbol %llu in section %u of %u", (unsigned long long)k, shndx, shnum);
                if (shndx && shndx < shnum) {
                    shdr t;
                    get_shdr(sh + (uint64_t)shndx * 64, &t);
                    if (!within(value, size, t.size))
                        return bad("ELF: symbol %llu (0x%llx, %llu bytes) outside its section %u", (unsigned long long)k,
                                   (unsigned long long)value, (unsigned long long)size, shndx);
                }
            }
            break;
        }
        case SHT_REL:
        case SHT_RELA: {
            uint64_t es = s.type == SHT_RELA ? 24 : 16;
            shdr syms, tgt;
            if (s.entsize != es || s.size % es) return bad("ELF: relocation section %u entries of %llu bytes", i,
                                                          (unsigned long long)s.entsize);
            get_shdr(sh + (uint64_t)s.link * 64, &syms);
            if (syms.type != SHT_SYMTAB) return bad("ELF: relocation section %u does not link to a symbol table", i);
            if (s.info == 0 || s.info >= shnum) return bad("ELF: relocation section %u applies to section %u", i, s.info);
            get_shdr(sh + (uint64_t)s.info * 64, &tgt);
            for (uint64_t k = 0; k < s.size / es; ++k) {
                const uint8_t *r = q + k * es;
                uint64_t off = U64(r), symi = U64(r + 8) >> 32;
                if (symi >= syms.size / 24) return bad("ELF: relocation %llu of section %u names symbol %llu",
                                                      (unsigned long long)k, i, (unsigned long long)symi);
                if (!within(off, 8, tgt.size) && !within(off, 4, tgt.size))
                    return bad("ELF: relocation %llu of section %u at 0x%llx outside section %u", (unsigned long long)k,
                               i, (unsigned long long)off, s.info);
            }
            break;
        }
        case SHT_NOTE:
            if (check_notes(q, s.size, i, why)) return -1;
            break;
        case NV_INFO:
            if (check_nv_info(q, s.size, i, why)) return -1;
            break;
        default: break;
        }
    }
    return 0;
}

/* ---- fatbin containers ----------------------------------------------------------------- */

enum { FATBIN_MAGIC = 0xba55ed50u, ENTRY_PTX = 1, ENTRY_ELF = 2, FLAG_LZ4 = 0x2000, FLAG_ZSTD = 0x8000 };

static vcuda_image_limits limits = VCUDA_IMAGE_LIMITS_DEFAULT;
void vcuda_image_set_limits(const vcuda_image_limits *l) { limits = *l; }

static size_t (*zstd_decompress)(void *, size_t, const void *, size_t);
static unsigned (*zstd_is_error)(size_t);
static pthread_once_t zstd_once = PTHREAD_ONCE_INIT;
static void zstd_load(void)
{
    void *h = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    *(void **)&zstd_decompress = dlsym(h, "ZSTD_decompress");
    *(void **)&zstd_is_error = dlsym(h, "ZSTD_isError");
    if (!zstd_decompress || !zstd_is_error) zstd_decompress = NULL;
}

/* The process-wide decompression budget: bytes reserved by the checks decompressing now. */
static pthread_mutex_t budget_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t budget_cv;
static pthread_once_t budget_once = PTHREAD_ONCE_INIT;
static uint64_t inflight, inflight_peak;
static void budget_init(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&budget_cv, &a);
    pthread_condattr_destroy(&a);
}

void vcuda_image_inflight(uint64_t *now, uint64_t *peak)
{
    pthread_mutex_lock(&budget_mu);
    if (now) *now = inflight;
    if (peak) *peak = inflight_peak, inflight_peak = inflight;
    pthread_mutex_unlock(&budget_mu);
}

/* Reserves n (<= the budget) bytes, waiting up to wait_ms for them.  0, or
 * VCUDA_IMAGE_BUSY (why set). */
static int budget_take(uint64_t n, unsigned e, char *why)
{
    pthread_once(&budget_once, budget_init);
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    int wait_ms = limits.wait_ms > 0 ? limits.wait_ms : 0;
    dl.tv_sec += wait_ms / 1000, dl.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) ++dl.tv_sec, dl.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&budget_mu);
    while (inflight + n > limits.budget)
        if (pthread_cond_timedwait(&budget_cv, &budget_mu, &dl)) break; /* (ETIMEDOUT) */
    uint64_t busy = inflight;
    int room = inflight + n <= limits.budget;
    if (room) {
        inflight += n;
        if (inflight > inflight_peak) inflight_peak = inflight;
    }
    pthread_mutex_unlock(&budget_mu);
    if (room) return 0;
    return vcuda_fail(why, VCUDA_IMAGE_BUSY,
                      "fatbin entry %u: server busy: %llu of %llu MiB for decompression in use for %d ms "
                      "(--inflate-budget-mib); try again", e, (unsigned long long)(busy >> 20),
                      (unsigned long long)(limits.budget >> 20), wait_ms);
}

static void budget_give(uint64_t n)
{
    pthread_mutex_lock(&budget_mu);
    inflight -= n;
    pthread_cond_broadcast(&budget_cv);
    pthread_mutex_unlock(&budget_mu);
}

static int check_ptx(const uint8_t *q, uint64_t n, unsigned e, char *why)
{
    const uint8_t *z = memchr(q, 0, n);
    if (!z) return bad("fatbin entry %u: PTX text without a terminating NUL", e);
    for (const uint8_t *c = q; c < z; ++c)
        if ((*c < 0x20 && *c != '\n' && *c != '\r' && *c != '\t') || *c > 0x7e)
            return bad("fatbin entry %u: PTX with a non-text byte 0x%02x at +%ld", e, *c, (long)(c - q));
    return 0;
}

static int check_entry_payload(unsigned kind, const uint8_t *q, uint64_t n, unsigned e, char *why)
{
    if (kind == ENTRY_PTX) return check_ptx(q, n, e, why);
    if (vcuda_elf_check(q, n, why)) {
        char inner[VCUDA_WHY_LEN];
        snprintf(inner, sizeof inner, "%s", why ? why : "");
        return bad("fatbin entry %u: %s", e, inner);
    }
    return 0;
}

/* One fatbin entry's header, checked against the image and the bounds. */
typedef struct {
    uint32_t kind, ehs;
    uint64_t psize, csize, dsize; /* dsize: 0 for an entry stored uncompressed */
} entry;

static int check_entry_header(const uint8_t *h, uint64_t left, unsigned e, entry *x, char *why)
{
    /* entry header: kind u16, version u16, header size u32, payload size u64,
     * compressed size u32 (+0x10), ..., name offset/length u32 (+0x20), flags u64
     * (+0x28), ..., decompressed size u64 (+0x38) */
    if (left < 64) return bad("fatbin entry %u: truncated header", e);
    uint64_t flags = U64(h + 0x28);
    x->kind = U16(h), x->ehs = U32(h + 4), x->psize = U64(h + 8), x->csize = 0, x->dsize = 0;
    if (x->kind != ENTRY_PTX && x->kind != ENTRY_ELF)
        return bad("fatbin entry %u: kind %u (only PTX and cubin are served)", e, x->kind);
    if (x->ehs < 64 || !within(x->ehs, x->psize, left))
        return bad("fatbin entry %u: header of %u bytes and payload of %llu bytes run past the image", e, x->ehs,
                   (unsigned long long)x->psize);
    uint32_t name_off = U32(h + 0x20), name_len = U32(h + 0x24);
    if (name_len && !within(name_off, name_len, x->ehs)) return bad("fatbin entry %u: name outside its header", e);
    if (flags & FLAG_LZ4)
        return bad("fatbin entry %u: LZ4-compressed (older nvcc): not validated, refused "
                   "(rebuild without fatbin compression, or with an nvcc that compresses with zstd)", e);
    if (!(flags & FLAG_ZSTD)) return 0;
    x->csize = U32(h + 0x10), x->dsize = U64(h + 0x38);
    if (x->csize > x->psize)
        return bad("fatbin entry %u: compressed size %llu > payload %llu", e, (unsigned long long)x->csize,
                   (unsigned long long)x->psize);
    if (x->dsize == 0) return bad("fatbin entry %u: compressed, declaring 0 bytes decompressed", e);
    if (x->dsize > limits.max_entry)
        return bad("fatbin entry %u: declares %llu bytes decompressed, over the %llu MiB per entry this server takes "
                   "(--max-entry-mib)", e, (unsigned long long)x->dsize, (unsigned long long)(limits.max_entry >> 20));
    if (x->dsize > limits.budget)
        return bad("fatbin entry %u: declares %llu bytes decompressed, over the %llu MiB this server decompresses at "
                   "once (--inflate-budget-mib)", e, (unsigned long long)x->dsize,
                   (unsigned long long)(limits.budget >> 20));
    return 0;
}

/* What a walk does with each entry's contents: fn(kind, bytes, size, entry index, arg),
 * 0 or an error (why set). */
typedef int entry_fn(unsigned kind, const uint8_t *q, uint64_t n, unsigned e, void *arg, char *why);

/* A compressed entry's contents: decompressed into exactly its declared size, within
 * the budget, and handed to fn there, then freed: an entry is decompressed once per
 * walk, whatever fn reads of it. */
static int walk_compressed(const entry *x, const uint8_t *q, unsigned e, entry_fn *fn, void *arg, char *why)
{
    int rc = budget_take(x->dsize, e, why);
    if (rc) return rc;
    uint8_t *d = malloc(x->dsize);
    if (!d) rc = bad("fatbin entry %u: no memory to decompress %llu bytes", e, (unsigned long long)x->dsize);
    else {
        /* the output capacity is the declared size: zstd stops there (an error) */
        size_t got = zstd_decompress(d, x->dsize, q, x->csize);
        rc = zstd_is_error(got) || got != x->dsize
                 ? bad("fatbin entry %u: zstd data does not decompress to the %llu bytes declared", e,
                       (unsigned long long)x->dsize)
                 : fn(x->kind, d, x->dsize, e, arg, why);
        free(d);
    }
    budget_give(x->dsize);
    return rc;
}

/* Calls fn for each entry of the fatbin at p, after checking the container and every
 * entry header against the image and the bounds (nothing is decompressed for an image
 * that fails them), compressed entries decompressed within the budget: 0 when every
 * call returned 0, else the first error (-1, or VCUDA_IMAGE_BUSY; why set by the walk
 * or by fn). */
static int fatbin_walk(const uint8_t *p, size_t n, entry_fn *fn, void *arg, char *why)
{
    if (n < 16) return bad("fatbin header truncated");
    uint32_t version = U16(p + 4), hs = U16(p + 6);
    uint64_t fs = U64(p + 8);
    if (version != 1) return bad("fatbin version %u", version);
    if (hs < 16 || !within(hs, fs, n) || hs + fs != n) return bad("fatbin header does not match the image size");
    /* every entry header first: nothing is decompressed for an image whose sizes fail */
    uint64_t at, inflate = 0;
    unsigned e = 0;
    entry x;
    for (at = hs; at < n; ++e) {
        if (check_entry_header(p + at, n - at, e, &x, why)) return -1;
        inflate += x.dsize; /* (each <= max_entry: no overflow) */
        if (inflate > limits.max_image)
            return bad("fatbin: entries 0-%u declare %llu bytes decompressed, over the %llu MiB per image this server "
                       "takes (--max-image-mib)", e, (unsigned long long)inflate,
                       (unsigned long long)(limits.max_image >> 20));
        at += x.ehs + x.psize;
    }
    if (e == 0) return bad("fatbin without entries");
    if (inflate) {
        pthread_once(&zstd_once, zstd_load);
        if (!zstd_decompress) return bad("fatbin: zstd-compressed entries, and no libzstd.so.1 here to validate them: refused");
    }
    e = 0;
    for (at = hs; at < n; ++e) {
        check_entry_header(p + at, n - at, e, &x, why);
        const uint8_t *q = p + at + x.ehs;
        int rc = x.dsize ? walk_compressed(&x, q, e, fn, arg, why) : fn(x.kind, q, x.psize, e, arg, why);
        if (rc) return rc;
        at += x.ehs + x.psize;
    }
    return 0;
}

static int check_entry(unsigned kind, const uint8_t *q, uint64_t n, unsigned e, void *arg, char *why)
{
    (void)arg;
    return check_entry_payload(kind, q, n, e, why);
}

int vcuda_image_check(const uint8_t *p, size_t n, char *why)
{
    if (n >= 16 && U32(p) == FATBIN_MAGIC) return fatbin_walk(p, n, check_entry, NULL, why);
    if (n >= 4 && !memcmp(p, "\177ELF", 4)) return vcuda_elf_check(p, n, why);
    return bad("image is neither a fatbin nor a CUDA ELF (cubin)");
}

/* ---- what a module's data takes on the device ------------------------------------------ */

static uint64_t add_sat(uint64_t a, uint64_t b) { return b > UINT64_MAX - a ? UINT64_MAX : a + b; }
static uint64_t mul_sat(uint64_t a, uint64_t b) { return a && b > UINT64_MAX / a ? UINT64_MAX : a * b; }

/* An ELF that passed vcuda_elf_check: every section, each rounded up to its alignment
 * (NOBITS ones too: .nv.global, the uninitialized __device__ data, has no bytes in the
 * image however large it is), or the memory sizes of its loadable segments if they add
 * up to more.  Every section is counted, whatever its name or flags say, so that no
 * renamed or re-flagged section escapes; the image's metadata is counted with the rest
 * (at most the image's own size, beside the NOBITS data). */
static uint64_t elf_footprint(const uint8_t *p)
{
    uint64_t phoff = U64(p + 32), shoff = U64(p + 40), secs = 0, segs = 0;
    uint32_t phnum = U16(p + 56), shnum = U16(p + 60);
    for (uint32_t i = 1; i < shnum; ++i) {
        shdr s;
        get_shdr(p + shoff + (uint64_t)i * 64, &s);
        uint64_t a = s.align > 1 ? s.align : 1, sz = s.size;
        if (sz % a) sz = add_sat(sz, a - sz % a);
        secs = add_sat(secs, sz);
    }
    for (uint32_t i = 0; i < phnum; ++i) {
        const uint8_t *ph = p + phoff + (uint64_t)i * 56;
        if (U32(ph) == 1 /* PT_LOAD */) segs = add_sat(segs, U64(ph + 40));
    }
    return secs > segs ? secs : segs;
}

/* ---- PTX: the module-scope .global and .const variables -------------------------------- *
 * A small reader of PTX's declarations, not a PTX parser: it skips comments, strings,
 * the line directives (.version, .target, .address_size, .file), parenthesized lists
 * (parameters) and brace blocks that are not initializers (function and section
 * bodies: their .local/.shared/.reg declarations are not module data), and reads each
 * remaining statement up to its ';'.  A statement holding .global or .const (without
 * .extern) declares variables: [.align N] [.attribute(...)] [.vN] .TYPE name [dims]
 * [= initializer] {, name [dims] [= initializer]}; the size is the type's times the
 * vector width times the dimensions, an empty first dimension taken from the number of
 * the initializer's elements. */
typedef struct {
    const char *p, *end;
    const char *t; /* the current token */
    size_t len;
} ptx_lex;

static int is_ident_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || c == '$' || c == '%'; }
static int is_ident(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }

/* The next token (len 0 at the end).  Directives (.name) and identifiers are one token,
 * numbers are one token with whatever letters follow their digits (0x.., 0f.., 12U),
 * strings are one token, anything else is one character. */
static void lex(ptx_lex *x)
{
    const char *p = x->p, *e = x->end;
    for (;;) {
        while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) ++p;
        if (e - p >= 2 && p[0] == '/' && p[1] == '/') {
            while (p < e && *p != '\n') ++p;
            continue;
        }
        if (e - p >= 2 && p[0] == '/' && p[1] == '*') {
            p += 2;
            while (e - p >= 2 && !(p[0] == '*' && p[1] == '/')) ++p;
            p = e - p >= 2 ? p + 2 : e;
            continue;
        }
        break;
    }
    x->t = p;
    if (p == e) {
        x->len = 0, x->p = p;
        return;
    }
    const char *q = p + 1;
    if (*p == '.' || is_ident_start(*p) || (*p >= '0' && *p <= '9'))
        while (q < e && (is_ident(*q) || (*p >= '0' && *p <= '9' && *q == '.'))) ++q;
    else if (*p == '"') {
        while (q < e && *q != '"') q += *q == '\\' && q + 1 < e ? 2 : 1;
        if (q < e) ++q;
    }
    x->len = (size_t)(q - p), x->p = q;
}

static int tok_is(const ptx_lex *x, const char *s) { return x->len == strlen(s) && !memcmp(x->t, s, x->len); }

/* An integer token (decimal, 0x hex or 0-led octal, an optional U suffix): 0 or -1. */
static int ptx_int(const ptx_lex *x, uint64_t *v)
{
    const char *p = x->t, *e = x->t + x->len;
    unsigned base = 10;
    uint64_t n = 0;
    if (e > p && e[-1] == 'U') --e;
    if (e - p > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) base = 16, p += 2;
    else if (e - p > 1 && p[0] == '0') base = 8, ++p;
    if (p == e) return base == 8 ? (*v = 0, 0) : -1;
    for (; p < e; ++p) {
        unsigned d = *p >= '0' && *p <= '9' ? (unsigned)(*p - '0') : *p >= 'a' && *p <= 'f' ? (unsigned)(*p - 'a' + 10)
                   : *p >= 'A' && *p <= 'F' ? (unsigned)(*p - 'A' + 10) : 99;
        if (d >= base) return -1;
        n = add_sat(mul_sat(n, base), d);
    }
    *v = n;
    return 0;
}

/* Bytes of a PTX fundamental type, 0 for one this reader does not know. */
static unsigned ptx_type_bytes(const ptx_lex *x)
{
    static const struct { const char *name; unsigned bytes; } types[] = {
        {".b8", 1}, {".u8", 1}, {".s8", 1}, {".b16", 2}, {".u16", 2}, {".s16", 2}, {".f16", 2}, {".bf16", 2},
        {".b32", 4}, {".u32", 4}, {".s32", 4}, {".f32", 4}, {".f16x2", 4}, {".bf16x2", 4}, {".tf32", 4},
        {".b64", 8}, {".u64", 8}, {".s64", 8}, {".f64", 8}, {".b128", 16},
        /* texture, sampler and surface references: a handle each */
        {".texref", 8}, {".samplerref", 8}, {".surfref", 8}};
    for (size_t i = 0; i < sizeof types / sizeof *types; ++i)
        if (tok_is(x, types[i].name)) return types[i].bytes;
    return 0;
}

/* Skips a balanced group whose opening token (open) is current; the closing one is
 * consumed.  -1 if the text ends first. */
static int skip_group(ptx_lex *x, char open, char close)
{
    unsigned depth = 1;
    while (depth) {
        lex(x);
        if (!x->len) return -1;
        if (x->len == 1 && *x->t == open) ++depth;
        else if (x->len == 1 && *x->t == close) --depth;
    }
    return 0;
}

typedef struct {
    uint64_t bytes;
    vcuda_image_unsized_fn *unsized;
    void *arg;
} ptx_sum;

/* One variable of a declaration, its name current: its dimensions and initializer are
 * read and its size added (or its name reported as unsized).  The token after it is
 * current on return.  0 or -1 (why set). */
static int ptx_variable(ptx_lex *x, unsigned elem, uint64_t vec, ptx_sum *sum, char *why)
{
    const char *name = x->t;
    size_t name_len = x->len;
    uint64_t size = mul_sat(elem, vec);
    int open_first = 0;
    unsigned ndims = 0;
    lex(x);
    while (tok_is(x, "[")) {
        uint64_t d;
        lex(x);
        if (tok_is(x, "]")) {
            if (ndims) return bad("PTX variable %.*s: only its first dimension may be left empty", (int)name_len, name);
            open_first = 1;
        } else {
            if (ptx_int(x, &d)) return bad("PTX variable %.*s: dimension '%.*s' is not a number", (int)name_len, name,
                                           (int)(x->len > 32 ? 32 : x->len), x->t);
            size = mul_sat(size, d);
            lex(x);
            if (!tok_is(x, "]")) return bad("PTX variable %.*s: a dimension without its ']'", (int)name_len, name);
        }
        ++ndims;
        lex(x);
    }
    if (tok_is(x, "=")) {
        lex(x);
        if (tok_is(x, "{")) { /* elements: the commas at its top level, plus one */
            uint64_t count = 0;
            unsigned depth = 1, parens = 0;
            int any = 0;
            while (depth) {
                lex(x);
                if (!x->len) return bad("PTX variable %.*s: initializer without its '}'", (int)name_len, name);
                if (tok_is(x, "{")) ++depth, any = 1;
                else if (tok_is(x, "}")) --depth;
                else if (tok_is(x, "(")) ++parens, any = 1;
                else if (tok_is(x, ")")) parens -= parens > 0;
                else if (depth == 1 && !parens && tok_is(x, ",")) ++count;
                else any = 1;
            }
            if (open_first) size = mul_sat(size, any ? count + 1 : 0);
            lex(x);
        } else { /* one value: up to the ',' or ';' outside parentheses */
            if (open_first) return bad("PTX variable %.*s: an open dimension with a single value", (int)name_len, name);
            while (x->len && !tok_is(x, ",") && !tok_is(x, ";"))
                if (tok_is(x, "(") && skip_group(x, '(', ')')) return bad("PTX: unbalanced '('");
                else lex(x);
        }
    } else if (open_first) {
        return bad("PTX variable %.*s: an open dimension without an initializer (an .extern's)", (int)name_len, name);
    }
    if (!elem) {
        if (!sum->unsized) return bad("PTX variable %.*s: a type this server cannot size", (int)name_len, name);
        sum->unsized(name, name_len, sum->arg);
    } else {
        sum->bytes = add_sat(sum->bytes, size);
    }
    return 0;
}

static int ptx_footprint(const uint8_t *text, uint64_t n, ptx_sum *sum, char *why)
{
    const char *end = memchr(text, 0, n);
    ptx_lex x = {(const char *)text, end ? end : (const char *)text + n, NULL, 0};
    for (lex(&x); x.len;) {
        if (tok_is(&x, ".version") || tok_is(&x, ".target") || tok_is(&x, ".address_size") || tok_is(&x, ".file")) {
            while (x.p < x.end && *x.p != '\n') ++x.p; /* (their arguments end with the line) */
            lex(&x);
            continue;
        }
        /* a statement: up to ';', or through a body */
        int data = 0, ext = 0, other = 0, func = 0;
        unsigned elem = 0;
        uint64_t vec = 1;
        for (;; lex(&x)) {
            if (!x.len) return data && !ext && !other && !func ? bad("PTX: a declaration without its ';'") : 0;
            if (tok_is(&x, ";")) break;
            if (tok_is(&x, "{")) { /* a body (initializers come after '=', read below) */
                if (skip_group(&x, '{', '}')) return bad("PTX: unbalanced '{'");
                break;
            }
            if (tok_is(&x, "(")) {
                if (skip_group(&x, '(', ')')) return bad("PTX: unbalanced '('");
                continue;
            }
            if (tok_is(&x, ".global") || tok_is(&x, ".const")) data = 1;
            else if (tok_is(&x, ".extern")) ext = 1;
            else if (tok_is(&x, ".entry") || tok_is(&x, ".func")) func = 1;
            else if (tok_is(&x, ".shared") || tok_is(&x, ".local") || tok_is(&x, ".param") || tok_is(&x, ".reg") ||
                     tok_is(&x, ".tex") || tok_is(&x, ".sreg"))
                other = 1;
            else if (tok_is(&x, ".v2")) vec = 2;
            else if (tok_is(&x, ".v4")) vec = 4;
            else if (tok_is(&x, ".v8")) vec = 8;
            else if (*x.t == '.' && ptx_type_bytes(&x)) elem = ptx_type_bytes(&x);
            else if (is_ident_start(*x.t) && data && !ext && !other && !func) {
                /* the declaration's variables, separated by ',' */
                for (;;) {
                    if (ptx_variable(&x, elem, vec, sum, why)) return -1;
                    if (!tok_is(&x, ",")) break;
                    lex(&x);
                    if (!x.len || !is_ident_start(*x.t)) return bad("PTX: a ',' not followed by a variable");
                }
                if (!tok_is(&x, ";")) return bad("PTX: a declaration not ended by ';' (at '%.*s')",
                                                  (int)(x.len > 32 ? 32 : x.len), x.t);
                break;
            }
        }
        lex(&x);
    }
    return 0;
}

typedef struct {
    uint64_t most;
    vcuda_image_unsized_fn *unsized;
    void *arg;
} footprint_walk;

/* A fatbin entry's contents (decompressed by the walk if compressed), checked as
 * vcuda_image_check does, then sized from the same bytes. */
static int entry_footprint(unsigned kind, const uint8_t *q, uint64_t n, unsigned e, void *arg, char *why)
{
    footprint_walk *w = arg;
    uint64_t b = 0;
    if (check_entry_payload(kind, q, n, e, why)) return -1;
    if (kind == ENTRY_PTX) {
        ptx_sum sum = {0, w->unsized, w->arg};
        if (ptx_footprint(q, n, &sum, why)) {
            char inner[VCUDA_WHY_LEN];
            snprintf(inner, sizeof inner, "%s", why ? why : "");
            return bad("fatbin entry %u: %s", e, inner);
        }
        b = sum.bytes;
    } else {
        b = elf_footprint(q);
    }
    if (b > w->most) w->most = b;
    return 0;
}

int vcuda_image_footprint(const uint8_t *p, size_t n, uint64_t *bytes, vcuda_image_unsized_fn *unsized, void *arg,
                          char *why)
{
    footprint_walk w = {0, unsized, arg};
    *bytes = 0;
    if (n >= 16 && U32(p) == FATBIN_MAGIC) {
        int rc = fatbin_walk(p, n, entry_footprint, &w, why);
        if (rc) return rc;
        *bytes = w.most;
        return 0;
    }
    if (n >= 4 && !memcmp(p, "\177ELF", 4)) {
        if (vcuda_elf_check(p, n, why)) return -1;
        *bytes = elf_footprint(p);
        return 0;
    }
    /* (the driver also takes bare PTX text; the validator does not, so neither does this) */
    return bad("image is neither a fatbin nor a CUDA ELF (cubin)");
}

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

/* A compressed entry's contents: decompressed into exactly its declared size, within
 * the budget, then validated like an uncompressed one. */
static int check_compressed(const entry *x, const uint8_t *q, unsigned e, char *why)
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
                 : check_entry_payload(x->kind, d, x->dsize, e, why);
        free(d);
    }
    budget_give(x->dsize);
    return rc;
}

static int check_fatbin(const uint8_t *p, size_t n, char *why)
{
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
        int rc = x.dsize ? check_compressed(&x, q, e, why) : check_entry_payload(x.kind, q, x.psize, e, why);
        if (rc) return rc;
        at += x.ehs + x.psize;
    }
    return 0;
}

int vcuda_image_check(const uint8_t *p, size_t n, char *why)
{
    if (n >= 16 && U32(p) == FATBIN_MAGIC) return check_fatbin(p, n, why);
    if (n >= 4 && !memcmp(p, "\177ELF", 4)) return vcuda_elf_check(p, n, why);
    return bad("image is neither a fatbin nor a CUDA ELF (cubin)");
}

/* vcuda tenants (see tenants.h). */
#define _POSIX_C_SOURCE 200809L
#include "vcuda/tenants.h"

#include "vcuda/sha256.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_FILE_BYTES (16u << 20)
#define MAX_MEM_MIB (1ull << 30) /* as --client-mem-mib */
#define MAX_CONNS_FIELD 65536u

int vcuda_tenant_name_ok(const char *name, size_t len)
{
    if (len < 1 || len > VCUDA_TENANT_NAME_MAX) return 0;
    for (size_t i = 0; i < len; ++i) {
        char c = name[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-'))
            return 0;
    }
    return 1;
}

static int tenant_init(vcuda_tenant *t, const char *name, size_t nlen, const uint8_t *secret, size_t slen,
                       uint64_t quota, uint32_t max_conns)
{
    memset(t, 0, sizeof *t);
    memcpy(t->name, name, nlen);
    memcpy(t->secret, secret, slen);
    t->secret_len = slen, t->mem_quota = quota, t->max_conns = max_conns;
    return pthread_mutex_init(&t->mu, NULL) ? -1 : 0;
}

void vcuda_tenants_free(vcuda_tenants *ts)
{
    for (size_t i = 0; i < ts->n; ++i) {
        pthread_mutex_destroy(&ts->t[i].mu);
        vcuda_wipe(ts->t[i].secret, sizeof ts->t[i].secret);
    }
    free(ts->t);
    vcuda_wipe(ts, sizeof *ts); /* (nobody's secret too) */
}

int vcuda_tenants_only(vcuda_tenants *ts, const char *name)
{
    vcuda_tenant *t = vcuda_tenant_find(ts, (const uint8_t *)name, strlen(name));
    char keep[VCUDA_TENANT_NAME_MAX + 1];
    uint64_t quota = t ? t->mem_quota : 0;
    uint32_t max_conns = t ? t->max_conns : 0;
    if (t) memcpy(keep, t->name, sizeof keep);
    for (size_t i = 0; i < ts->n; ++i) {
        pthread_mutex_destroy(&ts->t[i].mu);
        vcuda_wipe(&ts->t[i], sizeof ts->t[i]);
    }
    vcuda_wipe(ts->nobody, sizeof ts->nobody);
    ts->n = 0;
    if (!t) return -1;
    static const uint8_t none[1];
    if (tenant_init(&ts->t[0], keep, strlen(keep), none, 0, quota, max_conns)) return -1;
    ts->n = 1;
    return 0;
}

static int start(vcuda_tenants *ts, char *why)
{
    memset(ts, 0, sizeof *ts);
    if (vcuda_random(ts->nobody, sizeof ts->nobody)) return vcuda_fail(why, -1, "no random bytes");
    return 0;
}

int vcuda_tenants_single(vcuda_tenants *ts, const uint8_t *secret, size_t len, uint64_t mem_quota, char *why)
{
    if (start(ts, why)) return -1;
    if (len < 1 || len > VCUDA_MAX_TOKEN) return vcuda_fail(why, -1, "a secret of %zu bytes", len);
    if (!(ts->t = calloc(1, sizeof *ts->t))) return vcuda_fail(why, -1, "out of memory");
    if (tenant_init(ts->t, VCUDA_TENANT_DEFAULT, strlen(VCUDA_TENANT_DEFAULT), secret, len, mem_quota, 0)) {
        free(ts->t), ts->t = NULL;
        return vcuda_fail(why, -1, "no mutex");
    }
    ts->n = 1;
    return 0;
}

/* A decimal field within [0, max]: 0, or -1. */
static int number(const char *p, size_t n, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0 || n > 20) return -1;
    for (size_t i = 0; i < n; ++i) {
        if (p[i] < '0' || p[i] > '9') return -1;
        v = v * 10 + (uint64_t)(p[i] - '0');
        if (v > max) return -1;
    }
    *out = v;
    return 0;
}

/* One line's fields, split at blanks: the count (more than 4 counts as 5). */
static int fields(const char *p, size_t n, const char **f, size_t *len)
{
    int k = 0;
    size_t i = 0;
    while (i < n) {
        while (i < n && (p[i] == ' ' || p[i] == '\t')) ++i;
        if (i == n) break;
        size_t s = i;
        while (i < n && p[i] != ' ' && p[i] != '\t') ++i;
        if (k == 5) return 5;
        f[k] = p + s, len[k] = i - s, ++k;
    }
    return k;
}

static int parse(vcuda_tenants *ts, const char *path, const char *text, size_t size, char *why)
{
    size_t cap = 0;
    unsigned line = 0;
    for (size_t at = 0; at < size; ++line) {
        const char *p = text + at, *nl = memchr(p, '\n', size - at);
        size_t n = nl ? (size_t)(nl - p) : size - at;
        at += n + (nl != NULL);
        if (n && p[n - 1] == '\r') --n;
        const char *f[5];
        size_t len[5];
        int k = fields(p, n, f, len);
        if (k == 0 || f[0][0] == '#') continue;
#define BAD(...)                                                                                                       \
    do {                                                                                                               \
        char reason_[VCUDA_WHY_LEN];                                                                                   \
        snprintf(reason_, sizeof reason_, __VA_ARGS__);                                                                \
        return vcuda_fail(why, -1, "tenants file %s line %u: %s", path, line + 1, reason_);                           \
    } while (0)
        if (k != 4) BAD("%d fields, want 4: NAME MEM_MIB MAX_CONNS SECRET", k == 5 ? 5 : k);
        if (!vcuda_tenant_name_ok(f[0], len[0])) BAD("the name is not 1 to 64 of [A-Za-z0-9._-]");
        uint64_t mib, conns;
        if (number(f[1], len[1], MAX_MEM_MIB, &mib)) BAD("MEM_MIB is not a number in [0, %llu]", MAX_MEM_MIB);
        if (number(f[2], len[2], MAX_CONNS_FIELD, &conns)) BAD("MAX_CONNS is not a number in [0, %u]", MAX_CONNS_FIELD);
        if (len[3] > VCUDA_MAX_TOKEN) BAD("the secret is longer than %d bytes", VCUDA_MAX_TOKEN);
        for (size_t i = 0; i < len[3]; ++i)
            if ((unsigned char)f[3][i] < 0x21 || (unsigned char)f[3][i] > 0x7e) BAD("the secret has a non-printable byte");
        for (size_t i = 0; i < ts->n; ++i)
            if (strlen(ts->t[i].name) == len[0] && !memcmp(ts->t[i].name, f[0], len[0]))
                BAD("tenant %.*s is already defined", (int)len[0], f[0]);
        if (ts->n == VCUDA_MAX_TENANTS) BAD("more than %d tenants", VCUDA_MAX_TENANTS);
        if (ts->n == cap) {
            size_t nc = cap ? 2 * cap : 16;
            vcuda_tenant *q = malloc(nc * sizeof *q); /* (not realloc: the old block is wiped) */
            if (!q) BAD("out of memory");
            if (ts->n) memcpy(q, ts->t, ts->n * sizeof *q);
            vcuda_wipe(ts->t, cap * sizeof *q);
            free(ts->t);
            ts->t = q, cap = nc;
        }
        if (tenant_init(&ts->t[ts->n], f[0], len[0], (const uint8_t *)f[3], len[3], mib << 20, (uint32_t)conns))
            BAD("no mutex");
        ++ts->n;
#undef BAD
    }
    if (ts->n == 0) return vcuda_fail(why, -1, "tenants file %s defines no tenant", path);
    return 0;
}

int vcuda_tenants_load(vcuda_tenants *ts, const char *path, char *why)
{
    if (start(ts, why)) return -1;
    int fd;
    if (vcuda_private_file_open(path, "tenants file", &fd, why)) return -1;
    char *text = malloc(MAX_FILE_BYTES + 1);
    size_t size = 0;
    if (!text) return close(fd), vcuda_fail(why, -1, "out of memory");
    for (;;) {
        ssize_t r = read(fd, text + size, MAX_FILE_BYTES + 1 - size);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            close(fd), free(text);
            return vcuda_fail(why, -1, "cannot read tenants file %s: %s", path, strerror(e));
        }
        if (r == 0) break;
        size += (size_t)r;
        if (size > MAX_FILE_BYTES) {
            close(fd), free(text);
            return vcuda_fail(why, -1, "tenants file %s is larger than %u bytes", path, MAX_FILE_BYTES);
        }
    }
    close(fd);
    int rc = memchr(text, 0, size) ? vcuda_fail(why, -1, "tenants file %s holds a NUL byte", path)
                                   : parse(ts, path, text, size, why);
    vcuda_wipe(text, size); /* (secrets) */
    free(text);
    if (rc) vcuda_tenants_free(ts);
    return rc;
}

vcuda_tenant *vcuda_tenant_find(const vcuda_tenants *ts, const uint8_t *name, size_t len)
{
    /* no early exit: each entry costs the same whether it matches or not */
    vcuda_tenant *found = NULL;
    uint8_t want[VCUDA_TENANT_NAME_MAX];
    int ok = vcuda_tenant_name_ok((const char *)name, len); /* (no NUL: names compare zero-padded) */
    memset(want, 0, sizeof want);
    if (ok) memcpy(want, name, len);
    for (size_t i = 0; i < ts->n; ++i) {
        /* (a name's bytes after its NUL are zero: tenant_init clears the entry) */
        const uint8_t *n = (const uint8_t *)ts->t[i].name;
        volatile uint8_t diff = 0;
        for (size_t k = 0; k < VCUDA_TENANT_NAME_MAX; ++k) diff = diff | (uint8_t)(n[k] ^ want[k]);
        found = ok && diff == 0 ? &ts->t[i] : found;
    }
    return found;
}

int vcuda_tenant_charge(vcuda_tenant *t, uint64_t bytes, uint64_t *used)
{
    pthread_mutex_lock(&t->mu);
    int over = t->mem_quota && (bytes > t->mem_quota || t->mem_used > t->mem_quota - bytes);
    if (!over) t->mem_used = bytes > UINT64_MAX - t->mem_used ? UINT64_MAX : t->mem_used + bytes;
    if (used) *used = t->mem_used;
    pthread_mutex_unlock(&t->mu);
    return over ? -1 : 0;
}

void vcuda_tenant_uncharge(vcuda_tenant *t, uint64_t bytes)
{
    pthread_mutex_lock(&t->mu);
    t->mem_used = bytes > t->mem_used ? 0 : t->mem_used - bytes;
    pthread_mutex_unlock(&t->mu);
}

uint64_t vcuda_tenant_used(vcuda_tenant *t)
{
    pthread_mutex_lock(&t->mu);
    uint64_t u = t->mem_used;
    pthread_mutex_unlock(&t->mu);
    return u;
}

int vcuda_tenant_join(vcuda_tenant *t)
{
    pthread_mutex_lock(&t->mu);
    int full = t->max_conns && t->conns >= t->max_conns;
    if (!full) ++t->conns;
    pthread_mutex_unlock(&t->mu);
    return full ? -1 : 0;
}

void vcuda_tenant_leave(vcuda_tenant *t)
{
    pthread_mutex_lock(&t->mu);
    if (t->conns) --t->conns;
    pthread_mutex_unlock(&t->mu);
}

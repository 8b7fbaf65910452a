/* CPU-only tests of the tenants table (tenants.h): `vcuda_tenants_test CASE`.
 *   parse      a good file: comments, blank lines, CRLF, every field's range ends
 *   bad_lines  each kind of bad line refused, naming the file and the line
 *   perms      a file group/other can read, a symbolic link, a directory: refused
 *   find       lookup by whole name only
 *   charge     quota arithmetic, and many threads charging at once never exceed it
 *   join       connection limits
 *   only       a table past its first 16 entries (grown, every entry intact), and the
 *              copy a tenant's serving process keeps: that tenant alone, no secret */
#define _POSIX_C_SOURCE 200809L
#include "vcuda/tenants.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vcuda_test.h"

static char path[64], why[VCUDA_WHY_LEN];

static void write_file(const char *text, mode_t mode)
{
    snprintf(path, sizeof path, "tenants-test-%d", (int)getpid());
    unlink(path);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    chmod(path, mode);
}

static int load(const char *text, vcuda_tenants *ts)
{
    write_file(text, 0600);
    int rc = vcuda_tenants_load(ts, path, why);
    if (rc) printf("refused as expected: %s\n", why);
    unlink(path);
    return rc;
}

static void parse(void)
{
    vcuda_tenants ts;
    char line[512], secret[VCUDA_MAX_TOKEN + 1], name[VCUDA_TENANT_NAME_MAX + 1];
    memset(secret, 'k', VCUDA_MAX_TOKEN), secret[VCUDA_MAX_TOKEN] = 0;
    memset(name, 'n', VCUDA_TENANT_NAME_MAX), name[VCUDA_TENANT_NAME_MAX] = 0;
    snprintf(line, sizeof line,
             "# NAME MEM_MIB MAX_CONNS SECRET\n"
             "\n"
             "alice 256 8 s3cret#1\r\n"
             "   \t# an indented comment\n"
             "\tbob\t0  0\tb-secret  \n"
             "%s 1073741824 65536 %s\n"
             "A.b_c-9 1 1 x", name, secret);
    CHECK(load(line, &ts) == 0);
    CHECK(ts.n == 4);
    if (ts.n == 4) {
        CHECK(!strcmp(ts.t[0].name, "alice") && ts.t[0].mem_quota == 256ull << 20 && ts.t[0].max_conns == 8);
        CHECK(ts.t[0].secret_len == 8 && !memcmp(ts.t[0].secret, "s3cret#1", 8)); /* '#' inside a field, CR gone */
        CHECK(!strcmp(ts.t[1].name, "bob") && ts.t[1].mem_quota == 0 && ts.t[1].max_conns == 0);
        CHECK(ts.t[1].secret_len == 8 && !memcmp(ts.t[1].secret, "b-secret", 8));
        CHECK(!strcmp(ts.t[2].name, name) && ts.t[2].mem_quota == (1ull << 30) << 20 && ts.t[2].max_conns == 65536);
        CHECK(ts.t[2].secret_len == VCUDA_MAX_TOKEN);
        CHECK(!strcmp(ts.t[3].name, "A.b_c-9") && ts.t[3].secret_len == 1); /* no newline at the end */
    }
    vcuda_tenants_free(&ts);
    /* the single-token table */
    CHECK(vcuda_tenants_single(&ts, (const uint8_t *)"tok", 3, 5u << 20, why) == 0);
    CHECK(ts.n == 1 && !strcmp(ts.t[0].name, "default") && ts.t[0].mem_quota == 5u << 20 && ts.t[0].max_conns == 0);
    vcuda_tenants_free(&ts);
}

static void bad_lines(void)
{
    char long_name[VCUDA_TENANT_NAME_MAX + 2], long_secret[VCUDA_MAX_TOKEN + 2], text[1024];
    memset(long_name, 'n', VCUDA_TENANT_NAME_MAX + 1), long_name[VCUDA_TENANT_NAME_MAX + 1] = 0;
    memset(long_secret, 's', VCUDA_MAX_TOKEN + 1), long_secret[VCUDA_MAX_TOKEN + 1] = 0;
    struct { const char *line, *reason; } bad[] = {
        {"carol 1 1", "3 fields"},
        {"carol 1 1 s extra", "5 fields"},
        {"car/ol 1 1 s", "name"},
        {"caröl 1 1 s", "name"},
        {long_name, "name"}, /* (completed below) */
        {"carol -1 1 s", "MEM_MIB"},
        {"carol 1x 1 s", "MEM_MIB"},
        {"carol 1073741825 1 s", "MEM_MIB"},
        {"carol 99999999999999999999999 1 s", "MEM_MIB"},
        {"carol 1 65537 s", "MAX_CONNS"},
        {"carol 1 one s", "MAX_CONNS"},
        {long_secret, "longer than"},
        {"carol 1 1 s\x01x", "non-printable"},
        {"alice 5 5 another", "already defined"},
    };
    vcuda_tenants ts;
    for (size_t k = 0; k < sizeof bad / sizeof *bad; ++k) {
        char line[600];
        if (bad[k].line == long_name) snprintf(line, sizeof line, "%s 1 1 s", long_name);
        else if (bad[k].line == long_secret) snprintf(line, sizeof line, "carol 1 1 %s", long_secret);
        else snprintf(line, sizeof line, "%s", bad[k].line);
        /* the bad line is the file's fourth: the message names it */
        snprintf(text, sizeof text, "# tenants\nalice 1 1 a\n\n%s\nzed 1 1 z\n", line);
        CHECK(load(text, &ts) == -1);
        CHECK(strstr(why, "line 4:") && strstr(why, bad[k].reason) && strstr(why, path));
        CHECK(ts.n == 0 && ts.t == NULL);
    }
    CHECK(load("# nothing but comments\n\n", &ts) == -1 && strstr(why, "no tenant"));
    CHECK(load("", &ts) == -1 && strstr(why, "no tenant"));
}

static void perms(void)
{
    vcuda_tenants ts;
    write_file("alice 1 1 a\n", 0644);
    CHECK(vcuda_tenants_load(&ts, path, why) == -1 && strstr(why, "tenants file") && strstr(why, "chmod 600"));
    printf("refused as expected: %s\n", why);
    chmod(path, 0640);
    CHECK(vcuda_tenants_load(&ts, path, why) == -1 && strstr(why, "mode 640"));
    chmod(path, 0600);
    CHECK(vcuda_tenants_load(&ts, path, why) == 0 && ts.n == 1);
    vcuda_tenants_free(&ts);
    char link[80];
    snprintf(link, sizeof link, "%s.link", path);
    unlink(link);
    CHECK(symlink(path, link) == 0);
    CHECK(vcuda_tenants_load(&ts, link, why) == -1 && strstr(why, "cannot open"));
    printf("refused as expected: %s\n", why);
    unlink(link), unlink(path);
    CHECK(vcuda_tenants_load(&ts, path, why) == -1 && strstr(why, "cannot open")); /* gone */
    CHECK(vcuda_tenants_load(&ts, ".", why) == -1 && strstr(why, "not a regular file"));
}

static void find(void)
{
    vcuda_tenants ts;
    char text[256], name64[VCUDA_TENANT_NAME_MAX + 1];
    memset(name64, 'z', VCUDA_TENANT_NAME_MAX), name64[VCUDA_TENANT_NAME_MAX] = 0;
    snprintf(text, sizeof text, "alice 1 1 a\nalice2 1 1 b\n%s 1 1 c\n", name64);
    CHECK(load(text, &ts) == 0 && ts.n == 3);
    CHECK(vcuda_tenant_find(&ts, (const uint8_t *)"alice", 5) == &ts.t[0]);
    CHECK(vcuda_tenant_find(&ts, (const uint8_t *)"alice2", 6) == &ts.t[1]);
    CHECK(vcuda_tenant_find(&ts, (const uint8_t *)"alic", 4) == NULL);
    CHECK(vcuda_tenant_find(&ts, (const uint8_t *)"alice22", 7) == NULL);
    CHECK(vcuda_tenant_find(&ts, (const uint8_t *)"alice\0", 6) == NULL);
    CHECK(vcuda_tenant_find(&ts, (const uint8_t *)name64, VCUDA_TENANT_NAME_MAX) == &ts.t[2]);
    CHECK(vcuda_tenant_find(&ts, (const uint8_t *)"", 0) == NULL);
    CHECK(vcuda_tenant_name_ok("a", 1) && !vcuda_tenant_name_ok("a b", 3) && !vcuda_tenant_name_ok("", 0));
    vcuda_tenants_free(&ts);
}

typedef struct {
    vcuda_tenant *t;
    int granted;
} charger;

static void *charge_many(void *arg)
{
    charger *c = arg;
    for (int i = 0; i < 20000; ++i) c->granted += vcuda_tenant_charge(c->t, 1, NULL) == 0;
    return NULL;
}

static void charge(void)
{
    vcuda_tenants ts;
    uint64_t used = 0;
    CHECK(vcuda_tenants_single(&ts, (const uint8_t *)"s", 1, 1u << 20, why) == 0);
    vcuda_tenant *t = &ts.t[0];
    CHECK(vcuda_tenant_charge(t, 768u << 10, &used) == 0 && used == 768u << 10);
    CHECK(vcuda_tenant_charge(t, 512u << 10, &used) == -1 && used == 768u << 10); /* nothing charged */
    CHECK(vcuda_tenant_charge(t, 256u << 10, &used) == 0 && used == 1u << 20);     /* exactly full */
    CHECK(vcuda_tenant_charge(t, 1, NULL) == -1);
    CHECK(vcuda_tenant_charge(t, UINT64_MAX, NULL) == -1);
    vcuda_tenant_uncharge(t, 1u << 20);
    CHECK(vcuda_tenant_used(t) == 0);
    CHECK(vcuda_tenant_charge(t, (1u << 20) + 1, NULL) == -1);
    /* eight threads, a million one-byte charges between them against a 65536-byte quota */
    t->mem_quota = 65536;
    charger c[8];
    pthread_t th[8];
    for (int i = 0; i < 8; ++i) c[i] = (charger){t, 0}, pthread_create(&th[i], NULL, charge_many, &c[i]);
    int granted = 0;
    for (int i = 0; i < 8; ++i) pthread_join(th[i], NULL), granted += c[i].granted;
    printf("granted %d one-byte charges against a quota of 65536\n", granted);
    CHECK(granted == 65536 && vcuda_tenant_used(t) == 65536);
    /* no quota: anything (saturating) */
    t->mem_quota = 0;
    CHECK(vcuda_tenant_charge(t, UINT64_MAX, &used) == 0 && used == UINT64_MAX);
    vcuda_tenants_free(&ts);
}

static void join(void)
{
    vcuda_tenants ts;
    CHECK(load("two 0 2 a\nany 0 0 b\n", &ts) == 0);
    CHECK(vcuda_tenant_join(&ts.t[0]) == 0 && vcuda_tenant_join(&ts.t[0]) == 0);
    CHECK(vcuda_tenant_join(&ts.t[0]) == -1 && ts.t[0].conns == 2);
    vcuda_tenant_leave(&ts.t[0]);
    CHECK(vcuda_tenant_join(&ts.t[0]) == 0);
    for (int i = 0; i < 1000; ++i) CHECK(vcuda_tenant_join(&ts.t[1]) == 0);
    vcuda_tenants_free(&ts);
}

static void only(void)
{
    char text[40 * 64], *at = text;
    for (int i = 0; i < 40; ++i) at += sprintf(at, "t-%d %d %d secret-%d\n", i, i + 1, i % 5, i);
    vcuda_tenants ts;
    CHECK(load(text, &ts) == 0 && ts.n == 40);
    int intact = 0;
    for (size_t i = 0; i < ts.n; ++i) {
        char name[32], secret[32];
        snprintf(name, sizeof name, "t-%d", (int)i), snprintf(secret, sizeof secret, "secret-%d", (int)i);
        intact += !strcmp(ts.t[i].name, name) && ts.t[i].mem_quota == (uint64_t)(i + 1) << 20 &&
                  ts.t[i].max_conns == i % 5 && ts.t[i].secret_len == strlen(secret) &&
                  !memcmp(ts.t[i].secret, secret, strlen(secret));
    }
    CHECK(intact == 40);
    CHECK(vcuda_tenant_charge(&ts.t[17], 1 << 20, NULL) == 0 && vcuda_tenant_join(&ts.t[17]) == 0);
    /* a serving process's copy: t-17 alone, its limits kept, its counters zero, and no
     * secret left anywhere in the table */
    CHECK(vcuda_tenants_only(&ts, "t-17") == 0);
    CHECK(ts.n == 1 && !strcmp(ts.t[0].name, "t-17") && ts.t[0].mem_quota == 18u << 20 && ts.t[0].max_conns == 2);
    CHECK(vcuda_tenant_used(&ts.t[0]) == 0 && ts.t[0].conns == 0 && ts.t[0].secret_len == 0);
    uint8_t zero[VCUDA_MAX_TOKEN] = {0};
    CHECK(!memcmp(ts.t[0].secret, zero, sizeof ts.t[0].secret) && !memcmp(ts.nobody, zero, sizeof ts.nobody));
    const char *bytes = (const char *)ts.t; /* (the entries beyond n were wiped, not only forgotten) */
    int secrets = 0;
    for (size_t i = 0; i + 7 <= 40 * sizeof *ts.t; ++i) secrets += !memcmp(bytes + i, "secret-", 7);
    CHECK(secrets == 0);
    CHECK(vcuda_tenant_find(&ts, (const uint8_t *)"t-17", 4) == &ts.t[0]);
    CHECK(vcuda_tenant_find(&ts, (const uint8_t *)"t-18", 4) == NULL);
    CHECK(vcuda_tenant_charge(&ts.t[0], 18u << 20, NULL) == 0 && vcuda_tenant_charge(&ts.t[0], 1, NULL) == -1);
    /* a name the table does not hold: nothing kept, secrets wiped all the same */
    CHECK(vcuda_tenants_only(&ts, "nobody") == -1 && ts.n == 0);
    vcuda_tenants_free(&ts);
}

int main(int argc, char **argv)
{
    const char *c = argc > 1 ? argv[1] : "";
    if (!strcmp(c, "parse")) parse();
    else if (!strcmp(c, "bad_lines")) bad_lines();
    else if (!strcmp(c, "perms")) perms();
    else if (!strcmp(c, "find")) find();
    else if (!strcmp(c, "charge")) charge();
    else if (!strcmp(c, "join")) join();
    else if (!strcmp(c, "only")) only();
    else return fprintf(stderr, "usage: %s parse|bad_lines|perms|find|charge|join|only\n", argv[0]), 2;
    return failures ? 1 : 0;
}

/* vcuda tenants: who may use a server, with which secret, and how much of the GPU.
 *
 * A tenant is a name, a secret and quotas.  A client names its tenant in HELLO
 * (VCUDA_TENANT, default "default") and proves it holds that tenant's secret (proto.h,
 * "authentication"); everything its connections make the GPU hold is counted against
 * the tenant's memory quota, all of its connections together (server_gpu.h says what is
 * counted), and the number of its connections at once is bounded.
 *
 * `vcuda-server --tenants FILE` reads the tenants from FILE, one per line:
 *
 *     # NAME      MEM_MIB  MAX_CONNS  SECRET
 *     alice       4096     8          9f2c0a7e3b...
 *     batch-jobs  0        0          5d41402abc...
 *
 * four fields separated by blanks: NAME is 1 to 64 of [A-Za-z0-9._-], unique in the
 * file; MEM_MIB the device memory all of the tenant's connections may hold together, in
 * MiB (0: no quota beyond the GPU's memory); MAX_CONNS its connections at once (0: only
 * the server's --max-clients); SECRET what its clients hold as their token (VCUDA_TOKEN
 * or VCUDA_TOKEN_FILE), 1 to VCUDA_MAX_TOKEN printable bytes without blanks.  A line
 * whose first non-blank character is '#' is a comment, blank lines are skipped (a '#'
 * elsewhere is part of a field: secrets may hold one).  The file holds secrets: it must
 * be owned by the server's user and not accessible by group or others, as a token file
 * (vcuda_private_file_open).  Any bad line refuses the whole file, naming the line.
 * Without --tenants the server's token is the secret of the one tenant "default", with
 * --client-mem-mib as its quota.
 *
 * The table is read once, before the serving process starts; its entries then never
 * move or change, except for the usage counters (each tenant's own mutex), so the
 * server loop and the GPU handler share them by pointer.  With --isolation process the
 * network loop's table counts each tenant's connections (its MAX_CONNS is decided
 * there), and each tenant's serving process has a copy holding that tenant only
 * (vcuda_tenants_only), whose memory counter is the quota's. */
#ifndef VCUDA_TENANTS_H
#define VCUDA_TENANTS_H

#include "vcuda/proto.h"

#include <pthread.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VCUDA_TENANT_NAME_MAX 64
#define VCUDA_TENANT_DEFAULT "default"
#define VCUDA_MAX_TENANTS 65536

typedef struct vcuda_tenant {
    char name[VCUDA_TENANT_NAME_MAX + 1];
    uint8_t secret[VCUDA_MAX_TOKEN];
    size_t secret_len;
    uint64_t mem_quota; /* bytes all its connections may hold together (0: no quota) */
    uint32_t max_conns; /* connections at once (0: no limit of its own) */
    pthread_mutex_t mu; /* the counters below */
    uint64_t mem_used;
    uint32_t conns;
} vcuda_tenant;

typedef struct {
    vcuda_tenant *t;
    size_t n;
    /* what the handshake of a tenant nobody knows is checked against: random, held by
     * no client, so that it fails after the same work as a wrong secret */
    uint8_t nobody[32];
} vcuda_tenants;

/* Whether name[0..len) is a valid tenant name (1 to 64 of [A-Za-z0-9._-]). */
int vcuda_tenant_name_ok(const char *name, size_t len);

/* Reads a tenants file (format above) into ts.  0, or -1 with the reason (naming the
 * file and line) in why; ts is then empty. */
int vcuda_tenants_load(vcuda_tenants *ts, const char *path, char *why);
/* The table of one tenant, "default", with this secret and quota (bytes, 0: none). */
int vcuda_tenants_single(vcuda_tenants *ts, const uint8_t *secret, size_t len, uint64_t mem_quota, char *why);
void vcuda_tenants_free(vcuda_tenants *ts);
/* In a tenant's own serving process (--isolation process, server_isolate.h), forked
 * from the process that read the table: the table keeps that tenant alone, its usage
 * counters at zero (what it holds is counted here, by the process that holds it all),
 * and no secret at all -- every other tenant's entry and every secret are wiped, the
 * proofs being checked by the loop process only.  0, or -1 (no such tenant: the table
 * is then empty, its secrets wiped all the same). */
int vcuda_tenants_only(vcuda_tenants *ts, const char *name);

/* The tenant called name[0..len), or NULL.  Every entry is compared in full, so the
 * time taken does not tell whether or where the name was found. */
vcuda_tenant *vcuda_tenant_find(const vcuda_tenants *ts, const uint8_t *name, size_t len);

/* Device memory: charge `bytes` to t, unless that would take it past its quota: 0, or
 * -1 with nothing charged (*used, if not NULL, gets what it holds now, either way). */
int vcuda_tenant_charge(vcuda_tenant *t, uint64_t bytes, uint64_t *used);
void vcuda_tenant_uncharge(vcuda_tenant *t, uint64_t bytes);
uint64_t vcuda_tenant_used(vcuda_tenant *t);

/* Connections: one more for t, unless it has max_conns already: 0 or -1. */
int vcuda_tenant_join(vcuda_tenant *t);
void vcuda_tenant_leave(vcuda_tenant *t);

#ifdef __cplusplus
}
#endif
#endif

/* umstudy pager: memory whose contents live elsewhere, brought in page by page on the
 * first touch.  DLM (src/dlm: pages on remote MPI ranks) and vcuda (src/vcuda: managed
 * memory on a GPU across the network) both stand on it; what a page is, where its bytes
 * come from and when it goes away is theirs, catching the touch and installing the bytes
 * is this file's.
 *
 * A region is `bytes` of address space cut into pages of `page_size` (a multiple of the
 * OS page).  Two engines catch the first touch of a page:
 *
 *   UMS_PAGER_UFFD  anonymous memory registered with userfaultfd for missing-page faults
 *                   (and write-protect faults with track_writes).  Worker threads read
 *                   the faults and call the region's fault callback, which resolves the
 *                   fault with ums_pager_install (UFFDIO_COPY: the kernel installs the page
 *                   atomically and wakes every thread waiting on it).  Opened as the
 *                   process may: all faults where vm.unprivileged_userfaultfd=1 (or with
 *                   CAP_SYS_PTRACE), else user-mode faults only (UFFD_USER_MODE_ONLY,
 *                   Linux >= 5.11): a system call handed an absent page fails with EFAULT.
 *   UMS_PAGER_SEGV  a memfd mapped twice: the view (PROT_NONE where absent, read-only where
 *                   installed clean under write tracking, read-write otherwise) and an
 *                   always-writable alias through which pages are filled.  One SIGSEGV
 *                   handler serves every region of the process and calls the fault callback
 *                   on the faulting thread; when it returns the access is retried.  A
 *                   SIGSEGV outside every region goes to the handler installed before the
 *                   first region (or kills the process as usual).  The handler runs on the
 *                   faulting thread's own stack (no SA_ONSTACK): a program's small alternate
 *                   signal stack would not hold a network fetch.  A system call handed an
 *                   absent page fails with EFAULT, as with user-mode-only userfaultfd.
 *
 * Under track_writes a page installed read-only takes a second fault on its first write
 * (flags UMS_PAGER_WP); the callback records it dirty and lifts the protection with
 * ums_pager_protect(..., UMS_PAGER_RW).
 *
 * Linux only.  Functions return 0, or -1 with errno set (nothing is printed). */
#ifndef UMSTUDY_PAGER_H
#define UMSTUDY_PAGER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { UMS_PAGER_SEGV = 1, UMS_PAGER_UFFD = 2 } ums_pager_engine;

/* Fault flags. */
enum {
    UMS_PAGER_WRITE = 1, /* the access is known to be a write (uffd; SEGV on x86-64) */
    UMS_PAGER_WP = 2,    /* uffd: a write to a present, write-protected page */
    UMS_PAGER_READ = 4   /* the access is known to be a read (uffd; SEGV on x86-64): a
                          * SEGV fault on a present page without it may be a second
                          * thread's read that raced with the install, or a write */
};

/* Page protections for ums_pager_install / ums_pager_protect. */
enum { UMS_PAGER_RO = 1, UMS_PAGER_RW = 2 };

typedef struct ums_pager ums_pager;

/* Called for a touch of page `page` of the region.  worker: the uffd worker's index
 * (0..workers-1), -1 on the faulting thread itself (SEGV, inside the signal handler:
 * the callback must not take a lock the interrupted code may hold).  On return the
 * access is retried (SEGV) or, under uffd, the faulting thread stays asleep until an
 * install, protect or wake of its page. */
typedef void (*ums_pager_fault_fn)(ums_pager *pg, void *ctx, size_t page, int flags, int worker);

typedef struct ums_pager_config {
    size_t bytes, page_size;
    ums_pager_engine engine;
    int track_writes; /* uffd: register for write-protect faults too (Linux >= 5.7) */
    int workers;      /* uffd: fault-reading threads, 1..64.  One userfaultfd and one pool of
                       * workers serve every uffd region of the process: the pool grows to
                       * the most any region asked for (a callback's `worker` is below that) */
    ums_pager_fault_fn fault;
    void *ctx;
    const char *name; /* the memfd's name (SEGV), shown in /proc/<pid>/maps */
    /* Where the region must start (page-aligned), or NULL for anywhere.  Mapped there or
     * not at all: errno EEXIST when something of the process is there already.  (vcuda
     * gives the device address, so that one pointer means the same on both sides.) */
    void *addr;
} ums_pager_config;

/* Creates the region, every page absent, and starts catching its faults.  Returns 0;
 * else -1 with the reason in why (an engine this process may not use: errno EPERM or
 * ENOSYS, the reason naming the setting; anything else: errno of the failing call). */
int ums_pager_create(const ums_pager_config *cfg, ums_pager **out, char *why, size_t why_len);
/* Stops catching faults (joins the workers, forgets the region); the mapping stays:
 * under uffd as ordinary memory (an absent page reads zeros), under SEGV a touch of an
 * absent page kills as any bad access. */
void ums_pager_stop(ums_pager *pg);
/* ums_pager_stop, then unmaps the region and frees it. */
void ums_pager_destroy(ums_pager *pg);

char *ums_pager_base(const ums_pager *pg);
size_t ums_pager_page_size(const ums_pager *pg);
size_t ums_pager_pages(const ums_pager *pg);
ums_pager_engine ums_pager_engine_of(const ums_pager *pg);
/* SEGV: the always-writable alias of the region (fill a page in place, then install it
 * with src NULL); uffd: NULL. */
char *ums_pager_alias(const ums_pager *pg);
/* uffd opened with UFFD_USER_MODE_ONLY; write-protect faults registered. */
int ums_pager_user_mode_only(const ums_pager *pg);
int ums_pager_tracks_writes(const ums_pager *pg);

/* Makes pages [first, first+n) present with protection prot, their bytes from src
 * (n * page_size bytes).  src NULL: SEGV, the bytes already put in the alias; uffd,
 * zeros.  The pages must be absent (uffd: EEXIST otherwise).  Wakes their waiters. */
int ums_pager_install(ums_pager *pg, size_t first, size_t n, const void *src, int prot);
/* Changes the protection of present pages (UMS_PAGER_RO needs track_writes under uffd).
 * Lifting a write protection wakes the writers waiting on it. */
int ums_pager_protect(ums_pager *pg, size_t first, size_t n, int prot);
/* Makes pages absent again, their bytes dropped: the next touch faults. */
int ums_pager_drop(ums_pager *pg, size_t first, size_t n);
/* uffd: wakes the threads waiting on the pages without installing them (they retry and
 * fault again if the page is still absent); SEGV: nothing to do. */
int ums_pager_wake(ums_pager *pg, size_t first, size_t n);

/* Which engine this process can use, without creating a region: 0 when uffd (with
 * write-protect faults if track_writes) is usable, else -1 with the reason in why. */
int ums_pager_uffd_probe(int track_writes, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif

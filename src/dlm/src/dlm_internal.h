/* DLM internals shared by the core (dlm_core.c), the memory-rank server
 * (dlm_server.c) and the fault engines (dlm_segv.c: r3/r58/r77, dlm_uffd.c). */
#ifndef DLM_INTERNAL_H
#define DLM_INTERNAL_H

#include "dlm/dlm.h"
#include "dlm_timing.h"

#include <mpi.h>
#include <stdatomic.h>
#include <stdint.h>

/* ---- wire protocol: rank 0 -> memory ranks on comm_req, one header per request ---- */
enum dlm_op {
    OP_GET_PAGE = 1, /* reply: the page, on comm_page, tag = hdr.tag */
    OP_GET_RANGE,    /* reply: len bytes at slot+off, on comm_bulk, tag = hdr.tag */
    OP_PUT,          /* followed by len bytes for slot+off on comm_req, tag = hdr.tag */
    OP_DISCARD,      /* slots [slot, slot+len) are free again: zero them */
    OP_BANDWIDTH,    /* send off messages of len bytes on comm_bulk, tag = hdr.tag */
    OP_SHUTDOWN
};
typedef struct dlm_msg {
    int32_t op, tag;
    uint64_t slot, off, len;
} dlm_msg;
enum { TAG_REQ = 0, TAG_DYNAMIC_BASE = 1 };

/* ---- page table ------------------------------------------------------------------ */
enum dlm_page_state {
    PG_REMOTE = 0, /* the memory rank's copy is the data */
    PG_QUEUED,     /* a fault asked for it; request or transfer in progress */
    PG_RESIDENT,   /* installed here; the local copy is the data */
    PG_EVICTING    /* being swapped out; faults wait until it is remote again */
};
typedef struct dlm_page {
    _Atomic uint32_t seq; /* bumped on every change; waiters futex-wait on it */
    uint8_t state, dirty;
    uint16_t pins;        /* dlm_get/dlm_put copying it locally: not a victim */
    uint32_t remote_ops;  /* bulk puts to its remote copy in flight: faults wait */
    /* Fault timing: the stamps of the exchange under way, kept by the faulting thread
     * (which waits in its handler until the page is installed); NULL when off. */
    dlm_fault_clock *clock;
} dlm_page;

typedef struct dlm_engine dlm_engine;
struct dlm_engine {
    const char *name;
    int (*start)(void); /* threads, handlers; 0 or a DLM_E* status (reason set) */
    void (*stop)(void);
    /* Drops resident pages of [first, first+n) without write-back (dlm_free). */
    void (*discard)(size_t first, size_t n);
    /* Makes a resident, pinned page writable for dlm_put; returns where to copy. */
    char *(*local_for_put)(size_t page);
    char *(*local_for_get)(size_t page);
};
extern const dlm_engine dlm_engine_r3, dlm_engine_r58, dlm_engine_r77, dlm_engine_uffd;

typedef struct dlm_state {
    dlm_config cfg;
    const dlm_engine *engine;
    MPI_Comm comm_req, comm_page, comm_bulk;
    int tag_ub;
    char *area;       /* the program's view of the DLM area */
    size_t area_pages, slots_per_rank;
    dlm_page *pages;
    /* Resident pages in install order (FIFO victim choice), frames + slack slots. */
    size_t *ring, ring_cap, ring_head, ring_len;
    size_t frames, frames_used;
    atomic_flag lock; /* the page table, ring and queues: a spinlock (signal handlers) */
    _Atomic uint32_t next_tag;
    _Atomic int failed;
} dlm_state;
extern dlm_state dlm_g;

static inline int dlm_owner(size_t page) { return 1 + (int)(page % (size_t)dlm_g.cfg.memory_ranks); }
static inline size_t dlm_slot(size_t page) { return page / (size_t)dlm_g.cfg.memory_ranks; }
static inline char *dlm_page_addr(size_t page) { return dlm_g.area + page * dlm_g.cfg.page_size; }

void dlm_lock(void);
void dlm_unlock(void);
/* After changing a page (lock held): bump its sequence; dlm_wake_page after unlock. */
void dlm_page_changed(size_t page);
void dlm_wake_page(size_t page);
/* Waits (lock not held) until page's sequence differs from seq. */
void dlm_wait_page(size_t page, uint32_t seq);

void dlm_futex_wait(_Atomic uint32_t *addr, uint32_t val);
void dlm_futex_wake(_Atomic uint32_t *addr);

/* Takes the lock once page is settled: no fault, eviction, pin or bulk copy in flight
 * on it (what dlm_free needs before dropping a page; it waits for those to finish). */
void dlm_lock_settled(size_t page);

/* Resident-set bookkeeping (lock held). */
void dlm_ring_push(size_t page);
/* dlm_free's part common to the engines: every page of [first, first + n) settled
 * (dlm_lock_settled), a resident one handed to drop_resident (lock held; may be NULL)
 * and marked remote and clean, and the range forgotten by the resident ring. */
void dlm_discard_range(size_t first, size_t n, void (*drop_resident)(size_t page));
/* Pops the oldest unpinned resident page as the victim and marks it PG_EVICTING;
 * returns 0 when there is none. */
int dlm_pick_victim(size_t *victim);

/* Messages with a deadline: a memory rank that does not take part within
 * cfg.timeout is dead or hung, and rank 0 stops with its number (dlm_fatal). */
void dlm_send_msg(int rank, const dlm_msg *m, const char *why);
void dlm_send_data(int rank, const void *buf, size_t len, int tag, const char *why);
void dlm_wait_req(MPI_Request *req, int rank, const char *why);
int dlm_new_tag(void);
/* Sends a dirty page to its memory rank (header + data, one thread). */
void dlm_write_back(size_t page, const void *data);

void dlm_fatal(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;
void dlm_set_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Statistics (atomic). */
typedef struct dlm_stats_acc {
    _Atomic uint64_t faults, evictions, writebacks, stops, remote_gets, remote_puts;
    _Atomic uint64_t bytes_in, bytes_out;
} dlm_stats_acc;
extern dlm_stats_acc dlm_st;

double dlm_now(void);

/* The memory rank's loop (dlm_server.c); returns at OP_SHUTDOWN. */
void dlm_serve(void);

/* Stopping the user threads (SIGSEGV engines): every thread of the process except
 * those that existed when dlm_startup finished (MPI's and DLM's own), plus the
 * thread that called dlm_startup.  Between stop and resume the stopper calls no
 * function that may take a lock a stopped thread holds (no malloc, no MPI). */
int dlm_threads_init(int stop_signal);
void dlm_threads_snapshot(void);
void dlm_stop_world(void);
void dlm_resume_world(void);

#endif

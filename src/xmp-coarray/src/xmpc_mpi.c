/* MPI pieces the mpi3 and armci backends share: starting MPI when nobody has (and
 * stopping it only then), the image control words for xmpc_images.c (one MPI-3
 * window: atomically accessed longs, collective-call slots and a message area per
 * image; only RMA, so MPI's non-blocking collective engine never runs), and the abort.
 *
 * Threads: xmpc is called from the thread that called xmpc_init only (coarray.h).  When
 * it starts MPI it asks for what the program promises: MPI_THREAD_SINGLE (no other
 * threads), or MPI_THREAD_FUNNELED with XMPC_MPI_THREAD=funneled (other threads that
 * do not call MPI, as OpenMP regions).  Not FUNNELED always: Open MPI 4.1 then takes
 * locks in every progress call, measured +20% on the 8 B put ping-pong, raw MPI too.
 * A program that started MPI itself keeps the level it asked for. */
#include "xmpc_internal.h"

#include "umstudy/support.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_own_mpi;          /* xmpc_init started MPI, so xmpc_finalize stops it */
static MPI_Comm g_ctl_comm = MPI_COMM_NULL; /* private: user messages never match ours */
static MPI_Win g_ctl_win = MPI_WIN_NULL;
static int g_me, g_n, g_unified;
static char *g_base;           /* this image's control memory */
static MPI_Aint g_desc_off, g_msg_off; /* byte offsets of the slots and the message area */
/* A receive nothing ever matches (nobody sends on g_ctl_comm): testing it is MPI's
 * cheapest progress call, without the request an MPI_Iprobe builds every time. */
static MPI_Request g_idle = MPI_REQUEST_NULL;
static int g_idle_buf;

void xmpc_mpi_init(int *argc, char ***argv)
{
    int up = 0;
    MPI_Initialized(&up);
    if (!up) {
        const char *t = getenv("XMPC_MPI_THREAD");
        int want = MPI_THREAD_SINGLE, provided;
        if (t && !strcmp(t, "funneled"))
            want = MPI_THREAD_FUNNELED;
        else if (t && *t && strcmp(t, "single")) {
            fprintf(stderr, "xmpc: error: XMPC_MPI_THREAD=%s: not a thread level (single: "
                            "no other threads, the default; funneled: other threads that do "
                            "not call xmpc or MPI)\n", t);
            exit(UMS_EXIT_USAGE);
        }
        MPI_Init_thread(argc, argv, want, &provided);
        g_own_mpi = 1;
        if (provided < want)
            xmpc_fatal(NULL, 0, "XMPC_MPI_THREAD=funneled: MPI provides thread level %d, below "
                       "MPI_THREAD_FUNNELED (%d)", provided, MPI_THREAD_FUNNELED);
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &g_ctl_comm);
    MPI_Comm_rank(g_ctl_comm, &g_me);
    MPI_Comm_size(g_ctl_comm, &g_n);
    g_desc_off = (MPI_Aint)(sizeof(long) * (size_t)(XMPC_W_ARRIVE(g_n) + 2 * g_n));
    g_msg_off = g_desc_off + (MPI_Aint)XMPC_DESC_BYTES * 2 * g_n;
    MPI_Win_allocate(g_msg_off + XMPC_MSG_BYTES, 1, MPI_INFO_NULL, g_ctl_comm, &g_base,
                     &g_ctl_win);
    memset(g_base, 0, (size_t)g_msg_off + XMPC_MSG_BYTES);
    int *model, found = 0;
    MPI_Win_get_attr(g_ctl_win, MPI_WIN_MODEL, &model, &found);
    g_unified = found && *model == MPI_WIN_UNIFIED;
    MPI_Win_lock_all(MPI_MODE_NOCHECK, g_ctl_win);
    MPI_Win_sync(g_ctl_win);
    MPI_Irecv(&g_idle_buf, 1, MPI_INT, MPI_ANY_SOURCE, 0, g_ctl_comm, &g_idle);
    MPI_Barrier(g_ctl_comm);
}

void xmpc_mpi_finalize(void)
{
    MPI_Cancel(&g_idle);
    MPI_Wait(&g_idle, MPI_STATUS_IGNORE);
    MPI_Win_unlock_all(g_ctl_win);
    MPI_Win_free(&g_ctl_win);
    MPI_Comm_free(&g_ctl_comm);
    int down = 0;
    MPI_Finalized(&down);
    if (g_own_mpi && !down)
        MPI_Finalize();
    g_own_mpi = 0;
}

static MPI_Aint word_at(int word) { return (MPI_Aint)(sizeof(long) * (size_t)word); }

static long ctl_read(int rank, int word)
{
    long v = 0;
    MPI_Fetch_and_op(NULL, &v, MPI_LONG, rank, word_at(word), MPI_NO_OP, g_ctl_win);
    MPI_Win_flush(rank, g_ctl_win);
    return v;
}

/* Polled: in the unified model this image's words are plain memory that others'
 * accumulates update (an aligned long: one store), read after MPI_Win_sync, which also
 * makes progress for transports that apply them in software. */
static long ctl_local(int word)
{
    MPI_Win_sync(g_ctl_win);
    if (!g_unified)
        return ctl_read(g_me, word);
    return __atomic_load_n((const long *)(g_base + word_at(word)), __ATOMIC_ACQUIRE);
}

static void ctl_acc(int rank, int word, long value, MPI_Op op)
{
    MPI_Accumulate(&value, 1, MPI_LONG, rank, word_at(word), 1, MPI_LONG, op, g_ctl_win);
    MPI_Win_flush(rank, g_ctl_win);
}

static void ctl_write(int rank, int word, long value) { ctl_acc(rank, word, value, MPI_REPLACE); }
static void ctl_add(int rank, int word, long value) { ctl_acc(rank, word, value, MPI_SUM); }

static void ctl_put_msg(int rank, const char *msg)
{
    MPI_Put(msg, XMPC_MSG_BYTES, MPI_CHAR, rank, g_msg_off, XMPC_MSG_BYTES, MPI_CHAR, g_ctl_win);
    MPI_Win_flush(rank, g_ctl_win);
}

static void ctl_get_msg(int rank, char *msg)
{
    MPI_Get(msg, XMPC_MSG_BYTES, MPI_CHAR, rank, g_msg_off, XMPC_MSG_BYTES, MPI_CHAR, g_ctl_win);
    MPI_Win_flush(rank, g_ctl_win);
    msg[XMPC_MSG_BYTES - 1] = '\0';
}

static MPI_Aint slot_at(int rank, int parity)
{
    return g_desc_off + (MPI_Aint)XMPC_DESC_BYTES * (2 * rank + parity);
}

/* Puts and accumulates to one target are not ordered with each other: the slots are
 * flushed before any arrival word is written. */
static void ctl_arrive(long value, const void *desc, size_t bytes, int parity)
{
    if (desc) {
        for (int r = 0; r < g_n; ++r)
            if (r != g_me)
                MPI_Put(desc, (int)bytes, MPI_BYTE, r, slot_at(g_me, parity), (int)bytes,
                        MPI_BYTE, g_ctl_win);
        MPI_Win_flush_all(g_ctl_win);
    }
    for (int r = 0; r < g_n; ++r)
        if (r != g_me)
            MPI_Accumulate(&value, 1, MPI_LONG, r, word_at(XMPC_W_ARRIVE(g_n) + 2 * g_me + parity),
                           1, MPI_LONG, MPI_REPLACE, g_ctl_win);
    MPI_Win_flush_all(g_ctl_win);
}

static void ctl_desc(int rank, int parity, void *out, size_t bytes)
{
    MPI_Get(out, (int)bytes, MPI_BYTE, g_me, slot_at(rank, parity), (int)bytes, MPI_BYTE,
            g_ctl_win);
    MPI_Win_flush(g_me, g_ctl_win);
}

/* RMA emulated in software (Open MPI's osc/ucx over TCP, ARMCI-MPI on top of it) writes
 * a window only while its owner runs MPI's progress engine, which MPI_Win_sync does not
 * enter there: an image polling for another's put would never see it.  Testing a
 * pending request progresses every transport (MPI's progress rule). */
void xmpc_mpi_poke(void)
{
    int done;
    MPI_Test(&g_idle, &done, MPI_STATUS_IGNORE);
}

void xmpc_mpi_progress(int poke)
{
    MPI_Win_sync(g_ctl_win);
    if (poke)
        xmpc_mpi_poke();
    __atomic_thread_fence(__ATOMIC_ACQ_REL);
}

const xmpc_ctl xmpc_mpi_ctl = {
    .read = ctl_read,
    .local = ctl_local,
    .write = ctl_write,
    .add = ctl_add,
    .put_msg = ctl_put_msg,
    .get_msg = ctl_get_msg,
    .arrive = ctl_arrive,
    .desc = ctl_desc,
};

void xmpc_mpi_abort(int code)
{
    MPI_Abort(MPI_COMM_WORLD, code);
    exit(code); /* MPI_Abort should not return; be sure */
}

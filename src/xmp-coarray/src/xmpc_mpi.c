/* MPI pieces the mpi3 and armci backends share: starting MPI when nobody has (and
 * stopping it only then), the image control words (one MPI-3 window of atomically
 * accessed longs per image, plus a message area) with a non-blocking all-gather for
 * xmpc_images.c, and the abort.
 *
 * Threads: xmpc is called from the thread that called xmpc_init only (coarray.h), so
 * MPI_THREAD_FUNNELED is what it asks for when it starts MPI; a program that started
 * MPI itself keeps the level it asked for. */
#include "xmpc_internal.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

static int g_own_mpi;          /* xmpc_init started MPI, so xmpc_finalize stops it */
static MPI_Comm g_ctl_comm = MPI_COMM_NULL; /* private: user messages never match ours */
static MPI_Win g_ctl_win = MPI_WIN_NULL;
static MPI_Aint g_msg_off;     /* byte offset of the message area in each image's window */
static MPI_Request g_gather = MPI_REQUEST_NULL;

void xmpc_mpi_init(int *argc, char ***argv)
{
    int up = 0;
    MPI_Initialized(&up);
    if (!up) {
        int provided;
        MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
        g_own_mpi = 1;
        if (provided < MPI_THREAD_FUNNELED)
            xmpc_fatal(NULL, 0, "MPI provides thread level %d, below MPI_THREAD_FUNNELED (%d) "
                       "that xmpc's contract (calls from the thread that called xmpc_init, "
                       "other threads running) needs", provided, MPI_THREAD_FUNNELED);
    }
    int n;
    MPI_Comm_dup(MPI_COMM_WORLD, &g_ctl_comm);
    MPI_Comm_size(g_ctl_comm, &n);
    g_msg_off = (MPI_Aint)(sizeof(long) * (size_t)(XMPC_W_NOTIFY + n));
    long *words;
    MPI_Win_allocate(g_msg_off + XMPC_MSG_BYTES, 1, MPI_INFO_NULL, g_ctl_comm, &words, &g_ctl_win);
    memset(words, 0, (size_t)g_msg_off + XMPC_MSG_BYTES);
    MPI_Win_lock_all(MPI_MODE_NOCHECK, g_ctl_win);
    MPI_Win_sync(g_ctl_win);
    MPI_Barrier(g_ctl_comm);
}

void xmpc_mpi_finalize(void)
{
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

static void gather_start(const void *mine, void *all, size_t bytes)
{
    MPI_Iallgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, g_ctl_comm, &g_gather);
}

static int gather_test(void)
{
    int done = 0;
    MPI_Test(&g_gather, &done, MPI_STATUS_IGNORE);
    return done;
}

const xmpc_ctl xmpc_mpi_ctl = {
    .read = ctl_read,
    .write = ctl_write,
    .add = ctl_add,
    .put_msg = ctl_put_msg,
    .get_msg = ctl_get_msg,
    .gather_start = gather_start,
    .gather_test = gather_test,
};

void xmpc_mpi_abort(int code)
{
    MPI_Abort(MPI_COMM_WORLD, code);
    exit(code); /* MPI_Abort should not return; be sure */
}

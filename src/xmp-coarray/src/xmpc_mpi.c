/* MPI pieces the mpi3 and armci backends share: starting MPI when nobody has (and
 * stopping it only then), sync images as zero-byte messages, and the abort. */
#include "xmpc_internal.h"

#include <mpi.h>
#include <stdlib.h>

static int g_own_mpi;          /* xmpc_init started MPI, so xmpc_finalize stops it */
static MPI_Comm g_sync_comm = MPI_COMM_NULL; /* private: user messages never match ours */

void xmpc_mpi_init(int *argc, char ***argv)
{
    int up = 0;
    MPI_Initialized(&up);
    if (!up) {
        int provided;
        MPI_Init_thread(argc, argv, MPI_THREAD_SINGLE, &provided);
        g_own_mpi = 1;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &g_sync_comm);
}

void xmpc_mpi_finalize(void)
{
    MPI_Comm_free(&g_sync_comm);
    int down = 0;
    MPI_Finalized(&down);
    if (g_own_mpi && !down)
        MPI_Finalize();
    g_own_mpi = 0;
}

/* MPI's non-overtaking rule pairs the k-th notification from an image with the k-th
 * wait for it, which is exactly the counting semantics of sync images. */
void xmpc_mpi_sync_images(int n, const int *ranks)
{
    MPI_Request *req = xmpc_xmalloc(sizeof(MPI_Request) * (size_t)(n > 0 ? n : 1));
    char dummy = 0;
    for (int i = 0; i < n; ++i)
        MPI_Isend(&dummy, 0, MPI_BYTE, ranks[i], 0, g_sync_comm, &req[i]);
    for (int i = 0; i < n; ++i)
        MPI_Recv(&dummy, 0, MPI_BYTE, ranks[i], 0, g_sync_comm, MPI_STATUS_IGNORE);
    MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
    free(req);
}

void xmpc_mpi_abort(int code)
{
    MPI_Abort(MPI_COMM_WORLD, code);
    exit(code); /* MPI_Abort should not return; be sure */
}

void xmpc_mpi_allgather(const void *mine, void *all, size_t bytes)
{
    MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, g_sync_comm);
}

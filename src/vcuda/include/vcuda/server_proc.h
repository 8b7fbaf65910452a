/* vcuda-server's child processes: the serving process under the supervisor, the
 * start-up check of the GPU, and (--isolation process) the tenants' serving processes
 * under the network loop.  Each is started and described the same way here, whoever
 * its parent is. */
#ifndef VCUDA_SERVER_PROC_H
#define VCUDA_SERVER_PROC_H

#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A serving process's exit status when a sticky error made the GPU unusable to it. */
#define VCUDA_EXIT_CONTEXT_LOST 3

/* fork(), with the child tied to this process: killed (SIGKILL) when this process
 * dies, however it dies, so no serving process outlives the one that manages it.  As
 * fork(): 0 in the child, its pid, or -1 (errno).  stdio is flushed first. */
pid_t vcuda_fork_tied(void);

/* How a child ended, from its wait status, for a log line: "exited", "ended after a
 * sticky error", "failed (exit status N)", "was killed by SIGSEGV", "was killed by
 * SIGKILL (the OOM killer, or kill -9)". */
void vcuda_proc_ending(int status, char *out, size_t n);

#ifdef __cplusplus
}
#endif
#endif

/* vcuda-server's child processes (see server_proc.h). */
#define _GNU_SOURCE /* prctl */
#include "vcuda/server_proc.h"

#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

pid_t vcuda_fork_tied(void)
{
    fflush(NULL); /* (nothing buffered is written twice) */
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(0); /* the parent died before that took effect */
    }
    return pid;
}

static const char *signal_name(int sig, char *other, size_t n)
{
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGABRT: return "SIGABRT";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGPIPE: return "SIGPIPE";
    case SIGQUIT: return "SIGQUIT";
    case SIGSYS: return "SIGSYS";
    case SIGTRAP: return "SIGTRAP";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    default: snprintf(other, n, "signal %d", sig); return other;
    }
}

void vcuda_proc_ending(int st, char *out, size_t n)
{
    char other[32];
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        snprintf(out, n, "exited");
    else if (WIFEXITED(st) && WEXITSTATUS(st) == VCUDA_EXIT_CONTEXT_LOST)
        snprintf(out, n, "ended after a sticky error");
    else if (WIFEXITED(st))
        snprintf(out, n, "failed (exit status %d)", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(out, n, "was killed by %s%s", signal_name(WTERMSIG(st), other, sizeof other),
                 WTERMSIG(st) == SIGKILL ? " (the OOM killer, or kill -9)" : "");
    else
        snprintf(out, n, "ended (wait status 0x%x)", (unsigned)st);
}

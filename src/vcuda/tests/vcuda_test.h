/* What the vcuda test programs share: a failure count and a CHECK that reports the
 * failing condition and goes on (each program exits non-zero if any CHECK failed). */
#pragma once
#include <stdio.h>
#include <string.h>

static int failures;
#define CHECK(c)                                                                           \
    do {                                                                                   \
        if (!(c)) fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c), ++failures; \
    } while (0)

#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    pid_t pid;
    uint16_t port;
    char log[64];
} vcuda_test_server;

/* Starts `exe --device 0 --listen 127.0.0.1:0 EXTRA` with the stand-in driver of
 * fake_dir and the token, its stderr in a log of its own, and waits for its port. */
static inline void start_server(vcuda_test_server *s, const char *exe, const char *fake_dir, const char *token, const char *extra)
{
    snprintf(s->log, sizeof s->log, "vcuda-server-test-%d.log", (int)getpid());
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "exec env LD_LIBRARY_PATH='%s' VCUDA_TOKEN='%s' '%s' --device 0 --listen 127.0.0.1:0 %s 2>%s",
             fake_dir, token, exe, extra ? extra : "", s->log);
    unlink(s->log);
    s->port = 0;
    fflush(NULL);
    s->pid = fork();
    if (s->pid == 0) setpgid(0, 0), execl("/bin/sh", "sh", "-c", cmd, (char *)NULL), _exit(127);
    for (int i = 0; i < 400; ++i) { /* the line scripts wait for */
        FILE *f = fopen(s->log, "r");
        char line[512];
        while (f && fgets(line, sizeof line, f)) {
            char *at = strstr(line, "listening on 127.0.0.1:");
            if (at && strchr(at, '\n')) s->port = (uint16_t)atoi(at + strlen("listening on 127.0.0.1:"));
        }
        if (f) fclose(f);
        if (s->port) return;
        struct timespec ts = {0, 25000000};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "server did not start\n");
    exit(1);
}

/* The same, and this process made its client (VCUDA_SERVERS, VCUDA_TOKEN), for a test
 * that calls the libcudart stand-in itself. */
static inline void start_server_for_me(vcuda_test_server *s, const char *exe, const char *fake_dir, const char *token)
{
    char servers[64];
    start_server(s, exe, fake_dir, token, NULL);
    snprintf(servers, sizeof servers, "127.0.0.1:%u", s->port);
    setenv("VCUDA_SERVERS", servers, 1);
    setenv("VCUDA_TOKEN", token, 1);
}

/* Stops a server child (also a stopped one) and returns its log, read into text (cap
 * bytes) and echoed, its last 3000 bytes, for the ctest output. */
static inline char *stop_server_read_log(pid_t pid, const char *log, char *text, size_t cap)
{
    int st;
    kill(-pid, SIGCONT); /* (a group leader's stopped children too) */
    kill(pid, SIGCONT);
    kill(pid, SIGTERM);
    waitpid(pid, &st, 0);
    FILE *f = fopen(log, "r");
    size_t n = f ? fread(text, 1, cap - 1, f) : 0;
    text[n] = 0;
    if (f) fclose(f);
    unlink(log);
    fprintf(stderr, "--- server log (%zu bytes) ---\n%s\n------------------\n", n, n > 3000 ? text + n - 3000 : text);
    return text;
}

/* After kill(pid, SIGSTOP): returns once every thread of pid is stopped (a thread
 * running on another core stops only at its next kernel entry), at most after 1 s. */
static inline void wait_stopped(pid_t pid)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    for (int i = 0; i < 200; ++i) {
        FILE *f = fopen(path, "r");
        char *p = f && fgets(line, sizeof line, f) ? strrchr(line, ')') : NULL;
        if (f) fclose(f);
        if (!p || p[2] == 'T' || p[2] == 't') break;
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    struct timespec ts = {0, 20000000}; /* every thread: the state above is the main thread's */
    nanosleep(&ts, NULL);
}

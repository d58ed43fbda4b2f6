/* coordproc.h -- the real coordinator (coord.h) in a child process of its
 * own, so that its CPU time is its own: /proc/PID/stat gives it while it
 * runs, and its statistics come back over a pipe when it stops (SIGTERM).
 *
 * Thread-safety: call from the benchmark's main thread before it starts
 * any other thread (fork).  Signal-safety: the child's SIGTERM handler
 * only calls ntx_coord_request_stop (async-signal-safe).
 */
#ifndef COORDPROC_H
#define COORDPROC_H
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "interpose/exchange/coord.h"

struct coordproc {
  int pid, port, fd;
  struct ntx_coord_stats st;
  struct ntx_check_stats cst;
};

static struct ntx_coord *coordproc_self;
static void coordproc_term(int sig) {
  (void)sig;
  if (coordproc_self)
    ntx_coord_request_stop(coordproc_self);
}

/* Start the coordinator (127.0.0.1, any port) in a child.  @return 0 or -1. */
static inline int coordproc_start(struct coordproc *cp, const struct ntx_key *key, uint32_t max_clients) {
  int p[2];
  memset(cp, 0, sizeof *cp);
  if (pipe(p) != 0)
    return -1;
  int pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    close(p[0]);
    struct ntx_coord_cfg cfg;
    ntx_coord_default_cfg(&cfg);
    cfg.host = "127.0.0.1";
    cfg.port = "0";
    cfg.key = *key;
    cfg.lim.max_clients = max_clients;
    cfg.lim.init_wait_s = 600;
    cfg.lim.skew_s = 600;
    cfg.dead_timeout_s = 60;
    cfg.max_out = 16u << 20;
    char err[256];
    struct ntx_coord *co;
    int port = -1;
    if (ntx_coord_listen(&co, &cfg, err, sizeof err) != 0) {
      fprintf(stderr, "coordproc: %s\n", err);
      if (write(p[1], &port, sizeof port) < 0)
        _exit(1);
      _exit(1);
    }
    coordproc_self = co;
    signal(SIGTERM, coordproc_term);
    port = ntx_coord_port(co);
    if (write(p[1], &port, sizeof port) != (ssize_t)sizeof port)
      _exit(1);
    ntx_coord_run(co);
    struct ntx_coord_stats st;
    struct ntx_check_stats cst;
    ntx_coord_get_stats(co, &st, &cst);
    if (write(p[1], &st, sizeof st) < 0 || write(p[1], &cst, sizeof cst) < 0)
      _exit(1);
    _exit(0); /* no linger: the benchmark is over */
  }
  close(p[1]);
  cp->pid = pid;
  cp->fd = p[0];
  if (read(p[0], &cp->port, sizeof cp->port) != (ssize_t)sizeof cp->port || cp->port <= 0) {
    waitpid(pid, NULL, 0);
    return -1;
  }
  return 0;
}

/* CPU seconds (user + system) the process has used so far, or -1. */
static inline double proc_cpu_s(int pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')');
  unsigned long ut = 0, st = 0;
  if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
    return -1;
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* Stop it and collect its statistics.  @return 0 or -1. */
static inline int coordproc_stop(struct coordproc *cp) {
  kill(cp->pid, SIGTERM);
  int ok = read(cp->fd, &cp->st, sizeof cp->st) == (ssize_t)sizeof cp->st &&
           read(cp->fd, &cp->cst, sizeof cp->cst) == (ssize_t)sizeof cp->cst;
  close(cp->fd);
  waitpid(cp->pid, NULL, 0);
  return ok ? 0 : -1;
}
#endif

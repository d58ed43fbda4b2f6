/* frozen.c -- a stopped peer, a stopped loop (frozen.h). */
#include "interpose/exchange/frozen.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ntx_peer_stopped(const char *host, int32_t pid) {
  char me[256] = "";
  if (pid <= 0 || !host || gethostname(me, sizeof me - 1) != 0 || strcmp(me, host) != 0)
    return 0;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  struct stat st;
  char buf[512];
  ssize_t n = fstat(fd, &st) == 0 && st.st_uid == geteuid() ? read(fd, buf, sizeof buf - 1) : -1;
  close(fd);
  if (n <= 0)
    return 0;
  buf[n] = 0;
  /* "pid (comm) S ...": comm may hold spaces and parentheses; the state
   * follows the last ')'. */
  const char *p = strrchr(buf, ')');
  return p && p[1] == ' ' && (p[2] == 'T' || p[2] == 't');
}

double ntx_freeze_gap(struct ntx_freeze *f, double now, double slack) {
  double gap = f->last > 0 && now - f->last > slack ? now - f->last : 0;
  f->last = now;
  return gap;
}

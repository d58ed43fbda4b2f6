/* emu_nccl_sweep.c -- remove bootstrap segments that nobody can finish.
 *
 * A segment's name stays in /dev/shm until every rank has joined (a late
 * rank must find it).  When the ranks that did join are killed before the
 * others come (a test that SIGKILLs ranks stuck in init, as the launcher's
 * fail-fast does), nobody is left to remove it and /dev/shm fills with
 * names.  NCCL has no such state (its bootstrap is TCP), so this is
 * emulator housekeeping, not NCCL behaviour.
 *
 * The first init of a process sweeps once: a segment is stale when it is
 * the emulator's, its join never completed, it is older than a few seconds
 * (a creator may not have stored its pid yet) and every pid that joined is
 * gone.  A live job's segment always has a live pid, so it is never touched;
 * a reused pid only keeps a stale segment for a later sweep.
 *
 * Thread-safety: runs once per process (pthread_once).  Not signal-safe. */
#include "emu_nccl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EMU_SWEEP_MIN_AGE_S 5   /* younger: its creator may still be joining */

static int emu_pid_alive(int32_t pid)
{
  return kill(pid, 0) == 0 || errno != ESRCH;   /* EPERM: alive, not ours */
}

/* Is the segment /dev/shm/<name> an abandoned bootstrap? */
static int emu_segment_stale(const char *name, time_t now)
{
  char path[80];
  snprintf(path, sizeof path, "/%s", name);
  int fd = shm_open(path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0)
    return 0;
  struct stat st;
  const struct emu_shm *s = MAP_FAILED;
  if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof *s && now - st.st_mtime >= EMU_SWEEP_MIN_AGE_S)
    s = mmap(NULL, sizeof *s, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (s == MAP_FAILED)
    return 0;
  int stale = 0;
  uint32_t n = atomic_load(&s->nranks), joined = atomic_load(&s->joined);
  if (atomic_load(&s->magic) == EMU_SHM_MAGIC && n > 0 && n <= EMU_MAX_RANKS && joined < n) {
    int seen = 0, alive = 0;
    for (uint32_t r = 0; r < n; r++) {
      int32_t pid = atomic_load(&s->pid[r]);
      if (pid > 0) {
        seen++;
        alive += emu_pid_alive(pid);
      }
    }
    stale = seen > 0 && alive == 0;
  }
  munmap((void *)s, sizeof *s);
  return stale;
}

static void emu_sweep_once(void)
{
  DIR *d = opendir("/dev/shm");
  if (!d)
    return;
  time_t now = time(NULL);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, "ncclemu-", 8) != 0 || strlen(e->d_name) > 64)
      continue;
    if (emu_segment_stale(e->d_name, now)) {
      char path[80];
      snprintf(path, sizeof path, "/%s", e->d_name);
      shm_unlink(path);
      if (emu_verbose())
        emu_log("removed abandoned bootstrap segment %s (every rank that joined is gone)", path);
    }
  }
  closedir(d);
}

void emu_sweep_stale_segments(void)
{
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, emu_sweep_once);
}

/* test_emu_sweep.c -- the first init of a process removes abandoned
 * bootstrap segments (emu_nccl_sweep.c) and nothing else: a segment whose
 * joined ranks are all dead goes; one with a live rank, one too young to
 * judge, and a file that is not the emulator's stay.
 *
 * Thread-safety: single-threaded test.  Exit: 0 pass, 1 fail. */
#include "emu_test.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "emu_nccl.h"

/* A segment as a rank left it after joining an init of n ranks alone. */
static int make_segment(const char *name, int32_t pid, uint64_t magic, time_t age_s)
{
  int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0 || ftruncate(fd, sizeof(struct emu_shm)) != 0)
    return -1;
  struct emu_shm *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (s == MAP_FAILED) {
    close(fd);
    return -1;
  }
  atomic_store(&s->nranks, 2);
  atomic_store(&s->joined, 1);
  atomic_store(&s->pid[0], pid);
  atomic_store(&s->magic, magic);
  munmap(s, sizeof *s);
  struct timespec ts[2];
  clock_gettime(CLOCK_REALTIME, &ts[0]);
  ts[0].tv_sec -= age_s;
  ts[1] = ts[0];
  int rc = futimens(fd, ts);
  close(fd);
  return rc;
}

static int exists(const char *name)
{
  int fd = shm_open(name, O_RDONLY, 0);
  if (fd >= 0)
    close(fd);
  return fd >= 0;
}

int main(void)
{
  pid_t dead = fork();
  if (dead == 0)
    _exit(0);
  NT_RET_CHECK(dead > 0 && waitpid(dead, NULL, 0) == dead, "fork: %s", strerror(errno));
  char stale[64], live[64], young[64], foreign[64];
  snprintf(stale, sizeof stale, "/ncclemu-sweeptest-%d-stale", (int)getpid());
  snprintf(live, sizeof live, "/ncclemu-sweeptest-%d-live", (int)getpid());
  snprintf(young, sizeof young, "/ncclemu-sweeptest-%d-young", (int)getpid());
  snprintf(foreign, sizeof foreign, "/ncclemu-sweeptest-%d-foreign", (int)getpid());
  NT_RET_CHECK(make_segment(stale, dead, EMU_SHM_MAGIC, 60) == 0, "stale: %s", strerror(errno));
  NT_RET_CHECK(make_segment(live, getpid(), EMU_SHM_MAGIC, 60) == 0, "live: %s", strerror(errno));
  NT_RET_CHECK(make_segment(young, dead, EMU_SHM_MAGIC, 0) == 0, "young: %s", strerror(errno));
  NT_RET_CHECK(make_segment(foreign, dead, 0x1234, 60) == 0, "foreign: %s", strerror(errno));

  ncclUniqueId id;
  ncclComm_t comm;
  T_NCCL(ncclGetUniqueId(&id));
  T_NCCL(ncclCommInitRank(&comm, 1, id, 0));
  int ok_stale = !exists(stale), ok_live = exists(live), ok_young = exists(young), ok_foreign = exists(foreign);
  T_NCCL(ncclCommDestroy(comm));
  shm_unlink(stale);
  shm_unlink(live);
  shm_unlink(young);
  shm_unlink(foreign);
  NT_RET_CHECK(ok_stale, "the segment whose only rank (pid %d) is dead was not removed", (int)dead);
  NT_RET_CHECK(ok_live, "a segment with a live rank was removed");
  NT_RET_CHECK(ok_young, "a segment younger than the sweep's minimum age was removed");
  NT_RET_CHECK(ok_foreign, "a file without the emulator's magic was removed");
  printf("ok: abandoned segment removed; live, young and foreign ones kept\n");
  return 0;
}

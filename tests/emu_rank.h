/* emu_rank.h -- what the programs that run as ranks on the CPU emulator
 * share (tests/interpose/rank.c, tests/stress/stress_prog.c): the failure
 * macros, a sleep, a raw write to stdout and the unique-id rendezvous
 * through a file.
 *
 * Header-only, static functions: each of those programs is a single
 * translation unit, and a library would need a build rule per directory.
 * Before including it a program may define EMU_RANK_TAG (the prefix of
 * failure messages, "rank" by default) and EMU_RANK_NCCL_OK(r) (the
 * ncclResult_t values NCCL(...) accepts, ncclSuccess by default).
 * Assertions are tests/nt_test.h's (NT_DIE and the fatal ones: the rank
 * exits 1); a report starts with EMU_RANK_TAG and g_rank.
 *
 * Thread-safety: g_rank is set by main before any thread starts; the
 * functions are reentrant.  Signal-safety: say() and sleep_ms() only make
 * system calls and are async-signal-safe; the assertions and share_id are not.
 */
#ifndef EMU_RANK_H
#define EMU_RANK_H

#include <cuda_runtime_api.h>
#include <errno.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef EMU_RANK_TAG
#define EMU_RANK_TAG "rank"
#endif
#ifndef EMU_RANK_NCCL_OK
#define EMU_RANK_NCCL_OK(r) ((r) == ncclSuccess)
#endif

static int g_rank = -1; /* for messages; set by main */

#define NT_WHO(buf, cap) snprintf(buf, cap, EMU_RANK_TAG " %d ", g_rank)
#include "nt_test.h"

#define NCCL(call)                                                             \
  do {                                                                         \
    ncclResult_t r_ = (call);                                                  \
    if (!EMU_RANK_NCCL_OK(r_))                                                 \
      NT_DIE("%s -> %d", #call, (int)r_);                                        \
  } while (0)
#define CUDA(call)                                                             \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess)                                                     \
      NT_DIE("%s -> %d", #call, (int)e_);                                        \
  } while (0)

static inline void say(const char *s) {
  ssize_t w = write(1, s, strlen(s));
  (void)w;
}

static inline void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

/* The unique id of communicator `name`: rank 0 creates it and publishes it
 * atomically (write + rename, so a reader never sees half an id); the
 * others poll for the file for up to wait_s seconds, then fail. */
static inline ncclUniqueId share_id(const char *dir, const char *name, int rank, int wait_s) {
  char path[1024], tmp[1100];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  ncclUniqueId id;
  if (rank == 0) {
    NCCL(ncclGetUniqueId(&id));
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(&id, sizeof id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0)
      NT_DIE("cannot publish %s", path);
    return id;
  }
  for (int i = 0; i < wait_s * 100; i++) {
    FILE *f = fopen(path, "rb");
    if (f) {
      size_t n = fread(&id, sizeof id, 1, f);
      fclose(f);
      if (n == 1)
        return id;
    }
    sleep_ms(10);
  }
  NT_DIE("no unique id at %s", path);
}

#endif /* EMU_RANK_H */

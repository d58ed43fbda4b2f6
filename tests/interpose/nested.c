/* nested.c -- test (5): a program on the nested no-op NCCL (bench/noop.c
 * built with -DNOOP_NESTED), whose ncclBcast calls ncclBroadcast and whose
 * init/AllReduce call ncclCommGetAsyncError through the PLT, as NCCL 2.28
 * does.  The driver checks the dump holds exactly the calls made here.
 * Also: a collective on a communicator nccltrace never saw created, and a
 * fork()ed child that uses NCCL on its own (it must get its own ring/dump
 * and leave the parent's alone).
 * Exit: 0 ok, 1 failure.  Single-threaded apart from the fork. */
#include <errno.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int child(void) {
  ncclUniqueId id;
  ncclComm_t comm;
  float buf[4] = {0};
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess)
    return 1;
  for (int i = 0; i < 2; i++)
    if (ncclAllReduce(buf, buf, 2, ncclInt32, ncclMax, comm, NULL) != ncclSuccess)
      return 1;
  return ncclCommDestroy(comm) == ncclSuccess ? 0 : 1;
}

int main(void) {
  ncclUniqueId id;
  ncclComm_t comm;
  float buf[4] = {0};
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess)
    return 1;
  for (int i = 0; i < 3; i++)
    if (ncclBcast(buf, 4, ncclFloat, 0, comm, NULL) != ncclSuccess)
      return 1;
  for (int i = 0; i < 2; i++)
    if (ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, comm, NULL) != ncclSuccess)
      return 1;
  /* errno passes through both ways: the nested NCCL wants 1234 on entry
   * to a uint8 AllReduce and sets 4321 (bench/noop/noop_life.c). */
  errno = 1234;
  if (ncclAllReduce(buf, buf, 4, ncclUint8, ncclSum, comm, NULL) != ncclSuccess || errno != 4321) {
    fprintf(stderr, "nested: errno not passed through (errno %d after the call)\n", errno);
    return 1;
  }
  /* The application's own polls: no transition, so no record either. */
  for (int i = 0; i < 5; i++) {
    ncclResult_t e;
    if (ncclCommGetAsyncError(comm, &e) != ncclSuccess || e != ncclSuccess)
      return 1;
  }
  /* A handle nccltrace has no record of: recorded without identity. */
  if (ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, (ncclComm_t)(uintptr_t)0xdead00, NULL) != ncclSuccess)
    return 1;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0)
    exit(child());
  int st;
  if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return 1;
  printf("parent %d child %d\n", (int)getpid(), (int)pid);
  /* NESTED_NOISE=n: after a pause, n calls on a second comm, enough to lap
   * a small ring: the first comm's history must survive in its recent[]. */
  const char *noise = getenv("NESTED_NOISE");
  if (noise) {
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
    ncclComm_t other;
    if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&other, 1, id, 0) != ncclSuccess)
      return 1;
    for (int i = 0; i < atoi(noise); i++)
      if (ncclAllReduce(buf, buf, 1, ncclInt8, ncclSum, other, NULL) != ncclSuccess)
        return 1;
  }
  if (ncclCommDestroy(comm) != ncclSuccess)
    return 1;
  puts("nested done");
  return 0;
}

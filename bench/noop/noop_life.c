/* noop_life.c -- the calls of the no-op NCCL that must produce something:
 * a dummy communicator handle from the inits, split and shrink, plain
 * answers from the query functions (see noop.c).
 *
 * Thread-safety: the handle counter is atomic.  Signal-safety: every
 * function is.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <nccl.h>

#define NOOP_API __attribute__((visibility("default")))

/* Distinct fake handles: never dereferenced by anyone. */
static uintptr_t next_handle = 0x1000;

static ncclComm_t fake(void) {
  return (ncclComm_t)__atomic_add_fetch(&next_handle, 0x100, __ATOMIC_RELAXED);
}

NOOP_API ncclResult_t ncclGetVersion(int *version) {
  if (version)
    *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}
NOOP_API const char *ncclGetErrorString(ncclResult_t result) {
  return result == ncclSuccess ? "no error" : "noop error";
}
NOOP_API const char *ncclGetLastError(ncclComm_t comm) {
  (void)comm;
  return "";
}
NOOP_API ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId) {
  if (!uniqueId)
    return ncclInvalidArgument;
  /* Distinct ids, like NCCL's: communicators made from them differ. */
  static uint64_t serial;
  uint64_t n = __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED);
  memset(uniqueId, 0, sizeof *uniqueId);
  uniqueId->internal[0] = 'N';
  memcpy(uniqueId->internal + 8, &n, sizeof n);
  return ncclSuccess;
}
NOOP_API ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
  (void)comm;
  *count = 1;
  return ncclSuccess;
}
NOOP_API ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
  (void)comm;
  *rank = 0;
  return ncclSuccess;
}
NOOP_API ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
  (void)comm;
  if (asyncError)
    *asyncError = ncclSuccess;
  return ncclSuccess;
}

/* NOOP_NESTED only: NOOP_BLOCK_AT=n makes the n-th ncclAllReduce block
 * inside the call for 3 s (as NCCL does while it connects to a peer that
 * does not answer), for the interposer's in-call timeout test. */
static void maybe_block(void) {
#ifdef NOOP_NESTED
  static int calls;
  const char *at = getenv("NOOP_BLOCK_AT");
  if (at && ++calls == atoi(at)) {
    struct timespec ts = {3, 0};
    while (nanosleep(&ts, &ts) != 0)
      ;
  }
#endif
}

static void nested_poll(ncclComm_t comm) {
#ifdef NOOP_NESTED
  /* NCCL polls its own public entry point while waiting (through the PLT,
   * so an interposer sees it): this is what the guard must keep out. */
  ncclResult_t e;
  ncclCommGetAsyncError(comm, &e);
#else
  (void)comm;
#endif
}

NOOP_API ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank) {
  (void)nranks; (void)commId; (void)rank;
  *comm = fake();
  nested_poll(*comm);
  return ncclSuccess;
}
NOOP_API ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                            ncclConfig_t *config) {
  (void)config;
  return ncclCommInitRank(comm, nranks, commId, rank);
}
NOOP_API ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                              ncclUniqueId *commIds, ncclConfig_t *config) {
  (void)nranks; (void)myrank; (void)nId; (void)commIds; (void)config;
  *newcomm = fake();
  return ncclSuccess;
}
NOOP_API ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist) {
  (void)devlist;
  for (int i = 0; i < ndev; i++)
    comm[i] = fake();
  return ncclSuccess;
}
NOOP_API ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                   ncclConfig_t *config) {
  (void)comm; (void)key; (void)config;
  *newcomm = color == NCCL_SPLIT_NOCOLOR ? NULL : fake();
  return ncclSuccess;
}
NOOP_API ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                                    ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags) {
  (void)comm; (void)excludeRanksList; (void)excludeRanksCount; (void)config; (void)shrinkFlags;
  *newcomm = fake();
  return ncclSuccess;
}
NOOP_API ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                   ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                   cudaStream_t stream) {
  (void)sendbuff; (void)recvbuff; (void)count; (void)datatype; (void)op; (void)stream;
  maybe_block();
  nested_poll(comm);
#ifdef NOOP_NESTED
  /* errno through the interposer (tests/interpose/nested.c): a uint8
   * AllReduce expects the caller's errno 1234 and leaves 4321 behind. */
  if (datatype == ncclUint8) {
    if (errno != 1234)
      return ncclInternalError;
    errno = 4321;
  }
#endif
  return ncclSuccess;
}
NOOP_API ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                               cudaStream_t stream) {
#ifdef NOOP_NESTED
  /* NCCL 2.28: ncclBcast is ncclBroadcast in place, called by name. */
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
#else
  (void)buff; (void)count; (void)datatype; (void)root; (void)comm; (void)stream;
  return ncclSuccess;
#endif
}

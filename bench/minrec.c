/* minrec.c -- the minimal recorder the interposer is measured against
 * (bench/run.sh, bench/icount.sh): an LD_PRELOAD library whose
 * ncclAllReduce writes one 64-byte record into a per-thread ring in an
 * mmap'd file and forwards the call.  What it does per call is what any
 * flight recorder must do -- read the clock, store the record, publish it
 * with a release store -- and nothing else: no communicator registry, no
 * sequence number, no reentrancy guard, no mode tests.  Built with the
 * library's own flags from this tree, so the two differ in what they do,
 * not in how they were compiled.
 *
 * Thread-safety: each thread writes its own ring (initial-exec TLS); the
 * ring index is handed out with one atomic per thread.  Signal-safety: none
 * needed (a benchmark).  Only ncclAllReduce is wrapped; nothing else.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define MR_SLOTS 65536u  /* records per thread ring, power of two */
#define MR_THREADS 64u   /* rings in the file */

struct mr_record {
  uint64_t commit; /* position + 1, release-stored last */
  uint64_t tsc, comm, count, send, recv, stream;
  uint32_t op;     /* dtype << 8 | redop */
  uint32_t tid;
};
_Static_assert(sizeof(struct mr_record) == 64, "one cache line");

typedef ncclResult_t (*mr_fn)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                              cudaStream_t);
static mr_fn mr_real;
static struct mr_record *mr_map;
static unsigned mr_next_ring;
static __thread __attribute__((tls_model("initial-exec"))) struct mr_record *mr_ring;
static __thread __attribute__((tls_model("initial-exec"))) uint64_t mr_pos;

__attribute__((constructor)) static void mr_init(void) {
  mr_real = (mr_fn)dlsym(RTLD_NEXT, "ncclAllReduce");
  char path[64];
  snprintf(path, sizeof path, "/dev/shm/minrec-%d", (int)getpid());
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return;
  unlink(path); /* the mapping keeps it; nothing left behind */
  size_t len = (size_t)MR_SLOTS * MR_THREADS * sizeof(struct mr_record);
  if (ftruncate(fd, (off_t)len) == 0) {
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m != MAP_FAILED)
      mr_map = m;
  }
  close(fd);
}

static __attribute__((noinline)) struct mr_record *mr_ring_slow(void) {
  unsigned i = __atomic_fetch_add(&mr_next_ring, 1, __ATOMIC_RELAXED);
  if (!mr_map || i >= MR_THREADS)
    return NULL;
  mr_ring = mr_map + (size_t)i * MR_SLOTS;
  return mr_ring;
}

__attribute__((visibility("default"))) ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count,
                                                                  ncclDataType_t dt, ncclRedOp_t op,
                                                                  ncclComm_t comm, cudaStream_t stream) {
  struct mr_record *ring = mr_ring;
  if (__builtin_expect(!ring, 0) && !(ring = mr_ring_slow()))
    return mr_real(send, recv, count, dt, op, comm, stream);
  uint64_t p = mr_pos++;
  struct mr_record *r = &ring[p & (MR_SLOTS - 1)];
  r->tsc = __builtin_ia32_rdtsc();
  r->comm = (uint64_t)(uintptr_t)comm;
  r->count = count;
  r->send = (uint64_t)(uintptr_t)send;
  r->recv = (uint64_t)(uintptr_t)recv;
  r->stream = (uint64_t)(uintptr_t)stream;
  r->op = (uint32_t)dt << 8 | (uint32_t)op;
  r->tid = 0;
  __atomic_store_n(&r->commit, p + 1, __ATOMIC_RELEASE);
  return mr_real(send, recv, count, dt, op, comm, stream);
}

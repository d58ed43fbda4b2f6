/* shapes.c -- the program shapes of NVIDIA's NCCL examples, written for
 * nccltrace's acceptance: each runs unchanged on a GPU machine and on the
 * CPU emulator, untraced and traced, with the same output.
 *
 *   shapes multidev [NDEV] [FAULT]  one process drives NDEV devices (ncclCommInitAll);
 *                              FAULT kill: SIGKILLed after its AllReduce, holding all
 *                              its ranks; mismatch: device 2's AllReduce has half the
 *                              count (every rank hangs, as on NCCL)
 *   shapes pthread [NDEV]      one device per pthread (ncclCommInitRank in each)
 *   examples/launch.sh N shapes ring        send/recv ring, one device per process
 *   examples/launch.sh N shapes allreduce   AllReduce, one device per process
 *   examples/launch.sh N shapes userbuf     user-buffer registration (ncclCommRegister)
 *   examples/launch.sh N shapes window      symmetric-memory windows (ncclCommWindowRegister)
 *
 * Every rank checks its result and prints one line; "ok" lines only.
 * Thread-safety: the pthread shape gives each thread its own comm, stream
 * and buffers; nothing is shared but the unique id.  Not signal-safe.
 */
#include <pthread.h>
#include <signal.h>
#include "common.h"

#define N 4096

/* Print whether every element of dev is want; 1 when not. */
static int check(const char *what, int rank, const float *dev, float want) {
  float host[N]; /* per call: the pthread shape fills from several threads */
  CUDA_CHECK(cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int i = 0; i < N; i++)
    bad += host[i] != want;
  printf("%s rank %d: %s (%g)\n", what, rank, bad ? "WRONG" : "ok", host[0]);
  return bad != 0;
}

static void fill(float *dev, float v) {
  float host[N]; /* per call: the pthread shape fills from several threads */
  for (int i = 0; i < N; i++)
    host[i] = v;
  CUDA_CHECK(cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice));
}

static int multidev(int ndev, const char *fault) {
  ncclComm_t comms[64];
  int devs[64] = {0};
  cudaStream_t s[64];
  float *buf[64];
  for (int d = 0; d < ndev; d++)
    devs[d] = d;
  NCCL_CHECK(ncclCommInitAll(comms, ndev, devs));
  for (int d = 0; d < ndev; d++) {
    CUDA_CHECK(cudaSetDevice(d));
    CUDA_CHECK(cudaStreamCreate(&s[d]));
    CUDA_CHECK(cudaMalloc((void **)&buf[d], N * sizeof(float)));
    fill(buf[d], (float)(d + 1));
  }
  NCCL_CHECK(ncclGroupStart());
  for (int d = 0; d < ndev; d++) {
    size_t count = d == 2 && strcmp(fault, "mismatch") == 0 ? N / 2 : N;
    NCCL_CHECK(ncclAllReduce(buf[d], buf[d], count, ncclFloat, ncclSum, comms[d], s[d]));
  }
  NCCL_CHECK(ncclGroupEnd());
  int bad = 0;
  for (int d = 0; d < ndev; d++) {
    CUDA_CHECK(cudaSetDevice(d));
    CUDA_CHECK(cudaStreamSynchronize(s[d]));
    bad |= check("multidev", d, buf[d], (float)(ndev * (ndev + 1) / 2));
  }
  if (strcmp(fault, "kill") == 0) {
    fflush(stdout);
    raise(SIGKILL); /* as the OOM killer would: every rank of the process at once */
  }
  for (int d = 0; d < ndev; d++) {
    NCCL_CHECK(ncclCommDestroy(comms[d]));
    CUDA_CHECK(cudaFree(buf[d]));
  }
  return bad;
}

struct thr {
  int rank, n;
  ncclUniqueId id;
};

static void *thread_rank(void *p) {
  struct thr *t = p;
  ncclComm_t comm;
  cudaStream_t s;
  float *buf;
  CUDA_CHECK(cudaSetDevice(t->rank));
  CUDA_CHECK(cudaStreamCreate(&s));
  CUDA_CHECK(cudaMalloc((void **)&buf, N * sizeof(float)));
  fill(buf, (float)(t->rank + 1));
  NCCL_CHECK(ncclCommInitRank(&comm, t->n, t->id, t->rank));
  NCCL_CHECK(ncclAllReduce(buf, buf, N, ncclFloat, ncclSum, comm, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  NCCL_CHECK(ncclCommDestroy(comm));
  CUDA_CHECK(cudaStreamDestroy(s));
  /* checked on the main thread, in rank order, for a deterministic output */
  pthread_exit(buf);
}

static int pthreads(int n) {
  struct thr t[64];
  pthread_t th[64];
  ncclUniqueId id;
  NCCL_CHECK(ncclGetUniqueId(&id));
  for (int r = 0; r < n; r++) {
    t[r] = (struct thr){.rank = r, .n = n, .id = id};
    if (pthread_create(&th[r], NULL, thread_rank, &t[r]) != 0)
      return 1;
  }
  int bad = 0;
  for (int r = 0; r < n; r++) {
    void *buf;
    pthread_join(th[r], &buf);
    CUDA_CHECK(cudaSetDevice(r));
    bad |= check("pthread", r, buf, (float)(n * (n + 1) / 2));
    CUDA_CHECK(cudaFree(buf));
  }
  return bad;
}

static int per_process(const char *shape, const char *idfile) {
  ncclUniqueId id;
  ex_unique_id(idfile, &id);
  ncclComm_t comm;
  NCCL_CHECK(ncclCommInitRank(&comm, ex_size, id, ex_rank));
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreate(&s));
  float *send, *recv;
  int bad = 0;
  if (strcmp(shape, "userbuf") == 0) {
    /* buffers from ncclMemAlloc, registered with the communicator */
    NCCL_CHECK(ncclMemAlloc((void **)&send, N * sizeof(float)));
    NCCL_CHECK(ncclMemAlloc((void **)&recv, N * sizeof(float)));
  } else {
    CUDA_CHECK(cudaMalloc((void **)&send, N * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&recv, N * sizeof(float)));
  }
  fill(send, (float)(ex_rank + 1));
  float sum = (float)(ex_size * (ex_size + 1) / 2);
  if (strcmp(shape, "ring") == 0) {
    int next = (ex_rank + 1) % ex_size, prev = (ex_rank + ex_size - 1) % ex_size;
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclSend(send, N, ncclFloat, next, comm, s));
    NCCL_CHECK(ncclRecv(recv, N, ncclFloat, prev, comm, s));
    NCCL_CHECK(ncclGroupEnd());
    ex_wait(s, comm);
    bad = check("ring", ex_rank, recv, (float)(prev + 1));
  } else if (strcmp(shape, "allreduce") == 0) {
    NCCL_CHECK(ncclAllReduce(send, recv, N, ncclFloat, ncclSum, comm, s));
    ex_wait(s, comm);
    bad = check("allreduce", ex_rank, recv, sum);
  } else if (strcmp(shape, "userbuf") == 0) {
    void *hs, *hr;
    NCCL_CHECK(ncclCommRegister(comm, send, N * sizeof(float), &hs));
    NCCL_CHECK(ncclCommRegister(comm, recv, N * sizeof(float), &hr));
    NCCL_CHECK(ncclAllReduce(send, recv, N, ncclFloat, ncclSum, comm, s));
    ex_wait(s, comm);
    bad = check("userbuf", ex_rank, recv, sum);
    NCCL_CHECK(ncclCommDeregister(comm, hs));
    NCCL_CHECK(ncclCommDeregister(comm, hr));
  } else {
    /* symmetric memory: every rank registers the same-sized windows, in
     * the same order (collective), and runs collectives on them */
    ncclWindow_t ws, wr;
    NCCL_CHECK(ncclCommWindowRegister(comm, send, N * sizeof(float), &ws, NCCL_WIN_COLL_SYMMETRIC));
    NCCL_CHECK(ncclCommWindowRegister(comm, recv, N * sizeof(float), &wr, NCCL_WIN_COLL_SYMMETRIC));
    NCCL_CHECK(ncclAllReduce(send, recv, N, ncclFloat, ncclSum, comm, s));
    ex_wait(s, comm);
    bad = check("window", ex_rank, recv, sum);
    NCCL_CHECK(ncclCommWindowDeregister(comm, ws));
    NCCL_CHECK(ncclCommWindowDeregister(comm, wr));
  }
  NCCL_CHECK(ncclCommFinalize(comm));
  NCCL_CHECK(ncclCommDestroy(comm));
  if (strcmp(shape, "userbuf") == 0) {
    NCCL_CHECK(ncclMemFree(send));
    NCCL_CHECK(ncclMemFree(recv));
  } else {
    CUDA_CHECK(cudaFree(send));
    CUDA_CHECK(cudaFree(recv));
  }
  return bad;
}

int main(int argc, char **argv) {
  const char *shape = argc > 1 ? argv[1] : "";
  if (strcmp(shape, "multidev") == 0 || strcmp(shape, "pthread") == 0) {
    int n = argc > 2 ? atoi(argv[2]) : 4, ndev = 0;
    CUDA_CHECK(cudaGetDeviceCount(&ndev));
    if (n < 1 || n > 64 || n > ndev) {
      fprintf(stderr, "shapes %s: want 1..%d devices\n", shape, ndev < 64 ? ndev : 64);
      return 2;
    }
    ex_rank = 0;
    return strcmp(shape, "multidev") == 0 ? multidev(n, argc > 3 ? argv[3] : "") : pthreads(n);
  }
  if (strcmp(shape, "ring") && strcmp(shape, "allreduce") && strcmp(shape, "userbuf") && strcmp(shape, "window")) {
    fprintf(stderr, "usage: shapes multidev|pthread [NDEV] | (under launch.sh) ring|allreduce|userbuf|window\n");
    return 2;
  }
  const char *idfile = ex_setup(&argc, argv);
  return per_process(shape, idfile);
}

/* test_emu_graph -- NCCL operations captured into a CUDA graph run at each
 * launch of the graph, not at capture, in order with the other operations of
 * their communicator (NCCL's persistent plans: sequence numbers are taken at
 * launch).
 *   replay NRANKS  an AllReduce and a grouped AllGather captured once,
 *                  replayed 20 times with new inputs, interleaved with eager
 *                  AllReduces on another stream; every result checked
 *   stop           2 ranks replay 3 times; rank 1 stops; rank 0's 4th replay
 *                  never completes (checked for 1.5 s), as on a GPU
 * Exit 0 pass, 1 fail. */
#include "emu_test.h"

#define COUNT 20000
#define REPLAYS 20

struct bufs {
  float *in, *out, *gin, *gout, *h;
};

static int setup(int rank, int nranks, ncclUniqueId id, ncclComm_t *comm, cudaStream_t *s, struct bufs *b)
{
  T_CUDA(cudaSetDevice(rank));
  T_NCCL(ncclCommInitRank(comm, nranks, id, rank));
  T_CUDA(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking));
  T_CUDA(cudaMalloc((void **)&b->in, COUNT * sizeof(float)));
  T_CUDA(cudaMalloc((void **)&b->out, COUNT * sizeof(float)));
  T_CUDA(cudaMalloc((void **)&b->gin, 64 * sizeof(float)));
  T_CUDA(cudaMalloc((void **)&b->gout, 64 * (size_t)nranks * sizeof(float)));
  b->h = malloc(COUNT * sizeof(float));
  NT_RET_CHECK(b->h, "malloc");
  return 0;
}

static int put(struct bufs *b, float v)
{
  for (int i = 0; i < COUNT; i++)
    b->h[i] = v + (float)(i % 7);
  T_CUDA(cudaMemcpy(b->in, b->h, COUNT * sizeof(float), cudaMemcpyHostToDevice));
  for (int i = 0; i < 64; i++)
    b->h[i] = v;
  T_CUDA(cudaMemcpy(b->gin, b->h, 64 * sizeof(float), cudaMemcpyHostToDevice));
  return 0;
}

/* out[i] = sum over ranks of (base + rank + i % 7). */
static int check_allreduce(struct bufs *b, int nranks, float base, const char *what, int k)
{
  T_CUDA(cudaMemcpy(b->h, b->out, COUNT * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < COUNT; i++) {
    float want = (float)nranks * (base + (float)(i % 7)) + (float)(nranks * (nranks - 1) / 2);
    NT_RET_CHECK(b->h[i] == want, "%s %d: out[%d] = %g, want %g", what, k, i, (double)b->h[i], (double)want);
  }
  return 0;
}

static int capture(ncclComm_t comm, cudaStream_t s, struct bufs *b, cudaGraphExec_t *x)
{
  cudaGraph_t g;
  T_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  T_NCCL(ncclAllReduce(b->in, b->out, COUNT, ncclFloat32, ncclSum, comm, s));
  T_NCCL(ncclGroupStart());
  T_NCCL(ncclAllGather(b->gin, b->gout, 64, ncclFloat32, comm, s));
  T_NCCL(ncclGroupEnd());
  T_CUDA(cudaStreamEndCapture(s, &g));
  size_t n = 0;
  T_CUDA(cudaGraphGetNodes(g, NULL, &n));
  NT_RET_CHECK(n == 2, "captured %zu nodes, want 2 (one per NCCL launch)", n);
  T_CUDA(cudaGraphInstantiate(x, g, 0));
  T_CUDA(cudaGraphDestroy(g));
  return 0;
}

static int rank_replay(int rank, int nranks, ncclUniqueId id, void *arg)
{
  (void)arg;
  ncclComm_t comm;
  cudaStream_t s, s2;
  struct bufs b;
  if (setup(rank, nranks, id, &comm, &s, &b))
    return 1;
  T_CUDA(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  /* Eager work before the capture: seq 1. */
  if (put(&b, (float)rank))
    return 1;
  T_NCCL(ncclAllReduce(b.in, b.out, COUNT, ncclFloat32, ncclSum, comm, s2));
  T_CUDA(cudaStreamSynchronize(s2));
  if (check_allreduce(&b, nranks, 0, "eager", 0))
    return 1;
  T_CUDA(cudaMemset(b.out, 0, COUNT * sizeof(float)));
  T_CUDA(cudaDeviceSynchronize());
  cudaGraphExec_t x;
  if (capture(comm, s, &b, &x))
    return 1;
  /* Nothing ran at capture. */
  T_CUDA(cudaMemcpy(b.h, b.out, sizeof(float), cudaMemcpyDeviceToHost));
  NT_RET_CHECK(b.h[0] == 0, "captured AllReduce ran at capture");
  for (int k = 1; k <= REPLAYS; k++) {
    float base = (float)(10 * k);
    if (put(&b, base + (float)rank))
      return 1;
    T_CUDA(cudaGraphLaunch(x, s));
    if (k % 2)
      T_CUDA(cudaGraphLaunch(x, s));   /* two replays back to back: the same result */
    T_CUDA(cudaStreamSynchronize(s));
    if (check_allreduce(&b, nranks, base, "replay", k))
      return 1;
    T_CUDA(cudaMemcpy(b.h, b.gout, 64 * (size_t)nranks * sizeof(float), cudaMemcpyDeviceToHost));
    for (int r = 0; r < nranks; r++)
      NT_RET_CHECK(b.h[64 * r + 5] == base + (float)r, "replay %d: AllGather block %d = %g", k, r, (double)b.h[64 * r + 5]);
    if (k % 5 == 0) {
      /* An eager AllReduce between replays, on another stream: it takes
       * the next sequence number, the next replay the ones after it. */
      T_NCCL(ncclAllReduce(b.in, b.out, COUNT, ncclFloat32, ncclSum, comm, s2));
      T_CUDA(cudaStreamSynchronize(s2));
      if (check_allreduce(&b, nranks, base, "eager between replays", k))
        return 1;
    }
  }
  T_CUDA(cudaGraphExecDestroy(x));
  T_NCCL(ncclCommDestroy(comm));
  return 0;
}

static int rank_stop(int rank, int nranks, ncclUniqueId id, void *arg)
{
  (void)arg;
  ncclComm_t comm;
  cudaStream_t s;
  struct bufs b;
  if (setup(rank, nranks, id, &comm, &s, &b))
    return 1;
  cudaGraphExec_t x;
  if (capture(comm, s, &b, &x))
    return 1;
  for (int k = 1; k <= 3; k++) {
    if (put(&b, (float)(k + rank)))
      return 1;
    T_CUDA(cudaGraphLaunch(x, s));
    T_CUDA(cudaStreamSynchronize(s));
    if (check_allreduce(&b, nranks, (float)k, "replay", k))
      return 1;
  }
  if (rank == 1) {
    t_sleep_ms(3000);   /* stops replaying, stays alive past rank 0's check */
    _exit(0);
  }
  T_CUDA(cudaGraphLaunch(x, s));
  double end = t_now() + 1.5;
  while (t_now() < end) {
    NT_RET_CHECK(cudaStreamQuery(s) == cudaErrorNotReady, "replay 4 completed without rank 1");
    t_sleep_ms(50);
  }
  printf("ok: replay 4 waits for the rank that stopped replaying\n");
  fflush(stdout);
  _exit(0);   /* the stream worker stays blocked in the replay */
}

int main(int argc, char **argv)
{
  if (argc >= 2 && !strcmp(argv[1], "replay")) {
    int n = argc > 2 ? atoi(argv[2]) : 3;
    int rc = t_fork_ranks(n, rank_replay, NULL, 60);
    if (rc == 0)
      printf("ok: %d ranks, %d replays\n", n, REPLAYS);
    return rc;
  }
  if (argc == 2 && !strcmp(argv[1], "stop"))
    return t_fork_ranks(2, rank_stop, NULL, 30);
  fprintf(stderr, "usage: %s replay [NRANKS] | stop\n", argv[0]);
  return 2;
}

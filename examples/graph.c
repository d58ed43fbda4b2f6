/* graph.c -- the torch.cuda.graph pattern: eager AllReduces are still in
 * flight on one stream when the application captures an AllReduce on another
 * stream in global mode (torch.cuda.graph's default), holds the capture open
 * for 300 ms (a model's forward pass), then instantiates the graph and
 * launches it many times, checking every replay's result.
 *
 * A tracer whose own threads call a "potentially unsafe" CUDA function (an
 * event query, say) in global mode during those 300 ms invalidates the
 * capture, and cudaStreamEndCapture fails: this program then exits 1.
 *
 *   examples/launch.sh 3 ./graph [REPLAYS]     (default 50)
 * Faults, for the scenario tests (set on one rank, RANKENV_<r>):
 *   GRAPH_EXIT_AT=N   _exit(7) just before launching replay N;
 *   GRAPH_OP=allgather capture an AllGather instead of the AllReduce.
 * Single-threaded; not signal-safe.
 */
#include "common.h"

#define EAGER_COUNT (1u << 20)
#define EAGER_OPS 4
#define GRAPH_COUNT 4096

static int check(const float *h, size_t n, float want, const char *what, int k) {
  for (size_t i = 0; i < n; i++)
    if (h[i] != want) {
      fprintf(stderr, "rank %d: %s %d: element %zu is %g, want %g\n", ex_rank, what, k, i, (double)h[i],
              (double)want);
      return 1;
    }
  return 0;
}

static void fill(float *h, size_t n, float v) {
  for (size_t i = 0; i < n; i++)
    h[i] = v;
}

int main(int argc, char **argv) {
  const char *idfile = ex_setup(&argc, argv);
  int replays = argc > 1 ? atoi(argv[1]) : 50;
  ncclUniqueId id;
  ex_unique_id(idfile, &id);
  ncclComm_t comm;
  NCCL_CHECK(ncclCommInitRank(&comm, ex_size, id, ex_rank));
  /* PyTorch's pool streams are non-blocking: neither waits for the legacy
   * stream that cudaMemcpy uses. */
  cudaStream_t eager, cap;
  CUDA_CHECK(cudaStreamCreateWithFlags(&eager, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&cap, cudaStreamNonBlocking));
  float *e_buf, *g_in, *g_out;
  float *h = malloc(EAGER_COUNT * sizeof(float));
  if (!h)
    return 1;
  CUDA_CHECK(cudaMalloc((void **)&e_buf, EAGER_COUNT * sizeof(float)));
  CUDA_CHECK(cudaMalloc((void **)&g_in, GRAPH_COUNT * sizeof(float)));
  CUDA_CHECK(cudaMalloc((void **)&g_out, GRAPH_COUNT * sizeof(float)));
  fill(h, EAGER_COUNT, 1.0f);
  CUDA_CHECK(cudaMemcpy(e_buf, h, EAGER_COUNT * sizeof(float), cudaMemcpyHostToDevice));

  /* Eager work, in place: after EAGER_OPS sums every element is
   * size^EAGER_OPS.  Rank 0 comes late, so the others' are still in flight
   * when they begin their capture (and rank 0's are not yet polled). */
  if (ex_rank == 0)
    ex_sleep_ms(100);
  for (int i = 0; i < EAGER_OPS; i++)
    NCCL_CHECK(ncclAllReduce(e_buf, e_buf, EAGER_COUNT, ncclFloat32, ncclSum, comm, eager));

  const char *exit_at = getenv("GRAPH_EXIT_AT"), *op = getenv("GRAPH_OP");
  int gather = op && strcmp(op, "allgather") == 0;
  cudaGraph_t graph;
  CUDA_CHECK(cudaStreamBeginCapture(cap, cudaStreamCaptureModeGlobal));
  if (gather) /* a different collective than the peers': same bytes moved per rank */
    NCCL_CHECK(ncclAllGather(g_in, g_out, GRAPH_COUNT / ex_size, ncclFloat32, comm, cap));
  else
    NCCL_CHECK(ncclAllReduce(g_in, g_out, GRAPH_COUNT, ncclFloat32, ncclSum, comm, cap));
  ex_sleep_ms(300);
  cudaError_t end = cudaStreamEndCapture(cap, &graph);
  if (end != cudaSuccess) {
    fprintf(stderr, "rank %d: cudaStreamEndCapture: %s (%s)\n", ex_rank, cudaGetErrorName(end),
            cudaGetErrorString(end));
    return 1;
  }

  ex_wait(eager, comm);
  CUDA_CHECK(cudaMemcpy(h, e_buf, EAGER_COUNT * sizeof(float), cudaMemcpyDeviceToHost));
  float want = 1.0f;
  for (int i = 0; i < EAGER_OPS; i++)
    want *= (float)ex_size;
  int bad = check(h, EAGER_COUNT, want, "eager AllReduce", EAGER_OPS);

  cudaGraphExec_t exec;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int k = 1; k <= replays && !bad; k++) {
    fill(h, GRAPH_COUNT, (float)(ex_rank + k));
    CUDA_CHECK(cudaMemcpy(g_in, h, GRAPH_COUNT * sizeof(float), cudaMemcpyHostToDevice));
    if (exit_at && atoi(exit_at) == k)
      _exit(7);
    CUDA_CHECK(cudaGraphLaunch(exec, cap));
    ex_wait(cap, comm);
    CUDA_CHECK(cudaMemcpy(h, g_out, GRAPH_COUNT * sizeof(float), cudaMemcpyDeviceToHost));
    bad |= check(h, GRAPH_COUNT, (float)(ex_size * k + ex_size * (ex_size - 1) / 2), "replay", k);
  }
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  NCCL_CHECK(ncclCommFinalize(comm));
  NCCL_CHECK(ncclCommDestroy(comm));
  if (!bad)
    printf("rank %d: capture held 300 ms, %d replays checked\n", ex_rank, replays);
  return bad;
}

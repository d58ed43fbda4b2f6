/* test_emu_coll -- every collective, every dtype and reduction op (PreMulSum
 * included) computes the right result across N forked ranks.
 * Usage: test_emu_coll NRANKS.  Proves: data movement and arithmetic of the
 * emulator, single- and multi-chunk (70001 elements), in- and out-of-place. */
#include "emu_test.h"

#define BIG 70001

struct ctx {
  int rank, n;
  ncclComm_t comm;
  cudaStream_t s;
  void *a, *b;
};

/* Small values keep every partial sum exact, even in float8. */
static double val(int r, size_t i, ncclDataType_t t, int op)
{
  /* float8 has 2-3 mantissa bits: ranks past 8 contribute neutral values. */
  if (r >= 8 && (t == ncclFloat8e4m3 || t == ncclFloat8e5m2))
    return op == ncclProd ? 1 : op == ncclMin ? 2 : 0;
  if (op == ncclProd || t == ncclFloat8e4m3 || t == ncclFloat8e5m2 || op >= ncclNumOps)
    return 1 + (double)((r + i) % 2);
  return 1 + (double)((r + 2 * i) % 5);
}

static int fill(struct ctx *c, void *buf, size_t count, ncclDataType_t t, int op, int r, size_t off)
{
  for (size_t i = 0; i < count; i++)
    if (t_put(buf, i, t, val(r, off + i, t, op)) != 0)
      NT_RET_FAIL("cannot encode %g as %s", val(r, off + i, t, op), t_dtype_names[t]);
  (void)c;
  return 0;
}

static double expect_red(int n, size_t i, ncclDataType_t t, int op, const double *scal)
{
  double acc = 0;
  for (int r = 0; r < n; r++) {
    double v = val(r, i, t, op);
    if (op >= ncclNumOps)
      v *= scal[r];
    if (r == 0)
      acc = v;
    else if (op == ncclProd)
      acc = t_wrap(acc * v, t);
    else if (op == ncclMax)
      acc = acc > v ? acc : v;
    else if (op == ncclMin)
      acc = acc < v ? acc : v;
    else
      acc = acc + v;
  }
  if (op == ncclAvg)
    acc = t_is_float(t) ? acc / n : (double)((int64_t)acc / n);
  return acc;
}

static int sync_s(struct ctx *c)
{
  T_CUDA(cudaStreamSynchronize(c->s));
  return 0;
}

static int test_reductions(struct ctx *c, ncclDataType_t t)
{
  static const char *opn[] = { "sum", "prod", "max", "min", "avg", "premulsum" };
  double scal[64];
  for (int r = 0; r < c->n; r++)
    scal[r] = r + 1;
  int nops = (t == ncclFloat32 || t == ncclFloat64 || t == ncclInt32 || t == ncclFloat16 || t == ncclBfloat16) ? 6 : 5;
  for (int opi = 0; opi < nops; opi++) {
    ncclRedOp_t op = (ncclRedOp_t)opi;
    if (opi == 5) {
      unsigned char sc[8];
      t_put(sc, 0, t, scal[c->rank]);
      T_NCCL(ncclRedOpCreatePreMulSum(&op, sc, t, ncclScalarHostImmediate, c->comm));
    }
    int big = (opi == 0 && (t == ncclFloat32 || t == ncclInt8 || t == ncclBfloat16));
    size_t count = big ? BIG : 9;
    /* AllReduce, out of place then in place. */
    for (int inplace = 0; inplace < 2; inplace++) {
      if (fill(c, c->a, count, t, opi, c->rank, 0))
        return 1;
      void *dst = inplace ? c->a : c->b;
      T_NCCL(ncclAllReduce(c->a, dst, count, t, op, c->comm, c->s));
      if (sync_s(c))
        return 1;
      for (size_t i = 0; i < count; i++) {
        double got = t_get(dst, i, t), want = expect_red(c->n, i, t, opi, scal);
        NT_RET_CHECK(t_close(got, want, t), "rank %d AllReduce %s %s inplace=%d [%zu]: got %g want %g", c->rank,
                t_dtype_names[t], opn[opi], inplace, i, got, t_wrap(want, t));
      }
    }
    /* Reduce to the last rank. */
    if (fill(c, c->a, count, t, opi, c->rank, 0))
      return 1;
    memset(c->b, 0, count * t_dsize(t));
    T_NCCL(ncclReduce(c->a, c->b, count, t, op, c->n - 1, c->comm, c->s));
    if (sync_s(c))
      return 1;
    if (c->rank == c->n - 1)
      for (size_t i = 0; i < count; i++) {
        double got = t_get(c->b, i, t), want = expect_red(c->n, i, t, opi, scal);
        NT_RET_CHECK(t_close(got, want, t), "Reduce %s %s [%zu]: got %g want %g", t_dtype_names[t], opn[opi], i, got,
                t_wrap(want, t));
      }
    /* ReduceScatter: block d of rank r holds val(r, d*count + i). */
    size_t rc = big ? BIG / (size_t)c->n + 1 : 5;
    if (fill(c, c->a, rc * (size_t)c->n, t, opi, c->rank, 0))
      return 1;
    T_NCCL(ncclReduceScatter(c->a, c->b, rc, t, op, c->comm, c->s));
    if (sync_s(c))
      return 1;
    for (size_t i = 0; i < rc; i++) {
      double got = t_get(c->b, i, t), want = expect_red(c->n, (size_t)c->rank * rc + i, t, opi, scal);
      NT_RET_CHECK(t_close(got, want, t), "rank %d ReduceScatter %s %s [%zu]: got %g want %g", c->rank, t_dtype_names[t],
              opn[opi], i, got, t_wrap(want, t));
    }
    if (opi == 5)
      T_NCCL(ncclRedOpDestroy(op, c->comm));
  }
  return 0;
}

static unsigned char pat(int r, size_t i) { return (unsigned char)(r * 31 + i * 7 + 3); }

static int test_copies(struct ctx *c, ncclDataType_t t)
{
  size_t sz = t_dsize(t), n = (size_t)c->n;
  size_t count = t == ncclFloat64 ? BIG : 13;
  unsigned char *a = c->a, *b = c->b;
  int root = 1 % c->n;
  /* Broadcast */
  for (size_t i = 0; i < count * sz; i++)
    a[i] = pat(c->rank, i);
  memset(b, 0, count * sz);
  T_NCCL(ncclBroadcast(a, b, count, t, root, c->comm, c->s));
  if (sync_s(c))
    return 1;
  for (size_t i = 0; i < count * sz; i++)
    NT_RET_CHECK(b[i] == pat(root, i), "rank %d Broadcast %s byte %zu", c->rank, t_dtype_names[t], i);
  /* Bcast (in place) from 0 */
  for (size_t i = 0; i < count * sz; i++)
    a[i] = pat(c->rank, i);
  T_NCCL(ncclBcast(a, count, t, 0, c->comm, c->s));
  if (sync_s(c))
    return 1;
  for (size_t i = 0; i < count * sz; i++)
    NT_RET_CHECK(a[i] == pat(0, i), "rank %d Bcast %s byte %zu", c->rank, t_dtype_names[t], i);
  /* AllGather, in place: my block already sits at rank*count. */
  memset(b, 0, n * count * sz);
  for (size_t i = 0; i < count * sz; i++)
    b[(size_t)c->rank * count * sz + i] = pat(c->rank, i);
  T_NCCL(ncclAllGather(b + (size_t)c->rank * count * sz, b, count, t, c->comm, c->s));
  if (sync_s(c))
    return 1;
  for (size_t r = 0; r < n; r++)
    for (size_t i = 0; i < count * sz; i++)
      NT_RET_CHECK(b[r * count * sz + i] == pat((int)r, i), "rank %d AllGather %s block %zu byte %zu", c->rank,
              t_dtype_names[t], r, i);
  /* AlltoAll: block d of rank r is pat(r*n+d) */
  for (size_t d = 0; d < n; d++)
    for (size_t i = 0; i < count * sz; i++)
      a[d * count * sz + i] = pat(c->rank * c->n + (int)d, i);
  T_NCCL(ncclAlltoAll(a, b, count, t, c->comm, c->s));
  if (sync_s(c))
    return 1;
  for (size_t r = 0; r < n; r++)
    for (size_t i = 0; i < count * sz; i++)
      NT_RET_CHECK(b[r * count * sz + i] == pat((int)r * c->n + c->rank, i), "rank %d AlltoAll %s", c->rank,
              t_dtype_names[t]);
  /* Gather to 0 */
  for (size_t i = 0; i < count * sz; i++)
    a[i] = pat(c->rank, i);
  memset(b, 0, n * count * sz);
  T_NCCL(ncclGather(a, b, count, t, 0, c->comm, c->s));
  if (sync_s(c))
    return 1;
  if (c->rank == 0)
    for (size_t r = 0; r < n; r++)
      for (size_t i = 0; i < count * sz; i++)
        NT_RET_CHECK(b[r * count * sz + i] == pat((int)r, i), "Gather %s", t_dtype_names[t]);
  /* Scatter from the last rank */
  int sroot = c->n - 1;
  for (size_t d = 0; d < n; d++)
    for (size_t i = 0; i < count * sz; i++)
      a[d * count * sz + i] = pat(c->rank * 5 + (int)d, i);
  memset(b, 0, count * sz);
  T_NCCL(ncclScatter(a, b, count, t, sroot, c->comm, c->s));
  if (sync_s(c))
    return 1;
  for (size_t i = 0; i < count * sz; i++)
    NT_RET_CHECK(b[i] == pat(sroot * 5 + c->rank, i), "rank %d Scatter %s byte %zu", c->rank, t_dtype_names[t], i);
  /* Send/Recv ring plus a swap with the same peer, in one group. */
  int next = (c->rank + 1) % c->n, prev = (c->rank + c->n - 1) % c->n;
  for (size_t i = 0; i < count * sz; i++)
    a[i] = pat(c->rank + 40, i);
  memset(b, 0, 2 * count * sz);
  T_NCCL(ncclGroupStart());
  T_NCCL(ncclSend(a, count, t, next, c->comm, c->s));
  T_NCCL(ncclSend(a, count, t, prev, c->comm, c->s));
  T_NCCL(ncclRecv(b, count, t, prev, c->comm, c->s));
  T_NCCL(ncclRecv(b + count * sz, count, t, next, c->comm, c->s));
  T_NCCL(ncclGroupEnd());
  if (sync_s(c))
    return 1;
  for (size_t i = 0; i < count * sz; i++) {
    NT_RET_CHECK(b[i] == pat(prev + 40, i), "rank %d Recv from prev %s byte %zu", c->rank, t_dtype_names[t], i);
    NT_RET_CHECK(b[count * sz + i] == pat(next + 40, i), "rank %d Recv from next %s", c->rank, t_dtype_names[t]);
  }
  return 0;
}

static int rank_main(int rank, int n, ncclUniqueId id, void *arg)
{
  (void)arg;
  struct ctx c = { .rank = rank, .n = n };
  T_CUDA(cudaSetDevice(rank % 8));
  T_CUDA(cudaStreamCreate(&c.s));
  T_NCCL(ncclCommInitRank(&c.comm, n, id, rank));
  int nr, me, dev;
  T_NCCL(ncclCommCount(c.comm, &nr));
  T_NCCL(ncclCommUserRank(c.comm, &me));
  T_NCCL(ncclCommCuDevice(c.comm, &dev));
  NT_RET_CHECK(nr == n && me == rank && dev == rank % 8, "count/rank/device %d %d %d", nr, me, dev);
  size_t bytes = (size_t)BIG * 8 * (size_t)n + 4096;
  T_CUDA(cudaMalloc(&c.a, bytes));
  T_CUDA(cudaMalloc(&c.b, bytes));
  for (int t = 0; t < ncclNumTypes; t++) {
    if (test_reductions(&c, (ncclDataType_t)t) || test_copies(&c, (ncclDataType_t)t))
      return 1;
  }
  T_NCCL(ncclCommFinalize(c.comm));
  T_NCCL(ncclCommDestroy(c.comm));
  T_CUDA(cudaFree(c.a));
  T_CUDA(cudaFree(c.b));
  T_CUDA(cudaStreamDestroy(c.s));
  return 0;
}

int main(int argc, char **argv)
{
  int n = argc > 1 ? atoi(argv[1]) : 2;
  if (n < 1 || n > 16) {
    fprintf(stderr, "usage: %s NRANKS (1..16)\n", argv[0]);
    return 1;
  }
  double t0 = t_now();
  int rc = t_fork_ranks(n, rank_main, NULL, 120);
  printf("%s: %d ranks, %.2f s\n", rc ? "FAIL" : "ok", n, t_now() - t0);
  return rc;
}

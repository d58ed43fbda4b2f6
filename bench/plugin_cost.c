/* plugin_cost.c -- what the profiler plugin costs per event, beside what
 * the preload costs per call, in one process (docs/performance.md
 * "Profiler plugin").
 *
 * Run with LD_PRELOAD=libnccltrace.so on the no-op NCCL (bench/noop).  The
 * plugin's table (ncclProfiler_v5, exported by the preloaded library) is
 * called as NCCL's proxy thread calls it for one proxy step: startEvent
 * (ProxyStep, parent an open ProxyOp), recordEventState (SendPeerWait with
 * its bytes), stopEvent -- three events, three records.  Beside it, the
 * preload's wrapper (ncclAllReduce) and the no-op's own ncclAllReduce
 * (dlsym on its handle: the untraced call).  Timing mode alternates the
 * three loops REPS times and prints medians:
 *
 *   plugin_cost [--calls N]          "untraced: X", "preload: X", "added: X",
 *                                    "plugin step: X", "plugin event: X", "ratio: X"
 *   plugin_cost --icount WHAT N      WHAT = untraced | preload | plugin: only that
 *                                    loop, N times, with callgrind collecting
 *                                    (bench/icount.sh --plugin)
 *
 * Exit: 0, 1 on failure (the plugin table missing: no preload).
 * Thread-safety / signal-safety: a single-threaded program.
 */
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <valgrind/callgrind.h>

#include "bench/scale/bu.h"
#include "interpose/nccl_profiler.h"

typedef ncclResult_t (*allreduce_fn)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                     cudaStream_t);

static const struct ntp_table_v5 *tab;
static void *ctx, *op;
static allreduce_fn raw;
static ncclComm_t comm;
static float buf[16];
static int step_no;

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void one_step(void) {
  struct ntp_descr_v5 d;
  memset(&d, 0, sizeof d);
  d.type = NTP_PROXY_STEP;
  d.parentObj = op;
  d.proxyStep.step = step_no++;
  void *h = NULL;
  tab->startEvent(ctx, &h, &d);
  union ntp_state_v4 a = {.proxyStep = {.transSize = 65536}};
  tab->recordEventState(h, NTP_STEP_SEND_PEER_WAIT_V4, &a);
  tab->stopEvent(h);
}

static void loop(int what, long n) {
  if (what == 0)
    for (long i = 0; i < n; i++)
      raw(buf, buf, 16, ncclFloat, ncclSum, comm, NULL);
  else if (what == 1)
    for (long i = 0; i < n; i++)
      ncclAllReduce(buf, buf, 16, ncclFloat, ncclSum, comm, NULL);
  else
    for (long i = 0; i < n; i++)
      one_step();
}

static int setup(void) {
  tab = dlsym(RTLD_DEFAULT, "ncclProfiler_v5");
  /* dlmopen, not dlopen: the preload routes a dlopen of libnccl to itself
   * (interpose/dlopen.c), and the raw no-op is what this compares with. */
  void *h = dlmopen(LM_ID_BASE, "libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
  raw = h ? (allreduce_fn)dlsym(h, "ncclAllReduce") : NULL;
  if (!tab || !raw || (void *)raw == dlsym(RTLD_DEFAULT, "ncclAllReduce")) {
    fprintf(stderr, "plugin_cost: run with LD_PRELOAD=libnccltrace.so on the no-op NCCL\n");
    return 1;
  }
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) {
    fprintf(stderr, "plugin_cost: no-op NCCL init failed\n");
    return 1;
  }
  int mask = 0;
  if (tab->init(&ctx, 0x6e7470636f7374ull, &mask, "plugin_cost", 1, 2, 0, NULL) != ncclSuccess || !ctx) {
    fprintf(stderr, "plugin_cost: the plugin's init gave no context\n");
    return 1;
  }
  struct ntp_descr_v5 d;
  memset(&d, 0, sizeof d);
  d.type = NTP_PROXY_OP;
  d.proxyOp.pid = getpid();
  d.proxyOp.peer = 1;
  d.proxyOp.nSteps = 1 << 30;
  d.proxyOp.chunkSize = 65536;
  d.proxyOp.isSend = 1;
  tab->startEvent(ctx, &op, &d);
  if (!op) {
    fprintf(stderr, "plugin_cost: the plugin opened no proxy op\n");
    return 1;
  }
  for (int w = 0; w < 3; w++) /* warm up: symbol binding, caches, the first ring block */
    loop(w, 4096);
  return 0;
}

static void teardown(void) {
  tab->stopEvent(op);
  tab->finalize(ctx);
  ncclCommDestroy(comm);
}

int main(int argc, char **argv) {
  long calls = 1000000;
  int icount = -1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--calls") && i + 1 < argc) {
      calls = atol(argv[++i]);
    } else if (!strcmp(argv[i], "--icount") && i + 2 < argc) {
      const char *w = argv[++i];
      icount = !strcmp(w, "untraced") ? 0 : !strcmp(w, "preload") ? 1 : !strcmp(w, "plugin") ? 2 : -2;
      calls = atol(argv[++i]);
    } else {
      icount = -2;
    }
  }
  if (icount == -2 || calls < 1) {
    fprintf(stderr, "usage: plugin_cost [--calls N] | --icount untraced|preload|plugin N\n");
    return 2;
  }
  if (setup())
    return 1;
  if (icount >= 0) {
    CALLGRIND_TOGGLE_COLLECT;
    loop(icount, calls);
    CALLGRIND_TOGGLE_COLLECT;
    teardown();
    return 0;
  }
  enum { REPS = 15 };
  double per[3][REPS];
  for (int r = 0; r < REPS; r++)
    for (int w = 0; w < 3; w++) {
      double t0 = now_ns();
      loop(w, calls);
      per[w][r] = (now_ns() - t0) / (double)calls;
    }
  teardown();
  double un = bu_median(per[0], REPS), pre = bu_median(per[1], REPS), st = bu_median(per[2], REPS);
  printf("untraced: %.2f ns/call\npreload: %.2f ns/call\nadded: %.2f ns per collective call (preload)\n", un, pre,
         pre - un);
  printf("plugin step: %.2f ns (start, state, stop: 3 events)\nplugin event: %.2f ns\n", st, st / 3);
  printf("ratio: %.2f (plugin event / preload added)\n", pre - un > 0 ? st / 3 / (pre - un) : 0.0);
  return 0;
}

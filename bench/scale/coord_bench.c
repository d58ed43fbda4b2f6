/* coord_bench.c -- fingerprints the real coordinator checks per second on
 * one core, driven over real TCP sockets by simulated ranks that speak the
 * real wire protocol (sim.h), one connection per rank as with real clients.
 *
 *   coord_bench [--ranks N] [--rate R] [--seconds S] [--batch B] [--threads T]
 *
 * Two runs against a coordinator in its own process:
 *  1. capacity: ranks send as fast as the sockets take it (B fingerprints
 *     per frame, default 1: what a client sends at a moderate rate); the
 *     coordinator's CPU time (from /proc) over the fingerprints it took is
 *     its cost, and 1 / cost its capacity per core;
 *  2. the target load: R collectives/s per rank (default 1,000) for S s,
 *     with a mismatch planted; the achieved rate, the coordinator's CPU
 *     share, and the mismatch report latency are printed.
 * Headroom = capacity per core / (N x R).
 * Exit: 0 when it ran, 1 on failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/scale/bu.h"
#include "bench/scale/coordproc.h"
#include "bench/scale/sim.h"

static struct sim_cfg cfg; /* large: agg_names */

int main(int argc, char **argv) {
  int nranks = 1024, threads = 2, batch = 1;
  double rate = 1000, secs = 4;
  for (int i = 1; i < argc; i++) {
    if (i + 1 >= argc)
      goto usage;
    if (!strcmp(argv[i], "--ranks"))
      nranks = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rate"))
      rate = atof(argv[++i]);
    else if (!strcmp(argv[i], "--seconds"))
      secs = atof(argv[++i]);
    else if (!strcmp(argv[i], "--batch"))
      batch = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads"))
      threads = atoi(argv[++i]);
    else
      goto usage;
  }
  if (nranks < 2 || nranks > 8000 || batch < 1 || batch > 1000 || secs <= 0 || rate <= 0)
    goto usage;
  struct ntx_key key;
  ntx_key_derive("nccltrace-bench-secret", &key, NULL, 0);
  char port[16];

  /* 1. capacity */
  struct coordproc cp;
  if (coordproc_start(&cp, &key, (uint32_t)nranks + 64) != 0) {
    fprintf(stderr, "coord_bench: cannot start the coordinator\n");
    return 1;
  }
  snprintf(port, sizeof port, "%d", cp.port);
  memset(&cfg, 0, sizeof cfg);
  cfg.nranks = nranks;
  cfg.threads = threads;
  cfg.tcp_host = "127.0.0.1";
  cfg.tcp_port = port;
  cfg.key = key;
  cfg.rate = 0;
  cfg.duration_s = secs;
  cfg.batch = batch;
  cfg.max_ahead = 256;
  struct sim_result r1;
  double c0 = proc_cpu_s(cp.pid);
  sim_run(&cfg, 0, &r1);
  bu_sleep(0.3); /* the coordinator drains its sockets */
  double c1 = proc_cpu_s(cp.pid);
  coordproc_stop(&cp);
  double cpu1 = c1 - c0;
  double cap = cpu1 > 0 ? (double)r1.fps_sent / cpu1 : 0;
  printf("capacity run: %d ranks connected, %llu fingerprints in %llu frames sent in %.2f s "
         "(%.0f/s achieved by the simulator); coordinator took %llu frames, CPU %.2f s; "
         "stale %llu evicted %llu unregistered %llu (load %.1f)\n",
         r1.connected, (unsigned long long)r1.fps_sent, (unsigned long long)r1.frames_sent, r1.send_s,
         (double)r1.fps_sent / r1.send_s, (unsigned long long)cp.st.frames_in, cpu1,
         (unsigned long long)cp.cst.stale, (unsigned long long)cp.cst.evicted,
         (unsigned long long)cp.cst.unregistered, bu_loadavg());
  printf("coordinator cost: %.2f us per fingerprint (%d per frame) = %.0f fingerprints/s per core\n",
         cpu1 > 0 ? cpu1 / (double)r1.fps_sent * 1e6 : 0, batch, cap);

  /* 2. the target load, with a mismatch */
  if (coordproc_start(&cp, &key, (uint32_t)nranks + 64) != 0) {
    fprintf(stderr, "coord_bench: cannot start the coordinator\n");
    return 1;
  }
  snprintf(port, sizeof port, "%d", cp.port);
  cfg.rate = rate;
  cfg.mm_seq = (uint64_t)(rate * secs / 4); /* reached even when the simulator runs at half the rate */
  if (cfg.mm_seq < 2)
    cfg.mm_seq = 2;
  cfg.mm_rank = nranks / 3;
  struct sim_result r2;
  c0 = proc_cpu_s(cp.pid);
  sim_run(&cfg, 3.0, &r2);
  c1 = proc_cpu_s(cp.pid);
  coordproc_stop(&cp);
  double offered = rate * nranks, achieved = (double)r2.fps_sent / r2.send_s;
  printf("target run: offered %.0f fingerprints/s (%d ranks x %.0f/s), simulator achieved %.0f/s; "
         "coordinator CPU %.2f s over %.2f s (%.0f%% of a core); took %llu frames "
         "(sent %llu); mismatch seen by %d/%d ranks, latency p50 %.1f ms max %.1f ms (load %.1f)\n",
         offered, nranks, rate, achieved, c1 - c0, r2.send_s + r2.wait_s,
         100 * (c1 - c0) / (r2.send_s + r2.wait_s), (unsigned long long)cp.st.frames_in,
         (unsigned long long)r2.frames_sent, r2.mm_seen, nranks, r2.mm_lat_p50 * 1e3, r2.mm_lat_max * 1e3,
         bu_loadavg());
  if (r2.mm_text[0])
    printf("  verdict: %s\n", r2.mm_text);
  char name[160], tgt[160];
  snprintf(name, sizeof name, "coordinator: fingerprints checked per second on one core (%d per frame)", batch);
  snprintf(tgt, sizeof tgt, ">= %d ranks x %.0f/s = %.0f/s", nranks, rate, offered);
  bu_figure(name, tgt, cap >= offered, "%.0f/s = %.2fx headroom (%.2f us each)", cap, cap / offered,
            cpu1 / (double)r1.fps_sent * 1e6);
  snprintf(name, sizeof name, "coordinator at %d ranks x %.0f/s: achieved / offered", nranks, rate);
  bu_figure(name, "(info: the simulator shares the 2 cores)", -1, "%.0f / %.0f per s, coordinator at %.0f%% of a core",
            achieved, offered, 100 * (c1 - c0) / (r2.send_s + r2.wait_s));
  snprintf(name, sizeof name, "coordinator at %d ranks: mismatch report latency (max over ranks)", nranks);
  if (r2.mm_last_send > 0)
    bu_figure(name, "(info)", -1, "p50 %.1f ms, max %.1f ms, seen by %d/%d", r2.mm_lat_p50 * 1e3,
              r2.mm_lat_max * 1e3, r2.mm_seen, nranks);
  else
    bu_figure(name, "(info)", -1, "not measured: some rank never sent seq %llu (simulator behind)",
              (unsigned long long)r2.mm_planted);
  return 0;
usage:
  fprintf(stderr, "usage: coord_bench [--ranks N] [--rate R] [--seconds S] [--batch B] [--threads T]\n");
  return 1;
}

/* agg_bench.c -- 4,096 ranks checked through node-local aggregators (agg.h)
 * against the same ranks connected straight to the coordinator, in one
 * invocation, over real sockets: each simulated rank (sim.h) is one
 * connection speaking the real wire protocol, to the abstract Unix socket of
 * its host's aggregator (a real ntx_agg, one thread each, elected by bind)
 * or over TCP to the coordinator; the root coordinator is the real one, in a
 * process of its own (coordproc.h) so that its CPU time is measured alone.
 *
 *   agg_bench [--ranks N] [--per-host L] [--rate R] [--seconds S]
 *             [--flush-ms F] [--poll-ms P] [--threads T] [--no-direct] [--check]
 *
 * --check (the smoke test): exit 1 unless the planted mismatch reached every
 * rank in both topologies and no entry was refused, dropped or unregistered.
 * Figures: mismatch report latency end to end (from the moment the last
 * rank issued the disagreeing seq to its verdict arriving at every rank),
 * against 100 ms, with aggregators; the root coordinator's CPU per second
 * in both topologies; connections and frames the root handles.
 * Exit: 0 when it ran, 1 on failure.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench/scale/bu.h"
#include "bench/scale/coordproc.h"
#include "bench/scale/sim.h"
#include "interpose/exchange/agg.h"

static struct sim_cfg cfg;

static double self_cpu(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec * 1e-6;
}

struct outcome {
  struct sim_result r;
  double coord_cpu, self_cpu, wall;
  uint64_t coord_frames, coord_conns;
  struct ntx_check_stats cst;
};

static void report(const char *what, int nranks, double rate, const struct outcome *o) {
  double wall = o->r.send_s + o->r.wait_s;
  printf("%s: %d/%d ranks connected in %.1f s; offered %.0f fp/s, achieved %.0f fp/s; root coordinator: "
         "%llu connections, %llu frames, CPU %.2f s over %.2f s (%.0f%% of a core); this process "
         "(simulated ranks%s) CPU %.2f s; mismatch at seq %llu seen by %d/%d, latency p50 %.1f ms max %.1f ms "
         "(load %.1f)\n",
         what, o->r.connected, nranks, o->r.setup_s, rate * nranks, (double)o->r.fps_sent / o->r.send_s,
         (unsigned long long)o->coord_conns, (unsigned long long)o->coord_frames, o->coord_cpu, wall,
         100 * o->coord_cpu / wall, strstr(what, "aggreg") ? " + aggregators" : "", o->self_cpu,
         (unsigned long long)o->r.mm_planted, o->r.mm_seen, nranks, o->r.mm_lat_p50 * 1e3,
         o->r.mm_lat_max * 1e3, bu_loadavg());
  printf("  root checker: mismatches %llu, stale %llu, evicted %llu, unregistered %llu, dup %llu, lost %llu\n",
         (unsigned long long)o->cst.mismatches, (unsigned long long)o->cst.stale,
         (unsigned long long)o->cst.evicted, (unsigned long long)o->cst.unregistered,
         (unsigned long long)o->cst.dup, (unsigned long long)o->cst.lost);
  if (o->r.mm_text[0])
    printf("  verdict: %.160s\n", o->r.mm_text);
}

int main(int argc, char **argv) {
  int nranks = 4096, per_host = 8, threads = 2, direct = 1, check = 0;
  double rate = 100, secs = 4, flush_ms = 5, poll_ms = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--no-direct")) {
      direct = 0;
      continue;
    }
    if (!strcmp(argv[i], "--check")) {
      check = 1;
      continue;
    }
    if (i + 1 >= argc)
      goto usage;
    if (!strcmp(argv[i], "--ranks"))
      nranks = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--per-host"))
      per_host = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rate"))
      rate = atof(argv[++i]);
    else if (!strcmp(argv[i], "--seconds"))
      secs = atof(argv[++i]);
    else if (!strcmp(argv[i], "--poll-ms"))
      poll_ms = atof(argv[++i]);
    else if (!strcmp(argv[i], "--flush-ms"))
      flush_ms = atof(argv[++i]);
    else if (!strcmp(argv[i], "--threads"))
      threads = atoi(argv[++i]);
    else
      goto usage;
  }
  int hosts = per_host > 0 ? (nranks + per_host - 1) / per_host : 0;
  if (nranks < 2 || nranks > 8000 || per_host < 1 || hosts > 1024 || rate <= 0 || secs <= 0)
    goto usage;
  struct ntx_key key;
  ntx_key_derive("nccltrace-bench-secret", &key, NULL, 0);
  /* Both coordinators now, before any thread exists (fork). */
  struct coordproc cpa, cpd;
  if (coordproc_start(&cpa, &key, (uint32_t)hosts + 64) != 0 ||
      (direct && coordproc_start(&cpd, &key, (uint32_t)nranks + 64) != 0)) {
    fprintf(stderr, "agg_bench: cannot start the coordinator\n");
    return 1;
  }
  char port[16];
  snprintf(port, sizeof port, "%d", cpa.port);

  /* 1. through aggregators: one per simulated host, each wins its own election */
  struct ntx_agg **aggs = calloc((size_t)hosts, sizeof *aggs);
  memset(&cfg, 0, sizeof cfg);
  for (int h = 0; h < hosts; h++) {
    char job[64], err[256];
    snprintf(job, sizeof job, "bench-agg-%d-host%d", (int)getpid(), h);
    ntx_agg_name(&key, job, cfg.agg_names[h], sizeof cfg.agg_names[h]);
    struct ntx_agg_cfg ac;
    ntx_agg_default_cfg(&ac);
    ac.name = cfg.agg_names[h];
    ac.up_host = "127.0.0.1";
    ac.up_port = port;
    ac.key = key;
    ac.job = "bench-agg";
    ac.flush_s = flush_ms / 1e3;
    ac.poll_s = poll_ms / 1e3;
    int rc = ntx_agg_listen(&aggs[h], &ac, err, sizeof err);
    if (rc == 0)
      rc = ntx_agg_start(aggs[h]);
    if (rc) {
      fprintf(stderr, "agg_bench: aggregator %d: %s\n", h, err);
      return 1;
    }
    /* a second process of the same host loses the election */
    struct ntx_agg *again = NULL;
    if (h == 0 && ntx_agg_listen(&again, &ac, err, sizeof err) != -EADDRINUSE) {
      fprintf(stderr, "agg_bench: the election did not refuse a second aggregator\n");
      return 1;
    }
  }
  cfg.nranks = nranks;
  cfg.threads = threads;
  cfg.per_host = per_host;
  cfg.key = key;
  cfg.rate = rate;
  cfg.duration_s = secs;
  cfg.batch = 1;
  cfg.mm_seq = 1;
  cfg.mm_rank = nranks / 3;
  struct outcome oa, od;
  memset(&oa, 0, sizeof oa);
  memset(&od, 0, sizeof od);
  bu_sleep(0.3); /* aggregators connect upstream */
  double c0 = proc_cpu_s(cpa.pid), s0 = self_cpu();
  sim_run(&cfg, 3.0, &oa.r);
  oa.coord_cpu = proc_cpu_s(cpa.pid) - c0;
  oa.self_cpu = self_cpu() - s0;
  uint64_t fps_up = 0, frames_up = 0, refused = 0, dropped = 0, upc = 0;
  double v_first = 0, v_last = 0; /* the root's verdict reaching the aggregators */
  for (int h = 0; h < hosts; h++) {
    struct ntx_agg_stats st;
    ntx_agg_get_stats(aggs[h], &st);
    fps_up += st.fps_up;
    frames_up += st.frames_up;
    refused += st.fps_refused;
    dropped += st.fps_dropped;
    upc += st.up_connects;
    if (st.first_mismatch_t && (!v_first || st.first_mismatch_t < v_first))
      v_first = st.first_mismatch_t;
    if (st.first_mismatch_t > v_last)
      v_last = st.first_mismatch_t;
    ntx_agg_stop(aggs[h]);
  }
  free(aggs);
  coordproc_stop(&cpa);
  oa.coord_frames = cpa.st.frames_in;
  oa.coord_conns = cpa.st.accepted;
  oa.cst = cpa.cst;
  char what[128];
  snprintf(what, sizeof what, "through %d aggregators (%d ranks each, flush %.0f ms, poll %.0f ms)", hosts,
           per_host, flush_ms, poll_ms);
  report(what, nranks, rate, &oa);
  printf("  aggregators: %llu upstream connections made; sent %llu fingerprints upstream in %llu frames "
         "(%.1f per frame); refused %llu, dropped %llu; root closed: auth %llu malformed %llu slow %llu dead %llu\n",
         (unsigned long long)upc,
         (unsigned long long)fps_up, (unsigned long long)frames_up,
         frames_up ? (double)fps_up / (double)frames_up : 0, (unsigned long long)refused,
         (unsigned long long)dropped, (unsigned long long)cpa.st.rejected_auth,
         (unsigned long long)cpa.st.rejected_malformed, (unsigned long long)cpa.st.slow_closed,
         (unsigned long long)cpa.st.dead_closed);

  if (v_first && oa.r.mm_last_send > 0)
    printf("  where the time goes: last rank sent seq %llu -> first aggregator has the root's verdict %.1f ms "
           "-> last aggregator has it %.1f ms -> last rank has it %.1f ms\n",
           (unsigned long long)oa.r.mm_planted, (v_first - oa.r.mm_last_send) * 1e3,
           (v_last - oa.r.mm_last_send) * 1e3, oa.r.mm_lat_max * 1e3);

  /* 2. the same ranks straight to the coordinator */
  if (direct) {
    snprintf(port, sizeof port, "%d", cpd.port);
    cfg.per_host = 0;
    cfg.tcp_host = "127.0.0.1";
    cfg.tcp_port = port;
    c0 = proc_cpu_s(cpd.pid);
    s0 = self_cpu();
    sim_run(&cfg, 3.0, &od.r);
    od.coord_cpu = proc_cpu_s(cpd.pid) - c0;
    od.self_cpu = self_cpu() - s0;
    coordproc_stop(&cpd);
    od.coord_frames = cpd.st.frames_in;
    od.coord_conns = cpd.st.accepted;
    od.cst = cpd.cst;
    report("straight to the coordinator", nranks, rate, &od);
  }
  char name[160], tgt[64];
  int all = oa.r.mm_seen == nranks;
  double offered = rate * nranks, ach = (double)oa.r.fps_sent / oa.r.send_s;
  snprintf(name, sizeof name, "aggregators (%d ranks/host): %d ranks x %.0f/s, mismatch report latency (max over ranks)", per_host, nranks, rate);
  snprintf(tgt, sizeof tgt, "< 100 ms, all ranks told");
  bu_figure(name, tgt, all && oa.r.mm_lat_max < 0.1, "max %.1f ms, p50 %.1f ms, %d/%d told", oa.r.mm_lat_max * 1e3,
            oa.r.mm_lat_p50 * 1e3, oa.r.mm_seen, nranks);
  snprintf(name, sizeof name, "aggregators (%d ranks/host): %d ranks x %.0f/s, load achieved", per_host, nranks, rate);
  bu_figure(name, "= offered (all fingerprints sent and checked)", ach >= 0.97 * offered && !dropped,
            "%.0f of %.0f fp/s", ach, offered);
  snprintf(name, sizeof name, "aggregators (%d ranks/host): root coordinator CPU at %d ranks x %.0f/s", per_host, nranks, rate);
  double wa = oa.r.send_s + oa.r.wait_s, wd = od.r.send_s + od.r.wait_s;
  if (direct)
    bu_figure(name, "(info: vs straight connections, same run)", -1,
              "%.1f%% of a core, %llu conns (direct: %.1f%%, %llu conns, latency max %.1f ms)",
              100 * oa.coord_cpu / wa, (unsigned long long)oa.coord_conns, 100 * od.coord_cpu / wd,
              (unsigned long long)od.coord_conns, od.r.mm_lat_max * 1e3);
  else
    bu_figure(name, "(info)", -1, "%.1f%% of a core, %llu conns", 100 * oa.coord_cpu / wa,
              (unsigned long long)oa.coord_conns);
  if (check && (oa.r.mm_seen != nranks || refused || dropped || oa.cst.unregistered || (direct && od.r.mm_seen != nranks))) {
    fprintf(stderr, "agg_bench --check: the planted mismatch did not reach every rank, or entries were lost\n");
    return 1;
  }
  return 0;
usage:
  fprintf(stderr, "usage: agg_bench [--ranks N] [--per-host L] [--rate R] [--seconds S] [--flush-ms F] "
                  "[--poll-ms P] [--threads T] [--no-direct] [--check]\n");
  return 1;
}

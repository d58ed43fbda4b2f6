/* status.c -- `nccltrace status [--rings R] [--watch SECONDS]`: a live table
 * of every traced process on this host, read from the ring files alone (no
 * signal, no ptrace, no socket: looking never disturbs a hung job).  Per
 * job: the ranks it should have that left no ring here, and the verdict
 * the analyze engine gives on these rings now; per process its
 * communicators and the operation each has in flight.
 *
 * With --job it asks the job's coordinator instead, for the whole job
 * across hosts (status_job.c).
 *
 * Thread-safety: single-threaded command.  Not signal-safe.
 * Exit status: 0; 2 when the ring directory cannot be read, or --rings
 * names one that does not exist (and no ring is in the tracer's other
 * places).  --job: status_job.c's.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "tools/analyze/analyze.h"
#include "tools/ntt.h"

/* Age of the oldest operation of comm c still in flight, 0 when none, and
 * that operation in *op.  A collective is in flight while its seq is above
 * last_completed; a send or recv until its completion is observed.  Ops
 * whose completion cannot be tracked (no driver, graph capture) or that
 * failed to enqueue are not. */
static uint64_t inflight_age_ns(const struct ntt_image *img, const struct ntr_comm_state *c, uint64_t now,
                                const struct ntr_record **op) {
  uint64_t oldest = 0;
  *op = NULL;
  for (uint64_t i = 0; i < img->nrecs; i++) {
    const struct ntr_record *r = &img->recs[i];
    if (r->comm_id != c->comm_id || r->tsc_done || (r->flags & (NTR_REC_COMPLETED | NTR_REC_NO_TRACKING |
                                                                  NTR_REC_CAPTURED | NTR_REC_STRICT_REFUSED)))
      continue;
    if (r->result > 0)
      continue;
    if (ntt_kind_is_collective(r->kind) ? r->seq <= c->last_completed : !ntt_kind_is_p2p(r->kind))
      continue;
    if (!oldest || r->tsc < oldest) {
      oldest = r->tsc;
      *op = r;
    }
  }
  if (!oldest)
    return 0;
  uint64_t t = ntt_image_ns(img, oldest);
  return now > t ? now - t : 1;
}

static void fmt_secs(uint64_t ns, char *buf, size_t len) {
  if (!ns)
    snprintf(buf, len, "-");
  else
    snprintf(buf, len, "%.3f s", (double)ns / 1e9);
}

static void show_image(const struct ntt_image *img) {
  const struct ntr_ring_header *h = &img->hdr;
  uint64_t now = ntt_image_now_ns(img);
  char state[96], sig[32];
  if (img->pid_alive)
    snprintf(state, sizeof state, "running");
  else if (h->proc_state == NTR_PROC_EXITED)
    snprintf(state, sizeof state, "gone (exited %d; nccltrace collect)", h->exit_code);
  else if (h->proc_state == NTR_PROC_SIGNALED)
    snprintf(state, sizeof state, "gone (%s; nccltrace collect)", ntt_signal_name(h->signo, sig, sizeof sig));
  else if (h->proc_state == NTR_PROC_EXEC)
    snprintf(state, sizeof state, "gone (exec'd another program; nccltrace collect)");
  else
    snprintf(state, sizeof state, "gone (no exit recorded; nccltrace collect)");
  struct ntt_ident id;
  ntt_ident_of(h, &id);
  char rl[24];
  printf("pid %d  %s  host %s  job %s  exe %s  %s", h->pid, ntt_rank_label(h->rank, rl, sizeof rl), id.host,
         id.job[0] ? id.job : "-", id.exe, state);
  if (img->lost || img->torn || h->dropped)
    printf("  [%llu lost, %llu torn, %llu dropped]", (unsigned long long)img->lost, (unsigned long long)img->torn,
           (unsigned long long)h->dropped);
  printf("\n");
  if (!img->ncomms) {
    printf("  (no communicator yet)\n");
    return;
  }
  printf("  %-8s  %-9s  %-11s  %8s  %9s  %-10s  %-28s  %-12s  %s\n", "COMM", "RANK", "STATE", "ENQUEUED", "COMPLETED",
         "IN-FLIGHT", "BLOCKED", "ASYNC ERROR", "LATE (median after the first; last at)");
  for (uint32_t i = 0; i < img->ncomms; i++) {
    const struct ntr_comm_state *c = &img->comms[i];
    char rk[24], age[32], blocked[64] = "-";
    if (c->rank < 0)
      snprintf(rk, sizeof rk, "?/%d", c->nranks);
    else
      snprintf(rk, sizeof rk, "%d/%d", c->rank, c->nranks);
    const struct ntr_record *op;
    fmt_secs(inflight_age_ns(img, c, now, &op), age, sizeof age);
    if (c->blocked_since) {
      uint64_t since = ntt_image_ns(img, c->blocked_since);
      char s[32];
      fmt_secs(now > since ? now - since : 1, s, sizeof s);
      snprintf(blocked, sizeof blocked, "%s for %s", ntt_kind_name(c->blocked_kind), s);
    }
    /* CUDA graph replays holding this comm's captured calls, live:
     * launched and completed (interpose/graph.c). */
    char reps[64] = "";
    if (c->replays)
      snprintf(reps, sizeof reps, "  graph replays %llu (%llu done)", (unsigned long long)c->replays,
               (unsigned long long)c->replays_done);
    /* the coordinator's measure of this rank (check async/strict), "-" without one */
    char late[64] = "-";
    if (c->late_window)
      snprintf(late, sizeof late, "%.1f ms; last at %u/%u", c->late_med_us / 1000.0, c->late_last, c->late_window);
    printf("  %08llx  %-9s  %-11s  %8llu  %9llu  %-10s  %-28s  %-12s  %s%s\n", (unsigned long long)(c->comm_id >> 32), rk,
           ntt_lifecycle_name(c->lifecycle), (unsigned long long)c->last_enqueued,
           (unsigned long long)c->last_completed, age, blocked, ntt_result_name(c->async_error), late, reps);
  }
  /* What each communicator waits on, named: the oldest op in flight. */
  for (uint32_t i = 0; i < img->ncomms; i++) {
    const struct ntr_comm_state *c = &img->comms[i];
    const struct ntr_record *op;
    uint64_t age = inflight_age_ns(img, c, now, &op);
    if (!op)
      continue;
    char what[160], s[32];
    ntt_fmt_op(op, what, sizeof what);
    fmt_secs(age, s, sizeof s);
    char rk[16];
    if (c->rank < 0)
      snprintf(rk, sizeof rk, "?");
    else
      snprintf(rk, sizeof rk, "%d", c->rank);
    printf("  in flight: comm %08llx rank %s: %s #%llu for %s\n", (unsigned long long)(c->comm_id >> 32), rk,
           what, (unsigned long long)op->seq, s);
  }
}

static const char late_legend[] =
    "LATE: from the coordinator (--check async or strict): the rank's median arrival after the earliest rank\n"
    "      over the last N collectives of the comm (NCCLTRACE_STRAGGLER_WINDOW), and in how many of those N it\n"
    "      arrived last; \"-\" without a coordinator or before its first report.\n";

/* The ranks job ought to have that left no ring here: of the launcher's
 * world (LOCAL_WORLD_SIZE when it spans hosts), else of its largest
 * communicator. */
static void job_line(struct ntt_image *imgs, const int *of, int n, const char *job) {
  int world = 0, local = 0, all_local = 1, nranks = 0;
  uint64_t big = 0;
  for (int i = 0; i < n; i++) {
    const struct ntr_ring_header *h = &imgs[of[i]].hdr;
    if (h->world_size > world)
      world = h->world_size;
    if (h->local_world_size > local)
      local = h->local_world_size;
    all_local &= h->local_rank >= 0;
    for (uint32_t k = 0; k < imgs[of[i]].ncomms; k++)
      if (imgs[of[i]].comms[k].nranks > nranks) {
        nranks = imgs[of[i]].comms[k].nranks;
        big = imgs[of[i]].comms[k].comm_id;
      }
  }
  const char *what = "rank";
  int expect = world;
  if (world > 0 && local > 0 && world > local && all_local) {
    what = "local rank"; /* the other hosts' ranks are never here */
    expect = local;
  } else if (world <= 0) {
    expect = nranks;
  }
  if (expect > 1 << 20)
    expect = 1 << 20;
  unsigned char *have = calloc((size_t)(expect > 0 ? expect : 1), 1);
  if (!have)
    return;
  for (int i = 0; i < n; i++) {
    const struct ntt_image *img = &imgs[of[i]];
    int r = what[0] == 'l' ? img->hdr.local_rank : world > 0 ? img->hdr.rank : -1;
    if (world <= 0) {
      int held[64], nh = ntt_held_ranks(img, big, held, 64);
      for (int k = 0; k < nh; k++)
        if (held[k] < expect)
          have[held[k]] = 1;
    } else if (r >= 0 && r < expect) {
      have[r] = 1;
    }
  }
  int *miss = malloc((size_t)(expect > 0 ? expect : 1) * sizeof *miss), nmiss = 0;
  for (int r = 0; miss && r < expect; r++)
    if (!have[r])
      miss[nmiss++] = r;
  char e[128], list[256];
  printf("job %s: %d process%s here", ntt_esc(job[0] ? job : "-", e, sizeof e), n, n == 1 ? "" : "es");
  if (expect > 0)
    printf(" of %d %s%s (%s)", expect, what, expect == 1 ? "" : "s",
           world <= 0 ? "the size of its largest communicator"
           : what[0] == 'l' ? "LOCAL_WORLD_SIZE; the job spans hosts" : "WORLD_SIZE");
  if (nmiss) {
    ntt_rank_ranges(miss, nmiss, list, sizeof list);
    printf("; %s%s %s missing: no ring here (not started, on another host, or ended cleanly)", what,
           nmiss == 1 ? "" : "s", list);
  }
  printf("\n");
  free(miss);
  free(have);
}

/* The verdict the analyze engine gives on these rings now, one line. */
static void live_verdict(char **paths, const int *of, int n, const char *job) {
  char **v = malloc((size_t)(n ? n : 1) * sizeof *v);
  if (!v)
    return;
  for (int i = 0; i < n; i++)
    v[i] = paths[of[i]];
  struct nta_job j;
  memset(&j, 0, sizeof j);
  char e[1100];
  if (nta_load(&j, v, n, job) == 0 && nta_analyze(&j) == 0)
    printf("  live verdict (this host's rings, as analyze reads them now): %s\n",
           ntt_esc(j.v.summary, e, sizeof e));
  else
    printf("  live verdict: none (the rings could not be analyzed; nccltrace analyze on them says why)\n");
  nta_job_free(&j);
  free(v);
}

/* @return 0, or 2 when the directory cannot be listed (or, explicit, does
 * not exist). */
static int show_all(const char *rings, int named, int explicit) {
  char **list = NULL, why[512], shown[4096];
  ntt_esc(rings, shown, sizeof shown);
  int n = ntt_list_rings(rings, named, &list, why, sizeof why);
  if (n < 0) {
    if (errno == ENOENT && !explicit) {
      printf("no traced process: %s does not exist\n", shown);
      return 0;
    }
    if (errno == ENOENT) {
      char places[12288];
      ntt_ring_places(rings, places, sizeof places);
      fprintf(stderr,
              "nccltrace: status: --rings %s: no such directory, and no ring in %s (name the directory the "
              "job's NCCLTRACE_RING_DIR or run --ring-dir gave)\n",
              shown, places);
      return NTT_EXIT_INPUT;
    }
    fprintf(stderr, "nccltrace: %s: %s\n", shown, why);
    return NTT_EXIT_INPUT;
  }
  if (n == 0)
    printf("no traced process: no ring files in %s\n", shown);
  struct ntt_image *imgs = calloc((size_t)(n ? n : 1), sizeof *imgs);
  int *ok = calloc((size_t)(n ? n : 1), sizeof *ok), *of = calloc((size_t)(n ? n : 1), sizeof *of);
  struct ntt_jobs jobs = {0};
  int rc = 0, tables = 0;
  if (!imgs || !ok || !of)
    rc = NTT_EXIT_FAIL;
  for (int i = 0; !rc && i < n; i++) {
    char err[512];
    if (ntt_image_load(list[i], 0, &imgs[i], err, sizeof err)) {
      /* A ring that vanished meanwhile is a process that exited cleanly. */
      if (access(list[i], F_OK) == 0) {
        char e2[sizeof err];
        printf("%s: unreadable: %s\n", ntt_esc(list[i], shown, sizeof shown), ntt_esc(err, e2, sizeof e2));
      }
      continue;
    }
    ok[i] = 1;
    char id[64];
    snprintf(id, sizeof id, "%.*s", 63, imgs[i].hdr.job_id);
    if (ntt_jobs_add(&jobs, id, ntt_image_latest_ns(&imgs[i])) < 0)
      rc = NTT_EXIT_FAIL;
  }
  /* Job by job, in order of first appearance. */
  for (int k = 0; !rc && k < jobs.n; k++) {
    int m = 0;
    for (int i = 0; i < n; i++) {
      char id[64];
      if (!ok[i])
        continue;
      snprintf(id, sizeof id, "%.*s", 63, imgs[i].hdr.job_id);
      if (strcmp(id, jobs.id[k]) == 0)
        of[m++] = i;
    }
    job_line(imgs, of, m, jobs.id[k]);
    live_verdict(list, of, m, jobs.id[k]);
    for (int i = 0; i < m; i++) {
      show_image(&imgs[of[i]]);
      tables += imgs[of[i]].ncomms > 0;
    }
  }
  if (tables)
    fputs(late_legend, stdout);
  for (int i = 0; i < n; i++)
    if (ok && ok[i])
      ntt_image_free(&imgs[i]);
  free(imgs);
  free(ok);
  free(of);
  ntt_jobs_free(&jobs);
  ntt_paths_free(list, n);
  return rc;
}

int ntt_status_main(int argc, char **argv) {
  static const struct option opts[] = {
      {"rings", required_argument, NULL, 'r'}, {"watch", required_argument, NULL, 'w'}, {"job", no_argument, NULL, 'j'},
      {"coord", required_argument, NULL, 'c'}, {"json", no_argument, NULL, 'J'}, {"help", no_argument, NULL, 'h'}, {0}};
  static const char usage[] = "usage: nccltrace status [--rings R] [--watch SECONDS]\n"
                              "       nccltrace status --job [--coord HOST:PORT] [--json] [--watch SECONDS]\n";
  char rings[4096];
  double watch = 0;
  int named = ntt_default_ring_dir(rings, sizeof rings), explicit = 0, job = 0, json = 0;
  const char *coord = NULL;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "r:w:h", opts, NULL)) != -1) {
    switch (c) {
    case 'r': snprintf(rings, sizeof rings, "%s", optarg); named = explicit = 1; break;
    case 'j': job = 1; break;
    case 'c': coord = optarg; break;
    case 'J': json = 1; break;
    case 'w': {
      char *end;
      watch = strtod(optarg, &end);
      if (*end || !(watch >= 0.1 && watch <= 86400)) {
        fprintf(stderr, "nccltrace: status: --watch wants seconds between 0.1 and 86400, not '%s'\n", optarg);
        return NTT_EXIT_INPUT;
      }
      break;
    }
    case 'h': ntt_usage_cmd(stdout, "status"); return NTT_EXIT_OK;
    default: fputs(usage, stderr); return NTT_EXIT_INPUT;
    }
  }
  if (optind < argc) {
    fputs(usage, stderr);
    return NTT_EXIT_INPUT;
  }
  if (!job && (coord || json)) {
    fprintf(stderr, "nccltrace: status: %s goes with --job (the coordinator's view of the whole job)\n",
            coord ? "--coord" : "--json");
    return NTT_EXIT_INPUT;
  }
  if (job && watch > 0 && watch < 0.5) {
    fprintf(stderr, "nccltrace: status: --job --watch wants 0.5 s or more (the coordinator answers 2 queries a second)\n");
    return NTT_EXIT_INPUT;
  }
  if (job && explicit) {
    fprintf(stderr, "nccltrace: status: --rings reads this host's rings; --job asks the coordinator: one or the other\n");
    return NTT_EXIT_INPUT;
  }
  if (watch <= 0)
    return job ? ntt_status_job(coord, json) : show_all(rings, named, explicit);
  int tty = isatty(STDOUT_FILENO);
  for (;;) {
    char tb[48];
    if (tty)
      fputs("\033[H\033[2J", stdout);
    ntt_fmt_time(ntt_wall_now_ns(), tb, sizeof tb);
    char shown[4096];
    printf("nccltrace status  %s  (%s, every %g s; Ctrl-C to stop)\n", tb,
           job ? "the job's coordinator" : ntt_esc(rings, shown, sizeof shown), watch);
    int rc = job ? ntt_status_job(coord, json) : show_all(rings, named, explicit);
    if (fflush(stdout) != 0 || rc)
      return rc ? rc : NTT_EXIT_FAIL;
    struct timespec ts = {(time_t)watch, (long)((watch - (double)(time_t)watch) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
      ;
  }
}

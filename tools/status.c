/* status.c -- `nccltrace status [--rings R] [--watch SECONDS]`: a live table
 * of every traced process on this host, read from the ring files alone (no
 * signal, no ptrace, no socket: looking never disturbs a hung job).
 *
 * Thread-safety: single-threaded command.  Not signal-safe.
 * Exit status: 0; 2 when the ring directory cannot be read.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "tools/ntt.h"

/* Age of the oldest operation of comm c still in flight, 0 when none.  A
 * collective is in flight while its seq is above last_completed; a send or
 * recv until its completion is observed.  Ops whose completion cannot be
 * tracked (no driver, graph capture) or that failed to enqueue are not. */
static uint64_t inflight_age_ns(const struct ntt_image *img, const struct ntr_comm_state *c, uint64_t now) {
  uint64_t oldest = 0;
  for (uint64_t i = 0; i < img->nrecs; i++) {
    const struct ntr_record *r = &img->recs[i];
    if (r->comm_id != c->comm_id || r->tsc_done || (r->flags & (NTR_REC_COMPLETED | NTR_REC_NO_TRACKING |
                                                                  NTR_REC_CAPTURED | NTR_REC_STRICT_REFUSED)))
      continue;
    if (r->result > 0)
      continue;
    if (ntt_kind_is_collective(r->kind) ? r->seq <= c->last_completed : !ntt_kind_is_p2p(r->kind))
      continue;
    if (!oldest || r->tsc < oldest)
      oldest = r->tsc;
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
    fmt_secs(inflight_age_ns(img, c, now), age, sizeof age);
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
}

/* @return 0, or 2 when the directory cannot be listed. */
static int show_all(const char *rings, int named) {
  char **list = NULL, why[512], shown[4096];
  ntt_esc(rings, shown, sizeof shown);
  int n = ntt_list_rings(rings, named, &list, why, sizeof why);
  if (n < 0) {
    if (errno == ENOENT) {
      printf("no traced process: %s does not exist\n", shown);
      return 0;
    }
    fprintf(stderr, "nccltrace: %s: %s\n", shown, why);
    return NTT_EXIT_INPUT;
  }
  if (n == 0)
    printf("no traced process: no ring files in %s\n", shown);
  for (int i = 0; i < n; i++) {
    struct ntt_image img;
    char err[512];
    if (ntt_image_load(list[i], 0, &img, err, sizeof err)) {
      /* A ring that vanished meanwhile is a process that exited cleanly. */
      if (access(list[i], F_OK) == 0) {
        char e2[sizeof err];
        printf("%s: unreadable: %s\n", ntt_esc(list[i], shown, sizeof shown), ntt_esc(err, e2, sizeof e2));
      }
      continue;
    }
    show_image(&img);
    ntt_image_free(&img);
  }
  ntt_paths_free(list, n);
  return 0;
}

int ntt_status_main(int argc, char **argv) {
  static const struct option opts[] = {
      {"rings", required_argument, NULL, 'r'}, {"watch", required_argument, NULL, 'w'}, {"help", no_argument, NULL, 'h'}, {0}};
  char rings[4096];
  double watch = 0;
  int named = ntt_default_ring_dir(rings, sizeof rings);
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "r:w:h", opts, NULL)) != -1) {
    switch (c) {
    case 'r': snprintf(rings, sizeof rings, "%s", optarg); named = 1; break;
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
    default: fprintf(stderr, "usage: nccltrace status [--rings R] [--watch SECONDS]\n"); return NTT_EXIT_INPUT;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "usage: nccltrace status [--rings R] [--watch SECONDS]\n");
    return NTT_EXIT_INPUT;
  }
  if (watch <= 0)
    return show_all(rings, named);
  int tty = isatty(STDOUT_FILENO);
  for (;;) {
    char tb[48];
    if (tty)
      fputs("\033[H\033[2J", stdout);
    ntt_fmt_time(ntt_wall_now_ns(), tb, sizeof tb);
    char shown[4096];
    printf("nccltrace status  %s  (%s, every %g s; Ctrl-C to stop)\n", tb, ntt_esc(rings, shown, sizeof shown),
           watch);
    int rc = show_all(rings, named);
    if (fflush(stdout) != 0 || rc)
      return rc ? rc : NTT_EXIT_FAIL;
    struct timespec ts = {(time_t)watch, (long)((watch - (double)(time_t)watch) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
      ;
  }
}

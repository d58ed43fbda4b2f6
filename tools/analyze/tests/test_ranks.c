/* test_ranks.c -- one process, many ranks (#18): a process that holds
 * several comm ranks (ncclCommInitAll, a thread per device, JAX) is named
 * by the ranks it holds, and a fault in it names comm ranks, never "rank
 * -1"; and the exit statuses `nccltrace run` records (runexit.c): used for
 * a rank without an exit record, "no evidence" for a command that left
 * nothing, and parsed as the hostile input they are.
 * Thread-safety: single-threaded test.  Not signal-safe.
 */
#include "tools/analyze/tests/builder.h"
#include "recorder/format.h"

#define W 0x1111222233334444ull

static void run(struct nta_job *job, const char *name) {
  if (nta_analyze(job) != 0) {
    fprintf(stderr, "%s: analysis failed\n", name);
    nt_failures++;
  }
  if (getenv("NTA_TEST_VERBOSE")) {
    printf("=== %s\n", name);
    nta_report_text(job, stdout);
  }
}

/* The text report and the JSON, as strings (free them). */
static char *text_of(const struct nta_job *job) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  nta_report_text(job, f);
  fclose(f);
  return buf;
}

static char *json_of(const struct nta_job *job) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  nta_report_json(job, f);
  fclose(f);
  return buf;
}

/* One process of pid holding comm ranks lo..hi of an n-rank comm W (no
 * launcher rank: ncclCommInitAll in a plain program). */
static struct ntt_image *multi_proc(struct nta_job *job, int pid, int lo, int hi, int n) {
  struct ntt_image *img = tb_proc(job, -1, -1, pid);
  for (int r = lo; r <= hi; r++)
    tb_comm(img, W, r, n);
  return img;
}

/* An AllReduce of comm rank r of that process (done_ms < 0: pending). */
static void mr_ar(struct ntt_image *img, int r, uint64_t count, double t_ms, double done_ms) {
  struct ntr_comm_state *cs = NULL;
  for (uint32_t i = 0; i < img->ncomms; i++)
    if (img->comms[i].comm_id == W && img->comms[i].rank == r)
      cs = &img->comms[i];
  struct ntr_record *x = tb_rec(img, NTR_KIND_ALLREDUCE, NTR_PHASE_CALL, W, t_ms);
  x->rank = r;
  x->nranks = cs->nranks;
  x->seq = ++cs->coll_seq;
  cs->last_enqueued = x->seq;
  x->count = count;
  x->dtype = 7;
  x->redop = 0;
  if (done_ms >= 0) {
    x->flags |= NTR_REC_COMPLETED;
    x->tsc_done = tb_tsc(img, done_ms);
    cs->last_completed = x->seq;
  }
}

/* Two healthy AllReduces on every rank of the process, then a third
 * pending (counts: count3[r], or 1024). */
static void mr_steps(struct ntt_image *img, int lo, int hi, const uint64_t *count3) {
  for (int s = 0; s < 2; s++)
    for (int r = lo; r <= hi; r++)
      mr_ar(img, r, 1024, 10.0 * s + 0.01 * r, 10.0 * s + 1);
  for (int r = lo; r <= hi; r++)
    mr_ar(img, r, count3 ? count3[r] : 1024, 20 + 0.01 * r, -1);
}

/* The process of ranks 0-3 is SIGKILLed: all four comm ranks are named,
 * with its pid, and no "rank -1". */
static void t_multirank_killed(void) {
  struct nta_job job;
  tb_job(&job);
  struct ntt_image *img = multi_proc(&job, 500, 0, 3, 4);
  mr_steps(img, 0, 3, NULL);
  tb_vanish(img);
  run(&job, "multirank_killed");
  NT_CHECK(job.v.cls == NTA_RANK_KILLED, "got %s: %s", tb_cls(&job), job.v.summary);
  NT_CHECK(job.v.nranks == 4 && tb_has_rank(&job.v, 0) && tb_has_rank(&job.v, 3), "ranks: %d", job.v.nranks);
  NT_CHECK(strstr(job.v.summary, "pid 500 on node0 (holds ranks 0-3 of comm 11112222)"), "summary: %s",
           job.v.summary);
  char *t = text_of(&job), *j = json_of(&job);
  NT_CHECK(!strstr(t, "rank -1") && !strstr(j, "rank -1"), "rank -1 in the report:\n%s", t);
  NT_CHECK(strstr(t, "one process: pid 500 on node0 holds ranks 0-3"), "table note:\n%s", t);
  NT_CHECK(strstr(j, "\"comm_ranks\"") && strstr(j, "\"label\": \"pid 500 on node0 (holds ranks 0-3"), "json:\n%s", j);
  free(t);
  free(j);
  nta_job_free(&job);
}

/* Two processes of two ranks each (JAX on two hosts): the second is
 * killed; its ranks 2 and 3 are named, not the first process's. */
static void t_two_procs(void) {
  struct nta_job job;
  tb_job(&job);
  struct ntt_image *a = multi_proc(&job, 600, 0, 1, 4);
  struct ntt_image *b = multi_proc(&job, 601, 2, 3, 4);
  snprintf(b->hdr.host, sizeof b->hdr.host, "node1");
  mr_steps(a, 0, 1, NULL);
  mr_steps(b, 2, 3, NULL);
  tb_timeout(a, W, 3, 1030);
  tb_signal(a, SIGTERM, 1300);
  tb_vanish(b);
  run(&job, "two_procs");
  NT_CHECK(job.v.cls == NTA_RANK_KILLED, "got %s: %s", tb_cls(&job), job.v.summary);
  NT_CHECK(job.v.nranks == 2 && tb_has_rank(&job.v, 2) && tb_has_rank(&job.v, 3), "ranks: %d", job.v.nranks);
  NT_CHECK(strstr(job.v.summary, "pid 601 on node1 (holds ranks 2-3"), "summary: %s", job.v.summary);
  char *t = text_of(&job);
  NT_CHECK(strstr(t, "pid 600 on node0 holds ranks 0-1") && strstr(t, "pid 601 on node1 holds ranks 2-3"),
           "table notes:\n%s", t);
  free(t);
  nta_job_free(&job);
}

/* In one process of four ranks, rank 2's AllReduce has half the count:
 * rank 2 is named as a comm rank, and as one of that process's ranks. */
static void t_multirank_mismatch(void) {
  struct nta_job job;
  tb_job(&job);
  struct ntt_image *img = multi_proc(&job, 700, 0, 3, 4);
  uint64_t c3[4] = {1024, 1024, 512, 1024};
  mr_steps(img, 0, 3, c3);
  tb_timeout(img, W, 3, 1020);
  run(&job, "multirank_mismatch");
  NT_CHECK(job.v.cls == NTA_COLL_MISMATCH, "got %s: %s", tb_cls(&job), job.v.summary);
  NT_CHECK(job.v.nranks == 1 && job.v.ranks[0] == 2 && !strcmp(job.v.field, "count"), "ranks %d field %s",
           job.v.nranks, job.v.field);
  NT_CHECK(strstr(job.v.summary, "[rank 2 is one of ranks 0-3 of comm 11112222 in pid 700 on node0]"), "summary: %s",
           job.v.summary);
  nta_job_free(&job);
}

static struct nta_runexit *add_runexit(struct nta_job *job, const char *host, int pid, int rank, int signaled,
                                       int code, double start_ms, double end_ms) {
  job->runexits = realloc(job->runexits, (size_t)(job->nrunexits + 1) * sizeof(*job->runexits));
  struct nta_runexit *r = &job->runexits[job->nrunexits++];
  memset(r, 0, sizeof(*r));
  snprintf(r->host, sizeof r->host, "%s", host);
  snprintf(r->exe, sizeof r->exe, "prog");
  r->pid = pid;
  r->ppid = 1;
  r->rank = rank;
  r->signaled = signaled;
  r->code = code;
  r->start_ns = (uint64_t)((int64_t)TB_BASE_NS + (int64_t)(start_ms * 1e6));
  r->end_ns = (uint64_t)((int64_t)TB_BASE_NS + (int64_t)(end_ms * 1e6));
  return r;
}

static struct ntt_image *world(struct nta_job *job, int r, int n) {
  struct ntt_image *img = tb_proc(job, r, n, 1000 + r);
  tb_comm(img, W, r, n);
  return img;
}

/* Rank 1 ends as the dynamic linker ends a process (exit 127, no exit
 * record); nccltrace run saw the code: the verdict says it, with advice. */
static void t_run_127(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 3; r++) {
    struct ntt_image *img = world(&job, r, 3);
    tb_steps(img, W, 2, 0);
    if (r == 1) {
      tb_vanish(img);
    } else {
      tb_ar(img, W, 1024, 20, -1);
      tb_timeout(img, W, 3, 1020);
      tb_signal(img, SIGTERM, 1300);
    }
  }
  add_runexit(&job, "node0", 1001, 1, 0, 127, -5, 25);
  add_runexit(&job, "node0", 1000, 0, 1, SIGTERM, -5, 1301); /* recorded its own signal: ignored */
  run(&job, "run_127");
  NT_CHECK(job.v.cls == NTA_RANK_EXIT && job.v.has_exit && job.v.exit_code == 127, "got %s (%d): %s", tb_cls(&job),
           job.v.exit_code, job.v.summary);
  NT_CHECK(job.v.nranks == 1 && job.v.ranks[0] == 1, "ranks");
  NT_CHECK(strstr(job.v.summary, "exited with code 127 without an exit record") &&
               strstr(job.v.summary, "dynamic linker"), "summary: %s", job.v.summary);
  NT_CHECK(strstr(job.v.next, "symbol lookup error"), "next: %s", job.v.next);
  char *j = json_of(&job);
  NT_CHECK(strstr(j, "\"run_status\": {\n   \"exit_code\": 127") || strstr(j, "\"exit_code\": 127"), "json:\n%s", j);
  free(j);
  nta_job_free(&job);
}

/* Rank 2 left no ring at all (it died at load); nccltrace run saw it exit
 * 127.  It is "no evidence" with its code, never "rank -1". */
static void t_run_no_ring(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 2; r++) {
    struct ntt_image *img = world(&job, r, 3);
    struct ntr_record *x = tb_rec(img, NTR_KIND_COMM_INIT_RANK, NTR_PHASE_ENTER, W, 10);
    x->nranks = 3;
    img->comms[0].lifecycle = NTR_COMM_INIT;
    img->comms[0].blocked_since = x->tsc;
    img->comms[0].blocked_kind = NTR_KIND_COMM_INIT_RANK;
    tb_signal(img, SIGTERM, 3000);
  }
  add_runexit(&job, "node0", 1002, 2, 0, 127, 0, 3);
  add_runexit(&job, "node0", 1002, 2, 0, 1, -9000000, -8999000); /* an earlier run's: not this one's */
  run(&job, "run_no_ring");
  NT_CHECK(job.v.cls == NTA_RANK_EXIT && job.v.exit_code == 127, "got %s: %s", tb_cls(&job), job.v.summary);
  NT_CHECK(job.v.nranks == 1 && job.v.ranks[0] == 2, "ranks %d", job.v.nranks);
  NT_CHECK(strstr(job.v.summary, "rank 2 (pid 1002 on node0, prog)") &&
               strstr(job.v.summary, "none of its NCCL calls is known"),
           "summary: %s", job.v.summary);
  int nev = 0;
  for (int i = 0; i < job.nev; i++)
    nev += !strcmp(job.ev[i].kind, "no_evidence") && strstr(job.ev[i].text, "nccltrace run") != NULL;
  NT_CHECK(nev == 1, "%d run no_evidence events (the earlier run's counted?)", nev);
  char *t = text_of(&job);
  NT_CHECK(!strstr(t, "rank -1"), "rank -1 in:\n%s", t);
  free(t);
  nta_job_free(&job);

  /* The same without a launcher rank: named by its pid, no rank at all. */
  tb_job(&job);
  add_runexit(&job, "node0", 1003, -1, 0, 127, 0, 3);
  run(&job, "run_no_ring_alone");
  NT_CHECK(job.v.cls == NTA_RANK_EXIT && job.v.nranks == 0 && strstr(job.v.summary, "pid 1003 on node0 (prog)"),
           "got %s (%d ranks): %s", tb_cls(&job), job.v.nranks, job.v.summary);
  t = text_of(&job);
  NT_CHECK(!strstr(t, "rank -1"), "rank -1 in:\n%s", t);
  free(t);
  nta_job_free(&job);
}

/* A rank vanished; its parent was the command nccltrace run started (a
 * launcher): the launcher's status is said, as a launcher's. */
static void t_run_launcher(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 2; r++) {
    struct ntt_image *img = world(&job, r, 2);
    img->hdr.ppid = 4242;
    tb_steps(img, W, 2, 0);
    if (r == 1)
      tb_vanish(img);
    else {
      tb_ar(img, W, 1024, 20, -1);
      tb_timeout(img, W, 3, 1020);
      tb_signal(img, SIGTERM, 1300);
    }
  }
  snprintf(add_runexit(&job, "node0", 4242, -1, 0, 127, -5, 1400)->exe, 64, "mpirun");
  run(&job, "run_launcher");
  NT_CHECK(job.v.cls == NTA_RANK_KILLED && job.v.nranks == 1 && job.v.ranks[0] == 1, "got %s: %s", tb_cls(&job),
           job.v.summary);
  NT_CHECK(strstr(job.v.summary, "its launcher mpirun (pid 4242"), "summary: %s", job.v.summary);
  nta_job_free(&job);
}

/* Exit-status files are hostile input: each bad one is refused with a
 * reason, never half-read. */
static void t_run_parse(void) {
  static const char good[] = NTR_RUNEXIT_MAGIC "\nhost vm\npid 12\nppid 11\nrank 3\njob j-1\nexe prog\n"
                             "start_ns 100\nend_ns 200\nfuture key\nexited 127\n";
  struct nta_runexit r;
  char why[256];
  NT_CHECK(nta_runexit_parse(good, sizeof good - 1, &r, why, sizeof why) == 0, "good: %s", why);
  NT_CHECK(r.pid == 12 && r.ppid == 11 && r.rank == 3 && !strcmp(r.host, "vm") && !strcmp(r.job, "j-1") &&
               !r.signaled && r.code == 127 && r.start_ns == 100 && r.end_ns == 200, "fields");
  static const char *const bad[] = {
      "nccltrace-run-exit 2\nhost vm\npid 1\nexited 0\n",                 /* another version */
      NTR_RUNEXIT_MAGIC "\nhost vm\npid 1\n",                             /* no status */
      NTR_RUNEXIT_MAGIC "\nhost vm\nexited 0\n",                          /* no pid */
      NTR_RUNEXIT_MAGIC "\npid 1\nexited 0\n",                            /* no host */
      NTR_RUNEXIT_MAGIC "\nhost vm\npid 0\nexited 0\n",                   /* pid 0 */
      NTR_RUNEXIT_MAGIC "\nhost vm\npid 99999999999999999999999\nexited 0\n",
      NTR_RUNEXIT_MAGIC "\nhost vm\npid 1\nexited 256\n",
      NTR_RUNEXIT_MAGIC "\nhost vm\npid 1\nsignaled 0\n",
      NTR_RUNEXIT_MAGIC "\nhost vm\npid 1\nexited 1\nsignaled 9\n",       /* two statuses */
      NTR_RUNEXIT_MAGIC "\nhost vm\npid 1\npid 2\nexited 1\n",            /* a key twice */
      NTR_RUNEXIT_MAGIC "\nhost \x1b[2J\npid 1\nexited 1\n",              /* escape sequence */
      NTR_RUNEXIT_MAGIC "\nhost vm\npid -1\nexited 1\n",
      NTR_RUNEXIT_MAGIC "\nhost vm\npid 1\nrank -2\nexited 1\n",
      NTR_RUNEXIT_MAGIC "\nhost vm\npid 1\nstart_ns 5\nend_ns 4\nexited 1\n",
      NTR_RUNEXIT_MAGIC "\nhost vm\npid 1\nnovalue\nexited 1\n",
      NTR_RUNEXIT_MAGIC "\nhost vm\npid 1x\nexited 1\n",
      "",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    why[0] = 0;
    NT_CHECK(nta_runexit_parse(bad[i], strlen(bad[i]), &r, why, sizeof why) == -1 && why[0], "bad %zu accepted", i);
  }
  char nul[] = NTR_RUNEXIT_MAGIC "\nhost vm\npid 1\nexited 1\n";
  nul[sizeof NTR_RUNEXIT_MAGIC + 3] = 0;
  NT_CHECK(nta_runexit_parse(nul, sizeof nul - 1, &r, why, sizeof why) == -1, "NUL accepted");
  char big[NTR_RUNEXIT_MAX + 64];
  memset(big, '\n', sizeof big);
  memcpy(big, good, sizeof good - 1);
  NT_CHECK(nta_runexit_parse(big, sizeof big, &r, why, sizeof why) == -1, "oversized accepted");
}

/* Rank 1 is gone; nccltrace run saw the status a shell or launcher gives a
 * child killed by SIGKILL, 137 = 128 + 9: the text names the signal. */
static void t_run_137(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 3; r++) {
    struct ntt_image *img = world(&job, r, 3);
    tb_steps(img, W, 2, 0);
    if (r == 1) {
      tb_vanish(img);
    } else {
      tb_ar(img, W, 1024, 20, -1);
      tb_timeout(img, W, 3, 1020);
      tb_signal(img, SIGTERM, 1300);
    }
  }
  add_runexit(&job, "node0", 1001, 1, 0, 137, -5, 25);
  run(&job, "run_137");
  NT_CHECK(job.v.cls == NTA_RANK_EXIT && job.v.exit_code == 137, "got %s: %s", tb_cls(&job), job.v.summary);
  NT_CHECK(strstr(job.v.summary, "code 137 (128+9, SIGKILL)"), "summary: %s", job.v.summary);
  nta_job_free(&job);
  char b[96];
  nta_exit_text(143, b, sizeof b);
  NT_CHECK(!strcmp(b, "code 143 (128+15, SIGTERM)"), "143: %s", b);
  nta_exit_text(1, b, sizeof b);
  NT_CHECK(!strcmp(b, "code 1"), "1: %s", b);
  nta_exit_text(128, b, sizeof b);
  NT_CHECK(!strcmp(b, "code 128"), "128: %s", b);
}

/* Every relative time the text prints ("+1.5s") is within a day of the
 * job's start: never the epoch-sized offset of a missing time base. */
static int offsets_sane(const char *txt) {
  for (const char *q = txt; (q = strstr(q, "s  ")) != NULL; q++) {
    const char *b = q;
    while (b > txt && b[-1] != ' ' && b[-1] != '\n')
      b--;
    if (*b == '+' || *b == '-') {
      double d = strtod(b, NULL);
      if (d > 86400 || d < -86400)
        return 0;
    }
  }
  return 1;
}

/* Only nccltrace run's exit statuses, no ring or dump at all (issue 28,
 * point 3): the offsets are from the first status, the text says that no
 * process left a ring or dump, names no job it does not know, and speaks
 * of no peers (there are none in the evidence). */
static void t_exit_files_only(void) {
  struct nta_job job;
  tb_job(&job);
  job.job_id[0] = 0;
  add_runexit(&job, "node0", 500, -1, 1, SIGKILL, 0, 3);
  add_runexit(&job, "node0", 501, -1, 0, 137, 0, 5);
  add_runexit(&job, "node0", 502, -1, 0, 1, 0, 9);
  run(&job, "exit_files_only");
  char *t = text_of(&job);
  NT_CHECK(offsets_sane(t), "an epoch-sized offset: %s", t);
  NT_CHECK(strstr(job.v.summary, "no ring or dump from any process") != NULL, "summary: %s", job.v.summary);
  NT_CHECK(!strstr(job.v.next, "peer"), "next speaks of peers: %s", job.v.next);
  NT_CHECK(!strstr(t, "job \n") && strstr(t, "job (none)"), "job line: %s", t);
  free(t);
  nta_job_free(&job);
}

/* A process that exited 1 with a ring holding no NCCL call: no peers are
 * hung, so none are "victims"; and a healthy job with no call says that
 * nothing was recorded rather than "no fault found". */
static void t_ring_no_ops(void) {
  struct nta_job job;
  tb_job(&job);
  struct ntt_image *img = tb_proc(&job, 0, 1, 700);
  tb_exit(img, 1, 5);
  run(&job, "ring_no_ops");
  NT_CHECK(job.v.cls == NTA_RANK_EXIT, "got %s: %s", tb_cls(&job), job.v.summary);
  NT_CHECK(!strstr(job.v.next, "victims") && !strstr(job.v.next, "peer"), "next: %s", job.v.next);
  nta_job_free(&job);
  tb_job(&job);
  img = tb_proc(&job, 0, 1, 701);
  tb_exit(img, 0, 5);
  run(&job, "ring_no_ops_healthy");
  NT_CHECK(job.v.cls == NTA_HEALTHY && strstr(job.v.summary, "no NCCL call"), "got %s: %s", tb_cls(&job),
           job.v.summary);
  nta_job_free(&job);
}

/* One rank's dump has no realtime base (0): its times are not the others'
 * clock.  No epoch-sized offset, and the text says whose times are
 * missing. */
static void t_no_clock_base(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 3; r++) {
    struct ntt_image *img = world(&job, r, 3);
    for (int i = 0; i < 2; i++)
      tb_ar(img, W, 64, 10.0 * i, 10.0 * i + 1);
    if (r == 1) {
      tb_exit(img, 3, 25);
    } else {
      tb_ar(img, W, 64, 30, -1);
      tb_timeout(img, W, 3, 1030);
    }
    if (r == 2)
      img->hdr.real_base_ns = 0; /* its ticks as the others', with no base to place them */
  }
  run(&job, "no_clock_base");
  char *t = text_of(&job);
  NT_CHECK(offsets_sane(t), "an epoch-sized offset: %s", t);
  NT_CHECK(strstr(job.v.summary, "no clock base") != NULL, "summary: %s", job.v.summary);
  free(t);
  nta_job_free(&job);
}

/* Rank 3 left no ring or dump, but nccltrace run recorded its exit 0: the
 * text says that, never "no evidence at all" or "no evidence from rank 3". */
static void t_silent_exit_status(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 3; r++) {
    struct ntt_image *img = world(&job, r, 4);
    for (int i = 0; i < 2; i++)
      tb_ar(img, W, 64, 10.0 * i, 10.0 * i + 1);
    tb_ar(img, W, 64, 30, -1);
    tb_timeout(img, W, 3, 1030);
  }
  add_runexit(&job, "node0", 1003, 3, 0, 0, 0, 25);
  run(&job, "silent_exit_status");
  NT_CHECK(job.v.cls == NTA_MISSING_COLL && !strstr(job.v.summary, "no evidence") &&
               strstr(job.v.summary, "left no ring or dump (nccltrace run recorded how 1 of them ended)"),
           "got %s: %s", tb_cls(&job), job.v.summary);
  nta_job_free(&job);
}

int main(void) {
  t_silent_exit_status();
  t_exit_files_only();
  t_ring_no_ops();
  t_no_clock_base();
  t_run_137();
  t_multirank_killed();
  t_two_procs();
  t_multirank_mismatch();
  t_run_127();
  t_run_no_ring();
  t_run_launcher();
  t_run_parse();
  if (nt_failures)
    fprintf(stderr, "%d check(s) failed\n", nt_failures);
  return nt_exit_status();
}

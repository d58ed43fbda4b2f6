/* test_verdicts.c -- the analyzer's decisions on synthetic evidence: each
 * case builds the rings/dumps a fault would leave (in memory), runs the
 * analysis and checks class, field, comm, seq and ranks.  Proves the evidence
 * priority and the time rule (design §1) without the interposer or emulator.
 * Exit 0 pass, 1 fail.
 */
#include <jansson.h>
#include <time.h>
#include "tools/analyze/tests/builder.h"

#define W 0x9f2c0123456789abull /* world comm */
#define S 0x51117000000000aaull /* a split comm */

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

static struct ntt_image *world_rank(struct nta_job *job, int r, int n) {
  struct ntt_image *img = tb_proc(job, r, n, 1000 + r);
  tb_comm(img, W, r, n);
  return img;
}

static void t_healthy(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 4; r++) {
    struct ntt_image *img = world_rank(&job, r, 4);
    tb_steps(img, W, 5, 0);
    tb_exit(img, 0, 100);
  }
  run(&job, "healthy");
  NT_CHECK(job.v.cls == NTA_HEALTHY, "got %s: %s", tb_cls(&job), job.v.summary);
  nta_job_free(&job);
}

/* Bcast and Broadcast are one operation: not a mismatch. */
static void t_bcast_alias(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 2; r++) {
    struct ntt_image *img = world_rank(&job, r, 2);
    tb_steps(img, W, 2, 0);
    tb_coll(img, W, r ? NTR_KIND_BCAST : NTR_KIND_BROADCAST, 64, 7, -1, 0, 30, 31);
    tb_exit(img, 0, 100);
  }
  run(&job, "bcast_alias");
  NT_CHECK(job.v.cls == NTA_HEALTHY, "got %s: %s", tb_cls(&job), job.v.summary);
  nta_job_free(&job);
}

/* Rank 1 calls Broadcast at seq 3 while 0,2,3 call AllReduce; rank 1's
 * Broadcast (root) completes, the others time out, then SIGTERM. */
static void t_op_mismatch(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 4; r++) {
    struct ntt_image *img = world_rank(&job, r, 4);
    tb_steps(img, W, 2, 0);
    if (r == 1) {
      tb_coll(img, W, NTR_KIND_BROADCAST, 64, 7, -1, 1, 30, 31);
      tb_exit(img, 0, 40);
    } else {
      tb_ar(img, W, 64, 30 + r, -1);
      tb_timeout(img, W, 3, 1030 + r);
      tb_signal(img, SIGTERM, 1200);
    }
  }
  run(&job, "op_mismatch");
  NT_CHECK(job.v.cls == NTA_COLL_MISMATCH, "got %s: %s", tb_cls(&job), job.v.summary);
  NT_CHECK(!strcmp(job.v.field, "op"), "field %s", job.v.field);
  NT_CHECK(job.v.seq == 3, "seq %llu", (unsigned long long)job.v.seq);
  NT_CHECK(job.v.nranks == 1 && job.v.ranks[0] == 1, "ranks n=%d", job.v.nranks);
  NT_CHECK(job.v.comm && job.v.comm->id == W, "comm");
  NT_CHECK(strstr(job.v.summary, "rank 1 called Broadcast") && strstr(job.v.summary, "ranks 0,2,3 called AllReduce"),
           "summary: %s", job.v.summary);
  nta_job_free(&job);
}

/* The scenario raw_op_returns, with the timing that once named the effect:
 * rank 2's Broadcast (root: it returns) at seq 2 and its AllReduce #3 both
 * come before rank 0 reaches its AllReduce #2.  Ranks 0,1 then "never issued"
 * #3, but only because the mismatch at #2 stuck them: that is the cause. */
static void t_op_mismatch_ahead(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 3; r++) {
    struct ntt_image *img = world_rank(&job, r, 3);
    tb_steps(img, W, 1, 0);
    if (r == 2) {
      tb_coll(img, W, NTR_KIND_BROADCAST, 64, 7, -1, 2, 28.6, 28.7);
      tb_ar(img, W, 64, 29.7, -1);
    } else {
      tb_ar(img, W, 64, r ? 27.5 : 31.0, -1);
    }
    tb_timeout(img, W, r == 2 ? 3 : 2, 1032);
    tb_signal(img, SIGTERM, 4080);
  }
  run(&job, "op_mismatch_ahead");
  NT_CHECK(job.v.cls == NTA_COLL_MISMATCH, "got %s: %s", tb_cls(&job), job.v.summary);
  NT_CHECK(!strcmp(job.v.field, "op") && job.v.seq == 2, "field %s seq %llu", job.v.field,
           (unsigned long long)job.v.seq);
  NT_CHECK(job.v.nranks == 1 && job.v.ranks[0] == 2, "ranks n=%d", job.v.nranks);
  nta_job_free(&job);
}

/* Two ranks: count 4 vs 8 -> both named; then dtype, redop, root. */
static void t_field(const char *field, int kind1, uint64_t c1, int dt1, int op1, int root1) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 2; r++) {
    struct ntt_image *img = world_rank(&job, r, 2);
    tb_steps(img, W, 1, 0);
    if (r == 0)
      tb_coll(img, W, NTR_KIND_REDUCE, 4, 7, 0, 0, 20, -1);
    else
      tb_coll(img, W, (unsigned)kind1, c1, dt1, op1, root1, 20, -1);
    tb_timeout(img, W, 2, 1020);
  }
  run(&job, field);
  NT_CHECK(job.v.cls == NTA_COLL_MISMATCH, "%s: got %s: %s", field, tb_cls(&job), job.v.summary);
  NT_CHECK(!strcmp(job.v.field, field), "want %s, field %s", field, job.v.field);
  NT_CHECK(job.v.seq == 2 && job.v.nranks == 2 && tb_has_rank(&job.v, 0) && tb_has_rank(&job.v, 1),
           "%s: seq %llu nranks %d", field, (unsigned long long)job.v.seq, job.v.nranks);
  nta_job_free(&job);
}

/* Steady skip: rank 1 skips collective #3 and exits 0; rank 0 waits in #3. */
static void t_steady_skip(void) {
  struct nta_job job;
  tb_job(&job);
  struct ntt_image *a = world_rank(&job, 0, 2), *b = world_rank(&job, 1, 2);
  tb_steps(a, W, 2, 0);
  tb_steps(b, W, 2, 0);
  tb_exit(b, 0, 25);
  tb_ar(a, W, 1024, 30, -1);
  tb_timeout(a, W, 3, 1030);
  tb_signal(a, SIGTERM, 1100);
  run(&job, "steady_skip");
  NT_CHECK(job.v.cls == NTA_MISSING_COLL, "got %s: %s", tb_cls(&job), job.v.summary);
  NT_CHECK(job.v.seq == 3 && job.v.nranks == 1 && job.v.ranks[0] == 1, "seq %llu",
           (unsigned long long)job.v.seq);
  nta_job_free(&job);
}

/* Rank 1 exits 42 just AFTER rank 0 entered the next collective: the exit is
 * still the cause (the job was not stuck yet). */
static void t_exit42(void) {
  struct nta_job job;
  tb_job(&job);
  struct ntt_image *a = world_rank(&job, 0, 3), *b = world_rank(&job, 1, 3), *c = world_rank(&job, 2, 3);
  tb_steps(a, W, 2, 0);
  tb_steps(b, W, 2, 0);
  tb_steps(c, W, 2, 0);
  tb_ar(a, W, 1024, 30, -1);
  tb_ar(c, W, 1024, 31, -1);
  tb_exit(b, 42, 35);
  tb_timeout(a, W, 3, 1030);
  tb_timeout(c, W, 3, 1031);
  tb_signal(a, SIGTERM, 1500);
  tb_signal(c, SIGTERM, 1500);
  run(&job, "exit42");
  NT_CHECK(job.v.cls == NTA_RANK_EXIT, "got %s: %s", tb_cls(&job), job.v.summary);
  NT_CHECK(job.v.has_exit && job.v.exit_code == 42, "exit code %d", job.v.exit_code);
  NT_CHECK(job.v.nranks == 1 && job.v.ranks[0] == 1, "ranks");
  NT_CHECK(job.v.comm && job.v.comm->id == W, "comm");
  nta_job_free(&job);
}

/* Lazy-init skip: rank 1 never creates the comm; 0 and 2 wait in init. */
static void t_lazy_init(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 3; r++) {
    struct ntt_image *img = tb_proc(&job, r, 3, 1000 + r);
    if (r == 1) {
      tb_rec(img, NTR_KIND_MARK, NTR_PHASE_EVENT, 0, 5);
      tb_exit(img, 0, 6);
      continue;
    }
    struct ntr_comm_state *cs = tb_comm(img, W, r, 3);
    cs->lifecycle = NTR_COMM_INIT;
    tb_rec(img, NTR_KIND_COMM_INIT_RANK, NTR_PHASE_ENTER, W, 10 + r);
    tb_timeout(img, W, 0, 1010 + r);
    tb_signal(img, SIGTERM, 2000);
  }
  run(&job, "lazy_init");
  NT_CHECK(job.v.cls == NTA_INIT_HANG, "got %s: %s", tb_cls(&job), job.v.summary);
  NT_CHECK(job.v.nranks == 1 && job.v.ranks[0] == 1, "ranks n=%d", job.v.nranks);
  nta_job_free(&job);
}

static void t_segv(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 4; r++) {
    struct ntt_image *img = world_rank(&job, r, 4);
    tb_steps(img, W, 3, 0);
    if (r == 2) {
      snprintf(img->hdr.bt_sym[0], NTR_SYM_BYTES, "crash_here+0x12");
      img->hdr.bt_depth = 1;
      tb_signal(img, SIGSEGV, 33);
    } else {
      tb_ar(img, W, 1024, 30, -1);
      tb_rec(img, NTR_KIND_ASYNC_ERROR, NTR_PHASE_EVENT, W, 40)->aux = 6; /* ncclRemoteError: effect */
      tb_exit(img, 1, 45);
    }
  }
  run(&job, "segv");
  NT_CHECK(job.v.cls == NTA_RANK_CRASH, "got %s: %s", tb_cls(&job), job.v.summary);
  NT_CHECK(job.v.has_signal && job.v.signo == SIGSEGV && job.v.nranks == 1 && job.v.ranks[0] == 2, "sig %d",
           job.v.signo);
  NT_CHECK(strstr(job.v.summary, "crash_here"), "backtrace in summary: %s", job.v.summary);
  nta_job_free(&job);
}

/* SIGKILL: rank 3's ring is left behind, no exit; others time out. */
static void t_killed(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 4; r++) {
    struct ntt_image *img = world_rank(&job, r, 4);
    tb_steps(img, W, 4, 0);
    if (r == 3) {
      tb_vanish(img);
    } else {
      tb_ar(img, W, 1024, 40, -1);
      tb_timeout(img, W, 5, 1040);
      tb_signal(img, SIGTERM, 1300);
    }
  }
  run(&job, "killed");
  NT_CHECK(job.v.cls == NTA_RANK_KILLED, "got %s: %s", tb_cls(&job), job.v.summary);
  NT_CHECK(job.v.nranks == 1 && job.v.ranks[0] == 3, "ranks");
  nta_job_free(&job);
}

/* A rank stalled with everybody and killed later (its own timeout came
 * first) is a victim: the verdict is the stall. */
static void t_stall_with_victims(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 3; r++) {
    struct ntt_image *img = world_rank(&job, r, 3);
    tb_steps(img, W, 3, 0);
    tb_ar(img, W, 1024, 30 + r, -1);
    tb_timeout(img, W, 4, 1030 + r);
    if (r == 1)
      tb_vanish(img);
    else if (r == 2)
      tb_exit(img, 1, 1040); /* its own watchdog gave up: effect */
    else
      tb_signal(img, SIGTERM, 1100);
  }
  run(&job, "stall");
  NT_CHECK(job.v.cls == NTA_STALL, "got %s: %s", tb_cls(&job), job.v.summary);
  NT_CHECK(job.v.seq == 4 && job.v.nranks == 3, "seq %llu", (unsigned long long)job.v.seq);
  nta_job_free(&job);
}

static void t_env_stall(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 3; r++) {
    struct ntt_image *img = world_rank(&job, r, 3);
    tb_env(img, "NCCL_DEBUG=WARN");
    tb_env(img, r == 1 ? "NCCL_PROTO=LL" : "NCCL_PROTO=Simple");
    tb_steps(img, W, 2, 0);
    tb_ar(img, W, 1024, 30, -1);
    tb_timeout(img, W, 3, 1030);
    tb_signal(img, SIGTERM, 1100);
  }
  run(&job, "env");
  NT_CHECK(job.v.cls == NTA_ENV_MISMATCH, "got %s: %s", tb_cls(&job), job.v.summary);
  NT_CHECK(!strcmp(job.v.field, "NCCL_PROTO") && job.v.nranks == 1 && job.v.ranks[0] == 1, "field %s",
           job.v.field);
  nta_job_free(&job);
}

/* A failed init of W on one rank: ENTER at t, EXIT with ncclInvalidUsage
 * (after the coordinator's ENV_DIFF record when env_diff). */
static void refused_init(struct ntt_image *img, double t, const char *env_diff) {
  tb_find(img, W)->lifecycle = NTR_COMM_INIT_FAILED;
  tb_rec(img, NTR_KIND_COMM_INIT_RANK, NTR_PHASE_ENTER, W, t);
  if (env_diff)
    strncpy(tb_rec(img, NTR_KIND_ENV_DIFF, NTR_PHASE_EVENT, W, t + 0.2)->u.text, env_diff, 24);
  tb_rec(img, NTR_KIND_COMM_INIT_RANK, NTR_PHASE_EXIT, W, t + 0.3)->result = 4; /* ncclInvalidUsage */
}

/* NCCLTRACE_ENV_CHECK=abort: the coordinator refuses the init for
 * NCCL_PROTO, every rank exits 1 on ncclInvalidUsage; rank 1's exit is within
 * the tie window of the init: still an effect.  The refused variable is
 * named although NCCL_ALGO (sorting first) differs too. */
static void t_env_refused(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 3; r++) {
    struct ntt_image *img = world_rank(&job, r, 3);
    tb_env(img, "NCCL_DEBUG=WARN");
    tb_env(img, r == 1 ? "NCCL_PROTO=LL" : "NCCL_PROTO=Simple");
    if (r == 2)
      tb_env(img, "NCCL_ALGO=Ring");
    refused_init(img, 0, "NCCL_PROTO");
    tb_exit(img, 1, r == 1 ? 0.5 : 20 + r);
  }
  run(&job, "env_refused");
  NT_CHECK(job.v.cls == NTA_ENV_MISMATCH, "got %s: %s", tb_cls(&job), job.v.summary);
  NT_CHECK(!strcmp(job.v.field, "NCCL_PROTO") && job.v.nranks == 1 && job.v.ranks[0] == 1, "field %s",
           job.v.field);
  NT_CHECK(strstr(job.v.summary, "refused"), "summary: %s", job.v.summary);
  nta_job_free(&job);
}

/* The other direction: an env difference the coordinator did not refuse the
 * init for is no cause.  (a) healthy job with NCCL_DEBUG differing;
 * (b) the same difference, an init that failed for another reason (no
 * ENV_DIFF record before it), exits 1: rank_exit; (c) a crash: rank_crash. */
static void t_env_harmless(void) {
  for (int c = 0; c < 3; c++) {
    struct nta_job job;
    tb_job(&job);
    for (int r = 0; r < 3; r++) {
      struct ntt_image *img = world_rank(&job, r, 3);
      tb_env(img, r == 2 ? "NCCL_DEBUG=INFO" : "NCCL_DEBUG=WARN");
      if (c == 1) {
        refused_init(img, 0, NULL);
        if (r == 2)
          strncpy(tb_rec(img, NTR_KIND_ENV_DIFF, NTR_PHASE_EVENT, W, 5)->u.text, "NCCL_DEBUG", 24);
        tb_exit(img, 1, 10 + r);
        continue;
      }
      tb_steps(img, W, 3, 0);
      if (c == 2 && r == 0) {
        tb_signal(img, SIGSEGV, 33);
        continue;
      }
      if (c == 2) {
        tb_ar(img, W, 1024, 30, -1);
        tb_timeout(img, W, 4, 1030);
        tb_signal(img, SIGTERM, 1100);
      } else {
        tb_exit(img, 0, 100);
      }
    }
    run(&job, "env_harmless");
    static const enum nta_class want[3] = {NTA_HEALTHY, NTA_RANK_EXIT, NTA_RANK_CRASH};
    NT_CHECK(job.v.cls == want[c], "case %d: got %s: %s", c, tb_cls(&job), job.v.summary);
    nta_job_free(&job);
  }
}

/* Application aborts the comm on rank 2 while idle; others wait in #3. */
static void t_app_abort(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 3; r++) {
    struct ntt_image *img = world_rank(&job, r, 3);
    tb_steps(img, W, 2, 0);
    if (r == 2) {
      tb_rec(img, NTR_KIND_COMM_ABORT, NTR_PHASE_ENTER, W, 25);
      tb_find(img, W)->lifecycle = NTR_COMM_ABORTED;
      tb_exit(img, 3, 25.5); /* the exit it leads to, within the tie window */
    } else {
      tb_ar(img, W, 1024, 30, -1);
      tb_timeout(img, W, 3, 1030);
      tb_signal(img, SIGTERM, 1100);
    }
  }
  run(&job, "app_abort");
  NT_CHECK(job.v.cls == NTA_APP_ABORT, "got %s: %s", tb_cls(&job), job.v.summary);
  NT_CHECK(job.v.nranks == 1 && job.v.ranks[0] == 2, "ranks");
  nta_job_free(&job);
}

/* Teardown: every rank aborts the comm at shutdown with everything
 * completed (some PyTorch versions do): healthy, not app_abort. */
static void t_teardown_abort(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 3; r++) {
    struct ntt_image *img = world_rank(&job, r, 3);
    tb_steps(img, W, 4, 0);
    tb_rec(img, NTR_KIND_COMM_ABORT, NTR_PHASE_ENTER, W, 60 + r);
    tb_find(img, W)->lifecycle = NTR_COMM_ABORTED;
    tb_exit(img, 0, 70 + r);
  }
  run(&job, "teardown_abort");
  NT_CHECK(job.v.cls == NTA_HEALTHY, "got %s: %s", tb_cls(&job), job.v.summary);
  nta_job_free(&job);
  /* The same idle abort followed by a failing exit is the application
   * giving up: still the cause. */
  tb_job(&job);
  struct ntt_image *img = world_rank(&job, 0, 1);
  tb_steps(img, W, 2, 0);
  tb_rec(img, NTR_KIND_COMM_ABORT, NTR_PHASE_ENTER, W, 30);
  tb_find(img, W)->lifecycle = NTR_COMM_ABORTED;
  tb_exit(img, 3, 31);
  run(&job, "idle_abort_then_exit3");
  NT_CHECK(job.v.cls == NTA_APP_ABORT, "got %s: %s", tb_cls(&job), job.v.summary);
  nta_job_free(&job);
}

/* Priority never beats time: rank 1 skipped #3, rank 0 timed out at ~1 s and
 * aborted its comm 5 s later (a framework watchdog): missing wins. */
static void t_abort_after_stuck(void) {
  struct nta_job job;
  tb_job(&job);
  struct ntt_image *a = world_rank(&job, 0, 2), *b = world_rank(&job, 1, 2);
  tb_steps(a, W, 2, 0);
  tb_steps(b, W, 2, 0);
  tb_ar(a, W, 1024, 30, -1);
  tb_timeout(a, W, 3, 1030);
  tb_rec(a, NTR_KIND_COMM_ABORT, NTR_PHASE_ENTER, W, 6030);
  tb_exit(a, 1, 6040);
  tb_timeout(b, W, 0, 1100); /* b idle, still alive */
  run(&job, "abort_after_stuck");
  NT_CHECK(job.v.cls == NTA_MISSING_COLL, "got %s: %s", tb_cls(&job), job.v.summary);
  NT_CHECK(job.v.seq == 3 && job.v.nranks == 1 && job.v.ranks[0] == 1, "seq %llu", (unsigned long long)job.v.seq);
  nta_job_free(&job);
}

/* Injected async remote error on rank 1; the app then aborts and exits 1. */
static void t_async_error(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 3; r++) {
    struct ntt_image *img = world_rank(&job, r, 3);
    tb_steps(img, W, 3, 0);
    if (r == 1) {
      tb_rec(img, NTR_KIND_ASYNC_ERROR, NTR_PHASE_EVENT, W, 33)->aux = 6;
      tb_find(img, W)->async_error = 6;
      tb_rec(img, NTR_KIND_COMM_ABORT, NTR_PHASE_ENTER, W, 34);
      tb_exit(img, 1, 35);
    } else {
      tb_ar(img, W, 1024, 40, -1);
      /* the peers then see the remote error too: effects, not more culprits */
      tb_rec(img, NTR_KIND_ASYNC_ERROR, NTR_PHASE_EVENT, W, 60 + r)->aux = 6;
      tb_timeout(img, W, 4, 1040);
      tb_signal(img, SIGTERM, 1100);
    }
  }
  run(&job, "async_error");
  NT_CHECK(job.v.cls == NTA_NCCL_ERROR, "got %s: %s", tb_cls(&job), job.v.summary);
  NT_CHECK(job.v.has_error && job.v.error == 6 && job.v.nranks == 1 && job.v.ranks[0] == 1, "error %d",
           job.v.error);
  nta_job_free(&job);
}

static void t_p2p(void) {
  struct nta_job job;
  tb_job(&job);
  struct ntt_image *a = world_rank(&job, 0, 2), *b = world_rank(&job, 1, 2);
  tb_steps(a, W, 1, 0);
  tb_steps(b, W, 1, 0);
  tb_p2p(a, W, 1, 1, 1, 100, 20, 21);
  tb_p2p(b, W, 0, 0, 1, 100, 20, 21);
  tb_p2p(a, W, 1, 1, 2, 100, 30, -1);
  tb_p2p(b, W, 0, 0, 2, 200, 30, -1);
  tb_timeout(a, W, 0, 1030);
  tb_timeout(b, W, 0, 1030);
  run(&job, "p2p");
  NT_CHECK(job.v.cls == NTA_P2P_MISMATCH, "got %s: %s", tb_cls(&job), job.v.summary);
  NT_CHECK(!strcmp(job.v.field, "count") && job.v.seq == 2 && job.v.nranks == 2, "field %s", job.v.field);
  nta_job_free(&job);
}

/* Wrong peer: rank 0 sends to rank 2 instead of rank 1; rank 1 waits for
 * rank 0, rank 2's receive from rank 1 is matched. */
static void t_p2p_peer(void) {
  struct nta_job job;
  tb_job(&job);
  struct ntt_image *r0 = world_rank(&job, 0, 3), *r1 = world_rank(&job, 1, 3), *r2 = world_rank(&job, 2, 3);
  tb_steps(r0, W, 1, 0);
  tb_steps(r1, W, 1, 0);
  tb_steps(r2, W, 1, 0);
  tb_p2p(r0, W, 1, 2, 1, 100, 20, -1);  /* 0 -> 2: nobody receives it */
  tb_p2p(r1, W, 0, 0, 1, 100, 20, -1);  /* 1 <- 0: never sent */
  tb_p2p(r1, W, 1, 2, 1, 100, 20, 21);  /* 1 -> 2 */
  tb_p2p(r2, W, 0, 1, 1, 100, 20, 21);  /* 2 <- 1: matched */
  for (int i = 0; i < 3; i++)
    tb_timeout(&job.imgs[i], W, 0, 1030);
  run(&job, "p2p_peer");
  NT_CHECK(job.v.cls == NTA_P2P_MISMATCH && !strcmp(job.v.field, "peer"), "got %s field %s: %s", tb_cls(&job),
           job.v.field, job.v.summary);
  NT_CHECK(job.v.nranks == 2 && tb_has_rank(&job.v, 0) && tb_has_rank(&job.v, 1), "ranks");
  nta_job_free(&job);
}

/* Wrong peer with an eager send (the scenario p2p_wrong_peer): in a ring
 * exchange after 2 AllReduces, rank 2 sends to 0 instead of 3.  The send
 * fits the peer's buffer and completes without a receive; ranks 0, 1, 2
 * go on to AllReduce #3 and hang there, rank 3 waits in its receive from
 * 2.  The completed but unmatched send is the cause, not the AllReduce
 * rank 3 never reached. */
static void t_p2p_peer_eager(void) {
  struct nta_job job;
  tb_job(&job);
  struct ntt_image *r[4];
  for (int i = 0; i < 4; i++) {
    r[i] = world_rank(&job, i, 4);
    tb_steps(r[i], W, 2, 0);
  }
  tb_p2p(r[0], W, 1, 1, 1, 256, 30, 31);
  tb_p2p(r[0], W, 0, 3, 1, 256, 30, 31);
  tb_p2p(r[1], W, 1, 2, 1, 256, 30, 31);
  tb_p2p(r[1], W, 0, 0, 1, 256, 30, 31);
  tb_p2p(r[2], W, 1, 0, 1, 256, 30, 31); /* 2 -> 0: completed, never received */
  tb_p2p(r[2], W, 0, 1, 1, 256, 30, 31);
  tb_p2p(r[3], W, 1, 0, 1, 256, 30, 31);
  tb_p2p(r[3], W, 0, 2, 1, 256, 30, -1); /* 3 <- 2: never sent */
  for (int i = 0; i < 3; i++)
    tb_ar(r[i], W, 1024, 40, -1);
  for (int i = 0; i < 4; i++)
    tb_timeout(r[i], W, 0, 1040);
  run(&job, "p2p_peer_eager");
  NT_CHECK(job.v.cls == NTA_P2P_MISMATCH && !strcmp(job.v.field, "peer"), "got %s field %s: %s", tb_cls(&job),
           job.v.field, job.v.summary);
  NT_CHECK(job.v.nranks == 2 && tb_has_rank(&job.v, 2) && tb_has_rank(&job.v, 3), "ranks");
  nta_job_free(&job);
}

/* A completed send whose receiver is merely behind is no mismatch.  A
 * pipeline 0 -> 1 -> 2 plus rank 0's eager send #1 to rank 2: rank 0
 * sends to 2 (completed, fits the buffer) and then exits 3 before its
 * send to 1; rank 1 waits for it, rank 2 waits for rank 1 and so never
 * reached its receive from 0.  Rank 2 issued no collective after rank 0's
 * send, so that send is not unmatched: the exit is the cause. */
static void t_p2p_eager_behind(void) {
  struct nta_job job;
  tb_job(&job);
  struct ntt_image *r0 = world_rank(&job, 0, 3), *r1 = world_rank(&job, 1, 3), *r2 = world_rank(&job, 2, 3);
  tb_steps(r0, W, 1, 0);
  tb_steps(r1, W, 1, 0);
  tb_steps(r2, W, 1, 0);
  tb_p2p(r0, W, 1, 2, 1, 100, 20, 21);   /* eager, completed; rank 2 has not received it yet */
  tb_exit(r0, 3, 60);
  tb_p2p(r1, W, 0, 0, 1, 100, 25, -1);   /* 1 <- 0 #1: never sent */
  tb_p2p(r2, W, 0, 1, 1, 100, 25, -1);   /* 2 <- 1 #1: rank 1 is stuck before it */
  tb_timeout(r1, W, 0, 1030);
  tb_timeout(r2, W, 0, 1030);
  run(&job, "p2p_eager_behind");
  NT_CHECK(job.v.cls == NTA_RANK_EXIT && job.v.nranks == 1 && job.v.ranks[0] == 0, "got %s: %s",
           tb_cls(&job), job.v.summary);
  nta_job_free(&job);
}

/* Rank 2 never calls ncclCommSplit: 0, 1, 3 wait in it (recorded on the
 * parent; the child is still rank -1, size 0). */
static void t_split_hang(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 4; r++) {
    struct ntt_image *img = world_rank(&job, r, 4);
    tb_steps(img, W, 2, 0);
    if (r != 2) {
      struct ntr_comm_state *cs = tb_find(img, W);
      struct ntr_record *e = tb_rec(img, NTR_KIND_COMM_SPLIT, NTR_PHASE_ENTER, W, 30 + r);
      cs->blocked_since = e->tsc;
      cs->blocked_kind = NTR_KIND_COMM_SPLIT;
      struct ntr_comm_state *child = tb_comm(img, S, -1, 0);
      child->lifecycle = NTR_COMM_INIT;
      child->parent_id = W;
      tb_timeout(img, W, 0, 1030);
      tb_signal(img, SIGTERM, 1200);
    } else {
      tb_exit(img, 0, 40);
    }
  }
  run(&job, "split_hang");
  NT_CHECK(job.v.cls == NTA_INIT_HANG && job.v.comm && job.v.comm->id == W, "got %s: %s", tb_cls(&job),
           job.v.summary);
  NT_CHECK(job.v.nranks == 1 && job.v.ranks[0] == 2, "ranks n=%d", job.v.nranks);
  nta_job_free(&job);
}

/* Mismatch on a split comm (launcher ranks 1,3 are its ranks 0,1), inside a
 * group; the world comm is healthy.  Ranks are the split comm's ranks. */
static void t_split_group(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 4; r++) {
    struct ntt_image *img = world_rank(&job, r, 4);
    tb_steps(img, W, 2, 0);
    if (r % 2 == 1) {
      struct ntr_comm_state *cs = tb_comm(img, S, r / 2, 2);
      cs->parent_id = W;
      tb_coll(img, S, NTR_KIND_ALLREDUCE, 16, 7, 0, -1, 50, 51);
      struct ntr_record *x = tb_coll(img, S, NTR_KIND_ALLREDUCE, r == 3 ? 32 : 16, 7, 0, -1, 60, -1);
      x->flags |= NTR_REC_IN_GROUP;
      x->group_depth = 1;
      tb_timeout(img, S, 2, 1060);
    }
    tb_signal(img, SIGTERM, 1200);
  }
  run(&job, "split_group");
  NT_CHECK(job.v.cls == NTA_COLL_MISMATCH, "got %s: %s", tb_cls(&job), job.v.summary);
  NT_CHECK(job.v.comm && job.v.comm->id == S && job.v.seq == 2 && !strcmp(job.v.field, "count"), "comm/seq");
  NT_CHECK(job.v.nranks == 2 && tb_has_rank(&job.v, 0) && tb_has_rank(&job.v, 1), "ranks");
  NT_CHECK(strstr(job.v.summary, "inside a group") != NULL, "summary %s", job.v.summary);
  nta_job_free(&job);
}

/* The scenario split_mismatch, with a slow culprit: 6 ranks, each step an
 * AllReduce on the world comm and one on its parity half (odd: S, even: S2).
 * At step 2 launcher rank 3 (S rank 1) doubles its count, and calls late:
 * the even ranks' step-3 world AllReduce comes first.  The odd ranks never
 * issue it because they are stuck in S's mismatched call, on another comm:
 * the mismatch is the cause, the missing world collective its effect. */
static void t_split_ahead(void) {
  const uint64_t S2 = 0x52227000000000bbull;
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 6; r++) {
    struct ntt_image *img = world_rank(&job, r, 6);
    uint64_t sub = r % 2 ? S : S2;
    struct ntr_comm_state *cs = tb_comm(img, sub, r / 2, 3);
    cs->parent_id = W;
    tb_ar(img, W, 64, 0, 1);
    tb_ar(img, sub, 64, 2, 3);
    tb_ar(img, W, 64, 10, 11);
    if (r % 2) {
      tb_ar(img, sub, r == 3 ? 128 : 64, r == 3 ? 20 : 12, -1);
      tb_timeout(img, sub, 2, 1012);
    } else {
      tb_ar(img, sub, 64, 12, 13);
      tb_ar(img, W, 64, 14, -1);
      tb_timeout(img, W, 3, 1014);
    }
    tb_signal(img, SIGTERM, 4000);
  }
  run(&job, "split_ahead");
  NT_CHECK(job.v.cls == NTA_COLL_MISMATCH, "got %s: %s", tb_cls(&job), job.v.summary);
  NT_CHECK(job.v.comm && job.v.comm->id == S && job.v.seq == 2 && !strcmp(job.v.field, "count"),
           "comm/seq/field %s", job.v.field);
  NT_CHECK(job.v.nranks == 1 && job.v.ranks[0] == 1, "ranks n=%d", job.v.nranks);
  nta_job_free(&job);
}

/* Two dumps of one process: the mismatch at seq 2 only survives in the first
 * (the later one's ring wrapped); the merge must still find it. */
static void t_merge(void) {
  struct nta_job job;
  tb_job(&job);
  struct ntt_image *b = world_rank(&job, 1, 2);
  tb_steps(b, W, 3, 0);
  struct ntt_image *a1 = world_rank(&job, 0, 2);
  tb_ar(a1, W, 1024, 0, 1);
  tb_ar(a1, W, 999, 10, -1);
  tb_timeout(a1, W, 2, 1010);
  struct ntt_image *a2 = world_rank(&job, 0, 2);
  a2->lost = 3; /* its records start at position 4 */
  struct ntr_comm_state *cs = tb_find(a2, W);
  cs->coll_seq = 2;
  tb_ar(a2, W, 1024, 20, -1);
  tb_exit(a2, 1, 5000);
  run(&job, "merge");
  NT_CHECK(job.nprocs == 2, "procs %d", job.nprocs);
  NT_CHECK(job.v.cls == NTA_COLL_MISMATCH && job.v.seq == 2 && !strcmp(job.v.field, "count"), "got %s seq %llu: %s",
           tb_cls(&job), (unsigned long long)job.v.seq, job.v.summary);
  NT_CHECK(job.procs[0].nrecs + job.procs[1].nrecs >= 8, "union of records");
  nta_job_free(&job);
}

static void t_no_evidence(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 3; r++) {
    struct ntt_image *img = world_rank(&job, r, 4);
    tb_steps(img, W, 2, 0);
    tb_ar(img, W, 1024, 30, -1);
    tb_timeout(img, W, 3, 1030);
  }
  run(&job, "no_evidence");
  NT_CHECK(strstr(job.v.summary, "no evidence from rank 3") != NULL, "summary %s", job.v.summary);
  NT_CHECK(job.v.cls != NTA_HEALTHY, "a hang with a silent rank is not healthy");
  nta_job_free(&job);
}

/* Scale: 16 ranks x 20000 collectives, one ring wrapped (its oldest half
 * lost), a count mismatch near the end.  Must be found, and fast. */
static void t_scale(void) {
  struct nta_job job;
  tb_cap = 20010;
  tb_job(&job);
  const int n = 16, steps = 20000;
  for (int r = 0; r < n; r++) {
    struct ntt_image *img = world_rank(&job, r, n);
    for (int i = 1; i <= steps; i++)
      tb_ar(img, W, r == 5 && i == 19990 ? 7 : 1024, i, i == steps ? -1 : i + 0.5);
    if (r == 3) { /* wrapped: only the newest half survived */
      memmove(img->recs, img->recs + steps / 2, (size_t)(steps / 2) * sizeof(*img->recs));
      img->nrecs = (uint64_t)steps / 2;
      img->lost = (uint64_t)steps / 2;
    }
    tb_timeout(img, W, (uint64_t)steps, steps + 1000.0);
  }
  tb_cap = 4096;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  run(&job, "scale");
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  NT_CHECK(job.v.cls == NTA_COLL_MISMATCH && job.v.seq == 19990 && job.v.nranks == 1 && job.v.ranks[0] == 5,
           "got %s seq %llu", tb_cls(&job), (unsigned long long)job.v.seq);
  int lost_line = 0;
  for (int i = 0; i < job.nev; i++)
    lost_line |= strcmp(job.ev[i].kind, "lost") == 0 && job.ev[i].rank == 3;
  NT_CHECK(lost_line, "the wrapped ring is reported");
  NT_CHECK(s < 5.0, "analysis of 320000 records took %.2f s", s);
  nta_job_free(&job);
}

/* Two hosts with different clocks (rate, tick base, realtime base): rank 1
 * exits 1 at 1.5 s, after rank 0 timed out in the collective rank 1 never
 * issued.  Only converted times put the exit after the timeout: raw ticks
 * of a 3 GHz clock with another base would put it first. */
static void t_clocks(void) {
  struct nta_job job;
  tb_job(&job);
  struct ntt_image *a = world_rank(&job, 0, 2), *b = world_rank(&job, 1, 2);
  snprintf(b->hdr.host, sizeof(b->hdr.host), "othernode");
  b->hdr.tsc_hz = 3000000000ull;
  b->hdr.tsc_base = 1000000000000ull;
  b->hdr.real_base_ns = TB_BASE_NS - 7000000000ull; /* its clock started 7 s earlier */
  a->hdr.tsc_base = 50000000000000ull;             /* and host A's ticks are far larger */
  tb_steps(a, W, 2, 0);
  tb_steps(b, W, 2, 0);
  tb_ar(a, W, 1024, 30, -1);
  tb_timeout(a, W, 3, 1030);
  tb_exit(b, 1, 1500);
  run(&job, "clocks");
  NT_CHECK(job.v.cls == NTA_MISSING_COLL && job.v.seq == 3 && job.v.nranks == 1 && job.v.ranks[0] == 1,
           "got %s: %s", tb_cls(&job), job.v.summary);
  nta_job_free(&job);
}

/* The compact form keeps every value exactly, also where it does not fit
 * its bit fields (analyze.h): 5,000 collectives with distinct counts (more
 * fingerprints than the 12-bit index holds), 100 ms apart and, every other
 * one, 80 ms long (more ticks than the 26-bit deltas hold), a count
 * mismatch at seq 4,500.  The verdict's time and every quoted call time
 * must be the exact ones. */
static void t_escapes(void) {
  struct nta_job job;
  const int n = 5000, bad = 4500;
  tb_cap = 5010;
  tb_job(&job);
  for (int r = 0; r < 2; r++) {
    struct ntt_image *img = world_rank(&job, r, 2);
    for (int i = 1; i <= n; i++)
      tb_ar(img, W, r == 1 && i == bad ? 1u : (uint64_t)i + 1000, 100.0 * i + r * 0.25,
            i >= bad ? -1 : 100.0 * i + (i % 2 ? 0.5 : 80.0));
    tb_timeout(img, W, (uint64_t)bad, 100.0 * n + 1000);
  }
  tb_cap = 4096;
  run(&job, "escapes");
  uint64_t want_t = TB_BASE_NS + (uint64_t)(100.0 * bad * 1e6) + 250000; /* rank 1's, the later */
  NT_CHECK(job.v.cls == NTA_COLL_MISMATCH && job.v.seq == (uint64_t)bad && !strcmp(job.v.field, "count"),
           "got %s seq %llu: %s", tb_cls(&job), (unsigned long long)job.v.seq, job.v.summary);
  NT_CHECK(job.v.t_ns / 1000 == want_t / 1000, "verdict time %llu, want %llu", (unsigned long long)job.v.t_ns,
           (unsigned long long)want_t);
  int calls = 0;
  for (int i = 0; i < job.nev; i++)
    if (!strcmp(job.ev[i].kind, "call")) {
      uint64_t t = TB_BASE_NS + (uint64_t)(100.0 * bad * 1e6) + (uint64_t)job.ev[i].rank * 250000;
      NT_CHECK(job.ev[i].t_ns / 1000 == t / 1000, "rank %d call at %llu, want %llu", job.ev[i].rank,
               (unsigned long long)job.ev[i].t_ns, (unsigned long long)t);
      calls++;
    }
  NT_CHECK(calls == 2, "%d call events", calls);
  for (int i = 0; i < job.comms[0].nranked; i++) {
    const struct nta_member *m = job.comms[0].ranked[i];
    struct nta_op o;
    NT_CHECK(m->completed == (uint64_t)bad - 1, "rank %d completed %llu", m->rank, (unsigned long long)m->completed);
    /* an 80 ms call, escaped, decodes to its exact ticks */
    NT_CHECK(nta_coll_find(m, 4000, &o) && o.count == 5000 &&
                 o.done_ns - o.t_ns == 80000000ull - (uint64_t)m->rank * 250000,
             "rank %d seq 4000: count %llu, took %llu ns", m->rank, (unsigned long long)o.count,
             (unsigned long long)(o.done_ns - o.t_ns));
  }
  nta_job_free(&job);
}

/* nranks comes from the input, which may be hostile (docs/reliability.md).  One small
 * process whose records name 200 communicators of 2^20 - 1 ranks each (a
 * damaged ring or dump can say anything) must cost work in proportion to
 * the evidence, not to 200 x 2^20 claimed ranks: work per claimed rank would
 * make a 33 KB dump take seconds, and the JSON alone would list 2e8 ranks.
 * Checked without a tight clock: the reports list ranks without evidence up
 * to the budget and count the rest, and the analysis of the 200 comms
 * finishes in well under the generous 5 s. */
static void t_hostile_nranks(void) {
  struct nta_job job;
  const int ncomms = 200, big = (1 << 20) - 1;
  tb_job(&job);
  struct ntt_image *img = tb_proc(&job, 0, 1, 1000);
  for (int i = 0; i < ncomms; i++) {
    struct ntr_record *r = tb_rec(img, NTR_KIND_ALLREDUCE, NTR_PHASE_CALL, 0x5000 + (uint64_t)i, 1 + i);
    r->comm_id = 0x5000 + (uint64_t)i;
    r->rank = i % 3; /* not always rank 0: the gaps before a member count too */
    r->nranks = big;
    r->seq = 1;
    r->count = 8;
    r->dtype = 7;
  }
  tb_timeout(img, 0, 1, 5000);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  run(&job, "hostile_nranks");
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  NT_CHECK(f && nta_report_json(&job, f) == 0, "json report");
  if (f)
    fclose(f);
  FILE *null = fopen("/dev/null", "w");
  if (null) {
    nta_report_text(&job, null);
    fclose(null);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  NT_CHECK(job.ncomms == ncomms, "comms %d", job.ncomms);
  json_t *root = buf ? json_loads(buf, 0, NULL) : NULL;
  NT_CHECK(root != NULL, "the JSON report parses");
  long long listed = 0, unlisted = 0;
  json_t *comms = json_object_get(root, "comms"), *c;
  size_t i;
  json_array_foreach(comms, i, c) {
    listed += (long long)json_array_size(json_object_get(c, "no_evidence"));
    unlisted += json_integer_value(json_object_get(c, "no_evidence_unlisted"));
    NT_CHECK(json_integer_value(json_object_get(c, "nranks")) == big, "nranks kept as claimed");
  }
  NT_CHECK(listed == NTA_LIST_BUDGET, "ranks without evidence listed: %lld", listed);
  NT_CHECK(listed + unlisted == (long long)ncomms * (big - 1), "listed %lld + unlisted %lld", listed, unlisted);
  NT_CHECK(secs < 5.0, "200 communicators of 2^20 claimed ranks took %.2f s", secs);
  json_decref(root);
  free(buf);
  nta_job_free(&job);
}

/* 80 ranks, rank 79 never issues the third collective: the 79 waiting ranks
 * are more than a verdict keeps (64); the text says how many it left out
 * instead of stopping mid-list, and the formatter does the same when its
 * buffer is what runs out. */
static void t_many_waiting(void) {
  struct nta_job job;
  tb_job(&job);
  const int n = 80;
  for (int r = 0; r < n; r++) {
    struct ntt_image *img = world_rank(&job, r, n);
    tb_steps(img, W, 2, 0);
    if (r == n - 1) {
      tb_exit(img, 0, 25);
    } else {
      tb_ar(img, W, 1024, 30, -1);
      tb_timeout(img, W, 3, 1030);
    }
  }
  run(&job, "many_waiting");
  NT_CHECK(job.v.cls == NTA_MISSING_COLL && job.v.nranks == 1 && job.v.ranks[0] == n - 1, "got %s: %s",
           tb_cls(&job), job.v.summary);
  NT_CHECK(strstr(job.v.summary, "0,1,2,") && strstr(job.v.summary, ",63 and 15 more"), "summary: %s",
           job.v.summary);
  nta_job_free(&job);
  int r[64];
  for (int i = 0; i < 64; i++)
    r[i] = 1000 + i;
  char small[40];
  nta_rank_list(r, 64, small, sizeof small);
  NT_CHECK(strstr(small, "1000,1001,") && strstr(small, " more") && strlen(small) < sizeof small, "cut list: %s",
           small);
  char all[512];
  nta_rank_list(r, 64, all, sizeof all);
  NT_CHECK(!strstr(all, "more") && strstr(all, ",1063"), "whole list: %s", all);
}

/* Two hosts of 8 ranks each SIGKILLed at once (a node-wide kill): the text
 * names all 16, as the JSON does.  Their rings lag: the watchdog last saw
 * seq 2 complete, while the peers completed 4 (which needs every rank), so
 * a killed rank's row says 4 done and blocked in the #5 it issued, or
 * nothing when it never issued #5; never "blocked in AllReduce #3". */
static void t_node_kill(void) {
  struct nta_job job;
  tb_job(&job);
  const int n = 24;
  for (int r = 0; r < n; r++) {
    struct ntt_image *img = world_rank(&job, r, n);
    tb_steps(img, W, 4, 0);
    if (r < 8) {
      tb_ar(img, W, 1024, 40, -1);
      tb_timeout(img, W, 5, 1040);
      tb_signal(img, SIGTERM, 1300);
      continue;
    }
    if (r != n - 1)
      tb_ar(img, W, 1024, 40, -1);
    struct ntr_comm_state *cs = tb_find(img, W);
    cs->last_completed = 2; /* the watchdog's last poll */
    cs->coll_seq = 3;
    for (uint64_t i = 0; i < img->nrecs; i++)
      if (img->recs[i].seq > 2 && img->recs[i].kind == NTR_KIND_ALLREDUCE) {
        img->recs[i].flags &= ~(uint32_t)NTR_REC_COMPLETED;
        img->recs[i].tsc_done = 0;
      }
    tb_vanish(img);
  }
  run(&job, "node_kill");
  NT_CHECK(job.v.cls == NTA_RANK_KILLED && job.v.nranks == 16, "got %s, %d ranks: %s", tb_cls(&job), job.v.nranks,
           job.v.summary);
  NT_CHECK(strstr(job.v.summary, "8-23") != NULL, "the text names every killed rank: %s", job.v.summary);
  const struct nta_comm *c = job.v.comm;
  for (int r = 8; c && r < n; r++) {
    const struct nta_member *m = nta_rank(c, r);
    char b[64];
    nta_blocked_in(m, b, sizeof b);
    const char *want = r == n - 1 ? "-" : "AllReduce #5";
    NT_CHECK(m->completed == 4 && strcmp(b, want) == 0, "rank %d: last done %llu, blocked in %s (want 4, %s)", r,
             (unsigned long long)m->completed, b, want);
  }
  nta_job_free(&job);
}

/* A silent rank while some input was unreadable: its evidence may be in
 * that file, so the text never says it left "no evidence at all". */
static void t_silent_unreadable(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 3; r++) {
    struct ntt_image *img = world_rank(&job, r, 4);
    tb_steps(img, W, 2, 0);
    tb_ar(img, W, 1024, 30, -1);
    tb_timeout(img, W, 3, 1030);
  }
  job.unreadable = calloc(1, sizeof(*job.unreadable));
  snprintf(job.unreadable[0].path, sizeof job.unreadable[0].path, "r3.zst");
  snprintf(job.unreadable[0].reason, sizeof job.unreadable[0].reason, "truncated");
  job.nunreadable = 1;
  run(&job, "silent_unreadable");
  NT_CHECK(job.v.cls == NTA_MISSING_COLL && !strstr(job.v.summary, "no evidence at all") &&
               !strstr(job.v.summary, "no evidence from") && strstr(job.v.summary, "may be among them"),
           "got %s: %s", tb_cls(&job), job.v.summary);
  nta_job_free(&job);
}

/* The SIGTERM dumps of the survivors lag too (their final watchdog pass
 * did not run): rank 0 saw 2 complete, ranks 1 and 3 nothing; rank 2,
 * SIGKILLed after issuing 2, never issued 3, so 3 completed nowhere. */
static void t_kill_stale_dumps(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 4; r++) {
    struct ntt_image *img = world_rank(&job, r, 4);
    tb_steps(img, W, 2, 0);
    if (r != 2)
      tb_ar(img, W, 1024, 20, -1);
    struct ntr_comm_state *cs = tb_find(img, W);
    if (r != 0) {
      cs->last_completed = 0;
      for (uint64_t i = 0; i < img->nrecs; i++) {
        img->recs[i].flags &= ~(uint32_t)NTR_REC_COMPLETED;
        img->recs[i].tsc_done = 0;
      }
    }
    if (r == 2)
      tb_vanish(img);
    else
      tb_signal(img, SIGTERM, 70);
  }
  run(&job, "kill_stale_dumps");
  const struct nta_comm *c = job.v.comm;
  for (int r = 0; c && r < 4; r++) {
    const struct nta_member *m = nta_rank(c, r);
    char b[64];
    nta_blocked_in(m, b, sizeof b);
    const char *want = r == 2 ? "-" : "AllReduce #3";
    NT_CHECK(m->completed == 2 && strcmp(b, want) == 0, "stale: rank %d: last done %llu, blocked in %s (want 2, %s)",
             r, (unsigned long long)m->completed, b, want);
  }
  NT_CHECK(job.v.cls == NTA_RANK_KILLED && job.v.nranks == 1 && job.v.ranks[0] == 2, "got %s: %s", tb_cls(&job),
           job.v.summary);
  nta_job_free(&job);
}

/* 280 of 300 ranks left nothing while the 20 others wait at seq 3: every
 * list of them that is cut says how many it left out (issue 28, point 3). */
static void t_many_absent(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 20; r++) {
    struct ntt_image *img = world_rank(&job, r, 300);
    tb_steps(img, W, 2, 0);
    tb_ar(img, W, 1024, 30, -1);
    tb_timeout(img, W, 3, 1030);
  }
  run(&job, "many_absent");
  NT_CHECK(job.v.cls == NTA_MISSING_COLL &&
               strstr(job.v.summary, ",83 and 216 more left no evidence"),
           "got %s: %s", tb_cls(&job), job.v.summary);
  const char *b = strstr(job.v.summary, "[no evidence from ranks ");
  NT_CHECK(b && strstr(b, " more]"), "the no-evidence list says what it left out: %s", job.v.summary);
  nta_job_free(&job);
}

/* A root-only Broadcast completes alone: rank 1's Broadcast #3 (root 1)
 * completed while ranks 0 and 2 wait in AllReduce #3, their SIGTERM dumps
 * lagging at 1.  Their rows take the peers' #2, never #3; #3 was pending
 * for over a second when they dumped, so it is no guess. */
static void t_stale_mismatch(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 3; r++) {
    struct ntt_image *img = world_rank(&job, r, 3);
    tb_steps(img, W, 2, 0);
    if (r == 1)
      tb_coll(img, W, NTR_KIND_BROADCAST, 1024, 7, -1, 1, 20, 21);
    else
      tb_ar(img, W, 1024, 20, -1);
    if (r != 1) {
      tb_find(img, W)->last_completed = 1;
      for (uint64_t i = 0; i < img->nrecs; i++)
        if (img->recs[i].seq == 2) {
          img->recs[i].flags &= ~(uint32_t)NTR_REC_COMPLETED;
          img->recs[i].tsc_done = 0;
        }
    }
    tb_signal(img, SIGTERM, 1300); /* the launcher's, after the watchdog's timeout */
  }
  run(&job, "stale_mismatch");
  const struct nta_comm *c = job.v.comm;
  for (int r = 0; c && r < 3; r += 2) {
    const struct nta_member *m = nta_rank(c, r);
    char b[64];
    nta_blocked_in(m, b, sizeof b);
    NT_CHECK(m->completed == 2 && strcmp(b, "AllReduce #3") == 0, "rank %d: last done %llu, blocked in %s", r,
             (unsigned long long)m->completed, b);
  }
  NT_CHECK(job.v.cls == NTA_COLL_MISMATCH, "got %s: %s", tb_cls(&job), job.v.summary);
  nta_job_free(&job);
}

/* A rank without completion tracking (its ops recorded without events):
 * it completed what its peers completed of the same calls, whatever its
 * own copy says (0); its blocked call stays a guess. */
static void t_untracked_fill(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 3; r++) {
    struct ntt_image *img = world_rank(&job, r, 3);
    tb_steps(img, W, 4, 0);
    tb_ar(img, W, 1024, 40, -1);
    if (r == 2) {
      tb_find(img, W)->last_completed = 0;
      for (uint64_t i = 0; i < img->nrecs; i++) {
        img->recs[i].flags &= ~(uint32_t)NTR_REC_COMPLETED;
        img->recs[i].flags |= NTR_REC_NO_TRACKING;
        img->recs[i].tsc_done = 0;
      }
    }
    tb_timeout(img, W, 5, 1040);
  }
  run(&job, "untracked_fill");
  const struct nta_member *m = job.v.comm ? nta_rank(job.v.comm, 2) : NULL;
  char b[64] = "";
  if (m)
    nta_blocked_in(m, b, sizeof b);
  NT_CHECK(m && !m->tracking && m->completed == 4 && strcmp(b, "AllReduce #5?") == 0,
           "untracked rank 2: last done %llu, blocked in %s", m ? (unsigned long long)m->completed : 0ull, b);
  nta_job_free(&job);
}

/* Rank 2 is SIGKILLed after #2; the others get ncclRemoteError, abort and
 * exit 1, and the abort drains their AllReduce #3, which their records then
 * show completed.  It never finished: their rows say 2 done, blocked in #3. */
static void t_drained_after_abort(void) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 3; r++) {
    struct ntt_image *img = world_rank(&job, r, 3);
    tb_steps(img, W, 2, 0);
    if (r == 2) {
      tb_vanish(img);
      continue;
    }
    tb_ar(img, W, 1024, 20, 1100); /* "completed" by the abort's drain */
    tb_rec(img, NTR_KIND_ASYNC_ERROR, NTR_PHASE_EVENT, W, 1050)->aux = 6; /* ncclRemoteError */
    tb_rec(img, NTR_KIND_COMM_ABORT, NTR_PHASE_CALL, W, 1060);
    tb_find(img, W)->lifecycle = NTR_COMM_ABORTED;
    tb_exit(img, 1, 1200);
  }
  run(&job, "drained_after_abort");
  for (int r = 0; job.v.comm && r < 2; r++) {
    const struct nta_member *m = nta_rank(job.v.comm, r);
    char b[64];
    nta_blocked_in(m, b, sizeof b);
    NT_CHECK(m->completed == 2 && strcmp(b, "AllReduce #3") == 0, "rank %d: last done %llu, blocked in %s", r,
             (unsigned long long)m->completed, b);
  }
  NT_CHECK(job.v.cls == NTA_RANK_KILLED && job.v.nranks == 1 && job.v.ranks[0] == 2, "got %s: %s", tb_cls(&job),
           job.v.summary);
  nta_job_free(&job);
}

/* Slow collectives (straggler.c): 60 AllReduces on 2 ranks with device
 * arrivals.  mode 0: every 10th is 256 MiB and holds 400 ms (a benchmark's
 * big size: slow only beside the small ones, so no finding); mode 1: seq 30
 * holds 300 ms with both ranks there (rank 1 0.2 ms after rank 0); mode 2:
 * rank 1 reaches seq 30 300 ms late. */
static void t_slow_coll(int mode) {
  struct nta_job job;
  tb_job(&job);
  struct ntt_image *img[2];
  for (int r = 0; r < 2; r++)
    img[r] = world_rank(&job, r, 2);
  double t = 0;
  for (int i = 1; i <= 60; i++) {
    int big = mode == 0 && i % 10 == 0;
    double held = big ? 400 : i == 30 && mode == 1 ? 300 : 1, late = i == 30 && mode == 2 ? 300 : 0;
    for (int r = 0; r < 2; r++) {
      double call = t + (r ? 0.2 + late : 0);
      tb_coll(img[r], W, NTR_KIND_ALLREDUCE, big ? 1ull << 26 : 1024, 7, 0, -1, call, t + 0.2 + late + held);
      struct ntr_record *d = tb_rec(img[r], NTR_KIND_DEV_ARRIVE, NTR_PHASE_EVENT, W, call);
      d->seq = (uint64_t)i;
      d->count = tb_tsc(img[r], call);
    }
    t += held + late + 10;
  }
  for (int r = 0; r < 2; r++)
    tb_exit(img[r], 0, t + 10);
  run(&job, mode == 0 ? "slow_coll_shapes" : mode == 1 ? "slow_coll_itself" : "slow_coll_late");
  if (mode == 0) {
    NT_CHECK(job.v.cls == NTA_HEALTHY, "got %s: %s", tb_cls(&job), job.v.summary);
  } else {
    NT_CHECK(job.v.cls == NTA_SLOW_COLL && job.v.seq == 30 && tb_has_rank(&job.v, 1) && job.v.strag &&
                 job.v.strag->nslow == 1,
             "got %s seq %llu: %s", tb_cls(&job), (unsigned long long)job.v.seq, job.v.summary);
    const struct nta_slow *w = job.v.strag ? &job.v.strag->slow[0] : NULL;
    if (w && mode == 1)
      NT_CHECK(w->last_ms < 1 && w->took_ms > 290 && w->usual_ms < 2 &&
                   strstr(job.v.summary, "the collective itself took the rest") != NULL,
               "%s", job.v.summary);
    if (w && mode == 2)
      NT_CHECK(w->last_ms > 290 && w->took_ms < 5 && strstr(job.v.summary, "the others waited for it") != NULL,
               "%s", job.v.summary);
  }
  nta_job_free(&job);
}

int main(void) {
  t_drained_after_abort();
  t_untracked_fill();
  t_stale_mismatch();
  t_many_absent();
  t_silent_unreadable();
  t_kill_stale_dumps();
  t_node_kill();
  t_many_waiting();
  t_healthy();
  t_bcast_alias();
  t_op_mismatch();
  t_op_mismatch_ahead();
  t_field("count", NTR_KIND_REDUCE, 8, 7, 0, 0);
  t_field("dtype", NTR_KIND_REDUCE, 4, 9, 0, 0);
  t_field("redop", NTR_KIND_REDUCE, 4, 7, 2, 0);
  t_field("root", NTR_KIND_REDUCE, 4, 7, 0, 1);
  t_field("op", NTR_KIND_ALLREDUCE, 4, 7, 0, -1);
  t_steady_skip();
  t_exit42();
  t_lazy_init();
  t_segv();
  t_killed();
  t_stall_with_victims();
  t_env_stall();
  t_env_refused();
  t_env_harmless();
  t_app_abort();
  t_teardown_abort();
  t_abort_after_stuck();
  t_async_error();
  t_p2p();
  t_p2p_peer();
  t_p2p_peer_eager();
  t_p2p_eager_behind();
  t_split_group();
  t_split_ahead();
  t_split_hang();
  t_merge();
  t_no_evidence();
  t_scale();
  t_clocks();
  t_escapes();
  t_hostile_nranks();
  t_slow_coll(0);
  t_slow_coll(1);
  t_slow_coll(2);
  if (nt_failures)
    fprintf(stderr, "%d check(s) failed\n", nt_failures);
  return nt_exit_status();
}

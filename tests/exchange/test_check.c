/* test_check.c -- the coordinator's comparison logic without sockets:
 * collective mismatches (majority names the culprit, two ranks name both),
 * agreement stays silent, send/recv pairing, strict replies, gaps, window
 * eviction, init wait, skew, environment differences, lost clients. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "interpose/exchange/check.h"
#include "interpose/exchange/check_int.h"
#include "interpose/exchange/record_fp.h"
#include "recorder/format.h"

#include "tests/nt_test.h"

struct ev {
  int is_reply;
  uint32_t client, kind, req;
  int32_t peer, status;
  uint64_t comm, seq;
  int64_t aux;
  char field[32], text[2048];
};
static struct ev evs[256];
static int nev;
static unsigned mm_told[1024]; /* MISMATCH verdicts per client, past the 256 kept in evs */

static void on_verdict(void *ctx, uint32_t client, uint32_t kind, uint64_t comm_id, uint64_t seq,
                       int32_t peer, int64_t aux, const char *field, const char *text) {
  (void)ctx;
  if (kind == NTX_V_MISMATCH && client < 1024)
    mm_told[client]++;
  if (nev == 256)
    return;
  struct ev *e = &evs[nev++];
  memset(e, 0, sizeof *e);
  e->client = client; e->kind = kind; e->comm = comm_id; e->seq = seq; e->peer = peer; e->aux = aux;
  snprintf(e->field, sizeof e->field, "%s", field ? field : "");
  snprintf(e->text, sizeof e->text, "%s", text ? text : "");
}
static void on_reply(void *ctx, uint32_t client, uint32_t req_id, int32_t status, const char *text) {
  (void)ctx;
  if (nev == 256)
    return;
  struct ev *e = &evs[nev++];
  memset(e, 0, sizeof *e);
  e->is_reply = 1; e->client = client; e->req = req_id; e->status = status;
  snprintf(e->text, sizeof e->text, "%s", text ? text : "");
}

static int count(uint32_t kind) {
  int n = 0;
  for (int i = 0; i < nev; i++)
    n += !evs[i].is_reply && evs[i].kind == kind;
  return n;
}
static const struct ev *find(uint32_t kind, uint32_t client) {
  for (int i = 0; i < nev; i++)
    if (!evs[i].is_reply && evs[i].kind == kind && evs[i].client == client)
      return &evs[i];
  return NULL;
}
static const struct ev *reply(uint32_t client, uint32_t req) {
  for (int i = 0; i < nev; i++)
    if (evs[i].is_reply && evs[i].client == client && evs[i].req == req)
      return &evs[i];
  return NULL;
}

static const struct ntx_check_ops ops = {on_verdict, on_reply};
#define COMM 0x9f2c0123456789abull

static struct ntx_check *setup(int nranks, const struct ntx_check_limits *lim) {
  struct ntx_check_limits l;
  ntx_check_default_limits(&l);
  l.max_clients = 64;
  l.skew_s = 5;
  l.init_wait_s = 3;
  if (lim)
    l = *lim;
  struct ntx_check *c = ntx_check_new(&l, &ops, NULL);
  nev = 0;
  char host[16];
  for (int r = 0; r < nranks; r++) {
    snprintf(host, sizeof host, "node%d", r);
    ntx_check_client_add(c, (uint32_t)r, host, 1000 + r, r);
    ntx_check_register(c, (uint32_t)r, COMM, r, nranks, 22809, "NCCL_PROTO=Simple", 18, 0.0);
  }
  return c;
}

static struct ntx_fp coll(int rank, uint64_t seq, unsigned kind, uint64_t count, int redop, int root) {
  struct ntx_fp f = {.comm_id = COMM, .seq = seq, .count = count, .kind = (uint16_t)kind,
                     .dtype = 7, .dir = NTX_FP_COLL, .redop = redop, .peer = root, .rank = rank};
  return f;
}

static void test_agree_and_majority(void) {
  struct ntx_check *c = setup(4, NULL);
  NT_CHECK(count(NTX_V_ENV_DONE) == 4 && count(NTX_V_ENV_DIFF) == 0);
  nev = 0;
  for (uint64_t s = 1; s <= 3; s++)
    for (int r = 0; r < 4; r++) {
      struct ntx_fp f = coll(r, s, NTR_KIND_ALLREDUCE, 64, 0, -1);
      ntx_check_fp(c, (uint32_t)r, &f, 1.0);
    }
  NT_CHECK(nev == 0);
  /* seq 4: rank 1 Broadcast, the rest AllReduce; rank 1 arrives second */
  struct ntx_fp f0 = coll(0, 4, NTR_KIND_ALLREDUCE, 64, 0, -1), f1 = coll(1, 4, NTR_KIND_BROADCAST, 64, -1, 0);
  ntx_check_fp(c, 0, &f0, 2.0);
  ntx_check_fp(c, 1, &f1, 2.0);
  f0.rank = 2;
  ntx_check_fp(c, 2, &f0, 2.0);
  NT_CHECK(count(NTX_V_MISMATCH) == 0); /* not everyone is there yet: majority unknown */
  f0.rank = 3;
  ntx_check_fp(c, 3, &f0, 2.0);
  NT_CHECK(count(NTX_V_MISMATCH) == 4); /* every rank told, once */
  const struct ev *e = find(NTX_V_MISMATCH, 2);
  NT_CHECK(e && e->seq == 4 && e->peer == 1 && !strcmp(e->field, "op"));
  NT_CHECK(e && !strcmp(e->text, "mismatch on comm 9f2c0123 seq 4 field op: rank 1 Broadcast(count=64, float32, "
                                "root=0) vs ranks 0,2,3 AllReduce(count=64, float32, sum)"));
  if (e)
    printf("  %s\n", e->text);
  /* the next disagreement on the same comm is not news (async) */
  nev = 0;
  for (int r = 0; r < 4; r++) {
    struct ntx_fp f = coll(r, 5, r == 3 ? NTR_KIND_ALLGATHER : NTR_KIND_ALLREDUCE, 64, r == 3 ? -1 : 0, -1);
    ntx_check_fp(c, (uint32_t)r, &f, 3.0);
  }
  NT_CHECK(count(NTX_V_MISMATCH) == 0 && ntx_check_get_stats(c)->mismatches == 2);
  ntx_check_free(c);
}

static void test_two_ranks_and_fields(void) {
  struct ntx_check *c = setup(2, NULL);
  nev = 0;
  struct ntx_fp a = coll(0, 1, NTR_KIND_ALLREDUCE, 64, 0, -1), b = coll(1, 1, NTR_KIND_ALLREDUCE, 32, 0, -1);
  ntx_check_fp(c, 1, &b, 1.0);
  ntx_check_fp(c, 0, &a, 1.0);
  const struct ev *e = find(NTX_V_MISMATCH, 0);
  NT_CHECK(e && !strcmp(e->field, "count"));
  /* both named, with both values */
  NT_CHECK(e && strstr(e->text, "rank 0 AllReduce(count=64") && strstr(e->text, "rank 1 AllReduce(count=32") &&
         strstr(e->text, "no majority"));
  if (e)
    printf("  %s\n", e->text);
  ntx_check_free(c);

  static const struct { unsigned k2; int redop2, root2, dtype2; const char *field; } cases[] = {
      {NTR_KIND_ALLREDUCE, 1, -1, 7, "redop"},
      {NTR_KIND_BROADCAST, -1, 1, 7, "root"},
      {NTR_KIND_ALLREDUCE, 0, -1, 9, "dtype"},
  };
  for (unsigned i = 0; i < 3; i++) {
    c = setup(3, NULL);
    nev = 0;
    unsigned k1 = cases[i].k2;
    int redop1 = k1 == NTR_KIND_BROADCAST ? -1 : 0, root1 = k1 == NTR_KIND_BROADCAST ? 0 : -1;
    for (int r = 0; r < 3; r++) {
      struct ntx_fp f = r == 2 ? coll(r, 1, cases[i].k2, 8, cases[i].redop2, cases[i].root2)
                               : coll(r, 1, k1, 8, redop1, root1);
      if (r == 2)
        f.dtype = (uint8_t)cases[i].dtype2;
      ntx_check_fp(c, (uint32_t)r, &f, 1.0);
    }
    e = find(NTX_V_MISMATCH, 0);
    NT_CHECK(e && !strcmp(e->field, cases[i].field) && e->peer == 2);
    ntx_check_free(c);
  }
}

static void test_p2p(void) {
  struct ntx_check *c = setup(2, NULL);
  nev = 0;
  struct ntx_fp s = {.comm_id = COMM, .seq = 1, .count = 64, .kind = NTR_KIND_SEND, .dtype = 7,
                     .dir = NTX_FP_SEND, .redop = -1, .peer = 1, .rank = 0};
  struct ntx_fp r = s;
  r.kind = NTR_KIND_RECV; r.dir = NTX_FP_RECV; r.peer = 0; r.rank = 1;
  ntx_check_fp(c, 0, &s, 1.0);
  ntx_check_fp(c, 1, &r, 1.0);
  NT_CHECK(nev == 0);
  s.seq = r.seq = 2;
  r.count = 32;
  ntx_check_fp(c, 1, &r, 1.0); /* recv first this time */
  ntx_check_fp(c, 0, &s, 1.0);
  const struct ev *e = find(NTX_V_P2P_MISMATCH, 1);
  NT_CHECK(count(NTX_V_P2P_MISMATCH) == 2 && e && !strcmp(e->field, "count") && e->seq == 2);
  if (e)
    printf("  %s\n", e->text);
  ntx_check_free(c);
  /* wrong peer: rank 2 sends to 0 where rank 3 waits for rank 2 */
  c = setup(4, NULL);
  nev = 0;
  struct ntx_fp ws = {.comm_id = COMM, .seq = 1, .count = 64, .kind = NTR_KIND_SEND, .dtype = 7,
                      .dir = NTX_FP_SEND, .redop = -1, .peer = 0, .rank = 2};
  struct ntx_fp wr = ws;
  wr.kind = NTR_KIND_RECV; wr.dir = NTX_FP_RECV; wr.peer = 2; wr.rank = 3;
  ntx_check_fp(c, 2, &ws, 10.0);
  ntx_check_fp(c, 3, &wr, 10.0);
  ntx_check_tick(c, 10.5);
  NT_CHECK(count(NTX_V_P2P_MISMATCH) == 0); /* within the grace period: maybe just late */
  ntx_check_tick(c, 11.2);
  e = find(NTX_V_P2P_MISMATCH, 0);
  NT_CHECK(count(NTX_V_P2P_MISMATCH) == 4 && e && !strcmp(e->field, "peer") && e->peer == 2 && e->aux == 3);
  if (e)
    printf("  %s\n", e->text);
  ntx_check_tick(c, 12.0);
  NT_CHECK(count(NTX_V_P2P_MISMATCH) == 4);
  /* a send to a rank outside the comm is ignored, not crashed on */
  s.peer = 7;
  ntx_check_fp(c, 0, &s, 1.0);
  NT_CHECK(ntx_check_get_stats(c)->unregistered == 1);
  ntx_check_free(c);
}

static void test_strict(void) {
  struct ntx_check *c = setup(3, NULL);
  nev = 0;
  struct ntx_fp f[3];
  for (int r = 0; r < 3; r++)
    f[r] = coll(r, 1, NTR_KIND_ALLREDUCE, 16, 0, -1);
  ntx_check_strict(c, 0, 10, &f[0], 1, 1.0);
  ntx_check_strict(c, 1, 11, &f[1], 1, 1.0);
  NT_CHECK(nev == 0); /* rank 2 not there: nobody answered */
  ntx_check_strict(c, 2, 12, &f[2], 1, 1.0);
  NT_CHECK(reply(0, 10) && reply(0, 10)->status == NTX_REPLY_OK && reply(1, 11) && reply(2, 12));
  /* seq 2 disagrees: every involved rank gets the mismatch */
  nev = 0;
  for (int r = 0; r < 3; r++)
    f[r] = coll(r, 2, r == 1 ? NTR_KIND_BROADCAST : NTR_KIND_ALLREDUCE, 16, r == 1 ? -1 : 0, r == 1 ? 0 : -1);
  for (int r = 0; r < 3; r++)
    ntx_check_strict(c, (uint32_t)r, 20 + (uint32_t)r, &f[r], 1, 1.0);
  for (int r = 0; r < 3; r++) {
    const struct ev *e = reply((uint32_t)r, 20 + (uint32_t)r);
    NT_CHECK(e && e->status == NTX_REPLY_MISMATCH && strstr(e->text, "seq 2 field op"));
  }
  /* a group: collective + send/recv in one request */
  nev = 0;
  struct ntx_fp g0[2] = {coll(0, 3, NTR_KIND_ALLREDUCE, 16, 0, -1),
                         {.comm_id = COMM, .seq = 1, .count = 8, .kind = NTR_KIND_SEND, .dtype = 7,
                          .dir = NTX_FP_SEND, .redop = -1, .peer = 1, .rank = 0}};
  struct ntx_fp g1[2] = {coll(1, 3, NTR_KIND_ALLREDUCE, 16, 0, -1),
                         {.comm_id = COMM, .seq = 1, .count = 8, .kind = NTR_KIND_RECV, .dtype = 7,
                          .dir = NTX_FP_RECV, .redop = -1, .peer = 0, .rank = 1}};
  struct ntx_fp g2 = coll(2, 3, NTR_KIND_ALLREDUCE, 16, 0, -1);
  ntx_check_strict(c, 0, 30, g0, 2, 1.0);
  ntx_check_strict(c, 1, 31, g1, 2, 1.0);
  NT_CHECK(!reply(0, 30));
  ntx_check_strict(c, 2, 32, &g2, 1, 1.0);
  NT_CHECK(reply(0, 30) && reply(0, 30)->status == NTX_REPLY_OK && reply(1, 31) && reply(2, 32));
  /* a strict request for a seq the ring already delivered still gets its answer */
  nev = 0;
  for (int r = 0; r < 3; r++) {
    f[r] = coll(r, 4, NTR_KIND_ALLREDUCE, 16, 0, -1);
    ntx_check_fp(c, (uint32_t)r, &f[r], 1.0);
  }
  ntx_check_strict(c, 0, 40, &f[0], 1, 1.0);
  NT_CHECK(reply(0, 40) && reply(0, 40)->status == NTX_REPLY_OK);
  ntx_check_free(c);
}

static void test_time_and_liveness(void) {
  struct ntx_check_limits l;
  ntx_check_default_limits(&l);
  l.max_clients = 64;
  l.skew_s = 5;
  l.init_wait_s = 3;
  l.window = 16;
  struct ntx_check *c = ntx_check_new(&l, &ops, NULL);
  nev = 0;
  for (int r = 0; r < 3; r++) { /* 3 of 4 ranks ever come */
    ntx_check_client_add(c, (uint32_t)r, "h", 100 + r, r);
    ntx_check_register(c, (uint32_t)r, COMM, r, 4, 1, "", 0, 0.0);
  }
  ntx_check_tick(c, 2.0);
  NT_CHECK(count(NTX_V_INIT_WAIT) == 0);
  ntx_check_tick(c, 3.5);
  const struct ev *e = find(NTX_V_INIT_WAIT, 0);
  NT_CHECK(count(NTX_V_INIT_WAIT) == 3 && e && e->peer == 3 && strstr(e->text, "waiting for rank 3 (never joined)"));
  if (e)
    printf("  %s\n", e->text);
  ntx_check_client_add(c, 3, "h", 103, 3);
  ntx_check_register(c, 3, COMM, 3, 4, 1, "", 0, 4.0);
  /* skew: ranks 0-2 reach seq 1, rank 3 does not */
  nev = 0;
  for (int r = 0; r < 3; r++) {
    struct ntx_fp f = coll(r, 1, NTR_KIND_ALLREDUCE, 1, 0, -1);
    ntx_check_fp(c, (uint32_t)r, &f, 10.0);
  }
  ntx_check_tick(c, 14.0);
  NT_CHECK(count(NTX_V_SKEW) == 0);
  ntx_check_tick(c, 15.5);
  e = find(NTX_V_SKEW, 0);
  NT_CHECK(count(NTX_V_SKEW) == 4 && e && e->peer == 3 && e->seq == 1 && strstr(e->text, "not reached seq 1"));
  if (e)
    printf("  %s\n", e->text);
  ntx_check_tick(c, 16.0);
  NT_CHECK(count(NTX_V_SKEW) == 4); /* once per stuck seq */
  /* window: ranks 0-2 run 40 seqs ahead of a 16-slot window; nothing breaks */
  for (uint64_t s = 2; s <= 40; s++)
    for (int r = 0; r < 3; r++) {
      struct ntx_fp f = coll(r, s, NTR_KIND_ALLREDUCE, 1, 0, -1);
      ntx_check_fp(c, (uint32_t)r, &f, 17.0);
    }
  NT_CHECK(ntx_check_get_stats(c)->evicted >= 24);
  /* rank 3 catches up with a gap (its records were dropped): no false verdict */
  nev = 0;
  struct ntx_fp f3 = coll(3, 40, NTR_KIND_ALLREDUCE, 1, 0, -1);
  ntx_check_fp(c, 3, &f3, 18.0);
  NT_CHECK(count(NTX_V_MISMATCH) == 0);
  /* lost: rank 2 disconnects without BYE, the others hear it; a BYE is silent */
  nev = 0;
  ntx_check_client_gone(c, 1, 1, 19.0);
  NT_CHECK(nev == 0);
  ntx_check_client_gone(c, 2, 0, 19.0);
  e = find(NTX_V_PEER_LOST, 0);
  NT_CHECK(count(NTX_V_PEER_LOST) == 2 && e && e->peer == 2 && strstr(e->text, "lost rank 2 (host h, pid 102)"));
  if (e)
    printf("  %s\n", e->text);
  ntx_check_free(c);
}

static void test_env(void) {
  struct ntx_check_limits l;
  ntx_check_default_limits(&l);
  l.max_clients = 8;
  struct ntx_check *c = ntx_check_new(&l, &ops, NULL);
  nev = 0;
  static const char e0[] = "NCCL_PROTO=Simple\0NCCL_ALGO=Ring";
  static const char e1[] = "NCCL_ALGO=Ring\0NCCL_PROTO=Simple"; /* same, other order */
  static const char e2[] = "NCCL_PROTO=LL\0NCCL_ALGO=Ring\0NCCL_IB_HCA=mlx5";
  ntx_check_client_add(c, 0, "h", 1, 0);
  ntx_check_client_add(c, 1, "h", 2, 1);
  ntx_check_client_add(c, 2, "h", 3, 2);
  /* the odd one registers first: the majority, not the first, is the reference */
  ntx_check_register(c, 2, COMM, 2, 3, 22809, e2, sizeof e2, 0);
  ntx_check_register(c, 0, COMM, 0, 3, 22809, e0, sizeof e0, 0);
  NT_CHECK(nev == 0);
  ntx_check_register(c, 1, COMM, 1, 3, 22809, e1, sizeof e1, 0);
  NT_CHECK(count(NTX_V_ENV_DIFF) == 6); /* 2 variables x 3 ranks */
  const struct ev *e = find(NTX_V_ENV_DIFF, 1);
  NT_CHECK(e && !strcmp(e->field, "NCCL_PROTO") && strstr(e->text, "rank 2 has 'LL' vs ranks 0,1 have 'Simple'"));
  if (e)
    printf("  %s\n", e->text);
  e = find(NTX_V_ENV_DONE, 1);
  NT_CHECK(count(NTX_V_ENV_DONE) == 3 && e && e->aux == 1);
  ntx_check_free(c);
}

/* The scale the coordinator is built for: 1,024 ranks on one comm, every
 * fingerprint O(1).  1,000 collectives of 1,024 ranks must take well under
 * a second of CPU (the benchmark drives 1,000 collectives/s). */
static void test_scale(void) {
  struct ntx_check_limits l;
  ntx_check_default_limits(&l);
  l.max_clients = 1024;
  struct ntx_check *c = ntx_check_new(&l, &ops, NULL);
  nev = 0;
  for (int r = 0; r < 1024; r++) {
    ntx_check_client_add(c, (uint32_t)r, "h", r, r);
    ntx_check_register(c, (uint32_t)r, COMM, r, 1024, 1, "NCCL_PROTO=Simple", 18, 0.0);
  }
  nev = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (uint64_t s = 1; s <= 1000; s++)
    for (int r = 0; r < 1024; r++) {
      struct ntx_fp f = coll(r, s, NTR_KIND_ALLREDUCE, 1024, 0, -1);
      ntx_check_fp(c, (uint32_t)r, &f, 1.0);
    }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double dt = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
  printf("  1,024,000 fingerprints of 1,024 ranks checked in %.3f s (%.0f ns each)\n", dt, dt * 1e9 / 1024000);
  NT_CHECK(nev == 0 && ntx_check_get_stats(c)->fps == 1024000);
  NT_CHECK(dt < 2.0); /* with room for a sanitizer build on a loaded machine */
  ntx_check_free(c);
}

/* Node aggregators: a client that holds the ranks of several processes.
 * A verdict reaches each aggregator once (the "told" stamp), GONE marks one
 * process's ranks and names it to the others, a hand-over re-registers. */
static void test_aggregators(void) {
  struct ntx_check_limits l;
  ntx_check_default_limits(&l);
  l.max_clients = 1024;
  struct ntx_check *c = ntx_check_new(&l, &ops, NULL);
  /* 4,096 ranks behind 512 aggregators of 8 */
  for (uint32_t a = 0; a < 512; a++) {
    char host[16];
    snprintf(host, sizeof host, "node%u", a);
    ntx_check_client_add(c, a, host, 5000 + (int)a, -1);
    ntx_check_client_set_agg(c, a);
    for (int k = 0; k < 8; k++)
      ntx_check_register(c, a, COMM, (int)a * 8 + k, 4096, 1, "", 0, 0.0);
  }
  nev = 0;
  memset(mm_told, 0, sizeof mm_told);
  for (int r = 0; r < 4096; r++) {
    struct ntx_fp f = coll(r, 1, r == 4095 ? NTR_KIND_BROADCAST : NTR_KIND_ALLREDUCE, 64, 0, 0);
    ntx_check_fp(c, (uint32_t)r / 8, &f, 1.0);
  }
  int once_each = 1;
  for (int a = 0; a < 512; a++)
    once_each &= mm_told[a] == 1;
  NT_CHECK(once_each); /* each aggregator exactly once, though it holds 8 ranks of the comm */
  const struct ev *e = find(NTX_V_MISMATCH, 0);
  NT_CHECK(e && e->peer == 4095 && strstr(e->text, "rank 4095 Broadcast"));
  /* GONE (lost) of rank 17's process behind aggregator 2: everybody else hears
   * it, named; the sender does not (it told its own processes) */
  uint8_t pairs[2 * NTX_GONE_WIRE];
  ntx_gone_put(pairs, 0, COMM, 17);
  ntx_gone_put(pairs, 1, COMM, 3); /* not held by aggregator 2: ignored */
  nev = 0;
  NT_CHECK(ntx_check_gone(c, 2, "node2", 4217, 17, 0, pairs, 2, 2.0) == 0);
  e = find(NTX_V_PEER_LOST, 0);
  NT_CHECK(count(NTX_V_PEER_LOST) >= 255 && !find(NTX_V_PEER_LOST, 2) && e && e->peer == 17 &&
         strstr(e->text, "lost rank 17 (host node2, pid 4217)") && strstr(e->text, "it was rank 17 of comm"));
  if (e)
    printf("  %s\n", e->text);
  /* a clean GONE is silent; GONE from a client that is no aggregator is refused */
  ntx_gone_put(pairs, 0, COMM, 18);
  nev = 0;
  NT_CHECK(ntx_check_gone(c, 2, "node2", 4218, 18, 1, pairs, 1, 2.0) == 0 && nev == 0);
  ntx_check_client_add(c, 600, "plain", 1, 1);
  NT_CHECK(ntx_check_gone(c, 600, "x", 1, 1, 0, pairs, 1, 2.0) < 0);
  /* hand-over: aggregator 3 says BYE, rank 24 registers again through a
   * new aggregator 601 and its fingerprints count */
  nev = 0;
  ntx_check_client_gone(c, 3, 1, 3.0);
  NT_CHECK(nev == 0);
  ntx_check_client_add(c, 601, "node3", 6001, -1);
  ntx_check_client_set_agg(c, 601);
  ntx_check_register(c, 601, COMM, 24, 4096, 1, "", 0, 3.0);
  uint64_t unreg = ntx_check_get_stats(c)->unregistered;
  struct ntx_fp f = coll(24, 2, NTR_KIND_ALLREDUCE, 64, 0, 0);
  ntx_check_fp(c, 601, &f, 3.0);
  NT_CHECK(ntx_check_get_stats(c)->unregistered == unreg);
  ntx_check_fp(c, 3, &f, 3.0); /* the old one is gone */
  NT_CHECK(ntx_check_get_stats(c)->unregistered == unreg + 1);
  /* losing an aggregator names the process that hosted it and every rank
   * behind it (a host or its link lost takes them all at once) */
  ntx_check_register(c, 601, COMM, 25, 4096, 1, "", 0, 3.0);
  nev = 0;
  ntx_check_client_gone(c, 601, 0, 4.0);
  e = find(NTX_V_PEER_LOST, 0);
  NT_CHECK(e && strstr(e->text, "the process hosting the node aggregator of host node3 (pid 6001") &&
           strstr(e->text, "ranks 24,25 of comm") && strstr(e->text, "were behind it"));
  if (e)
    printf("  %s\n", e->text);
  ntx_check_free(c);
}

/* A verdict to a comm of 65,536 ranks, one process each, is O(members):
 * an O(members^2) scan takes seconds at this size. */
static void test_fanout(void) {
  enum { N = 65536 };
  struct ntx_check_limits l;
  ntx_check_default_limits(&l);
  l.max_clients = N;
  struct ntx_check *c = ntx_check_new(&l, &ops, NULL);
  for (int r = 0; r < N; r++) {
    ntx_check_client_add(c, (uint32_t)r, "h", r, r);
    ntx_check_register(c, (uint32_t)r, COMM, r, N, 1, "", 0, 0.0);
  }
  nev = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ntx_tell_comm(c, ntx_comm_find(c, COMM), NTX_V_NOTE, 0, -1, 0, "x", "note");
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double dt = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
  printf("  one verdict to 65,536 ranks of 65,536 processes in %.2f ms\n", dt * 1e3);
  NT_CHECK(nev == 256 && evs[255].client == 255); /* evs keeps the first 256, in rank order */
  NT_CHECK(dt < 0.2); /* generous for sanitizer builds on a loaded machine */
  ntx_check_free(c);
}

/* What the client sends for a ring record. */
static void test_record_fp(void) {
  struct ntr_record r;
  struct ntx_fp f;
  memset(&r, 0, sizeof r);
  r.comm_id = COMM;
  r.kind = NTR_KIND_BCAST;
  r.phase = NTR_PHASE_CALL;
  r.seq = 9;
  r.count = 5;
  r.dtype = 7;
  r.redop = -1;
  r.peer = 2;
  r.rank = 1;
  NT_CHECK(ntx_fp_from_record(&r, &f) == 0 && f.kind == NTR_KIND_BROADCAST && f.dir == NTX_FP_COLL &&
         f.seq == 9 && f.peer == 2 && f.rank == 1 && f.count == 5);
  r.kind = NTR_KIND_RECV;
  NT_CHECK(ntx_fp_from_record(&r, &f) == 0 && f.dir == NTX_FP_RECV && f.redop == -1);
  r.phase = NTR_PHASE_EXIT;
  NT_CHECK(ntx_fp_from_record(&r, &f) < 0);
  r.phase = NTR_PHASE_CALL;
  r.flags = NTR_REC_STRICT_REFUSED;
  NT_CHECK(ntx_fp_from_record(&r, &f) < 0);
  r.flags = 0;
  r.kind = NTR_KIND_GROUP_END;
  NT_CHECK(ntx_fp_from_record(&r, &f) < 0);
  r.kind = NTR_KIND_MISMATCH;
  NT_CHECK(ntx_fp_from_record(&r, &f) < 0);
}

int main(void) {
  test_record_fp();
  test_scale();
  test_agree_and_majority();
  test_two_ranks_and_fields();
  test_p2p();
  test_strict();
  test_time_and_liveness();
  test_env();
  test_aggregators();
  test_fanout();
  if (nt_failures)
    fprintf(stderr, "test_check: %d nt_failures\n", nt_failures);
  else
    printf("test_check: ok\n");
  return nt_exit_status();
}

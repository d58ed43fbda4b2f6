/* test_lateness.c -- the coordinator's lateness statistics without
 * sockets (lateness.c) and the clock offset estimator (clocksync.c):
 * random jitter stays quiet; a rank 15 ms late at every seq is named once
 * per report interval with its median; one 2 s stall is named at once with
 * its seq; each rank is told its median lateness; clock offsets are taken
 * out of arrival times; a large uncertainty names nobody; the min-RTT
 * sample wins.  Device arrivals (FP entries of dir 3): a GPU 20 ms slow
 * behind a host that runs ahead is named "at the device" from sampled
 * seqs, with seqs after a host barrier (nobody late) between; devices that
 * jitter stay quiet; a seq one rank never sampled completes nothing; a
 * host whose round trips are slow is named with its ranks, only against
 * other hosts and after 8 of them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interpose/exchange/check.h"
#include "interpose/exchange/clocksync.h"
#include "recorder/format.h"

#include "tests/nt_test.h"

#define COMM 0x9f2c0123456789abull
#define NR 4
#define T0 1700000000000000000ull

static struct { uint32_t client, kind; uint64_t seq; int32_t peer; int64_t aux; char field[32], text[512]; } evs[4096];
static int nev;

static void on_verdict(void *ctx, uint32_t client, uint32_t kind, uint64_t comm_id, uint64_t seq, int32_t peer,
                       int64_t aux, const char *field, const char *text) {
  (void)ctx;
  (void)comm_id;
  if (nev == 4096 || kind == NTX_V_ENV_DONE)
    return;
  evs[nev].client = client;
  evs[nev].kind = kind;
  evs[nev].seq = seq;
  evs[nev].peer = peer;
  evs[nev].aux = aux;
  snprintf(evs[nev].field, sizeof evs[nev].field, "%s", field ? field : "");
  snprintf(evs[nev].text, sizeof evs[nev].text, "%s", text ? text : "");
  nev++;
}
static void on_reply(void *ctx, uint32_t client, uint32_t req_id, int32_t status, const char *text) {
  (void)ctx; (void)client; (void)req_id; (void)status; (void)text;
}
static const struct ntx_check_ops ops = {on_verdict, on_reply};

static int count(uint32_t kind, uint32_t client) {
  int n = 0;
  for (int i = 0; i < nev; i++)
    n += evs[i].kind == kind && evs[i].client == client;
  return n;
}

static struct ntx_check *setup_hosts(const char *const hosts[NR]) {
  struct ntx_check_limits l;
  ntx_check_default_limits(&l);
  l.max_clients = 16;
  l.skew_s = 1e9;
  struct ntx_check *c = ntx_check_new(&l, &ops, NULL);
  for (int r = 0; r < NR; r++) {
    char host[16];
    snprintf(host, sizeof host, "node%d", r);
    ntx_check_client_add(c, (uint32_t)r, hosts ? hosts[r] : host, 1000 + r, r);
    ntx_check_register(c, (uint32_t)r, COMM, r, NR, 22809, "", 0, 0.0);
  }
  nev = 0;
  return c;
}

static struct ntx_check *setup(void) { return setup_hosts(NULL); }

/* Seq s: rank r called at T0 + s * 100 ms + late(r) on its own clock
 * (clock offset off[r]); the coordinator's time is s * 0.1 s. */
static void step(struct ntx_check *c, uint64_t s, const uint64_t late_ns[NR], const int64_t off[NR]) {
  for (int r = 0; r < NR; r++) {
    struct ntx_fp f = {.comm_id = COMM, .seq = s, .count = 64, .kind = NTR_KIND_ALLREDUCE, .dtype = 7,
                       .dir = NTX_FP_COLL, .redop = 0, .peer = -1, .rank = r};
    f.t_ns = T0 + s * 100000000ull + late_ns[r] + (uint64_t)off[r];
    ntx_check_fp(c, (uint32_t)r, &f, (double)s * 0.1);
  }
}

static uint64_t jitter(void) { return (uint64_t)(rand() % 4000) * 1000ull; } /* 0-4 ms */

static void test_jitter_quiet(void) {
  struct ntx_check *c = setup();
  int64_t off[NR] = {0};
  srand(1);
  for (uint64_t s = 1; s <= 2000; s++) {
    uint64_t late[NR];
    for (int r = 0; r < NR; r++)
      late[r] = jitter();
    step(c, s, late, off);
    if (s % 50 == 0)
      ntx_check_tick(c, (double)s * 0.1);
  }
  NT_CHECK(count(NTX_V_STRAGGLER, 0) == 0);
  NT_CHECK(count(NTX_V_LATENESS, 2) >= 1); /* each rank is told its own median */
  for (int i = 0; i < nev; i++)
    if (evs[i].kind == NTX_V_LATENESS)
      NT_CHECK(evs[i].aux < 5000 && evs[i].peer == (int32_t)evs[i].client);
  NT_CHECK(ntx_check_get_stats(c)->timed == 2000);
  ntx_check_free(c);
}

static void test_slow_rank(void) {
  struct ntx_check *c = setup();
  /* rank 1's clock runs 3 s ahead and rank 3's 2 s behind: the estimates
   * take it out, 20 us uncertain */
  int64_t off[NR] = {0, 3000000000ll, 0, -2000000000ll};
  for (int r = 0; r < NR; r++)
    ntx_check_client_clock(c, (uint32_t)r, off[r], 20000, 8);
  srand(2);
  for (uint64_t s = 1; s <= 300; s++) {
    uint64_t late[NR];
    for (int r = 0; r < NR; r++)
      late[r] = jitter() + (r == 2 ? 15000000ull : 0);
    step(c, s, late, off);
    ntx_check_tick(c, (double)s * 0.1);
  }
  /* named after MIN_JUDGE seqs, then not again within a minute (30 s ran) */
  NT_CHECK(count(NTX_V_STRAGGLER, 0) == 1 && count(NTX_V_STRAGGLER, 3) == 1);
  for (int i = 0; i < nev; i++)
    if (evs[i].kind == NTX_V_STRAGGLER && evs[i].client == 0) {
      printf("  %s\n", evs[i].text);
      NT_CHECK(evs[i].peer == 2 && evs[i].aux > 11000 && evs[i].aux < 15500);
      NT_CHECK(strstr(evs[i].text, "straggler on comm 9f2c0123: rank 2 (node2, pid 1002) arrived last at 100% of "
                                 "the last ") != NULL);
      NT_CHECK(strstr(evs[i].text, "ms after the others") != NULL);
    }
  int told = 0;
  for (int i = 0; i < nev; i++)
    if (evs[i].kind == NTX_V_LATENESS && evs[i].client == 2) {
      told = 1;
      NT_CHECK(evs[i].aux > 12000 && evs[i].aux < 22000); /* after the earliest: 15 ms + some jitter */
      NT_CHECK((uint32_t)evs[i].seq == (uint32_t)(evs[i].seq >> 32)); /* last at every seq of the window */
    }
  NT_CHECK(told);
  ntx_check_free(c);
}

static void test_stall(void) {
  struct ntx_check *c = setup();
  int64_t off[NR] = {0};
  srand(3);
  for (uint64_t s = 1; s <= 300; s++) {
    uint64_t late[NR];
    for (int r = 0; r < NR; r++)
      late[r] = jitter() + (s == 137 && r == 1 ? 2000000000ull : 0);
    step(c, s, late, off);
  }
  NT_CHECK(count(NTX_V_STRAGGLER, 0) == 1);
  for (int i = 0; i < nev; i++)
    if (evs[i].kind == NTX_V_STRAGGLER && evs[i].client == 0) {
      printf("  %s\n", evs[i].text);
      NT_CHECK(evs[i].peer == 1 && evs[i].seq == 137 && !strcmp(evs[i].field, "stall"));
      NT_CHECK(strstr(evs[i].text, "rank 1 (node1, pid 1001) arrived 2.00 s after the others at seq 137") != NULL);
    }
  ntx_check_free(c);
}

static void test_uncertain_clocks(void) {
  struct ntx_check *c = setup();
  int64_t off[NR] = {0};
  for (int r = 0; r < NR; r++)
    ntx_check_client_clock(c, (uint32_t)r, 0, 30000000, 8); /* +- 30 ms */
  for (uint64_t s = 1; s <= 300; s++) {
    uint64_t late[NR] = {0, 0, 15000000ull, 0};
    step(c, s, late, off);
  }
  NT_CHECK(count(NTX_V_STRAGGLER, 0) == 0);
  NT_CHECK(count(NTX_V_NOTE, 0) == 1); /* said once: too uncertain to name anyone */
  ntx_check_free(c);
}

/* Device arrival of rank r at seq s, t on its own clock. */
static void dev(struct ntx_check *c, int r, uint64_t s, uint64_t t) {
  struct ntx_fp f = {.comm_id = COMM, .seq = s, .dir = NTX_FP_DEV, .rank = r, .t_ns = t};
  ntx_check_fp(c, (uint32_t)r, &f, (double)s * 0.1);
}

/* nccl-tests' loop: host calls all at the same time (a barrier), so the
 * host window names nobody; rank 3's GPU reaches 4 seqs of every 6 20 ms
 * after the others; only every 2nd seq is sampled (NCCLTRACE_START_EVERY=2). */
static void test_slow_device(int slow) {
  struct ntx_check *c = setup();
  int64_t off[NR] = {0};
  srand(5);
  for (uint64_t s = 1; s <= 600; s++) {
    uint64_t late[NR];
    for (int r = 0; r < NR; r++)
      late[r] = jitter();
    step(c, s, late, off);
    if (s % 2)
      continue;
    for (int r = 0; r < NR; r++) {
      uint64_t t = T0 + s * 100000000ull + 30000000ull + jitter();
      if (slow && r == 3 && s % 6 < 4)
        t += 20000000ull;
      if (s == 100 && r == 2)
        continue; /* never sampled on rank 2: seq 100 never completes */
      dev(c, r, s, t);
    }
  }
  if (!slow) {
    NT_CHECK(count(NTX_V_STRAGGLER, 0) == 0);
  } else {
    NT_CHECK(count(NTX_V_STRAGGLER, 0) == 1);
    for (int i = 0; i < nev; i++)
      if (evs[i].kind == NTX_V_STRAGGLER && evs[i].client == 0) {
        printf("  %s\n", evs[i].text);
        NT_CHECK(evs[i].peer == 3 && evs[i].aux > 16000 && evs[i].aux < 24000);
        NT_CHECK(strstr(evs[i].text, "rank 3 (node3, pid 1003) arrived last at the device at ") != NULL);
        NT_CHECK(strstr(evs[i].field, " dev") != NULL);
      }
  }
  ntx_check_free(c);
}

static void test_clocksync(void) {
  struct ntx_clk k;
  memset(&k, 0, sizeof k);
  uint64_t stamp;
  NT_CHECK(ntx_clk_due(&k, 0.0, &stamp) == 1);
  NT_CHECK(ntx_clk_due(&k, 0.1, &stamp) == 0); /* one in flight */
  NT_CHECK(ntx_clk_echo(&k, stamp + 1, 0, stamp + 10) == -1); /* not ours */
  /* client 5 ms ahead; this round trip 4 ms, asymmetric */
  NT_CHECK(ntx_clk_echo(&k, stamp, stamp + 3000000 + 5000000, stamp + 4000000) == 1);
  NT_CHECK(k.uncert == 2000001);
  NT_CHECK(ntx_clk_due(&k, 0.3, &stamp) == 1);
  /* a 200 us round trip: the better sample wins */
  NT_CHECK(ntx_clk_echo(&k, stamp, stamp + 100000 + 5000000, stamp + 200000) == 1);
  NT_CHECK(k.offset == 5000000 && k.uncert == 100001);
  NT_CHECK(ntx_clk_due(&k, 0.6, &stamp) == 1);
  NT_CHECK(ntx_clk_echo(&k, stamp, stamp + 9000000, stamp + 8000000) == 0); /* worse: unchanged */
  NT_CHECK(k.offset == 5000000 && k.samples == 3);
}

static int count_link(uint32_t client) {
  int n = 0;
  for (int i = 0; i < nev; i++)
    n += evs[i].kind == NTX_V_STRAGGLER && evs[i].client == client && !strcmp(evs[i].field, "link");
  return n;
}

/* Round trips (uncertainty = half the best one) rtt_us per client after
 * `samples` of them; 300 seqs on time, ticked every 100 ms. */
static struct ntx_check *link_run(const char *const hosts[NR], const uint64_t rtt_us[NR], uint32_t samples) {
  struct ntx_check *c = setup_hosts(hosts);
  int64_t off[NR] = {0};
  for (int r = 0; r < NR; r++)
    ntx_check_client_clock(c, (uint32_t)r, 0, rtt_us[r] * 500, samples);
  srand(4);
  for (uint64_t s = 1; s <= 300; s++) {
    uint64_t late[NR];
    for (int r = 0; r < NR; r++)
      late[r] = jitter();
    step(c, s, late, off);
    ntx_check_tick(c, (double)s * 0.1);
  }
  return c;
}

static void test_slow_link(void) {
  /* rank 2's host (with rank 3) 50 ms away, the others 0.2 ms: named once
   * on every member, with both its ranks, not as a late caller */
  static const char *const two[NR] = {"hA", "hA", "hB", "hB"};
  uint64_t slow[NR] = {200, 200, 50200, 50200};
  struct ntx_check *c = link_run(two, slow, 8);
  for (uint32_t k = 0; k < NR; k++)
    NT_CHECK(count_link(k) == 1);
  for (int i = 0; i < nev; i++)
    if (evs[i].kind == NTX_V_STRAGGLER && evs[i].client == 0) {
      printf("  %s\n", evs[i].text);
      NT_CHECK(strstr(evs[i].text, "straggler on comm 9f2c0123: host hB (ranks 2,3): its link is slow, a round "
                                 "trip to the coordinator takes 50.2 ms, 0.2 ms from the other hosts") != NULL);
      NT_CHECK(evs[i].aux == 50000 && (evs[i].peer == 2 || evs[i].peer == 3));
    }
  ntx_check_free(c);
  /* one host of four slow, each rank its own host */
  uint64_t one[NR] = {150, 300, 250, 60000};
  c = link_run(NULL, one, 8);
  NT_CHECK(count_link(1) == 1);
  for (int i = 0; i < nev; i++)
    if (evs[i].kind == NTX_V_STRAGGLER && evs[i].client == 1)
      NT_CHECK(strstr(evs[i].text, "host node3 (rank 3): its link is slow, a round trip to the coordinator takes "
                                 "60.0 ms, 0.2 ms from the other hosts") != NULL);
  ntx_check_free(c);
  /* not yet 8 round trips: nobody */
  c = link_run(two, slow, 7);
  NT_CHECK(count_link(0) == 0);
  ntx_check_free(c);
  /* 9 ms more than the others: below NCCLTRACE_STRAGGLER_MS */
  uint64_t near[NR] = {200, 200, 9200, 9200};
  c = link_run(two, near, 16);
  NT_CHECK(count_link(0) == 0);
  ntx_check_free(c);
  /* one host: no other link to compare with, however slow */
  static const char *const one_host[NR] = {"hA", "hA", "hA", "hA"};
  c = link_run(one_host, slow, 16);
  NT_CHECK(count_link(0) == 0);
  ntx_check_free(c);
}


int main(void) {
  test_jitter_quiet();
  test_slow_rank();
  test_stall();
  test_uncertain_clocks();
  test_slow_device(0);
  test_slow_device(1);
  test_slow_link();
  test_clocksync();
  if (nt_failures)
    fprintf(stderr, "test_lateness: %d nt_failures\n", nt_failures);
  return nt_exit_status();
}

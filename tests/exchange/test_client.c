/* test_client.c -- the exchange client library end to end: real processes
 * (this program re-executed as ranks), each with a real ring file, the
 * client thread reading it, over real sockets to a coordinator hosted by
 * this parent, by a standalone coordinator process, or embedded in rank 0.
 *
 *   async_mismatch      4 ranks, rank 1 Broadcast vs AllReduce: every rank
 *                       gets one line, a MISMATCH record and a dump, within
 *                       100 ms of the later rank's call (ring timestamps)
 *   strict_mismatch     same in strict mode: ntx_strict_wait is -1 on all 4
 *   peer_lost           SIGKILL of rank 2: ranks 0,1 record PEER_LOST and
 *                       dump within 1 s
 *   init_wait           3 of 4 ranks register: told rank 3 never joined
 *   env_diff            NCCL_PROTO differs: ENV_DIFF records; with
 *                       ENV_CHECK=abort ntx_comm_env_verdict is -1
 *   coord_killed_async  coordinator SIGKILLed mid-run: ranks keep writing at
 *                       full speed and stop promptly
 *   coord_killed_strict strict wait bounded by the timeout while a peer is
 *                       absent, immediate once the coordinator is gone
 *   embedded            MASTER_ADDR/MASTER_PORT discovery: rank 0 hosts
 *   strict_group        strict, 2 ranks, a group of 1,500 sends/recvs (more
 *                       than one frame holds): agreed; then one recv count
 *                       differs at #1400 of the next group: -1 on both
 *   agg_mismatch        async_mismatch through node aggregators: 2 "hosts"
 *                       of 2 ranks (nti_cfg.agg = 1 and a host label),
 *                       each electing its own aggregator in one of its ranks
 *   agg_strict          strict_mismatch through the same aggregators
 *                       (STRICT forwarded, the REPLY routed back)
 *
 * Exit: 0 pass, 1 fail, 77 skip (no loopback sockets).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "interpose/config.h"
#include "interpose/exchange.h"
#include "interpose/exchange/coord.h"
#include "recorder/clock.h"
#include "recorder/ring.h"
#include "tests/exchange/harness.h"

#define COMM 0x9f2c0123456789abull
#define SECRET "exchange-test-secret"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
static uint64_t mono_ns(void) { return (uint64_t)(now_s() * 1e9); }
static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static char dir[256];

/* ------------------------------------------------------------- child -- */

static struct ntr_ring ring;
static FILE *res;

static void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void out(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfprintf(res, fmt, ap);
  va_end(ap);
  fflush(res);
}

static uint64_t put_coll(struct ntr_comm_state *cs, uint64_t seq, unsigned kind, uint64_t count,
                         struct ntr_record *copy) {
  uint64_t pos;
  struct ntr_record *r = ntr_ring_reserve(&ring, &pos);
  memset((char *)r + 8, 0, sizeof *r - 8);
  r->tsc = ntr_clock_now();
  r->comm_id = cs->comm_id;
  r->count = count;
  r->seq = seq;
  r->kind = (uint16_t)kind;
  r->phase = NTR_PHASE_CALL;
  r->dtype = 7;
  r->redop = kind == NTR_KIND_ALLREDUCE ? 0 : -1;
  r->peer = kind == NTR_KIND_BROADCAST ? 0 : -1;
  r->rank = cs->rank;
  r->nranks = cs->nranks;
  r->result = 0;
  r->fp = (uint32_t)(kind * 131 + count);
  if (copy)
    *copy = *r;
  uint64_t tsc = r->tsc;
  ntr_ring_commit(&ring, r, pos, cs);
  return ntr_clock_to_mono_ns(ring.hdr, tsc);
}

/* Find an event of this kind in our own ring: its time (mono ns) or 0. */
static uint64_t find_event(unsigned kind, uint64_t seq_or_any, char *text) {
  uint64_t head = __atomic_load_n(&ring.hdr->head, __ATOMIC_ACQUIRE);
  for (uint64_t p = head > ring.mask + 1 ? head - ring.mask - 1 : 0; p < head; p++) {
    struct ntr_record r;
    if (!ntr_ring_read_slot(&ring.slots[p & ring.mask], &r) || r.kind != kind)
      continue;
    if (seq_or_any != UINT64_MAX && r.seq != seq_or_any)
      continue;
    if (text)
      snprintf(text, 25, "%.24s", r.u.text);
    return ntr_clock_to_mono_ns(ring.hdr, r.tsc);
  }
  return 0;
}

static uint64_t wait_event(unsigned kind, uint64_t seq, double timeout_s, char *text) {
  double end = now_s() + timeout_s;
  uint64_t t;
  while (!(t = find_event(kind, seq, text)) && now_s() < end)
    sleep_ms(2);
  return t;
}

static int wait_file(const char *name, double timeout_s) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  for (double end = now_s() + timeout_s; now_s() < end; sleep_ms(10))
    if (access(p, F_OK) == 0)
      return 0;
  return -1;
}

static int child(const char *scenario, int rank, int nranks) {
  char p[512];
  snprintf(p, sizeof p, "%s/res.%d", dir, rank);
  res = fopen(p, "w");
  if (!res)
    return 1;
  alarm(30); /* a hung child must not hang the test */
  const char *mode = getenv("NTXT_MODE");
  nti_cfg.check = mode && !strcmp(mode, "strict") ? NTI_CHECK_STRICT : NTI_CHECK_ASYNC;
  nti_cfg.check_explicit = 1;
  snprintf(nti_cfg.coord, sizeof nti_cfg.coord, "%s", getenv("NTXT_COORD") ? getenv("NTXT_COORD") : "");
  snprintf(nti_cfg.secret, sizeof nti_cfg.secret, "%s", SECRET);
  nti_cfg.strict_timeout_s = getenv("NTXT_STRICT_TIMEOUT") ? atof(getenv("NTXT_STRICT_TIMEOUT")) : 5;
  nti_cfg.skew_s = getenv("NTXT_SKEW") ? atof(getenv("NTXT_SKEW")) : 30;
  nti_cfg.env_check = getenv("NTXT_ENV_ABORT") ? NTI_ENV_CHECK_ABORT : NTI_ENV_CHECK_WARN;
  nti_cfg.coord_port_offset = 17;
  nti_cfg.verbose = getenv("NTXT_VERBOSE") ? 1 : 0;
  nti_cfg.agg = getenv("NTXT_AGG_HOST") ? 1 : -1;
  nti_cfg.strict_shm = -1;
  snprintf(nti_cfg.agg_host, sizeof nti_cfg.agg_host, "%s", getenv("NTXT_AGG_HOST") ? getenv("NTXT_AGG_HOST") : "");
  struct ntr_ring_config rc = {.dir = dir, .job_id = "exchtest", .slots = 1024};
  if (ntr_ring_open(&ring, &rc) < 0) {
    out("ring open failed\n");
    return 1;
  }
  ntx_start(&ring);
  struct ntr_comm_state *cs = ntr_ring_comm_alloc(&ring);
  cs->comm_id = COMM;
  cs->rank = rank;
  cs->nranks = nranks;
  ntx_comm_register(cs);
  int ok = 1;
  char text[32] = "";

  if (!strcmp(scenario, "agg_mismatch"))
    scenario = "async_mismatch"; /* the same, through aggregators (the parent's env) */
  if (!strcmp(scenario, "agg_strict"))
    scenario = "strict_mismatch";
  if (!strcmp(scenario, "async_mismatch") || !strcmp(scenario, "embedded")) {
    put_coll(cs, 1, NTR_KIND_ALLREDUCE, 64, NULL);
    if (rank == nranks - 1)
      sleep_ms(300); /* the later call: latency is measured from it */
    int odd = !strcmp(scenario, "embedded") ? rank == 2 : rank == 1;
    uint64_t call = put_coll(cs, 2, odd ? NTR_KIND_BROADCAST : NTR_KIND_ALLREDUCE, 64, NULL);
    uint64_t v = wait_event(NTR_KIND_MISMATCH, 2, 5, text);
    for (int i = 0; i < 50 && !__atomic_load_n(&harness_dumps, __ATOMIC_ACQUIRE); i++)
      sleep_ms(2); /* the dump follows the record */
    out("call %llu verdict %llu field %s dumps %d kind %d\n", (unsigned long long)call,
        (unsigned long long)v, text, __atomic_load_n(&harness_dumps, __ATOMIC_ACQUIRE),
        __atomic_load_n(&harness_last_dump_kind, __ATOMIC_RELAXED));
    ok = v != 0;
  } else if (!strcmp(scenario, "strict_mismatch")) {
    struct ntr_record r1, r2;
    const struct ntr_record *pr[1];
    char msg[512];
    put_coll(cs, 1, NTR_KIND_ALLREDUCE, 64, &r1);
    pr[0] = &r1;
    int a = ntx_strict_wait(pr, 1, msg, sizeof msg);
    put_coll(cs, 2, rank == 1 ? NTR_KIND_BROADCAST : NTR_KIND_ALLREDUCE, 64, &r2);
    pr[0] = &r2;
    double t0 = now_s();
    int b = ntx_strict_wait(pr, 1, msg, sizeof msg);
    out("first %d second %d in %.3f s msg %s\n", a, b, now_s() - t0, msg);
    ok = a == 0 && b == -1;
  } else if (!strcmp(scenario, "strict_group")) {
    enum { G = 1500 };
    static struct ntr_record recs[G];
    static const struct ntr_record *pr[G];
    char msg[512] = "";
    int rc[2];
    for (int round = 0; round < 2; round++) {
      for (int i = 0; i < G; i++) {
        struct ntr_record *r = &recs[i];
        memset(r, 0, sizeof *r);
        r->comm_id = COMM;
        r->kind = rank == 0 ? NTR_KIND_SEND : NTR_KIND_RECV;
        r->phase = NTR_PHASE_CALL;
        r->seq = (uint64_t)(round * G + i + 1);
        r->count = round == 1 && rank == 1 && i == 1399 ? 8 : 16;
        r->dtype = 7;
        r->redop = -1;
        r->peer = 1 - rank;
        r->rank = rank;
        r->nranks = 2;
        pr[i] = r;
      }
      rc[round] = ntx_strict_wait(pr, G, msg, sizeof msg);
    }
    out("group %d %d msg %s\n", rc[0], rc[1], msg);
    ok = rc[0] == 0 && rc[1] == -1 && strstr(msg, "p2p mismatch") && strstr(msg, "seq 2900 field count");
  } else if (!strcmp(scenario, "peer_lost")) {
    put_coll(cs, 1, NTR_KIND_ALLREDUCE, 64, NULL);
    out("ready\n");
    if (rank == 2)
      pause(); /* to be SIGKILLed */
    uint64_t v = wait_event(NTR_KIND_PEER_LOST, UINT64_MAX, 5, text);
    for (int i = 0; i < 50 && !__atomic_load_n(&harness_dumps, __ATOMIC_ACQUIRE); i++)
      sleep_ms(2);
    out("lost %llu dumps %d kind %d\n", (unsigned long long)v, __atomic_load_n(&harness_dumps, __ATOMIC_ACQUIRE),
        __atomic_load_n(&harness_last_dump_kind, __ATOMIC_RELAXED));
    ok = v != 0;
  } else if (!strcmp(scenario, "init_wait")) {
    uint64_t v = wait_event(NTR_KIND_SKEW, 0, 6, text);
    out("initwait %llu field %s\n", (unsigned long long)v, text);
    ok = v != 0;
  } else if (!strcmp(scenario, "env_diff")) {
    int verdict = ntx_comm_env_verdict(cs);
    uint64_t v = wait_event(NTR_KIND_ENV_DIFF, UINT64_MAX, 3, text);
    out("env_verdict %d envdiff %llu field %s\n", verdict, (unsigned long long)v, text);
    ok = verdict == -1 && v != 0;
  } else if (!strcmp(scenario, "coord_killed_async")) {
    uint64_t seq = 1;
    for (; seq <= 20; seq++)
      put_coll(cs, seq, NTR_KIND_ALLREDUCE, 64, NULL);
    sleep_ms(100);
    out("ready\n");
    wait_file("killed", 10);
    double worst = 0, end = now_s() + 1.5;
    uint64_t n = 0;
    while (now_s() < end) {
      double t = now_s();
      put_coll(cs, seq++, NTR_KIND_ALLREDUCE, 64, NULL);
      if (now_s() - t > worst)
        worst = now_s() - t;
      n++;
      if (n % 64 == 0)
        sleep_ms(1);
    }
    double t = now_s();
    ntx_stop();
    out("records %llu worst %.6f s stop %.3f s\n", (unsigned long long)n, worst, now_s() - t);
    ok = worst < 0.05 && now_s() - t < 1.0;
  } else if (!strcmp(scenario, "coord_killed_strict")) {
    struct ntr_record r;
    const struct ntr_record *pr[1] = {&r};
    char msg[512];
    put_coll(cs, 1, NTR_KIND_ALLREDUCE, 64, &r);
    int a = ntx_strict_wait(pr, 1, msg, sizeof msg);
    double t0 = now_s(), waited = 0;
    int b = 0;
    if (rank == 0) { /* rank 1 never issues seq 2: bounded by the strict timeout */
      put_coll(cs, 2, NTR_KIND_ALLREDUCE, 64, &r);
      b = ntx_strict_wait(pr, 1, msg, sizeof msg);
      waited = now_s() - t0;
    }
    out("ready\n");
    wait_file("killed", 10);
    sleep_ms(200);
    put_coll(cs, 3, NTR_KIND_ALLREDUCE, 64, &r);
    t0 = now_s();
    int c = ntx_strict_wait(pr, 1, msg, sizeof msg);
    double gone = now_s() - t0;
    out("agree %d absent %d after %.3f s gone %d after %.3f s\n", a, b, waited, c, gone);
    ok = a == 0 && b == 0 && c == 0 && gone < 0.5 && (rank != 0 || (waited > 1.5 && waited < 3.5));
  }
  ntx_stop();
  out("%s\n", ok ? "PASS" : "FAIL");
  fclose(res);
  return ok ? 0 : 1;
}

/* ------------------------------------------------------------ parent -- */

#include "tests/nt_test.h"

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t l = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || getsockname(fd, (struct sockaddr *)&a, &l) < 0)
    return -1;
  close(fd);
  return ntohs(a.sin_port);
}

static pid_t spawn(const char *scenario, int rank, int nranks, char **extra_env) {
  pid_t pid = fork();
  if (pid != 0)
    return pid;
  char p[512], rs[16], ns[16];
  snprintf(p, sizeof p, "%s/err.%d", dir, rank);
  int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  dup2(fd, 2);
  snprintf(rs, sizeof rs, "%d", rank);
  snprintf(ns, sizeof ns, "%d", nranks);
  setenv("RANK", rs, 1);
  for (char **e = extra_env; e && *e; e++)
    putenv(*e);
  if (rank < 0) { /* the standalone coordinator */
    char *argv[] = {"/proc/self/exe", "coord", getenv("NTXT_COORD"), NULL};
    execv("/proc/self/exe", argv);
  } else {
    char *argv[] = {"/proc/self/exe", "child", (char *)scenario, rs, ns, dir, NULL};
    execv("/proc/self/exe", argv);
  }
  _exit(127);
}

/* Wait for all pids (at most timeout_s); @return how many exited 0. */
static int reap(pid_t *pids, int n, double timeout_s) {
  int ok = 0, left = n;
  double end = now_s() + timeout_s;
  while (left > 0 && now_s() < end) {
    for (int i = 0; i < n; i++) {
      int st;
      if (pids[i] > 0 && waitpid(pids[i], &st, WNOHANG) == pids[i]) {
        ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
        pids[i] = -pids[i];
        left--;
      }
    }
    sleep_ms(10);
  }
  for (int i = 0; i < n; i++)
    if (pids[i] > 0) {
      kill(pids[i], SIGKILL);
      waitpid(pids[i], NULL, 0);
    }
  return ok;
}

static int slurp(const char *kind, int rank, char *buf, size_t len) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s.%d", dir, kind, rank);
  FILE *f = fopen(p, "r");
  buf[0] = '\0';
  if (!f)
    return -1;
  size_t n = fread(buf, 1, len - 1, f);
  buf[n] = '\0';
  fclose(f);
  return 0;
}

static int count_lines(const char *buf, const char *needle) {
  int n = 0;
  for (const char *p = buf; (p = strstr(p, needle)); p += strlen(needle))
    n++;
  return n;
}

static int wait_res(int rank, const char *needle, double timeout_s) {
  char b[4096];
  for (double end = now_s() + timeout_s; now_s() < end; sleep_ms(10))
    if (slurp("res", rank, b, sizeof b) == 0 && strstr(b, needle))
      return 0;
  return -1;
}

static void touch(const char *name) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  int fd = open(p, O_WRONLY | O_CREAT, 0600);
  if (fd >= 0)
    close(fd);
}

static void show(int n) {
  char b[8192];
  for (int r = 0; r < n; r++) {
    slurp("res", r, b, sizeof b);
    printf("--- rank %d result:\n%s", r, b);
    slurp("err", r, b, sizeof b);
    printf("--- rank %d stderr:\n%s", r, b);
  }
}

static int parent(const char *scenario) {
  snprintf(dir, sizeof dir, "/tmp/ntx-test-XXXXXX");
  if (!mkdtemp(dir))
    return 77;
  int port = free_port();
  if (port < 0)
    return 77;
  static char coord_env[64], port_env[64], addr_env[] = "MASTER_ADDR=127.0.0.1";
  snprintf(coord_env, sizeof coord_env, "NTXT_COORD=127.0.0.1:%d", port);
  char *env[10] = {coord_env, NULL};
  int n = 4;
  struct ntx_coord *co = NULL;
  pid_t coord_pid = 0;
  int standalone = !strncmp(scenario, "coord_killed", 12);
  int embedded = !strcmp(scenario, "embedded");
  if (embedded) {
    snprintf(port_env, sizeof port_env, "MASTER_PORT=%d", port - 17);
    env[0] = addr_env;
    env[1] = port_env;
    env[2] = "NTXT_COORD=";
    n = 3;
  } else if (standalone) {
    setenv("NTXT_COORD", coord_env + 11, 1);
    setenv("NCCLTRACE_SECRET", SECRET, 1);
    coord_pid = spawn(NULL, -1, 0, NULL);
    sleep_ms(300);
  } else {
    struct ntx_coord_cfg cfg;
    char err[256], port_s[16];
    ntx_coord_default_cfg(&cfg);
    snprintf(port_s, sizeof port_s, "%d", port);
    cfg.host = "127.0.0.1";
    cfg.port = port_s;
    ntx_key_derive(SECRET, &cfg.key, NULL, 0);
    cfg.lim.skew_s = cfg.lim.init_wait_s = 1;
    if (ntx_coord_listen(&co, &cfg, err, sizeof err) < 0 || ntx_coord_start(co) < 0) {
      fprintf(stderr, "coordinator: %s\n", err);
      return 77;
    }
  }
  int k = 1;
  while (env[k])
    k++;
  int agg = !strncmp(scenario, "agg_", 4);
  if (agg) {
    env[k++] = "NTXT_VERBOSE=1";
    scenario = !strcmp(scenario, "agg_strict") ? "strict_mismatch" : "async_mismatch";
  }
  if (!strcmp(scenario, "strict_mismatch") || !strcmp(scenario, "coord_killed_strict") ||
      !strcmp(scenario, "strict_group"))
    env[k++] = "NTXT_MODE=strict";
  if (!strcmp(scenario, "coord_killed_strict"))
    env[k++] = "NTXT_STRICT_TIMEOUT=2";
  if (!strcmp(scenario, "env_diff"))
    env[k++] = "NTXT_ENV_ABORT=1";
  if (!strcmp(scenario, "peer_lost") || !strcmp(scenario, "env_diff") || !strncmp(scenario, "coord_killed", 12))
    n = !strcmp(scenario, "coord_killed_strict") ? 2 : 3;
  if (!strcmp(scenario, "strict_group"))
    n = 2;
  int spawned = !strcmp(scenario, "init_wait") ? 3 : n; /* rank 3 never comes */
  pid_t pids[4];
  for (int r = 0; r < spawned; r++) {
    char *e[10];
    memcpy(e, env, sizeof e);
    int j = k;
    if (!strcmp(scenario, "env_diff"))
      e[j++] = r == 2 ? "NCCL_PROTO=LL" : "NCCL_PROTO=Simple";
    if (agg)
      e[j++] = r < 2 ? "NTXT_AGG_HOST=hostA" : "NTXT_AGG_HOST=hostB";
    e[j] = NULL;
    pids[r] = spawn(agg ? (!strcmp(scenario, "strict_mismatch") ? "agg_strict" : "agg_mismatch") : scenario,
                    r, n, e);
  }
  char b[8192];
  int passed = 0;
  if (!strcmp(scenario, "peer_lost")) {
    NT_CHECK(wait_res(0, "ready", 10) == 0 && wait_res(1, "ready", 10) == 0 && wait_res(2, "ready", 10) == 0);
    sleep_ms(100);
    uint64_t t_kill = mono_ns();
    kill(pids[2], SIGKILL);
    passed = reap(pids, 2, 15);
    reap(pids + 2, 1, 1);
    for (int r = 0; r < 2; r++) {
      unsigned long long lost = 0;
      int dumps = 0, kind = 0;
      slurp("res", r, b, sizeof b);
      const char *l = strstr(b, "lost ");
      NT_CHECK(l && sscanf(l, "lost %llu dumps %d kind %d", &lost, &dumps, &kind) == 3);
      NT_CHECK(lost > t_kill && lost - t_kill < 1000000000ull);
      NT_CHECK(dumps >= 1 && kind == NTR_TRIG_PEER_LOST);
      printf("rank %d: PEER_LOST recorded %.1f ms after the SIGKILL\n", r, (double)(lost - t_kill) / 1e6);
      slurp("err", r, b, sizeof b);
      NT_CHECK(strstr(b, "nccltrace: lost rank 2 (host ") != NULL);
    }
    passed += 1; /* rank 2 was killed on purpose */
  } else if (standalone) {
    for (int r = 0; r < n; r++)
      NT_CHECK(wait_res(r, "ready", 15) == 0);
    kill(coord_pid, SIGKILL);
    waitpid(coord_pid, NULL, 0);
    touch("killed");
    passed = reap(pids, n, 20);
  } else {
    passed = reap(pids, spawned, 20);
  }
  if (!strcmp(scenario, "async_mismatch") || !strcmp(scenario, "embedded")) {
    unsigned long long call[4] = {0}, verdict[4] = {0}, later = 0;
    for (int r = 0; r < n; r++) {
      char field[32] = "";
      int dumps = 0, kind = 0;
      slurp("res", r, b, sizeof b);
      NT_CHECK(sscanf(b, "call %llu verdict %llu field %31s dumps %d kind %d", &call[r], &verdict[r], field,
                    &dumps, &kind) == 5);
      NT_CHECK(!strcmp(field, "op") && dumps == 1 && kind == NTR_TRIG_MISMATCH);
      if (call[r] > later)
        later = call[r];
      slurp("err", r, b, sizeof b);
      NT_CHECK(count_lines(b, "nccltrace: mismatch on comm 9f2c0123 seq 2 field op: rank") == 1);
    }
    for (int r = 0; r < n; r++) {
      NT_CHECK(verdict[r] > later && verdict[r] - later < 100000000ull);
      printf("rank %d: MISMATCH recorded %.2f ms after the later rank's call\n", r,
             (double)(verdict[r] - later) / 1e6);
    }
  }
  if (!strcmp(scenario, "strict_mismatch"))
    for (int r = 0; r < n; r++) {
      slurp("res", r, b, sizeof b);
      NT_CHECK(strstr(b, "first 0 second -1") && strstr(b, "seq 2 field op: rank 1 Broadcast(count=64, float32, root=0) vs ranks 0,2,3 AllReduce"));
    }
  if (!strcmp(scenario, "init_wait"))
    for (int r = 0; r < 3; r++) {
      slurp("err", r, b, sizeof b);
      NT_CHECK(strstr(b, "comm 9f2c0123 init: waiting for rank 3 (never joined)") != NULL);
    }
  if (!strcmp(scenario, "env_diff"))
    for (int r = 0; r < 3; r++) {
      slurp("err", r, b, sizeof b);
      NT_CHECK(strstr(b, "NCCL_PROTO: rank 2 has 'LL' vs ranks 0,1 have 'Simple'") != NULL);
      slurp("res", r, b, sizeof b);
      NT_CHECK(strstr(b, "field NCCL_PROTO") != NULL);
    }
  if (agg) { /* each rank went through an aggregator; each "host" elected one */
    int hosted[2] = {0, 0};
    for (int r = 0; r < n; r++) {
      slurp("err", r, b, sizeof b);
      NT_CHECK(strstr(b, "through this host's node aggregator") != NULL);
      hosted[r / 2] += strstr(b, "node aggregator for host ") != NULL;
    }
    /* >= 1: a rank that hosted one and exits first hands over to the other */
    NT_CHECK(hosted[0] >= 1 && hosted[1] >= 1);
  }
  if (!strcmp(scenario, "coord_killed_async"))
    for (int r = 0; r < n; r++) {
      slurp("err", r, b, sizeof b);
      NT_CHECK(strstr(b, "lost the coordinator at 127.0.0.1") != NULL);
    }
  NT_CHECK(passed == spawned);
  if (nt_failures)
    show(spawned);
  else
    show(1);
  if (co)
    ntx_coord_stop(co, 0);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (!nt_failures && system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", dir);
  printf("%s: %s\n", scenario, nt_failures ? "FAIL" : "ok");
  return nt_exit_status();
}

int main(int argc, char **argv) {
  if (argc >= 6 && !strcmp(argv[1], "child")) {
    snprintf(dir, sizeof dir, "%s", argv[5]);
    return child(argv[2], atoi(argv[3]), atoi(argv[4]));
  }
  if (argc >= 3 && !strcmp(argv[1], "coord")) {
    char *cargv[] = {"coord", "--listen", argv[2], "--quiet", NULL};
    return ntx_coord_main(4, cargv);
  }
  if (argc < 2) {
    fprintf(stderr, "usage: %s SCENARIO\n", argv[0]);
    return 1;
  }
  signal(SIGPIPE, SIG_IGN);
  return parent(argv[1]);
}

/* check_int.h -- internals shared by check.c, check_p2p.c and fmt.c: the
 * coordinator's state.  Same contract as check.h (one thread owns it).
 */
#ifndef NTX_CHECK_INT_H
#define NTX_CHECK_INT_H
#include "interpose/exchange/check.h"

#define NTX_NVAR 4            /* distinct variants of one seq kept in detail */
#define NTX_NO_VAR 0xffu      /* rank_var: not arrived (or arrived in a gap) */
#define NTX_MAX_ENV_VARIANTS 16 /* distinct environments kept per comm for the diff */
#define NTX_MAX_ENV_LINES 8   /* variables reported per comm */
#define NTX_RECENT_MM 4       /* mismatch texts kept for strict requests that come late */
#define NTX_REQ_TEXT 1024
#define NTX_CHECK_HOSTS 4096  /* distinct host names kept for the status query; later ones unnamed */

enum { NTX_SLOT_EMPTY = 0, NTX_SLOT_OPEN = 1, NTX_SLOT_DONE = 2 };
enum { NTX_M_NONE = 0, NTX_M_ACTIVE = 1, NTX_M_EXITED = 2, NTX_M_LOST = 3 };

struct ntx_req {
  uint32_t client, gen, req_id;
  int outstanding;
  int32_t status;
  char text[NTX_REQ_TEXT];
};
struct ntx_waiter {
  struct ntx_req *r;
  struct ntx_waiter *next;
};

struct ntx_varset {
  struct ntx_fp v[NTX_NVAR];
  uint32_t cnt[NTX_NVAR];
  uint32_t nvar;
  uint8_t *rank_var; /* nranks entries: variant index or NTX_NO_VAR */
};

struct ntx_slot {
  uint64_t seq;
  double first_t;
  uint64_t t_first, t_last, t_second; /* arrival times, coordinator clock ns (lateness.c) */
  int32_t last_rank;
  uint32_t timed;   /* arrivals that carried a time */
  uint32_t arrived;
  uint8_t state, has_fp;
  struct ntx_fp fp0;
  struct ntx_varset *vs;
  struct ntx_waiter *waiters;
};

struct ntx_member {
  int32_t client;
  uint32_t gen;
  uint8_t state;
  uint64_t last_seq;
  int64_t clk_offset;     /* its client's clock offset (ntx_check_client_clock), on the fingerprint's path */
  uint64_t env_digest;
  int32_t pid, lrank;     /* the process holding it (REGISTER, GONE), for the status query */
  uint32_t host;          /* its host: index + 1 in ntx_check.hosts, 0 unknown */
};

/* The latest report of one kind on a comm, for the status query
 * (jobview.c): mismatch, p2p mismatch, skew, init wait, straggler. */
#define NTX_SAID_KINDS 5
#define NTX_SAID_TEXT 512
struct ntx_said {
  uint32_t kind;          /* 0: none */
  int32_t peer;
  uint64_t seq;
  char text[NTX_SAID_TEXT];
};

/* One distinct NCCL_* environment (+ NCCL version) among a comm's ranks. */
struct ntx_env_variant {
  uint64_t digest;
  int32_t nccl, low_rank;
  uint32_t len, count;
  char *env;
};

struct ntx_p2p;
struct ntx_late;
struct ntx_comm {
  uint64_t id;
  int32_t nranks;
  uint32_t nreg;
  double first_reg_t;
  int init_reported, env_done, coll_reported, p2p_reported;
  struct ntx_member *m;
  struct ntx_env_variant env[NTX_MAX_ENV_VARIANTS];
  uint32_t nenv, nenv_extra; /* variants kept; ranks whose variant was not kept */
  struct ntx_slot *win; /* window, allocated at the first fingerprint */
  uint64_t base;    /* lowest seq not yet decided */
  uint64_t skew_reported;
  struct { uint64_t seq; char text[NTX_REQ_TEXT]; } recent[NTX_RECENT_MM];
  uint32_t nrecent;
  uint32_t p2p_pending;
  struct ntx_p2p *p2p_head, *p2p_tail; /* FIFO for eviction, oldest first */
  struct ntx_late *late;           /* lateness statistics, at the first timed arrival */
  struct ntx_said said[NTX_SAID_KINDS];
};

struct ntx_p2p {
  struct ntx_comm *cm;
  int32_t src, dst;
  uint64_t seq;
  double t;       /* arrival: a half alone past grace_s may have the wrong peer */
  struct ntx_fp fp;
  struct ntx_waiter *waiters;
  struct ntx_p2p *hnext, *fprev, *fnext;
};

struct ntx_check_client {
  int active, agg;        /* agg: a node aggregator, speaking for several processes */
  uint32_t gen, waits;
  uint64_t told;          /* stamp of the last ntx_tell_comm that reached it (one verdict per client) */
  char host[NTX_HOST];
  int32_t pid, lrank;
  int64_t clk_offset;     /* its realtime - ours, ns (clocksync), 0 until known */
  uint64_t clk_uncert;    /* +- ns; 0 with clk_known 0 */
  int clk_known;
  uint32_t clk_samples;   /* round trips measured so far (link_judge waits for some) */
  uint32_t ncomms, capcomms;
  struct { struct ntx_comm *cm; int32_t rank; } *comms;
};

struct ntx_check {
  struct ntx_check_limits lim;
  struct ntx_check_ops ops;
  void *ctx;
  struct ntx_check_client *clients;
  struct ntx_comm **comms;    /* ncomms entries */
  uint32_t ncomms;
  uint32_t *comm_index;   /* open addressing: index + 1, 0 = empty */
  uint32_t comm_index_mask;
  struct ntx_p2p **p2p_hash;
  uint64_t p2p_mask;
  uint32_t p2p_total;
  uint64_t tell_stamp;    /* ntx_tell_comm calls so far */
  double now;             /* time of the input being handled (lateness.c reports) */
  char (*hosts)[NTX_HOST]; /* host names members were seen on (interned, at most NTX_CHECK_HOSTS) */
  uint32_t nhosts, caphosts;
  struct ntx_check_stats st;
};

uint64_t ntx_mix64(uint64_t x);
void ntx_tell_comm(struct ntx_check *c, struct ntx_comm *cm, uint32_t kind, uint64_t seq, int32_t peer,
                   int64_t aux, const char *field, const char *text);
void ntx_resolve(struct ntx_check *c, struct ntx_waiter *w, int32_t status, const char *text);
void ntx_free_waiters(struct ntx_waiter *w);
struct ntx_comm *ntx_comm_find(struct ntx_check *c, uint64_t id);
/* "0,2-5,9" from the ranks r with sel[r] == v; *count = how many. */
/* The line naming a collective mismatch of one seq (shared by the
 * coordinator and the shared-memory strict path, strict_shm.c, so both say
 * the same): variants v[0..nvar) held by cnt[k] ranks, rank_var[r] the
 * variant of rank r or NTX_NO_VAR; missing: some ranks are not there yet.
 * Majority: most ranks, on a tie the variant holding the lowest rank.
 * @return 1 with text, *field, *culprit (lowest rank of the first other
 *         variant) and *majlow (lowest rank of the majority) set when the
 *         variants differ, else 0. */
int ntx_mismatch_text(const struct ntx_fp *v, uint32_t nvar, const uint32_t *cnt, const uint8_t *rank_var,
                      int32_t nranks, uint64_t comm_id, uint64_t seq, int missing, char *text, size_t len,
                      const char **field, int32_t *culprit, int32_t *majlow);
void ntx_rank_list(const uint8_t *sel, int32_t n, uint8_t v, char *b, size_t len, int *count);
/* The comm of a fingerprint, or NULL when client id did not register that
 * rank (forged or confused input is ignored, and counted). */
struct ntx_comm *ntx_member_of(struct ntx_check *c, uint32_t id, uint64_t comm_id, int32_t rank);
/* A collective fingerprint of an active member; w (may be NULL) waits for
 * the decision of that seq. */
void ntx_coll_fp(struct ntx_check *c, struct ntx_comm *cm, const struct ntx_fp *fp, double now,
                 struct ntx_waiter *w);
/* Lateness (lateness.c): an arrival of rank at slot s (fp time t_ns from
 * client id, 0 unknown); a seq decided with every rank there; the periodic
 * per-rank reports; the comm's statistics freed. */
void ntx_late_arrive(struct ntx_check *c, struct ntx_comm *cm, struct ntx_slot *s, uint32_t id, int32_t rank,
                     uint64_t t_ns);
void ntx_late_decided(struct ntx_check *c, struct ntx_comm *cm, struct ntx_slot *s);
/* Rank's device arrival at seq (t_ns on its clock, 0 unknown): judged in a
 * window of its own, over the seqs every rank's device reached. */
void ntx_late_dev(struct ntx_check *c, struct ntx_comm *cm, int32_t rank, uint64_t seq, uint64_t t_ns);
void ntx_late_tick(struct ntx_check *c, struct ntx_comm *cm, double now);
void ntx_late_free(struct ntx_comm *cm);
/* Rank's lateness as last measured: median after the earliest (us), times
 * last and window entries judged; zeros before the first timed seq. */
void ntx_late_of(const struct ntx_comm *cm, int32_t rank, uint32_t *med_us, uint32_t *last, uint32_t *n);
/* The index + 1 of host in c->hosts, added when new; 0 when the table is full. */
uint32_t ntx_host_intern(struct ntx_check *c, const char *host);
/* Decide the oldest open seq now with the ranks that are there. */
void ntx_check_decide_base(struct ntx_check *c, struct ntx_comm *cm);
#endif

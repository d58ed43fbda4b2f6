/* check.c -- the coordinator's comparison logic (contract: check.h). */
#include "interpose/exchange/check_int.h"
#include "recorder/heap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recorder/format.h"

void ntx_check_default_limits(struct ntx_check_limits *lim) {
  lim->max_clients = 8192;
  lim->max_comms = 4096;
  lim->max_nranks = 65536;
  lim->window = 512;
  lim->max_p2p = 1u << 18;
  lim->max_p2p_per_comm = 1u << 14;
  lim->max_waits = 4096;
  lim->grace_s = 1.0;
  lim->skew_s = 30;
  lim->init_wait_s = 30;
  lim->straggler_ms = 10;
  lim->straggler_window = 200;
  lim->straggler_frac = 0.75;
  lim->straggler_every_s = 60;
  lim->stall_s = 1.0;
  lim->lateness_every_s = 10;
}

uint64_t ntx_mix64(uint64_t x) { /* splitmix64 finalizer: cheap, good spread */
  x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27; x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static uint32_t pow2_at_least(uint64_t n) {
  uint32_t p = 1;
  while (p < n && p < (1u << 30))
    p <<= 1;
  return p;
}

struct ntx_check *ntx_check_new(const struct ntx_check_limits *lim, const struct ntx_check_ops *ops,
                                void *ctx) {
  struct ntx_check *c = ntr_heap_calloc(1, sizeof *c);
  if (!c)
    return NULL;
  c->lim = *lim;
  c->lim.window = pow2_at_least(lim->window < 16 ? 16 : lim->window);
  c->ops = *ops;
  c->ctx = ctx;
  c->clients = ntr_heap_calloc(lim->max_clients, sizeof *c->clients);
  c->comms = ntr_heap_calloc(lim->max_comms, sizeof *c->comms);
  c->comm_index_mask = pow2_at_least(2ull * lim->max_comms) - 1;
  c->comm_index = ntr_heap_calloc((size_t)c->comm_index_mask + 1, sizeof *c->comm_index);
  c->p2p_mask = pow2_at_least(lim->max_p2p) - 1;
  c->p2p_hash = ntr_heap_calloc(c->p2p_mask + 1, sizeof *c->p2p_hash);
  if (!c->clients || !c->comms || !c->comm_index || !c->p2p_hash) {
    ntx_check_free(c);
    return NULL;
  }
  return c;
}

void ntx_free_waiters(struct ntx_waiter *w) {
  while (w) {
    struct ntx_waiter *n = w->next;
    if (--w->r->outstanding == 0)
      ntr_heap_free(w->r);
    ntr_heap_free(w);
    w = n;
  }
}

void ntx_check_free(struct ntx_check *c) {
  if (!c)
    return;
  for (uint32_t i = 0; c->comms && i < c->ncomms; i++) {
    struct ntx_comm *cm = c->comms[i];
    for (struct ntx_p2p *p = cm->p2p_head, *n; p; p = n) {
      n = p->fnext;
      ntx_free_waiters(p->waiters);
      ntr_heap_free(p);
    }
    for (uint32_t s = 0; cm->win && s < c->lim.window; s++) {
      ntx_free_waiters(cm->win[s].waiters);
      if (cm->win[s].vs)
        ntr_heap_free(cm->win[s].vs->rank_var);
      ntr_heap_free(cm->win[s].vs);
    }
    ntr_heap_free(cm->win);
    ntx_late_free(cm);
    ntr_heap_free(cm->m);
    for (uint32_t d = 0; d < cm->nenv; d++)
      ntr_heap_free(cm->env[d].env);
    ntr_heap_free(cm);
  }
  for (uint32_t i = 0; c->clients && i < c->lim.max_clients; i++)
    ntr_heap_free(c->clients[i].comms);
  ntr_heap_free(c->clients);
  ntr_heap_free(c->comms);
  ntr_heap_free(c->comm_index);
  ntr_heap_free(c->p2p_hash);
  ntr_heap_free(c->hosts);
  ntr_heap_free(c);
}

uint32_t ntx_host_intern(struct ntx_check *c, const char *host) {
  for (uint32_t i = 0; i < c->nhosts; i++) /* hosts are few next to registrations; newest last */
    if (!strncmp(c->hosts[i], host, NTX_HOST))
      return i + 1;
  if (c->nhosts == NTX_CHECK_HOSTS)
    return 0;
  if (c->nhosts == c->caphosts) { /* grown by doubling: a one-host job keeps 1 KiB */
    uint32_t nc = c->caphosts ? 2 * c->caphosts : 16;
    void *p = ntr_heap_realloc(c->hosts, (size_t)nc * NTX_HOST);
    if (!p)
      return 0;
    c->hosts = p;
    c->caphosts = nc;
  }
  snprintf(c->hosts[c->nhosts], NTX_HOST, "%s", host);
  return ++c->nhosts;
}

const struct ntx_check_stats *ntx_check_get_stats(const struct ntx_check *c) { return &c->st; }

/* ------------------------------------------------------------ plumbing -- */

void ntx_tell_comm(struct ntx_check *c, struct ntx_comm *cm, uint32_t kind, uint64_t seq, int32_t peer,
                   int64_t aux, const char *field, const char *text) {
  /* A process (or an aggregator) holding several ranks of one comm hears it
   * once: a stamp per client instead of a scan of the lower ranks, so a
   * verdict costs O(members), not O(members^2) (8 M comparisons at 4,096). */
  static const uint32_t kept[NTX_SAID_KINDS] = {NTX_V_MISMATCH, NTX_V_P2P_MISMATCH, NTX_V_SKEW, NTX_V_INIT_WAIT,
                                                NTX_V_STRAGGLER};
  for (int k = 0; k < NTX_SAID_KINDS && text; k++)
    if (kept[k] == kind) { /* the latest of each kind, for the status query */
      cm->said[k].kind = kind;
      cm->said[k].peer = peer;
      cm->said[k].seq = seq;
      snprintf(cm->said[k].text, NTX_SAID_TEXT, "%s", text);
    }
  uint64_t stamp = ++c->tell_stamp;
  for (int32_t r = 0; r < cm->nranks; r++) {
    struct ntx_member *m = &cm->m[r];
    if (m->state != NTX_M_ACTIVE)
      continue;
    struct ntx_check_client *cl = &c->clients[m->client];
    if (cl->told == stamp)
      continue;
    cl->told = stamp;
    c->ops.verdict(c->ctx, (uint32_t)m->client, kind, cm->id, seq, peer, aux, field, text);
  }
}

void ntx_resolve(struct ntx_check *c, struct ntx_waiter *w, int32_t status, const char *text) {
  while (w) {
    struct ntx_waiter *n = w->next;
    struct ntx_req *r = w->r;
    if (status != NTX_REPLY_OK && r->status == NTX_REPLY_OK) {
      r->status = status;
      snprintf(r->text, sizeof r->text, "%s", text ? text : "");
    }
    struct ntx_check_client *cl = &c->clients[r->client];
    if (cl->active && cl->gen == r->gen && cl->waits)
      cl->waits--;
    if (--r->outstanding == 0) {
      if (cl->active && cl->gen == r->gen)
        c->ops.reply(c->ctx, r->client, r->req_id, r->status, r->text);
      ntr_heap_free(r);
    }
    ntr_heap_free(w);
    w = n;
  }
}

struct ntx_comm *ntx_comm_find(struct ntx_check *c, uint64_t id) {
  for (uint32_t h = (uint32_t)ntx_mix64(id) & c->comm_index_mask;; h = (h + 1) & c->comm_index_mask) {
    uint32_t v = c->comm_index[h];
    if (!v)
      return NULL;
    if (c->comms[v - 1]->id == id)
      return c->comms[v - 1];
  }
}

static struct ntx_comm *comm_create(struct ntx_check *c, uint64_t id, int32_t nranks, double now) {
  if (c->ncomms >= c->lim.max_comms) {
    c->st.comms_refused++;
    return NULL;
  }
  struct ntx_comm *cm = ntr_heap_calloc(1, sizeof *cm);
  if (!cm || !(cm->m = ntr_heap_calloc((size_t)nranks, sizeof *cm->m))) {
    ntr_heap_free(cm);
    c->st.comms_refused++;
    return NULL;
  }
  cm->id = id;
  cm->nranks = nranks;
  cm->first_reg_t = now;
  cm->base = 1;
  for (int32_t r = 0; r < nranks; r++)
    cm->m[r].client = -1;
  uint32_t h = (uint32_t)ntx_mix64(id) & c->comm_index_mask;
  while (c->comm_index[h])
    h = (h + 1) & c->comm_index_mask;
  c->comms[c->ncomms++] = cm;
  c->comm_index[h] = c->ncomms;
  return cm;
}

/* The member a fingerprint speaks for, or NULL when that client did not
 * register that rank (forged or confused input is ignored, and counted). */
struct ntx_comm *ntx_member_of(struct ntx_check *c, uint32_t id, uint64_t comm_id, int32_t rank) {
  struct ntx_comm *cm = ntx_comm_find(c, comm_id);
  if (!cm || rank < 0 || rank >= cm->nranks || cm->m[rank].state != NTX_M_ACTIVE ||
      cm->m[rank].client != (int32_t)id) {
    c->st.unregistered++;
    return NULL;
  }
  return cm;
}

/* ------------------------------------------------------------- clients -- */

int ntx_check_client_add(struct ntx_check *c, uint32_t id, const char *host, int32_t pid,
                         int32_t launcher_rank) {
  if (id >= c->lim.max_clients || c->clients[id].active)
    return -1;
  struct ntx_check_client *cl = &c->clients[id];
  cl->active = 1;
  cl->agg = 0;
  cl->gen++;
  cl->waits = 0;
  cl->ncomms = 0;
  snprintf(cl->host, sizeof cl->host, "%s", host);
  cl->pid = pid;
  cl->lrank = launcher_rank;
  cl->clk_offset = 0;
  cl->clk_uncert = 0;
  cl->clk_known = 0;
  cl->clk_samples = 0;
  return 0;
}

void ntx_check_client_set_agg(struct ntx_check *c, uint32_t id) {
  if (id < c->lim.max_clients && c->clients[id].active)
    c->clients[id].agg = 1;
}

/* The ranks of comm comm_id among the n lost pairs, as a list ("4,5"). */
static void lost_ranks(const struct ntx_comm *const *cms, const int32_t *ranks, uint32_t n, uint64_t comm_id,
                       char *b, size_t len, int *count) {
  const struct ntx_comm *cm = NULL;
  for (uint32_t i = 0; i < n && !cm; i++)
    if (cms[i]->id == comm_id)
      cm = cms[i];
  uint8_t *sel = cm ? ntr_heap_alloc((size_t)cm->nranks) : NULL;
  *count = 0;
  b[0] = '\0';
  if (!sel)
    return;
  memset(sel, 0, (size_t)cm->nranks);
  for (uint32_t i = 0; i < n; i++)
    if (cms[i] == cm && ranks[i] >= 0 && ranks[i] < cm->nranks)
      sel[ranks[i]] = 1;
  ntx_rank_list(sel, cm->nranks, 1, b, len, count);
  ntr_heap_free(sel);
}

/* Tell every active client but `skip` that `who` is lost, each with a
 * communicator it shares with the lost pairs when there is one, so its
 * record names a comm rank.  pairs: n (comm, rank) of the lost process. */
static void tell_lost(struct ntx_check *c, uint32_t skip, const char *who, int32_t lrank, int32_t pid,
                      const struct ntx_comm *const *cms, const int32_t *ranks, uint32_t n, int behind) {
  char text[NTX_TEXT_MAX];
  for (uint32_t o = 0; o < c->lim.max_clients; o++) {
    struct ntx_check_client *ot = &c->clients[o];
    if (!ot->active || o == skip)
      continue;
    uint64_t comm_id = 0;
    int32_t peer = lrank;
    for (uint32_t i = 0; i < n && !comm_id; i++)
      for (uint32_t j = 0; j < ot->ncomms; j++)
        if (ot->comms[j].cm == cms[i]) {
          comm_id = cms[i]->id;
          peer = ranks[i];
          break;
        }
    char list[160];
    int count = 0;
    if (comm_id && behind)
      lost_ranks(cms, ranks, n, comm_id, list, sizeof list, &count);
    if (count)
      snprintf(text, sizeof text,
               "lost %s: its connection closed without goodbye (killed, crashed, hung or cut off); "
               "rank%s %s of comm %08x %s behind it (a host or link lost takes them all; those still "
               "alive come back through a new aggregator)",
               who, count > 1 ? "s" : "", list, NTX_COMM_SHORT(comm_id), count > 1 ? "were" : "was");
    else if (comm_id)
      snprintf(text, sizeof text,
               "lost %s: its connection closed without goodbye (killed, crashed or hung); "
               "it was rank %d of comm %08x",
               who, (int)peer, NTX_COMM_SHORT(comm_id));
    else
      snprintf(text, sizeof text,
               "lost %s: its connection closed without goodbye (killed, crashed or hung)", who);
    c->ops.verdict(c->ctx, o, NTX_V_PEER_LOST, comm_id, 0, peer, pid, "lost", text);
  }
}

void ntx_check_client_gone(struct ntx_check *c, uint32_t id, int clean, double now) {
  (void)now;
  if (id >= c->lim.max_clients || !c->clients[id].active)
    return;
  struct ntx_check_client *cl = &c->clients[id];
  cl->active = 0;
  /* only the members it still holds: after a hand-over another aggregator
   * may have registered some of them already */
  for (uint32_t i = 0; i < cl->ncomms; i++) {
    struct ntx_member *m = &cl->comms[i].cm->m[cl->comms[i].rank];
    if (m->state == NTX_M_ACTIVE && m->client == (int32_t)id && m->gen == cl->gen)
      m->state = clean ? NTX_M_EXITED : NTX_M_LOST;
  }
  if (clean)
    return;
  c->st.lost++;
  char who[224];
  if (cl->agg) /* its own ranks died with it; the others of its host come back through a new one */
    snprintf(who, sizeof who, "the process hosting the node aggregator of host %s (pid %d, launcher rank %d)",
             cl->host, (int)cl->pid, (int)cl->lrank);
  else if (cl->lrank >= 0)
    snprintf(who, sizeof who, "rank %d (host %s, pid %d)", (int)cl->lrank, cl->host, (int)cl->pid);
  else
    snprintf(who, sizeof who, "a process (host %s, pid %d)", cl->host, (int)cl->pid);
  const struct ntx_comm **cms = ntr_heap_alloc((cl->ncomms + 1) * sizeof *cms);
  int32_t *ranks = ntr_heap_alloc((cl->ncomms + 1) * sizeof *ranks);
  uint32_t n = 0;
  /* an aggregator's pairs: the ranks behind it, named as such (the link
   * of a host, or the whole host, takes them all at once) */
  for (uint32_t i = 0; cms && ranks && i < cl->ncomms; i++) {
    const struct ntx_member *m = &cl->comms[i].cm->m[cl->comms[i].rank];
    if (cl->agg && !(m->state == NTX_M_LOST && m->client == (int32_t)id && m->gen == cl->gen))
      continue;
    cms[n] = cl->comms[i].cm;
    ranks[n++] = cl->comms[i].rank;
  }
  tell_lost(c, id, who, cl->lrank, cl->pid, cms, ranks, n, cl->agg);
  ntr_heap_free(cms);
  ntr_heap_free(ranks);
}

int ntx_check_gone(struct ntx_check *c, uint32_t id, const char *host, int32_t pid, int32_t launcher_rank,
                   int clean, const uint8_t *pairs, uint32_t n, double now) {
  (void)now;
  if (id >= c->lim.max_clients || !c->clients[id].active || !c->clients[id].agg)
    return -1;
  struct ntx_check_client *cl = &c->clients[id];
  const struct ntx_comm **cms = ntr_heap_alloc((n + 1) * sizeof *cms);
  int32_t *ranks = ntr_heap_alloc((n + 1) * sizeof *ranks);
  if (!cms || !ranks) {
    ntr_heap_free(cms);
    ntr_heap_free(ranks);
    return 0;
  }
  uint32_t k = 0;
  for (uint32_t i = 0; i < n; i++) {
    uint64_t comm_id;
    int32_t rank;
    ntx_gone_get(pairs, i, &comm_id, &rank);
    struct ntx_comm *cm = ntx_member_of(c, id, comm_id, rank);
    if (!cm || cm->m[rank].gen != cl->gen)
      continue;
    cm->m[rank].state = clean ? NTX_M_EXITED : NTX_M_LOST;
    cm->m[rank].pid = pid;
    cm->m[rank].lrank = launcher_rank;
    cms[k] = cm;
    ranks[k++] = rank;
  }
  if (!clean && k) {
    c->st.lost++;
    char who[160];
    if (launcher_rank >= 0)
      snprintf(who, sizeof who, "rank %d (host %s, pid %d)", (int)launcher_rank, host, (int)pid);
    else
      snprintf(who, sizeof who, "a process (host %s, pid %d)", host, (int)pid);
    /* the aggregator told its own processes already */
    tell_lost(c, id, who, launcher_rank, pid, cms, ranks, k, 0);
  }
  ntr_heap_free(cms);
  ntr_heap_free(ranks);
  return 0;
}

/* ---------------------------------------------------------- environment -- */

static const char *env_get(const char *env, uint32_t len, const char *name, size_t nl) {
  for (uint32_t o = 0; o < len;) {
    const char *e = env + o;
    size_t el = strnlen(e, len - o);
    if (el > nl && e[nl] == '=' && !memcmp(e, name, nl))
      return e + nl + 1;
    o += (uint32_t)el + 1;
  }
  return NULL;
}

static uint64_t env_digest(const char *env, uint32_t len, int32_t nccl) {
  static const struct ntx_key k = {0x656e762d64696765ull, 0x73742d6e63637472ull};
  uint64_t d = ntx_mix64((uint64_t)(uint32_t)nccl + 1);
  /* a sum of per-entry hashes: independent of the order of environ */
  for (uint32_t o = 0; o < len;) {
    size_t el = strnlen(env + o, len - o);
    d += ntx_siphash(&k, env + o, el);
    o += (uint32_t)el + 1;
  }
  return d;
}

/* The variables of a and b that differ, one line each (bounded). */
static void env_report(struct ntx_check *c, struct ntx_comm *cm, const struct ntx_env_variant *odd,
                       const struct ntx_env_variant *maj, uint32_t *lines) {
  char field[NTX_FIELD + 1], text[NTX_TEXT_MAX], ro[256], rm[256];
  uint8_t *sel = ntr_heap_alloc((size_t)cm->nranks);
  if (!sel)
    return;
  for (int32_t r = 0; r < cm->nranks; r++)
    sel[r] = cm->m[r].state == NTX_M_NONE ? 0 : cm->m[r].env_digest == odd->digest ? 1
             : cm->m[r].env_digest == maj->digest ? 2 : 0;
  int no, nm;
  ntx_rank_list(sel, cm->nranks, 1, ro, sizeof ro, &no);
  ntx_rank_list(sel, cm->nranks, 2, rm, sizeof rm, &nm);
  ntr_heap_free(sel);
  if (odd->nccl != maj->nccl && *lines < NTX_MAX_ENV_LINES) {
    snprintf(text, sizeof text, "env differs on comm %08x: NCCL version: rank%s %s %s %d vs rank%s %s %s %d",
             NTX_COMM_SHORT(cm->id), no > 1 ? "s" : "", ro, no > 1 ? "have" : "has", (int)odd->nccl,
             nm > 1 ? "s" : "", rm, nm > 1 ? "have" : "has", (int)maj->nccl);
    ntx_tell_comm(c, cm, NTX_V_ENV_DIFF, 0, odd->low_rank, maj->low_rank, "NCCL_VERSION", text);
    (*lines)++;
  }
  /* every name of either side, each judged once */
  for (int side = 0; side < 2; side++) {
    const struct ntx_env_variant *src = side ? maj : odd, *oth = side ? odd : maj;
    for (uint32_t o = 0; o < src->len && *lines < NTX_MAX_ENV_LINES;) {
      const char *e = src->env + o;
      size_t el = strnlen(e, src->len - o);
      const char *eq = memchr(e, '=', el);
      o += (uint32_t)el + 1;
      if (!eq)
        continue;
      size_t nl = (size_t)(eq - e);
      const char *a = env_get(odd->env, odd->len, e, nl), *b = env_get(maj->env, maj->len, e, nl);
      if ((side && env_get(oth->env, oth->len, e, nl)) || (a && b && !strcmp(a, b)))
        continue;
      snprintf(field, sizeof field, "%.*s", (int)(nl < NTX_FIELD ? nl : NTX_FIELD), e);
      snprintf(text, sizeof text,
               "env differs on comm %08x: %.*s: rank%s %s %s %s%.200s%s vs rank%s %s %s %s%.200s%s",
               NTX_COMM_SHORT(cm->id), (int)nl, e, no > 1 ? "s" : "", ro, no > 1 ? "have" : "has",
               a ? "'" : "", a ? a : "(unset)", a ? "'" : "", nm > 1 ? "s" : "", rm,
               nm > 1 ? "have" : "has", b ? "'" : "", b ? b : "(unset)", b ? "'" : "");
      ntx_tell_comm(c, cm, NTX_V_ENV_DIFF, 0, odd->low_rank, maj->low_rank, field, text);
      (*lines)++;
    }
  }
}

/* Every rank registered: the most common environment is the reference
 * (a tie goes to the one of the lowest rank), each other one is reported. */
static void env_verdict(struct ntx_check *c, struct ntx_comm *cm) {
  uint32_t maj = 0, lines = 0;
  for (uint32_t i = 1; i < cm->nenv; i++)
    if (cm->env[i].count > cm->env[maj].count ||
        (cm->env[i].count == cm->env[maj].count && cm->env[i].low_rank < cm->env[maj].low_rank))
      maj = i;
  for (uint32_t i = 0; i < cm->nenv; i++)
    if (i != maj)
      env_report(c, cm, &cm->env[i], &cm->env[maj], &lines);
  if (cm->nenv_extra) {
    char text[NTX_TEXT_MAX];
    snprintf(text, sizeof text, "env differs on comm %08x on %u more ranks (not detailed)",
             NTX_COMM_SHORT(cm->id), cm->nenv_extra);
    ntx_tell_comm(c, cm, NTX_V_NOTE, 0, -1, -1, "env", text);
  }
  ntx_tell_comm(c, cm, NTX_V_ENV_DONE, 0, -1, (int64_t)(cm->nenv - 1 + cm->nenv_extra), "env", "");
  cm->env_done = 1;
}

static void env_add(struct ntx_comm *cm, int32_t rank, int32_t nccl, const char *env, uint32_t len) {
  uint64_t d = env_digest(env, len, nccl);
  cm->m[rank].env_digest = d;
  for (uint32_t i = 0; i < cm->nenv; i++)
    if (cm->env[i].digest == d) {
      cm->env[i].count++;
      if (rank < cm->env[i].low_rank)
        cm->env[i].low_rank = rank;
      return;
    }
  struct ntx_env_variant *v = &cm->env[cm->nenv];
  if (cm->nenv == NTX_MAX_ENV_VARIANTS || !(v->env = ntr_heap_alloc(len ? len : 1))) {
    cm->nenv_extra++;
    return;
  }
  memcpy(v->env, env, len);
  v->len = len;
  v->digest = d;
  v->nccl = nccl;
  v->low_rank = rank;
  v->count = 1;
  cm->nenv++;
}

void ntx_check_member_proc(struct ntx_check *c, uint32_t id, uint64_t comm_id, int32_t rank, int32_t pid,
                           int32_t launcher_rank) {
  struct ntx_comm *cm = ntx_comm_find(c, comm_id);
  if (!cm || rank < 0 || rank >= cm->nranks || cm->m[rank].state != NTX_M_ACTIVE ||
      cm->m[rank].client != (int32_t)id)
    return;
  cm->m[rank].pid = pid;
  cm->m[rank].lrank = launcher_rank;
}

void ntx_check_register(struct ntx_check *c, uint32_t id, uint64_t comm_id, int32_t rank,
                        int32_t nranks, int32_t nccl_version, const char *env, uint32_t env_len,
                        double now) {
  char text[NTX_TEXT_MAX];
  if (id >= c->lim.max_clients || !c->clients[id].active || nranks <= 0 ||
      (uint32_t)nranks > c->lim.max_nranks || rank < 0 || rank >= nranks)
    return;
  struct ntx_check_client *cl = &c->clients[id];
  struct ntx_comm *cm = ntx_comm_find(c, comm_id);
  if (!cm && !(cm = comm_create(c, comm_id, nranks, now)))
    return;
  if (cm->nranks != nranks) {
    snprintf(text, sizeof text, "comm %08x: rank %d registered with nranks=%d, others with %d",
             NTX_COMM_SHORT(comm_id), (int)rank, (int)nranks, (int)cm->nranks);
    c->ops.verdict(c->ctx, id, NTX_V_NOTE, comm_id, 0, rank, nranks, "nranks", text);
    return;
  }
  struct ntx_member *m = &cm->m[rank];
  if (m->state == NTX_M_ACTIVE && m->client == (int32_t)id)
    return; /* the same process registering the same rank again (a retried init) */
  if (m->state == NTX_M_ACTIVE) {
    snprintf(text, sizeof text, "comm %08x: rank %d registered twice (pid %d and pid %d)",
             NTX_COMM_SHORT(comm_id), (int)rank, (int)c->clients[m->client].pid, (int)cl->pid);
    c->ops.verdict(c->ctx, id, NTX_V_NOTE, comm_id, 0, rank, 0, "rank", text);
    return;
  }
  if (cl->ncomms == cl->capcomms) {
    uint32_t nc = cl->capcomms ? 2 * cl->capcomms : 8;
    void *p = ntr_heap_realloc(cl->comms, nc * sizeof *cl->comms);
    if (!p)
      return;
    cl->comms = p;
    cl->capcomms = nc;
  }
  cl->comms[cl->ncomms].cm = cm;
  cl->comms[cl->ncomms].rank = rank;
  cl->ncomms++;
  int fresh = m->state == NTX_M_NONE;
  m->client = (int32_t)id;
  m->pid = cl->pid; /* an aggregator's: ntx_check_member_proc names the process behind it */
  m->lrank = cl->lrank;
  m->host = ntx_host_intern(c, cl->host);
  m->clk_offset = cl->clk_offset;
  m->gen = cl->gen;
  m->state = NTX_M_ACTIVE;
  if (!fresh)
    return; /* a re-registration (reconnected client): init and env already judged */
  cm->nreg++;
  env_add(cm, rank, nccl_version, env, env_len);
  if (cm->nreg == (uint32_t)cm->nranks) {
    if (cm->init_reported) {
      snprintf(text, sizeof text, "comm %08x init: all %d ranks joined now", NTX_COMM_SHORT(comm_id),
               (int)cm->nranks);
      ntx_tell_comm(c, cm, NTX_V_NOTE, 0, -1, 0, "init", text);
    }
    env_verdict(c, cm);
  }
}

/* --------------------------------------------------------- collectives -- */

static int fp_same(const struct ntx_fp *a, const struct ntx_fp *b) {
  return a->kind == b->kind && a->count == b->count && a->dtype == b->dtype &&
         a->redop == b->redop && a->peer == b->peer;
}

static const char *fp_field(const struct ntx_fp *a, const struct ntx_fp *b) {
  if (a->kind != b->kind) return "op";
  if (a->count != b->count) return "count";
  if (a->dtype != b->dtype) return "dtype";
  if (a->redop != b->redop) return "redop";
  return a->dir == NTX_FP_COLL ? "root" : "peer";
}

static void remember_mismatch(struct ntx_comm *cm, uint64_t seq, const char *text) {
  uint32_t i = cm->nrecent++ % NTX_RECENT_MM;
  cm->recent[i].seq = seq;
  snprintf(cm->recent[i].text, sizeof cm->recent[i].text, "%.*s", NTX_REQ_TEXT - 1, text);
}

int ntx_mismatch_text(const struct ntx_fp *v, uint32_t nvar, const uint32_t *cnt, const uint8_t *rank_var,
                      int32_t nranks, uint64_t comm_id, uint64_t seq, int missing, char *text, size_t len,
                      const char **fieldp, int32_t *culpritp, int32_t *majlowp) {
  /* majority: most ranks; on a tie the variant holding the lowest rank */
  uint32_t maj = 0;
  int32_t low[NTX_NVAR];
  if (nvar > NTX_NVAR)
    nvar = NTX_NVAR;
  for (uint32_t k = 0; k < nvar; k++) {
    low[k] = nranks;
    for (int32_t r = 0; r < nranks; r++)
      if (rank_var[r] == k) {
        low[k] = r;
        break;
      }
  }
  for (uint32_t k = 1; k < nvar; k++)
    if (cnt[k] > cnt[maj] || (cnt[k] == cnt[maj] && low[k] < low[maj]))
      maj = k;
  char list[512], desc[160];
  size_t o = 0;
  const char *field = NULL;
  int32_t culprit = -1;
  int n;
  text[0] = '\0';
  for (uint32_t k = 0; k < nvar; k++) {
    if (k == maj || !cnt[k])
      continue;
    if (!field) {
      field = fp_field(&v[k], &v[maj]);
      culprit = low[k];
      o += (size_t)snprintf(text + o, len - o, "mismatch on comm %08x seq %llu field %s: ",
                            NTX_COMM_SHORT(comm_id), (unsigned long long)seq, field);
    } else if (o < len) {
      o += (size_t)snprintf(text + o, len - o, " and ");
    }
    ntx_rank_list(rank_var, nranks, (uint8_t)k, list, sizeof list, &n);
    ntx_fp_describe(&v[k], desc, sizeof desc);
    if (o < len)
      o += (size_t)snprintf(text + o, len - o, "rank%s %s %s", n > 1 ? "s" : "", list, desc);
  }
  if (!field)
    return 0;
  ntx_rank_list(rank_var, nranks, (uint8_t)maj, list, sizeof list, &n);
  ntx_fp_describe(&v[maj], desc, sizeof desc);
  if (o < len)
    o += (size_t)snprintf(text + o, len - o, " vs rank%s %s %s", n > 1 ? "s" : "", list, desc);
  for (uint32_t k = 0; k < nvar; k++)
    if (k != maj && cnt[k] == cnt[maj] && o < len) {
      o += (size_t)snprintf(text + o, len - o, " (no majority: both named)");
      break;
    }
  if (missing && o < len) {
    ntx_rank_list(rank_var, nranks, NTX_NO_VAR, list, sizeof list, &n);
    snprintf(text + o, len - o, "; rank%s %s not there yet", n > 1 ? "s" : "", list);
  }
  *fieldp = field;
  *culpritp = culprit;
  *majlowp = low[maj];
  return 1;
}

static void report_mismatch(struct ntx_check *c, struct ntx_comm *cm, struct ntx_slot *s) {
  struct ntx_varset *vs = s->vs;
  char text[NTX_TEXT_MAX];
  const char *field;
  int32_t culprit, majlow;
  if (!ntx_mismatch_text(vs->v, vs->nvar, vs->cnt, vs->rank_var, cm->nranks, cm->id, s->seq,
                         s->arrived < (uint32_t)cm->nranks, text, sizeof text, &field, &culprit, &majlow))
    return;
  c->st.mismatches++;
  remember_mismatch(cm, s->seq, text);
  /* The first disagreement on a comm is the news; the seqs after it usually
   * disagree because of it.  Strict callers still get each answer.  The
   * verdict goes out before the strict replies: a client handles frames in
   * order, so its record and dump exist before its caller can exit. */
  if (!cm->coll_reported) {
    cm->coll_reported = 1;
    ntx_tell_comm(c, cm, NTX_V_MISMATCH, s->seq, culprit, majlow, field, text);
  }
  ntx_resolve(c, s->waiters, NTX_REPLY_MISMATCH, text);
  s->waiters = NULL;
}

static void slot_decide(struct ntx_check *c, struct ntx_comm *cm, struct ntx_slot *s, int32_t unchecked) {
  if (s->state != NTX_SLOT_OPEN)
    return;
  if (s->vs)
    report_mismatch(c, cm, s);
  ntx_resolve(c, s->waiters, unchecked ? NTX_REPLY_UNCHECKED : NTX_REPLY_OK, "");
  s->waiters = NULL;
  s->state = NTX_SLOT_DONE;
}

/* Advance base over decided seqs, freeing their slots. */
static void window_advance(struct ntx_check *c, struct ntx_comm *cm) {
  for (;;) {
    struct ntx_slot *s = &cm->win[cm->base & (c->lim.window - 1)];
    if (s->seq != cm->base || s->state != NTX_SLOT_DONE)
      return;
    if (s->vs)
      ntr_heap_free(s->vs->rank_var);
    ntr_heap_free(s->vs);
    memset(s, 0, sizeof *s);
    cm->base++;
  }
}

static struct ntx_slot *slot_get(struct ntx_check *c, struct ntx_comm *cm, uint64_t seq, double now) {
  if (!cm->win && !(cm->win = ntr_heap_calloc(c->lim.window, sizeof *cm->win)))
    return NULL;
  if (seq < cm->base) {
    c->st.stale++;
    return NULL;
  }
  /* A rank ran a whole window ahead of the slowest: decide the oldest seqs
   * with what is known (bounded memory beats completeness). */
  while (seq >= cm->base + c->lim.window) {
    struct ntx_slot *o = &cm->win[cm->base & (c->lim.window - 1)];
    if (o->seq == cm->base && o->state == NTX_SLOT_OPEN) {
      c->st.evicted++;
      slot_decide(c, cm, o, 1);
    } else if (o->seq != cm->base) {
      cm->base++; /* nobody sent that seq: nothing to decide */
      continue;
    }
    window_advance(c, cm);
  }
  struct ntx_slot *s = &cm->win[seq & (c->lim.window - 1)];
  if (s->seq != seq || s->state == NTX_SLOT_EMPTY) {
    memset(s, 0, sizeof *s);
    s->seq = seq;
    s->first_t = now;
    s->state = NTX_SLOT_OPEN;
  }
  return s;
}

static void slot_arrive(struct ntx_check *c, struct ntx_comm *cm, struct ntx_slot *s, int32_t rank,
                        const struct ntx_fp *fp) {
  if (s->state != NTX_SLOT_OPEN)
    return;
  s->arrived++;
  if (fp)
    ntx_late_arrive(c, cm, s, (uint32_t)cm->m[rank].client, rank, fp->t_ns);
  if (fp) {
    if (!s->has_fp) {
      s->fp0 = *fp;
      s->has_fp = 1;
    } else if (s->vs || !fp_same(fp, &s->fp0)) {
      struct ntx_varset *vs = s->vs;
      if (!vs) { /* first disagreement on this seq: who had fp0 so far */
        vs = ntr_heap_calloc(1, sizeof *vs);
        if (!vs || !(vs->rank_var = ntr_heap_alloc((size_t)cm->nranks))) {
          ntr_heap_free(vs);
          return;
        }
        vs->v[0] = s->fp0;
        vs->nvar = 1;
        for (int32_t r = 0; r < cm->nranks; r++) {
          vs->rank_var[r] = r != rank && cm->m[r].last_seq >= s->seq ? 0 : NTX_NO_VAR;
          vs->cnt[0] += vs->rank_var[r] == 0;
        }
        s->vs = vs;
      }
      uint32_t k = 0;
      while (k < vs->nvar && !fp_same(fp, &vs->v[k]))
        k++;
      if (k == vs->nvar) {
        if (vs->nvar < NTX_NVAR)
          vs->v[vs->nvar++] = *fp;
        else
          k = NTX_NVAR - 1; /* more variants than kept: counted with the last */
      }
      vs->rank_var[rank] = (uint8_t)k;
      vs->cnt[k]++;
    }
  }
  if (s->arrived >= (uint32_t)cm->nranks) {
    ntx_late_decided(c, cm, s);
    slot_decide(c, cm, s, 0);
    window_advance(c, cm);
  }
}

void ntx_coll_fp(struct ntx_check *c, struct ntx_comm *cm, const struct ntx_fp *fp, double now,
                    struct ntx_waiter *w) {
  struct ntx_member *m = &cm->m[fp->rank];
  c->now = now;
  if (fp->seq > m->last_seq && fp->seq > 0) {
    /* Seqs this rank skipped (its records were dropped) count as arrived
     * unseen, so the others' seqs still get decided. */
    uint64_t from = m->last_seq + 1 > cm->base ? m->last_seq + 1 : cm->base;
    if (fp->seq - from > c->lim.window)
      from = fp->seq - c->lim.window;
    for (uint64_t q = from; q < fp->seq; q++) {
      struct ntx_slot *g = slot_get(c, cm, q, now);
      if (g)
        slot_arrive(c, cm, g, fp->rank, NULL);
    }
    struct ntx_slot *s = slot_get(c, cm, fp->seq, now);
    m->last_seq = fp->seq;
    if (s && w && s->state == NTX_SLOT_OPEN) { /* attach before arriving: it may decide now */
      w->next = s->waiters;
      s->waiters = w;
      w = NULL;
    }
    if (s)
      slot_arrive(c, cm, s, fp->rank, fp);
  } else {
    c->st.dup++;
    struct ntx_slot *s = fp->seq >= cm->base && cm->win ? &cm->win[fp->seq & (c->lim.window - 1)] : NULL;
    if (s && w && s->seq == fp->seq && s->state == NTX_SLOT_OPEN) {
      w->next = s->waiters;
      s->waiters = w;
      w = NULL;
    }
  }
  if (w) { /* already decided: answer from what is remembered */
    for (uint32_t i = 0; i < NTX_RECENT_MM && i < cm->nrecent; i++)
      if (cm->recent[i].seq == fp->seq) {
        ntx_resolve(c, w, NTX_REPLY_MISMATCH, cm->recent[i].text);
        return;
      }
    ntx_resolve(c, w, NTX_REPLY_OK, "");
  }
}

void ntx_check_decide_base(struct ntx_check *c, struct ntx_comm *cm) {
  slot_decide(c, cm, &cm->win[cm->base & (c->lim.window - 1)], 0);
  window_advance(c, cm);
}

/* jobview.c -- the whole job's view for a status query (contract: jobview.h). */
#include "interpose/exchange/jobview.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "interpose/exchange/check_int.h"
#include "interpose/exchange/wire.h"

struct jv {
  uint8_t *buf;
  size_t len;        /* bytes of the part being filled, head included */
  uint32_t n, part;  /* entries of this part; parts emitted */
  size_t total;      /* bytes of all parts so far */
  int truncated;
  ntx_jv_emit emit;
  void *ctx;
};

static void jv_flush(struct jv *j, uint32_t flags) {
  ntx_enc_job_head(j->buf, NTX_JOB_HEAD, j->part, flags | (j->truncated ? NTX_JOB_TRUNCATED : 0u), j->n);
  j->emit(j->ctx, j->buf, j->len);
  j->total += j->len;
  j->part++;
  j->len = NTX_JOB_HEAD;
  j->n = 0;
}

/* Append one entry, starting a new part when this one is full.
 * @return 0, or -1 once the reply bound is reached (the view is cut). */
static int jv_put(struct jv *j, const struct ntx_job_ent *e) {
  if (j->truncated)
    return -1;
  uint8_t tmp[4 + NTX_JE_TEXT_FIXED + NTX_JOB_TEXT_MAX];
  size_t n = ntx_job_put(tmp, sizeof tmp, e);
  /* room for this entry and the last part's head */
  if (j->total + j->len + n + NTX_JOB_HEAD > NTX_JOB_REPLY_MAX) {
    j->truncated = 1;
    return -1;
  }
  if (j->len + n > NTX_FRAME_MAX_PAYLOAD)
    jv_flush(j, 0);
  memcpy(j->buf + j->len, tmp, n);
  j->len += n;
  j->n++;
  return 0;
}

/* The summary line, built as a list of findings. */
struct line {
  char s[NTX_JOB_TEXT_MAX + 1];
  size_t len;
  int items;
};

static void line_add(struct line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line_add(struct line *l, const char *fmt, ...) {
  if (l->len >= sizeof l->s - 1)
    return;
  if (l->items++)
    l->len += (size_t)snprintf(l->s + l->len, sizeof l->s - l->len, "; ");
  if (l->len >= sizeof l->s - 1)
    return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(l->s + l->len, sizeof l->s - l->len, fmt, ap);
  va_end(ap);
  l->len = w < 0 ? l->len : l->len + (size_t)w;
  if (l->len > sizeof l->s - 1)
    l->len = sizeof l->s - 1;
}

static const char *host_of(const struct ntx_check *c, const struct ntx_member *m) {
  return m->host && m->host <= c->nhosts ? c->hosts[m->host - 1] : "?";
}

static int member_stopped(const struct ntx_member *m, const uint8_t *stopped) {
  return stopped && m->state == NTX_M_ACTIVE && m->client >= 0 && stopped[m->client];
}

/* The coordinator's live verdict: what is wrong now, worst first. */
static void summary(const struct ntx_check *c, const uint8_t *stopped, struct line *l) {
  uint32_t ranks = 0, lost = 0, nstopped = 0, hosts = c->nhosts, clients = 0;
  for (uint32_t i = 0; i < c->lim.max_clients; i++)
    clients += c->clients[i].active;
  struct line found;
  found.len = 0;
  found.items = 0;
  found.s[0] = '\0';
  for (uint32_t k = 0; k < c->ncomms; k++) { /* mismatches first: the cause of what follows */
    const struct ntx_comm *cm = c->comms[k];
    for (int s = 0; s < 2; s++)
      if (cm->said[s].kind)
        line_add(&found, "%.300s", cm->said[s].text);
  }
  for (uint32_t k = 0; k < c->ncomms; k++) {
    const struct ntx_comm *cm = c->comms[k];
    ranks += (uint32_t)cm->nranks;
    for (int32_t r = 0; r < cm->nranks; r++) {
      const struct ntx_member *m = &cm->m[r];
      if (m->state == NTX_M_LOST && lost++ < 4)
        line_add(&found, "lost rank %d of comm %08x (host %s, pid %d)", (int)r, NTX_COMM_SHORT(cm->id),
                 host_of(c, m), (int)m->pid);
      else if (member_stopped(m, stopped) && nstopped++ < 4)
        line_add(&found, "rank %d of comm %08x is stopped (host %s, pid %d): waited for", (int)r,
                 NTX_COMM_SHORT(cm->id), host_of(c, m), (int)m->pid);
    }
    if (cm->nreg < (uint32_t)cm->nranks)
      line_add(&found, "comm %08x: %u of %d ranks never registered", NTX_COMM_SHORT(cm->id),
               (unsigned)((uint32_t)cm->nranks - cm->nreg), (int)cm->nranks);
  }
  if (lost > 4)
    line_add(&found, "%u more lost ranks", (unsigned)(lost - 4));
  if (nstopped > 4)
    line_add(&found, "%u more stopped ranks", (unsigned)(nstopped - 4));
  for (uint32_t k = 0; k < c->ncomms; k++) /* then what is slow */
    for (int s = 2; s < NTX_SAID_KINDS; s++)
      if (c->comms[k]->said[s].kind && !(s == 3 && c->comms[k]->nreg == (uint32_t)c->comms[k]->nranks))
        line_add(&found, "%.300s", c->comms[k]->said[s].text);
  snprintf(l->s, sizeof l->s, "%u connection%s, %u host%s, %u communicator%s (%u ranks): %s", (unsigned)clients,
           clients == 1 ? "" : "s", (unsigned)hosts, hosts == 1 ? "" : "s", (unsigned)c->ncomms,
           c->ncomms == 1 ? "" : "s", (unsigned)ranks,
           found.items ? found.s : c->ncomms ? "no problem seen" : "no communicator registered yet");
}

uint32_t ntx_jv_build(struct ntx_check *c, const uint8_t *stopped, uint8_t *buf, ntx_jv_emit emit, void *ctx) {
  struct jv j = {.buf = buf, .len = NTX_JOB_HEAD, .emit = emit, .ctx = ctx};
  struct ntx_job_ent e;
  struct line l;
  summary(c, stopped, &l);
  memset(&e, 0, sizeof e);
  e.kind = NTX_JE_TEXT;
  e.u.text.vkind = NTX_JT_SUMMARY;
  e.u.text.peer = -1;
  snprintf(e.u.text.text, sizeof e.u.text.text, "%s", l.s);
  jv_put(&j, &e);
  for (uint32_t i = 0; i < c->lim.max_clients; i++) {
    const struct ntx_check_client *cl = &c->clients[i];
    if (!cl->active)
      continue;
    memset(&e, 0, sizeof e);
    e.kind = NTX_JE_PROC;
    e.u.proc.client = i;
    e.u.proc.pid = cl->pid;
    e.u.proc.lrank = cl->lrank;
    e.u.proc.state = NTX_JS_CONNECTED;
    e.u.proc.flags = (cl->agg ? NTX_JP_AGG : 0u) | (stopped && stopped[i] ? NTX_JP_STOPPED : 0u);
    snprintf(e.u.proc.host, sizeof e.u.proc.host, "%s", cl->host);
    if (jv_put(&j, &e) < 0)
      break;
  }
  for (uint32_t k = 0; k < c->ncomms && !j.truncated; k++) {
    const struct ntx_comm *cm = c->comms[k];
    memset(&e, 0, sizeof e);
    e.kind = NTX_JE_COMM;
    e.u.comm.comm_id = cm->id;
    e.u.comm.nranks = cm->nranks;
    e.u.comm.nreg = cm->nreg;
    e.u.comm.base = cm->base;
    for (int32_t r = 0; r < cm->nranks; r++)
      if (cm->m[r].last_seq > e.u.comm.newest)
        e.u.comm.newest = cm->m[r].last_seq;
    e.u.comm.flags = (cm->coll_reported || cm->p2p_reported ? NTX_JC_MISMATCH : 0u) |
                     (cm->init_reported ? NTX_JC_INIT_WAIT : 0u) | (cm->env_done ? NTX_JC_ENV_DONE : 0u);
    uint32_t med, last;
    ntx_late_of(cm, 0, &med, &last, &e.u.comm.judged);
    if (jv_put(&j, &e) < 0)
      break;
    for (int32_t r = 0; r < cm->nranks; r++) {
      const struct ntx_member *m = &cm->m[r];
      memset(&e, 0, sizeof e);
      e.kind = NTX_JE_MEMBER;
      e.u.member.comm_id = cm->id;
      e.u.member.rank = r;
      e.u.member.state = m->state == NTX_M_ACTIVE ? NTX_JS_CONNECTED : m->state == NTX_M_EXITED ? NTX_JS_EXITED
                         : m->state == NTX_M_LOST ? NTX_JS_LOST : NTX_JS_NONE;
      e.u.member.stopped = (uint32_t)member_stopped(m, stopped);
      e.u.member.pid = m->state == NTX_M_NONE ? -1 : m->pid;
      e.u.member.lrank = m->state == NTX_M_NONE ? -1 : m->lrank;
      e.u.member.last_seq = m->last_seq;
      ntx_late_of(cm, r, &e.u.member.late_med_us, &e.u.member.late_last, &e.u.member.late_n);
      snprintf(e.u.member.host, sizeof e.u.member.host, "%s", m->state == NTX_M_NONE ? "" : host_of(c, m));
      if (jv_put(&j, &e) < 0)
        break;
    }
    for (int s = 0; s < NTX_SAID_KINDS && !j.truncated; s++) {
      if (!cm->said[s].kind)
        continue;
      memset(&e, 0, sizeof e);
      e.kind = NTX_JE_TEXT;
      e.u.text.vkind = cm->said[s].kind;
      e.u.text.peer = cm->said[s].peer;
      e.u.text.comm_id = cm->id;
      e.u.text.seq = cm->said[s].seq;
      snprintf(e.u.text.text, sizeof e.u.text.text, "%s", cm->said[s].text);
      jv_put(&j, &e);
    }
  }
  jv_flush(&j, NTX_JOB_LAST);
  return j.part;
}

void ntx_jv_busy(uint8_t *buf, size_t cap, double per_s, ntx_jv_emit emit, void *ctx) {
  struct ntx_job_ent e;
  memset(&e, 0, sizeof e);
  e.kind = NTX_JE_TEXT;
  e.u.text.vkind = NTX_JT_SUMMARY;
  e.u.text.peer = -1;
  snprintf(e.u.text.text, sizeof e.u.text.text,
           "the coordinator answers at most %.0f status queries a second, and had more: try again", per_s);
  size_t n = ntx_enc_job_head(buf, cap, 0, NTX_JOB_LAST | NTX_JOB_BUSY, 1);
  size_t m = n ? ntx_job_put(buf + n, cap - n, &e) : 0;
  if (m)
    emit(ctx, buf, n + m);
}

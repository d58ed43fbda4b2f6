/* coord_query.c -- the coordinator's side of a status query (protocol v5,
 * `nccltrace status --job`; contract: coord.h, "Status queries"). */
#include "interpose/exchange/coord_int.h"

#include <stdio.h>
#include <string.h>

#include "interpose/exchange/jobview.h"
#include "recorder/heap.h"

/* HELLO of a status query (NTX_HELLO_QUERY): authenticated as any client,
 * never a rank: not in the checker, not counted against max_ready.
 * @return 0, or -1 when the connection was closed. */
int ntx_coord_query_hello(struct ntx_coord *co, uint32_t id, const struct ntx_frame *f, const struct ntx_msg *m,
                          double now) {
  struct ntx_coord_conn *c = &co->conns[id];
  if (m->u.hello.flags & NTX_HELLO_AGG) {
    co->st.rejected_malformed++;
    ntx_coord_close(co, id, 1, "HELLO says both node aggregator and status query");
    return -1;
  }
  if (co->queries >= QUERY_CONNS) {
    co->st.rejected_budget++;
    co->st.queries_refused++;
    ntx_coord_close(co, id, 1, "too many status queries at once");
    return -1;
  }
  if (ntx_coord_hello_auth(co, id, f, m) < 0)
    return -1;
  memcpy(c->sess.nonce + NTX_NONCE, m->u.hello.nonce, NTX_NONCE);
  c->state = C_QUERY;
  co->pending--;
  co->queries++;
  c->opened = now; /* its life (QUERY_LIFE_S) runs from here */
  snprintf(c->host, sizeof c->host, "%s", m->u.hello.host);
  c->pid = m->u.hello.pid;
  uint8_t buf[16];
  ntx_coord_send(co, id, NTX_MSG_WELCOME, buf, ntx_enc_welcome(buf, sizeof buf, id, co->cfg.embedded ? NTX_COORD_EMBEDDED : 0));
  return 0;
}

struct query_out {
  struct ntx_coord *co;
  uint32_t id;
};

static void query_emit(void *ctx, const uint8_t *payload, size_t len) {
  struct query_out *q = ctx;
  ntx_coord_send(q->co, q->id, NTX_MSG_JOB, payload, len);
}

/* A frame on a query connection: one QUERY, answered with the job's view
 * (or refused by the rate limit), then BYE or its close.
 * @return 0, or -1 when the connection was closed. */
int ntx_coord_query_frame(struct ntx_coord *co, uint32_t id, const struct ntx_msg *m, double now) {
  struct ntx_coord_conn *c = &co->conns[id];
  if (m->type == NTX_MSG_BYE) {
    ntx_coord_close(co, id, 0, NULL);
    return -1;
  }
  if (m->type != NTX_MSG_QUERY || c->answered) {
    co->st.rejected_malformed++;
    ntx_coord_close(co, id, 1, c->answered ? "a second QUERY on one connection" : "message type not allowed from a status query");
    return -1;
  }
  c->answered = 1;
  co->q_tokens += (now - co->q_t) * QUERY_RATE;
  if (co->q_tokens > QUERY_BURST || co->q_t == 0)
    co->q_tokens = QUERY_BURST;
  co->q_t = now;
  uint8_t *buf = ntr_heap_alloc(NTX_FRAME_MAX_PAYLOAD);
  struct query_out q = {co, id};
  if (!buf) {
    ntx_coord_close(co, id, 1, "out of memory for a status query");
    return -1;
  }
  if (co->q_tokens < 1.0) {
    co->st.queries_refused++;
    ntx_jv_busy(buf, NTX_FRAME_MAX_PAYLOAD, QUERY_RATE, query_emit, &q);
  } else {
    co->q_tokens -= 1.0;
    co->st.queries++;
    /* who is stopped: silent past the dead timeout and stopped (sweep) */
    uint8_t *stopped = ntr_heap_calloc(co->cfg.lim.max_clients, 1);
    for (uint32_t i = 0; stopped && i < co->cfg.lim.max_clients; i++)
      stopped[i] = co->conns[i].state == C_READY && co->conns[i].said_stopped && now - co->conns[i].last_rx > 1.5;
    ntx_jv_build(co->chk, stopped, buf, query_emit, &q);
    ntr_heap_free(stopped);
    if (co->cfg.log)
      ntx_coord_log(co, "answered a status query from host %s, pid %d", c->host, (int)c->pid);
  }
  ntr_heap_free(buf);
  return 0;
}

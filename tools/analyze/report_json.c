/* report_json.c -- `analyze --json`: exactly one JSON object (design §7;
 * keys documented in docs/analyze.md, every one in docs/analyze.schema.json,
 * which the tests validate real output against: a key added here goes
 * there too).  Built with jansson so strings from hostile inputs (host
 * names, env values) are always escaped correctly.
 *
 * Thread-safety: single-threaded (after loading).  Not signal-safe.
 * Ranks without evidence are listed up to NTA_LIST_BUDGET over the whole
 * report; a communicator whose list was cut says so in
 * "no_evidence_unlisted" (present only then: never for a real job).
 */
#include <jansson.h>
#include <string.h>
#include "tools/analyze/analyze.h"
#include "tools/ntt.h"

static json_t *hexid(uint64_t id) {
  char h[17];
  nta_comm_hex(id, h);
  return json_string(h);
}

/* Host names and texts come from files: keep only valid, bounded strings. */
static json_t *str(const char *s, size_t max) {
  char buf[4096];
  size_t n = strnlen(s, max < sizeof(buf) - 1 ? max : sizeof(buf) - 1);
  memcpy(buf, s, n);
  buf[n] = 0;
  json_t *j = json_string(buf);
  return j ? j : json_string("(invalid utf-8)");
}

/* A straggler finding's own keys (docs/analyze.md, "straggler"). */
static void strag_keys(json_t *o, const struct nta_strag *g) {
  json_object_set_new(o, "lateness_ms", json_real(g->lateness_ms));
  json_object_set_new(o, "late_fraction", g->consistent ? json_real(g->late_fraction) : json_null());
  json_object_set_new(o, "window", json_integer(g->window));
  json_object_set_new(o, "arrival", json_string(g->device ? "device" : "host"));
  json_object_set_new(o, "clock_uncertainty_ms", g->uncert_ms >= 0 ? json_real(g->uncert_ms) : json_null());
  json_t *st = json_array();
  for (int i = 0; i < g->nstalls; i++) {
    json_t *x = json_object();
    json_object_set_new(x, "seq", json_integer((json_int_t)g->stalls[i].seq));
    json_object_set_new(x, "rank", json_integer(g->stalls[i].rank));
    json_object_set_new(x, "late_ms", json_real(g->stalls[i].late_ms));
    json_object_set_new(x, "t_ns", json_integer((json_int_t)g->stalls[i].t_ns));
    json_array_append_new(st, x);
  }
  json_object_set_new(o, "stalls", st);
  json_t *sl = json_array();
  for (int i = 0; i < g->nslow; i++) {
    json_t *x = json_object();
    json_object_set_new(x, "seq", json_integer((json_int_t)g->slow[i].seq));
    json_object_set_new(x, "last_rank", json_integer(g->slow[i].rank));
    json_object_set_new(x, "held_ms", json_real(g->slow[i].held_ms));
    json_object_set_new(x, "usual_ms", json_real(g->slow[i].usual_ms));
    json_object_set_new(x, "last_ms", json_real(g->slow[i].last_ms));
    json_object_set_new(x, "took_ms", json_real(g->slow[i].took_ms));
    json_object_set_new(x, "t_ns", json_integer((json_int_t)g->slow[i].t_ns));
    json_array_append_new(sl, x);
  }
  json_object_set_new(o, "slow_collectives", sl);
}

static json_t *secondary_json(const struct nta_job *job) {
  json_t *a = json_array();
  for (int i = 0; i < job->nstrag; i++) {
    const struct nta_strag *g = &job->strag[i];
    if (g == job->v.strag)
      continue;
    json_t *o = json_object();
    json_object_set_new(o, "class", json_string(nta_class_name(nta_strag_class(g))));
    json_object_set_new(o, "comm", hexid(g->comm->id));
    json_t *r = json_array();
    if (g->rank >= 0)
      json_array_append_new(r, json_integer(g->rank));
    json_object_set_new(o, "ranks", r);
    strag_keys(o, g);
    json_object_set_new(o, "summary", str(g->summary, sizeof(g->summary)));
    json_array_append_new(a, o);
  }
  return a;
}

static json_t *verdict_json(const struct nta_job *job) {
  const struct nta_verdict *v = &job->v;
  json_t *o = json_object();
  json_object_set_new(o, "class", json_string(nta_class_name(v->cls)));
  json_object_set_new(o, "field", v->field[0] ? json_string(v->field) : json_null());
  json_object_set_new(o, "comm", v->comm ? hexid(v->comm->id) : json_null());
  json_object_set_new(o, "seq", v->seq ? json_integer((json_int_t)v->seq) : json_null());
  if (v->pg[0]) /* a verdict from Flight Recorder dumps alone: its process group */
    json_object_set_new(o, "process_group", str(v->pg, sizeof(v->pg)));
  if (v->replay) /* a CUDA graph replay (docs/analyze.md) */
    json_object_set_new(o, "replay", json_integer((json_int_t)v->replay));
  json_t *r = json_array();
  for (int i = 0; i < v->nranks; i++)
    json_array_append_new(r, json_integer(v->ranks[i]));
  json_object_set_new(o, "ranks", r);
  if (v->has_exit)
    json_object_set_new(o, "exit_code", json_integer(v->exit_code));
  if (v->has_signal)
    json_object_set_new(o, "signal", json_integer(v->signo));
  if (v->has_error) {
    json_object_set_new(o, "error", json_string(ntt_result_name(v->error)));
    json_object_set_new(o, "error_code", json_integer(v->error));
  }
  json_object_set_new(o, "t_ns", v->t_ns ? json_integer((json_int_t)v->t_ns) : json_null());
  if (v->strag)
    strag_keys(o, v->strag);
  json_object_set_new(o, "summary", str(v->summary, sizeof(v->summary)));
  json_t *st = nta_verdict_stack_json(v);
  if (st)
    json_object_set_new(o, "stack", st);
  if (v->silent == 2)
    json_object_set_new(o, "ring_lost", json_true());
  json_object_set_new(o, "next", json_string(v->next));
  return o;
}

static json_t *procs_json(const struct nta_job *job) {
  json_t *a = json_array();
  for (int i = 0; i < job->nprocs; i++) {
    const struct nta_proc *p = &job->procs[i];
    json_t *o = json_object();
    json_object_set_new(o, "rank", json_integer(p->lrank));
    json_object_set_new(o, "host", str(p->img->hdr.host, sizeof(p->img->hdr.host)));
    json_object_set_new(o, "pid", json_integer(p->img->hdr.pid));
    json_object_set_new(o, "exe", str(p->img->hdr.exe, sizeof(p->img->hdr.exe)));
    json_object_set_new(o, "state", json_string(nta_fate_name(p->fate)));
    json_object_set_new(o, "exit_code", p->fate == NTA_EXITED ? json_integer(p->exit_code) : json_null());
    json_object_set_new(o, "signal", p->fate == NTA_SIGNALED ? json_integer(p->signo) : json_null());
    json_object_set_new(o, "files", json_integer(p->nfiles));
    json_object_set_new(o, "records", json_integer((json_int_t)p->nrecs));
    json_object_set_new(o, "lost", json_integer((json_int_t)p->lost));
    json_object_set_new(o, "first_ns", json_integer((json_int_t)p->first_ns));
    json_object_set_new(o, "last_ns", json_integer((json_int_t)p->last_ns));
    json_object_set_new(o, "python_threads", nta_pythreads_json(p));
    char label[512];
    nta_proc_label(p, label, sizeof label);
    json_object_set_new(o, "label", str(label, sizeof label));
    /* the comm ranks it holds: several for ncclCommInitAll or a thread per device */
    json_t *held = json_array();
    for (int mi = 0; mi < p->nmems; mi++) {
      const struct nta_comm *c = p->mems[mi]->comm;
      if (nta_member_of(c, p) != p->mems[mi])
        continue;
      int r[NTA_MAX_VRANKS];
      int n = nta_proc_ranks(c, p, r, NTA_MAX_VRANKS);
      json_t *h = json_object(), *ra = json_array();
      for (int q = 0; q < n; q++)
        json_array_append_new(ra, json_integer(r[q]));
      json_object_set_new(h, "comm", hexid(c->id));
      json_object_set_new(h, "ranks", ra);
      json_array_append_new(held, h);
    }
    json_object_set_new(o, "comm_ranks", held);
    json_t *seen = json_null();
    if (p->run) { /* the status nccltrace run saw, for a process that left no exit record */
      seen = json_object();
      json_object_set_new(seen, p->run->signaled ? "signal" : "exit_code", json_integer(p->run->code));
    }
    json_object_set_new(o, "run_status", seen);
    json_object_set_new(o, "python_threads_from", nta_pythreads_from_json(p));
    json_array_append_new(a, o);
  }
  return a;
}

/* The member's open proxy ops (the plugin's inside view), null when none. */
static json_t *waits_json(const struct nta_member *m) {
  if (!m->d->nwaits)
    return json_null();
  json_t *a = json_array();
  for (int k = 0; k < m->d->nwaits; k++) {
    const struct nta_wait *w = &m->d->waits[k];
    const struct nta_wait *pw;
    const struct nta_member *pm;
    const char *ps = nta_wait_peer(m, w, &pw, &pm);
    const char *sn = w->step >= 0 ? nta_step_state_name(w->state) : NULL;
    const char *sw = w->step >= 0 ? nta_step_state_what(w->state) : NULL;
    char t[512];
    nta_wait_text(m, w, t, sizeof t);
    json_t *x = json_object();
    json_object_set_new(x, "op", w->kind >= 0 ? json_string(ntt_kind_name((unsigned)w->kind)) : json_null());
    json_object_set_new(x, "seq", json_integer((json_int_t)w->seq));
    json_object_set_new(x, "send", json_boolean(w->is_send));
    json_object_set_new(x, "channel", json_integer(w->chan));
    json_object_set_new(x, "peer", w->peer >= 0 ? json_integer(w->peer) : json_null());
    json_object_set_new(x, "step", w->step >= 0 ? json_integer(w->step + 1) : json_null());
    json_object_set_new(x, "steps", json_integer(w->nsteps));
    json_object_set_new(x, "steps_done", json_integer(w->done));
    json_object_set_new(x, "state", sn ? json_string(sn) : json_null());
    json_object_set_new(x, "state_number", w->step >= 0 && w->state >= 0 ? json_integer(w->state) : json_null());
    json_object_set_new(x, "waiting_for", sw ? json_string(sw) : json_null());
    json_object_set_new(x, "bytes", json_integer((json_int_t)w->bytes));
    json_object_set_new(x, "time_ns", w->t_ns ? json_integer((json_int_t)w->t_ns) : json_null());
    json_object_set_new(x, "peer_state", ps ? json_string(ps) : json_null());
    json_object_set_new(x, "peer_step", pw && pw->step >= 0 ? json_integer(pw->step + 1) : json_null());
    json_object_set_new(x, "text", json_string(t));
    json_array_append_new(a, x);
  }
  return a;
}

static json_t *comms_json(const struct nta_job *job, int *budget) {
  json_t *a = json_array();
  for (int ci = 0; ci < job->ncomms; ci++) {
    const struct nta_comm *c = &job->comms[ci];
    json_t *o = json_object();
    json_object_set_new(o, "id", hexid(c->id));
    json_object_set_new(o, "parent", c->parent ? hexid(c->parent) : json_null());
    json_object_set_new(o, "nranks", json_integer(c->nranks));
    json_t *mem = json_array(), *missing = json_array();
    int unlisted = 0;
    for (int i = 0, r = 0; i <= c->nranked; i++) {
      int end = i < c->nranked ? c->ranked[i]->rank : c->nranks;
      for (; r < end; r++) {
        if (*budget == 0) {
          unlisted += end - r;
          break;
        }
        (*budget)--;
        json_array_append_new(missing, json_integer(r));
      }
      r = end + 1;
      if (i == c->nranked)
        break;
      const struct nta_member *m = c->ranked[i];
      char b[64], st[96];
      nta_blocked_in(m, b, sizeof(b));
      nta_member_state(m, st, sizeof(st));
      json_t *x = json_object();
      json_object_set_new(x, "rank", json_integer(m->rank));
      json_object_set_new(x, "launcher_rank", json_integer(m->proc->lrank));
      json_object_set_new(x, "host", str(m->proc->img->hdr.host, sizeof(m->proc->img->hdr.host)));
      json_object_set_new(x, "pid", json_integer(m->proc->img->hdr.pid));
      json_object_set_new(x, "issued", json_integer((json_int_t)m->issued));
      json_object_set_new(x, "last_enqueued", json_integer((json_int_t)m->enqueued));
      json_object_set_new(x, "last_completed", json_integer((json_int_t)m->completed));
      json_object_set_new(x, "blocked_in", strcmp(b, "-") ? json_string(b) : json_null());
      json_object_set_new(x, "state", json_string(st));
      struct nta_op bo;
      json_object_set_new(x, "stack", nta_blocked_op(m, &bo) ? nta_stack_json(m->proc, bo.pystack) : json_null());
      json_object_set_new(x, "waiting_at", waits_json(m));
      json_array_append_new(mem, x);
    }
    json_object_set_new(o, "members", mem);
    json_object_set_new(o, "no_evidence", missing);
    if (unlisted)
      json_object_set_new(o, "no_evidence_unlisted", json_integer(unlisted));
    json_array_append_new(a, o);
  }
  return a;
}

int nta_report_json(const struct nta_job *job, FILE *out) {
  json_t *root = json_object();
  json_object_set_new(root, "schema", json_integer(NTT_ANALYZE_SCHEMA));
  json_object_set_new(root, "verdict", verdict_json(job));
  /* Findings that never replace the verdict: stragglers beside a fault. */
  json_object_set_new(root, "secondary", secondary_json(job));
  json_object_set_new(root, "ranks", procs_json(job));
  int budget = NTA_LIST_BUDGET;
  json_object_set_new(root, "comms", comms_json(job, &budget));
  json_t *ev = json_array();
  for (int i = 0; i < job->nev; i++) {
    const struct nta_event *e = &job->ev[i];
    json_t *x = json_object();
    json_object_set_new(x, "t_ns", json_integer((json_int_t)e->t_ns));
    json_object_set_new(x, "rank", e->rank >= 0 ? json_integer(e->rank) : json_null());
    json_object_set_new(x, "kind", json_string(e->kind));
    json_object_set_new(x, "text", str(e->text, sizeof(e->text)));
    json_object_set_new(x, "source", str(e->source, sizeof(e->source)));
    json_array_append_new(ev, x);
  }
  json_object_set_new(root, "evidence", ev);
  json_object_set_new(root, "torch_fr", nta_fr_json(job));
  json_t *in = json_object();
  json_object_set_new(in, "files", json_integer(job->nfiles));
  json_t *un = json_array();
  for (int i = 0; i < job->nunreadable; i++) {
    json_t *x = json_object();
    json_object_set_new(x, "file", str(job->unreadable[i].path, sizeof(job->unreadable[i].path)));
    json_object_set_new(x, "reason", str(job->unreadable[i].reason, sizeof(job->unreadable[i].reason)));
    json_array_append_new(un, x);
  }
  json_object_set_new(in, "unreadable", un);
  json_object_set_new(in, "job", str(job->job_id, sizeof(job->job_id)));
  json_t *oj = json_array();
  for (int i = 0; i < job->nother_jobs; i++)
    json_array_append_new(oj, str(job->other_jobs[i], sizeof(job->other_jobs[i])));
  json_object_set_new(in, "other_jobs", oj);
  json_object_set_new(in, "attempt", json_integer(job->attempt));
  json_t *oa = json_array();
  for (int i = 0; i < job->nother_attempts; i++)
    json_array_append_new(oa, json_integer(job->other_attempts[i]));
  json_object_set_new(in, "other_attempts", oa);
  json_t *lo = json_array();
  for (int i = 0; i < job->nleft_out; i++) {
    json_t *x = json_object();
    json_object_set_new(x, "file", str(job->left_out[i].path, sizeof(job->left_out[i].path)));
    json_object_set_new(x, "reason", str(job->left_out[i].reason, sizeof(job->left_out[i].reason)));
    json_object_set_new(x, "uid", json_integer(job->left_out[i].uid));
    json_array_append_new(lo, x);
  }
  json_object_set_new(in, "left_out", lo);
  json_t *du = json_array();
  for (int i = 0; i < job->ndups; i++) {
    const struct nta_dup *d = &job->dups[i];
    json_t *x = json_object(), *ps = json_array();
    json_object_set_new(x, "rank", json_integer(d->rank));
    json_object_set_new(x, "claims", json_integer(d->n));
    for (int k = 0; k < d->n && k < NTA_DUP_SHOWN; k++) {
      json_t *q = json_object();
      json_object_set_new(q, "host", str(d->p[k].host, sizeof(d->p[k].host)));
      json_object_set_new(q, "pid", json_integer(d->p[k].pid));
      json_object_set_new(q, "files", json_integer(d->p[k].nfiles));
      json_object_set_new(q, "analyzed", json_boolean(d->p[k].analyzed));
      json_array_append_new(ps, q);
    }
    json_object_set_new(x, "processes", ps);
    json_array_append_new(du, x);
  }
  json_object_set_new(in, "duplicate_ranks", du);
  json_object_set_new(root, "inputs", in);
  int rc = json_dumpf(root, out, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
  fputc('\n', out);
  json_decref(root);
  return rc == 0 ? 0 : -1;
}

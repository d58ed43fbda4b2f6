/* pysite.c -- Python call sites and thread stacks in the analyze reports:
 * the faulty call's site in the verdict, each member's blocked call, and
 * every rank's Python threads at its last dump.  Stack ids are those of the
 * process's latest image (a process's stack table only grows, so the
 * latest image names every id its records carry).
 *
 * Which call is "the faulty call" per verdict class (verdict.stack and the
 * " at file:line in function" of the summary; docs/analyze.md):
 *   collective_mismatch  the culprit's mismatched call
 *   p2p_mismatch         the send of the mismatched pair (the unmatched
 *                        send for a wrong peer); the text names both sites
 *   missing_collective   the culprit's last collective on that comm: the
 *                        call after which its code took another path (the
 *                        text also names where the others issued the call)
 *   stall                the call every rank is blocked in (lowest rank's)
 *   init_hang            the init (or split, registration) call the ranks
 *                        that joined wait in
 *   rank_exit/crash      the Python stack of the thread that exited or
 *                        crashed, when its exit/crash dump has one; else as
 *                        rank_killed
 *   rank_killed          the call the rank was blocked in, else its last call
 *   nccl_error           the call the rank was blocked in on that comm, else
 *                        its last call there
 *   app_abort            the ncclCommAbort call
 *
 * Python threads are shown from each process's newest image that has them
 * (dumps do, rings do not): a ring newer than the last dump keeps that
 * dump's threads (nta_py_keep), and the report says which dump and when.
 *
 * Thread-safety: nta_py_keep runs on a loading thread, on its own process
 * only; everything else reads a finished job, single-threaded like the
 * reports.  Not signal-safe.
 */
#include <stdlib.h>
#include <string.h>
#include "tools/analyze/analyze.h"
#include "tools/ntt.h"

/* --------------------------------------------- Python threads' image -- */

static int py_newer(const struct ntt_image *a, const struct ntt_image *b) {
  if (nta_image_later(a, b))
    return 1;
  return !nta_image_later(b, a) && b->has_trigger && (!a->has_trigger || b->trigger.tsc > a->trigger.tsc);
}

int nta_py_keep(struct nta_proc *p, struct ntt_image **imgs, int n) {
  struct ntt_image *best = NULL;
  for (int i = 0; i < n; i++)
    if (imgs[i]->npythreads && (!best || py_newer(best, imgs[i])))
      best = imgs[i];
  if (!best || best == p->img || p->img->npythreads)
    return 0; /* the latest image's own threads (or none anywhere) */
  struct ntt_image *c = calloc(1, sizeof *c);
  if (!c)
    return -1;
  /* Identity, trigger and the Python part move over; the source keeps
   * everything else (records, comms, stacks) for its own caller to free. */
  memcpy(c->path, best->path, sizeof c->path);
  c->is_dump = best->is_dump;
  c->hdr = best->hdr;
  c->has_trigger = best->has_trigger;
  c->trigger = best->trigger;
  c->pythreads = best->pythreads;
  c->npythreads = best->npythreads;
  c->strs = best->strs;
  c->str_len = best->str_len;
  best->pythreads = NULL;
  best->npythreads = 0;
  best->strs = NULL;
  best->str_len = 0;
  p->pyimg = c;
  return 0;
}

void nta_py_free(struct nta_proc *p) {
  if (p->pyimg) {
    ntt_image_free(p->pyimg);
    free(p->pyimg);
    p->pyimg = NULL;
  }
}

const struct ntt_image *nta_py_image(const struct nta_proc *p) {
  if (!p)
    return NULL;
  if (p->pyimg)
    return p->pyimg;
  return p->img && p->img->npythreads ? p->img : NULL;
}

/* ------------------------------------------------------- call sites -- */

void nta_site_text(const struct nta_proc *p, unsigned pystack, char *buf, size_t len) {
  if (!len)
    return;
  buf[0] = '\0';
  char site[512];
  if (p && p->img && pystack && ntt_py_site(p->img, pystack, site, sizeof site))
    snprintf(buf, len, " at %s", site);
  else if (p && p->img && pystack == NTR_PYSTACK_DROPPED)
    snprintf(buf, len, " (Python call sites past the first %u distinct stacks are not recorded)",
             p->img->hdr.stack_max);
}

int nta_blocked_op(const struct nta_member *m, struct nta_op *o) {
  if (m->tracking && (m->enqueued > m->completed || m->lags))
    return nta_coll_find(m, m->completed + 1, o);
  if (m->ncolls && (!m->tracking || (m->cs && m->cs->blocked_since && ntt_kind_is_collective(m->cs->blocked_kind)))) {
    nta_coll_at(m, m->ncolls - 1, o);
    return 1;
  }
  return 0;
}

int nta_member_last_op(const struct nta_member *m, struct nta_op *o) {
  int have = 0;
  if (m->ncolls) {
    nta_coll_at(m, m->ncolls - 1, o);
    have = 1;
  }
  /* p2p[] is ordered by (peer, dir, seq), not time: the latest by issue. */
  for (uint64_t i = 0; i < m->np2p; i++) {
    struct nta_op x;
    nta_p2p_op(m, &m->d->p2p[i], &x);
    if (!have || x.t_ns > o->t_ns) {
      *o = x;
      have = 1;
    }
  }
  return have;
}

void nta_cand_site(struct nta_cand *k, const struct nta_proc *p, unsigned pystack) {
  if (!p || !pystack || !ntt_py_stack(p->img, pystack))
    return;
  k->stack_proc = p;
  k->stack_id = pystack;
}

/* Where process p was in NCCL (on comm only, when not NULL): the call it
 * is blocked in (the latest such), else its last call; calls with a Python
 * site only.  @return 1 with *o (*blocked: which of the two). */
static int proc_call(const struct nta_proc *p, const struct nta_comm *only, struct nta_op *o, int *blocked) {
  int have = 0;
  *blocked = 0;
  for (int i = 0; i < p->nmems; i++) {
    const struct nta_member *m = p->mems[i];
    struct nta_op x;
    if (!m || (only && m->comm != only))
      continue;
    /* blocked: a tracked call not completed, or the comm says so */
    if (nta_blocked_op(m, &x) && x.pystack && (m->tracking ? !x.done_ns : m->cs && m->cs->blocked_since) &&
        (!*blocked || x.t_ns > o->t_ns)) {
      *o = x;
      have = *blocked = 1;
    }
  }
  for (int i = 0; !*blocked && i < p->nmems; i++) {
    const struct nta_member *m = p->mems[i];
    struct nta_op x;
    if (m && (!only || m->comm == only) && nta_member_last_op(m, &x) && x.pystack && (!have || x.t_ns > o->t_ns)) {
      *o = x;
      have = 1;
    }
  }
  return have;
}

/* The thread that wrote p's exit or fatal-signal dump, with its frames. */
static const struct ntr_pythread *death_thread(const struct nta_proc *p, const struct ntt_image **img) {
  const struct ntt_image *pi = nta_py_image(p);
  if (!pi || !pi->has_trigger || (pi->trigger.kind != NTR_TRIG_EXIT && pi->trigger.kind != NTR_TRIG_SIGNAL))
    return NULL;
  for (uint32_t i = 0; i < pi->npythreads; i++)
    if ((pi->pythreads[i].flags & NTR_PYT_DUMPER) && pi->pythreads[i].depth) {
      *img = pi;
      return &pi->pythreads[i];
    }
  return NULL;
}

void nta_death_site(const struct nta_cand *k, struct nta_verdict *v, char *buf, size_t len) {
  buf[0] = '\0';
  const struct nta_proc *p = k->proc;
  if (!p || !len)
    return;
  char site[512];
  if (k->cls == NTA_APP_ABORT) {
    const struct nta_member *m = k->comm ? nta_member_of(k->comm, p) : NULL;
    if (m && m->d->abort_pystack && ntt_py_site(p->img, m->d->abort_pystack, site, sizeof site)) {
      v->stack_proc = p;
      v->stack_id = m->d->abort_pystack;
      snprintf(buf, len, " at %s", site);
    }
    return;
  }
  const struct ntt_image *ti = NULL;
  const struct ntr_pythread *t =
      k->cls == NTA_RANK_EXIT || k->cls == NTA_RANK_CRASH ? death_thread(p, &ti) : NULL;
  if (t) {
    v->stack_img = ti;
    v->stack_thread = t;
    ntt_py_site_frames(ti, t->frame, t->depth, site, sizeof site);
    snprintf(buf, len, " at %s", site);
    return;
  }
  struct nta_op o;
  int blocked;
  if (!proc_call(p, k->cls == NTA_NCCL_ERROR ? k->comm : NULL, &o, &blocked) ||
      !ntt_py_site(p->img, o.pystack, site, sizeof site))
    return;
  v->stack_proc = p;
  v->stack_id = o.pystack;
  char d[160];
  nta_describe_op(&o, d, sizeof d);
  snprintf(buf, len, blocked ? " while in %s at %s" : " after its last NCCL call %s at %s", d, site);
}

json_t *nta_stack_json(const struct nta_proc *p, unsigned pystack) {
  return p && p->img ? ntt_pystack_json(p->img, pystack) : json_null();
}

json_t *nta_verdict_stack_json(const struct nta_verdict *v) {
  if (v->stack_proc && v->stack_id)
    return nta_stack_json(v->stack_proc, v->stack_id);
  if (v->stack_img && v->stack_thread)
    return ntt_pyframes_json(v->stack_img, v->stack_thread->frame, v->stack_thread->depth);
  if (v->fr_nstack) { /* Flight Recorder frames (fr.c) */
    json_t *a = json_array();
    for (int i = 0; i < v->fr_nstack; i++)
      json_array_append_new(a, ntt_json_str(v->fr_stack[i], sizeof v->fr_stack[i]));
    return a;
  }
  return NULL;
}

/* ---------------------------------------------------- thread stacks -- */

/* "timeout dump at 12:00:01.234567" (+ " (pid ...: the newer ring has no
 * Python threads)" when it is not the process's latest image). */
static void py_source(const struct nta_proc *p, const struct ntt_image *pi, char *buf, size_t len) {
  char kb[32], when[64] = "";
  const char *trig = "a";
  if (pi->has_trigger) {
    trig = ntt_trigger_name(&pi->trigger, kb, sizeof kb);
    uint64_t ns = ntt_image_ns(pi, pi->trigger.tsc);
    if (ns) {
      char t[48];
      ntt_fmt_time(ns, t, sizeof t);
      snprintf(when, sizeof when, " at %s", t);
    }
  }
  const char *file = strrchr(pi->path, '/');
  file = file ? file + 1 : pi->path;
  snprintf(buf, len, "%s dump%s%s%.300s%s", trig, when, pi != p->img ? ", " : "", pi != p->img ? file : "",
           pi != p->img ? "; its newer ring holds no Python threads" : "");
}

json_t *nta_pythreads_json(const struct nta_proc *p) {
  const struct ntt_image *pi = nta_py_image(p);
  return pi ? ntt_pythreads_json(pi) : json_null();
}

json_t *nta_pythreads_from_json(const struct nta_proc *p) {
  const struct ntt_image *pi = nta_py_image(p);
  if (!pi)
    return json_null();
  json_t *o = json_object();
  char kb[32];
  json_object_set_new(o, "trigger", pi->has_trigger ? json_string(ntt_trigger_name(&pi->trigger, kb, sizeof kb))
                                                    : json_null());
  json_object_set_new(o, "path", ntt_json_str(pi->path, sizeof pi->path));
  json_object_set_new(o, "time_ns", ntt_json_u64(pi->has_trigger ? ntt_image_ns(pi, pi->trigger.tsc) : 0));
  json_object_set_new(o, "latest", json_boolean(pi == p->img));
  return o;
}

void nta_report_pythreads(const struct nta_job *job, FILE *out) {
  int any = 0;
  for (int i = 0; i < job->nprocs; i++) {
    const struct nta_proc *p = &job->procs[i];
    const struct ntt_image *pi = nta_py_image(p);
    if (!pi)
      continue;
    if (!any++)
      fprintf(out, "\nPython stacks at each rank's last dump (innermost frame first):\n");
    char src[512];
    py_source(p, pi, src, sizeof src);
    fprintf(out, "  rank %d (pid %d, %s):\n", p->lrank, p->img->hdr.pid, src);
    ntt_print_pythreads(out, pi, "    ");
  }
}

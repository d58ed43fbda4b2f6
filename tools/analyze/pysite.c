/* pysite.c -- Python call sites and thread stacks in the analyze reports:
 * the faulty call's site in the verdict, each member's blocked call, and
 * every rank's Python threads at its last dump.  Stack ids are those of the
 * process's latest image (a process's stack table only grows, so the
 * latest image names every id its records carry).
 *
 * Thread-safety: reads a finished job; single-threaded like the reports.
 */
#include <string.h>
#include "tools/analyze/analyze.h"
#include "tools/ntt.h"

void nta_site_text(const struct nta_proc *p, unsigned pystack, char *buf, size_t len) {
  if (!len)
    return;
  buf[0] = '\0';
  char site[512];
  if (p && p->img && pystack && ntt_py_site(p->img, pystack, site, sizeof site))
    snprintf(buf, len, " at %s", site);
}

int nta_blocked_op(const struct nta_member *m, struct nta_op *o) {
  if (m->tracking && m->enqueued > m->completed)
    return nta_coll_find(m, m->completed + 1, o);
  if (m->ncolls && (!m->tracking || (m->cs && m->cs->blocked_since && ntr_kind_is_collective(m->cs->blocked_kind)))) {
    nta_coll_at(m, m->ncolls - 1, o);
    return 1;
  }
  return 0;
}

json_t *nta_stack_json(const struct nta_proc *p, unsigned pystack) {
  return p && p->img ? ntt_pystack_json(p->img, pystack) : json_null();
}

json_t *nta_pythreads_json(const struct nta_proc *p) {
  return p && p->img && p->img->npythreads ? ntt_pythreads_json(p->img) : json_null();
}

void nta_report_pythreads(const struct nta_job *job, FILE *out) {
  int any = 0;
  for (int i = 0; i < job->nprocs; i++) {
    const struct nta_proc *p = &job->procs[i];
    if (!p->img || !p->img->npythreads)
      continue;
    if (!any++)
      fprintf(out, "\nPython stacks at each rank's last dump (innermost frame first):\n");
    char trig[32] = "dump";
    if (p->img->has_trigger)
      ntt_trigger_name(&p->img->trigger, trig, sizeof trig);
    fprintf(out, "  rank %d (pid %d, %s dump):\n", p->lrank, p->img->hdr.pid, trig);
    ntt_print_pythreads(out, p->img, "    ");
  }
}

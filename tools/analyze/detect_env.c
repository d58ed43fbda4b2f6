/* detect_env.c -- an NCCL_* variable whose value (or presence) differs
 * between members of a communicator.
 *
 * Thread-safety: single-threaded (after loading).  Not signal-safe.
 *
 * Members are first grouped by their NCCL_* settings (the rest of the block
 * holds launcher ranks, which always differ): the search for the differing
 * variable and the majority vote then compare groups, not every pair of
 * members -- with 1,024 members of one setting that is one comparison
 * instead of a million, and the same answer.
 */
#include <stdlib.h>
#include <string.h>
#include "tools/analyze/analyze.h"

/* Value of NAME in an image's env block, or NULL. */
static const char *env_get(const struct ntt_image *img, const char *name, size_t nlen) {
  uint32_t len = img->hdr.env_len < NTR_ENV_BYTES ? img->hdr.env_len : NTR_ENV_BYTES;
  const char *e = img->hdr.env, *end = e + len;
  while (e < end && *e) {
    size_t l = strnlen(e, (size_t)(end - e));
    if (l > nlen && strncmp(e, name, nlen) == 0 && e[nlen] == '=')
      return e + nlen + 1;
    e += l + 1;
  }
  return NULL;
}

/* The NCCL_* entries of an image's env block, in order, as one string. */
static size_t nccl_subset(const struct ntt_image *img, char *out, size_t cap) {
  uint32_t len = img->hdr.env_len < NTR_ENV_BYTES ? img->hdr.env_len : NTR_ENV_BYTES;
  const char *e = img->hdr.env, *end = e + len;
  size_t o = 0;
  while (e < end && *e) {
    size_t l = strnlen(e, (size_t)(end - e));
    if (strncmp(e, "NCCL_", l < 5 ? l : 5) == 0 && l >= 5 && o + l + 1 <= cap) {
      memcpy(out + o, e, l);
      out[o + l] = 0;
      o += l + 1;
    }
    e += l + 1;
  }
  return o;
}

/* NCCLTRACE_ENV_CHECK=abort leaves, on a member whose init of c failed, the
 * coordinator's ENV_DIFF record of c from before that failure: the variable
 * it refused the init for goes to name.  Only then is the difference a proven
 * cause; otherwise (NCCL_DEBUG differing on a healthy job) it is a hint.
 * @return 1 refused, 0 not. */
static int env_refused(const struct nta_comm *c, char *name, size_t len) {
  for (int i = 0; i < c->nmembers; i++) {
    const struct nta_member *m = &c->members[i];
    if (!m->init_fail_ns)
      continue;
    for (uint64_t j = 0; j < m->proc->nkeep; j++) {
      const struct ntr_record *r = &m->proc->keep[j];
      if (r->kind != NTR_KIND_ENV_DIFF || r->comm_id != c->id || nta_ns(m->proc, r->tsc) > m->init_fail_ns)
        continue;
      size_t l = strnlen(r->u.text, sizeof(r->u.text));
      snprintf(name, len, "%.*s", (int)l, r->u.text);
      return 1;
    }
  }
  return 0;
}

/* Members grouped by identical NCCL_* settings, in order of first member. */
struct env_groups {
  int *of;     /* member index -> group */
  int *rep;    /* group -> its first member */
  int *size;   /* group -> members */
  int n;
};

static int group_members(const struct nta_comm *c, struct env_groups *g) {
  int n = c->nmembers;
  g->of = calloc((size_t)(n ? n : 1), sizeof *g->of);
  g->rep = calloc((size_t)(n ? n : 1), sizeof *g->rep);
  g->size = calloc((size_t)(n ? n : 1), sizeof *g->size);
  uint64_t *h = calloc((size_t)(n ? n : 1), sizeof *h);
  char *a = malloc(NTR_ENV_BYTES), *b = malloc(NTR_ENV_BYTES);
  int rc = g->of && g->rep && g->size && h && a && b ? 0 : -1;
  g->n = 0;
  for (int i = 0; rc == 0 && i < n; i++) {
    size_t la = nccl_subset(c->members[i].proc->img, a, NTR_ENV_BYTES);
    uint64_t x = 1469598103934665603ull;
    for (size_t k = 0; k < la; k++)
      x = (x ^ (unsigned char)a[k]) * 1099511628211ull;
    int k = 0;
    for (; k < g->n; k++) {
      if (h[k] != x)
        continue;
      size_t lb = nccl_subset(c->members[g->rep[k]].proc->img, b, NTR_ENV_BYTES);
      if (la == lb && memcmp(a, b, la) == 0)
        break;
    }
    if (k == g->n) {
      h[k] = x;
      g->rep[k] = i;
      g->n++;
    }
    g->of[i] = k;
    g->size[k]++;
  }
  free(h);
  free(a);
  free(b);
  return rc;
}

void nta_detect_env(struct nta_job *job, const struct nta_comm *c) {
  /* The variable the coordinator refused the init for, else the first
   * (by name) of every NCCL_* name any member has that differs. */
  char best[64] = "";
  int refused = env_refused(c, best, sizeof(best));
  struct env_groups g;
  memset(&g, 0, sizeof g);
  if (group_members(c, &g) != 0)
    goto out;
  for (int gi = 0; gi < g.n && !refused && g.n > 1; gi++) {
    const struct ntt_image *img = c->members[g.rep[gi]].proc->img;
    uint32_t len = img->hdr.env_len < NTR_ENV_BYTES ? img->hdr.env_len : NTR_ENV_BYTES;
    const char *e = img->hdr.env, *end = e + len;
    while (e < end && *e) {
      size_t l = strnlen(e, (size_t)(end - e));
      const char *eq = memchr(e, '=', l);
      if (eq && strncmp(e, "NCCL_", 5) == 0 && (size_t)(eq - e) < sizeof(best)) {
        size_t nl = (size_t)(eq - e);
        for (int gj = 0; gj < g.n; gj++) {
          const char *v = env_get(c->members[g.rep[gj]].proc->img, e, nl);
          if (!v || strcmp(v, eq + 1) != 0) {
            char name[64];
            memcpy(name, e, nl);
            name[nl] = 0;
            if (!best[0] || strcmp(name, best) < 0)
              snprintf(best, sizeof(best), "%s", name);
            break;
          }
        }
      }
      e += l + 1;
    }
  }
  if (!best[0])
    goto out;
  /* Majority value decides who differs (the first member's value on a tie). */
  size_t nl = strlen(best);
  const char *maj = NULL;
  int majn = -1;
  for (int gi = 0; gi < g.n; gi++) {
    const char *v = env_get(c->members[g.rep[gi]].proc->img, best, nl);
    int n = 0;
    for (int gj = 0; gj < g.n; gj++) {
      const char *w = env_get(c->members[g.rep[gj]].proc->img, best, nl);
      n += ((v == NULL && w == NULL) || (v && w && strcmp(v, w) == 0)) ? g.size[gj] : 0;
    }
    if (n > majn) {
      majn = n;
      maj = v;
    }
  }
  struct nta_cand *k = nta_cand_add(job, NTA_ENV_MISMATCH, c->first_ns);
  if (!k)
    goto out;
  k->comm = c;
  k->refused = refused;
  snprintf(k->field, sizeof(k->field), "%s", best);
  char diff[256] = "", hex[17], rl[256];
  int ndiff = 0;
  nta_comm_hex(c->id, hex);
  for (int i = 0; i < c->nranked; i++) {
    const struct nta_member *m = c->ranked[i];
    const char *v = env_get(m->proc->img, best, nl);
    if ((v == NULL) != (maj == NULL) || (v && strcmp(v, maj) != 0)) {
      ndiff++;
      if (k->nranks < NTA_MAX_VRANKS)
        k->ranks[k->nranks++] = m->rank;
      if (!diff[0])
        snprintf(diff, sizeof(diff), "%s", v ? v : "(unset)");
      nta_event_add(job, c->first_ns, m->proc->lrank, "env", "comm %.8s rank %d: %s=%s", hex, m->rank, best,
                    v ? v : "(unset)");
    }
  }
  nta_rank_list_of(k->ranks, k->nranks, ndiff, rl, sizeof(rl));
  snprintf(k->summary, sizeof(k->summary), "%s differs on comm %s: %s %s %s %s=%s while the others have %s%s",
           best, hex, nta_plural(ndiff), rl, ndiff == 1 ? "has" : "have", best, diff,
           maj ? maj : "(unset)",
           refused ? "; the coordinator refused the comm's init for it (NCCLTRACE_ENV_CHECK=abort)" : "");
out:
  free(g.of);
  free(g.rep);
  free(g.size);
}

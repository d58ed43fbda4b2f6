/* merge.c -- the pieces of one process's merge: which image is the latest
 * state, the union of its images' records by position (walked, never
 * copied), and the arena the reduced calls go to (reduce.c).
 *
 * Thread-safety: a walker and an arena are used by one thread at a time;
 * load.c gives each loading thread its own.  Not signal-safe (allocates,
 * maps memory).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "tools/analyze/analyze.h"

/* ------------------------------------------------------------- arena -- */

#define NTA_CHUNK (64ul << 20)

struct nta_chunk {
  struct nta_chunk *next;
  size_t size, used;
};

void *nta_arena_alloc(struct nta_arena *a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  struct nta_chunk *c = a->chunks;
  if (!c || c->size - c->used < n) {
    size_t size = n + 64 > NTA_CHUNK ? ((n + 64 + (2ul << 20) - 1) & ~((2ul << 20) - 1)) : NTA_CHUNK;
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
      return NULL;
    madvise(m, size, MADV_HUGEPAGE); /* advice only: 4 KiB pages work too */
    c = m;
    c->size = size;
    c->used = 64;
    c->next = a->chunks;
    a->chunks = c;
  }
  void *p = (char *)c + c->used;
  c->used += n;
  return p;
}

void nta_arena_shrink(struct nta_arena *a, void *p, size_t n) {
  struct nta_chunk *c = a->chunks;
  n = (n + 15) & ~(size_t)15;
  if (c && (char *)p >= (char *)c && (char *)p + n <= (char *)c + c->used)
    c->used = (size_t)((char *)p - (char *)c) + n;
}

void nta_arena_free(struct nta_arena *a) {
  while (a->chunks) {
    struct nta_chunk *c = a->chunks;
    a->chunks = c->next;
    munmap(c, c->size);
  }
}

/* ---------------------------------------------------------- image order -- */

static uint64_t image_max_pos(const struct ntt_image *img) {
  uint64_t m = 0;
  for (uint64_t i = 0; i < img->nrecs; i++)
    if (img->recs[i].commit > m)
      m = img->recs[i].commit;
  return m;
}

int nta_image_later(const struct ntt_image *a, const struct ntt_image *b) {
  uint64_t pa = image_max_pos(a), pb = image_max_pos(b);
  if (pa != pb)
    return pb > pa;
  int fa = a->hdr.proc_state != NTR_PROC_RUNNING, fb = b->hdr.proc_state != NTR_PROC_RUNNING;
  if (fa != fb)
    return fb;
  /* Same records and state: the ring holds completion updates made after any
   * dump was taken. */
  return !b->is_dump && a->is_dump;
}

uint64_t nta_ns(const struct nta_proc *p, uint64_t tsc) {
  return tsc ? ntt_image_ns(p->img, tsc) : 0;
}

/* ------------------------------------------------- union by position -- */

/* One sorted source of records: an image's records, or its comms' recent[]
 * copies (pointers, sorted here). */
struct nta_src {
  const struct ntr_record *arr;
  const struct ntr_record **parr;
  uint64_t n, i;
};

static const struct ntr_record *src_at(const struct nta_src *s) {
  return s->arr ? &s->arr[s->i] : s->parr[s->i];
}

static int cmp_commit(const void *a, const void *b) {
  const struct ntr_record *x = a, *y = b;
  return x->commit < y->commit ? -1 : x->commit > y->commit;
}

/* By position, then by address: recent[] slots lie in (comm, slot) order, so
 * equal positions keep the order the old copy-and-sort merge saw them in. */
static int cmp_pcommit(const void *a, const void *b) {
  const struct ntr_record *x = *(const struct ntr_record *const *)a, *y = *(const struct ntr_record *const *)b;
  if (x->commit != y->commit)
    return x->commit < y->commit ? -1 : 1;
  return x < y ? -1 : x > y;
}

/* Sources: for each image its records, then its recent[] copies.  sorted:
 * the images come from the reader, whose records are in position order. */
int nta_walker_init(struct nta_walker *w, struct ntt_image **imgs, int n, int sorted) {
  memset(w, 0, sizeof *w);
  w->s = calloc((size_t)(2 * n + 1), sizeof *w->s);
  if (!w->s)
    return -1;
  for (int i = 0; i < n; i++) {
    struct ntt_image *img = imgs[i];
    /* The reader hands records sorted by position; images built in memory
     * are sorted here if they are not. */
    for (uint64_t j = 1; !sorted && j < img->nrecs; j++)
      if (img->recs[j - 1].commit > img->recs[j].commit) {
        qsort(img->recs, (size_t)img->nrecs, sizeof *img->recs, cmp_commit);
        break;
      }
    uint64_t z = 0; /* position 0: never written, not a record */
    while (z < img->nrecs && img->recs[z].commit == 0)
      z++;
    if (img->nrecs > z)
      w->s[w->ns++] = (struct nta_src){.arr = img->recs + z, .n = img->nrecs - z};
    uint64_t nr = 0;
    for (uint32_t c = 0; c < img->ncomms; c++)
      for (uint32_t j = 0; j < NTR_COMM_RECENT; j++)
        nr += img->comms[c].recent[j].commit != 0;
    if (!nr)
      continue;
    const struct ntr_record **pa = malloc((size_t)nr * sizeof *pa);
    if (!pa)
      return -1;
    uint64_t k = 0;
    for (uint32_t c = 0; c < img->ncomms; c++)
      for (uint32_t j = 0; j < NTR_COMM_RECENT; j++)
        if (img->comms[c].recent[j].commit)
          pa[k++] = &img->comms[c].recent[j];
    qsort(pa, (size_t)nr, sizeof *pa, cmp_pcommit);
    w->s[w->ns++] = (struct nta_src){.parr = pa, .n = nr};
  }
  return 0;
}

void nta_walker_free(struct nta_walker *w) {
  for (int i = 0; i < w->ns; i++)
    free(w->s[i].parr);
  free(w->s);
  memset(w, 0, sizeof *w);
}

/* The next record of the union, or NULL.  Copies of one position: the first
 * one seen, unless a later one knows about completion and it does not. */
const struct ntr_record *nta_walker_next(struct nta_walker *w) {
  for (;;) {
    int best = -1;
    uint64_t bc = 0;
    for (int i = 0; i < w->ns; i++) {
      if (w->s[i].i == w->s[i].n)
        continue;
      uint64_t c = src_at(&w->s[i])->commit;
      if (best < 0 || c < bc) {
        best = i;
        bc = c;
      }
    }
    if (best < 0) {
      const struct ntr_record *r = w->pend;
      w->pend = NULL;
      return r;
    }
    const struct ntr_record *r = src_at(&w->s[best]);
    w->s[best].i++;
    if (w->pend && w->pend->commit == r->commit) {
      if (!w->pend->tsc_done && r->tsc_done)
        w->pend = r;
      continue;
    }
    const struct ntr_record *out = w->pend;
    w->pend = r;
    if (out)
      return out;
  }
}


/* ops.c -- read the compact calls reduce.c wrote (bit-packed blocks of
 * NTA_BLK, runs of seqs, escapes; analyze.h) back as struct nta_op.
 *
 * Thread-safety: read-only on a reduced job; safe from any thread once
 * reduction is done.  Not signal-safe (only because the job is not).
 *
 * Cost: finding seq s is a binary search over the member's runs of
 * consecutive seqs (one run unless the ring wrapped or records were lost);
 * an issue time is a checkpoint plus at most 63 deltas.
 */
#include <string.h>
#include "tools/analyze/analyze.h"

/* The run holding collective i. */
static const struct nta_run *run_of(const struct nta_mdata *d, uint64_t i) {
  uint64_t lo = 0, hi = d->nruns;
  while (hi - lo > 1) {
    uint64_t mid = (lo + hi) / 2;
    if (d->runs[mid].idx0 <= i)
      lo = mid;
    else
      hi = mid;
  }
  return &d->runs[lo];
}

uint64_t nta_coll_seq(const struct nta_member *m, uint64_t i) {
  const struct nta_run *r = run_of(m->d, i);
  return r->seq0 + (i - r->idx0);
}

static const struct nta_esc *esc_of(const struct nta_mdata *d, uint64_t i) {
  uint64_t lo = 0, hi = d->nesc;
  while (lo < hi) {
    uint64_t mid = (lo + hi) / 2;
    if (d->esc[mid].idx < i)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < d->nesc && d->esc[lo].idx == i ? &d->esc[lo] : NULL;
}

static uint32_t get_bits(const uint8_t *p, uint64_t bit, unsigned width) {
  if (!width)
    return 0;
  uint64_t v;
  memcpy(&v, p + (bit >> 3), 8); /* pk ends with 8 spare bytes */
  return (uint32_t)((v >> (bit & 7)) & ((1ull << width) - 1));
}

struct blk {
  uint64_t ck;
  uint32_t tbase, dbase;
  unsigned fw, tw, dw;
  const uint8_t *bits;
};

static void blk_open(const struct nta_mdata *d, uint64_t b, struct blk *k) {
  const uint8_t *p = d->pk + d->boff[b];
  memcpy(&k->ck, p, 8);
  memcpy(&k->tbase, p + 8, 4);
  memcpy(&k->dbase, p + 12, 4);
  k->fw = p[16];
  k->tw = p[17];
  k->dw = p[18];
  k->bits = p + NTA_BLK_HDR;
}

/* Call j of an open block: its three fields, escaped ones as *_ESC. */
static void blk_get(const struct blk *k, unsigned j, uint32_t *fpi, uint32_t *dt, uint32_t *dd) {
  uint64_t bit = (uint64_t)j * (k->fw + k->tw + k->dw);
  uint32_t f = get_bits(k->bits, bit, k->fw);
  if (f == (1u << k->fw) - 1) {
    *fpi = NTA_FPI_ESC;
    *dt = *dd = NTA_T_ESC;
    return;
  }
  *fpi = f;
  *dt = j ? k->tbase + get_bits(k->bits, bit + k->fw, k->tw) : 0;
  *dd = k->dbase + get_bits(k->bits, bit + k->fw + k->tw, k->dw);
}

unsigned nta_blk_decode(const struct nta_mdata *d, uint64_t b, uint64_t *ck, uint32_t *fpi, uint32_t *dt,
                        uint32_t *dd) {
  struct blk k;
  blk_open(d, b, &k);
  uint64_t first = b * NTA_BLK;
  unsigned n = d->ncolls - first < NTA_BLK ? (unsigned)(d->ncolls - first) : NTA_BLK;
  if (ck)
    *ck = k.ck;
  if (!dt && !dd) {
    /* Fingerprints only (the mismatch scan): one load and shift per call. */
    unsigned stride = k.fw + k.tw + k.dw;
    uint32_t esc = (1u << k.fw) - 1;
    for (unsigned j = 0; j < n; j++) {
      uint32_t f = get_bits(k.bits, (uint64_t)j * stride, k.fw);
      if (f == esc) {
        const struct nta_esc *e = esc_of(d, first + j);
        f = e ? e->fpi : 0;
      }
      fpi[j] = f;
    }
    return n;
  }
  for (unsigned j = 0; j < n; j++) {
    uint32_t f, t, x;
    blk_get(&k, j, &f, &t, &x);
    if (f == NTA_FPI_ESC) {
      const struct nta_esc *e = esc_of(d, first + j);
      f = e ? e->fpi : 0;
    }
    fpi[j] = f;
    if (dt)
      dt[j] = t;
    if (dd)
      dd[j] = x;
  }
  return n;
}

/* Issue ticks and packed completion of collective i.  An escaped call has
 * every field escaped: its esc entry rules, and later deltas count from it. */
static uint64_t tsc_of(const struct nta_mdata *d, uint64_t i, uint32_t *dd_out, uint32_t *fpi_out) {
  struct blk k;
  uint64_t b = i / NTA_BLK;
  blk_open(d, b, &k);
  uint64_t t = k.ck;
  uint32_t f = 0, dt = 0, dd = 0;
  for (uint64_t j = b * NTA_BLK; j <= i; j++) {
    blk_get(&k, (unsigned)(j - b * NTA_BLK), &f, &dt, &dd);
    if (f == NTA_FPI_ESC) {
      const struct nta_esc *e = esc_of(d, j);
      t = e ? e->tsc : t;
    } else if (j > b * NTA_BLK) {
      t += dt;
    }
  }
  if (dd_out)
    *dd_out = dd;
  if (fpi_out)
    *fpi_out = f;
  return t;
}

int nta_blk_none_done(const struct nta_mdata *d, uint64_t b) {
  struct blk k;
  blk_open(d, b, &k);
  if (k.dbase || k.dw)
    return 0;
  /* Escaped calls keep their completion aside: any in this block? */
  uint64_t lo = 0, hi = d->nesc, first = b * NTA_BLK;
  while (lo < hi) {
    uint64_t mid = (lo + hi) / 2;
    if (d->esc[mid].idx < first)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo == d->nesc || d->esc[lo].idx >= first + NTA_BLK;
}

uint32_t nta_cop_fpi(const struct nta_mdata *d, uint64_t i) {
  struct blk k;
  uint32_t f, dt, dd;
  blk_open(d, i / NTA_BLK, &k);
  blk_get(&k, (unsigned)(i % NTA_BLK), &f, &dt, &dd);
  if (f == NTA_FPI_ESC) {
    const struct nta_esc *e = esc_of(d, i);
    f = e ? e->fpi : 0;
  }
  return f;
}

uint64_t nta_coll_t_ns(const struct nta_member *m, uint64_t i) {
  return nta_ns(m->proc, tsc_of(m->d, i, NULL, NULL));
}

static void fill_fp(const struct nta_proc *p, uint32_t fpi, struct nta_op *o) {
  const struct nta_fp *f = &p->fps[fpi];
  o->count = f->count;
  o->op = f->op;
  o->dtype = f->dtype;
  o->redop = f->redop;
  o->peer = f->peer;
  o->result = f->result;
  o->flags = f->flags;
  o->pystack = f->pystack;
}

void nta_coll_at(const struct nta_member *m, uint64_t i, struct nta_op *o) {
  const struct nta_mdata *d = m->d;
  uint32_t dd, fpi;
  memset(o, 0, sizeof *o);
  uint64_t tsc = tsc_of(d, i, &dd, &fpi);
  if (fpi == NTA_FPI_ESC) {
    const struct nta_esc *e = esc_of(d, i);
    fpi = e ? e->fpi : 0;
  }
  fill_fp(m->proc, fpi, o);
  o->seq = nta_coll_seq(m, i);
  o->t_ns = nta_ns(m->proc, tsc);
  uint64_t done = 0;
  if (dd == NTA_T_ESC) {
    const struct nta_esc *e = esc_of(d, i);
    done = e ? e->done : 0;
  } else if (dd) {
    done = tsc + dd - 1;
  }
  o->done_ns = done ? ntt_image_ns(m->proc->img, done) : 0;
  if (o->done_ns)
    o->flags |= NTR_REC_COMPLETED;
}

uint64_t nta_coll_upper(const struct nta_member *m, uint64_t seq) {
  const struct nta_mdata *d = m->d;
  /* The first run starting above seq; the one before may hold seq itself. */
  uint64_t lo = 0, hi = d->nruns;
  while (lo < hi) {
    uint64_t mid = (lo + hi) / 2;
    if (d->runs[mid].seq0 <= seq)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0)
    return 0;
  const struct nta_run *r = &d->runs[lo - 1];
  uint64_t end = lo < d->nruns ? d->runs[lo].idx0 : d->ncolls; /* one past the run */
  uint64_t off = seq - r->seq0;
  return off < end - r->idx0 ? r->idx0 + off + 1 : end;
}

int nta_coll_find(const struct nta_member *m, uint64_t seq, struct nta_op *o) {
  uint64_t i = nta_coll_upper(m, seq);
  if (i == 0 || nta_coll_seq(m, i - 1) != seq)
    return 0;
  if (o)
    nta_coll_at(m, i - 1, o);
  return 1;
}

void nta_p2p_op(const struct nta_member *m, const struct nta_p2p *x, struct nta_op *o) {
  memset(o, 0, sizeof *o);
  fill_fp(m->proc, x->fpi, o);
  o->seq = x->seq;
  o->t_ns = nta_ns(m->proc, x->tsc);
  o->done_ns = x->done ? ntt_image_ns(m->proc->img, x->done) : 0;
  if (o->done_ns)
    o->flags |= NTR_REC_COMPLETED;
}

/* pack.c -- a member's collectives into bit-packed blocks of NTA_BLK
 * (layout in analyze.h; ops.c reads them back).
 *
 * Thread-safety: writes only the nta_mdata it is given and its arena (one
 * per loading thread).  Not signal-safe (allocates).
 *
 * Why packed: at 1,024 ranks x 65,536 records the reduced form is most of
 * the memory, and every byte of it is a byte of fresh page the kernel
 * zeroes; a training loop's calls differ little from block to block, so a
 * per-block base and width per field gets them to about 20 bits.
 */
#include <stdlib.h>
#include <string.h>
#include "tools/analyze/analyze.h"

/* Bits needed for values 0..x. */
static unsigned bits_for(uint32_t x) {
  unsigned n = 0;
  while (x) {
    n++;
    x >>= 1;
  }
  return n;
}

/* Little-endian bit writer: fields of up to 32 bits. */
struct bitw {
  uint8_t *out;
  uint64_t acc;
  unsigned n;
};

static void put_bits(struct bitw *w, uint32_t v, unsigned width) {
  if (!width)
    return;
  w->acc |= (uint64_t)v << w->n;
  w->n += width;
  while (w->n >= 8) {
    *w->out++ = (uint8_t)w->acc;
    w->acc >>= 8;
    w->n -= 8;
  }
}

static void flush_bits(struct bitw *w) {
  if (w->n)
    *w->out++ = (uint8_t)w->acc;
  w->acc = 0;
  w->n = 0;
}

int nta_pack_colls(struct nta_mdata *d, const struct nta_tcoll *c, uint64_t n, struct nta_arena *arena) {
  uint64_t nb = (n + NTA_BLK - 1) / NTA_BLK;
  size_t worst = (size_t)nb * (NTA_BLK_HDR + NTA_BLK * 8) + 8; /* + 8: readers load 8 bytes at a time */
  if (n) {
    size_t bo = (size_t)(nb + 1) * sizeof *d->boff;
    d->pk = arena ? nta_arena_alloc(arena, worst) : malloc(worst);
    if (!d->pk)
      return -1;
    d->boff = malloc(bo);
    if (!d->boff)
      return -1;
  }
  uint64_t cape = 0, prev = 0, off = 0;
  uint32_t vf[NTA_BLK], vt[NTA_BLK], vd[NTA_BLK];
  for (uint64_t b0 = 0; b0 < n; b0 += NTA_BLK) {
    unsigned k, cnt = n - b0 < NTA_BLK ? (unsigned)(n - b0) : NTA_BLK;
    uint32_t maxf = 0, tmin = UINT32_MAX, tmax = 0, dmin = UINT32_MAX, dmax = 0;
    for (k = 0; k < cnt; k++) {
      uint64_t i = b0 + k;
      const struct nta_tcoll *r = &c[i];
      uint32_t fpi = r->fpi, dt = 0, dd;
      uint64_t done = r->done;
      if (k)
        dt = r->tsc >= prev && r->tsc - prev < NTA_T_ESC ? (uint32_t)(r->tsc - prev) : NTA_T_ESC;
      dd = !done ? 0 : done >= r->tsc && done - r->tsc < NTA_T_ESC - 1 ? (uint32_t)(done - r->tsc + 1) : NTA_T_ESC;
      prev = r->tsc;
      if (fpi >= NTA_FPI_ESC || dt == NTA_T_ESC || dd == NTA_T_ESC) {
        if (d->nesc == cape) {
          cape = cape ? 2 * cape : 8;
          struct nta_esc *v = realloc(d->esc, (size_t)cape * sizeof *v);
          if (!v)
            return -1;
          d->esc = v;
        }
        d->esc[d->nesc++] = (struct nta_esc){i, r->tsc, done, fpi};
        vf[k] = NTA_FPI_ESC;
        continue;
      }
      vf[k] = fpi;
      vt[k] = dt;
      vd[k] = dd;
      maxf = fpi > maxf ? fpi : maxf;
      if (k) {
        tmin = dt < tmin ? dt : tmin;
        tmax = dt > tmax ? dt : tmax;
      }
      dmin = dd < dmin ? dd : dmin;
      dmax = dd > dmax ? dd : dmax;
    }
    if (tmin > tmax)
      tmin = tmax = 0;
    if (dmin > dmax)
      dmin = dmax = 0;
    unsigned fw = bits_for(maxf + 1), tw = bits_for(tmax - tmin), dw = bits_for(dmax - dmin);
    uint8_t *p = d->pk + off;
    uint64_t ck = c[b0].tsc;
    memcpy(p, &ck, 8);
    memcpy(p + 8, &tmin, 4);
    memcpy(p + 12, &dmin, 4);
    p[16] = (uint8_t)fw;
    p[17] = (uint8_t)tw;
    p[18] = (uint8_t)dw;
    p[19] = 0;
    d->boff[b0 / NTA_BLK] = off;
    struct bitw bw = {p + NTA_BLK_HDR, 0, 0};
    for (k = 0; k < cnt; k++) {
      if (vf[k] == NTA_FPI_ESC) {
        put_bits(&bw, (1u << fw) - 1, fw);
        put_bits(&bw, 0, tw);
        put_bits(&bw, 0, dw);
      } else {
        put_bits(&bw, vf[k], fw);
        put_bits(&bw, k ? vt[k] - tmin : 0, tw);
        put_bits(&bw, vd[k] - dmin, dw);
      }
    }
    flush_bits(&bw);
    off += NTA_BLK_HDR + (uint64_t)(bw.out - (p + NTA_BLK_HDR));
  }
  if (n) {
    d->boff[nb] = off;
    memset(d->pk + off, 0, 8);
    if (arena)
      nta_arena_shrink(arena, d->pk, (size_t)off + 8);
    else {
      uint8_t *v = realloc(d->pk, (size_t)off + 8);
      if (v)
        d->pk = v;
    }
  }
  return 0;
}

/* record_fp.c -- a ring record's fingerprint as the wire carries it
 * (contract: record_fp.h).  Which kinds are collectives and which are
 * send/recv comes from recorder/nccl_api.def. */
#include "interpose/exchange/record_fp.h"
#include "recorder/clock.h"

static int fp_dir_of(unsigned kind) {
  switch (kind) {
#define NT_COLL(name, KIND, ...) case NTR_KIND_##KIND: return NTX_FP_COLL;
#define NT_P2P(name, KIND, ...) case NTR_KIND_##KIND: return NTR_KIND_##KIND == NTR_KIND_SEND ? NTX_FP_SEND : NTX_FP_RECV;
#include "recorder/nccl_api.def"
  default: return -1;
  }
}

int ntx_fp_from_record(const struct ntr_record *r, struct ntx_fp *fp) {
  int dir = fp_dir_of(r->kind);
  if (dir < 0 || r->phase == NTR_PHASE_EXIT || !r->comm_id || (r->flags & NTR_REC_STRICT_REFUSED))
    return -1;
  fp->comm_id = r->comm_id;
  fp->seq = r->seq;
  fp->count = r->count;
  fp->fp = ntr_record_fp(r); /* derived here, off the hot path */
  fp->kind = (uint16_t)ntr_kind_fp_op(r->kind);
  fp->dtype = r->dtype;
  fp->dir = (uint8_t)dir;
  fp->redop = dir == NTX_FP_COLL ? r->redop : -1;
  fp->peer = r->peer;
  fp->rank = r->rank;
  fp->t_ns = 0; /* the caller knows the clock (ntx_fp_time) */
  return 0;
}


void ntx_fp_time(struct ntx_fp *fp, const struct ntr_record *r, const struct ntr_ring_header *h) {
  fp->t_ns = h && h->tsc_hz ? ntr_clock_to_real_ns(h, r->tsc) : 0;
}

int ntx_fp_dev(const struct ntr_record *r, const struct ntr_ring_header *h, struct ntx_fp *fp) {
  if (r->kind != NTR_KIND_DEV_ARRIVE || !r->comm_id || !h || !h->tsc_hz || !r->count)
    return -1;
  uint64_t dev = ntr_clock_to_real_ns(h, r->tsc), call = ntr_clock_to_real_ns(h, r->count);
  *fp = (struct ntx_fp){.comm_id = r->comm_id, .seq = r->seq, .dir = NTX_FP_DEV, .rank = r->rank};
  fp->t_ns = dev > call + NTX_DEV_RES_NS ? dev : call;
  return 0;
}

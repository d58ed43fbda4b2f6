/* synth.c -- synthetic rings and dumps through the real recorder (synth.h). */
#include "bench/scale/synth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recorder/clock.h"
#include "recorder/dump.h"

#define SYNTH_JOB "bench-synth"
#define SYNTH_COMM 0x9f2c4a5b6c7d8e01ull

int synth_open(struct synth *s, const char *tmpdir, const char *dumpdir, uint32_t slots) {
  memset(s, 0, sizeof *s);
  snprintf(s->ringdir, sizeof s->ringdir, "%s/synth-rings-%d", tmpdir, (int)getpid());
  struct ntr_ring_config cfg = {.dir = s->ringdir, .job_id = SYNTH_JOB, .slots = slots};
  int rc = ntr_ring_open(&s->ring, &cfg);
  if (rc)
    return rc;
  s->slots = slots;
  return ntr_dump_init(&s->ring, dumpdir, 0600);
}

static const uint16_t loop_kinds[4] = {NTR_KIND_ALLREDUCE, NTR_KIND_ALLGATHER, NTR_KIND_BROADCAST,
                                       NTR_KIND_REDUCESCATTER};

/* A small deterministic generator for the per-rank jitter. */
static uint64_t rnd(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

static void put(struct synth *s, struct ntr_comm_state *cs, const struct ntr_record *body) {
  uint64_t pos;
  /* From a block, as an application thread writes: a cursor-less
   * reserve takes a whole block for one record (recorder/ring.h). */
  struct ntr_record *r = ntr_ring_reserve_in(&s->ring, &s->cur, 0, &pos);
  uint64_t commit = r->commit;
  *r = *body;
  r->commit = commit; /* still 0: ours until committed */
  cs->rec_count++;
  ntr_ring_commit(&s->ring, r, pos, cs);
}

void synth_fill(struct synth *s, int rank, int nranks, uint64_t nrecs, uint64_t mismatch_seq,
                int mismatch_rank) {
  struct ntr_ring *rg = &s->ring;
  struct ntr_ring_header *h = rg->hdr;
  /* Clear: slots, comm table, counters (the claim protocol needs commit 0). */
  memset(rg->slots, 0, (size_t)s->slots * sizeof *rg->slots);
  memset(rg->comms, 0, (size_t)h->comm_max * sizeof *rg->comms);
  memset(rg->blocks, 0, (size_t)h->block_count * sizeof *rg->blocks); /* every block FREE */
  memset(&s->cur, 0, sizeof s->cur);
  h->head = 0;
  h->unused = 0;
  h->comm_count = 0;
  h->dropped = 0;
  h->pid = 100000 + rank;
  h->rank = rank;
  h->local_rank = rank % 8;
  h->world_size = nranks;
  h->local_world_size = 8;
  h->proc_state = NTR_PROC_EXITED;
  h->exit_code = 0;
  struct ntr_comm_state *cs = ntr_ring_comm_alloc(rg);
  cs->comm_id = SYNTH_COMM;
  cs->rank = rank;
  cs->nranks = nranks;
  cs->lifecycle = NTR_COMM_READY;
  cs->init_kind = NTR_KIND_COMM_INIT_RANK;
  cs->handle = 0x7f0000001000ull;

  uint64_t x = 0x9e3779b97f4a7c15ull ^ (uint64_t)(rank + 1) * 0x100000001b3ull;
  uint64_t hz = h->tsc_hz ? h->tsc_hz : 1000000000ull;
  uint64_t t = h->tsc_base + hz / 100;
  struct ntr_record b;
  memset(&b, 0, sizeof b);
  b.comm_id = SYNTH_COMM;
  b.rank = rank;
  b.nranks = nranks;
  b.tid = (uint32_t)(200000 + rank);
  b.dtype = 0xff;
  b.redop = -1;
  b.peer = -1;
  b.result = -1;
  b.kind = NTR_KIND_COMM_INIT_RANK;
  b.phase = NTR_PHASE_ENTER;
  b.tsc = t;
  put(s, cs, &b);
  t += hz / 50;
  b.phase = NTR_PHASE_EXIT;
  b.result = 0;
  b.tsc = t;
  put(s, cs, &b);
  uint64_t seq = 0;
  for (uint64_t i = 2; i < nrecs; i++) {
    seq++;
    t += hz / 5000 + rnd(&x) % (hz / 50000 + 1);
    memset(&b, 0, sizeof b);
    b.comm_id = SYNTH_COMM;
    b.rank = rank;
    b.nranks = nranks;
    b.tid = (uint32_t)(200000 + rank);
    b.phase = NTR_PHASE_CALL;
    b.seq = seq;
    b.kind = loop_kinds[seq % 4];
    b.count = 1u << (10 + seq % 8);
    b.dtype = 7; /* ncclFloat32 */
    b.redop = b.kind == NTR_KIND_ALLREDUCE || b.kind == NTR_KIND_REDUCESCATTER ? 0 : -1;
    b.peer = b.kind == NTR_KIND_BROADCAST ? 0 : -1;
    if (seq == mismatch_seq && rank == mismatch_rank) {
      b.kind = b.kind == NTR_KIND_BROADCAST ? NTR_KIND_ALLREDUCE : NTR_KIND_BROADCAST;
      b.redop = b.kind == NTR_KIND_ALLREDUCE ? 0 : -1;
      b.peer = b.kind == NTR_KIND_BROADCAST ? 0 : -1;
    }
    b.result = 0;
    b.u.buf.sendbuf = 0x7f1000000000ull + (seq % 4) * 0x100000;
    b.u.buf.recvbuf = b.u.buf.sendbuf + 0x4000000;
    b.u.buf.stream = 0x55550000ull;
    b.tsc = t;
    int done = !mismatch_seq || seq < mismatch_seq;
    b.tsc_done = done ? t + hz / 10000 : 0;
    b.flags = done ? NTR_REC_COMPLETED : 0;
    uint64_t fh = 0x6e63636cull ^ ntr_kind_fp_op(b.kind);
    fh = (fh ^ b.count) * 0xff51afd7ed558ccdull;
    fh = (fh ^ (uint64_t)(uint32_t)b.redop ^ ((uint64_t)(uint32_t)b.peer << 32)) * 0xc4ceb9fe1a85ec53ull;
    b.fp = (uint32_t)(fh ^ (fh >> 32));
    put(s, cs, &b);
    cs->coll_seq = seq;
    cs->last_enqueued = seq;
    if (done)
      cs->last_completed = seq;
    cs->last_enqueue_tsc = t;
  }
  ntr_ring_release(rg, &s->cur); /* no block left open for the dump */
}

int synth_dump(struct synth *s, char *path, size_t path_len) {
  struct ntr_trigger trig;
  memset(&trig, 0, sizeof trig);
  trig.kind = NTR_TRIG_EXIT;
  trig.exit_code = 0;
  snprintf(trig.reason, sizeof trig.reason, "process exit (synthetic)");
  return ntr_dump_write(&s->ring, &trig, path, path_len);
}

void synth_close(struct synth *s) {
  if (s->ring.hdr)
    ntr_ring_close(&s->ring, 1);
  rmdir(s->ringdir);
}

int synth_write_job(const char *tmpdir, const char *dumpdir, int nranks, uint64_t nrecs,
                    uint64_t mismatch_seq, int mismatch_rank) {
  uint32_t slots = 64;
  while (slots < nrecs)
    slots <<= 1;
  struct synth s;
  int rc = synth_open(&s, tmpdir, dumpdir, slots);
  for (int r = 0; !rc && r < nranks; r++) {
    synth_fill(&s, r, nranks, nrecs, mismatch_seq, mismatch_rank);
    rc = synth_dump(&s, NULL, 0);
  }
  synth_close(&s);
  return rc;
}

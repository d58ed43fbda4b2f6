/* builder.h -- build synthetic ntt_images in memory for the analyzer's unit
 * tests: processes, communicators, records with times in milliseconds.
 * Thread-safety: single-threaded test helper.  Not signal-safe.
 */
#ifndef NTA_TEST_BUILDER_H
#define NTA_TEST_BUILDER_H
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/nt_test.h"
#include "tools/analyze/analyze.h"

#define TB_BASE_NS 1700000000000000000ull
#define TB_MAX_IMGS 128

static uint64_t tb_cap = 4096; /* records per synthetic image */

static inline void tb_job(struct nta_job *job) {
  memset(job, 0, sizeof(*job));
  job->imgs = calloc(TB_MAX_IMGS, sizeof(*job->imgs));
  snprintf(job->job_id, sizeof(job->job_id), "unit");
}

/* A process: a dump (is_dump) or a left-behind/live ring. */
static inline struct ntt_image *tb_proc(struct nta_job *job, int lrank, int world, int pid) {
  struct ntt_image *img = &job->imgs[job->nimgs++];
  memset(img, 0, sizeof(*img));
  snprintf(img->path, sizeof(img->path), "unit-r%d-%d.zst", lrank, pid);
  img->is_dump = 1;
  img->hdr.pid = pid;
  img->hdr.rank = lrank;
  img->hdr.world_size = world;
  snprintf(img->hdr.host, sizeof(img->hdr.host), "node%d", lrank / 8);
  snprintf(img->hdr.job_id, sizeof(img->hdr.job_id), "unit");
  img->hdr.tsc_hz = 1000000000ull;
  img->hdr.real_base_ns = TB_BASE_NS;
  img->hdr.proc_state = NTR_PROC_RUNNING;
  img->has_trigger = 1;
  img->trigger.kind = NTR_TRIG_TIMEOUT;
  img->comms = calloc(8, sizeof(*img->comms));
  img->recs = calloc(tb_cap, sizeof(*img->recs));
  return img;
}

static inline struct ntr_comm_state *tb_comm(struct ntt_image *img, uint64_t id, int rank, int nranks) {
  struct ntr_comm_state *cs = &img->comms[img->ncomms++];
  cs->comm_id = id;
  cs->rank = rank;
  cs->nranks = nranks;
  cs->lifecycle = NTR_COMM_READY;
  cs->init_kind = NTR_KIND_COMM_INIT_RANK;
  return cs;
}

static inline struct ntr_comm_state *tb_find(struct ntt_image *img, uint64_t id) {
  for (uint32_t i = 0; i < img->ncomms; i++)
    if (img->comms[i].comm_id == id)
      return &img->comms[i];
  return NULL;
}

/* Ticks of the image's own clock at t_ms after the common epoch. */
static inline uint64_t tb_tsc(const struct ntt_image *img, double t_ms) {
  const struct ntr_ring_header *h = &img->hdr;
  double ns = t_ms * 1e6 + (double)(TB_BASE_NS - h->real_base_ns);
  return h->tsc_base + (uint64_t)(ns * (double)h->tsc_hz / 1e9) + 1;
}

static inline struct ntr_record *tb_rec(struct ntt_image *img, unsigned kind, unsigned phase, uint64_t comm,
                                 double t_ms) {
  struct ntr_record *r = &img->recs[img->nrecs];
  memset(r, 0, sizeof(*r));
  r->commit = img->nrecs + 1 + img->lost;
  img->nrecs++;
  r->tsc = tb_tsc(img, t_ms);
  r->kind = (uint16_t)kind;
  r->phase = (uint8_t)phase;
  r->comm_id = comm;
  r->dtype = 0xff;
  r->redop = -1;
  r->peer = -1;
  r->rank = -1;
  r->result = 0;
  struct ntr_comm_state *cs = comm ? tb_find(img, comm) : NULL;
  if (cs) {
    r->rank = cs->rank;
    r->nranks = cs->nranks;
  }
  return r;
}

/* A collective; done_ms < 0: never completed. */
static inline struct ntr_record *tb_coll(struct ntt_image *img, uint64_t comm, unsigned kind, uint64_t count,
                                  int dtype, int redop, int root, double t_ms, double done_ms) {
  struct ntr_comm_state *cs = tb_find(img, comm);
  struct ntr_record *r = tb_rec(img, kind, NTR_PHASE_CALL, comm, t_ms);
  r->seq = ++cs->coll_seq;
  cs->last_enqueued = r->seq;
  r->count = count;
  r->dtype = (uint8_t)dtype;
  r->redop = redop;
  r->peer = root;
  if (done_ms >= 0) {
    r->flags |= NTR_REC_COMPLETED;
    r->tsc_done = tb_tsc(img, done_ms);
    cs->last_completed = r->seq;
  }
  return r;
}

/* AllReduce float32 sum. */
static inline struct ntr_record *tb_ar(struct ntt_image *img, uint64_t comm, uint64_t count, double t_ms,
                                double done_ms) {
  return tb_coll(img, comm, NTR_KIND_ALLREDUCE, count, 7, 0, -1, t_ms, done_ms);
}

static inline struct ntr_record *tb_p2p(struct ntt_image *img, uint64_t comm, int send, int peer, uint64_t seq,
                                 uint64_t count, double t_ms, double done_ms) {
  struct ntr_record *r = tb_rec(img, send ? NTR_KIND_SEND : NTR_KIND_RECV, NTR_PHASE_CALL, comm, t_ms);
  r->seq = seq;
  r->count = count;
  r->dtype = 7;
  r->peer = peer;
  if (done_ms >= 0) {
    r->flags |= NTR_REC_COMPLETED;
    r->tsc_done = tb_tsc(img, done_ms);
  }
  return r;
}

static inline void tb_exit(struct ntt_image *img, int code, double t_ms) {
  struct ntr_record *r = tb_rec(img, NTR_KIND_EXIT, NTR_PHASE_EVENT, 0, t_ms);
  r->aux = (uint64_t)(int64_t)code;
  img->hdr.proc_state = NTR_PROC_EXITED;
  img->hdr.exit_code = code;
  img->trigger.kind = NTR_TRIG_EXIT;
  img->trigger.tsc = r->tsc;
}

static inline void tb_signal(struct ntt_image *img, int signo, double t_ms) {
  struct ntr_record *r = tb_rec(img, NTR_KIND_SIGNAL, NTR_PHASE_EVENT, 0, t_ms);
  r->aux = (uint64_t)signo;
  img->hdr.proc_state = NTR_PROC_SIGNALED;
  img->hdr.signo = signo;
  img->trigger.kind = signo == SIGTERM || signo == SIGINT ? NTR_TRIG_SIGNAL : NTR_TRIG_FATAL_SIGNAL;
  img->trigger.signo = signo;
  img->trigger.tsc = r->tsc;
}

static inline void tb_timeout(struct ntt_image *img, uint64_t comm, uint64_t seq, double t_ms) {
  struct ntr_record *r = tb_rec(img, NTR_KIND_TIMEOUT, NTR_PHASE_EVENT, comm, t_ms);
  r->seq = seq;
}

/* Left-behind ring of a process that is gone. */
static inline void tb_vanish(struct ntt_image *img) {
  img->is_dump = 0;
  img->has_trigger = 0;
  img->pid_alive = 0;
  img->hdr.proc_state = NTR_PROC_RUNNING;
}

static inline void tb_env(struct ntt_image *img, const char *kv) {
  size_t l = strlen(kv) + 1;
  if (img->hdr.env_len + l < NTR_ENV_BYTES) {
    memcpy(img->hdr.env + img->hdr.env_len, kv, l);
    img->hdr.env_len += (uint32_t)l;
  }
}

/* Healthy prefix: n AllReduces of count c, 10 ms apart, each done 1 ms later. */
static inline void tb_steps(struct ntt_image *img, uint64_t comm, int n, double t0) {
  for (int i = 0; i < n; i++)
    tb_ar(img, comm, 1024, t0 + 10.0 * i, t0 + 10.0 * i + 1);
}

static inline int tb_has_rank(const struct nta_verdict *v, int r) {
  for (int i = 0; i < v->nranks; i++)
    if (v->ranks[i] == r)
      return 1;
  return 0;
}

static inline const char *tb_cls(const struct nta_job *job) {
  return nta_class_name(job->v.cls);
}
#endif

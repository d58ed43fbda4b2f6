/* metrics_collect.c -- what the endpoint says: the ring files of the job's
 * processes on this host, as OpenMetrics or Prometheus text (contract:
 * metrics.h).  Metrics thread only: the static state below is its own.
 *
 * Other processes' rings are read with pread, never mapped (a writer's
 * truncation would turn a mapping into SIGBUS on this thread: tools/
 * reader.c reads them the same way), each offset checked against the file
 * size; this process's own ring is read in memory (it may be anonymous).
 * The directory is listed with getdents64 (opendir allocates with malloc,
 * which a tracer thread must not: recorder/heap.h).
 *
 * Cardinality: at most NTI_MET_MAX_PROCS processes and NTI_MET_MAX_SERIES
 * (process, comm, rank) series; what does not fit is counted in
 * nccltrace_exporter_series_dropped.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ntr_config.h"
#include "interpose/config.h"
#include "interpose/metrics.h"
#include "interpose/nti.h"
#include "recorder/clock.h"
#include "recorder/heap.h"
#include "recorder/ring.h"
#include "recorder/thread.h"

void nti_met_printf(struct nti_met_buf *b, const char *fmt, ...) {
  if (b->oom)
    return;
  for (int tries = 0; tries < 2; tries++) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
      b->oom = 1;
      return;
    }
    if (b->p && b->len + (size_t)n < b->cap) {
      b->len += (size_t)n;
      return;
    }
    size_t cap = b->cap ? b->cap : 16384;
    while (cap <= b->len + (size_t)n)
      cap *= 2;
    char *p = ntr_heap_realloc(b->p, cap);
    if (!p) {
      b->oom = 1;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
}

/* ------------------------------------------------------------ snapshot -- */

static const double late_le[] = {0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5};
#define NLE (sizeof late_le / sizeof late_le[0])

struct proc {
  int32_t pid, lrank;
  char job[64], host[64];
  uint64_t written, lost, dropped, ring_bytes;
  uint32_t dumps, cpu_ms;
};

struct hist {
  int32_t pid, rank;
  uint64_t comm;
  uint32_t seen;      /* late_reports already observed */
  int used, live;
  uint64_t bucket[NLE], count;
  double sum;
};

struct series {
  uint32_t proc;
  uint64_t comm;
  int32_t rank;
  uint64_t coll_issued, coll_done, p2p_issued, p2p_done, bytes;
  double inflight_s, late_med_s;
  uint32_t stalls, mismatches;
  struct hist *h;
};

static struct proc procs[NTI_MET_MAX_PROCS];
static struct series ser[NTI_MET_MAX_SERIES];
static struct hist hists[NTI_MET_MAX_SERIES];
static uint32_t nprocs, nser, dropped_series, dropped_procs;
static struct ntr_ring_header hdr_buf;
static struct ntr_comm_state cs_a, cs_b;

/* Where a ring is read from: this process's memory or another's file. */
struct src {
  int fd;
  const unsigned char *mem;
  uint64_t size;
};

static int src_read(const struct src *s, uint64_t off, void *buf, size_t n) {
  if (off > s->size || n > s->size - off)
    return -1;
  if (s->mem) {
    memcpy(buf, s->mem + off, n);
    return 0;
  }
  return pread(s->fd, buf, n, (off_t)off) == (ssize_t)n ? 0 : -1;
}

static double mono_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Age of the oldest op of the comm still in flight among its recent[]
 * copies (the newest 64 op records), 0 when none (as `nccltrace status`
 * judges it, tools/status.c). */
static double inflight_s(const struct ntr_ring_header *h, const struct ntr_comm_state *a,
                         const struct ntr_comm_state *b) {
  uint64_t oldest = 0;
  for (unsigned i = 0; i < NTR_COMM_RECENT; i++) {
    struct ntr_record r;
    if (ntr_ring_read_copies(&a->recent[i], &b->recent[i], &r) != NTR_SLOT_VALID)
      continue;
    if (r.comm_id != b->comm_id || r.tsc_done ||
        (r.flags & (NTR_REC_COMPLETED | NTR_REC_NO_TRACKING | NTR_REC_CAPTURED | NTR_REC_STRICT_REFUSED)) ||
        r.result > 0)
      continue;
    int p2p = r.kind == NTR_KIND_SEND || r.kind == NTR_KIND_RECV;
    if (!p2p && (r.kind == NTR_KIND_GRAPH_LAUNCH || r.seq <= b->last_completed))
      continue;
    if (!oldest || r.tsc < oldest)
      oldest = r.tsc;
  }
  if (!oldest || !h->tsc_hz)
    return 0;
  double t = (double)h->mono_base_ns + ((double)oldest - (double)h->tsc_base) * 1e9 / (double)h->tsc_hz;
  double age = (mono_now_ns() - t) / 1e9;
  return age > 0 ? age : 0;
}

static struct hist *hist_of(int32_t pid, uint64_t comm, int32_t rank) {
  struct hist *free_ = NULL;
  for (unsigned i = 0; i < NTI_MET_MAX_SERIES; i++) {
    struct hist *h = &hists[i];
    if (h->used && h->pid == pid && h->comm == comm && h->rank == rank)
      return h;
    if (!h->used && !free_)
      free_ = h;
  }
  if (free_) {
    memset(free_, 0, sizeof *free_);
    free_->used = 1;
    free_->pid = pid;
    free_->comm = comm;
    free_->rank = rank;
  }
  return free_;
}

/* A new lateness report (or several since the last look: each counted with
 * the value now there) goes into the histogram. */
static void observe(struct hist *h, uint32_t reports, double v) {
  if (reports == h->seen)
    return;
  uint32_t n = reports - h->seen;
  if (!h->seen && n > 1)
    n = 1; /* reports before the endpoint started: the latest stands for them */
  h->seen = reports;
  for (unsigned k = 0; k < NLE; k++)
    if (v <= late_le[k])
      h->bucket[k] += n;
  h->count += n;
  h->sum += v * n;
}

static int same_str(const char *a, const char *b, size_t n) { return strncmp(a, b, n) == 0; }

/* Read one ring: its process, and a series per live comm. */
static void add_ring(const struct src *s, int self, const char *job, const char *host) {
  struct ntr_ring_header *h = &hdr_buf;
  if (src_read(s, 0, h, sizeof *h) != 0 || memcmp(h->magic, NTR_RING_MAGIC, 8) != 0 ||
      h->version != NTR_FORMAT_VERSION || h->header_size != sizeof *h || h->record_size != sizeof(struct ntr_record) ||
      h->file_size > s->size || h->comm_max > 65536 || h->comm_offset < NTR_RING_HEADER_BYTES ||
      h->comm_offset + (uint64_t)h->comm_max * sizeof(struct ntr_comm_state) > h->file_size)
    return;
  h->job_id[sizeof h->job_id - 1] = h->host[sizeof h->host - 1] = '\0';
  if (!self) {
    if (!same_str(h->job_id, job, sizeof h->job_id) || !same_str(h->host, host, sizeof h->host) ||
        h->pid <= 0 || h->pid == getpid() || h->proc_state != NTR_PROC_RUNNING ||
        (kill(h->pid, 0) != 0 && errno != EPERM))
      return;
  }
  if (nprocs == NTI_MET_MAX_PROCS) {
    dropped_procs++;
    return;
  }
  uint32_t pi = nprocs++;
  struct proc *p = &procs[pi];
  p->pid = h->pid;
  p->lrank = h->rank;
  memcpy(p->job, h->job_id, sizeof p->job);
  memcpy(p->host, h->host, sizeof p->host);
  uint64_t slots = h->slot_count, used = h->head > h->unused ? h->head - h->unused : 0;
  p->written = used;
  p->lost = used > slots ? used - slots : 0;
  p->dropped = h->dropped;
  p->ring_bytes = h->file_size;
  p->dumps = h->dumps_written;
  struct ntr_ring_live live = {0};
  if (src_read(s, NTR_RING_LIVE_OFFSET, &live, sizeof live) == 0)
    p->cpu_ms = live.tracer_cpu_ms;
  uint32_t nc = h->comm_count < h->comm_max ? h->comm_count : h->comm_max;
  for (uint32_t i = 0; i < nc; i++) {
    uint64_t off = h->comm_offset + (uint64_t)i * sizeof(struct ntr_comm_state);
    if (src_read(s, off, &cs_a, sizeof cs_a) != 0 || src_read(s, off, &cs_b, sizeof cs_b) != 0)
      break;
    const struct ntr_comm_state *c = &cs_b;
    if (!c->comm_id || c->lifecycle == NTR_COMM_FREE || c->lifecycle == NTR_COMM_DESTROYED)
      continue;
    if (nser == NTI_MET_MAX_SERIES) {
      dropped_series++;
      continue;
    }
    struct series *e = &ser[nser++];
    e->proc = pi;
    e->comm = c->comm_id;
    e->rank = c->rank;
    e->coll_issued = c->coll_seq;
    e->coll_done = c->last_completed;
    e->p2p_issued = c->p2p_issued;
    e->p2p_done = c->p2p_completed;
    e->bytes = c->bytes_issued;
    e->inflight_s = inflight_s(h, &cs_a, c);
    e->late_med_s = c->late_window ? c->late_med_us / 1e6 : 0;
    e->stalls = c->stalls;
    e->mismatches = c->mismatches;
    e->h = hist_of(p->pid, c->comm_id, c->rank);
    if (e->h) {
      e->h->live = 1;
      observe(e->h, c->late_reports, e->late_med_s);
    }
  }
}

static int ring_name(const char *n) {
  size_t l = strlen(n);
  return strncmp(n, "nccltrace-", 10) == 0 && l > 15 && strcmp(n + l - 5, ".ring") == 0;
}

static void scan_dir(const char *dir, const char *job, const char *host) {
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    return;
  static char buf[8192] __attribute__((aligned(8)));
  for (int rounds = 0; rounds < 64; rounds++) { /* 64 x 8 KiB of names at most */
    long n = syscall(SYS_getdents64, dfd, buf, sizeof buf);
    if (n <= 0)
      break;
    for (long off = 0; off < n;) {
      struct {
        uint64_t ino;
        int64_t off;
        unsigned short reclen;
        unsigned char type;
        char name[];
      } *d = (void *)(buf + off);
      off += d->reclen;
      if (!ring_name(d->name))
        continue;
      int fd = openat(dfd, d->name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
      if (fd < 0)
        continue;
      struct stat st;
      if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid()) {
        struct src s = {.fd = fd, .size = (uint64_t)st.st_size};
        add_ring(&s, 0, job, host);
      }
      close(fd);
    }
  }
  close(dfd);
}

static void snapshot(void) {
  nprocs = nser = dropped_series = dropped_procs = 0;
  for (unsigned i = 0; i < NTI_MET_MAX_SERIES; i++)
    hists[i].live = 0;
  const struct ntr_ring_header *own = nti_proc.ring.hdr;
  if (!own)
    return;
  char job[64], host[64];
  memcpy(job, own->job_id, sizeof job);
  memcpy(host, own->host, sizeof host);
  job[63] = host[63] = '\0';
  struct src s = {.fd = -1, .mem = (const unsigned char *)own, .size = own->file_size};
  add_ring(&s, 1, job, host);
  if (job[0]) /* without a job id nothing ties another ring to this job */
    scan_dir(nti_proc.ring.dir[0] ? nti_proc.ring.dir : nti_cfg.ring_dir, job, host);
  for (unsigned i = 0; i < NTI_MET_MAX_SERIES; i++)
    if (hists[i].used && !hists[i].live)
      hists[i].used = 0; /* its process or comm is gone */
}

void nti_met_tick(void) {
  struct ntr_ring_header *own = nti_proc.ring.hdr;
  if (own) {
    struct ntr_ring_live *live = (struct ntr_ring_live *)((char *)own + NTR_RING_LIVE_OFFSET);
    uint32_t ms = (uint32_t)(ntr_thread_cpu_ns() / 1000000u);
    if (ms > live->tracer_cpu_ms) /* a counter: never backwards */
      __atomic_store_n(&live->tracer_cpu_ms, ms, __ATOMIC_RELAXED);
  }
  snapshot(); /* the histograms see each lateness report, scraped or not */
}

/* ---------------------------------------------------------------- text -- */

/* A label value, escaped as both formats want (\\, \", \n). */
static void put_label(struct nti_met_buf *b, const char *k, const char *v, int comma) {
  nti_met_printf(b, "%s%s=\"", comma ? "," : "", k);
  for (const char *p = v; *p; p++) {
    if (*p == '\\' || *p == '"')
      nti_met_printf(b, "\\%c", *p);
    else if (*p == '\n')
      nti_met_printf(b, "\\n");
    else
      nti_met_printf(b, "%c", *p);
  }
  nti_met_printf(b, "\"");
}

static void comm_labels(struct nti_met_buf *b, const struct series *e) {
  const struct proc *p = &procs[e->proc];
  char comm[20];
  snprintf(comm, sizeof comm, "%016llx", (unsigned long long)e->comm);
  put_label(b, "job", p->job, 0);
  put_label(b, "host", p->host, 1);
  put_label(b, "comm", comm, 1);
  nti_met_printf(b, ",rank=\"%d\"", (int)e->rank);
}

static void proc_labels(struct nti_met_buf *b, const struct proc *p) {
  put_label(b, "job", p->job, 0);
  put_label(b, "host", p->host, 1);
  nti_met_printf(b, ",pid=\"%d\",launcher_rank=\"%d\"", (int)p->pid, (int)p->lrank);
}

/* The family's header lines.  type: counter, gauge, histogram, info.
 * OpenMetrics names a counter's family without _total and an info's
 * without _info; the text format names the samples, and has no info. */
static void family(struct nti_met_buf *b, int om, const char *name, const char *type, const char *unit,
                   const char *help) {
  if (om) {
    nti_met_printf(b, "# TYPE %s %s\n", name, type);
    if (unit)
      nti_met_printf(b, "# UNIT %s %s\n", name, unit);
    nti_met_printf(b, "# HELP %s %s\n", name, help);
  } else {
    const char *suffix = !strcmp(type, "counter") ? "_total" : !strcmp(type, "info") ? "_info" : "";
    nti_met_printf(b, "# HELP %s%s %s\n# TYPE %s%s %s\n", name, suffix, help, name, suffix,
                   !strcmp(type, "info") ? "gauge" : type);
  }
}

#define COMM_U64(NAME, HELP, FIELD)                                                                          \
  do {                                                                                                         \
    family(b, om, "nccltrace_" NAME, "counter", NULL, HELP);                                                   \
    for (uint32_t i = 0; i < nser; i++) {                                                                      \
      nti_met_printf(b, "nccltrace_" NAME "_total{");                                                          \
      comm_labels(b, &ser[i]);                                                                                 \
      nti_met_printf(b, "} %llu\n", (unsigned long long)ser[i].FIELD);                                         \
    }                                                                                                          \
  } while (0)

#define PROC_U64(NAME, TYPE, UNIT, HELP, EXPR)                                                               \
  do {                                                                                                         \
    family(b, om, "nccltrace_" NAME, TYPE, UNIT, HELP);                                                        \
    for (uint32_t i = 0; i < nprocs; i++) {                                                                    \
      const struct proc *p = &procs[i];                                                                        \
      nti_met_printf(b, "nccltrace_" NAME "%s{", !strcmp(TYPE, "counter") ? "_total" : "");                    \
      proc_labels(b, p);                                                                                       \
      nti_met_printf(b, "} %s\n", EXPR);                                                                       \
    }                                                                                                          \
  } while (0)

static const char *u64s(uint64_t v, char *buf) {
  snprintf(buf, 24, "%llu", (unsigned long long)v);
  return buf;
}

static const char *secs(double v, char *buf) {
  snprintf(buf, 24, "%.6f", v);
  return buf;
}

void nti_met_collect(struct nti_met_buf *b, int om, const struct nti_met_self *self) {
  char nb[24];
  snapshot();
  static const char *const modes[] = {"off", "async", "strict"};
  family(b, om, "nccltrace_build", "info", NULL, "The tracer's version and check mode.");
  nti_met_printf(b, "nccltrace_build_info{version=\"%s\",mode=\"%s\"} 1\n", NTR_VERSION,
                 modes[nti_cfg.check >= 0 && nti_cfg.check <= 2 ? nti_cfg.check : 0]);

  COMM_U64("collectives_issued", "Collectives issued on the comm by this rank.", coll_issued);
  COMM_U64("collectives_completed", "Collectives of the comm seen complete (completion tracking).", coll_done);
  COMM_U64("p2p_issued", "Send and recv calls of the comm seen by the watchdog.", p2p_issued);
  COMM_U64("p2p_completed", "Send and recv calls of the comm seen complete.", p2p_done);
  family(b, om, "nccltrace_issued_bytes", "counter", om ? "bytes" : NULL,
         "Bytes (count x dtype size) of the comm's ops seen by the watchdog.");
  for (uint32_t i = 0; i < nser; i++) {
    nti_met_printf(b, "nccltrace_issued_bytes_total{");
    comm_labels(b, &ser[i]);
    nti_met_printf(b, "} %llu\n", (unsigned long long)ser[i].bytes);
  }
  COMM_U64("stalls", "Watchdog timeouts of this rank and stall verdicts naming it.", stalls);
  COMM_U64("mismatches", "Mismatch verdicts of the cross-rank check on the comm.", mismatches);

  family(b, om, "nccltrace_inflight_oldest_age_seconds", "gauge", om ? "seconds" : NULL,
         "Age of the oldest op of the comm still in flight, 0 when none.");
  for (uint32_t i = 0; i < nser; i++) {
    nti_met_printf(b, "nccltrace_inflight_oldest_age_seconds{");
    comm_labels(b, &ser[i]);
    nti_met_printf(b, "} %s\n", secs(ser[i].inflight_s, nb));
  }
  family(b, om, "nccltrace_lateness_median_seconds", "gauge", om ? "seconds" : NULL,
         "The coordinator's latest median of this rank's arrival after the earliest rank.");
  for (uint32_t i = 0; i < nser; i++) {
    nti_met_printf(b, "nccltrace_lateness_median_seconds{");
    comm_labels(b, &ser[i]);
    nti_met_printf(b, "} %s\n", secs(ser[i].late_med_s, nb));
  }
  family(b, om, "nccltrace_lateness_seconds", "histogram", om ? "seconds" : NULL,
         "The coordinator's lateness reports for this rank (a median over its window each).");
  for (uint32_t i = 0; i < nser; i++) {
    const struct hist *h = ser[i].h;
    if (!h)
      continue;
    for (unsigned k = 0; k <= NLE; k++) {
      nti_met_printf(b, "nccltrace_lateness_seconds_bucket{");
      comm_labels(b, &ser[i]);
      if (k < NLE)
        nti_met_printf(b, ",le=\"%g\"} %llu\n", late_le[k], (unsigned long long)h->bucket[k]);
      else
        nti_met_printf(b, ",le=\"+Inf\"} %llu\n", (unsigned long long)h->count);
    }
    nti_met_printf(b, "nccltrace_lateness_seconds_count{");
    comm_labels(b, &ser[i]);
    nti_met_printf(b, "} %llu\nnccltrace_lateness_seconds_sum{", (unsigned long long)h->count);
    comm_labels(b, &ser[i]);
    nti_met_printf(b, "} %s\n", secs(h->sum, nb));
  }

  PROC_U64("ring_records", "counter", NULL, "Records written into the process's ring.", u64s(p->written, nb));
  PROC_U64("ring_records_lost", "counter", NULL, "Records overwritten before anyone read them, or dropped.",
           u64s(p->lost + p->dropped, nb));
  PROC_U64("dumps_written", "counter", NULL, "Dumps the process wrote.", u64s(p->dumps, nb));
  PROC_U64("tracer_cpu_seconds", "counter", om ? "seconds" : NULL,
           "CPU time of the tracer's own threads (watchdog, exchange, aggregator, metrics).",
           secs(p->cpu_ms / 1e3, nb));
  PROC_U64("ring_memory_bytes", "gauge", om ? "bytes" : NULL, "Size of the process's ring mapping.",
           u64s(p->ring_bytes, nb));

  family(b, om, "nccltrace_exporter_heap_memory_bytes", "gauge", om ? "bytes" : NULL,
         "Address space of the tracer heap of the serving process.");
  nti_met_printf(b, "nccltrace_exporter_heap_memory_bytes %llu\n", (unsigned long long)ntr_heap_mapped());
  family(b, om, "nccltrace_exporter_processes", "gauge", NULL, "Traced processes of the job read on this host.");
  nti_met_printf(b, "nccltrace_exporter_processes %u\n", nprocs);
  family(b, om, "nccltrace_exporter_series_dropped", "gauge", NULL,
         "Comm series (and processes) over the exporter's bounds, not exported.");
  nti_met_printf(b, "nccltrace_exporter_series_dropped %u\n", dropped_series + dropped_procs);
  family(b, om, "nccltrace_exporter_scrapes", "counter", NULL, "Good scrapes answered.");
  nti_met_printf(b, "nccltrace_exporter_scrapes_total %llu\n", (unsigned long long)self->scrapes);
  family(b, om, "nccltrace_exporter_refused", "counter", NULL, "Connections closed at accept (over the bound).");
  nti_met_printf(b, "nccltrace_exporter_refused_total %llu\n", (unsigned long long)self->refused);
  family(b, om, "nccltrace_exporter_bad_requests", "counter", NULL, "Requests answered 400, 404, 405 or 431.");
  nti_met_printf(b, "nccltrace_exporter_bad_requests_total %llu\n", (unsigned long long)self->bad_requests);
  family(b, om, "nccltrace_exporter_timeouts", "counter", NULL, "Connections closed at their deadline.");
  nti_met_printf(b, "nccltrace_exporter_timeouts_total %llu\n", (unsigned long long)self->timeouts);
  if (om)
    nti_met_printf(b, "# EOF\n");
}

/* export.c -- `nccltrace export --chrome PATH... -o trace.json`: the Chrome
 * trace event format (JSON object form), which Perfetto and chrome://tracing
 * load.  One process per rank, one thread (track) per communicator, a
 * complete event ("X") per operation from enqueue to completion, instant
 * events ("i") for markers, errors, aborts, signals, exits, timeouts and
 * mismatches; the profiler plugin's proxy steps as slices on a track per
 * (comm, channel, direction); and a "lateness per comm" process with one counter track per
 * communicator: at each seq, every rank's arrival after the earliest (ms).
 *
 * Thread-safety: single-threaded command.  Not signal-safe.
 * Several inputs of one process (its ring and its dumps) are merged into one
 * timeline, deduplicated by record position.  Times are microseconds since
 * the earliest record of all inputs (otherData.t0_ns holds that instant), so
 * the double-precision "ts" keeps sub-microsecond resolution.
 *
 * One job is exported: the one --job names, else the most recent
 * (tools/jobpick.c, the rule analyze follows), said on stderr when others
 * are present.  An operation never completed runs to the last timestamp of
 * all that job's evidence (every image read, not only the first of each
 * process: a dump taken at a watchdog timeout is rarely the last word).
 * --rank, --comm and --since/--until narrow what is drawn, never the times:
 * t0 and that last timestamp stay those of the whole job.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tools/bundle.h"
#include "tools/ntt.h"
#include "tools/reader_int.h"

#define NTT_MAX_TRIGGERS 16

/* What --rank, --comm, --since and --until keep (export_usage). */
struct filt {
  int *ranks, nranks;       /* launcher ranks; none: all */
  char comm[8][17];         /* hex prefixes of comm ids; none: all */
  int ncomm;
  int has_since, has_until;
  double since_s, until_s;  /* seconds after t0; negative: before the last timestamp */
};

static int comm_kept(const struct filt *f, uint64_t comm_id) {
  if (!f->ncomm || !comm_id)
    return 1; /* a process-wide record (signal, exit, marker) explains any comm */
  char hex[17];
  snprintf(hex, sizeof hex, "%016llx", (unsigned long long)comm_id);
  for (int i = 0; i < f->ncomm; i++)
    if (strncmp(hex, f->comm[i], strlen(f->comm[i])) == 0)
      return 1;
  return 0;
}

static int rank_kept(const struct filt *f, int rank) {
  if (!f->nranks)
    return 1;
  for (int i = 0; i < f->nranks; i++)
    if (f->ranks[i] == rank)
      return 1;
  return 0;
}

struct proc {
  struct ntt_image img; /* the first image of the process, later ones merged in */
  struct ntr_trigger trig[NTT_MAX_TRIGGERS]; /* one instant per dump */
  int ntrig;
  int trace_pid;
};

static int same_process(const struct ntt_image *a, const struct ntt_image *b) {
  return a->hdr.pid == b->hdr.pid && strcmp(a->hdr.host, b->hdr.host) == 0 &&
         a->hdr.real_base_ns == b->hdr.real_base_ns;
}

/* Fold b (another snapshot of a's process) into a: records by position,
 * communicators by id keeping the later state.  b is left to the caller. */
static int merge_into(struct proc *p, const struct ntt_image *b) {
  struct ntt_image *a = &p->img;
  if (b->nrecs) {
    struct ntr_record *v = realloc(a->recs, (size_t)(a->nrecs + b->nrecs) * sizeof *v);
    if (!v)
      return -1;
    memcpy(v + a->nrecs, b->recs, (size_t)b->nrecs * sizeof *v);
    a->recs = v;
    a->nrecs = ntt_records_normalize(v, a->nrecs + b->nrecs);
  }
  for (uint32_t i = 0; i < b->ncomms; i++) {
    const struct ntr_comm_state *c = &b->comms[i];
    uint32_t k = 0;
    while (k < a->ncomms && a->comms[k].comm_id != c->comm_id)
      k++;
    if (k < a->ncomms) {
      if (c->rec_count >= a->comms[k].rec_count)
        a->comms[k] = *c;
      continue;
    }
    struct ntr_comm_state *v = realloc(a->comms, (size_t)(a->ncomms + 1) * sizeof *v);
    if (!v)
      return -1;
    a->comms = v;
    a->comms[a->ncomms++] = *c;
  }
  if (b->has_trigger && p->ntrig < NTT_MAX_TRIGGERS)
    p->trig[p->ntrig++] = b->trigger;
  return 0;
}

static double us(uint64_t ns, uint64_t t0) { return ns >= t0 ? (double)(ns - t0) / 1000.0 : -(double)(t0 - ns) / 1000.0; }

/* Durations never go negative: records are ordered by position, and threads
 * may take their timestamps in a slightly different order. */
static double dur_us(uint64_t end, uint64_t start) { return end > start ? (double)(end - start) / 1000.0 : 0.0; }

static json_t *meta(const char *name, int pid, int tid, const char *key, json_t *val) {
  return json_pack("{s:s,s:s,s:i,s:i,s:{s:o}}", "name", name, "ph", "M", "pid", pid, "tid", tid, "args", key, val);
}

static int comm_track(const struct ntt_image *img, uint64_t comm_id) {
  if (!comm_id)
    return 0;
  for (uint32_t i = 0; i < img->ncomms; i++)
    if (img->comms[i].comm_id == comm_id)
      return (int)i + 1;
  return 0;
}

static const char *instant_cat(unsigned kind) {
  switch (kind) {
  case NTR_KIND_MARK: return "marker";
  case NTR_KIND_SIGNAL: return "signal";
  case NTR_KIND_EXIT: return "exit";
  case NTR_KIND_TIMEOUT: return "timeout";
  case NTR_KIND_MISMATCH: return "mismatch";
  case NTR_KIND_ASYNC_ERROR: return "error";
  case NTR_KIND_PEER_LOST: return "peer_lost";
  case NTR_KIND_SKEW: return "skew";
  case NTR_KIND_ENV_DIFF: return "env";
  case NTR_KIND_DUMP: return "dump";
  case NTR_KIND_STRICT_BLOCK: return "strict";
  case NTR_KIND_NOTE: return "note";
  case NTR_KIND_COMM_ABORT: return "abort";
  case NTR_KIND_COMM_REVOKE: return "abort";
  default: return NULL;
  }
}

static json_t *rec_args(const struct ntt_image *img, const struct ntr_record *r) {
  json_t *a = json_object();
  json_object_set_new(a, "pos", ntt_json_u64(r->commit - 1));
  if (r->comm_id)
    json_object_set_new(a, "comm", ntt_json_hex64(r->comm_id));
  if (r->seq)
    json_object_set_new(a, "seq", ntt_json_u64(r->seq));
  if (r->rank >= 0)
    json_object_set_new(a, "rank", json_integer(r->rank));
  if (r->result >= 0)
    json_object_set_new(a, "result", json_string(ntt_result_name(r->result)));
  if (ntt_kind_is_collective(r->kind) || ntt_kind_is_p2p(r->kind)) {
    char fp[9];
    snprintf(fp, sizeof fp, "%08x", r->fp);
    json_object_set_new(a, "count", ntt_json_u64(r->count));
    json_object_set_new(a, "dtype", json_string(ntt_dtype_name(r->dtype)));
    json_object_set_new(a, "fp", json_string(fp));
  }
  if (ntt_rec_has_text(r))
    json_object_set_new(a, "text", ntt_json_str(r->u.text, sizeof r->u.text));
  char site[512];
  if (ntt_py_site(img, r->pystack_id, site, sizeof site)) {
    json_object_set_new(a, "site", ntt_json_str(site, sizeof site));
    json_object_set_new(a, "python_stack", ntt_pystack_json(img, r->pystack_id));
  }
  return a;
}

/* A NULL event (json_pack failed on a hostile string) is dropped. */
static void add_event(json_t *ev, json_t *o) { json_array_append_new(ev, o); }

/* A CUDA graph replay: a slice from launch to completion on a track of its
 * launch stream (after the comm tracks), one per stream of the process. */
#define EXP_STREAMS 16
static void export_replay(json_t *ev, const struct ntt_image *img, const struct ntr_record *r, int pid, const char *op,
                          uint64_t t, uint64_t t0, uint64_t t_end) {
  static uint64_t streams[EXP_STREAMS];
  static const struct ntt_image *streams_of;
  static int nstreams;
  if (streams_of != img) { /* a new process: its own tracks */
    streams_of = img;
    nstreams = 0;
  }
  int k = 0;
  while (k < nstreams && streams[k] != r->u.buf.stream)
    k++;
  if (k == nstreams && nstreams < EXP_STREAMS) {
    streams[nstreams++] = r->u.buf.stream;
    char name[64];
    snprintf(name, sizeof name, "stream 0x%llx (graph replays)", (unsigned long long)r->u.buf.stream);
    add_event(ev, meta("thread_name", pid, (int)img->ncomms + 1 + k, "name", json_string(name)));
  }
  if (k == EXP_STREAMS)
    k = EXP_STREAMS - 1; /* more streams than tracks: the last track is shared */
  int tid = (int)img->ncomms + 1 + k;
  json_t *args = rec_args(img, r);
  uint64_t end = t;
  if (r->tsc_done)
    end = ntt_image_ns(img, r->tsc_done);
  else if (r->flags & (NTR_REC_NO_TRACKING | NTR_REC_CAPTURED))
    json_object_set_new(args, "tracking", json_string("off"));
  else if (r->result > 0)
    json_object_set_new(args, "enqueued", json_false());
  else {
    end = t_end > t ? t_end : t;
    json_object_set_new(args, "incomplete", json_true());
  }
  json_object_set_new(args, "replay", json_integer((json_int_t)r->count));
  json_object_set_new(args, "graph", json_integer((json_int_t)r->aux));
  add_event(ev, json_pack("{s:s,s:s,s:s,s:f,s:f,s:i,s:i,s:o}", "name", op, "cat", "graph_replay", "ph", "X", "ts",
                          us(t, t0), "dur", dur_us(end, t), "pid", pid, "tid", tid, "args", args));
}

/* The plugin's inside view (ProxyStep records): one track per (comm,
 * channel, direction) after the stream tracks, a slice per step from its
 * enter to its exit, named for the op and the step; a step never exited
 * runs to the end of the trace with "incomplete" and the state it waited
 * in.  Matched in one pass through a small table of open steps. */
#define EXP_CHAN_TRACKS 64
#define EXP_OPEN_STEPS 256
struct inside {
  struct { uint64_t comm; int chan, send; } trk[EXP_CHAN_TRACKS];
  int ntrk;
  struct { const struct ntr_record *r; uint64_t t; int state; uint64_t bytes; } open[EXP_OPEN_STEPS];
  int nopen;
};

static int step_track(json_t *ev, struct inside *in, const struct ntt_image *img, int pid, const struct ntr_record *r) {
  int send = r->u.buf.recvbuf != 0, k = 0;
  while (k < in->ntrk && !(in->trk[k].comm == r->comm_id && in->trk[k].chan == r->dtype && in->trk[k].send == send))
    k++;
  if (k == in->ntrk) {
    if (in->ntrk == EXP_CHAN_TRACKS)
      k = EXP_CHAN_TRACKS - 1; /* more than the tracks: the last is shared */
    else {
      in->trk[k].comm = r->comm_id;
      in->trk[k].chan = r->dtype;
      in->trk[k].send = send;
      in->ntrk++;
      char name[96];
      snprintf(name, sizeof name, "comm %08llx channel %d %s (proxy steps)", (unsigned long long)(r->comm_id >> 32),
               r->dtype, send ? "send" : "recv");
      add_event(ev, meta("thread_name", pid, (int)img->ncomms + 1 + EXP_STREAMS + k, "name", json_string(name)));
    }
  }
  return (int)img->ncomms + 1 + EXP_STREAMS + k;
}

static void step_slice(json_t *ev, struct inside *in, const struct ntt_image *img, int pid, const struct ntr_record *r,
                       uint64_t t, uint64_t end, int state, uint64_t bytes, int incomplete, uint64_t t0) {
  char name[160];
  const char *k = (int32_t)r->redop >= 0 ? ntt_kind_name((unsigned)r->redop) : "op";
  if (r->peer >= 0)
    snprintf(name, sizeof name, "%s #%llu %s rank %d: step %llu/%llu", k, (unsigned long long)r->seq,
             r->u.buf.recvbuf ? "to" : "from", r->peer, (unsigned long long)r->count + 1,
             (unsigned long long)r->u.buf.sendbuf);
  else
    snprintf(name, sizeof name, "%s #%llu: step %llu/%llu", k, (unsigned long long)r->seq,
             (unsigned long long)r->count + 1, (unsigned long long)r->u.buf.sendbuf);
  json_t *args = rec_args(img, r);
  json_object_set_new(args, "channel", json_integer(r->dtype));
  if (r->peer >= 0)
    json_object_set_new(args, "peer", json_integer(r->peer));
  json_object_set_new(args, "step", ntt_json_u64(r->count + 1));
  json_object_set_new(args, "steps", ntt_json_u64(r->u.buf.sendbuf));
  json_object_set_new(args, "bytes", ntt_json_u64(bytes));
  if (state >= 0)
    json_object_set_new(args, "state", json_integer(state));
  if (incomplete)
    json_object_set_new(args, "incomplete", json_true());
  add_event(ev, json_pack("{s:s,s:s,s:s,s:f,s:f,s:i,s:i,s:o}", "name", name, "cat", "proxy_step", "ph", "X", "ts",
                          us(t, t0), "dur", dur_us(end, t), "pid", pid, "tid", step_track(ev, in, img, pid, r),
                          "args", args));
}

static int same_step(const struct ntr_record *a, const struct ntr_record *b) {
  return a->comm_id == b->comm_id && a->dtype == b->dtype && a->redop == b->redop && a->peer == b->peer &&
         a->seq == b->seq && a->count == b->count && a->u.buf.recvbuf == b->u.buf.recvbuf;
}

static void export_step(json_t *ev, struct inside *in, const struct ntt_image *img, int pid, const struct ntr_record *r,
                        uint64_t t, uint64_t t0) {
  int k = 0;
  while (k < in->nopen && !same_step(in->open[k].r, r))
    k++;
  if (r->phase == NTR_PHASE_ENTER) {
    if (k == in->nopen) {
      if (in->nopen == EXP_OPEN_STEPS) { /* the oldest open step is said as it stands */
        step_slice(ev, in, img, pid, in->open[0].r, in->open[0].t, in->open[0].t, in->open[0].state,
                   in->open[0].bytes, 1, t0);
        memmove(&in->open[0], &in->open[1], (EXP_OPEN_STEPS - 1) * sizeof in->open[0]);
        k = --in->nopen;
      }
      in->nopen++;
    }
    in->open[k].r = r;
    in->open[k].t = t;
    in->open[k].state = -1;
    in->open[k].bytes = 0;
  } else if (k < in->nopen && r->phase == NTR_PHASE_EVENT) {
    in->open[k].state = (int)r->aux;
    in->open[k].bytes = r->u.buf.stream;
  } else if (k < in->nopen && r->phase == NTR_PHASE_EXIT) {
    step_slice(ev, in, img, pid, in->open[k].r, in->open[k].t, t, in->open[k].state, in->open[k].bytes, 0, t0);
    memmove(&in->open[k], &in->open[k + 1], (size_t)(in->nopen - k - 1) * sizeof in->open[0]);
    in->nopen--;
  }
}

/* The events of one process. */
static void export_proc(json_t *ev, const struct proc *p, uint64_t t0, uint64_t t_end, const struct filt *f) {
  const struct ntt_image *img = &p->img;
  const struct ntr_ring_header *h = &img->hdr;
  int pid = p->trace_pid;
  char name[160], op[160], host[64];
  ntt_field_str(h->host, sizeof h->host, host, sizeof host);
  char rl[24];
  snprintf(name, sizeof name, "%s (%s:%d)", ntt_rank_label(h->rank, rl, sizeof rl), host, h->pid);
  add_event(ev, meta("process_name", pid, 0, "name", json_string(name)));
  add_event(ev, meta("process_sort_index", pid, 0, "sort_index", json_integer(pid)));
  add_event(ev, meta("thread_name", pid, 0, "name", json_string("process")));
  for (uint32_t i = 0; i < img->ncomms; i++) {
    if (!comm_kept(f, img->comms[i].comm_id))
      continue;
    snprintf(name, sizeof name, "comm %08llx", (unsigned long long)(img->comms[i].comm_id >> 32));
    add_event(ev, meta("thread_name", pid, (int)i + 1, "name", json_string(name)));
  }
  static struct inside in; /* single-threaded command: one process at a time */
  in.ntrk = in.nopen = 0;
  for (uint64_t i = 0; i < img->nrecs; i++) {
    const struct ntr_record *r = &img->recs[i];
    if (!comm_kept(f, r->comm_id))
      continue;
    int tid = comm_track(img, r->comm_id);
    uint64_t t = ntt_image_ns(img, r->tsc);
    if (r->kind == NTR_KIND_PROXY_STEP) {
      export_step(ev, &in, img, pid, r, t, t0);
      continue;
    }
    if (r->kind == NTR_KIND_PROXY_OP || r->kind == NTR_KIND_KERNEL_CH)
      continue; /* the steps say it; an op as a slice would overlap its channel's other ops */
    /* A call that returned an error (ncclInProgress is not one) is marked
     * where it happened, whatever its slice looks like. */
    if (r->result > 0 && r->result != 7 && r->kind < NTR_KIND_FIRST_TRACER_EVENT) {
      snprintf(op, sizeof op, "%s -> %s", ntt_kind_name(r->kind), ntt_result_name(r->result));
      add_event(ev, json_pack("{s:s,s:s,s:s,s:f,s:s,s:i,s:i,s:o}", "name", op, "cat", "error", "ph", "i", "ts",
                              us(t, t0), "s", tid ? "t" : "p", "pid", pid, "tid", tid, "args", rec_args(img, r)));
    }
    ntt_fmt_op(r, op, sizeof op);
    if (r->kind == NTR_KIND_GRAPH_LAUNCH) {
      export_replay(ev, img, r, pid, op, t, t0, t_end);
      continue;
    }
    int coll = ntt_kind_is_collective(r->kind), p2p = ntt_kind_is_p2p(r->kind);
    if (coll || p2p) {
      json_t *args = rec_args(img, r);
      uint64_t end = t;
      if (r->tsc_done) {
        end = ntt_image_ns(img, r->tsc_done);
      } else if (r->flags & (NTR_REC_NO_TRACKING | NTR_REC_CAPTURED)) {
        json_object_set_new(args, "tracking", json_string("off"));
      } else if (r->result > 0 || (r->flags & NTR_REC_STRICT_REFUSED)) {
        json_object_set_new(args, "enqueued", json_false());
      } else if (coll && tid && r->seq <= img->comms[tid - 1].last_completed) {
        json_object_set_new(args, "done_time", json_string("unknown"));
      } else {
        end = t_end > t ? t_end : t;
        json_object_set_new(args, "incomplete", json_true());
        json_object_set_new(args, "completed", json_false());
      }
      add_event(ev, json_pack("{s:s,s:s,s:s,s:f,s:f,s:i,s:i,s:o}", "name", op, "cat", coll ? "collective" : "p2p",
                              "ph", "X", "ts", us(t, t0), "dur", dur_us(end, t), "pid", pid, "tid", tid, "args", args));
      continue;
    }
    if (r->phase == NTR_PHASE_ENTER && !instant_cat(r->kind) && r->kind != NTR_KIND_GROUP_START &&
        r->kind != NTR_KIND_GROUP_END && r->kind != NTR_KIND_GROUP_SIMULATE_END) {
      /* A lifecycle call: a slice from ENTER to its EXIT on the same thread. */
      uint64_t end = 0;
      const struct ntr_record *x = NULL;
      for (uint64_t k = i + 1; k < img->nrecs && !x; k++)
        if (img->recs[k].kind == r->kind && img->recs[k].tid == r->tid && img->recs[k].phase == NTR_PHASE_EXIT)
          x = &img->recs[k];
      json_t *args = rec_args(img, x ? x : r);
      if (x) {
        end = ntt_image_ns(img, x->tsc);
        if (!tid)
          tid = comm_track(img, x->comm_id);
      } else {
        end = t_end > t ? t_end : t;
        json_object_set_new(args, "incomplete", json_true());
      }
      snprintf(op, sizeof op, "%s", ntt_kind_name(r->kind));
      add_event(ev, json_pack("{s:s,s:s,s:s,s:f,s:f,s:i,s:i,s:o}", "name", op, "cat", "lifecycle", "ph", "X", "ts",
                              us(t, t0), "dur", dur_us(end, t), "pid", pid, "tid", tid, "args", args));
      continue;
    }
    const char *cat = instant_cat(r->kind);
    if (!cat || (r->phase == NTR_PHASE_EXIT && (r->kind == NTR_KIND_COMM_ABORT || r->kind == NTR_KIND_COMM_REVOKE)))
      continue;
    add_event(ev, json_pack("{s:s,s:s,s:s,s:f,s:s,s:i,s:i,s:o}", "name", op, "cat", cat, "ph", "i", "ts", us(t, t0),
                            "s", tid ? "t" : "p", "pid", pid, "tid", tid, "args", rec_args(img, r)));
  }
  for (int k = 0; k < in.nopen; k++)
    step_slice(ev, &in, img, pid, in.open[k].r, in.open[k].t, t_end > in.open[k].t ? t_end : in.open[k].t,
               in.open[k].state, in.open[k].bytes, 1, t0);
  for (int i = 0; i < p->ntrig; i++) {
    char kb[32];
    const struct ntr_trigger *tr = &p->trig[i];
    uint64_t t = tr->tsc ? ntt_image_ns(img, tr->tsc) : t_end;
    snprintf(op, sizeof op, "dump: %s", ntt_trigger_name(tr, kb, sizeof kb));
    add_event(ev, json_pack("{s:s,s:s,s:s,s:f,s:s,s:i,s:i,s:{s:o}}", "name", op, "cat", "dump", "ph", "i", "ts",
                            us(t, t0), "s", "p", "pid", pid, "tid", 0, "args", "reason",
                            ntt_json_str(tr->reason, sizeof tr->reason)));
  }
}

/* Rank as the trace's pid when every process has a distinct launcher rank;
 * otherwise the processes are numbered in input order. */
static void assign_pids(struct proc *procs, int n) {
  int distinct = 1;
  for (int i = 0; i < n && distinct; i++) {
    if (procs[i].img.hdr.rank < 0)
      distinct = 0;
    for (int k = 0; k < i && distinct; k++)
      if (procs[k].img.hdr.rank == procs[i].img.hdr.rank)
        distinct = 0;
  }
  for (int i = 0; i < n; i++)
    procs[i].trace_pid = distinct ? procs[i].img.hdr.rank : 1000000 + i;
}

/* ------------------------------------------------------- lateness track -- */

/* One arrival: rank of comm issued collective seq at t (realtime ns, less
 * the process's clock offset to the coordinator when it has one). */
struct arrival {
  uint64_t comm, seq, t;
  int rank;
};

static int cmp_arrival(const void *a, const void *b) {
  const struct arrival *x = a, *y = b;
  if (x->comm != y->comm)
    return x->comm < y->comm ? -1 : 1;
  if (x->seq != y->seq)
    return x->seq < y->seq ? -1 : 1;
  return x->rank - y->rank;
}

#define LATE_PID 2000000 /* the lateness process: one counter track per comm */

/* Per communicator, a counter per seq (at the earliest arrival): each rank's
 * arrival after the earliest, ms -- who everyone waits for stands out. */
static void export_lateness(json_t *events, const struct proc *procs, int np, uint64_t t0, const struct filt *f) {
  size_t n = 0, cap = 0;
  struct arrival *a = NULL;
  for (int i = 0; i < np; i++) {
    const struct ntt_image *img = &procs[i].img;
    int64_t off = img->hdr.clock_samples ? img->hdr.clock_offset_ns : 0;
    for (uint64_t k = 0; k < img->nrecs; k++) {
      const struct ntr_record *r = &img->recs[k];
      if (!ntt_kind_is_collective(r->kind) || r->phase == NTR_PHASE_EXIT || !r->comm_id || r->rank < 0 || !r->seq ||
          !comm_kept(f, r->comm_id))
        continue;
      if (n == cap) {
        size_t c = cap ? 2 * cap : 1024;
        struct arrival *v = realloc(a, c * sizeof *v);
        if (!v) {
          free(a);
          return;
        }
        a = v;
        cap = c;
      }
      a[n++] = (struct arrival){r->comm_id, r->seq, ntt_image_ns(img, r->tsc) - (uint64_t)off, r->rank};
    }
  }
  if (n)
    qsort(a, n, sizeof *a, cmp_arrival);
  uint64_t named = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    uint64_t tmin = a[i].t;
    while (j < n && a[j].comm == a[i].comm && a[j].seq == a[i].seq) {
      if (a[j].t < tmin)
        tmin = a[j].t;
      j++;
    }
    if (j - i >= 2) {
      if (!named++)
        json_array_append_new(events, meta("process_name", LATE_PID, 0, "name", json_string("lateness per comm")));
      json_t *args = json_object();
      for (size_t k = i; k < j; k++) {
        char key[24];
        snprintf(key, sizeof key, "rank %d", a[k].rank);
        json_object_set_new(args, key, json_real((double)(a[k].t - tmin) / 1e6));
      }
      char name[48];
      snprintf(name, sizeof name, "lateness %08llx", (unsigned long long)(a[i].comm >> 32));
      json_array_append_new(events, json_pack("{s:s,s:s,s:f,s:i,s:i,s:o}", "name", name, "ph", "C", "ts",
                                              us(tmin, t0), "pid", LATE_PID, "tid", 0, "args", args));
    }
    i = j;
  }
  free(a);
}

/* ------------------------------------------------------------- options -- */

static const char export_usage[] =
    "usage: nccltrace export --chrome PATH... -o FILE [--job ID] [--rank LIST] [--comm HEX[,HEX...]]\n"
    "                        [--since S] [--until S]\n";

/* "0,2,5-7" into f->ranks.  @return 0, -1 malformed. */
static int parse_ranks(const char *s, struct filt *f) {
  while (*s) {
    char *end;
    long a = strtol(s, &end, 10), b = a;
    if (end == s || a < 0 || a > 1 << 24)
      return -1;
    s = end;
    if (*s == '-') {
      b = strtol(s + 1, &end, 10);
      if (end == s + 1 || b < a || b > 1 << 24 || b - a > 65536)
        return -1;
      s = end;
    }
    for (long r = a; r <= b; r++) {
      int *v = realloc(f->ranks, (size_t)(f->nranks + 1) * sizeof *v);
      if (!v)
        return -1;
      f->ranks = v;
      f->ranks[f->nranks++] = (int)r;
    }
    if (*s == ',')
      s++;
    else if (*s)
      return -1;
  }
  return f->nranks ? 0 : -1;
}

/* "9f2c0123,abcd" (hex prefixes of comm ids, as status and decode show
 * them; an optional 0x) into f->comm.  @return 0, -1 malformed. */
static int parse_comms(const char *s, struct filt *f) {
  while (*s) {
    if (f->ncomm == 8)
      return -1;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
      s += 2;
    int n = 0;
    while (n < 16 && ((s[n] >= '0' && s[n] <= '9') || ((s[n] | 0x20) >= 'a' && (s[n] | 0x20) <= 'f'))) {
      f->comm[f->ncomm][n] = (char)(s[n] | (s[n] >= 'A' ? 0x20 : 0));
      n++;
    }
    if (!n || (s[n] && s[n] != ','))
      return -1;
    f->comm[f->ncomm++][n] = '\0';
    s += n;
    if (*s == ',')
      s++;
  }
  return f->ncomm ? 0 : -1;
}

static int parse_secs(const char *s, double *out) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || *end || !(v > -1e9 && v < 1e9))
    return -1;
  *out = v;
  return 0;
}

/* Keep only the events that touch [lo, hi] (microseconds after t0);
 * metadata stays (names of what is left). */
static json_t *window(json_t *events, double lo, double hi) {
  json_t *kept = json_array();
  size_t i;
  json_t *e;
  json_array_foreach(events, i, e) {
    const char *ph = json_string_value(json_object_get(e, "ph"));
    double ts = json_number_value(json_object_get(e, "ts"));
    double end = ts + json_number_value(json_object_get(e, "dur"));
    if ((ph && ph[0] == 'M') || (ts <= hi && end >= lo))
      json_array_append(kept, e);
  }
  json_decref(events);
  return kept;
}

/* ---------------------------------------------------------------- main -- */

static void job_of(const struct ntt_image *img, char id[64]) {
  snprintf(id, 64, "%.*s", 63, img->hdr.job_id);
}

int ntt_export_main(int argc, char **argv) {
  enum { O_JOB = 256, O_RANK, O_COMM, O_SINCE, O_UNTIL };
  static const struct option opts[] = {{"chrome", no_argument, NULL, 'c'},     {"output", required_argument, NULL, 'o'},
                                       {"job", required_argument, NULL, O_JOB}, {"rank", required_argument, NULL, O_RANK},
                                       {"comm", required_argument, NULL, O_COMM},
                                       {"since", required_argument, NULL, O_SINCE},
                                       {"until", required_argument, NULL, O_UNTIL},
                                       {"help", no_argument, NULL, 'h'},       {0}};
  const char *outpath = NULL, *want = NULL;
  struct filt f = {0};
  int chrome = 0, c, usage = 0;
  char se[512];
  optind = 1;
  while (!usage && (c = getopt_long(argc, argv, "co:h", opts, NULL)) != -1) {
    switch (c) {
    case 'c': chrome = 1; break;
    case 'o': outpath = optarg; break;
    case O_JOB: want = optarg; break;
    case O_RANK:
      if (parse_ranks(optarg, &f)) {
        fprintf(stderr, "nccltrace: export: --rank wants ranks such as 0,2,5-7, not '%s'\n",
                ntt_esc(optarg, se, sizeof se));
        usage = 1;
      }
      break;
    case O_COMM:
      if (parse_comms(optarg, &f)) {
        fprintf(stderr, "nccltrace: export: --comm wants hex comm ids or prefixes (up to 8), not '%s'\n",
                ntt_esc(optarg, se, sizeof se));
        usage = 1;
      }
      break;
    case O_SINCE:
    case O_UNTIL:
      if (parse_secs(optarg, c == O_SINCE ? &f.since_s : &f.until_s)) {
        fprintf(stderr, "nccltrace: export: --%s wants seconds, not '%s'\n", c == O_SINCE ? "since" : "until",
                ntt_esc(optarg, se, sizeof se));
        usage = 1;
      }
      *(c == O_SINCE ? &f.has_since : &f.has_until) = 1;
      break;
    case 'h': ntt_usage_cmd(stdout, "export"); free(f.ranks); return NTT_EXIT_OK;
    default: usage = 1; break;
    }
  }
  if (usage || !chrome || !outpath || optind >= argc) {
    fputs(export_usage, stderr);
    if (!usage && !chrome)
      fprintf(stderr, "nccltrace: export: --chrome is the only format\n");
    free(f.ranks);
    return NTT_EXIT_INPUT;
  }
  char **paths = NULL, **inputs = NULL;
  int bad = 0;
  /* a bundle (nccltrace bundle) stands for the directory it extracts to */
  int ninputs = ntb_open_inputs("export", argv + optind, argc - optind, 0, &inputs);
  if (ninputs < 0) {
    free(f.ranks);
    return NTT_EXIT_INPUT;
  }
  int n = ntt_expand_inputs(inputs, ninputs, &paths, &bad);
  ntt_paths_free(inputs, ninputs);
  if (n < 0) {
    fprintf(stderr, "nccltrace: export: out of memory\n");
    free(f.ranks);
    return NTT_EXIT_FAIL;
  }
  /* Every image first: the job is chosen from all of them. */
  struct ntt_image *imgs = n ? calloc((size_t)n, sizeof *imgs) : NULL;
  struct proc *procs = n ? calloc((size_t)n, sizeof *procs) : NULL;
  struct ntt_jobs jobs = {0};
  int nimg = 0, np = 0, rc = NTT_EXIT_OK;
  if (n && (!imgs || !procs)) {
    ntt_paths_free(paths, n);
    free(imgs);
    free(procs);
    free(f.ranks);
    return NTT_EXIT_FAIL;
  }
  struct ntt_progress prog; /* on a terminal only (tools/progress.c) */
  ntt_progress_begin(&prog, "export: reading", "files", n);
  for (int i = 0; i < n; i++) {
    char err[512], se[sizeof err], id[64];
    ntt_progress_show(&prog, i);
    if (ntt_image_load(paths[i], 0, &imgs[nimg], err, sizeof err)) {
      ntt_progress_erase(&prog);
      fprintf(stderr, "nccltrace: %s\n", ntt_esc(err, se, sizeof se));
      bad++;
      continue;
    }
    job_of(&imgs[nimg], id);
    if (ntt_jobs_add(&jobs, id, ntt_image_latest_ns(&imgs[nimg])) < 0)
      rc = NTT_EXIT_FAIL;
    nimg++;
  }
  ntt_progress_end(&prog);
  ntt_paths_free(paths, n);
  int pick = ntt_jobs_pick(&jobs, want);
  if (nimg)
    ntt_jobs_say(stderr, "export", &jobs, pick, want);
  /* The job's extent over all its images: t0 its earliest record, t_end
   * its last timestamp (where an operation never completed ends). */
  uint64_t t0 = UINT64_MAX, t_end = 0;
  for (int i = 0; i < nimg; i++) {
    struct ntt_image *img = &imgs[i];
    char id[64];
    job_of(img, id);
    if (pick < 0 || strcmp(id, jobs.id[pick]) != 0) {
      ntt_image_free(img);
      continue;
    }
    for (uint64_t k = 0; k < img->nrecs; k++) {
      uint64_t t = ntt_image_ns(img, img->recs[k].tsc);
      if (t < t0)
        t0 = t;
    }
    uint64_t now = ntt_image_now_ns(img), last = ntt_image_last_tsc(img);
    if (last && ntt_image_ns(img, last) > now)
      now = ntt_image_ns(img, last);
    if (now > t_end)
      t_end = now;
    if (!rank_kept(&f, img->hdr.rank)) {
      ntt_image_free(img);
      continue;
    }
    int k = 0;
    while (k < np && !same_process(&procs[k].img, img))
      k++;
    if (k == np) {
      procs[np].img = *img;
      if (img->has_trigger)
        procs[np].trig[procs[np].ntrig++] = img->trigger;
      np++;
      continue;
    }
    if (merge_into(&procs[k], img))
      rc = NTT_EXIT_FAIL;
    ntt_image_free(img);
  }
  free(imgs);
  if (np == 0) {
    if (pick >= 0 && nimg)
      fprintf(stderr, "nccltrace: export: no process of job %s matches --rank\n",
              ntt_esc(jobs.id[pick], se, sizeof se));
    else if (!nimg)
      fprintf(stderr, "nccltrace: export: no readable input\n");
    ntt_jobs_free(&jobs);
    free(procs);
    free(f.ranks);
    return NTT_EXIT_INPUT;
  }
  ntt_jobs_free(&jobs);
  assign_pids(procs, np);
  if (t0 == UINT64_MAX)
    t0 = t_end;
  json_t *events = json_array();
  for (int i = 0; i < np; i++)
    export_proc(events, &procs[i], t0, t_end, &f);
  export_lateness(events, procs, np, t0, &f);
  if (f.has_since || f.has_until) {
    double span = t_end > t0 ? (double)(t_end - t0) / 1000.0 : 0.0;
    double lo = f.has_since ? f.since_s * 1e6 : -1e18, hi = f.has_until ? f.until_s * 1e6 : 1e18;
    if (f.has_since && f.since_s < 0)
      lo = span + f.since_s * 1e6;
    if (f.has_until && f.until_s < 0)
      hi = span + f.until_s * 1e6;
    events = window(events, lo, hi);
  }
  json_t *root = json_pack("{s:o,s:s,s:{s:s,s:o,s:o,s:i}}", "traceEvents", events, "displayTimeUnit", "ms",
                           "otherData", "generator", "nccltrace export", "t0_ns", ntt_json_u64(t0), "end_ns",
                           ntt_json_u64(t_end), "processes", np);
  if (root && procs[0].img.hdr.job_id[0]) {
    char id[64];
    job_of(&procs[0].img, id);
    json_object_set_new(json_object_get(root, "otherData"), "job", ntt_json_str(id, sizeof id));
  }
  int w = root ? (strcmp(outpath, "-") == 0 ? json_dumpf(root, stdout, JSON_COMPACT)
                                            : json_dump_file(root, outpath, JSON_COMPACT))
               : -1;
  if (w != 0) {
    fprintf(stderr, "nccltrace: export: cannot write %s\n", ntt_esc(outpath, se, sizeof se));
    rc = NTT_EXIT_FAIL;
  } else if (strcmp(outpath, "-") != 0) {
    fprintf(stderr, "nccltrace: wrote %s (%d process%s, %zu events)\n", ntt_esc(outpath, se, sizeof se), np,
            np == 1 ? "" : "es", json_array_size(json_object_get(root, "traceEvents")));
  }
  json_decref(root);
  for (int i = 0; i < np; i++)
    ntt_image_free(&procs[i].img);
  free(procs);
  free(f.ranks);
  if (rc == NTT_EXIT_OK && bad)
    rc = NTT_EXIT_INPUT;
  return rc;
}

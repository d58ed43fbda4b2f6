/* json.c -- the `decode --json` form of an image, exactly as
 * docs/decode-json.md specifies it (other tools and tests parse it: keys are
 * stable, every key is always present, absent values are null).
 *
 * Thread-safety: reentrant (jansson objects are per call).  Not signal-safe.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tools/ntt.h"

json_t *ntt_json_str(const char *s, size_t max) {
  size_t n = 0;
  while (n < max && s[n])
    n++;
  json_t *j = json_stringn(s, n); /* NULL when not UTF-8 */
  if (j)
    return j;
  char *b = malloc(n + 1);
  if (!b)
    return json_string("");
  ntt_field_str(s, n, b, n + 1);
  j = json_string(b);
  free(b);
  return j;
}

json_t *ntt_json_hex64(uint64_t v) {
  char b[17];
  snprintf(b, sizeof b, "%016llx", (unsigned long long)v);
  return json_string(b);
}

json_t *ntt_json_u64(uint64_t v) { return json_integer((json_int_t)v); }

static void set(json_t *o, const char *k, json_t *v) { json_object_set_new(o, k, v ? v : json_null()); }

static json_t *header_json(const struct ntt_image *img) {
  const struct ntr_ring_header *h = &img->hdr;
  json_t *o = json_object();
  set(o, "host", ntt_json_str(h->host, sizeof h->host));
  set(o, "pid", json_integer(h->pid));
  set(o, "ppid", json_integer(h->ppid));
  set(o, "exe", ntt_json_str(h->exe, sizeof h->exe));
  set(o, "rank", json_integer(h->rank));
  set(o, "local_rank", json_integer(h->local_rank));
  set(o, "world_size", json_integer(h->world_size));
  set(o, "local_world_size", json_integer(h->local_world_size));
  set(o, "job", ntt_json_str(h->job_id, sizeof h->job_id));
  set(o, "nccl_version", json_integer(h->nccl_version));
  set(o, "tracer_version", ntt_json_str(h->tracer_version, sizeof h->tracer_version));
  set(o, "proc_state", json_string(ntt_proc_state_name(h->proc_state)));
  /* absent for writers before the field (0): old dumps decode as they did */
  if (h->ring_place)
    set(o, "ring_place", json_string(ntt_ring_place_name(h->ring_place)));
  set(o, "exit_code", json_integer(h->exit_code));
  set(o, "signo", json_integer(h->signo));
  set(o, "lost", ntt_json_u64(img->lost));
  set(o, "torn", ntt_json_u64(img->torn));
  set(o, "dropped", ntt_json_u64(h->dropped));
  set(o, "slot_count", json_integer(h->slot_count));
  set(o, "real_base_ns", ntt_json_u64(h->real_base_ns));
  set(o, "tsc_hz", ntt_json_u64(h->tsc_hz));
  /* the coordinator's estimate of this clock (format v2), null without one */
  set(o, "clock_offset_ns", h->clock_samples ? json_integer((json_int_t)h->clock_offset_ns) : json_null());
  set(o, "clock_uncertainty_ns", h->clock_samples ? ntt_json_u64(h->clock_uncert_ns) : json_null());
  set(o, "pid_alive", json_boolean(img->pid_alive));
  set(o, "salvaged", json_boolean(img->salvaged));
  return o;
}

/* "NAME=VALUE\0NAME=VALUE\0..." within env_len bytes. */
static json_t *env_json(const struct ntr_ring_header *h) {
  json_t *o = json_object();
  size_t len = h->env_len <= NTR_ENV_BYTES ? h->env_len : NTR_ENV_BYTES;
  size_t i = 0;
  while (i < len) {
    const char *s = h->env + i;
    size_t n = 0;
    while (i + n < len && s[n])
      n++;
    const char *eq = memchr(s, '=', n);
    if (eq && eq > s) {
      char name[256];
      ntt_field_str(s, (size_t)(eq - s), name, sizeof name);
      set(o, name, ntt_json_str(eq + 1, n - (size_t)(eq - s) - 1));
    }
    i += n + 1;
  }
  return o;
}

static json_t *trigger_json(const struct ntt_image *img) {
  if (!img->has_trigger)
    return json_null();
  char b[32];
  json_t *o = json_object();
  set(o, "kind", json_string(ntt_trigger_name(&img->trigger, b, sizeof b)));
  set(o, "reason", ntt_json_str(img->trigger.reason, sizeof img->trigger.reason));
  set(o, "signo", json_integer(img->trigger.signo));
  set(o, "exit_code", json_integer(img->trigger.exit_code));
  set(o, "t_ns", img->trigger.tsc ? ntt_json_u64(ntt_image_ns(img, img->trigger.tsc)) : json_null());
  return o;
}

static json_t *backtrace_json(const struct ntr_ring_header *h) {
  if (h->bt_depth == 0)
    return json_null();
  json_t *o = json_object(), *frames = json_array();
  set(o, "signo", json_integer(h->bt_signo));
  set(o, "tid", json_integer(h->bt_tid));
  for (uint32_t i = 0; i < h->bt_depth && i < NTR_BT_DEPTH; i++) {
    char ip[24];
    snprintf(ip, sizeof ip, "0x%llx", (unsigned long long)h->bt_ip[i]);
    json_t *f = json_object();
    set(f, "ip", json_string(ip));
    set(f, "sym", ntt_json_str(h->bt_sym[i], sizeof h->bt_sym[i]));
    json_array_append_new(frames, f);
  }
  set(o, "frames", frames);
  return o;
}

static json_t *comm_json(const struct ntt_image *img, const struct ntr_comm_state *c, uint64_t now_ns) {
  json_t *o = json_object();
  set(o, "id", ntt_json_hex64(c->comm_id));
  set(o, "parent", ntt_json_hex64(c->parent_id));
  set(o, "rank", json_integer(c->rank));
  set(o, "nranks", json_integer(c->nranks));
  set(o, "lifecycle", json_string(ntt_lifecycle_name(c->lifecycle)));
  set(o, "async_error", json_string(ntt_result_name(c->async_error)));
  set(o, "coll_seq", ntt_json_u64(c->coll_seq));
  set(o, "last_enqueued", ntt_json_u64(c->last_enqueued));
  set(o, "last_completed", ntt_json_u64(c->last_completed));
  if (c->blocked_since) {
    uint64_t since = ntt_image_ns(img, c->blocked_since);
    set(o, "blocked_kind", json_string(ntt_kind_name(c->blocked_kind)));
    set(o, "blocked_for_ns", ntt_json_u64(now_ns > since ? now_ns - since : 0));
  } else {
    set(o, "blocked_kind", json_null());
    set(o, "blocked_for_ns", json_integer(0));
  }
  set(o, "nonblocking", json_boolean(c->flags & NTR_REC_NONBLOCKING));
  /* the coordinator's measure of this rank's lateness (format v2), null without one */
  set(o, "lateness_median_ms", c->late_window ? json_real(c->late_med_us / 1000.0) : json_null());
  set(o, "lateness_last", c->late_window ? json_integer(c->late_last) : json_null());
  set(o, "lateness_window", c->late_window ? json_integer(c->late_window) : json_null());
  return o;
}

static json_t *flags_json(unsigned f) {
  static const struct {
    unsigned bit;
    const char *name;
  } names[] = {
      {NTR_REC_IN_GROUP, "in_group"},       {NTR_REC_NONBLOCKING, "nonblocking"},
      {NTR_REC_CAPTURED, "captured"},       {NTR_REC_COMPLETED, "completed"},
      {NTR_REC_NO_TRACKING, "no_tracking"}, {NTR_REC_STRICT_REFUSED, "strict_refused"},
  };
  json_t *a = json_array();
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (f & names[i].bit)
      json_array_append_new(a, json_string(names[i].name));
  return a;
}

json_t *ntt_record_json(const struct ntt_image *img, const struct ntr_record *r) {
  static const char *const phases[] = {"call", "enter", "exit", "event"};
  int coll = ntt_kind_is_collective(r->kind);
  json_t *o = json_object();
  set(o, "pos", ntt_json_u64(r->commit - 1));
  set(o, "t_ns", ntt_json_u64(ntt_image_ns(img, r->tsc)));
  set(o, "t_done_ns", r->tsc_done ? ntt_json_u64(ntt_image_ns(img, r->tsc_done)) : json_null());
  set(o, "comm", r->comm_id ? ntt_json_hex64(r->comm_id) : json_null());
  set(o, "rank", json_integer(r->rank));
  set(o, "nranks", json_integer(r->nranks));
  set(o, "kind", json_string(ntt_kind_name(r->kind)));
  set(o, "phase", json_string(r->phase < 4 ? phases[r->phase] : "unknown"));
  set(o, "seq", ntt_json_u64(r->seq));
  set(o, "count", ntt_json_u64(r->count));
  set(o, "dtype", r->dtype == 0xff ? json_null() : json_string(ntt_dtype_name(r->dtype)));
  set(o, "redop", r->redop < 0 ? json_null() : json_string(ntt_redop_name(r->redop)));
  set(o, "root", coll && r->peer >= 0 ? json_integer(r->peer) : json_null());
  set(o, "peer", !coll && r->peer >= 0 ? json_integer(r->peer) : json_null());
  set(o, "result", r->result < 0 ? json_null() : json_string(ntt_result_name(r->result)));
  set(o, "completed", json_boolean((r->flags & NTR_REC_COMPLETED) || r->tsc_done));
  set(o, "flags", flags_json(r->flags));
  set(o, "group_depth", json_integer(r->group_depth));
  set(o, "group_id", json_integer(r->group_id));
  set(o, "tid", json_integer(r->tid));
  char fp[9];
  snprintf(fp, sizeof fp, "%08x", r->fp);
  set(o, "fp", json_string(fp));
  set(o, "stack_id", json_integer(r->stack_id));
  set(o, "pystack_id", json_integer(r->pystack_id));
  set(o, "site", ntt_pystack_json(img, r->pystack_id));
  if (r->pystack_id == NTR_PYSTACK_DROPPED)
    set(o, "site_dropped", json_true());
  set(o, "text", ntt_rec_has_text(r) ? ntt_json_str(r->u.text, sizeof r->u.text) : json_null());
  set(o, "aux", ntt_json_u64(r->aux));
  return o;
}

static json_t *stacks_json(const struct ntt_image *img) {
  json_t *a = json_array();
  for (uint32_t i = 0; i < img->nstacks; i++) {
    const struct ntr_stack *s = &img->stacks[i];
    json_t *o = json_object(), *ips = json_array();
    set(o, "id", json_integer((json_int_t)i + 1));
    if (s->kind == NTR_STACK_PYTHON) {
      json_decref(ips);
      set(o, "kind", json_string("python"));
      set(o, "frames", ntt_pystack_json(img, i + 1));
      json_array_append_new(a, o);
      continue;
    }
    set(o, "kind", json_string("native"));
    for (uint32_t k = 0; k < s->depth && k < NTR_STACK_DEPTH; k++) {
      char ip[24];
      snprintf(ip, sizeof ip, "0x%llx", (unsigned long long)s->ip[k]);
      json_array_append_new(ips, json_string(ip));
    }
    set(o, "ips", ips);
    json_array_append_new(a, o);
  }
  return a;
}

json_t *ntt_image_json(const struct ntt_image *img) {
  json_t *o = json_object();
  uint64_t now = ntt_image_now_ns(img);
  set(o, "schema", json_integer(NTT_DECODE_SCHEMA));
  set(o, "file", ntt_json_str(img->path, sizeof img->path));
  set(o, "format", json_string(img->is_dump ? "dump" : "ring"));
  set(o, "version", json_integer(NTR_FORMAT_VERSION));
  set(o, "header", header_json(img));
  set(o, "env", env_json(&img->hdr));
  set(o, "trigger", trigger_json(img));
  set(o, "backtrace", backtrace_json(&img->hdr));
  json_t *comms = json_array();
  for (uint32_t i = 0; i < img->ncomms; i++)
    json_array_append_new(comms, comm_json(img, &img->comms[i], now));
  set(o, "comms", comms);
  json_t *held = json_array(); /* the comm ranks this process holds, per communicator */
  for (uint32_t i = 0; i < img->ncomms; i++) {
    uint64_t cid = img->comms[i].comm_id;
    int r[NTR_COMM_MAX];
    int n = ntt_held_ranks_at(img, i, r, NTR_COMM_MAX);
    if (n < 1)
      continue;
    json_t *h = json_object(), *ra = json_array();
    for (int k = 0; k < n; k++)
      json_array_append_new(ra, json_integer(r[k]));
    set(h, "comm", ntt_json_hex64(cid));
    set(h, "ranks", ra);
    json_array_append_new(held, h);
  }
  set(o, "comm_ranks", held);
  set(o, "stacks", stacks_json(img));
  json_t *py = json_object();
  char ver[32] = "";
  if (img->hdr.py_version)
    snprintf(ver, sizeof ver, "%u.%u.%u", img->hdr.py_version >> 24, img->hdr.py_version >> 16 & 0xff,
             img->hdr.py_version >> 8 & 0xff);
  set(py, "version", ver[0] ? json_string(ver) : json_null());
  set(py, "state", json_string(ntt_py_state_name(img->hdr.py_state)));
  set(py, "sites_dropped", json_integer(img->hdr.py_sites_dropped));
  set(o, "python", py);
  set(o, "python_threads", ntt_pythreads_json(img));
  json_t *recs = json_array();
  for (uint64_t i = 0; i < img->nrecs; i++)
    json_array_append_new(recs, ntt_record_json(img, &img->recs[i]));
  set(o, "records", recs);
  return o;
}

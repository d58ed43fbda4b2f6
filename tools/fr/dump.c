/* dump.c -- an FR dump's decoded value checked into an ntf_dump (fr.h).
 *
 * The fields, as ProcessGroupNCCL's FlightRecorder writes them (versions
 * "2.3", PyTorch 2.4, to "2.10"): version, pg_config {name: {name, desc,
 * ranks "[0, 1]"}}, pg_status {pg_id: {last_enqueued_collective,
 * last_started_collective, last_completed_collective}} (ints in the pickle,
 * strings in the JSON form), entries [{record_id, pg_id, process_group
 * (name, desc), collective_seq_id, p2p_seq_id, op_id, profiling_name
 * "nccl:all_reduce", input_sizes [[...]], input_dtypes ["Float"],
 * output_sizes, state, time_created_ns, time_discovered_started_ns,
 * time_discovered_completed_ns (None in the pickle, 0 in the JSON form when
 * not seen), frames [{name, filename, line}] (pickle only), timeout_ms,
 * is_p2p, retired}].  Versions before 2.3 (PyTorch 2.2, 2.3: "seq_id",
 * no p2p_seq_id) are read as far as they go; every field is optional but
 * entries, and one of the wrong type drops its entry (counted), never the
 * dump.
 *
 * Thread-safety: no shared state.  Not signal-safe (allocates).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tools/fr/fr.h"

#define NTF_MAX_ENTRIES (1 << 22) /* entries read per dump (FR's ring is 2,000 by default) */
#define NTF_MAX_PGS 4096
#define NTF_MAX_PG_RANKS (1 << 20)
/* Values looked at per dump at most: c10's pickler shares containers, so
 * a small hostile file can name one big list from many entries. */
#define NTF_MAX_WORK (64ll << 20)

int ntf_sniff(const uint8_t *h, size_t n) {
  if (n >= 3 && h[0] == 0x80 && h[1] >= 2 && h[1] <= 5) {
    size_t i = 2;
    if (h[i] == 0x95) /* FRAME (protocol 4+) */
      i += 9;
    if (i < n && (h[i] == '}' || h[i] == '('))
      return NTF_PICKLE;
    return 0;
  }
  size_t i = 0;
  while (i < n && (h[i] == ' ' || h[i] == '\n' || h[i] == '\t' || h[i] == '\r'))
    i++;
  if (i < n && h[i] == '{') {
    /* a JSON object: FR's starts with one of its keys */
    for (size_t k = i + 1; k + 1 < n; k++)
      if (h[k] == '"')
        return (!memcmp(h + k + 1, "version", n - k - 1 < 7 ? n - k - 1 : 7) ||
                !memcmp(h + k + 1, "comm_lib_version", n - k - 1 < 16 ? n - k - 1 : 16) ||
                !memcmp(h + k + 1, "entries", n - k - 1 < 7 ? n - k - 1 : 7) ||
                !memcmp(h + k + 1, "pg_config", n - k - 1 < 9 ? n - k - 1 : 9) ||
                !memcmp(h + k + 1, "pg_status", n - k - 1 < 9 ? n - k - 1 : 9) ||
                !memcmp(h + k + 1, "nccl_comm_state", n - k - 1 < 15 ? n - k - 1 : 15))
                   ? NTF_JSON
                   : 0;
    return 0;
  }
  return 0;
}

int ntf_rank_of_name(const char *path) {
  const char *b = strrchr(path, '/');
  b = b ? b + 1 : path;
  size_t n = strlen(b);
  const char *end = b + n;
  /* a ".json" / ".pkl" suffix after the number is allowed */
  const char *dot = strrchr(b, '.');
  if (dot && (!strcmp(dot, ".json") || !strcmp(dot, ".pkl") || !strcmp(dot, ".pickle")))
    end = dot;
  const char *s = end;
  while (s > b && s[-1] >= '0' && s[-1] <= '9')
    s--;
  if (s == end || end - s > 7)
    return -1;
  int r = 0;
  for (const char *q = s; q < end; q++)
    r = r * 10 + (*q - '0');
  return r;
}

/* An integer field: ints, the JSON form's decimal strings.  @return 1 with *v. */
static int get_int(json_t *o, const char *key, int64_t *v) {
  json_t *x = json_object_get(o, key);
  if (json_is_integer(x)) {
    *v = json_integer_value(x);
    return 1;
  }
  if (json_is_string(x)) {
    char *end;
    const char *s = json_string_value(x);
    long long r = strtoll(s, &end, 10);
    if (end != s && !*end) {
      *v = r;
      return 1;
    }
  }
  return 0;
}

static void get_str(json_t *o, const char *key, char *buf, size_t len) {
  json_t *x = json_object_get(o, key);
  snprintf(buf, len, "%s", json_is_string(x) ? json_string_value(x) : "");
}

/* "[0, 1, 2, 3]" (pg_config's ranks) into v.  @return count, -1 bad. */
static int parse_ranks(const char *s, int **out) {
  *out = NULL;
  while (*s == ' ')
    s++;
  if (*s++ != '[')
    return -1;
  int n = 0, cap = 0;
  int *v = NULL;
  for (;;) {
    while (*s == ' ' || *s == ',')
      s++;
    if (*s == ']')
      break;
    char *end;
    long r = strtol(s, &end, 10);
    if (end == s || r < 0 || r >= NTF_MAX_PG_RANKS || n >= NTF_MAX_PG_RANKS) {
      free(v);
      return -1;
    }
    if (n == cap) {
      cap = cap ? 2 * cap : 16;
      int *nv = realloc(v, (size_t)cap * sizeof(*nv));
      if (!nv) {
        free(v);
        return -1;
      }
      v = nv;
    }
    v[n++] = (int)r;
    s = end;
  }
  *out = v;
  return n;
}

/* Elements over the tensors of a sizes list [[4, 8], [2]]; the text kept
 * for reports.  @return -1 when unknown or absurd. */
static int64_t numel(json_t *sizes, char *txt, size_t len, long long *work) {
  txt[0] = 0;
  if (!json_is_array(sizes))
    return -1;
  *work -= (long long)json_array_size(sizes);
  int64_t total = 0;
  size_t used = 0;
  used += (size_t)snprintf(txt + used, len - used, "[");
  size_t i, j;
  json_t *t, *d;
  json_array_foreach(sizes, i, t) {
    if (!json_is_array(t))
      return -1;
    int64_t prod = 1;
    *work -= (long long)json_array_size(t);
    if (*work < 0)
      return -1;
    if (used < len)
      used += (size_t)snprintf(txt + used, len - used, "%s[", i ? ", " : "");
    json_array_foreach(t, j, d) {
      if (!json_is_integer(d) || json_integer_value(d) < 0)
        return -1;
      int64_t x = json_integer_value(d);
      if (x && prod > INT64_MAX / x)
        return -1;
      prod *= x;
      if (used < len)
        used += (size_t)snprintf(txt + used, len - used, "%s%lld", j ? ", " : "", (long long)x);
    }
    if (used < len)
      used += (size_t)snprintf(txt + used, len - used, "]");
    if (total > INT64_MAX - prod)
      return -1;
    total += prod;
  }
  if (used < len)
    snprintf(txt + used, len - used, "]");
  return total;
}

/* A frame of torch or another installed package, not of the application
 * (an application's own directory may well be called torch/). */
static int is_torch_frame(const char *file) {
  static const char *const lib[] = {"/site-packages/", "/dist-packages/", "/torch/distributed/", "/torch/nn/",
                                    "/torch/utils/", "/torch/cuda/", "/torch/autograd/", "/torch/_"};
  for (size_t i = 0; i < sizeof lib / sizeof *lib; i++)
    if (strstr(file, lib[i]))
      return 1;
  return 0;
}

static void copy_tail(char *dst, size_t len, const char *s) {
  size_t n = strlen(s);
  snprintf(dst, len, "%s", n >= len ? s + n - (len - 1) : s);
}

/* Frames innermost first; kept: from the first outside torch on. */
static void read_frames(json_t *fr, struct ntf_entry *e, long long *work) {
  if (!json_is_array(fr))
    return;
  size_t n = json_array_size(fr), first = n;
  *work -= (long long)n;
  if (*work < 0)
    return;
  for (size_t i = 0; i < n; i++) {
    json_t *f = json_array_get(fr, i);
    json_t *file = json_object_get(f, "filename");
    if (json_is_string(file) && !is_torch_frame(json_string_value(file))) {
      first = i;
      break;
    }
  }
  if (first == n)
    first = 0;
  for (size_t i = first; i < n && e->nframes < NTF_FRAMES; i++) {
    json_t *f = json_array_get(fr, i);
    if (!json_is_object(f))
      continue;
    struct ntf_frame *o = &e->frames[e->nframes];
    json_t *file = json_object_get(f, "filename"), *name = json_object_get(f, "name");
    int64_t line = 0;
    copy_tail(o->file, sizeof o->file, json_is_string(file) ? json_string_value(file) : "?");
    snprintf(o->func, sizeof o->func, "%s", json_is_string(name) ? json_string_value(name) : "?");
    get_int(f, "line", &line);
    o->line = line > 0 && line < (1 << 30) ? (int)line : 0;
    e->nframes++;
  }
}

/* "send 0->1", "recv 1<-0": direction and the ranks. */
static void p2p_of_name(struct ntf_entry *e) {
  e->p2p_dir = -1;
  e->peer = e->self = -1;
  int a, b;
  if (sscanf(e->op, "send %d->%d", &a, &b) == 2) {
    e->p2p_dir = 0;
    e->self = a;
    e->peer = b;
  } else if (sscanf(e->op, "recv %d<-%d", &a, &b) == 2) {
    e->p2p_dir = 1;
    e->self = a;
    e->peer = b;
  } else if (!strncmp(e->op, "send", 4) && (!e->op[4] || e->op[4] == ' ')) {
    e->p2p_dir = 0;
  } else if (!strncmp(e->op, "recv", 4) && (!e->op[4] || e->op[4] == ' ')) {
    e->p2p_dir = 1;
  }
}

static uint64_t get_time(json_t *o, const char *key) {
  int64_t v;
  return get_int(o, key, &v) && v > 0 ? (uint64_t)v : 0;
}

static int read_entry(json_t *x, struct ntf_entry *e, long long *work) {
  memset(e, 0, sizeof(*e));
  if (!json_is_object(x))
    return -1;
  *work -= 32;
  int64_t v;
  e->record_id = get_int(x, "record_id", &v) ? v : -1;
  e->pg_id = get_int(x, "pg_id", &v) ? v : -1;
  json_t *pg = json_object_get(x, "process_group");
  if (json_is_array(pg) && json_array_size(pg) >= 1 && json_is_string(json_array_get(pg, 0))) {
    snprintf(e->pg_name, sizeof e->pg_name, "%s", json_string_value(json_array_get(pg, 0)));
    json_t *d = json_array_get(pg, 1);
    snprintf(e->pg_desc, sizeof e->pg_desc, "%s", json_is_string(d) ? json_string_value(d) : "");
  } else if (json_is_string(pg)) {
    snprintf(e->pg_name, sizeof e->pg_name, "%s", json_string_value(pg));
  } else if (e->pg_id >= 0) {
    snprintf(e->pg_name, sizeof e->pg_name, "%lld", (long long)e->pg_id);
  } else {
    return -1;
  }
  /* collective_seq_id since 2.3; "seq_id" before */
  if (get_int(x, "collective_seq_id", &v) || get_int(x, "seq_id", &v))
    e->coll_seq = v > 0 ? (uint64_t)v : 0;
  else
    return -1;
  e->p2p_seq = get_int(x, "p2p_seq_id", &v) && v > 0 ? (uint64_t)v : 0;
  e->op_id = get_int(x, "op_id", &v) && v > 0 ? (uint64_t)v : 0;
  char pn[128];
  get_str(x, "profiling_name", pn, sizeof pn);
  const char *op = !strncmp(pn, "nccl:", 5) ? pn + 5 : pn;
  size_t on = strnlen(op, sizeof e->op - 1);
  memcpy(e->op, op, on);
  e->op[on] = 0;
  if (!e->op[0])
    return -1;
  p2p_of_name(e);
  json_t *ip = json_object_get(x, "is_p2p");
  e->is_p2p = json_is_boolean(ip) ? json_is_true(ip) : e->p2p_dir >= 0;
  e->in_numel = numel(json_object_get(x, "input_sizes"), e->in_sizes, sizeof e->in_sizes, work);
  e->out_numel = numel(json_object_get(x, "output_sizes"), e->out_sizes, sizeof e->out_sizes, work);
  json_t *dt = json_object_get(x, "input_dtypes");
  if (json_is_array(dt) && json_array_size(dt) && json_is_string(json_array_get(dt, 0))) {
    snprintf(e->dtype, sizeof e->dtype, "%s", json_string_value(json_array_get(dt, 0)));
    size_t i;
    json_t *d;
    *work -= (long long)json_array_size(dt);
    if (*work >= 0)
      json_array_foreach(dt, i, d) if (!json_is_string(d) || strcmp(json_string_value(d), e->dtype))
      e->ndtypes_differ = 1;
  }
  e->t_created = get_time(x, "time_created_ns");
  e->t_started = get_time(x, "time_discovered_started_ns");
  e->t_completed = get_time(x, "time_discovered_completed_ns");
  char st[32];
  get_str(x, "state", st, sizeof st);
  e->state = !strcmp(st, "completed") ? NTF_COMPLETED : !strcmp(st, "started") ? NTF_STARTED : NTF_SCHEDULED;
  if (!st[0]) /* before "state" existed: told by the times */
    e->state = e->t_completed ? NTF_COMPLETED : e->t_started ? NTF_STARTED : NTF_SCHEDULED;
  e->timeout_ms = get_int(x, "timeout_ms", &v) && v >= 0 ? v : -1;
  json_t *ret = json_object_get(x, "retired");
  e->retired = json_is_true(ret);
  read_frames(json_object_get(x, "frames"), e, work);
  return 0;
}

static struct ntf_pg *pg_find(struct ntf_dump *d, const char *name) {
  for (int i = 0; i < d->npgs; i++)
    if (!strcmp(d->pgs[i].name, name))
      return &d->pgs[i];
  return NULL;
}

int ntf_dump_from_json(json_t *root, struct ntf_dump *d, char *err, size_t errlen) {
  if (!json_is_object(root)) {
    snprintf(err, errlen, "not a Flight Recorder dump: the top value is not a dict");
    return -1;
  }
  json_t *ver = json_object_get(root, "version"), *ents = json_object_get(root, "entries");
  json_t *cfg = json_object_get(root, "pg_config"), *sts = json_object_get(root, "pg_status");
  if (!json_is_string(ver) || (!json_is_array(ents) && !json_is_object(cfg))) {
    snprintf(err, errlen, "not a Flight Recorder dump: no version and entries or pg_config");
    return -1;
  }
  snprintf(d->version, sizeof d->version, "%s", json_string_value(ver));
  if (sscanf(d->version, "%d.%d", &d->major, &d->minor) != 2 || d->major != 2) {
    snprintf(err, errlen, "Flight Recorder dump version %.15s: this reader knows 2.x (PyTorch 2.2 to 2.11)",
             d->version);
    return -1;
  }
  /* pg_config: each group's ranks */
  if (json_is_object(cfg)) {
    const char *k;
    json_t *g;
    size_t n = json_object_size(cfg);
    if (n > NTF_MAX_PGS) {
      snprintf(err, errlen, "Flight Recorder dump: %zu process groups (at most %d read)", n, NTF_MAX_PGS);
      return -1;
    }
    d->pgs = calloc(n ? n : 1, sizeof(*d->pgs));
    if (!d->pgs) {
      snprintf(err, errlen, "out of memory");
      return -1;
    }
    json_object_foreach(cfg, k, g) {
      struct ntf_pg *p = &d->pgs[d->npgs];
      snprintf(p->name, sizeof p->name, "%s", k);
      get_str(g, "desc", p->desc, sizeof p->desc);
      json_t *r = json_object_get(g, "ranks");
      p->nranks = json_is_string(r) ? parse_ranks(json_string_value(r), &p->ranks) : -1;
      if (p->nranks < 0) {
        p->nranks = 0;
        p->ranks = NULL;
      }
      p->last_enqueued = p->last_started = p->last_completed = -1;
      d->npgs++;
    }
  }
  /* pg_status is keyed by pg_id; entries tell which name an id has */
  d->ne = 0;
  size_t n = json_is_array(ents) ? json_array_size(ents) : 0;
  if (n > NTF_MAX_ENTRIES) {
    snprintf(err, errlen, "Flight Recorder dump: %zu entries (at most %d read)", n, NTF_MAX_ENTRIES);
    return -1;
  }
  d->e = calloc(n ? n : 1, sizeof(*d->e));
  if (!d->e) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  long long work = NTF_MAX_WORK;
  for (size_t i = 0; i < n; i++) {
    if (read_entry(json_array_get(ents, i), &d->e[d->ne], &work) == 0)
      d->ne++;
    else
      d->skipped++;
    if (work < 0) {
      snprintf(err, errlen, "Flight Recorder dump: its entries name more than %lld values (shared lists)",
               NTF_MAX_WORK);
      return -1;
    }
  }
  if (json_is_object(sts)) {
    const char *k;
    json_t *s;
    json_object_foreach(sts, k, s) {
      char *end;
      long id = strtol(k, &end, 10);
      struct ntf_pg *p = NULL;
      for (int i = 0; !*end && i < d->ne && !p; i++)
        if (d->e[i].pg_id == id)
          p = pg_find(d, d->e[i].pg_name);
      if (!p && d->npgs == 1 && id == 0) /* a group that ran nothing yet */
        p = &d->pgs[0];
      if (!p)
        continue;
      int64_t v;
      p->has_status = 1;
      p->last_enqueued = get_int(s, "last_enqueued_collective", &v) ? v : -1;
      p->last_started = get_int(s, "last_started_collective", &v) ? v : -1;
      p->last_completed = get_int(s, "last_completed_collective", &v) ? v : -1;
    }
  }
  return 0;
}

int ntf_dump_parse(const uint8_t *buf, size_t len, enum ntf_form form, uint64_t limit, struct ntf_dump *d,
                   char *err, size_t errlen) {
  json_t *root = NULL;
  if (form == NTF_PICKLE) {
    if (ntf_pickle_decode(buf, len, limit, &root, err, errlen) != 0)
      return -1;
  } else {
    if (len > limit / 8) { /* jansson's values take several times the text */
      snprintf(err, errlen, "JSON Flight Recorder dump of %zu bytes: over the memory limit", len);
      return -1;
    }
    json_error_t je;
    root = json_loadb((const char *)buf, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
      snprintf(err, errlen, "JSON: %s at line %d column %d", je.text, je.line, je.column);
      return -1;
    }
  }
  d->form = form;
  int rc = ntf_dump_from_json(root, d, err, errlen);
  json_decref(root);
  return rc;
}

void ntf_dump_free(struct ntf_dump *d) {
  for (int i = 0; i < d->npgs; i++)
    free(d->pgs[i].ranks);
  free(d->pgs);
  free(d->e);
  memset(d, 0, sizeof(*d));
}

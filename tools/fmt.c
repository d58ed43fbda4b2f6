/* fmt.c -- human-readable forms of records, times, signals and states, shared
 * by decode, status, export and collect.
 *
 * Thread-safety: reentrant (caller buffers; constant tables).  Not
 * signal-safe (snprintf, gmtime_r).
 */
#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "tools/ntt.h"
#include "recorder/names.h"

void ntt_fmt_time(uint64_t real_ns, char *buf, size_t len) {
  if (real_ns == 0) {
    snprintf(buf, len, "-");
    return;
  }
  time_t s = (time_t)(real_ns / 1000000000ull);
  struct tm tm;
  if (!gmtime_r(&s, &tm)) {
    snprintf(buf, len, "@%llu", (unsigned long long)real_ns);
    return;
  }
  char date[32];
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf, len, "%s.%06uZ", date, (unsigned)(real_ns % 1000000000ull / 1000u));
}

void ntt_field_str(const char *field, size_t field_len, char *buf, size_t len) {
  if (!len)
    return;
  size_t n = 0;
  for (size_t i = 0; i < field_len && field[i] && n + 1 < len; i++) {
    unsigned char c = (unsigned char)field[i];
    buf[n++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
  }
  buf[n] = '\0';
}

const char *ntt_esc(const char *s, char *buf, size_t len) {
  ntt_field_str(s ? s : "", s ? strlen(s) : 0, buf, len);
  return buf;
}

void ntt_ident_of(const struct ntr_ring_header *h, struct ntt_ident *id) {
  ntt_field_str(h->host, sizeof h->host, id->host, sizeof id->host);
  ntt_field_str(h->job_id, sizeof h->job_id, id->job, sizeof id->job);
  ntt_field_str(h->exe, sizeof h->exe, id->exe, sizeof id->exe);
  ntt_field_str(h->tracer_version, sizeof h->tracer_version, id->version, sizeof id->version);
}

int ntt_rec_has_text(const struct ntr_record *r) {
  switch (r->kind) {
  case NTR_KIND_MARK:
  case NTR_KIND_MISMATCH:
  case NTR_KIND_ENV_DIFF:
  case NTR_KIND_DUMP:
  case NTR_KIND_NOTE:
    return 1;
  case NTR_KIND_EXEC:
    return r->phase == NTR_PHASE_ENTER; /* the path (tail); EXIT carries errno */
  default:
    return 0;
  }
}

void ntt_rec_text(const struct ntr_record *r, char *buf, size_t len) {
  ntt_field_str(r->u.text, sizeof r->u.text, buf, len);
}

const char *ntt_rank_label(int32_t rank, char *buf, size_t len) {
  if (rank < 0)
    snprintf(buf, len, "rank ?");
  else
    snprintf(buf, len, "rank %d", (int)rank);
  return buf;
}

const char *ntt_signal_name(int signo, char *buf, size_t len) {
  const char *n = ntr_name_signal(signo);
  if (n)
    return n;
  snprintf(buf, len, "signal %d", signo);
  return buf;
}

const char *ntt_lifecycle_name(unsigned lc) {
  static const char *const n[] = {"free", "init", "ready", "init_failed", "finalizing",
                                  "destroyed", "aborted", "revoked"};
  return lc < sizeof n / sizeof n[0] ? n[lc] : "unknown";
}

const char *ntt_proc_state_name(unsigned st) {
  static const char *const n[] = {"running", "exited", "signaled", "exec"};
  return st < sizeof n / sizeof n[0] ? n[st] : "unknown";
}

const char *ntt_ring_place_name(unsigned pl) {
  static const char *const n[] = {"unknown", "dir", "sibling", "fallback", "anonymous"};
  return pl < sizeof n / sizeof n[0] ? n[pl] : "unknown";
}

/* SIGTERM/SIGINT dumps are named after the signal ("sigterm"), so a reader
 * sees the launcher's fail-fast kill for what it is. */
const char *ntt_trigger_name(const struct ntr_trigger *t, char *buf, size_t len) {
  if (t->kind == NTR_TRIG_SIGNAL && t->signo > 0) {
    char tmp[32];
    const char *s = ntt_signal_name(t->signo, tmp, sizeof tmp);
    if (strncmp(s, "SIG", 3) == 0) {
      size_t i = 0;
      for (; s[i] && i + 1 < len; i++)
        buf[i] = (char)tolower((unsigned char)s[i]);
      buf[i] = '\0';
      return buf;
    }
  }
  const char *n = ntr_name_trigger(t->kind);
  if (n)
    return n;
  snprintf(buf, len, "trigger#%u", t->kind);
  return buf;
}

const char *ntt_rec_state(const struct ntr_record *r) {
  if (!ntt_kind_is_collective(r->kind) && !ntt_kind_is_p2p(r->kind) && r->kind != NTR_KIND_GRAPH_LAUNCH)
    return "-";
  if (r->flags & NTR_REC_STRICT_REFUSED)
    return "refused";
  if ((r->flags & NTR_REC_COMPLETED) || r->tsc_done)
    return "completed";
  if (r->flags & NTR_REC_CAPTURED)
    return "captured";
  if (r->flags & NTR_REC_NO_TRACKING)
    return "untracked";
  return "pending";
}

static const char *phase_suffix(unsigned phase) {
  return phase == NTR_PHASE_ENTER ? " enter" : phase == NTR_PHASE_EXIT ? " exit" : "";
}

void ntt_fmt_op(const struct ntr_record *r, char *buf, size_t len) {
  const char *k = ntt_kind_name(r->kind);
  char text[32], sig[32];
  unsigned long long cnt = (unsigned long long)r->count;
  if (ntt_kind_is_collective(r->kind)) {
    int n = snprintf(buf, len, "%s(count=%llu, %s", k, cnt, ntt_dtype_name(r->dtype));
    if (n < 0 || (size_t)n >= len)
      return;
    if (r->redop >= 0)
      n += snprintf(buf + n, len - (size_t)n, ", %s", ntt_redop_name(r->redop));
    if (n >= 0 && (size_t)n < len && r->peer >= 0)
      n += snprintf(buf + n, len - (size_t)n, ", root=%d", r->peer);
    if (n >= 0 && (size_t)n < len)
      snprintf(buf + n, len - (size_t)n, ")");
    return;
  }
  if (ntt_kind_is_p2p(r->kind)) {
    snprintf(buf, len, "%s(count=%llu, %s, peer=%d)", k, cnt, ntt_dtype_name(r->dtype), r->peer);
    return;
  }
  if (ntt_rec_has_text(r))
    ntt_rec_text(r, text, sizeof text);
  switch (r->kind) {
  case NTR_KIND_GROUP_START:
  case NTR_KIND_GROUP_END:
  case NTR_KIND_GROUP_SIMULATE_END:
    snprintf(buf, len, "%s(depth=%u)%s", k, r->group_depth, phase_suffix(r->phase));
    return;
  case NTR_KIND_COMM_SPLIT:
    snprintf(buf, len, "%s(color=%d, key=%d)%s", k, (int)(uint32_t)(r->aux >> 32), (int)(uint32_t)r->aux,
             phase_suffix(r->phase));
    return;
  case NTR_KIND_MARK:
    snprintf(buf, len, "Mark(%s=%lld)", text, (long long)r->count);
    return;
  case NTR_KIND_ASYNC_ERROR:
    snprintf(buf, len, "AsyncError(%s)", ntt_result_name((int)r->aux));
    return;
  case NTR_KIND_TIMEOUT:
    snprintf(buf, len, "Timeout(seq=%llu)", (unsigned long long)r->seq);
    return;
  case NTR_KIND_MISMATCH:
    snprintf(buf, len, "Mismatch(field=%s, seq=%llu, other rank %lld)", text, (unsigned long long)r->seq,
             (long long)r->aux);
    return;
  case NTR_KIND_PEER_LOST:
  case NTR_KIND_SKEW:
    snprintf(buf, len, "%s(rank=%d)", k, r->peer);
    return;
  case NTR_KIND_ENV_DIFF:
  case NTR_KIND_DUMP:
  case NTR_KIND_NOTE:
    snprintf(buf, len, "%s(%s)", k, text);
    return;
  case NTR_KIND_SIGNAL:
    snprintf(buf, len, "Signal(%s)", ntt_signal_name((int)r->aux, sig, sizeof sig));
    return;
  case NTR_KIND_EXIT:
    snprintf(buf, len, "Exit(code=%d)", (int)r->aux);
    return;
  case NTR_KIND_EXEC:
    /* ENTER: the path, "..." when the record kept only its tail; an EXIT
     * means the exec failed (aux = errno, said by its text too). */
    if (r->phase == NTR_PHASE_ENTER)
      snprintf(buf, len, "Exec(%s%s)", r->count > sizeof r->u.text ? "..." : "", text);
    else
      snprintf(buf, len, "Exec(failed: %s, errno %d)", strerror((int)r->aux), (int)r->aux);
    return;
  case NTR_KIND_STRICT_BLOCK:
    snprintf(buf, len, "StrictBlock(seq=%llu)", (unsigned long long)r->seq);
    return;
  case NTR_KIND_GRAPH_CAPTURE:
  case NTR_KIND_GRAPH_INSTANTIATE:
  case NTR_KIND_GRAPH_LAUNCH:
  case NTR_KIND_GRAPH_DESTROY:
    ntt_fmt_graph(r, buf, len);
    return;
  case NTR_KIND_STRAGGLER:
    /* seq 0: one long stall (count = its seq); text "link": a host's slow
     * link (aux: its round trips' excess, us); else a window's verdict */
    if (!strncmp(r->u.text, "link", sizeof r->u.text))
      snprintf(buf, len, "Straggler(rank=%d, slow link of its host, round trip +%.1f ms)", r->peer,
               (double)r->aux / 1000.0);
    else if (r->seq == 0)
      snprintf(buf, len, "Straggler(rank=%d, stall at seq %llu, %.1f ms late)", r->peer,
               (unsigned long long)r->count, (double)r->aux / 1000.0);
    else
      snprintf(buf, len, "Straggler(rank=%d, last at %llu of %llu, median %.1f ms late)", r->peer,
               (unsigned long long)r->count, (unsigned long long)r->seq, (double)r->aux / 1000.0);
    return;
  case NTR_KIND_DEV_ARRIVE:
    snprintf(buf, len, "DeviceArrive(seq=%llu)", (unsigned long long)r->seq);
    return;
  default:
    break;
  }
  if (r->nranks > 0)
    snprintf(buf, len, "%s(rank=%d, nranks=%d)%s", k, r->rank, r->nranks, phase_suffix(r->phase));
  else
    snprintf(buf, len, "%s()%s", k, phase_suffix(r->phase));
}

/* "GraphLaunch(graph 3, replay 31: AllReduce #5, 1 call)" and friends:
 * the graph id, what it holds on this comm, and the handle. */
void ntt_fmt_graph(const struct ntr_record *r, char *buf, size_t len) {
  char calls[96];
  unsigned long long first = (unsigned long long)r->u.buf.sendbuf, last = (unsigned long long)r->seq;
  const char *op = r->redop > 0 && r->redop < NTR_KIND_COUNT ? ntt_kind_name((unsigned)r->redop) : "?";
  if (first && last > first)
    snprintf(calls, sizeof calls, "%s #%llu..#%llu, %d calls", op, first, last, r->peer);
  else if (first)
    snprintf(calls, sizeof calls, "%s #%llu%s", op, first, r->peer > 1 ? ", more calls" : "");
  else
    snprintf(calls, sizeof calls, "%s, %d calls", op, r->peer);
  unsigned long long id = (unsigned long long)r->aux, h = (unsigned long long)r->u.buf.recvbuf;
  switch (r->kind) {
  case NTR_KIND_GRAPH_CAPTURE:
    if (r->result)
      snprintf(buf, len, "GraphCapture(graph %llu: %s; capture failed, CUDA error %d)", id, calls, r->result);
    else
      snprintf(buf, len, "GraphCapture(graph %llu: %s; cudaGraph_t 0x%llx)", id, calls, h);
    return;
  case NTR_KIND_GRAPH_INSTANTIATE:
    snprintf(buf, len, "GraphInstantiate(graph %llu: %s; exec 0x%llx)", id, calls, h);
    return;
  case NTR_KIND_GRAPH_LAUNCH:
    snprintf(buf, len, "GraphLaunch(graph %llu replay %llu: %s)", id, (unsigned long long)r->count, calls);
    return;
  default:
    snprintf(buf, len, "GraphDestroy(graph %llu, %s 0x%llx, after %llu replays)", id, r->dtype == 1 ? "exec" : "graph",
             h, (unsigned long long)r->count);
    return;
  }
}

uint64_t ntt_wall_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void upd(uint64_t *m, uint64_t v) {
  if (v > *m)
    *m = v;
}

uint64_t ntt_image_last_tsc(const struct ntt_image *img) {
  uint64_t m = 0;
  for (uint64_t i = 0; i < img->nrecs; i++) {
    upd(&m, img->recs[i].tsc);
    upd(&m, img->recs[i].tsc_done);
  }
  for (uint32_t i = 0; i < img->ncomms; i++) {
    upd(&m, img->comms[i].last_enqueue_tsc);
    upd(&m, img->comms[i].last_complete_tsc);
    upd(&m, img->comms[i].blocked_since);
  }
  if (img->has_trigger)
    upd(&m, img->trigger.tsc);
  return m;
}

uint64_t ntt_image_now_ns(const struct ntt_image *img) {
  if (!img->is_dump && img->pid_alive)
    return ntt_wall_now_ns();
  if (img->has_trigger && img->trigger.tsc)
    return ntt_image_ns(img, img->trigger.tsc);
  uint64_t t = ntt_image_last_tsc(img);
  return t ? ntt_image_ns(img, t) : 0;
}

void ntt_rank_ranges(const int *r, int n, char *buf, size_t len) {
  size_t o = 0;
  buf[0] = 0;
  for (int i = 0; i < n && o + 28 < len;) {
    int j = i;
    while (j + 1 < n && r[j + 1] == r[j] + 1)
      j++;
    if (j > i)
      o += (size_t)snprintf(buf + o, len - o, "%s%d-%d", i ? "," : "", r[i], r[j]);
    else
      o += (size_t)snprintf(buf + o, len - o, "%s%d", i ? "," : "", r[i]);
    i = j + 1;
    if (i < n && o + 28 >= len)
      snprintf(buf + o, len - o, ",...");
  }
}

int ntt_held_ranks(const struct ntt_image *img, uint64_t comm_id, int *out, int max) {
  int n = 0;
  for (uint32_t i = 0; i < img->ncomms; i++) {
    int r = img->comms[i].rank, dup = 0;
    if (img->comms[i].comm_id != comm_id || r < 0)
      continue;
    for (int j = 0; j < n; j++)
      dup |= out[j] == r;
    if (dup || n == max)
      continue;
    int j = n++;
    for (; j > 0 && out[j - 1] > r; j--) /* insertion: at most NTR_COMM_MAX entries */
      out[j] = out[j - 1];
    out[j] = r;
  }
  return n;
}

int ntt_held_ranks_at(const struct ntt_image *img, uint32_t i, int *out, int max) {
  uint64_t cid = img->comms[i].comm_id;
  for (uint32_t j = 0; j < i; j++)
    if (img->comms[j].comm_id == cid)
      return 0;
  return ntt_held_ranks(img, cid, out, max);
}

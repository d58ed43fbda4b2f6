/* runexit.c -- the exit statuses `nccltrace run` recorded (recorder/format.h
 * "run exit-status file"): what a launcher knows and a rank that ended
 * without running exit() could not record -- the dynamic linker's exit 127,
 * SIGKILL, _exit.  Parsed as hostile input: a file anyone could have put in
 * the dump directory must never crash analyze, change a verdict by its
 * size, or reach the terminal with control bytes; anything out of range
 * makes it unreadable (said as such), never a guess.
 *
 * Thread-safety: single-threaded (load.c reads these files on the calling
 * thread; apply/detect run after loading).  Not signal-safe.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "recorder/format.h"
#include "recorder/names.h"
#include "tools/analyze/analyze.h"

/* Slack between the run's clock readings and the records (same host, same
 * clock: only the time fork and exec take, and rounding). */
#define RUNEXIT_SLACK_NS 2000000000ull

static int is_comp(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
         c == '_';
}

/* A file-name component of at most cap-1 bytes into dst.  @return 0 or -1. */
static int parse_comp(const char *v, size_t n, char *dst, size_t cap) {
  if (n == 0 || n >= cap)
    return -1;
  for (size_t i = 0; i < n; i++)
    if (!is_comp(v[i]))
      return -1;
  memcpy(dst, v, n);
  dst[n] = 0;
  return 0;
}

/* A decimal in [lo, hi] (a leading '-' allowed when lo < 0).  @return 0 or -1. */
static int parse_int(const char *v, size_t n, int64_t lo, uint64_t hi, int64_t *out) {
  int neg = n > 0 && v[0] == '-';
  size_t i = (size_t)neg;
  if (i == n || n - i > 20)
    return -1;
  uint64_t x = 0;
  for (; i < n; i++) {
    if (v[i] < '0' || v[i] > '9')
      return -1;
    uint64_t d = (uint64_t)(v[i] - '0');
    if (x > (UINT64_MAX - d) / 10)
      return -1;
    x = x * 10 + d;
  }
  if (neg) {
    if (lo >= 0 || x > (uint64_t)(-lo))
      return -1;
    *out = -(int64_t)x;
    return 0;
  }
  if (x > hi || (lo > 0 && x < (uint64_t)lo))
    return -1;
  *out = (int64_t)x;
  return 0;
}

int nta_runexit_parse(const char *buf, size_t len, struct nta_runexit *out, char *why, size_t whylen) {
  memset(out, 0, sizeof(*out));
  out->rank = -1;
  out->ppid = -1;
  size_t ml = strlen(NTR_RUNEXIT_MAGIC);
  if (len > NTR_RUNEXIT_MAX) {
    snprintf(why, whylen, "exit-status file larger than %u bytes", NTR_RUNEXIT_MAX);
    return -1;
  }
  if (len < ml + 1 || memcmp(buf, NTR_RUNEXIT_MAGIC, ml) != 0 || buf[ml] != '\n') {
    snprintf(why, whylen, "not an nccltrace run exit-status file (want first line '%s')", NTR_RUNEXIT_MAGIC);
    return -1;
  }
  if (memchr(buf, 0, len)) {
    snprintf(why, whylen, "exit-status file holds a NUL byte");
    return -1;
  }
  unsigned seen = 0; /* one bit per key: a key given twice is refused */
  int have_status = 0;
  for (size_t o = ml + 1; o < len;) {
    const char *line = buf + o;
    const char *nl = memchr(line, '\n', len - o);
    size_t n = nl ? (size_t)(nl - line) : len - o;
    o += n + 1;
    if (n == 0)
      continue;
    const char *sp = memchr(line, ' ', n);
    if (!sp) {
      snprintf(why, whylen, "exit-status file: a line without a value");
      return -1;
    }
    size_t kl = (size_t)(sp - line), vl = n - kl - 1;
    const char *v = sp + 1;
    static const char *const keys[] = {"host", "pid", "ppid", "rank", "job", "exe",
                                       "start_ns", "end_ns", "exited", "signaled"};
    int k = -1;
    for (int i = 0; i < (int)(sizeof keys / sizeof keys[0]); i++)
      if (strlen(keys[i]) == kl && memcmp(keys[i], line, kl) == 0)
        k = i;
    if (k < 0)
      continue; /* a later version's key */
    if (seen & (1u << k)) {
      snprintf(why, whylen, "exit-status file: key '%s' given twice", keys[k]);
      return -1;
    }
    seen |= 1u << k;
    int64_t x = 0;
    int bad = 0;
    switch (k) {
    case 0: bad = parse_comp(v, vl, out->host, sizeof out->host); break;
    case 1: bad = parse_int(v, vl, 1, INT32_MAX, &x); out->pid = (int)x; break;
    case 2: bad = parse_int(v, vl, 0, INT32_MAX, &x); out->ppid = (int)x; break;
    case 3: bad = parse_int(v, vl, -1, NTA_MAX_NRANKS - 1, &x); out->rank = (int)x; break;
    case 4:
      if (!(vl == 1 && v[0] == '-'))
        bad = parse_comp(v, vl, out->job, sizeof out->job);
      break;
    case 5: bad = parse_comp(v, vl, out->exe, sizeof out->exe); break;
    case 6: bad = parse_int(v, vl, 0, UINT64_MAX >> 1, &x); out->start_ns = (uint64_t)x; break;
    case 7: bad = parse_int(v, vl, 0, UINT64_MAX >> 1, &x); out->end_ns = (uint64_t)x; break;
    case 8: case 9:
      bad = have_status || parse_int(v, vl, k == 8 ? 0 : 1, k == 8 ? 255 : 127, &x);
      out->signaled = k == 9;
      out->code = (int)x;
      have_status = 1;
      break;
    }
    if (bad) {
      snprintf(why, whylen, "exit-status file: bad value for '%s'", keys[k]);
      return -1;
    }
  }
  if (!out->host[0] || !out->pid || !have_status) {
    snprintf(why, whylen, "exit-status file without %s", !out->host[0] ? "host" : !out->pid ? "pid" : "a status");
    return -1;
  }
  if (out->start_ns && out->end_ns && out->end_ns < out->start_ns) {
    snprintf(why, whylen, "exit-status file: ends before it starts");
    return -1;
  }
  return 0;
}

int nta_runexit_read(const char *path, struct nta_runexit *out, char *why, size_t whylen) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    snprintf(why, whylen, "%s", strerror(errno));
    return -1;
  }
  struct stat st;
  char buf[NTR_RUNEXIT_MAX + 1];
  size_t len = 0;
  int rc = -1;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    snprintf(why, whylen, "not a regular file");
  } else {
    ssize_t r;
    while (len < sizeof buf && ((r = read(fd, buf + len, sizeof buf - len)) > 0 || (r < 0 && errno == EINTR)))
      if (r > 0)
        len += (size_t)r;
    rc = nta_runexit_parse(buf, len, out, why, whylen);
  }
  close(fd);
  return rc;
}

/* The header's host as a file-name component, as run wrote its own. */
static void host_comp(const struct nta_proc *p, char *dst, size_t cap) {
  const char *h = p->img->hdr.host;
  size_t n = 0;
  for (; n < sizeof(p->img->hdr.host) && h[n] && n + 1 < cap; n++)
    dst[n] = is_comp(h[n]) ? h[n] : '_';
  dst[n] = 0;
}

/* Is p the process r describes (same host and pid, and alive within r's
 * window: a reused pid of another run is not)? */
static int is_proc(const struct nta_runexit *r, const struct nta_proc *p, int pid) {
  char hc[64];
  host_comp(p, hc, sizeof hc);
  if (pid != r->pid || strcmp(hc, r->host) != 0)
    return 0;
  if (r->start_ns && p->first_ns && p->first_ns + RUNEXIT_SLACK_NS < r->start_ns)
    return 0;
  return !(r->end_ns && p->first_ns && p->first_ns > r->end_ns + RUNEXIT_SLACK_NS);
}

void nta_runexit_apply(struct nta_job *job) {
  for (int i = 0; i < job->nrunexits; i++) {
    struct nta_runexit *r = &job->runexits[i];
    for (int j = 0; j < job->nprocs; j++) {
      struct nta_proc *p = &job->procs[j];
      if (is_proc(r, p, p->img->hdr.pid)) {
        r->matched = 1;
        /* Only a process that could not say how it ended: one that
         * recorded its exit or signal said it better itself. */
        if (p->fate != NTA_VANISHED && p->fate != NTA_UNKNOWN)
          continue;
        p->run = r;
        if (!r->signaled) {
          p->fate = NTA_EXITED;
          p->exit_code = r->code;
          if (!p->fate_ns)
            p->fate_ns = p->last_ns;
        } else {
          p->fate = NTA_VANISHED; /* a signal it never saw: uncatchable, or before its handler */
          p->signo = r->code;
          if (!p->fate_ns)
            p->fate_ns = p->last_ns;
        }
      } else if (is_proc(r, p, p->img->hdr.ppid)) {
        r->matched = 1;
        p->launcher = r;
      }
    }
  }
}

int nta_runexit_has_rank(const struct nta_job *job, int lrank) {
  for (int i = 0; lrank >= 0 && i < job->nrunexits; i++)
    if (job->runexits[i].rank == lrank)
      return 1;
  return 0;
}

void nta_runexit_detect(struct nta_job *job) {
  /* The evidence's time span: a status of an earlier run of the same job
   * id in the same directory is not this run's. */
  uint64_t lo = 0, hi = 0;
  for (int j = 0; j < job->nprocs; j++) {
    const struct nta_proc *p = &job->procs[j];
    if (p->first_ns && (!lo || p->first_ns < lo))
      lo = p->first_ns;
    if (p->latest_ns > hi)
      hi = p->latest_ns;
    if (p->last_ns > hi)
      hi = p->last_ns;
  }
  for (int i = 0; i < job->nrunexits; i++) {
    const struct nta_runexit *r = &job->runexits[i];
    if (r->matched)
      continue;
    if (lo && ((r->end_ns && r->end_ns + RUNEXIT_SLACK_NS < lo) || (r->start_ns && r->start_ns > hi + RUNEXIT_SLACK_NS)))
      continue;
    char who[160], status[80];
    if (r->rank >= 0)
      snprintf(who, sizeof who, "rank %d (pid %d on %s, %s)", r->rank, r->pid, r->host, r->exe[0] ? r->exe : "?");
    else
      snprintf(who, sizeof who, "pid %d on %s (%s)", r->pid, r->host, r->exe[0] ? r->exe : "?");
    if (r->signaled) {
      const char *sn = ntr_name_signal(r->code);
      snprintf(status, sizeof status, "was killed by %s (%d)", sn ? sn : "signal", r->code);
    } else {
      snprintf(status, sizeof status, "exited with ");
      nta_exit_text(r->code, status + strlen(status), sizeof status - strlen(status));
    }
    /* No ring, no dump: it never reached its first NCCL call with the
     * tracer loaded.  Exit 127 before that is the dynamic linker's. */
    const char *hint = !r->signaled && r->code == 127
                           ? "; exit 127 before any NCCL call is how the dynamic linker ends a process "
                             "('symbol lookup error', 'error while loading shared libraries')"
                           : "";
    uint64_t t = r->end_ns ? r->end_ns : r->start_ns;
    nta_event_add(job, t, r->rank, "no_evidence", "%s, started by nccltrace run, %s and left no ring or dump", who,
                  status);
    if (!r->signaled && r->code == 0)
      continue;
    struct nta_cand *k = nta_cand_add(job, r->signaled ? NTA_RANK_KILLED : NTA_RANK_EXIT, t);
    if (!k)
      continue;
    k->exit_code = r->signaled ? 0 : r->code;
    k->signo = r->signaled ? r->code : 0;
    if (r->rank >= 0)
      k->ranks[k->nranks++] = r->rank;
    snprintf(k->summary, sizeof(k->summary),
             "%s %s (seen by nccltrace run) and left no ring or dump: none of its NCCL calls is known%s", who,
             status, hint);
  }
}

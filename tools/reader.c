/* reader.c -- load ring files (live or left behind) and dispatch dumps to
 * reader_dump.c; the shared validation helpers of reader_int.h.
 *
 * Thread-safety and signal-safety: see tools/reader.h.  A live ring is
 * read with pread while its writer keeps writing (never mapped: a file
 * truncated meanwhile must not become SIGBUS): every record is taken only
 * when two successive reads of it agree (the seqlock protocol of
 * recorder/format.h, ntr_ring_read_copies), and the header is copied once and validated
 * as a copy, so a writer changing it meanwhile cannot move us past a bounds
 * check.  A dump is read with pread into memory (it never changes once in
 * place).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tools/reader.h"
#include "recorder/ring.h"
#include "tools/reader_int.h"

int ntt_fail(char *err, size_t errlen, const char *name, const char *fmt, ...) {
  if (err && errlen) {
    int n = snprintf(err, errlen, "%s: ", name ? name : "(input)");
    if (n >= 0 && (size_t)n < errlen) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
      va_end(ap);
    }
  }
  return -1;
}

#define TERMINATE(field) ((field)[sizeof(field) - 1] = '\0')

int ntt_header_sanitize(struct ntr_ring_header *h, int salvage, char *why, size_t whylen) {
  TERMINATE(h->host);
  TERMINATE(h->job_id);
  TERMINATE(h->tracer_version);
  TERMINATE(h->exe);
  TERMINATE(h->env);
  for (unsigned i = 0; i < NTR_BT_DEPTH; i++)
    TERMINATE(h->bt_sym[i]);
  if (h->bt_depth > NTR_BT_DEPTH) {
    if (!salvage) {
      snprintf(why, whylen, "backtrace depth %u exceeds %u", h->bt_depth, NTR_BT_DEPTH);
      return -1;
    }
    h->bt_depth = NTR_BT_DEPTH;
  }
  if (h->env_len > NTR_ENV_BYTES) {
    if (!salvage) {
      snprintf(why, whylen, "environment length %u exceeds %u", h->env_len, NTR_ENV_BYTES);
      return -1;
    }
    h->env_len = NTR_ENV_BYTES;
  }
  return 0;
}

static int rec_cmp(const void *a, const void *b) {
  uint64_t x = ((const struct ntr_record *)a)->commit, y = ((const struct ntr_record *)b)->commit;
  return x < y ? -1 : x > y;
}

/* What a reader fills in or clears (recorder/format.h): the fingerprint
 * (format 2 records carry 0); tsc_done without NTR_REC_COMPLETED and an
 * op record's aux, which the recorder's fast path leaves as the slot had
 * them. */
static void ntt_record_derive(struct ntr_record *r) {
  /* Only an op record's fp is derived: a graph record's is the
   * recorder's (the fingerprint of its captured calls). */
  uint32_t fp = ntr_record_fp(r);
  if (fp)
    r->fp = fp;
  if (!(r->flags & NTR_REC_COMPLETED))
    r->tsc_done = 0;
  /* A captured op's aux is its capture id (interpose/graph.c). */
  if (fp && r->phase == NTR_PHASE_CALL && !(r->flags & NTR_REC_CAPTURED))
    r->aux = 0;
}

/* The main ring and a comm's recent[] may both hold the same position; the
 * watchdog marks completion in the main-ring copy, so a completed copy wins.
 * Derived fields are filled in on the way: the fingerprint hash (format 2
 * records carry 0, recorder/format.h: ntr_record_fp). */
uint64_t ntt_records_normalize(struct ntr_record *recs, uint64_t n) {
  if (!recs || n == 0)
    return 0;
  /* Dumps are written oldest first: one pass drops duplicates of records in
   * order; only when one is out of order are they sorted (qsort moves
   * 128-byte records even when nothing is out of place) and the pass rerun. */
  for (int sorted = 0;; sorted = 1) {
    uint64_t out = 0, i = 0;
    for (; i < n; i++) {
      if (recs[i].commit == 0)
        continue;
      if (out && recs[out - 1].commit >= recs[i].commit) {
        if (recs[out - 1].commit > recs[i].commit)
          break; /* out of order */
        struct ntr_record *k = &recs[out - 1];
        if (recs[i].tsc_done > k->tsc_done || ((recs[i].flags & NTR_REC_COMPLETED) && !(k->flags & NTR_REC_COMPLETED)))
          *k = recs[i];
        continue;
      }
      if (out != i)
        recs[out] = recs[i];
      out++;
    }
    if (i == n) {
      for (uint64_t k = 0; k < out; k++)
        ntt_record_derive(&recs[k]);
      return out;
    }
    /* Out of order at i: everything before it was kept as it was, apart from
     * duplicates folded into their first copy -- the same records, so sorting
     * the kept prefix and the untouched rest gives the same result. */
    if (sorted) {
      for (uint64_t k = 0; k < out; k++)
        ntt_record_derive(&recs[k]);
      return out; /* cannot happen: sorted input has no inversion */
    }
    memmove(&recs[out], &recs[i], (size_t)(n - i) * sizeof *recs);
    n = out + (n - i);
    qsort(recs, (size_t)n, sizeof *recs, rec_cmp);
  }
}

void ntt_image_tidy(struct ntt_image *img) {
  uint32_t out = 0;
  for (uint32_t i = 0; i < img->ncomms; i++) {
    struct ntr_comm_state *c = &img->comms[i];
    /* A slot handed out but not filled yet (live ring) carries nothing. */
    if (c->comm_id == 0 && c->lifecycle == NTR_COMM_FREE)
      continue;
    if (out != i)
      memmove(&img->comms[out], c, sizeof *c);
    out++;
  }
  img->ncomms = out;
  for (uint32_t i = 0; i < img->nstacks; i++)
    if (img->stacks[i].depth > NTR_STACK_DEPTH)
      img->stacks[i].depth = NTR_STACK_DEPTH;
}

/* ---------------------------------------------------------------- rings -- */

/* Where a ring's bytes come from: a caller's buffer (ntt_image_load_mem,
 * the fuzzers), or a file read with pread.  A file is never mapped: a
 * writer that truncates it while we read would turn a mapped load into
 * SIGBUS; pread just returns fewer bytes.  Each window of a file is read
 * twice, and a record counts only when both copies agree (ntr_ring_read_copies,
 * recorder/ring.h). */
struct src {
  const unsigned char *mem; /* the whole input, or NULL: fd */
  int fd;
  size_t len;               /* input bytes, as of the start of the load */
  int shrank;               /* the file got shorter while we read it */
  unsigned char *a, *b;     /* two copies of the current window (file) */
  size_t cap;
};

/* Read n bytes at off with pread; what the file no longer holds reads as
 * zeros (an empty slot) and marks the load as cut. */
static void src_pread(struct src *s, unsigned char *dst, size_t n, uint64_t off) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(s->fd, dst + got, n - got, (off_t)(off + got));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    got += (size_t)r;
  }
  if (got < n) {
    memset(dst + got, 0, n - got);
    s->shrank = 1;
  }
}

/* n bytes at off (inside s->len, checked by the caller): *a and *b are two
 * copies read one after the other (one and the same bytes for memory).
 * @return 0, or -1 out of memory. */
static int src_window(struct src *s, uint64_t off, size_t n, const unsigned char **a, const unsigned char **b) {
  if (s->mem) {
    *a = *b = s->mem + off;
    return 0;
  }
  if (n > s->cap) {
    unsigned char *na = realloc(s->a, n), *nb = na ? realloc(s->b, n) : NULL;
    if (na)
      s->a = na;
    if (!nb)
      return -1;
    s->b = nb;
    s->cap = n;
  }
  src_pread(s, s->a, n, off);
  src_pread(s, s->b, n, off);
  *a = s->a;
  *b = s->b;
  return 0;
}

struct rec_vec {
  struct ntr_record *v;
  uint64_t n, cap;
};

static int vec_push(struct rec_vec *rv, const struct ntr_record *r) {
  if (rv->n == rv->cap) {
    uint64_t cap = rv->cap ? rv->cap * 2 : 256;
    struct ntr_record *nv = realloc(rv->v, (size_t)cap * sizeof *nv);
    if (!nv)
      return -1;
    rv->v = nv;
    rv->cap = cap;
  }
  rv->v[rv->n++] = *r;
  return 0;
}

/* A table of n entries of size bytes at off must lie inside the file the
 * header describes, 8-byte aligned (atomic loads), past the header. */
static int check_region(const struct ntr_ring_header *h, uint64_t off, uint64_t n, uint64_t size,
                        const char *what, char *why, size_t whylen) {
  if (off % 8 || off < sizeof *h || off > h->file_size || n * size > h->file_size - off) {
    snprintf(why, whylen, "%s at offset %llu (%llu x %llu bytes) lies outside the %llu-byte file the header describes",
             what, (unsigned long long)off, (unsigned long long)n, (unsigned long long)size,
             (unsigned long long)h->file_size);
    return -1;
  }
  return 0;
}

static int overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen) {
  return alen && blen && a < b + blen && b < a + alen;
}

static int validate_ring_header(struct ntr_ring_header *h, size_t len, int salvage,
                                char *why, size_t whylen) {
  if (h->header_size != sizeof *h) {
    snprintf(why, whylen, "header_size %u, this nccltrace expects %zu", h->header_size, sizeof *h);
    return -1;
  }
  if (h->record_size != sizeof(struct ntr_record)) {
    snprintf(why, whylen, "record_size %u, expected %zu", h->record_size, sizeof(struct ntr_record));
    return -1;
  }
  if (h->slot_count == 0 || (h->slot_count & (h->slot_count - 1)) || h->slot_count > NTT_MAX_SLOTS) {
    snprintf(why, whylen, "slot_count %u is not a power of two up to %u", h->slot_count, NTT_MAX_SLOTS);
    return -1;
  }
  if (h->comm_recent != NTR_COMM_RECENT || h->stack_depth != NTR_STACK_DEPTH) {
    snprintf(why, whylen, "comm_recent %u / stack_depth %u, this nccltrace reads %u / %u",
             h->comm_recent, h->stack_depth, NTR_COMM_RECENT, NTR_STACK_DEPTH);
    return -1;
  }
  if (h->comm_max > 64 * NTR_COMM_MAX || h->stack_max > NTT_MAX_STACKS) {
    snprintf(why, whylen, "comm_max %u / stack_max %u out of range", h->comm_max, h->stack_max);
    return -1;
  }
  /* Not an error: a live writer's fetch-add on a full table passes the max
   * for a moment before it stores the max back (recorder/ring.c). */
  if (h->comm_count > h->comm_max)
    h->comm_count = h->comm_max;
  if (h->stack_count > h->stack_max)
    h->stack_count = h->stack_max;
  uint64_t clen = (uint64_t)h->comm_max * sizeof(struct ntr_comm_state);
  uint64_t slen = (uint64_t)h->stack_max * sizeof(struct ntr_stack);
  uint64_t rlen = (uint64_t)h->slot_count * sizeof(struct ntr_record);
  if (check_region(h, h->comm_offset, h->comm_max, sizeof(struct ntr_comm_state), "comm table", why, whylen) ||
      check_region(h, h->stack_offset, h->stack_max, sizeof(struct ntr_stack), "stack table", why, whylen) ||
      check_region(h, h->slot_offset, h->slot_count, sizeof(struct ntr_record), "record slots", why, whylen))
    return -1;
  if (overlap(h->comm_offset, clen, h->stack_offset, slen) || overlap(h->comm_offset, clen, h->slot_offset, rlen) ||
      overlap(h->stack_offset, slen, h->slot_offset, rlen)) {
    snprintf(why, whylen, "comm table, stack table and record slots overlap");
    return -1;
  }
  if (h->file_size > len && !salvage) {
    snprintf(why, whylen, "truncated: header says %llu bytes, file has %zu",
             (unsigned long long)h->file_size, len);
    return -1;
  }
  return ntt_header_sanitize(h, salvage, why, whylen);
}

/* Records per window of the slot array (two copies of 512 KiB). */
#define NTT_WIN_SLOTS 4096u

static int load_ring(struct src *in, const char *name, int salvage, struct ntt_image *img, char *err,
                     size_t errlen) {
  struct ntr_ring_header *h = &img->hdr;
  size_t len = in->len;
  char why[256];
  if (len < sizeof *h)
    return ntt_fail(err, errlen, name, "truncated: a ring header needs %zu bytes, file has %zu", sizeof *h, len);
  /* Copied once, then validated as a copy: a writer changing it meanwhile
   * cannot move us past a bounds check. */
  if (in->mem)
    memcpy(h, in->mem, sizeof *h);
  else
    src_pread(in, (unsigned char *)h, sizeof *h, 0);
  if (validate_ring_header(h, len, salvage, why, sizeof why))
    return ntt_fail(err, errlen, name, "%s", why);
  if (h->file_size > len)
    img->salvaged = 1;

  /* With --salvage on a short file, only what lies wholly inside it is read. */
  uint32_t ncomm = 0, nstack = 0;
  while (ncomm < h->comm_count && h->comm_offset + (uint64_t)(ncomm + 1) * sizeof(struct ntr_comm_state) <= len)
    ncomm++;
  while (nstack < h->stack_count && h->stack_offset + (uint64_t)(nstack + 1) * sizeof(struct ntr_stack) <= len)
    nstack++;
  if (ncomm) {
    img->comms = calloc(ncomm, sizeof *img->comms);
    if (!img->comms)
      return ntt_fail(err, errlen, name, "out of memory for %u communicators", ncomm);
  }
  if (nstack) {
    img->stacks = calloc(nstack, sizeof *img->stacks);
    if (!img->stacks)
      return ntt_fail(err, errlen, name, "out of memory for %u stacks", nstack);
    const unsigned char *a, *b;
    if (src_window(in, h->stack_offset, (size_t)nstack * sizeof *img->stacks, &a, &b))
      return ntt_fail(err, errlen, name, "out of memory for %u stacks", nstack);
    memcpy(img->stacks, b, (size_t)nstack * sizeof *img->stacks);
  }
  img->nstacks = nstack;
  size_t nstr = ntt_ring_strings_span(h, len);
  if (nstr) {
    const unsigned char *a, *b;
    if (src_window(in, h->str_offset, nstr, &a, &b) || ntt_ring_strings(img, b, nstr))
      return ntt_fail(err, errlen, name, "out of memory for the string table");
  }

  struct rec_vec rv = {0};
  struct ntr_record r;
  uint64_t mask = h->slot_count - 1;
  /* Room for every slot and recent[] copy at once, as many as the bytes
   * present can hold (a salvaged header may claim more): no regrowing. */
  uint64_t fit = h->slot_offset < len ? (len - h->slot_offset) / sizeof r : 0;
  uint64_t nslots = fit < h->slot_count ? fit : h->slot_count;
  uint64_t want = nslots + (uint64_t)ncomm * NTR_COMM_RECENT;
  if ((rv.v = malloc((size_t)want * sizeof *rv.v)) != NULL)
    rv.cap = want;
  for (uint32_t i = 0; i < ncomm; i++) {
    const unsigned char *a, *b;
    if (src_window(in, h->comm_offset + (uint64_t)i * sizeof(struct ntr_comm_state), sizeof(struct ntr_comm_state),
                   &a, &b))
      goto oom;
    struct ntr_comm_state *c = &img->comms[i];
    memcpy(c, b, offsetof(struct ntr_comm_state, recent));
    for (unsigned j = 0; j < NTR_COMM_RECENT; j++) {
      size_t at = offsetof(struct ntr_comm_state, recent) + j * sizeof r;
      enum ntr_slot_state st = ntr_ring_read_copies(a + at, b + at, &r);
      if (st == NTR_SLOT_TORN)
        img->torn++;
      if (st != NTR_SLOT_VALID) {
        memset(&c->recent[j], 0, sizeof r);
        continue;
      }
      c->recent[j] = r;
      if (vec_push(&rv, &r))
        goto oom;
    }
  }
  img->ncomms = ncomm;

  for (uint64_t w = 0; w < nslots; w += NTT_WIN_SLOTS) {
    uint64_t k = nslots - w < NTT_WIN_SLOTS ? nslots - w : NTT_WIN_SLOTS;
    const unsigned char *a, *b;
    if (src_window(in, h->slot_offset + w * sizeof r, (size_t)k * sizeof r, &a, &b))
      goto oom;
    for (uint64_t j = 0; j < k; j++) {
      uint64_t i = w + j;
      enum ntr_slot_state st = ntr_ring_read_copies(a + j * sizeof r, b + j * sizeof r, &r);
      /* EMPTY: never written (a position reserved and not used is no damage:
       * ring.h, holes and fillers); TORN: claimed and not committed, or torn
       * while we copied. */
      if (st == NTR_SLOT_TORN)
        img->torn++;
      if (st != NTR_SLOT_VALID || r.kind == NTR_KIND_NONE)
        continue; /* a filler carries nothing */
      if (((r.commit - 1) & mask) != i) {
        img->torn++; /* a position that does not belong in this slot: damage */
        continue;
      }
      if (vec_push(&rv, &r))
        goto oom;
    }
  }
  if (in->shrank)
    img->salvaged = 1; /* the file was cut while we read it: what was there */
  img->recs = rv.v;
  img->nrecs = ntt_records_normalize(rv.v, rv.n);
  img->lost = h->head > h->slot_count ? h->head - h->slot_count : 0;
  ntt_image_tidy(img);
  return 0;
oom:
  free(rv.v);
  return ntt_fail(err, errlen, name, "out of memory for %llu records", (unsigned long long)rv.n);
}

/* ------------------------------------------------------------ liveness -- */

/* Process start in realtime ns from /proc, 0 when unknown. */
static uint64_t proc_start_real_ns(int pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')'); /* comm may contain spaces and parentheses */
  if (!p)
    return 0;
  unsigned long long start = 0;
  /* After ")": field 3 (state) ... field 22 (starttime) = the 20th token. */
  char *save = NULL, *tok = strtok_r(p + 1, " ", &save);
  for (int i = 1; tok && i < 20; i++)
    tok = strtok_r(NULL, " ", &save);
  if (!tok)
    return 0;
  start = strtoull(tok, NULL, 10);
  f = fopen("/proc/stat", "r");
  if (!f)
    return 0;
  unsigned long long btime = 0;
  while (fgets(buf, sizeof buf, f))
    if (sscanf(buf, "btime %llu", &btime) == 1)
      break;
  fclose(f);
  long tck = sysconf(_SC_CLK_TCK);
  if (!btime || tck <= 0)
    return 0;
  return btime * 1000000000ull + start * (1000000000ull / (unsigned long long)tck);
}

static int ring_pid_alive(const struct ntr_ring_header *h) {
  /* Compared as the recorder stores it: at most 63 bytes. */
  char host[sizeof h->host] = "";
  if (gethostname(host, sizeof host) != 0)
    return 0;
  host[sizeof host - 1] = '\0';
  if (strcmp(host, h->host) != 0)
    return 0;
  if (h->pid <= 0)
    return 0;
  /* After a successful exec the pid lives on in another program image,
   * which writes a ring of its own: this one has no writer any more. */
  if (h->proc_state == NTR_PROC_EXEC)
    return 0;
  if (kill(h->pid, 0) != 0 && errno != EPERM)
    return 0;
  /* A recycled pid: the ring is written after its process starts, so a
   * process that started well after the ring's clock base is someone else. */
  uint64_t start = proc_start_real_ns(h->pid);
  if (start && h->real_base_ns && start > h->real_base_ns + 5000000000ull)
    return 0;
  return 1;
}

/* ---------------------------------------------------------- entry points -- */

static __thread struct {
  dev_t dev;
  ino_t ino;
  int on;
} expect;

void ntt_input_expect(dev_t dev, ino_t ino, int on) {
  expect.dev = dev;
  expect.ino = ino;
  expect.on = on;
}

int ntt_open_input(const char *path, struct stat *st, char *err, size_t errlen) {
  /* O_NONBLOCK: opening a FIFO (or a device) must not wait for a writer;
   * whatever is not a regular file is refused before anything is read. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0)
    return ntt_fail(err, errlen, path, "%s", strerror(errno));
  if (fstat(fd, st) != 0) {
    int e = errno;
    close(fd);
    return ntt_fail(err, errlen, path, "%s", strerror(e));
  }
  if (expect.on && S_ISREG(st->st_mode) && (st->st_dev != expect.dev || st->st_ino != expect.ino)) {
    close(fd);
    return ntt_fail(err, errlen, path, "replaced since it was listed (another file under its name): refused");
  }
  if (!S_ISREG(st->st_mode)) {
    close(fd);
    return ntt_fail(err, errlen, path, "%s",
                    S_ISDIR(st->st_mode)    ? "is a directory"
                    : S_ISFIFO(st->st_mode) ? "not a regular file (a FIFO): refused"
                    : S_ISSOCK(st->st_mode) ? "not a regular file (a socket): refused"
                                            : "not a regular file (a device): refused");
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0)
    (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

/* Why a file whose first 8 bytes are neither magic is refused: a zstd
 * frame (or skippable frame) is named, since a *.zst of another program
 * (a dataset shard) is the usual stranger in a dump directory. */
static const char *not_ours(const unsigned char *b) {
  if (memcmp(b, "\x28\xb5\x2f\xfd", 4) == 0)
    return "not a nccltrace dump: a zstd frame of another program (a dump starts with the nccltrace preamble)";
  if ((b[0] & 0xf0) == 0x50 && memcmp(b + 1, "\x2a\x4d\x18", 3) == 0)
    return "not a nccltrace dump: a zstd skippable frame of another program";
  return "bad magic: not a nccltrace ring file or dump";
}

/* Magic and version of the input's first 12 bytes (len >= 12). */
static int check_magic(const unsigned char *b, size_t len, const char *name, int *dump, char *err, size_t errlen) {
  if (len < 8)
    return ntt_fail(err, errlen, name, "too short (%zu bytes) to be a ring file or a dump", len);
  int ring = memcmp(b, NTR_RING_MAGIC, 8) == 0;
  *dump = memcmp(b, NTR_DUMP_MAGIC, 8) == 0;
  if (!ring && !*dump)
    return ntt_fail(err, errlen, name, "%s", not_ours(b));
  if (len < 12)
    return ntt_fail(err, errlen, name, "truncated: file has %zu bytes, no format version", len);
  uint32_t version;
  memcpy(&version, b + 8, sizeof version);
  if (version != NTR_FORMAT_VERSION)
    return ntt_fail(err, errlen, name, "unsupported format version %u (this nccltrace reads %u)", version,
                    NTR_FORMAT_VERSION);
  return 0;
}

static int load_path(const char *path, int salvage, struct ntt_image *img, struct ntt_loadbuf *lb, int *borrowed,
                     char *err, size_t errlen);

static void image_init(struct ntt_image *img, const char *name) {
  memset(img, 0, sizeof *img);
  snprintf(img->path, sizeof img->path, "%s", name ? name : "");
}

int ntt_image_load_mem(const void *buf, size_t len, const char *name, int salvage,
                       struct ntt_image *img, char *err, size_t errlen) {
  image_init(img, name);
  if (!buf && len)
    return ntt_fail(err, errlen, name, "no data");
  int dump = 0;
  int rc = check_magic(buf, len, name, &dump, err, errlen);
  if (rc == 0) {
    img->is_dump = dump;
    struct src in = {.mem = buf, .fd = -1, .len = len};
    rc = dump ? ntt_load_dump(buf, len, name, salvage, img, NULL, NULL, err, errlen)
              : load_ring(&in, name, salvage, img, err, errlen);
  }
  if (rc)
    ntt_image_free(img);
  return rc;
}

int ntt_image_load(const char *path, int salvage, struct ntt_image *img, char *err, size_t errlen) {
  return load_path(path, salvage, img, NULL, NULL, err, errlen);
}

int ntt_image_load_buf(const char *path, struct ntt_image *img, struct ntt_loadbuf *lb, int *borrowed, char *err,
                       size_t errlen) {
  *borrowed = 0;
  return load_path(path, 0, img, lb, borrowed, err, errlen);
}

void ntt_loadbuf_free(struct ntt_loadbuf *lb) {
  free(lb->p);
  lb->p = NULL;
  lb->cap = 0;
}

static int load_path(const char *path, int salvage, struct ntt_image *img, struct ntt_loadbuf *lb, int *borrowed,
                     char *err, size_t errlen) {
  image_init(img, path);
  struct stat st;
  int fd = ntt_open_input(path, &st, err, errlen);
  if (fd < 0)
    return -1;
  if (st.st_size == 0) {
    close(fd);
    return ntt_fail(err, errlen, path, "empty file");
  }
  size_t len = (size_t)st.st_size;
  unsigned char magic[12];
  ssize_t m = pread(fd, magic, sizeof magic, 0);
  int dump = 0;
  if (check_magic(magic, m > 0 ? (size_t)m : 0, path, &dump, err, errlen)) {
    close(fd);
    return -1;
  }
  img->is_dump = dump;
  int rc;
  if (dump) {
    /* A dump is read into memory: it never changes once renamed into
     * place, and the reader checks every length against what was read. */
    if (len > NTT_READ_MAX) {
      close(fd);
      return ntt_fail(err, errlen, path, "a %zu-byte dump exceeds the %llu-byte limit", len,
                      (unsigned long long)NTT_READ_MAX);
    }
    unsigned char *buf = malloc(len);
    size_t got = 0;
    while (buf && got < len) {
      ssize_t r = pread(fd, buf + got, len - got, (off_t)got);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        break;
      got += (size_t)r;
    }
    close(fd);
    if (!buf)
      return ntt_fail(err, errlen, path, "out of memory reading %zu bytes", len);
    rc = ntt_load_dump(buf, got, path, salvage, img, lb, borrowed, err, errlen);
    free(buf);
  } else {
    struct src in = {.fd = fd, .len = len};
    rc = load_ring(&in, path, salvage, img, err, errlen);
    free(in.a);
    free(in.b);
    close(fd);
  }
  if (rc) {
    ntt_image_free(img); /* never borrowed: a failed load lends nothing */
    return rc;
  }
  if (!img->is_dump)
    img->pid_alive = ring_pid_alive(&img->hdr);
  return 0;
}

void ntt_image_free(struct ntt_image *img) {
  if (!img)
    return;
  free(img->comms);
  free(img->stacks);
  ntt_python_free(img);
  free(img->recs);
  img->comms = NULL;
  img->stacks = NULL;
  img->recs = NULL;
  img->ncomms = img->nstacks = 0;
  img->nrecs = 0;
}

int ntt_image_peek(const char *path, struct ntr_ring_header *hdr, char *err, size_t errlen) {
  uint64_t need;
  return ntt_image_probe(path, hdr, &need, err, errlen);
}

int ntt_image_probe(const char *path, struct ntr_ring_header *hdr, uint64_t *need, char *err, size_t errlen) {
  memset(hdr, 0, sizeof *hdr);
  struct stat st;
  int fd = ntt_open_input(path, &st, err, errlen);
  if (fd < 0)
    return -1;
  /* Until the header says more: what reading the file itself takes. */
  *need = (uint64_t)st.st_size;
  if (st.st_size < 12) {
    close(fd);
    return ntt_fail(err, errlen, path, "not a ring file or dump");
  }
  size_t len = (size_t)st.st_size;
  /* The header sits in the first few KiB (of a dump's frame: its first
   * block); read more only when that was not enough. */
  size_t want = len < (64u << 10) ? len : (64u << 10);
  unsigned char *buf = NULL;
  ssize_t got = 0;
  int rc = -1;
  char why[256] = "bad magic: not a nccltrace ring file or dump";
  for (;;) {
    unsigned char *nb = realloc(buf, want);
    if (!nb) {
      snprintf(why, sizeof why, "out of memory");
      break;
    }
    buf = nb;
    got = pread(fd, buf, want, 0);
    if (got < 12) {
      snprintf(why, sizeof why, "cannot read: %s", got < 0 ? strerror(errno) : "too short");
      break;
    }
    if (memcmp(buf, NTR_DUMP_MAGIC, 8) == 0) {
      rc = ntt_peek_dump(buf, (size_t)got, hdr, why, sizeof why);
      struct ntr_dump_preamble pre;
      memcpy(&pre, buf, sizeof pre < (size_t)got ? sizeof pre : (size_t)got);
      /* A load reads the file into memory, then decompresses no more
       * than the header's geometry allows (ntt_dump_max_payload); the
       * whole-payload path (damage, --salvage) holds the payload and its
       * sections' copies at once: twice that. */
      if (rc == 0 && (size_t)got >= sizeof pre) {
        uint64_t pl = pre.payload_size, max = ntt_dump_max_payload(hdr);
        *need = len + 2 * (pl < max ? pl : max);
      }
    } else if (memcmp(buf, NTR_RING_MAGIC, 8) == 0 && (size_t)got >= sizeof *hdr) {
      /* A live writer may be updating it: copy once, then look at the copy. */
      memcpy(hdr, buf, sizeof *hdr);
      rc = ntt_header_sanitize(hdr, 1, why, sizeof why);
      /* Two windows of slots and the records kept (at most the file). */
      *need = 2 * len + 2 * NTT_WIN_SLOTS * sizeof(struct ntr_record);
    }
    /* Neither magic: not ours, whatever follows (a dataset shard of
     * gigabytes named *.zst).  Nothing more is read, and a load reads no
     * more than its magic: that is all it may take. */
    if (memcmp(buf, NTR_DUMP_MAGIC, 8) != 0 && memcmp(buf, NTR_RING_MAGIC, 8) != 0) {
      *need = 64u << 10;
      snprintf(why, sizeof why, "%s", not_ours(buf));
      break;
    }
    if (rc == 0 || want >= len || want >= NTT_PEEK_MAX)
      break;
    want = len < NTT_PEEK_MAX ? len : NTT_PEEK_MAX;
  }
  close(fd);
  free(buf);
  return rc ? ntt_fail(err, errlen, path, "%s", why) : 0;
}

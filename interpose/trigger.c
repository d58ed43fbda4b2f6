/* trigger.c -- every dump of the interposer goes through nti_dump_now.
 *
 * Thread-safety: any thread; the dump writer lets one dump run at a time
 * (-EBUSY for a concurrent one).
 * Signal-safety: nti_dump_now is async-signal-safe: it builds the trigger
 * with plain stores, writes one ring record, calls ntr_dump_write (signal-
 * safe once ntr_dump_init ran: preallocated buffers, open/write/rename) and
 * prints with one write(2) (messages built with ntr_sb, recorder/util.h).
 */
#include <time.h>

#include "interpose/config.h"
#include "interpose/dump_rate.h"
#include "interpose/nti.h"
#include "interpose/record.h"
#include "interpose/trigger.h"
#include "interpose/errfile.h"
#include "recorder/dump.h"
#include "recorder/names.h"
#include "recorder/util.h"

/* Dumps per trigger kind are budgeted (dump_rate.h): a storm of verdicts
 * or signals must not fill the disk or keep a core compressing. */
static struct nti_rate dump_rate;

static const char *trig_name(int kind) {
  const char *n = ntr_name_trigger((unsigned)kind);
  return n ? n : "unknown";
}

/* The reason cut to the trigger's field: when it does not fit, it ends in
 * "..." and every parenthesis it opened is closed, so a cut text still
 * reads as one (a lost-peer reason is longer than the field).
 * Async-signal-safe: loops over the bytes only. */
static void reason_fit(char *dst, size_t cap, const char *s) {
  struct ntr_sb sb;
  ntr_sb_init(&sb, dst, cap);
  ntr_sb_str(&sb, s);
  if (!sb.overflow || cap < 8)
    return;
  for (;;) {
    int open = 0;
    for (size_t i = 0; i < sb.len; i++)
      open += dst[i] == '(' ? 1 : dst[i] == ')' ? -1 : 0;
    if (open < 0)
      open = 0;
    if (sb.len + 3 + (size_t)open + 1 <= cap) {
      ntr_sb_str(&sb, "...");
      while (open-- > 0)
        ntr_sb_str(&sb, ")");
      return;
    }
    dst[--sb.len] = 0;
  }
}

/* Over budget: a Note in the ring counts it (aux = refused so far), and the
 * first refusal of a kind says so in one line.  Signal-safe: plain stores,
 * one write(2). */
static int over_budget(int trigger_kind) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts); /* async-signal-safe (POSIX) */
  uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec, count = 0;
  int first = 0;
  if (nti_rate_take(&dump_rate, (unsigned)trigger_kind, now, &count, &first))
    return 0;
  nti_record_event(NTR_KIND_NOTE, NULL, "dump-limited", count, (uint64_t)trigger_kind, 0);
  if (first) {
    char line[256];
    struct ntr_sb sb;
    ntr_sb_init(&sb, line, sizeof line);
    ntr_sb_str(&sb, "nccltrace: more than ");
    ntr_sb_u64(&sb, NTI_RATE_BURST);
    ntr_sb_str(&sb, " dumps for trigger ");
    ntr_sb_str(&sb, trig_name(trigger_kind));
    ntr_sb_str(&sb, " at once: further ones are skipped (at most one per ");
    ntr_sb_u64(&sb, NTI_RATE_PERIOD_NS / 1000000000ull);
    ntr_sb_str(&sb, " s; each skip is a dump-limited Note in the ring)\n");
    nti_say_raw(line);
  }
  return 1;
}

/* The totals (NCCLTRACE_MAX_DUMPS written by this process,
 * NCCLTRACE_DIR_MAX_DUMPS files in the dump directory): past either, only
 * the final dumps (exit, fatal and terminating signals, collect: the kinds
 * dump_rate.h never limits) are written, so a job that keeps finding things
 * (a verdict storm over hours, many ranks restarted into one directory)
 * cannot fill the file system.  A skip is a dump-capped Note in the ring
 * (aux = the trigger kind); the first of each cap says so in one line.
 * Signal-safe: atomics, getdents64, one write(2). */
static uint64_t dumps_written; /* atomic */
static int said_cap[2];        /* atomic */

static int over_cap(int trigger_kind) {
  if (!nti_rate_limited_kind((unsigned)trigger_kind))
    return 0;
  int which = -1;
  long n = (long)__atomic_load_n(&dumps_written, __ATOMIC_RELAXED);
  if (n >= (long)nti_cfg.max_dumps) {
    which = 0;
  } else if (nti_cfg.dir_max_dumps) {
    n = ntr_dump_dir_count((long)nti_cfg.dir_max_dumps);
    if (n >= (long)nti_cfg.dir_max_dumps)
      which = 1;
  }
  if (which < 0)
    return 0;
  nti_record_event(NTR_KIND_NOTE, NULL, "dump-capped", (uint64_t)n, (uint64_t)trigger_kind, 0);
  if (!__atomic_exchange_n(&said_cap[which], 1, __ATOMIC_RELAXED)) {
    char line[512];
    struct ntr_sb sb;
    ntr_sb_init(&sb, line, sizeof line);
    if (which == 0) {
      ntr_sb_str(&sb, "nccltrace: NCCLTRACE_MAX_DUMPS=");
      ntr_sb_u64(&sb, nti_cfg.max_dumps);
      ntr_sb_str(&sb, " dumps written by this process");
    } else {
      ntr_sb_str(&sb, "nccltrace: ");
      ntr_sb_u64(&sb, (uint64_t)n);
      ntr_sb_str(&sb, " dumps in ");
      ntr_sb_str(&sb, ntr_dump_dir());
      ntr_sb_str(&sb, " (NCCLTRACE_DIR_MAX_DUMPS=");
      ntr_sb_u64(&sb, nti_cfg.dir_max_dumps);
      ntr_sb_str(&sb, ")");
    }
    ntr_sb_str(&sb, ": further dumps are skipped, the exit and fatal-signal dumps apart (each skip is a "
                    "dump-capped Note in the ring)\n");
    nti_say_raw(line);
  }
  return 1;
}

void nti_trigger_fork_child(void) {
  dumps_written = 0;
  said_cap[0] = said_cap[1] = 0;
}

/* What a failed dump's errno usually means for the directory (the line
 * then says what to do).  Async-signal-safe: constant strings. */
static const char *dump_fail_hint(int e) {
  switch (e) {
  case ENOENT: return ": the directory is gone and cannot be made again";
  case ENOTDIR: return ": a part of the path is not a directory";
  case EACCES:
  case EPERM: return ": this user may not write there";
  case EROFS: return ": the file system is read-only";
  case ENOSPC:
  case EDQUOT: return ": the file system (or the quota) is full";
  case ENAMETOOLONG: return ": the path is too long";
  default: return "";
  }
}

static int dump_now(int trigger_kind, int signo, int exit_code, const char *reason, char *path,
                    size_t path_cap);

int nti_dump_now(int trigger_kind, int signo, int exit_code, const char *reason) {
  char path[512];
  path[0] = 0;
  int rc = dump_now(trigger_kind, signo, exit_code, reason, path, sizeof path);
  /* torchelastic's error file (errfile.h): the first cause a live report
   * gave, written when the rank ends badly. */
  if (trigger_kind == NTR_TRIG_MISMATCH || trigger_kind == NTR_TRIG_PEER_LOST)
    nti_errfile_cause(reason ? reason : trig_name(trigger_kind), rc == 0 ? path : "");
  else if (trigger_kind == NTR_TRIG_SIGNAL || (trigger_kind == NTR_TRIG_EXIT && exit_code != 0))
    nti_errfile_write(signo, exit_code);
  return rc;
}

static int dump_now(int trigger_kind, int signo, int exit_code, const char *reason, char *path,
                    size_t path_cap) {
  if (!nti_active() || !nti_proc.dump_ready)
    return -ENODEV;
  if (over_cap(trigger_kind) || over_budget(trigger_kind))
    return -EAGAIN;
  struct ntr_trigger t;
  memset(&t, 0, sizeof t);
  t.kind = (uint32_t)trigger_kind;
  t.signo = signo;
  t.exit_code = exit_code;
  t.tsc = ntr_clock_now();
  t.lost = ntr_ring_lost(&nti_proc.ring);
  reason_fit(t.reason, sizeof t.reason, reason ? reason : trig_name(trigger_kind));
  nti_comm_seq_sync_all(); /* the comm states the dump copies show every op issued */
  int rc = ntr_dump_write(&nti_proc.ring, &t, path, path_cap);
  char line[768];
  struct ntr_sb sb;
  ntr_sb_init(&sb, line, sizeof line);
  ntr_sb_str(&sb, "nccltrace: ");
  if (rc == 0) {
    /* Only once the file is renamed into place: a dump cut short (SIGKILL
     * mid-write leaves its .tmp) or failed is never "written" in the ring.
     * The dump itself therefore does not list its own Dump record; its
     * trigger block says what it is. */
    nti_record_event(NTR_KIND_DUMP, NULL, trig_name(trigger_kind), 0, (uint64_t)trigger_kind, 0);
    __atomic_add_fetch(&nti_proc.ring.hdr->dumps_written, 1, __ATOMIC_RELAXED); /* lock-free: signal-safe */
    __atomic_add_fetch(&dumps_written, 1, __ATOMIC_RELAXED);
    ntr_sb_str(&sb, "dump written: ");
    ntr_sb_str(&sb, path);
  } else if (rc == -EBUSY) {
    /* Another thread is dumping right now; its dump covers this moment. */
    return rc;
  } else {
    ntr_sb_str(&sb, "dump failed in ");
    ntr_sb_str(&sb, ntr_dump_dir());
    ntr_sb_str(&sb, ": ");
    ntr_sb_errno(&sb, rc);
    ntr_sb_str(&sb, " (errno ");
    ntr_sb_u64(&sb, (uint64_t)(rc < 0 ? -(int64_t)rc : rc));
    ntr_sb_str(&sb, ")");
    ntr_sb_str(&sb, dump_fail_hint(rc < 0 ? -rc : rc));
    ntr_sb_str(&sb, "; set NCCLTRACE_DIR (nccltrace run --dir) to a directory this user can write, with room");
  }
  ntr_sb_str(&sb, " (");
  ntr_sb_str(&sb, t.reason);
  ntr_sb_str(&sb, ")\n");
  nti_say_raw(line);
  return rc;
}

/* trigger.c -- every dump of the interposer goes through nti_dump_now.
 *
 * Thread-safety: any thread; the dump writer lets one dump run at a time
 * (-EBUSY for a concurrent one).
 * Signal-safety: nti_dump_now is async-signal-safe: it builds the trigger
 * with plain stores, writes one ring record, calls ntr_dump_write (signal-
 * safe once ntr_dump_init ran: preallocated buffers, open/write/rename) and
 * prints with one write(2).  nti_trigger_dump adds nothing unsafe either,
 * but is documented as not signal-safe so its callers keep that freedom.
 */
#include "interpose/nti.h"
#include "interpose/trigger.h"
#include "recorder/dump.h"

static const char *trig_name(int kind) {
  const char *n = ntr_trigger_name((unsigned)kind);
  return n ? n : "unknown";
}

/* strlcat without libc's locale-free guarantees in doubt: plain loop. */
static size_t cat(char *dst, size_t len, size_t cap, const char *s) {
  while (s && *s && len + 1 < cap)
    dst[len++] = *s++;
  dst[len] = 0;
  return len;
}

static void errno_text(char *buf, size_t cap, int e) {
  /* Decimal by hand: snprintf is not async-signal-safe. */
  char tmp[16];
  int n = 0;
  unsigned v = (unsigned)(e < 0 ? -e : e);
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v && n < 15);
  size_t i = 0;
  while (n && i + 1 < cap)
    buf[i++] = tmp[--n];
  buf[i] = 0;
}

int nti_dump_now(int trigger_kind, int signo, int exit_code, const char *reason) {
  if (!nti_active() || !nti_g.dump_ready)
    return -ENODEV;
  struct ntr_trigger t;
  memset(&t, 0, sizeof t);
  t.kind = (uint32_t)trigger_kind;
  t.signo = signo;
  t.exit_code = exit_code;
  t.tsc = ntr_clock_now();
  t.lost = ntr_ring_lost(&nti_g.ring);
  cat(t.reason, 0, sizeof t.reason, reason ? reason : trig_name(trigger_kind));
  nti_record_event(NTR_KIND_DUMP, NULL, trig_name(trigger_kind), 0, (uint64_t)trigger_kind, 0);
  char path[512];
  path[0] = 0;
  int rc = ntr_dump_write(&nti_g.ring, &t, path, sizeof path);
  char line[768];
  size_t n = cat(line, 0, sizeof line, "nccltrace: ");
  if (rc == 0) {
    n = cat(line, n, sizeof line, "dump written: ");
    n = cat(line, n, sizeof line, path);
  } else if (rc == -EBUSY) {
    /* Another thread is dumping right now; its dump covers this moment. */
    return rc;
  } else {
    char num[16];
    errno_text(num, sizeof num, rc);
    n = cat(line, n, sizeof line, "dump failed (errno ");
    n = cat(line, n, sizeof line, num);
    n = cat(line, n, sizeof line, ") in ");
    n = cat(line, n, sizeof line, ntr_dump_dir());
  }
  n = cat(line, n, sizeof line, " (");
  n = cat(line, n, sizeof line, t.reason);
  n = cat(line, n, sizeof line, ")\n");
  nti_say_raw(line);
  return rc;
}

int nti_trigger_dump(int trigger_kind, const char *reason) {
  return nti_dump_now(trigger_kind, 0, 0, reason);
}

/* say_route.c -- where the tracer's lines go when fd 2 is no longer the
 * stderr the process started with (recorder/diag.h): an application that
 * closed stderr and opened a file of its own as fd 2 never gets them.
 *
 * Each such line becomes a Note record in the ring (text: the head of the
 * message, count: the line's length, aux: 1 when the log file took it) and
 * is appended to nccltrace-<job>-<host>-<pid>.log in the dump directory
 * (ntr_dump_log).  Before the ring exists such a line is dropped.
 *
 * Thread-safety: any thread (a record per line from the ring's shared
 * reservation; the log file opened, written and closed per line).
 * Signal-safety: async-signal-safe: nti_record_event and ntr_dump_log are;
 * the record takes one position of the ring by itself (nti_tls.internal
 * >= 2, record.h), never the interrupted thread's block.
 */
#include "interpose/nti.h"
#include "interpose/record.h"
#include "recorder/diag.h"
#include "recorder/dump.h"

static void route(const char *line, size_t len) {
  if (!nti_active())
    return;
  int logged = nti_proc.dump_ready && ntr_dump_log(nti_proc.ring.hdr, line, len) == 0;
  static const char prefix[] = "nccltrace: ";
  size_t skip = len >= sizeof prefix - 1 && !memcmp(line, prefix, sizeof prefix - 1) ? sizeof prefix - 1 : 0;
  char head[32];
  size_t n = 0;
  for (; n < sizeof head - 1 && skip + n < len && line[skip + n] != '\n'; n++)
    head[n] = line[skip + n];
  head[n] = 0;
  nti_tls.internal += 2;
  nti_record_event(NTR_KIND_NOTE, NULL, head, len, (uint64_t)logged, 0);
  nti_tls.internal -= 2;
}

void nti_say_route_on(void) { ntr_diag_set_route(route); }

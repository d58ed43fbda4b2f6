/* progress.c -- the progress line of `analyze` and `export` over many files
 * (ntt.h "progress line").  On a terminal only: a pipe, a file or a CI log
 * gets nothing, so scripts and captured output never see it.  The line is
 * rewritten in place with '\r' and erased with spaces (no escape sequence:
 * every terminal, TERM=dumb too), at most ten times a second, and always
 * erased before anything else is printed.
 *
 * Thread-safety: one struct ntt_progress per loop, touched by one thread
 * (the caller); other threads only count into the done counter the caller
 * passes.  Not signal-safe (stdio).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "tools/ntt.h"

#define NTT_PROGRESS_EVERY_NS 100000000ull /* 10 updates a second */

static uint64_t mono_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

void ntt_progress_begin(struct ntt_progress *p, const char *what, const char *unit, int total) {
  memset(p, 0, sizeof *p);
  p->on = total >= NTT_PROGRESS_MIN && isatty(STDERR_FILENO);
  p->total = total;
  snprintf(p->what, sizeof p->what, "%s", what);
  snprintf(p->unit, sizeof p->unit, "%s", unit);
  ntt_progress_show(p, 0);
}

void ntt_progress_show(struct ntt_progress *p, int done) {
  if (!p->on)
    return;
  uint64_t now = mono_ns();
  if (p->shown && done != p->total && now - p->last_ns < NTT_PROGRESS_EVERY_NS)
    return;
  p->last_ns = now;
  char line[160];
  int n = snprintf(line, sizeof line, "nccltrace: %s %d/%d %s", p->what, done, p->total, p->unit);
  if (n < 0)
    return;
  if (n >= (int)sizeof line)
    n = (int)sizeof line - 1;
  /* pad over what a longer previous line left */
  fprintf(stderr, "\r%s%*s", line, p->shown > n ? p->shown - n : 0, "");
  fflush(stderr);
  if (n > p->shown)
    p->shown = n;
}

void ntt_progress_erase(struct ntt_progress *p) {
  if (!p->on || !p->shown)
    return;
  fprintf(stderr, "\r%*s\r", p->shown, "");
  fflush(stderr);
  p->shown = 0;
}

void ntt_progress_end(struct ntt_progress *p) {
  ntt_progress_erase(p);
  p->on = 0;
}

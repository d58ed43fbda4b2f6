/* names.c -- names of event kinds, data types, reduction ops and results
 * (tools/reader.h): the names of recorder/names.h, and a distinct name
 * for a value that table does not know.
 *
 * Thread-safety: reentrant; names of unknown values are formatted into a small
 * ring of thread-local buffers, valid until four more such names are asked for
 * on the same thread.  Not signal-safe.
 */
#include <stdio.h>
#include "tools/reader.h"
#include "recorder/clock.h"
#include "recorder/names.h"

/* Unknown values still get a distinct, greppable name ("dtype#99"). */
static const char *fmt_unknown(const char *what, long long v) {
  static _Thread_local char bufs[4][32];
  static _Thread_local unsigned next;
  char *b = bufs[next++ & 3];
  snprintf(b, sizeof bufs[0], "%s#%lld", what, v);
  return b;
}

const char *ntt_kind_name(unsigned kind) {
  const char *n = ntr_name_kind(kind);
  return n ? n : fmt_unknown("kind", kind);
}

const char *ntt_dtype_name(unsigned dtype) {
  const char *n = ntr_name_dtype(dtype);
  return n ? n : fmt_unknown("dtype", dtype);
}

/* Ops >= ncclNumOps are created by ncclRedOpCreatePreMulSum: name them by
 * their handle so two ranks using different handles show the difference. */
const char *ntt_redop_name(int redop) {
  const char *n = ntr_name_redop(redop);
  if (n)
    return n;
  if (redop >= 5)
    return fmt_unknown("premulsum", redop);
  return fmt_unknown("redop", redop);
}

const char *ntt_result_name(int result) {
  const char *n = ntr_name_result(result);
  return n ? n : fmt_unknown("ncclResult", result);
}

int ntt_kind_is_collective(unsigned kind) { return ntr_name_kind_class(kind) == 1; }
int ntt_kind_is_p2p(unsigned kind) { return ntr_name_kind_class(kind) == 2; }

/* recorder/clock.h's rule, on the writer host's realtime clock. */
uint64_t ntt_image_ns(const struct ntt_image *img, uint64_t tsc) { return ntr_clock_to_real_ns(&img->hdr, tsc); }

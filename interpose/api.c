/* api.c -- the public C API of include/nccltrace.h.
 *
 * Thread-safety: every function may be called from any thread.
 * Signal-safety: nccltrace_mark, nccltrace_version and nccltrace_enabled
 * are async-signal-safe (a ring record, plain loads); nccltrace_dump is not
 * promised to be (the header says so), although it only calls the
 * signal-safe dump path today.
 */
#include "ntr_config.h"
#include "include/nccltrace.h"
#include "interpose/nti.h"
#include "interpose/record.h"
#include "interpose/trigger.h"

NCCLTRACE_API void nccltrace_mark(const char *what, long long value) {
  if (!nti_active())
    return;
  nti_record_event(NTR_KIND_MARK, NULL, what ? what : "", (uint64_t)value, 0, 0);
}

NCCLTRACE_API int nccltrace_dump(const char *reason) {
  nti_activate();
  if (!nti_active())
    return -ENODEV;
  int rc = nti_dump_now(NTR_TRIG_USER, 0, 0, reason && *reason ? reason : "nccltrace_dump");
  return rc;
}

NCCLTRACE_API const char *nccltrace_version(void) {
  return NTR_VERSION;
}

NCCLTRACE_API int nccltrace_enabled(void) {
  return nti_active();
}

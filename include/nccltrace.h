/* nccltrace.h -- the public API of libnccltrace.so.
 *
 * Contract: every function is thread-safe, never blocks on another rank,
 * never fails the caller, and is a cheap no-op when the library is not
 * preloaded (resolve the symbols weakly or through dlsym/ctypes) or when
 * NCCLTRACE_DISABLE=1.  nccltrace_mark() is async-signal-safe;
 * nccltrace_dump() is not (it compresses and writes a file).
 *
 * From Python: ctypes.CDLL(None).nccltrace_mark(b"step", 1234)
 */
#ifndef NCCLTRACE_H
#define NCCLTRACE_H

#ifdef __cplusplus
extern "C" {
#endif

#define NCCLTRACE_API __attribute__((visibility("default")))

/* Record an application marker ("step", 1234) on the same timeline as the
 * NCCL calls.  what: up to 23 bytes are kept.  Lock-free, no allocation. */
NCCLTRACE_API void nccltrace_mark(const char *what, long long value);

/* Write a dump of this process's flight recorder now.
 * Dumps are budgeted per trigger: 5 at once, then one per 12 s
 * (docs/dump-format.md, "How many dumps"); past that the call writes nothing.
 * @return 0 on success, -EAGAIN over that budget, another negative errno
 *         value otherwise (the reason is also printed once on stderr as a
 *         `nccltrace:` line). */
NCCLTRACE_API int nccltrace_dump(const char *reason);

/* @return the version string of the loaded tracer, e.g. "0.1.0". */
NCCLTRACE_API const char *nccltrace_version(void);

/* @return 1 when the tracer records (loaded and not NCCLTRACE_DISABLE=1). */
NCCLTRACE_API int nccltrace_enabled(void);

#ifdef __cplusplus
}
#endif
#endif /* NCCLTRACE_H */

/* pyline.h -- CPython's code location table (co_linetable, 3.11 and later):
 * the line of an instruction.  The format is CPython's documented one
 * (InternalDocs/locations.md, "Format of the locations table"); the decoder
 * is ours.
 *
 * Thread-safety: pure.  Signal-safety: async-signal-safe (no allocation;
 * bytes come through the caller's read function, 256 at a time, on the
 * stack).
 */
#ifndef NTI_PYLINE_H
#define NTI_PYLINE_H
#include <stddef.h>

/* Copy n bytes from src to dst.  @return 0, or -1 (unreadable). */
typedef int (*nti_pyline_read_fn)(const void *src, void *dst, size_t n);

/* Line of the instruction at code unit lasti (2-byte units from the start
 * of the bytecode) of a code object whose table (len bytes at table) starts
 * at firstlineno.  A negative lasti (a frame that has not started) is the
 * first line.  At most max_entries entries are decoded (a bound on work).
 * @return the line, or 0 when unknown (no location, past the table, an
 *         unreadable or malformed table). */
int nti_pyline(nti_pyline_read_fn read, const void *table, size_t len, int firstlineno, int lasti);
#endif

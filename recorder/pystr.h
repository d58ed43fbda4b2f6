/* pystr.h -- the ring's Python string table: one (file, function) entry per
 * distinct pair, referenced by the frames of Python stacks (format.h:
 * ntr_pystr, ntr_pyframe).
 *
 * Thread-safety: lock-free, multi-producer: entries are allocated with a
 * fetch-add on hdr->str_used and published through the process-local hash
 * index by CAS, like the stack table (stack.c).
 * Signal-safety: async-signal-safe (atomics, plain stores, XXH64): the dump
 * path interns the frames of every Python thread from signal handlers.
 */
#ifndef NTR_PYSTR_H
#define NTR_PYSTR_H
#include <stddef.h>
#include <stdint.h>
#include "recorder/ring.h"

/* Intern (file, func); lengths are clipped to NTR_PYSTR_FILE_MAX (keeping
 * the tail of a long path) and NTR_PYSTR_FUNC_MAX.
 * @return the entry's offset + 1 (a frame word's lower half), 0 when the
 *         table is full or the ring is not open. */
uint32_t ntr_pystr_intern(struct ntr_ring *ring, const char *file, size_t file_len,
                          const char *func, size_t func_len);
#endif

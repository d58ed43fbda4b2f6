/* stack.h -- call stacks for records (NCCLTRACE_STACKS) and the backtrace
 * of a fatally signalled thread, both with libunwind (local unwinding only).
 *
 * Thread-safety: ntr_stack_capture is lock-free and may run on any thread
 * concurrently (CAS insert into the ring's stack table).  ntr_stack_fatal
 * writes hdr->bt_* without synchronisation: call it from one thread (the
 * first fatal signal handler to run).
 * Signal-safety: ntr_stack_capture allocates nothing and takes no lock of
 * ours, but libunwind may take the loader's lock (dl_iterate_phdr) to find
 * unwind tables: do not call it from a signal handler.  ntr_stack_fatal is
 * meant for fatal signal handlers; see the comment on it for exactly what
 * of libunwind is and is not async-signal-safe there.
 */
#ifndef NTR_STACK_H
#define NTR_STACK_H
#include <stdint.h>
#include "recorder/ring.h"

/* Capture the caller's stack (the caller of ntr_stack_capture is frame 0),
 * deduplicate it by XXH64 of the instruction pointers, and store it once in
 * the ring's stack table (entries are allocated in order: the first
 * stack_count entries are the table, which is what a dump writes).
 * @return the index + 1 of the entry (a record's stack_id), 0 when the stack
 *         could not be captured or the table (NTR_STACK_MAX) is full. */
uint32_t ntr_stack_capture(struct ntr_ring *ring);
/* Open libunwind (dlopen, once): done at the first NCCL call, before the
 * signal handlers exist, so that ntr_stack_fatal finds it; ntr_stack_capture
 * calls it too.  Not signal-safe.  @return 0, or -ENOENT without
 * libunwind (then stacks and backtraces are empty). */
int ntr_stack_load(void);

/* Same for a given ip list (used by ntr_stack_capture; tests use it to
 * exercise deduplication and the full table). */
uint32_t ntr_stack_intern(struct ntr_ring *ring, const uint64_t *ip, uint32_t depth);
/* Same for a stack of any kind (enum ntr_stack_kind; Python frames come from
 * interpose/pyframes.c).  Lock-free and async-signal-safe (atomics, plain
 * stores, XXH64). */
uint32_t ntr_stack_intern_kind(struct ntr_ring *ring, uint32_t kind, const uint64_t *ip,
                               uint32_t depth);

/* Backtrace of the faulting thread into hdr->bt_ip[], bt_sym[] ("func+0xoff";
 * "object+0xoff" when the object has no symbol for it, "?" when not even
 * the object is known), bt_depth, bt_signo and bt_tid.  ucontext is the third
 * argument of an SA_SIGINFO handler: unwinding starts from the interrupted
 * context, so the faulting function is frame 0 (frame 1 when the fault was a
 * call through a bad pointer).  With ucontext NULL it starts at the caller.
 * bt_depth is stored last (release), after the ips: a reader that sees it
 * non-zero has the ips; symbol names are filled after, best effort, from
 * the ELF files without malloc (recorder/symbolize.h). */
void ntr_stack_fatal(struct ntr_ring_header *hdr, int signo, void *ucontext);
#endif

/* group.h -- ncclGroupStart/End as the wrappers see them (group.c):
 * nesting, group ids, the (comm, stream) pairs of an outermost group that
 * get one completion event each.
 *
 * Thread-safety: NCCL groups are per thread; so is everything here (TLS).
 * Signal-safety: not signal-safe; handlers only read nti_tls.group_*.
 */
#ifndef NTI_GROUP_H
#define NTI_GROUP_H

#include "interpose/nti.h"


#define NTI_GROUP_TRACK 64 /* distinct (comm, stream) pairs evented per group */
struct nti_group_op {
  struct nti_comm *comm;
  void *stream;
  uint64_t seq;   /* highest collective seq on that pair, 0 when only p2p */
  uint64_t pos;   /* its record position */
  uint64_t pos_first; /* first record of the group on that pair */
  uint64_t tsc;
  int p2p_only;
};

/* After every change of group_depth (group.c). */
static inline void nti_group_word_sync(void) {
  uint32_t d = nti_tls.group_depth & 0xffffu;
  nti_tls.group_word = d | (d ? (uint32_t)NTR_REC_IN_GROUP << 16 : 0);
}

/* An op of the current outermost group was accepted: its (comm, stream)
 * pair gets the group's completion event (at the outermost End). */
void nti_group_note_op(struct nti_comm *c, void *stream, uint64_t seq, uint64_t pos,
                       uint64_t tsc, int p2p);
/* The profiler plugin's view of a group (profiler.c, a comm only the
 * plugin sees, so no wrapper uses this thread's group state): NCCL's
 * group API event opens (user_group: the application called
 * ncclGroupStart, else NCCL's implicit group around one call) and closes
 * after the launch, when the noted ops get their completion events.  The
 * open allocates the thread's pair table at its first group, as
 * ncclGroupStart does. */
void nti_group_plugin_open(int user_group);
void nti_group_plugin_close(void);
/* Forget this thread's group state and strict buffer (the fork child). */
void nti_group_reset(void);

#endif /* NTI_GROUP_H */

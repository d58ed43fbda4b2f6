/* strict.h -- strict mode (NCCLTRACE_CHECK=strict, strict.c): a call is
 * forwarded only once the coordinator says every rank agrees on it; calls
 * inside a group are buffered and replayed at the outermost GroupEnd.
 *
 * Thread-safety: the buffer is per thread (nti_tls.strict); the waits go
 * through the exchange module (any thread).
 * Signal-safety: none of it is signal-safe (malloc, sockets, futexes).
 */
#ifndef NTI_STRICT_H
#define NTI_STRICT_H

#include "interpose/nti.h"

/* One NCCL operation as the wrappers' slow path sees it: enough to record
 * it, and in strict mode to replay it later. */
#define NTI_OP_CONFIG_MAX 128 /* NCCL 2.32's ncclCollConfig_t is 72 bytes */
struct nti_op {
  /* The real call made from the fields below (wrappers.c, one per row). */
  ncclResult_t (*call)(const struct nti_op *op);
  /* Strict mode's replay at the outermost GroupEnd: call, then record the
   * result on the op's record (wrappers.c).  Strict mode calls the
   * wrappers only through it. */
  ncclResult_t (*replay)(struct nti_op *op);
  unsigned kind;
  const void *sendbuf;
  void *recvbuf;
  size_t count;
  int dtype, redop, root, peer; /* root for rooted collectives, peer for p2p */
  int dir;                      /* p2p: 0 send, 1 recv */
  ncclComm_t comm;
  void *stream;
  const void *config; /* an nccl*Config collective's config (NULL: none or a plain one) */
  /* Strict mode's copy of *config for a call it defers to the outermost
   * GroupEnd, when the caller's struct may be gone (its own fields only:
   * what it points to is the caller's, as for NCCL). */
  int config_kept;
  _Alignas(8) unsigned char config_copy[NTI_OP_CONFIG_MAX];
  /* filled by the wrapper */
  struct nti_comm *c;
  uint64_t seq, pos, tsc;
  struct ntr_record *rec;
  const void *site;             /* return address into the application (stacks) */
};
/* 1 when calls must wait for the coordinator.
 * The mode check comes first so the default path makes no call. */
int nti_strict_connected(void);
static inline int nti_strict_on(void) {
  return NTI_UNLIKELY(nti_cfg.check == NTI_CHECK_STRICT) && nti_strict_connected();
}
/* Before a recorded op is forwarded, in strict mode.  Outside a group:
 * wait for agreement on its record; refused: *res = ncclInvalidUsage.
 * Inside a group: buffer the call for the outermost GroupEnd's replay;
 * buffered: *res = ncclSuccess (not buffered for want of memory: the call
 * is forwarded).  @return 1 when the call must not be forwarded (return
 * *res), 0 to forward it. */
int nti_strict_pre(struct nti_op *op, ncclResult_t *res);
/* At the outermost GroupEnd, before the caller forwards it: wait over the
 * buffered records; agreed: replay them into NCCL's open group and return
 * ncclSuccess (or the first error NCCL gave a replayed call); refused:
 * replay nothing and return ncclInvalidUsage. */
ncclResult_t nti_strict_group_end(int *had_deferred);
/* Drop the buffered calls (nti_group_reset: the group is forgotten). */
void nti_strict_reset(void);

#endif /* NTI_STRICT_H */

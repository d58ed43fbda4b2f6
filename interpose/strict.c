/* strict.c -- strict mode: a call is forwarded only once the ranks agree
 * on it (the exchange's ntx_strict_wait); inside a group the calls are
 * buffered and replayed into NCCL's open group at the outermost End.
 *
 * Thread-safety: the buffer is the thread's own (nti_tls.strict).
 * Signal-safety: not signal-safe (malloc, the exchange's waits).
 */
#include <stdlib.h>

#include "interpose/nti.h"
#include "interpose/record.h"
#include "interpose/strict.h"
#include "interpose/exchange.h"

/* Strict mode: the calls of the current outermost group, replayed at End. */
struct nti_strict_buf {
  int n, cap;
  struct nti_op *ops;
  struct ntr_record *recs; /* record copies the coordinator waits on */
  int refused_said;
};

int nti_strict_connected(void) {
  return ntx_enabled();
}

static void strict_block_record(struct nti_op *o, const char *msg) {
  nti_record_event(NTR_KIND_STRICT_BLOCK, o ? o->c : NULL, msg, o ? o->count : 0,
                   o ? o->kind : 0, o ? o->seq : 0);
}

static int strict_single(struct nti_op *o) {
  char msg[256] = "";
  struct ntr_record copy = *o->rec;
  const struct ntr_record *recs[1] = {&copy};
  if (ntx_strict_wait(recs, 1, msg, sizeof msg) == 0)
    return 0;
  /* Once per op: the op is refused exactly once. */
  nti_say("strict: comm %016llx seq %llu refused: %s", (unsigned long long)copy.comm_id,
          (unsigned long long)copy.seq, msg[0] ? msg : "ranks disagree");
  strict_block_record(o, msg);
  return -1;
}

/* A deferred nccl*Config call keeps its config's bytes: the struct's first
 * member is its size (NCCL's versioned structs); an implausible one keeps
 * the caller's pointer as given. */
static void keep_config(struct nti_op *o) {
  size_t n;
  if (!o->config)
    return;
  memcpy(&n, o->config, sizeof n);
  if (n < sizeof n || n > sizeof o->config_copy)
    return;
  memcpy(o->config_copy, o->config, n);
  o->config_kept = 1;
}

static int strict_defer(const struct nti_op *o) {
  struct nti_strict_buf *b = nti_tls.strict;
  if (!b) {
    b = calloc(1, sizeof *b);
    if (!b)
      return -ENOMEM;
    nti_tls.strict = b;
  }
  if (b->n == b->cap) {
    int cap = b->cap ? 2 * b->cap : 16;
    struct nti_op *ops = realloc(b->ops, (size_t)cap * sizeof *ops);
    if (!ops)
      return -ENOMEM;
    b->ops = ops;
    struct ntr_record *recs = realloc(b->recs, (size_t)cap * sizeof *recs);
    if (!recs)
      return -ENOMEM;
    b->recs = recs;
    b->cap = cap;
  }
  b->ops[b->n] = *o;
  keep_config(&b->ops[b->n]);
  b->recs[b->n] = *o->rec;
  b->n++;
  return 0;
}

int nti_strict_pre(struct nti_op *o, ncclResult_t *res) {
  if (nti_tls.group_depth) {
    if (strict_defer(o) == 0) {
      *res = ncclSuccess;
      return 1;
    }
    return 0;
  }
  if (strict_single(o) < 0) {
    *res = ncclInvalidUsage;
    return 1;
  }
  return 0;
}

void nti_strict_reset(void) {
  if (nti_tls.strict)
    nti_tls.strict->n = 0;
}

ncclResult_t nti_strict_group_end(int *had_deferred) {
  struct nti_strict_buf *b = nti_tls.strict;
  *had_deferred = 0;
  if (!b || b->n == 0)
    return ncclSuccess;
  *had_deferred = 1;
  const struct ntr_record **ptrs = malloc((size_t)b->n * sizeof *ptrs);
  char msg[256] = "";
  int verdict = 0;
  if (ptrs) {
    for (int i = 0; i < b->n; i++)
      ptrs[i] = &b->recs[i];
    verdict = ntx_strict_wait(ptrs, b->n, msg, sizeof msg);
    free(ptrs);
  }
  if (verdict < 0) {
    nti_say("strict: group of %d calls refused (comm %016llx seq %llu): %s", b->n,
            (unsigned long long)b->recs[0].comm_id, (unsigned long long)b->recs[0].seq,
            msg[0] ? msg : "ranks disagree");
    for (int i = 0; i < b->n; i++) {
      nti_record_patch(b->ops[i].pos, b->ops[i].c, ncclInvalidUsage, 0, 0);
      strict_block_record(&b->ops[i], msg);
    }
    b->n = 0;
    return ncclInvalidUsage;
  }
  /* Agreed: NCCL's group is still open (Start was forwarded as usual), so
   * the calls replay inside it, in the application's order, before the
   * caller forwards the outermost End.  Our wrappers are not re-entered:
   * the guard is held. */
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < b->n; i++) {
    ncclResult_t r = b->ops[i].replay(&b->ops[i]);
    if (r != ncclSuccess && r != ncclInProgress && res == ncclSuccess)
      res = r; /* NCCL remembers it too and returns it again from End */
  }
  b->n = 0;
  return res;
}

/* jobview.h -- the coordinator's answer to a status query (protocol v5,
 * `nccltrace status --job`): the whole job as the coordinator knows it, in
 * JOB entries (wire.h): every connection (a rank's process, a node
 * aggregator), every communicator with each rank's state, process, last
 * seq and lateness, the latest report of each kind, and one summary line,
 * the coordinator's live verdict, first.
 *
 * Thread-safety: runs on the coordinator's thread, which owns the checker
 * (check.h); nothing shared.  Signal-safety: none.
 *
 * Cost: O(connections + ranks of all comms), bounded by the reply bound
 * (NTX_JOB_REPLY_MAX: what does not fit is cut and flagged); the server
 * rate-limits queries (coord.c), so a querier cannot make the loop the
 * ranks need spend more than that a few times a second.
 */
#ifndef NTX_JOBVIEW_H
#define NTX_JOBVIEW_H
#include <stddef.h>
#include <stdint.h>
#include "interpose/exchange/check.h"

/* Emit one JOB payload (a part). */
typedef void (*ntx_jv_emit)(void *ctx, const uint8_t *payload, size_t len);

/* Build the view of checker c into parts of at most NTX_FRAME_MAX_PAYLOAD
 * bytes (buf, that size, is the scratch), each handed to emit in order;
 * the last carries NTX_JOB_LAST.  stopped: per client id, 1 when that
 * connection's process is stopped (may be NULL).
 * @return the number of parts. */
uint32_t ntx_jv_build(struct ntx_check *c, const uint8_t *stopped, uint8_t *buf, ntx_jv_emit emit, void *ctx);

/* The refusal of a query over the rate limit: one part, NTX_JOB_BUSY,
 * with a TEXT entry saying so. */
void ntx_jv_busy(uint8_t *buf, size_t cap, double per_s, ntx_jv_emit emit, void *ctx);
#endif

/* record_fp.h -- turn a ring record into the fingerprint of the wire
 * protocol (docs/wire-protocol.md, "fingerprint").
 *
 * Thread-safety: pure function over caller memory.  Signal-safety: safe.
 */
#ifndef NTX_RECORD_FP_H
#define NTX_RECORD_FP_H
#include "interpose/exchange/wire.h"
#include "recorder/format.h"

/* @return 0 and *fp filled for a collective or send/recv call record of a
 *         communicator, -1 for anything else (lifecycle, groups, exit
 *         records, tracer events, calls strict mode refused). */
int ntx_fp_from_record(const struct ntr_record *r, struct ntx_fp *fp);
/* fp->t_ns = the call time of r on h's realtime clock (0 without a clock):
 * the arrival the coordinator's lateness statistics use. */
void ntx_fp_time(struct ntx_fp *fp, const struct ntr_record *r, const struct ntr_ring_header *h);
/* A DeviceArrive record r as an NTX_FP_DEV entry: t_ns is the device's
 * arrival on h's realtime clock when the watchdog saw it more than
 * NTX_DEV_RES_NS after the call, else the call's time (a start event seen
 * sooner is the call itself: the watchdog polls every 15 ms).
 * @return 0, or -1 for another record or without a clock. */
#define NTX_DEV_RES_NS 16000000ull
int ntx_fp_dev(const struct ntr_record *r, const struct ntr_ring_header *h, struct ntx_fp *fp);
#endif

/* ident.h -- communicator and job ids derived as NCCL derives them
 * (ident.c), and the fingerprint names of the recorder's format.
 *
 * Thread-safety: pure functions, except nti_job_from_comm (once, under the
 * lifecycle lock).  Signal-safety: the hash and id functions are
 * async-signal-safe (arithmetic on caller memory); nti_job_from_comm is not.
 */
#ifndef NTI_IDENT_H
#define NTI_IDENT_H

#include "interpose/nti.h"

uint64_t nti_hash_bytes(const void *p, size_t n);     /* NCCL getHash() */
uint64_t nti_id_split(uint64_t parent, int nth, int color);
uint64_t nti_id_shrink(uint64_t parent, int nth, const int *excl, int nexcl);
uint64_t nti_id_init_all(int nth);
uint64_t nti_id_grow(uint64_t parent, int nth);
uint64_t nti_id_scalable(const ncclUniqueId *ids, int n);
/* Called once the first comm id is known: derive the job id if none. */
void nti_job_from_comm(uint64_t comm_id);

/* The fingerprint is derived by readers (recorder/format.h: ntr_fp_coll,
 * ntr_fp_p2p, ntr_record_fp). */
#define nti_fp_coll ntr_fp_coll
#define nti_fp_p2p ntr_fp_p2p
#define nti_mix ntr_fp_mix

#endif /* NTI_IDENT_H */

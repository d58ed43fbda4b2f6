/* ident.h -- communicator and job ids derived as NCCL derives them
 * (ident.c), and the fingerprint names of the recorder's format.
 *
 * Thread-safety: pure functions, except nti_job_from_comm and
 * nti_job_comm_ready (under the lifecycle lock: the first takes it held,
 * the second takes it).  Signal-safety: the hash and id functions are
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
/* At each comm's creation (nti_life_lock held): derive the job id, or
 * improve a derived one (docs/identity.md "Job id"). */
void nti_job_from_comm(uint64_t comm_id);
/* A comm's init completed (blocking init returned, a nonblocking one
 * finished, a plugin-made comm began): it may now decide the job id.
 * Takes nti_life_lock; never called with it held.  Not signal-safe. */
void nti_job_comm_ready(uint64_t comm_id);

/* The fingerprint is derived by readers (recorder/format.h: ntr_fp_coll,
 * ntr_fp_p2p, ntr_record_fp). */
#define nti_fp_coll ntr_fp_coll
#define nti_fp_p2p ntr_fp_p2p
#define nti_mix ntr_fp_mix

#endif /* NTI_IDENT_H */

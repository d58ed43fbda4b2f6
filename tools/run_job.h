/* run_job.h -- the job id `nccltrace run` names its exit-status file after:
 * the one the evidence of its command carries (run_job.c has the rule).
 *
 * Thread-safety: run's one thread only.  Not signal-safe (reads files).
 */
#ifndef NTT_RUN_JOB_H
#define NTT_RUN_JOB_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The job id of the processes CMD (pid, started at start_ns realtime)
 * traced, read from the ring headers of the dumps in dump_dir and of the
 * rings in ring_dir.  @return 1 with the id in job, or 0 (job "") when the
 * evidence names none, or not one unambiguously. */
int ntt_run_evidence_job(pid_t pid, uint64_t start_ns, const char *dump_dir, const char *ring_dir, char *job,
                         size_t len);
#endif

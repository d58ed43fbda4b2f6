/* env.h -- what of the environment a ring header records (and so what dumps
 * hold and the exchange sends in REGISTER): only the variables of
 * recorder/env_vars.def -- NCCL's documented ones, a few of CUDA's, the
 * launchers' rank variables -- and of those, the value of any whose name
 * suggests a secret is masked ("***").
 *
 * Thread-safety: reads environ without copying; call while no thread calls
 * setenv/putenv (library constructor, fork child).  Signal-safety: all
 * functions are async-signal-safe (no malloc, no stdio, no locale).
 */
#ifndef NTR_ENV_H
#define NTR_ENV_H
#include <stddef.h>
#include <stdint.h>

/* 1 when NAME (the part before '=', or a NUL-terminated name) contains PASS,
 * PWD, SECRET, TOKEN, KEY, CRED or AUTH, case-insensitively. */
int ntr_env_is_secret(const char *name);

/* 1 when a variable of this name belongs in the ring header's env block
 * (a row of env_vars.def; its value may still be masked). */
int ntr_env_is_recorded(const char *name);

/* Write "NAME=VALUE\0NAME=VALUE\0..." for the recorded variables into buf,
 * VALUE "***" for a name ntr_env_is_secret.  This is the one source of the
 * environment the tracer writes or sends anywhere.
 * An entry that does not fit whole is skipped, never truncated.
 * @return bytes written (<= cap). */
uint32_t ntr_env_capture(char *buf, size_t cap);

/* getenv without locale or allocation: the value of NAME, or NULL. */
const char *ntr_env_get(const char *name);

/* Parse a decimal int from an environment variable.
 * @return the value, or dflt when unset or not a number. */
int32_t ntr_env_int(const char *name, int32_t dflt);

/* The launcher's ranks, first found of RANK / OMPI_COMM_WORLD_* / PMI_* /
 * SLURM_*; -1 when unknown. */
void ntr_env_launcher(int32_t *rank, int32_t *local_rank, int32_t *world_size,
                      int32_t *local_world_size);

/* 1 when this process says the lines that every process of the job would
 * say alike (what is wrong with the settings, "cross-rank check off: no
 * coordinator"): launcher rank 0; with only a local rank, local rank 0 (one
 * per host); of unknown rank, itself. */
int ntr_env_speaks_for_job(void);

/* A hash of the NCCLTRACE_* settings of the environment, whatever their
 * order: every NCCLTRACE_* entry but NCCLTRACE_SETTINGS_SAID (which holds
 * it), NCCLTRACE_SECRET by its length only.  Equal in two processes whose
 * settings are equal: `nccltrace run` and the processes under it
 * (interpose/config.c). */
uint64_t ntr_env_settings_hash(void);

/* The job id: the first set of NCCLTRACE_JOB, TORCHELASTIC_RUN_ID (not its
 * default "none", which every torchrun job shares), SLURM_JOB_ID,
 * PBS_JOBID, LSB_JOBID, OMPI_MCA_orte_ess_jobid, PMIX_NAMESPACE; bytes
 * outside [A-Za-z0-9._-] become '_' (it is part of file names).  "" when
 * none is set.  The one list the tracer (config.c) and `nccltrace run`
 * agree on. */
void ntr_env_job(char *out, size_t cap);
#endif

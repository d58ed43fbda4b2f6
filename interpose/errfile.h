/* errfile.h -- torchelastic's error file (TORCHELASTIC_ERROR_FILE): where
 * the tracer knows a rank's first cause when the rank ends (a live
 * mismatch, a peer the coordinator lost), it writes that cause there, in
 * the file's JSON shape, so torchrun's ChildFailedError summary prints it
 * (docs/pytorch.md "torchrun's error summary").
 *
 * Thread-safety: any thread; the cause is taken once (the first wins, an
 * atomic flag), the file is created once (O_EXCL).  Signal-safety:
 * nti_errfile_cause and nti_errfile_write are async-signal-safe (memcpy,
 * clock_gettime, open, write, close); nti_errfile_init is not (getenv),
 * and runs at activation.
 */
#ifndef NTI_ERRFILE_H
#define NTI_ERRFILE_H

/* Read TORCHELASTIC_ERROR_FILE (unset or too long: nothing is written). */
void nti_errfile_init(void);
/* The first cause known to this rank: reason (one line) and the dump
 * that holds it ("" when none was written).  Later calls are ignored. */
void nti_errfile_cause(const char *reason, const char *dump_path);
/* The rank ends (signo: the signal, else exit_code): write the cause into
 * the error file, unless there is no cause or the file exists already
 * (the application's own error wins). */
void nti_errfile_write(int signo, int exit_code);

#endif

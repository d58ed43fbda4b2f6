/* diag.h -- the one way the tracer writes its own `nccltrace:` lines
 * (docs/reliability.md, "Hostile world, round two", items 5 and 7).
 *
 * Thread-safety: any thread; the state is written once at load
 * (ntr_diag_init, ntr_diag_set_route before the route can be needed) and
 * read afterwards.  Lines of several threads never interleave mid-line:
 * each is one write.
 * Signal-safety: ntr_diag_write is async-signal-safe (fstat, open, poll,
 * write/send, close, pthread_sigmask and sigpending; isatty and
 * sigtimedwait are one ioctl and one rt_sigtimedwait system call in glibc,
 * though not in POSIX's list);
 * ntr_diag_say is not (vsnprintf).
 *
 * The rules, for a line written into a process that is not ours:
 *  - fd 2 is written only while it is still the stderr the process started
 *    with (st_dev/st_ino recorded at load by ntr_diag_init, as the
 *    exchange checks its descriptors, interpose/exchange/own.h).  An
 *    application that closed stderr and opened a file of its own as fd 2
 *    never gets our lines in it: they go to the route set with
 *    ntr_diag_set_route (the interposer's: a Note in the ring and a log
 *    file in the dump directory), or nowhere;
 *  - a line can neither block nor kill: SIGPIPE, SIGXFSZ and SIGTTOU are
 *    blocked in the writing thread around the write, and a SIGPIPE or
 *    SIGXFSZ the write raised is consumed (unless one was pending before);
 *    a socket is written with send(MSG_DONTWAIT | MSG_NOSIGNAL); a pipe, a
 *    FIFO or a terminal through a description of its own opened
 *    O_NONBLOCK on /proc/self/fd/2 (the application's file flags stay as
 *    they are; no reader: ENXIO, nothing written), else only when poll says
 *    it has room; a regular file directly (RLIMIT_FSIZE gives EFBIG);
 *  - a line that cannot be written is dropped, never retried, never fatal.
 * The remaining window: poll (only when /proc cannot be used) and write are
 * two calls; another writer may fill the pipe between them.
 */
#ifndef NTR_DIAG_H
#define NTR_DIAG_H
#include <stdarg.h>
#include <stddef.h>

/* Record what fd 2 is now: the stderr of this process.  Once, at load,
 * before any line.  Without it (the nccltrace command) fd 2 is trusted. */
void ntr_diag_init(void);

/* Where a line goes when fd 2 is not that stderr any more; the function
 * must be async-signal-safe.  NULL: such lines are dropped. */
typedef void (*ntr_diag_route_fn)(const char *line, size_t len);
void ntr_diag_set_route(ntr_diag_route_fn fn);

/* 1 when fd 2 is still the stderr recorded at load (or nothing was
 * recorded).  Async-signal-safe. */
int ntr_diag_fd2_ours(void);

/* One complete line (with its newline).  errno is preserved.
 * @return 1 written to stderr, 0 given to the route, -1 dropped. */
int ntr_diag_write(const char *line, size_t len);

/* prefix + formatted text + "\n" as one line of at most NTR_DIAG_LINE_MAX
 * bytes (PIPE_BUF: one atomic write into a pipe); longer text is cut.
 * Not async-signal-safe; errno is preserved. */
#define NTR_DIAG_LINE_MAX 4096
void ntr_diag_vsay(const char *prefix, const char *fmt, va_list ap);
void ntr_diag_say(const char *prefix, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One line into fd (a log file of the tracer's own): SIGXFSZ blocked and
 * consumed as above, no retry on a short write.  @return 0 or -errno. */
int ntr_diag_write_file(int fd, const char *line, size_t len);
#endif

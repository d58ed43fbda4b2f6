/* util.h -- small string and file helpers shared by the recorder modules,
 * usable where stdio and malloc are not (signal handlers, fork children).
 *
 * Thread-safety: no shared state; every function works on caller memory.
 * Signal-safety: every function is async-signal-safe (syscalls and plain
 * memory only).
 */
#ifndef NTR_UTIL_H
#define NTR_UTIL_H
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <sys/types.h>

/* A bounded string builder: appends never write past cap - 1, and the text
 * stays NUL-terminated; overflow is remembered instead of truncating quietly. */
struct ntr_sb {
  char *buf;
  size_t cap, len;
  int overflow;
};

void ntr_sb_init(struct ntr_sb *sb, char *buf, size_t cap);
void ntr_sb_str(struct ntr_sb *sb, const char *s);
void ntr_sb_u64(struct ntr_sb *sb, uint64_t v);
void ntr_sb_i64(struct ntr_sb *sb, int64_t v);
void ntr_sb_hex(struct ntr_sb *sb, uint64_t v); /* "0x1f" */
/* Append at most max bytes of s, each byte outside [A-Za-z0-9._] replaced by
 * '_' so the text is one safe file-name component ('-' separates fields). */
void ntr_sb_component(struct ntr_sb *sb, const char *s, size_t max);

/* Append a short text for errno e (positive or negative): "no space left
 * on device", ..., else "errno N" (strerror is not async-signal-safe). */
void ntr_sb_errno(struct ntr_sb *sb, int e); /* EFBIG names RLIMIT_FSIZE when it is set */
/* RLIMIT_FSIZE's soft limit: 1 and *bytes when there is one, 0 unlimited. */
int ntr_fsize_limit(uint64_t *bytes);
/* Append bytes as mebibytes with one decimal: "10.3 MiB". */
void ntr_sb_mib(struct ntr_sb *sb, uint64_t bytes);

/* SIGXFSZ blocked around a write that may cross RLIMIT_FSIZE: the kernel
 * then fails it with EFBIG instead of killing the process (its default
 * action); ntr_xfsz_restore consumes a SIGXFSZ we caused, unless one was
 * already pending for someone else, and restores the mask. */
struct ntr_xfsz {
  sigset_t old;
  int was_pending;
};
void ntr_xfsz_block(struct ntr_xfsz *x);
void ntr_xfsz_restore(struct ntr_xfsz *x);

/* Copy with truncation, always NUL-terminated (dst_size > 0). */
void ntr_strlcpy(char *dst, const char *src, size_t dst_size);

/* mkdir -p: create missing directories, the last one with mode.
 * @return 0 or -errno. */
int ntr_mkdir_p(const char *path, mode_t mode);

/* write(2) until done, retrying EINTR and short writes.  @return 0 or -errno. */
int ntr_write_all(int fd, const void *buf, size_t len);
#endif

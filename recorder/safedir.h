/* safedir.h -- open a directory the tracer writes into (rings, dumps) so that
 * another local user cannot lead the writes elsewhere: the path is walked one
 * component at a time with openat, and the directory is then used through
 * its fd (openat/mkdirat on it), never again by name.
 *
 * Thread-safety: no shared state; a struct ntr_safedir belongs to its caller.
 * Signal-safety: ntr_safedir_open, ntr_safedir_valid and ntr_safedir_close
 * are async-signal-safe (open/openat/fstat/fstatat/mkdirat/close only);
 * ntr_safedir_private is too, but is meant for initialisation.
 *
 * Rules (docs/reliability.md, "Hostile and cramped environments"):
 *  - a symlink owned by someone other than us or root is never followed
 *    when it is the last component, nor when its parent is world-writable
 *    (/tmp, /dev/shm); with NTR_SAFEDIR_NOFOLLOW_LAST no last-component
 *    symlink is followed at all;
 *  - every component that is not such a trusted symlink is opened with
 *    O_NOFOLLOW, so one swapped for a symlink after the check fails (ELOOP);
 *  - the directory itself must be ours (euid) and not writable by group or
 *    others (-EPERM otherwise: the caller falls back to a private one).
 *    NTR_SAFEDIR_GROUP_OK allows group write, for dump directories (umask
 *    002, team directories): files are created with O_EXCL|O_NOFOLLOW, so a
 *    group member can delete a dump but never redirect a write.  Ring
 *    directories stay strict, as the tools are (tools/inputs.c): a ring is
 *    turned into a dump by `collect`, so nobody else may place one there.
 * Remaining window: a trusted symlink (ours or root's) in a world-writable
 * parent without the sticky bit may be swapped between the check and the
 * open; /tmp and /dev/shm are sticky, so nobody else can rename it there.
 */
#ifndef NTR_SAFEDIR_H
#define NTR_SAFEDIR_H
#include <stddef.h>
#include <stdint.h>

enum {
  NTR_SAFEDIR_CREATE = 1,        /* mkdir missing components: 0755, the last 0700 */
  NTR_SAFEDIR_NOFOLLOW_LAST = 2, /* the last component must not be a symlink at all */
  NTR_SAFEDIR_SHARED = 4,        /* a shared parent (/tmp): only the walk is checked, not
                                    the directory's owner and mode */
  NTR_SAFEDIR_GROUP_OK = 8,      /* the directory may be group-writable (dump directories) */
};

struct ntr_safedir {
  int fd;            /* O_DIRECTORY|O_CLOEXEC, -1 when not open */
  uint64_t dev, ino; /* identity at open: checked before each use */
  /* on refusal: what was refused (for the caller's one line) */
  int64_t bad_uid;   /* owner of the refused symlink or directory, -1 if not that */
  uint32_t bad_mode; /* mode of a refused group- or other-writable directory, 0 if not that */
  uint32_t bad_len;  /* length of the path prefix that was refused */
};

/* Walk path and open the directory it names under the rules above.
 * @return 0 (d->fd open), -ELOOP (a symlink refused), -EPERM (not ours, or
 *         writable by group or others (see NTR_SAFEDIR_GROUP_OK): d->bad_uid / d->bad_mode say which),
 *         -ENAMETOOLONG, or the -errno of the failing call (ENOENT, ENOTDIR,
 *         EACCES, ...).  On failure d->fd is -1. */
int ntr_safedir_open(struct ntr_safedir *d, const char *path, unsigned flags);
/* The same, with leaf the mode a missing last component is made with
 * (NTR_SAFEDIR_CREATE; umask applies), instead of 0700. */
int ntr_safedir_open_mode(struct ntr_safedir *d, const char *path, unsigned flags, unsigned leaf);
/* The mode of a dump directory for dumps of file mode m
 * (NCCLTRACE_DUMP_MODE): the owner's rwx, and for group and others the
 * read bits of m with search (x) added, the group's write of m, never the
 * others' (a directory others can write is refused, safedir rules).
 * 0600 -> 0700, 0640 -> 0750, 0660 -> 0770, 0644 and 0666 -> 0755. */
unsigned ntr_safedir_dump_mode(unsigned m);

/* 1 when d->fd is still the directory that was opened (an application that
 * closed the fd, or reused its number, makes this 0: st_dev/st_ino/S_ISDIR
 * are compared).  Never closes anything. */
int ntr_safedir_valid(const struct ntr_safedir *d);

/* Close d->fd if valid (an fd that is no longer ours is left alone). */
void ntr_safedir_close(struct ntr_safedir *d);

/* Create a fresh private directory <parent>/<prefix>XXXXXX (0700, ours, a
 * random suffix, never an existing name) with parent opened under the rules
 * above (parent itself may be world-writable: /tmp).  out receives the full
 * path.  @return 0 with d open on the new directory, or -errno. */
int ntr_safedir_private(struct ntr_safedir *d, const char *parent, const char *prefix, char *out,
                        size_t cap);

/* The same, as <path>-XXXXXX next to path (same file system): the private
 * replacement of a refused directory. */
int ntr_safedir_sibling(struct ntr_safedir *d, const char *path, char *out, size_t cap);

/* Append "<what><path> is a symlink owned by uid U" (or "is owned by uid
 * U", "is writable by others (mode 0777)" or "by its group", ": <errno text>") for
 * the refusal rc of ntr_safedir_open(d, path, ...). */
struct ntr_sb;
void ntr_safedir_say(struct ntr_sb *sb, const char *what, const char *path, int rc,
                     const struct ntr_safedir *d);
#endif

/* tools/bundle.h -- the bundle: one file holding a job's evidence (dumps,
 * ring snapshots, `nccltrace run` exit files, PyTorch Flight Recorder
 * dumps) with the verdict and a MANIFEST (docs/bundle.md is the format, byte
 * by byte).  A POSIX tar (ustar headers, a pax 'x' header for a long name),
 * zstd-compressed or not: `tar xf` opens it anywhere.  Written and read by
 * this module alone, never by libarchive.
 *
 * Thread-safety: a writer or a read is used by one thread; independent ones
 * may run at once.  The cleanup of extracted bundles (ntb_open_*) is
 * process-wide and async-signal-safe in its signal handler; nothing else
 * here is signal-safe (allocates).
 *
 * A bundle is hostile input: every header is checked (checksum, octal
 * fields, type), every name is relative with no "..", every member is at
 * most NTB_MEMBER_MAX bytes and listed in the MANIFEST with its size and
 * XXH64, which the reader verifies; any violation is an error naming the
 * member and what is wrong, never a guess.
 */
#ifndef NTB_BUNDLE_H
#define NTB_BUNDLE_H
#include <stddef.h>
#include <stdint.h>

#define NTB_MAGIC "nccltrace-bundle 1"  /* first line of the MANIFEST */
#define NTB_MANIFEST "MANIFEST"         /* first member: <top>/MANIFEST */
#define NTB_MEMBER_MAX (4ull << 30)     /* bytes in one member (a dump's payload limit) */
#define NTB_TOTAL_MAX (64ull << 30)     /* bytes in all members of one bundle */
#define NTB_MEMBERS_MAX 100000          /* members in one bundle */
#define NTB_MANIFEST_MAX (16u << 20)    /* bytes of the MANIFEST */
#define NTB_NAME_MAX 255                /* bytes of a member name, <top>/ included */
#define NTB_PAX_MAX 65536u              /* bytes of a pax extended header */

/* ---- reading (bundle_read.c) -------------------------------------------- */
/* What the reader hands a sink: each verified member in archive order,
 * name relative to the top directory ("dumps/x.zst"), its modification
 * time in ns (a pax mtime record's, else the header's seconds).  begin/data/end
 * return 0, or -1 with a reason in err to stop the read. */
struct ntb_sink {
  int (*begin)(void *ctx, const char *name, uint64_t size, int64_t mtime_ns, char *err, size_t errlen);
  int (*data)(void *ctx, const void *p, size_t n, char *err, size_t errlen);
  int (*end)(void *ctx, char *err, size_t errlen);
  void *ctx;
};
/* What a read learned from the MANIFEST. */
struct ntb_info {
  char top[128];       /* the top directory of every member */
  char job[64], host[64], created[40], version[32]; /* printable; "" when absent */
  int nfiles;          /* members listed (the MANIFEST not counted) */
  uint64_t bytes;      /* their total size */
};
/* Read a bundle (plain or zstd tar) from fd, or from memory, checking it
 * whole: a member's bytes reach sink->data before its checksum is known, so
 * a caller keeps nothing of a read that failed.  sink may be NULL (check
 * only).  @return 0, or -1 with a one-line reason in err ("truncated: ...",
 * "member dumps/x.zst: checksum ... does not match the MANIFEST", "not an
 * nccltrace bundle: ..."). */
int ntb_read_fd(int fd, const struct ntb_sink *sink, struct ntb_info *info, char *err, size_t errlen);
int ntb_read_mem(const void *buf, size_t len, const struct ntb_sink *sink, struct ntb_info *info, char *err,
                 size_t errlen);
/* Do these first bytes of a file (at least 512 read, or the whole file)
 * start a tar archive, plain or zstd-compressed?  @return 1 tar, 2 zstd
 * (then only a read tells), 0 neither. */
int ntb_sniff(const unsigned char *head, size_t n);

/* ---- opening bundles named as inputs (bundle_open.c) -------------------- */
/* For analyze, decode and export: every arg naming a bundle (by its
 * content, or a name ending .tar, .tar.zst or .tzst) is extracted, verified,
 * into a private directory under $TMPDIR (else /tmp) and replaced in *out:
 * by that directory (files == 0) or by its dumps and ring snapshots, sorted
 * (files == 1, decode).  Other args are copied as they are.  One line per
 * bundle on stderr names the job it holds and where it was extracted.  The
 * directories are removed at exit and on SIGINT, SIGTERM, SIGHUP.
 * @return the number of args in *out (free with ntt_paths_free), or -1
 * after one "nccltrace: FILE: reason" line on stderr per bad bundle. */
/* Is path a bundle: a name ending .tar, .tar.zst or .tzst, or a tar
 * header at its start, plain or the first bytes a zstd stream decompresses
 * to (a dump is a zstd stream too, of no tar)?  @return 1 or 0. */
int ntb_is_bundle(const char *path);
int ntb_open_inputs(const char *cmd, char *const *args, int nargs, int files, char ***out);

/* Remove path (a file, or an empty directory) at exit and on SIGINT,
 * SIGTERM, SIGHUP, newest first, unless it is gone by then: what a command
 * makes while it works (extracted bundles, a bundle being written, its
 * staging directory).  @return 0, or -1 out of memory. */
int ntb_clean_add(const char *path);

/* ---- writing (bundle_write.c) ------------------------------------------- */
struct ntb_writer;
/* Start a bundle at path (written as a hidden temporary file beside it,
 * mode 0600, renamed by ntb_writer_close); zstd: compress it.
 * @return the writer, or NULL with why. */
struct ntb_writer *ntb_writer_open(const char *path, int zstd, char *why, size_t whylen);
/* Add a member (name with its top directory) from memory or from a file
 * that must still have size bytes and hash *xxh (NULL: not checked) while
 * it is copied.  mtime_ns: its modification time (ns since the epoch; a
 * fraction of a second goes into a pax record).  @return 0, or -1 with why. */
int ntb_writer_add_mem(struct ntb_writer *w, const char *name, const void *p, size_t n, int64_t mtime_ns, char *why,
                       size_t whylen);
int ntb_writer_add_file(struct ntb_writer *w, const char *name, const char *src, uint64_t size,
                        const uint64_t *xxh, int64_t mtime_ns, char *why, size_t whylen);
/* Finish: end-of-archive blocks, flush, rename into place (ok) or remove
 * the temporary file (!ok, or on any error).  Frees w.  @return 0 or -1. */
int ntb_writer_close(struct ntb_writer *w, int ok, char *why, size_t whylen);

/* A member name component made of [A-Za-z0-9._-] only (others become '_'),
 * never "." or "..", at most len-1 bytes. */
void ntb_safe_name(const char *in, char *out, size_t len);
#endif

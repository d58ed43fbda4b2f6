/* dump.c -- snapshot a ring into preallocated memory, compress it with a
 * static zstd context, and write it atomically (see dump.h; the format is in
 * format.h and docs/dump-format.md).
 *
 * Everything on the ntr_dump_write path is async-signal-safe: memory comes
 * from ntr_dump_init's mmaps, zstd works inside its static context (it never
 * allocates once initialised with ZSTD_initStaticCCtx), XXH64 is pure
 * computation, and the file is written with open/write/fsync/renameat2.
 */
#include "recorder/dump.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_estimateCCtxSize, ZSTD_initStaticCCtx */
#define XXH_INLINE_ALL /* header-only: see stack.c */
#include <xxhash.h>
#include <zstd.h>

#include "recorder/clock.h"
#include "recorder/names.h"
#include "recorder/diag.h"
#include "recorder/safedir.h"
#include "recorder/util.h"

/* libzstd, opened by zs_load and never linked: loading it at every exec of
 * every program under the preload cost about 0.07 ms, for programs that
 * never dump (bench/run.sh, exec).  ntr_dump_init (the first NCCL call,
 * never a handler) and ntr_dump_write_parts load it; the signal-time dump
 * only calls through the table.  ok is published with release after it. */
static struct {
  int ok;
  size_t (*estimate_cctx_size)(int);
  size_t (*compress_bound)(size_t);
  unsigned (*is_error)(size_t);
  ZSTD_CCtx *(*init_static_cctx)(void *, size_t);
  size_t (*compress_cctx)(ZSTD_CCtx *, void *, size_t, const void *, size_t, int);
  ZSTD_CCtx *(*create_cctx)(void);
  size_t (*free_cctx)(ZSTD_CCtx *);
} zs;
static pthread_once_t zs_once = PTHREAD_ONCE_INIT;

static void zs_open(void) {
  void *h = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return;
#define ZS_SYM(field, name) *(void **)&zs.field = dlsym(h, name)
  ZS_SYM(estimate_cctx_size, "ZSTD_estimateCCtxSize");
  ZS_SYM(compress_bound, "ZSTD_compressBound");
  ZS_SYM(is_error, "ZSTD_isError");
  ZS_SYM(init_static_cctx, "ZSTD_initStaticCCtx");
  ZS_SYM(compress_cctx, "ZSTD_compressCCtx");
  ZS_SYM(create_cctx, "ZSTD_createCCtx");
  ZS_SYM(free_cctx, "ZSTD_freeCCtx");
#undef ZS_SYM
  if (zs.estimate_cctx_size && zs.compress_bound && zs.is_error && zs.init_static_cctx && zs.compress_cctx &&
      zs.create_cctx && zs.free_cctx)
    __atomic_store_n(&zs.ok, 1, __ATOMIC_RELEASE);
}

/* @return 0, or -ELIBACC without a usable libzstd.so.1. */
static int zs_load(void) {
  pthread_once(&zs_once, zs_open);
  return __atomic_load_n(&zs.ok, __ATOMIC_ACQUIRE) ? 0 : -ELIBACC;
}

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1u << 0)
#endif

#define NTR_SECTIONS 7u

static unsigned char *put_section(unsigned char *p, uint32_t type, uint64_t len);
static void copy_live_bytes(void *dst, const void *src, size_t len);
#define EXTRA_MAX ((size_t)NTR_COMM_MAX * NTR_COMM_RECENT)

/* Preallocated state, written by ntr_dump_init only (single-threaded, before
 * any dump); the dumping thread owns the buffers while it holds dump_busy. */
static struct {
  int ready;
  uint32_t slots;
  unsigned mode;
  char dir[1024];        /* the dump directory in use (a private fallback, see init) */
  struct ntr_safedir sd; /* dir, opened once; checked by identity before each use */
  char note[640];        /* the fallback taken at init, or "" */
  ZSTD_CCtx *cctx;
  void *cctx_mem;
  size_t cctx_size;
  unsigned char *payload;
  size_t payload_cap;
  unsigned char *out;
  size_t out_cap;
  struct ntr_record *extra; /* recent[] records not found in the main ring */
} dump_state = {.sd = {.fd = -1}};

static int dump_busy;        /* atomic: 1 while a dump runs (one at a time) */
static unsigned dump_serial; /* atomic: per-process dump counter, the <n> of names */

/* ------------------------------------------------------------ buffers -- */

static void *map_anon(size_t len) {
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static size_t payload_bytes(uint32_t slots) {
  return NTR_SECTIONS * sizeof(struct ntr_section) + sizeof(struct ntr_ring_header) +
         (size_t)NTR_COMM_MAX * sizeof(struct ntr_comm_state) +
         (size_t)NTR_STACK_MAX * sizeof(struct ntr_stack) +
         ((size_t)slots + EXTRA_MAX) * sizeof(struct ntr_record) + sizeof(struct ntr_trigger) +
         NTR_PYTHREAD_MAX * sizeof(struct ntr_pythread) + NTR_STR_BYTES;
}

/* Set once before any dump (interpose/pyframes.c); read by dumping threads. */
static ntr_dump_pythreads_fn pythreads_fn;

void ntr_dump_set_pythreads(ntr_dump_pythreads_fn fn) {
  /* Release pairs with the acquire load in ntr_dump_write. */
  __atomic_store_n(&pythreads_fn, fn, __ATOMIC_RELEASE);
}

/* PYTHREADS then STRINGS at p (the threads' frames intern strings, so the
 * table is copied after them).  @return the end. */
static unsigned char *put_python(unsigned char *p, const struct ntr_ring *ring) {
  ntr_dump_pythreads_fn fn = __atomic_load_n(&pythreads_fn, __ATOMIC_ACQUIRE);
  uint32_t n = fn ? fn((struct ntr_pythread *)(void *)(p + sizeof(struct ntr_section)), NTR_PYTHREAD_MAX) : 0;
  if (n > NTR_PYTHREAD_MAX)
    n = NTR_PYTHREAD_MAX;
  p = put_section(p, NTR_SEC_PYTHREADS, (uint64_t)n * sizeof(struct ntr_pythread));
  p += (size_t)n * sizeof(struct ntr_pythread);
  /* Relaxed: entries below str_used were written before the frames that
   * name them were published (pystr.c); a reader validates each entry. */
  uint32_t used = ring->strs ? __atomic_load_n(&ring->hdr->str_used, __ATOMIC_RELAXED) : 0;
  if (used > NTR_STR_BYTES)
    used = NTR_STR_BYTES;
  uint32_t padded = (used + 7u) & ~7u; /* sections stay multiples of 8 long */
  p = put_section(p, NTR_SEC_STRINGS, padded);
  if (used)
    copy_live_bytes(p, ring->strs, used);
  memset(p + used, 0, padded - used);
  return p + padded;
}

static void unmap_all(void) {
  if (dump_state.cctx_mem)
    munmap(dump_state.cctx_mem, dump_state.cctx_size);
  if (dump_state.payload)
    munmap(dump_state.payload, dump_state.payload_cap);
  if (dump_state.out)
    munmap(dump_state.out, dump_state.out_cap);
  if (dump_state.extra)
    munmap(dump_state.extra, EXTRA_MAX * sizeof(struct ntr_record));
  dump_state.cctx_mem = dump_state.payload = dump_state.out = NULL;
  dump_state.extra = NULL;
  dump_state.cctx = NULL;
  dump_state.ready = 0;
}

/* Open dir for the dumps to come.  A directory that another user could
 * have led us to or can write into (recorder/safedir.h) is replaced by a
 * private one, next to it or under $TMPDIR (then /tmp), and dump_state.note says
 * so.  Any other failure (not creatable, not a directory) is left for the
 * first dump to report, as it was before we opened anything at init. */
static void open_dump_dir(const char *dir) {
  ntr_safedir_close(&dump_state.sd);
  dump_state.note[0] = '\0';
  ntr_strlcpy(dump_state.dir, dir, sizeof dump_state.dir);
  int rc = ntr_safedir_open_mode(&dump_state.sd, dir, NTR_SAFEDIR_CREATE | NTR_SAFEDIR_GROUP_OK,
                                 ntr_safedir_dump_mode(dump_state.mode ? dump_state.mode : 0600));
  if (rc != -ELOOP && rc != -EPERM)
    return;
  struct ntr_sb sb;
  ntr_sb_init(&sb, dump_state.note, sizeof dump_state.note);
  ntr_safedir_say(&sb, "dump directory ", dir, rc, &dump_state.sd);
  char alt[1024], tmp[1024];
  int r2 = ntr_safedir_sibling(&dump_state.sd, dir, alt, sizeof alt);
  /* $TMPDIR, then /tmp: a set but unusable $TMPDIR is no reason to skip it */
  const char *t = getenv("TMPDIR");
  for (int which = t && t[0] == '/' ? 0 : 1; r2 && which < 2; which++) {
    ntr_strlcpy(tmp, which == 0 ? t : "/tmp", sizeof tmp);
    char prefix[64];
    struct ntr_sb pb;
    ntr_sb_init(&pb, prefix, sizeof prefix);
    ntr_sb_str(&pb, "nccltrace-dumps-");
    ntr_sb_u64(&pb, geteuid());
    ntr_sb_str(&pb, "-");
    r2 = ntr_safedir_private(&dump_state.sd, tmp, prefix, alt, sizeof alt);
  }
  if (r2) {
    ntr_sb_str(&sb, "; no private directory could be made (");
    ntr_sb_errno(&sb, r2);
    ntr_sb_str(&sb, "): no dumps");
    dump_state.sd.fd = -1;
    return;
  }
  ntr_sb_str(&sb, "; dumps go to the private directory ");
  ntr_sb_str(&sb, alt);
  ntr_sb_str(&sb, " instead");
  ntr_strlcpy(dump_state.dir, alt, sizeof dump_state.dir);
}

/* The dump directory's fd for this dump.  The application may have closed
 * our fd, or reused its number, since init (some close every fd >= 3):
 * the fd is used only while it is still the directory we opened, and
 * otherwise the path is opened again under the same rules (the new fd is
 * kept; the old number is left alone, it is not ours any more).
 * Async-signal-safe; pre: the caller holds dump_busy.  @return fd or -errno. */
static int dump_dirfd(void) {
  if (ntr_safedir_valid(&dump_state.sd))
    return dump_state.sd.fd;
  struct ntr_safedir d;
  int rc = ntr_safedir_open_mode(&d, dump_state.dir, NTR_SAFEDIR_CREATE | NTR_SAFEDIR_GROUP_OK,
                                 ntr_safedir_dump_mode(dump_state.mode ? dump_state.mode : 0600));
  if (rc)
    return rc;
  dump_state.sd = d;
  return d.fd;
}

/* 1 when the directory we hold open has been removed (its link count is
 * 0): a new file cannot be made in it.  Async-signal-safe (fstat). */
static int dir_removed(void) {
  struct stat st;
  return ntr_safedir_valid(&dump_state.sd) && fstat(dump_state.sd.fd, &st) == 0 && st.st_nlink == 0;
}

/* Through the dlopen'ed table: a direct call would make libzstd.so.1 a
 * DT_NEEDED of libnccltrace.so, loaded into every process at exec.  Without
 * libzstd there are no dump buffers (ntr_dump_init fails). */
size_t ntr_dump_bytes(uint32_t slots) {
  if (zs_load())
    return 0;
  size_t pay = payload_bytes(slots), out = zs.compress_bound(pay);
  return zs.estimate_cctx_size(1) + pay + (zs.is_error(out) ? pay : out) + EXTRA_MAX * sizeof(struct ntr_record);
}

int ntr_dump_init(const struct ntr_ring *ring, const char *dir, unsigned mode) {
  if (!ring || !ring->hdr || !dir || !*dir)
    return -EINVAL;
  if (strlen(dir) > 900)
    return -ENAMETOOLONG; /* leaves room for the file name in PATH_MAX-ish buffers */
  uint32_t slots = (uint32_t)(ring->mask + 1);
  int zrc = zs_load();
  if (zrc)
    return zrc;
  if (!dump_state.ready || dump_state.slots != slots) {
    unmap_all();
    dump_state.cctx_size = zs.estimate_cctx_size(1);
    dump_state.payload_cap = payload_bytes(slots);
    dump_state.out_cap = zs.compress_bound(dump_state.payload_cap);
    if (zs.is_error(dump_state.out_cap) || dump_state.out_cap < dump_state.payload_cap)
      return -EOVERFLOW;
    dump_state.cctx_mem = map_anon(dump_state.cctx_size);
    dump_state.payload = map_anon(dump_state.payload_cap);
    dump_state.out = map_anon(dump_state.out_cap);
    dump_state.extra = map_anon(EXTRA_MAX * sizeof(struct ntr_record));
    if (!dump_state.cctx_mem || !dump_state.payload || !dump_state.out || !dump_state.extra) {
      unmap_all();
      return -ENOMEM;
    }
    dump_state.cctx = zs.init_static_cctx(dump_state.cctx_mem, dump_state.cctx_size);
    if (!dump_state.cctx) {
      unmap_all();
      return -ENOMEM;
    }
    dump_state.slots = slots;
  }
  dump_state.mode = mode & 0777;
  open_dump_dir(dir);
  dump_state.ready = 1;
  return 0;
}

const char *ntr_dump_note(void) { return dump_state.note; }

const char *ntr_dump_dir(void) { return dump_state.dir; }

/* getdents64 on a description of our own (openat "."): the directory fd's
 * offset is the dumping thread's, and no lock is taken here. */
long ntr_dump_dir_count(long stop_at) {
  int fd = ntr_safedir_valid(&dump_state.sd) ? openat(dump_state.sd.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                                              : open(dump_state.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  long n = 0;
  char buf[4096] __attribute__((aligned(8)));
  for (;;) {
    long got = syscall(SYS_getdents64, fd, buf, sizeof buf);
    if (got <= 0)
      break;
    for (long off = 0; off < got && n < stop_at;) {
      /* struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name */
      unsigned short reclen;
      memcpy(&reclen, buf + off + 16, sizeof reclen);
      const char *name = buf + off + 19;
      size_t len = strnlen(name, (size_t)(got - off - 19));
      if (!reclen)
        break;
      n += len > 14 && !memcmp(name, "nccltrace-", 10) && !memcmp(name + len - 4, ".zst", 4);
      off += reclen;
    }
    if (n >= stop_at)
      break;
  }
  close(fd);
  return n;
}

void ntr_dump_reset_child(void) {
  /* Relaxed: the child has one thread. */
  __atomic_store_n(&dump_busy, 0, __ATOMIC_RELAXED);
}

/* The <rank> of a dump's name (docs/dump-format.md "Dump file"): the
 * launcher rank when known ("r3"); else the comm ranks the process holds
 * in its first communicator: "r2" for one, "r0..3" for a run of them
 * (ncclCommInitAll, a thread per device), "r0,2,5..7" otherwise (at most
 * NAME_RUNS runs, then ",+"); "rna" when it holds none.  Async-signal-safe:
 * selection of the next larger rank, no sort, no allocation. */
#define NAME_RUNS 4
struct dump_rank {
  int32_t launcher;
  const struct ntr_comm_state *cs;
  uint32_t ncomms;
};

/* The smallest rank of comm id in cs greater than after (INT32_MIN: the
 * smallest); 0 with none. */
static int next_rank(const struct dump_rank *dr, uint64_t id, int64_t after, int32_t *out) {
  int found = 0;
  for (uint32_t i = 0; i < dr->ncomms; i++) {
    int32_t r = dr->cs[i].rank;
    if (dr->cs[i].comm_id == id && r >= 0 && r > after && (!found || r < *out)) {
      *out = r;
      found = 1;
    }
  }
  return found;
}

static void rank_tag(struct ntr_sb *sb, const struct dump_rank *dr) {
  ntr_sb_str(sb, "r");
  if (dr->launcher >= 0) {
    ntr_sb_i64(sb, dr->launcher);
    return;
  }
  int32_t r = 0;
  if (!dr->ncomms || !next_rank(dr, dr->cs[0].comm_id, INT64_MIN, &r)) {
    ntr_sb_str(sb, "na");
    return;
  }
  uint64_t id = dr->cs[0].comm_id;
  for (int runs = 0;; runs++) {
    if (runs == NAME_RUNS) {
      ntr_sb_str(sb, ",+");
      return;
    }
    int32_t lo = r, hi = r, nx = 0;
    int more;
    while ((more = next_rank(dr, id, hi, &nx)) && nx == hi + 1)
      hi = nx;
    if (runs)
      ntr_sb_str(sb, ",");
    ntr_sb_i64(sb, lo);
    if (hi > lo) {
      ntr_sb_str(sb, "..");
      ntr_sb_i64(sb, hi);
    }
    if (!more)
      return;
    r = nx;
  }
}

/* nccltrace-<job>-r<rank>-<host>-<pid>-<n>-<trigger>.zst into final, and
 * the temp name .nccltrace-....zst.tmp next to it into tmp (names only:
 * files are made relative to the directory's fd). */
static int dump_names(char *final, char *tmp, size_t cap, const struct ntr_ring_header *hdr,
                      const struct dump_rank *rank, const struct ntr_trigger *trig, unsigned n) {
  struct ntr_sb sb;
  ntr_sb_init(&sb, final, cap);
  ntr_sb_str(&sb, "nccltrace-");
  ntr_sb_component(&sb, hdr->job_id[0] ? hdr->job_id : "nojob", sizeof hdr->job_id);
  ntr_sb_str(&sb, "-");
  rank_tag(&sb, rank);
  ntr_sb_str(&sb, "-");
  ntr_sb_component(&sb, hdr->host, sizeof hdr->host);
  ntr_sb_str(&sb, "-");
  ntr_sb_i64(&sb, hdr->pid);
  ntr_sb_str(&sb, "-");
  ntr_sb_u64(&sb, n);
  ntr_sb_str(&sb, "-");
  const char *tn = NULL;
  if (trig->kind == NTR_TRIG_SIGNAL || trig->kind == NTR_TRIG_FATAL_SIGNAL)
    tn = ntr_name_signal_tag(trig->signo);
  ntr_sb_str(&sb, tn ? tn : ntr_name_trigger_tag(trig->kind));
  ntr_sb_str(&sb, ".zst");
  if (sb.overflow)
    return -ENAMETOOLONG;
  ntr_sb_init(&sb, tmp, cap);
  ntr_sb_str(&sb, ".");
  ntr_sb_str(&sb, final);
  ntr_sb_str(&sb, ".tmp");
  return sb.overflow ? -ENAMETOOLONG : 0;
}

int ntr_dump_log(const struct ntr_ring_header *hdr, const char *line, size_t len) {
  if (!dump_state.ready || !hdr)
    return -ENODEV;
  /* A plain copy: a dump that reopens the directory meanwhile may change
   * sd under us; a torn copy fails the identity check and the line is dropped. */
  struct ntr_safedir sd = dump_state.sd;
  if (!ntr_safedir_valid(&sd))
    return -EBADF;
  char name[256];
  struct ntr_sb sb;
  ntr_sb_init(&sb, name, sizeof name);
  ntr_sb_str(&sb, "nccltrace-");
  ntr_sb_component(&sb, hdr->job_id[0] ? hdr->job_id : "nojob", sizeof hdr->job_id);
  ntr_sb_str(&sb, "-");
  ntr_sb_component(&sb, hdr->host, sizeof hdr->host);
  ntr_sb_str(&sb, "-");
  ntr_sb_i64(&sb, hdr->pid);
  ntr_sb_str(&sb, ".log");
  if (sb.overflow)
    return -ENAMETOOLONG;
  int fd = openat(sd.fd, name, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
                  dump_state.mode ? dump_state.mode : 0600);
  if (fd < 0)
    return -errno;
  struct stat st;
  int rc = -EPERM;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && st.st_nlink == 1)
    rc = ntr_diag_write_file(fd, line, len);
  close(fd);
  return rc;
}

/* -------------------------------------------------------------- write -- */

/* Rename without replacing, inside dfd: an existing dump (pid reuse, a
 * second collect) is evidence too.  @return 0, -EEXIST, or -errno. */
static int rename_noreplace(int dfd, const char *from, const char *to) {
  if (syscall(SYS_renameat2, dfd, from, dfd, to, RENAME_NOREPLACE) == 0)
    return 0;
  if (errno != ENOSYS && errno != EINVAL)
    return -errno;
  /* kernel or filesystem without renameat2 flags: link fails on an existing
   * name just the same */
  if (linkat(dfd, from, dfd, to, 0) == 0) {
    unlinkat(dfd, from, 0);
    return 0;
  }
  if (errno == EEXIST)
    return -EEXIST;
  return renameat(dfd, from, dfd, to) == 0 ? 0 : -errno;
}

/* Write preamble + data as a new dump file in dfd (path dir, for the name
 * returned in path).  Async-signal-safe. */
static int write_dump_file(int dfd, const char *dir, unsigned mode,
                           const struct ntr_ring_header *hdr, const struct dump_rank *rank,
                           const struct ntr_trigger *trig, const struct ntr_dump_preamble *pre,
                           const void *data, size_t len, unsigned n, char *path,
                           size_t path_len) {
  char final[512], tmp[512];
  int rc = 0, fd = -1;
  for (int attempt = 0; attempt < 64; attempt++, n++) {
    rc = dump_names(final, tmp, sizeof final, hdr, rank, trig, n);
    if (rc)
      return rc;
    /* O_NOFOLLOW | O_EXCL: a name planted in the directory (a symlink to a
     * file of ours) is never written through */
    fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode ? mode : 0600);
    if (fd >= 0 || errno != EEXIST)
      break;
  }
  if (fd < 0)
    return -errno;

  /* RLIMIT_FSIZE: see ntr_xfsz_block. */
  struct ntr_xfsz xfsz;
  ntr_xfsz_block(&xfsz);

  rc = ntr_write_all(fd, pre, sizeof *pre);
  if (!rc)
    rc = ntr_write_all(fd, data, len);
  if (!rc) {
    while (fsync(fd) != 0) {
      if (errno != EINTR) {
        /* EINVAL: a file system without fsync (some pseudo file systems);
         * the data is written, durability is what it can be */
        if (errno != EINVAL)
          rc = -errno;
        break;
      }
    }
  }
  if (close(fd) != 0 && !rc && errno != EINTR)
    rc = -errno;

  ntr_xfsz_restore(&xfsz);

  for (int attempt = 0; !rc; attempt++) {
    rc = rename_noreplace(dfd, tmp, final);
    if (rc != -EEXIST || attempt >= 63)
      break;
    char unused[512];
    rc = dump_names(final, unused, sizeof final, hdr, rank, trig, ++n);
  }
  if (rc) {
    unlinkat(dfd, tmp, 0);
    return rc;
  }
  fsync(dfd); /* best effort: the file itself is already on disk */
  if (path && path_len) {
    struct ntr_sb sb;
    ntr_sb_init(&sb, path, path_len);
    ntr_sb_str(&sb, dir);
    ntr_sb_str(&sb, "/");
    ntr_sb_str(&sb, final);
  }
  return 0;
}

/* Compress payload into out (or store it raw), fill the preamble.
 * @return the bytes of frame data to write, pointing *data at them. */
static size_t pack(ZSTD_CCtx *cctx, const unsigned char *payload, size_t len, unsigned char *out,
                   size_t out_cap, struct ntr_dump_preamble *pre, const void **data) {
  memset(pre, 0, sizeof *pre);
  memcpy(pre->magic, NTR_DUMP_MAGIC, 8);
  pre->version = NTR_FORMAT_VERSION;
  pre->preamble_size = sizeof *pre;
  pre->payload_size = len;
  pre->checksum = XXH64(payload, len, 0);
  pre->section_count = NTR_SECTIONS;
  size_t z = cctx ? zs.compress_cctx(cctx, out, out_cap, payload, len, 1) : 0;
  if (!cctx || zs.is_error(z)) {
    pre->flags |= 1u; /* stored raw: a dump without compression beats none */
    pre->compressed_size = len;
    *data = payload;
    return len;
  }
  pre->compressed_size = z;
  *data = out;
  return z;
}

/* ----------------------------------------------------------- snapshot -- */

/* Copies of live shared memory race with writers by design (counters move
 * while we copy; records are re-validated by their seqlock): excluded from
 * TSan, which cannot know that. */
#if defined(__clang__)
#define NTR_NO_TSAN __attribute__((no_sanitize("thread")))
#else
#define NTR_NO_TSAN __attribute__((no_sanitize_thread))
#endif

NTR_NO_TSAN static void copy_live(void *dst, const void *src, size_t len) {
  const volatile uint64_t *s = src;
  uint64_t *d = dst;
  for (size_t i = 0; i < len / 8; i++)
    d[i] = s[i];
}

/* Byte copy of live shared memory (the string table grows while we copy). */
NTR_NO_TSAN static void copy_live_bytes(void *dst, const void *src, size_t len) {
  const volatile unsigned char *s = src;
  unsigned char *d = dst;
  for (size_t i = 0; i < len; i++)
    d[i] = s[i];
}

static unsigned char *put_section(unsigned char *p, uint32_t type, uint64_t len) {
  struct ntr_section sec = {.type = type, .reserved = 0, .length = len};
  memcpy(p, &sec, sizeof sec);
  return p + sizeof sec;
}

static void rec_swap(struct ntr_record *a, struct ntr_record *b) {
  struct ntr_record t = *a;
  *a = *b;
  *b = t;
}

/* Heapsort by commit: in place, no allocation (qsort may malloc). */
static void sort_by_commit(struct ntr_record *r, size_t n) {
  for (size_t start = n / 2; n > 1;) {
    size_t root;
    if (start > 0) {
      root = --start;
    } else {
      rec_swap(&r[0], &r[--n]);
      root = 0;
    }
    for (;;) {
      size_t child = 2 * root + 1;
      if (child >= n)
        break;
      if (child + 1 < n && r[child + 1].commit > r[child].commit)
        child++;
      if (r[root].commit >= r[child].commit)
        break;
      rec_swap(&r[root], &r[child]);
      root = child;
    }
  }
}

static int has_commit(const struct ntr_record *r, size_t n, uint64_t c) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (r[mid].commit < c)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n && r[lo].commit == c;
}

/* Records oldest first: the main ring's last lap in position order, plus the
 * communicators' recent[] entries the ring no longer has, merged by commit.
 * out has room for slots + EXTRA_MAX records.  @return records written. */
static size_t snapshot_records(const struct ntr_ring *ring, uint32_t ncomms,
                               struct ntr_record *out) {
  uint64_t slots = ring->mask + 1;
  /* Acquire: pairs with nothing in particular; slot commits are validated
   * one by one below, head only bounds the scan. */
  uint64_t head = __atomic_load_n(&ring->hdr->head, __ATOMIC_ACQUIRE);
  uint64_t first = head > slots ? head - slots : 0;
  size_t m = 0;
  for (uint64_t pos = first; pos < head; pos++) {
    uint64_t c = ntr_ring_read_slot(&ring->slots[pos & ring->mask], &out[m]);
    if (c == pos + 1 && out[m].kind != NTR_KIND_NONE)
      m++; /* else: a hole or a filler, being written, or overwritten since head was read */
  }

  size_t e = 0;
  for (uint32_t i = 0; i < ncomms; i++)
    for (uint32_t k = 0; k < NTR_COMM_RECENT && e < EXTRA_MAX; k++)
      if (ntr_ring_read_slot(&ring->comms[i].recent[k], &dump_state.extra[e]))
        e++;
  sort_by_commit(dump_state.extra, e);
  size_t keep = 0;
  for (size_t i = 0; i < e; i++) {
    if (keep && dump_state.extra[keep - 1].commit == dump_state.extra[i].commit)
      continue;
    if (has_commit(out, m, dump_state.extra[i].commit))
      continue;
    if (keep != i)
      dump_state.extra[keep] = dump_state.extra[i];
    keep++;
  }
  e = keep;
  if (!e)
    return m;

  /* Merge in place: move the main records up by e, then merge forward; the
   * write index (i + j) never passes the main read index (e + j). */
  memmove(out + e, out, m * sizeof *out);
  size_t i = 0, j = 0, w = 0;
  while (i < e || j < m) {
    if (j >= m || (i < e && dump_state.extra[i].commit < out[e + j].commit))
      out[w++] = dump_state.extra[i++];
    else
      out[w++] = out[e + j++];
  }
  return w;
}

int ntr_dump_write(const struct ntr_ring *ring, const struct ntr_trigger *trig, char *path,
                   size_t path_len) {
  if (!dump_state.ready || !ring || !ring->hdr || !trig || (uint32_t)(ring->mask + 1) != dump_state.slots)
    return -EINVAL;
  int expected = 0;
  /* Acquire pairs with the release store that ends the previous dump: its
   * buffer writes are done before ours start. */
  if (!__atomic_compare_exchange_n(&dump_busy, &expected, 1, 0, __ATOMIC_ACQUIRE,
                                   __ATOMIC_RELAXED))
    return -EBUSY;

  const struct ntr_ring_header *live = ring->hdr;
  uint32_t ncomms = __atomic_load_n(&live->comm_count, __ATOMIC_ACQUIRE);
  uint32_t nstacks = __atomic_load_n(&live->stack_count, __ATOMIC_ACQUIRE);
  if (ncomms > NTR_COMM_MAX)
    ncomms = NTR_COMM_MAX;
  if (nstacks > NTR_STACK_MAX)
    nstacks = NTR_STACK_MAX;

  unsigned char *p = dump_state.payload;
  /* HEADER, with the counts made to match the sections that follow */
  p = put_section(p, NTR_SEC_HEADER, sizeof(struct ntr_ring_header));
  struct ntr_ring_header *h = (struct ntr_ring_header *)p;
  copy_live(h, live, sizeof *h);
  h->comm_count = ncomms;
  h->stack_count = nstacks;
  p += sizeof *h;

  /* COMMS: each recent[] entry re-read through its seqlock so the copy holds
   * only consistent records (torn ones get commit 0) */
  p = put_section(p, NTR_SEC_COMMS, (uint64_t)ncomms * sizeof(struct ntr_comm_state));
  struct ntr_comm_state *cs = (struct ntr_comm_state *)p;
  for (uint32_t i = 0; i < ncomms; i++) {
    copy_live(&cs[i], &ring->comms[i], offsetof(struct ntr_comm_state, recent));
    for (uint32_t k = 0; k < NTR_COMM_RECENT; k++)
      if (!ntr_ring_read_slot(&ring->comms[i].recent[k], &cs[i].recent[k]))
        memset(&cs[i].recent[k], 0, sizeof cs[i].recent[k]);
  }
  p += (size_t)ncomms * sizeof(struct ntr_comm_state);

  /* STACKS: allocated in order (stack.c), so the first stack_count are it */
  p = put_section(p, NTR_SEC_STACKS, (uint64_t)nstacks * sizeof(struct ntr_stack));
  copy_live(p, ring->stacks, (size_t)nstacks * sizeof(struct ntr_stack));
  p += (size_t)nstacks * sizeof(struct ntr_stack);

  unsigned char *rec_sec = p;
  p += sizeof(struct ntr_section);
  size_t nrecs = snapshot_records(ring, ncomms, (struct ntr_record *)p);
  put_section(rec_sec, NTR_SEC_RECORDS, nrecs * sizeof(struct ntr_record));
  p += nrecs * sizeof(struct ntr_record);

  p = put_section(p, NTR_SEC_TRIGGER, sizeof(struct ntr_trigger));
  struct ntr_trigger t = *trig;
  if (!t.tsc)
    t.tsc = ntr_clock_now();
  t.lost = ntr_ring_lost(ring);
  memcpy(p, &t, sizeof t);
  p += sizeof t;

  p = put_python(p, ring);

  size_t len = (size_t)(p - dump_state.payload);
  struct ntr_dump_preamble pre;
  const void *data;
  size_t dlen = pack(dump_state.cctx, dump_state.payload, len, dump_state.out, dump_state.out_cap, &pre, &data);

  struct dump_rank rank = {h->rank, cs, ncomms};
  /* Relaxed: the counter only has to be unique per dump. */
  unsigned n = __atomic_fetch_add(&dump_serial, 1, __ATOMIC_RELAXED);
  int rc = dump_dirfd();
  if (rc >= 0)
    rc = write_dump_file(rc, dump_state.dir, dump_state.mode, h, &rank, &t, &pre, data, dlen, n, path, path_len);
  if (rc == -ENOENT && dir_removed()) {
    /* The directory was removed under us (rm -rf of old dumps): made
     * again by its path, as at init, and the dump written there. */
    ntr_safedir_close(&dump_state.sd);
    rc = dump_dirfd();
    if (rc >= 0)
      rc = write_dump_file(rc, dump_state.dir, dump_state.mode, h, &rank, &t, &pre, data, dlen, n, path, path_len);
  }

  /* give the pages back: a dump is rare, the RSS should not stay */
  madvise(dump_state.payload, dump_state.payload_cap, MADV_DONTNEED);
  madvise(dump_state.out, dump_state.out_cap, MADV_DONTNEED);
  madvise(dump_state.extra, EXTRA_MAX * sizeof(struct ntr_record), MADV_DONTNEED);
  /* Release pairs with the acquire CAS of the next dump. */
  __atomic_store_n(&dump_busy, 0, __ATOMIC_RELEASE);
  return rc;
}

int ntr_dump_write_image(const char *dir, const struct ntr_ring_header *hdr,
                         const struct ntr_comm_state *comms, uint32_t ncomms,
                         const struct ntr_stack *stacks, uint32_t nstacks,
                         const struct ntr_record *recs, uint64_t nrecs,
                         const char *strs, uint32_t str_len,
                         const struct ntr_trigger *trig, char *path, size_t path_len) {
  if (!dir || !*dir || !hdr || !trig || (ncomms && !comms) || (nstacks && !stacks) ||
      (nrecs && !recs) || (str_len && !strs) || ncomms > NTR_COMM_MAX || nstacks > NTR_STACK_MAX ||
      str_len > NTR_STR_BYTES || nrecs > (UINT64_MAX / 2) / sizeof(struct ntr_record))
    return -EINVAL;
  if (zs_load() != 0)
    return -ELIBACC;
  uint32_t padded = (str_len + 7u) & ~7u;
  size_t len = NTR_SECTIONS * sizeof(struct ntr_section) + sizeof *hdr +
               (size_t)ncomms * sizeof *comms + (size_t)nstacks * sizeof *stacks +
               (size_t)nrecs * sizeof *recs + sizeof *trig + padded;
  unsigned char *payload = malloc(len);
  size_t out_cap = zs.compress_bound(len);
  unsigned char *out = zs.is_error(out_cap) ? NULL : malloc(out_cap);
  ZSTD_CCtx *cctx = zs.create_cctx();
  int rc = -ENOMEM;
  if (payload && out && cctx) {
    unsigned char *p = put_section(payload, NTR_SEC_HEADER, sizeof *hdr);
    struct ntr_ring_header *h = (struct ntr_ring_header *)p;
    memcpy(h, hdr, sizeof *h);
    h->comm_count = ncomms;
    h->stack_count = nstacks;
    p += sizeof *h;
    p = put_section(p, NTR_SEC_COMMS, (uint64_t)ncomms * sizeof *comms);
    if (ncomms)
      memcpy(p, comms, (size_t)ncomms * sizeof *comms);
    p += (size_t)ncomms * sizeof *comms;
    p = put_section(p, NTR_SEC_STACKS, (uint64_t)nstacks * sizeof *stacks);
    if (nstacks)
      memcpy(p, stacks, (size_t)nstacks * sizeof *stacks);
    p += (size_t)nstacks * sizeof *stacks;
    p = put_section(p, NTR_SEC_RECORDS, nrecs * sizeof *recs);
    if (nrecs)
      memcpy(p, recs, (size_t)nrecs * sizeof *recs);
    p += (size_t)nrecs * sizeof *recs;
    p = put_section(p, NTR_SEC_TRIGGER, sizeof *trig);
    memcpy(p, trig, sizeof *trig);
    p += sizeof *trig;
    /* no Python threads: the process is gone; its string table stays */
    p = put_section(p, NTR_SEC_PYTHREADS, 0);
    p = put_section(p, NTR_SEC_STRINGS, padded);
    if (str_len)
      memcpy(p, strs, str_len);
    memset(p + str_len, 0, padded - str_len);

    struct ntr_dump_preamble pre;
    const void *data;
    size_t dlen = pack(cctx, payload, len, out, out_cap, &pre, &data);
    struct dump_rank rank = {h->rank, comms, ncomms};
    struct ntr_safedir d;
    rc = ntr_safedir_open(&d, dir, NTR_SAFEDIR_CREATE | NTR_SAFEDIR_GROUP_OK);
    if (!rc) {
      rc = write_dump_file(d.fd, dir, 0600, h, &rank, trig, &pre, data, dlen, 0, path, path_len);
      close(d.fd);
    }
  }
  zs.free_cctx(cctx);
  free(out);
  free(payload);
  return rc;
}

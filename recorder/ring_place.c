/* ring_place.c -- where the ring lives and how big it is.
 *
 * A ring file is written through a MAP_SHARED mapping.  Its blocks are
 * reserved when it is created (posix_fallocate), so a file system that is
 * full (Docker's default /dev/shm is 64 MiB; one ring of the default 65536
 * records is 10.3 MiB) fails here, where we can choose, and never later as
 * a SIGBUS on a store into the mapping.
 *
 * With cfg->fallback the choices are, in order (one line in ring->note
 * says which was taken and why):
 *   1. the configured directory; if it is refused (a symlink, another
 *      user's, writable by group or others: recorder/safedir.h), a fresh
 *      private directory next to it (<dir>-XXXXXX, same file system);
 *   2. in that directory, a smaller ring: the rings there, of every job,
 *      share one budget, a third of the file system, and no ring leaves
 *      less than half of it (at most 4 GiB) free (recorder/ring_budget.h: the rest is NCCL's
 *      own /dev/shm segments' and the application's); a ring takes its
 *      local rank's part of the budget (LOCAL_WORLD_SIZE), else half of
 *      what is left of it, and at least 64 records when those still fit,
 *      then halving while the reservation fails for lack of space;
 *   3. another directory: $TMPDIR/nccltrace-<uid>, then (also when $TMPDIR
 *      is set but unusable) /tmp/nccltrace-<uid>, or a private directory
 *      there if that one is refused, again with smaller rings;
 *   4. anonymous memory: recording and in-process dumps work, but the ring
 *      does not survive the process (no `nccltrace collect` after SIGKILL,
 *      nothing for `nccltrace status`).
 * Without cfg->fallback only step 1's directory, full size, is tried.
 *
 * Thread-safety and signal-safety: see ring_place.h.
 */
#include "recorder/ring_place.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "recorder/env.h"
#include "recorder/ring_budget.h"
#include "recorder/safedir.h"
#include "recorder/util.h"

#define MIN_SLOTS 64u

static uint64_t file_bytes(uint32_t slots) {
  struct ntr_ring_header t;
  memset(&t, 0, sizeof t);
  ntr_ring_layout(&t, slots);
  return t.file_size;
}

/* Largest power of two <= want (>= MIN_SLOTS) whose file fits in budget. */
static uint32_t fit(uint32_t want, uint64_t budget) {
  uint32_t s = want;
  while (s > MIN_SLOTS && file_bytes(s) > budget)
    s /= 2;
  return s;
}

static int space_error(int rc) {
  return rc == -ENOSPC || rc == -EDQUOT || rc == -EFBIG || rc == -ENOMEM;
}

struct place {
  struct ntr_ring *ring;
  const char *host, *job;
  uint32_t want;
  int32_t local_ranks;
  struct ntr_sb note;
  int noted;       /* something is in note */
  int over_budget; /* try_dir: the budget, not the file system, said no */
  struct ntr_ring_budget bud; /* the last directory's, as try_dir scanned it */
  int fsize_cut;   /* RLIMIT_FSIZE made the ring smaller */
};

/* Create the file in d (path dir) with slots records, reserve and map it. */
static int try_file(struct place *pl, const struct ntr_safedir *d, const char *dir,
                    uint32_t slots, void **map) {
  struct ntr_ring *ring = pl->ring;
  char name[256];
  int fd = -1, rc;
  for (int attempt = 0; attempt < 16 && fd < 0; attempt++) {
    rc = ntr_ring_name(name, sizeof name, NULL, pl->job, pl->host, getpid(), attempt);
    if (!rc)
      rc = ntr_ring_name(ring->path, sizeof ring->path, dir, pl->job, pl->host, getpid(), attempt);
    if (rc)
      return rc;
    fd = openat(d->fd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0)
      break;
    if (errno != EEXIST)
      return -errno;
    /* A leftover regular file (an earlier process with our pid) is evidence:
     * keep it and pick the next name.  Anything else was planted: refuse. */
    struct stat st;
    if (fstatat(d->fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
      return -EEXIST;
  }
  if (fd < 0)
    return -EEXIST;
  uint64_t size = file_bytes(slots);
  struct ntr_xfsz xfsz;
  ntr_xfsz_block(&xfsz); /* past RLIMIT_FSIZE: EFBIG, not death by SIGXFSZ */
  int e;
  do
    e = posix_fallocate(fd, 0, (off_t)size);
  while (e == EINTR);
  ntr_xfsz_restore(&xfsz);
  rc = -e;
  if (!rc) {
    *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (*map == MAP_FAILED)
      rc = -errno;
  }
  close(fd);
  if (rc) {
    unlinkat(d->fd, name, 0);
    ring->path[0] = '\0';
  }
  return rc;
}

/* The ring's share of the rings' budget in d (ring_budget.h), then halving
 * while the reservation fails for lack of space.  The directory is locked
 * from the scan to the reservation, so ranks starting at once see each
 * other's rings.  -ENOSPC with pl->over_budget: even the smallest ring does
 * not fit what is left of the budget. */
static int try_dir(struct place *pl, const struct ntr_safedir *d, const char *dir, uint32_t *slots,
                   void **map, int *share_cut) {
  uint32_t s = pl->want;
  struct ntr_ring_budget *b = &pl->bud;
  *share_cut = 0;
  pl->over_budget = 0;
  uint64_t lim;
  if (ntr_fsize_limit(&lim) && file_bytes(s) > lim) { /* no file may pass it, whatever is free */
    s = fit(s, lim);
    pl->fsize_cut = 1;
  }
  int locked = ntr_ring_budget_lock(d->fd);
  int rc = 0;
  if (ntr_ring_budget_scan(d->fd, pl->host, b) == 0 && b->total) {
    /* Known local ranks: each its equal part of the budget.  Unknown: half
     * of what is left, so however many come, each finds a part. */
    uint64_t share = pl->local_ranks > 0 ? b->budget / (uint64_t)pl->local_ranks : b->room / 2;
    if (share > b->room)
      share = b->room;
    s = fit(s, share);
    *share_cut = s < pl->want;
    if (file_bytes(s) > b->room) {
      pl->over_budget = 1;
      rc = -ENOSPC;
    }
  }
  while (!rc) {
    rc = try_file(pl, d, dir, s, map);
    if (!rc) {
      *slots = s;
      break;
    }
    if (!space_error(rc) || s <= MIN_SLOTS)
      break;
    s /= 2;
    rc = 0;
  }
  if (locked)
    ntr_ring_budget_unlock(d->fd);
  return rc;
}

/* "the rings in a directory may take a third of its file system together
 * (21.3 MiB; 5 rings hold 19.6 MiB there) and leave 32.0 MiB of it free" */
static void say_budget(struct ntr_sb *sb, const struct ntr_ring_budget *b) {
  ntr_sb_str(sb, "the rings in a directory may take a third of its file system together (");
  ntr_sb_mib(sb, b->budget);
  ntr_sb_str(sb, "; ");
  ntr_sb_u64(sb, b->rings);
  ntr_sb_str(sb, " ring(s) hold ");
  ntr_sb_mib(sb, b->used);
  ntr_sb_str(sb, " there) and leave ");
  ntr_sb_mib(sb, b->reserve);
  ntr_sb_str(sb, " of it free");
}

static void say_ring(struct ntr_sb *sb, uint32_t slots) {
  ntr_sb_u64(sb, slots);
  ntr_sb_str(sb, " records (");
  ntr_sb_mib(sb, file_bytes(slots));
  ntr_sb_str(sb, ")");
}

/* "; D holds 2 ring(s) of dead processes (20.6 MiB) that count against
 * that budget: `nccltrace collect --rings D` turns them into dumps" */
static void say_dead(struct ntr_sb *sb, const struct ntr_ring_budget *b, const char *dir) {
  if (!b->dead)
    return;
  if (sb->len)
    ntr_sb_str(sb, "; ");
  ntr_sb_str(sb, dir);
  ntr_sb_str(sb, " holds ");
  ntr_sb_u64(sb, b->dead);
  ntr_sb_str(sb, " ring(s) of dead processes (");
  ntr_sb_mib(sb, b->dead_bytes);
  ntr_sb_str(sb, ") that count against the rings' budget there: `nccltrace collect --rings ");
  ntr_sb_str(sb, dir);
  ntr_sb_str(sb, "` turns them into dumps");
}

/* "ring directory D is a symlink owned by uid U" and the like. */
static void say_refused(struct place *pl, const char *dir, int rc, const struct ntr_safedir *d) {
  ntr_safedir_say(&pl->note, "ring directory ", dir, rc, d);
  pl->noted = 1;
}

/* Open dir (step 1 or 3); a refused one is replaced by a private sibling
 * (when private_near) or a private directory under parent with prefix. */
static int open_dir(struct place *pl, const char *dir, struct ntr_safedir *d, char *used,
                    size_t cap, int quiet_refusal) {
  int rc = ntr_safedir_open(d, dir, NTR_SAFEDIR_CREATE | NTR_SAFEDIR_NOFOLLOW_LAST);
  if (!rc) {
    ntr_strlcpy(used, dir, cap);
    return 0;
  }
  if (rc != -ELOOP && rc != -EPERM)
    return rc;
  if (!quiet_refusal) {
    say_refused(pl, dir, rc, d);
    ntr_sb_str(&pl->note, "; ");
  }
  rc = ntr_safedir_sibling(d, dir, used, cap);
  if (!rc)
    pl->ring->own_dir = 1;
  return rc;
}

static void drop_own_dir(struct ntr_ring *ring, const char *dir) {
  if (ring->own_dir)
    rmdir(dir);
  ring->own_dir = 0;
}

/* Step 3's directories, /nccltrace-<uid> in each: which 0 is $TMPDIR when
 * it is an absolute path, which 1 is /tmp (also after an unusable $TMPDIR).
 * @return 0, -ENOENT no such candidate, -ENAMETOOLONG. */
static int other_dir(int which, char *out, size_t cap) {
  const char *t = ntr_env_get("TMPDIR");
  if (which == 0 && !(t && t[0] == '/'))
    return -ENOENT;
  struct ntr_sb sb;
  ntr_sb_init(&sb, out, cap);
  ntr_sb_str(&sb, which == 0 ? t : "/tmp");
  ntr_sb_str(&sb, "/nccltrace-");
  ntr_sb_u64(&sb, geteuid());
  return sb.overflow ? -ENAMETOOLONG : 0;
}

int ntr_ring_place(struct ntr_ring *ring, const struct ntr_ring_config *cfg, uint32_t *slots,
                   void **map) {
  struct place pl = {.ring = ring, .job = cfg->job_id, .want = *slots};
  char host[64];
  if (gethostname(host, sizeof host) != 0)
    ntr_strlcpy(host, "unknown", sizeof host);
  host[sizeof host - 1] = '\0';
  pl.host = host;
  int32_t r, lr, ws;
  ntr_env_launcher(&r, &lr, &ws, &pl.local_ranks);
  ntr_sb_init(&pl.note, ring->note, sizeof ring->note);

  struct ntr_safedir d;
  int rc, share_cut = 0;
  if (!cfg->fallback) {
    rc = ntr_safedir_open(&d, cfg->dir, NTR_SAFEDIR_CREATE | NTR_SAFEDIR_NOFOLLOW_LAST);
    if (rc)
      return rc;
    rc = try_file(&pl, &d, cfg->dir, *slots, map);
    close(d.fd);
    if (!rc) {
      ntr_strlcpy(ring->dir, cfg->dir, sizeof ring->dir);
      ring->place = NTR_PLACE_DIR;
    }
    return rc;
  }

  /* 1 + 2: the configured directory (or its private sibling) */
  uint64_t first_dev = 0, first_ino = 0;
  struct ntr_ring_budget first;
  memset(&first, 0, sizeof first);
  rc = open_dir(&pl, cfg->dir, &d, ring->dir, sizeof ring->dir, 0);
  if (!rc) {
    first_dev = d.dev;
    first_ino = d.ino;
    rc = try_dir(&pl, &d, ring->dir, slots, map, &share_cut);
    close(d.fd);
    first = pl.bud;
    if (!rc) {
      ring->place = ring->own_dir ? NTR_PLACE_SIBLING : NTR_PLACE_DIR;
      uint64_t lim;
      if (*slots < pl.want && pl.fsize_cut && ntr_fsize_limit(&lim) && file_bytes(*slots * 2) > lim) {
        ntr_sb_str(&pl.note, "ring of ");
        say_ring(&pl.note, *slots);
        ntr_sb_str(&pl.note, " instead of ");
        say_ring(&pl.note, pl.want);
        ntr_sb_str(&pl.note, " in ");
        ntr_sb_str(&pl.note, ring->dir);
        ntr_sb_str(&pl.note, ": no file of this process may pass RLIMIT_FSIZE=");
        ntr_sb_u64(&pl.note, lim);
        ntr_sb_str(&pl.note, " bytes (ulimit -f)");
      } else if (*slots < pl.want) {
        ntr_sb_str(&pl.note, share_cut ? "ring of " : "too little free space in ");
        if (share_cut) {
          say_ring(&pl.note, *slots);
          ntr_sb_str(&pl.note, " instead of ");
          say_ring(&pl.note, pl.want);
          ntr_sb_str(&pl.note, " in ");
          ntr_sb_str(&pl.note, ring->dir);
          ntr_sb_str(&pl.note, ": ");
          say_budget(&pl.note, &first);
          if (pl.local_ranks > 0) {
            ntr_sb_str(&pl.note, ", shared by ");
            ntr_sb_i64(&pl.note, pl.local_ranks);
            ntr_sb_str(&pl.note, " local rank(s)");
          }
          ntr_sb_str(&pl.note, " (NCCLTRACE_RING)");
        } else {
          ntr_sb_str(&pl.note, ring->dir);
          ntr_sb_str(&pl.note, " for ");
          say_ring(&pl.note, pl.want);
          ntr_sb_str(&pl.note, "; a ring of ");
          say_ring(&pl.note, *slots);
          ntr_sb_str(&pl.note, " is used instead");
        }
      } else if (pl.noted) {
        ntr_sb_str(&pl.note, "the ring is in ");
        ntr_sb_str(&pl.note, ring->dir);
      }
      say_dead(&pl.note, &first, ring->dir);
      return 0;
    }
    drop_own_dir(ring, ring->dir);
    ntr_sb_str(&pl.note, "no room for a ring in ");
    ntr_sb_str(&pl.note, ring->dir);
    if (pl.over_budget) {
      ntr_sb_str(&pl.note, ": ");
      say_budget(&pl.note, &first);
    } else {
      ntr_sb_str(&pl.note, " (");
      ntr_sb_errno(&pl.note, rc);
      ntr_sb_str(&pl.note, ")");
    }
    say_dead(&pl.note, &first, ring->dir);
  } else if (!pl.noted) {
    ntr_sb_str(&pl.note, "cannot use ring directory ");
    ntr_sb_str(&pl.note, cfg->dir);
    ntr_sb_str(&pl.note, " (");
    ntr_sb_errno(&pl.note, rc);
    ntr_sb_str(&pl.note, ")");
  } else {
    ntr_sb_str(&pl.note, "no private directory there (");
    ntr_sb_errno(&pl.note, rc);
    ntr_sb_str(&pl.note, ")");
  }
  pl.noted = 1;

  /* 3: another directory, unless it is the same one: $TMPDIR, then /tmp */
  char other[1024], tried[2048] = "";
  uint64_t seen_dev[3] = {first_dev}, seen_ino[3] = {first_ino};
  int nseen = first_dev || first_ino ? 1 : 0;
  struct ntr_sb tr;
  ntr_sb_init(&tr, tried, sizeof tried);
  for (int which = 0; which < 2; which++) {
    if (other_dir(which, other, sizeof other) != 0)
      continue;
    if (tr.len)
      ntr_sb_str(&tr, " nor in ");
    ntr_sb_str(&tr, other);
    if (open_dir(&pl, other, &d, ring->dir, sizeof ring->dir, 1) != 0)
      continue;
    rc = -EEXIST;
    int seen = 0;
    for (int k = 0; k < nseen; k++)
      seen |= d.dev == seen_dev[k] && d.ino == seen_ino[k];
    if (!seen) /* $TMPDIR may be /tmp, or the configured directory */
      rc = try_dir(&pl, &d, ring->dir, slots, map, &share_cut);
    seen_dev[nseen] = d.dev;
    seen_ino[nseen++] = d.ino;
    close(d.fd);
    if (!rc) {
      ring->place = NTR_PLACE_FALLBACK;
      ntr_sb_str(&pl.note, "; a ring of ");
      say_ring(&pl.note, *slots);
      ntr_sb_str(&pl.note, " is in ");
      ntr_sb_str(&pl.note, ring->dir);
      ntr_sb_str(&pl.note, " instead");
      return 0;
    }
    drop_own_dir(ring, ring->dir);
  }

  /* 4: anonymous memory */
  ring->dir[0] = '\0';
  ring->path[0] = '\0';
  *slots = pl.want;
  *map = mmap(NULL, file_bytes(pl.want), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (*map == MAP_FAILED)
    return -ENOMEM;
  ring->anon = 1;
  ring->place = NTR_PLACE_ANON;
  ntr_sb_str(&pl.note, "; nor in ");
  ntr_sb_str(&pl.note, tried);
  ntr_sb_str(&pl.note, ": the ring is in anonymous memory, so recording and dumps work but the "
                       "ring does not survive the process (nothing for `nccltrace collect` after "
                       "a SIGKILL, nor for `nccltrace status`)");
  return 0;
}

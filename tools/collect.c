/* collect.c -- `nccltrace collect [--rings R] [--dir D]`: turn the ring files
 * of processes that no longer exist into dumps (trigger "collected"), and
 * remove each ring only once its dump is safely on disk.  A dump its process
 * never finished (killed mid-write: `.nccltrace-....zst.tmp` left in D) is
 * salvaged into a finished dump whose trigger reason starts "salvaged", or
 * removed when the process's ring was collected (the ring holds more).
 *
 * Thread-safety: single-threaded command.  Not signal-safe.
 * A ring is held with a non-blocking exclusive flock while it is converted,
 * so two collects running at once never dump the same ring twice.  Rings of
 * live processes and rings written on another host (a shared directory) are
 * never touched: pid numbers mean nothing across hosts.  With --job ID only
 * that job's rings (and leftover dumps) are touched: a directory shared by
 * several jobs is never collected wholesale by one of them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include "recorder/dump.h"
#include "tools/ntt.h"

static int mkdir_p(const char *dir) {
  char p[4096];
  snprintf(p, sizeof p, "%s", dir);
  for (char *s = p + 1; *s; s++) {
    if (*s != '/')
      continue;
    *s = '\0';
    if (mkdir(p, 0700) != 0 && errno != EEXIST)
      return -1;
    *s = '/';
  }
  return mkdir(p, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

void ntt_collect_trigger(const struct ntt_image *img, struct ntr_trigger *t) {
  const struct ntr_ring_header *h = &img->hdr;
  char sig[32];
  memset(t, 0, sizeof *t);
  t->kind = NTR_TRIG_COLLECTED;
  t->tsc = ntt_image_last_tsc(img);
  t->lost = img->lost;
  if (h->proc_state == NTR_PROC_EXITED) {
    t->exit_code = h->exit_code;
    snprintf(t->reason, sizeof t->reason, "collected: pid %d exited with code %d", h->pid, h->exit_code);
  } else if (h->proc_state == NTR_PROC_SIGNALED) {
    t->signo = h->signo;
    snprintf(t->reason, sizeof t->reason, "collected: pid %d died of %s", h->pid,
             ntt_signal_name(h->signo, sig, sizeof sig));
  } else if (h->proc_state == NTR_PROC_EXEC) {
    snprintf(t->reason, sizeof t->reason, "collected: pid %d replaced its program by exec", h->pid);
  } else {
    /* The ring still says "running": nothing got to run at the end. */
    snprintf(t->reason, sizeof t->reason, "collected: pid %d vanished without exit (killed?)", h->pid);
  }
}

/* @return 0 converted or left alone on purpose, 1 failed, 2 unreadable. */
static int collect_one(const char *ring, const char *dir, const char *myhost, const char *job) {
  char sr[4096], se[512];
  ntt_esc(ring, sr, sizeof sr);
  /* O_NONBLOCK: a FIFO put in place of the ring must not hang us. */
  int fd = open(ring, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    if (errno == ENOENT)
      return 0; /* its process removed it meanwhile (clean exit) */
    fprintf(stderr, "nccltrace: %s: %s\n", sr, strerror(errno));
    return 2;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    printf("%s: being collected by another nccltrace, skipped\n", sr);
    close(fd);
    return 0;
  }
  struct ntt_image img;
  char err[512];
  int salvaged = 0;
  if (ntt_image_load(ring, 0, &img, err, sizeof err)) {
    /* A writer killed mid-update can leave a damaged ring: keep what is intact. */
    char err2[512];
    if (ntt_image_load(ring, 1, &img, err2, sizeof err2)) {
      fprintf(stderr, "nccltrace: %s\n", ntt_esc(err, se, sizeof se));
      close(fd);
      return 2;
    }
    salvaged = 1;
  }
  int rc = 0;
  char id[64];
  snprintf(id, sizeof id, "%.*s", 63, img.hdr.job_id);
  if (job && strcmp(id, job) != 0) {
    char e1[128];
    printf("%s: job %s, not %s: left alone\n", sr, ntt_esc(id[0] ? id : "-", e1, sizeof e1), ntt_esc(job, se, sizeof se));
  } else if (strcmp(img.hdr.host, myhost) != 0) {
    struct ntt_ident id;
    ntt_ident_of(&img.hdr, &id);
    printf("%s: written on host %s, not %s: left alone\n", sr, id.host, myhost);
  } else if (img.pid_alive) {
    printf("%s: pid %d is alive: left alone\n", sr, img.hdr.pid);
  } else {
    struct ntr_trigger trig;
    char out[4096] = "";
    ntt_collect_trigger(&img, &trig);
    int w = ntr_dump_write_image(dir, &img.hdr, img.comms, img.ncomms, img.stacks, img.nstacks, img.recs,
                                 img.nrecs, img.strs, img.str_len, &trig, out, sizeof out);
    if (w != 0) {
      fprintf(stderr, "nccltrace: %s: cannot write a dump into %s: %s; ring kept\n", sr, dir, strerror(-w));
      rc = 1;
    } else if (unlink(ring) != 0) {
      fprintf(stderr, "nccltrace: %s: dumped to %s but cannot remove the ring: %s\n", sr, out, strerror(errno));
      rc = 1;
    } else {
      printf("%s: pid %d gone, %llu records%s -> %s\n", sr, img.hdr.pid, (unsigned long long)img.nrecs,
             salvaged ? " (salvaged from a damaged ring)" : "", out);
    }
  }
  ntt_image_free(&img);
  close(fd);
  return rc;
}

/* Leftover temp files of unfinished dumps in dir: salvage what they hold.
 * A temp file of a live process on this host is being written: left alone. */
static int salvage_tmps(const char *dir, const char *myhost, const char *job) {
  DIR *d = opendir(dir);
  if (!d)
    return 0;
  int worst = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t l = strlen(e->d_name);
    if (strncmp(e->d_name, ".nccltrace-", 11) != 0 || l < 16 || strcmp(e->d_name + l - 4, ".tmp") != 0)
      continue;
    char path[8192], raw[4096];
    if (snprintf(raw, sizeof raw, "%s/%s", dir, e->d_name) >= (int)sizeof raw)
      continue;
    ntt_esc(raw, path, sizeof path);
    /* Only our own regular files: a temp file another user put into a
     * shared dump directory must not become a dump of ours. */
    struct stat st;
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
        st.st_uid != geteuid()) {
      printf("%s: not a regular file of yours: left alone\n", path);
      continue;
    }
    struct ntt_image img;
    char err[512];
    if (ntt_image_load(raw, 1, &img, err, sizeof err)) {
      char se[512];
      printf("%s: unfinished dump, nothing salvageable (%s): left alone\n", path, ntt_esc(err, se, sizeof se));
      continue;
    }
    char id[64];
    snprintf(id, sizeof id, "%.*s", 63, img.hdr.job_id);
    if (job && strcmp(id, job) != 0) {
      char e1[128], e2[128];
      printf("%s: unfinished dump of job %s, not %s: left alone\n", path, ntt_esc(id[0] ? id : "-", e1, sizeof e1),
             ntt_esc(job, e2, sizeof e2));
      ntt_image_free(&img);
      continue;
    }
    if (strcmp(img.hdr.host, myhost) == 0 && kill((pid_t)img.hdr.pid, 0) == 0) {
      printf("%s: pid %d is alive (still writing?): left alone\n", path, img.hdr.pid);
      ntt_image_free(&img);
      continue;
    }
    struct ntr_trigger trig = img.trigger;
    if (!img.has_trigger) {
      memset(&trig, 0, sizeof trig);
      trig.kind = NTR_TRIG_COLLECTED;
      trig.tsc = ntt_image_last_tsc(&img);
    }
    char was[sizeof trig.reason];
    ntt_field_str(trig.reason, sizeof trig.reason, was, sizeof was);
    /* "salvaged: <the trigger's own reason>", cut to the field */
    char reason[sizeof trig.reason + 16];
    snprintf(reason, sizeof reason, "salvaged: %s", was);
    memcpy(trig.reason, reason, sizeof trig.reason - 1);
    trig.reason[sizeof trig.reason - 1] = '\0';
    char out[4096] = "";
    int w = ntr_dump_write_image(dir, &img.hdr, img.comms, img.ncomms, img.stacks, img.nstacks, img.recs,
                                 img.nrecs, img.strs, img.str_len, &trig, out, sizeof out);
    if (w != 0) {
      fprintf(stderr, "nccltrace: %s: cannot write the salvaged dump into %s: %s; kept\n", path, dir, strerror(-w));
      worst = 1;
    } else {
      unlink(raw);
      printf("%s: unfinished dump of pid %d, %llu records%s -> %s\n", path, img.hdr.pid,
             (unsigned long long)img.nrecs, img.salvaged ? " (salvaged, damaged)" : "", out);
    }
    ntt_image_free(&img);
  }
  closedir(d);
  return worst;
}

int ntt_collect_main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) /* many hosts: collect_via.c */
    if (!strncmp(argv[i], "--host", 6) || !strncmp(argv[i], "--via", 5))
      return ntt_collect_via_main(argc, argv);
  static const struct option opts[] = {
      {"rings", required_argument, NULL, 'r'}, {"dir", required_argument, NULL, 'd'},
      {"job", required_argument, NULL, 'j'},   {"help", no_argument, NULL, 'h'}, {0}};
  char rings[4096], dir[4096];
  const char *job = NULL;
  int named = ntt_default_ring_dir(rings, sizeof rings);
  ntt_default_dump_dir(dir, sizeof dir);
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "r:d:j:h", opts, NULL)) != -1) {
    switch (c) {
    case 'r': snprintf(rings, sizeof rings, "%s", optarg); named = 1; break;
    case 'd': snprintf(dir, sizeof dir, "%s", optarg); break;
    case 'j': job = optarg; break;
    case 'h': ntt_usage_cmd(stdout, "collect"); return NTT_EXIT_OK;
    default: fprintf(stderr, "usage: nccltrace collect [--rings R] [--dir D] [--job ID]\n"); return NTT_EXIT_INPUT;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "usage: nccltrace collect [--rings R] [--dir D] [--job ID]\n");
    return NTT_EXIT_INPUT;
  }
  /* As the recorder stores it (struct ntr_ring_header.host): 63 bytes. */
  char host[64] = "";
  if (gethostname(host, sizeof host) != 0)
    snprintf(host, sizeof host, "unknown");
  host[sizeof host - 1] = '\0';
  int tmp_rc = salvage_tmps(dir, host, job);
  char **list = NULL, why[512], shown[4096];
  ntt_esc(rings, shown, sizeof shown);
  int n = ntt_list_rings(rings, named, &list, why, sizeof why);
  if (n < 0 && errno != ENOENT) {
    fprintf(stderr, "nccltrace: %s: %s\n", shown, why);
    return NTT_EXIT_INPUT;
  }
  if (n <= 0) {
    /* Name every place looked at: a ring the tracer moved elsewhere is
     * never hidden behind "nothing". */
    char places[12288];
    ntt_ring_places(rings, places, sizeof places);
    printf("no ring files in %s: nothing to collect\n", places);
    return tmp_rc;
  }
  if (mkdir_p(dir) != 0) {
    fprintf(stderr, "nccltrace: %s: %s\n", dir, strerror(errno));
    ntt_paths_free(list, n);
    return NTT_EXIT_FAIL;
  }
  int worst = tmp_rc;
  for (int i = 0; i < n; i++) {
    int rc = collect_one(list[i], dir, host, job);
    if (rc == 2 || (rc == 1 && worst != 2))
      worst = rc;
  }
  ntt_paths_free(list, n);
  fflush(stdout);
  return worst == 2 ? NTT_EXIT_INPUT : worst;
}

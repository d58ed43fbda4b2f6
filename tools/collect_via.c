/* collect_via.c -- `nccltrace collect --host H... [--via 'CMD {host}']`: the
 * evidence of many hosts gathered into one directory, OUT/<host>/ each.
 *
 * Per host, a small shell script runs there: through CMD (with {host}
 * replaced, then ` sh -s` appended, the script on its stdin: `ssh {host}`,
 * `ip netns exec ntr-{host}`, `srun -w {host}` all work unquoted), or here
 * without --via (a shared file system: the per-host paths are read as they
 * are).  The script runs `nccltrace collect` on that host (only there can
 * it tell whose pids are gone), then streams back every dump of the host's
 * dump directory and every ring left in its ring directory (live processes':
 * a snapshot).  --rings and --dir may contain {host}.
 *
 * What comes back is hostile input: each file is announced by a line
 * `F <size> <name>`, the name must be a plain file name of a dump or ring
 * (no '/', no leading '.'), the size is bounded, and files are created
 * with O_EXCL | O_NOFOLLOW inside OUT/<host>/ only.  A host whose command
 * fails or whose stream is malformed is named and the others still come.
 *
 * Thread-safety: single-threaded command.  Not signal-safe.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tools/ntt.h"

#define CV_MAX_HOSTS 4096
#define CV_MAX_FILE (4ull << 30) /* a ring or dump larger than this is not ours */

/* Replace every {host} of tmpl by host into out. @return 0, -1 when too long. */
static int cv_expand(const char *tmpl, const char *host, char *out, size_t len) {
  size_t o = 0, hl = strlen(host);
  for (const char *s = tmpl; *s;) {
    if (!strncmp(s, "{host}", 6)) {
      if (o + hl >= len)
        return -1;
      memcpy(out + o, host, hl);
      o += hl;
      s += 6;
    } else {
      if (o + 1 >= len)
        return -1;
      out[o++] = *s++;
    }
  }
  out[o] = '\0';
  return 0;
}

/* s single-quoted for sh into out. @return 0, -1 when too long. */
static int cv_quote(const char *s, char *out, size_t len) {
  size_t o = 0;
  if (len < 3)
    return -1;
  out[o++] = '\'';
  for (; *s; s++) {
    const char *piece = *s == '\'' ? "'\\''" : NULL;
    size_t pl = piece ? 4 : 1;
    if (o + pl + 2 > len)
      return -1;
    if (piece)
      memcpy(out + o, piece, pl);
    else
      out[o] = *s;
    o += pl;
  }
  out[o++] = '\'';
  out[o] = '\0';
  return 0;
}

/* A name a host may send: [A-Za-z0-9._-], not starting with '.', ending
 * .zst or .ring; and the same charset for host names (directory names). */
static int cv_name_ok(const char *n, int file) {
  size_t l = strlen(n);
  if (!l || l > 200 || n[0] == '.')
    return 0;
  for (size_t i = 0; i < l; i++)
    if (!((n[i] >= 'a' && n[i] <= 'z') || (n[i] >= 'A' && n[i] <= 'Z') || (n[i] >= '0' && n[i] <= '9') ||
          n[i] == '.' || n[i] == '_' || n[i] == '-'))
      return 0;
  if (!file)
    return 1;
  return (l > 4 && !strcmp(n + l - 4, ".zst")) || (l > 5 && !strcmp(n + l - 5, ".ring"));
}

/* The script run on a host: collect there, then stream the files. */
static int cv_script(const char *self, const char *rings, const char *dir, char *out, size_t len) {
  char qs[4200], qr[4200], qd[4200];
  if (cv_quote(self, qs, sizeof qs) || (rings && cv_quote(rings, qr, sizeof qr)) ||
      (dir && cv_quote(dir, qd, sizeof qd)))
    return -1;
  int n = snprintf(out, len,
                   "R=%s\nD=%s\n"
                   "[ -n \"$R\" ] || R=${NCCLTRACE_RING_DIR:-/dev/shm/nccltrace-$(id -u)}\n"
                   "[ -n \"$D\" ] || D=${NCCLTRACE_DIR:-nccltrace-dumps}\n"
                   "N=%s\n[ -x \"$N\" ] || N=nccltrace\n"
                   "\"$N\" collect --rings \"$R\" --dir \"$D\" >&2\n"
                   "for f in \"$D\"/*.zst \"$R\"/*.ring; do\n"
                   "  [ -f \"$f\" ] && [ ! -L \"$f\" ] || continue\n"
                   "  n=$(wc -c < \"$f\") || continue\n"
                   "  printf 'F %%s %%s\\n' $n \"${f##*/}\"\n"
                   "  head -c $n \"$f\"\n"
                   "done\n"
                   "printf 'E\\n'\n",
                   rings ? qr : "''", dir ? qd : "''", qs);
  return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* One header line from f (at most len-1 bytes). @return 0, -1 EOF or too long. */
static int cv_line(FILE *f, char *b, size_t len) {
  size_t o = 0;
  int c;
  while ((c = getc(f)) != EOF && c != '\n')
    if (o + 1 < len)
      b[o++] = (char)c;
    else
      return -1;
  b[o] = '\0';
  return c == EOF ? -1 : 0;
}

/* Copy n bytes of the stream into path (new file). @return 0, -errno,
 * 1 when the stream ended early. */
static int cv_copy(FILE *in, const char *path, unsigned long long n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  int err = fd < 0 ? -errno : 0;
  char buf[65536];
  while (n) {
    size_t want = n < sizeof buf ? (size_t)n : sizeof buf;
    size_t got = fread(buf, 1, want, in);
    if (!got)
      break;
    if (!err && write(fd, buf, got) != (ssize_t)got)
      err = -errno;
    n -= got;
  }
  if (fd >= 0)
    close(fd);
  if (err || n)
    unlink(path);
  return n ? 1 : err;
}

/* Gather one host. @return 0 ok, 1 failed (said). */
static int cv_host(const char *via, const char *host, const char *rings_t, const char *dir_t, const char *self,
                   const char *out) {
  char cmd[8192], rings[4096], dir[4096], script[16384], hdir[4400];
  if ((via && cv_expand(via, host, cmd, sizeof cmd - 8)) || (rings_t && cv_expand(rings_t, host, rings, sizeof rings)) ||
      (dir_t && cv_expand(dir_t, host, dir, sizeof dir)) ||
      cv_script(self, rings_t ? rings : NULL, dir_t ? dir : NULL, script, sizeof script)) {
    fprintf(stderr, "nccltrace: collect: host %s: command or paths too long\n", host);
    return 1;
  }
  if (via)
    strcat(cmd, " sh -s");
  else
    snprintf(cmd, sizeof cmd, "sh -s");
  snprintf(hdir, sizeof hdir, "%s/%s", out, host);
  if (mkdir(hdir, 0700) != 0 && errno != EEXIST) {
    fprintf(stderr, "nccltrace: collect: %s: %s\n", hdir, strerror(errno));
    return 1;
  }
  int pin[2], pout[2];
  if (pipe2(pin, O_CLOEXEC) || pipe2(pout, O_CLOEXEC)) {
    fprintf(stderr, "nccltrace: collect: pipe: %s\n", strerror(errno));
    return 1;
  }
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "nccltrace: collect: fork: %s\n", strerror(errno));
    return 1;
  }
  if (pid == 0) {
    dup2(pin[0], 0);
    dup2(pout[1], 1);
    /* the host's own report of what it collected goes to our stderr */
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
  }
  close(pin[0]);
  close(pout[1]);
  size_t sl = strlen(script), w = 0;
  while (w < sl) { /* the script is far below a pipe's buffer; a failed write means the command died */
    ssize_t k = write(pin[1], script + w, sl - w);
    if (k <= 0)
      break;
    w += (size_t)k;
  }
  close(pin[1]);
  FILE *in = fdopen(pout[0], "r");
  int dumps = 0, nrings = 0, bad = 0, ended = 0;
  char line[512];
  while (in && !bad && cv_line(in, line, sizeof line) == 0) {
    unsigned long long n;
    char name[256];
    int used = 0;
    if (!strcmp(line, "E")) {
      ended = 1;
      break;
    }
    if (sscanf(line, "F %llu %255s%n", &n, name, &used) != 2 || line[used] != '\0' || !cv_name_ok(name, 1) ||
        n > CV_MAX_FILE) {
      char se[600];
      fprintf(stderr, "nccltrace: collect: host %s sent a malformed line (%s): the rest of it is ignored\n", host,
              ntt_esc(line, se, sizeof se));
      bad = 1;
      break;
    }
    char path[4800];
    snprintf(path, sizeof path, "%s/%s", hdir, name);
    int rc = cv_copy(in, path, n);
    if (rc == 1) {
      fprintf(stderr, "nccltrace: collect: host %s: %s cut short\n", host, name);
      bad = 1;
    } else if (rc < 0) {
      fprintf(stderr, "nccltrace: collect: host %s: %s: %s (skipped)\n", host, path, strerror(-rc));
    } else if (strstr(name, ".ring")) {
      nrings++;
    } else {
      dumps++;
    }
  }
  if (in)
    fclose(in);
  else
    close(pout[0]);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
    ;
  int ok = !bad && ended && WIFEXITED(st) && WEXITSTATUS(st) == 0;
  if (!ok && !bad)
    fprintf(stderr, "nccltrace: collect: host %s: `%s` %s\n", host, cmd,
            !WIFEXITED(st) ? "was killed" : ended ? "failed" : "ended before its files were all sent");
  printf("%s: %d dumps, %d rings -> %s%s\n", host, dumps, nrings, hdir, ok ? "" : " (incomplete)");
  return ok ? 0 : 1;
}

int ntt_collect_via_main(int argc, char **argv) {
  static const struct option opts[] = {{"rings", required_argument, NULL, 'r'}, {"dir", required_argument, NULL, 'd'},
                                       {"host", required_argument, NULL, 'H'},  {"via", required_argument, NULL, 'v'},
                                       {"out", required_argument, NULL, 'o'},   {0}};
  const char *rings = NULL, *dir = NULL, *via = NULL, *out = "nccltrace-collected";
  const char **hosts = calloc(CV_MAX_HOSTS, sizeof *hosts);
  int nh = 0, c;
  optind = 1;
  while (hosts && (c = getopt_long(argc, argv, "r:d:H:v:o:", opts, NULL)) != -1) {
    switch (c) {
    case 'r': rings = optarg; break;
    case 'd': dir = optarg; break;
    case 'v': via = optarg; break;
    case 'o': out = optarg; break;
    case 'H':
      for (char *h = strtok(optarg, ","); h && nh < CV_MAX_HOSTS; h = strtok(NULL, ","))
        hosts[nh++] = h;
      break;
    default: free(hosts); goto usage;
    }
  }
  if (!hosts || optind < argc || !nh)
    goto usage;
  for (int i = 0; i < nh; i++)
    if (!cv_name_ok(hosts[i], 0)) {
      fprintf(stderr, "nccltrace: collect: host name '%s': letters, digits, '.', '_', '-' only\n", hosts[i]);
      free(hosts);
      return NTT_EXIT_INPUT;
    }
  char self[4096];
  ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
  if (sl <= 0) {
    fprintf(stderr, "nccltrace: collect: /proc/self/exe: %s\n", strerror(errno));
    free(hosts);
    return NTT_EXIT_FAIL;
  }
  self[sl] = '\0';
  if (mkdir(out, 0700) != 0 && errno != EEXIST) {
    fprintf(stderr, "nccltrace: collect: %s: %s\n", out, strerror(errno));
    free(hosts);
    return NTT_EXIT_FAIL;
  }
  int failed = 0;
  for (int i = 0; i < nh; i++)
    failed += cv_host(via, hosts[i], rings, dir, self, out);
  if (failed)
    fprintf(stderr, "nccltrace: collect: %d of %d hosts incomplete\n", failed, nh);
  free(hosts);
  return failed ? NTT_EXIT_FAIL : NTT_EXIT_OK;
usage:
  fprintf(stderr, "usage: nccltrace collect --host H[,H...] [--via 'CMD {host}'] [--rings R] [--dir D] "
                  "[--out O]\n");
  return NTT_EXIT_INPUT;
}

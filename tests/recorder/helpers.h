/* helpers.h -- tiny shared helpers for the recorder tests: each test is a
 * standalone program exiting 0 (pass), 1 (fail) or 77 (skip); assertions
 * are tests/nt_test.h's.
 * Thread-safety: t_reserve uses the calling thread's own cursor; the rest
 * are for the test's main thread.  Signal-safety: none. */
#ifndef NTR_TEST_HELPERS_H
#define NTR_TEST_HELPERS_H
#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../nt_test.h"

/* A fresh private directory under /tmp (removed by t_rmtree). */
/* A writer thread's records, as the interposer writes them: from the
 * thread's own block (recorder/ring.h).  One cursor per thread; call
 * t_cursor_reset when the thread switches rings (a fork child's new ring). */
#include "recorder/ring.h"
static __thread struct ntr_ring_cursor t_cur;
static inline struct ntr_record *t_reserve(struct ntr_ring *ring, uint64_t *pos) {
  return ntr_ring_reserve_in(ring, &t_cur, 0, pos);
}
static inline void t_cursor_reset(void) { memset(&t_cur, 0, sizeof t_cur); }

static inline void t_tmpdir(char *out, size_t cap) {
  snprintf(out, cap, "/tmp/ntr-test-XXXXXX");
  if (!mkdtemp(out)) {
    perror("mkdtemp");
    exit(1);
  }
}

/* rm -r of a test directory (one level of subdirectories is enough here). */
static inline void t_rmtree(const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  struct dirent *e;
  char p[4096];
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    size_t dl = strlen(dir), nl = strlen(e->d_name);
    if (dl + nl + 2 > sizeof p)
      continue;
    memcpy(p, dir, dl);
    p[dl] = '/';
    memcpy(p + dl + 1, e->d_name, nl + 1);
    struct stat st;
    if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
      chmod(p, 0700);
      t_rmtree(p);
    } else {
      unlink(p);
    }
  }
  closedir(d);
  rmdir(dir);
}

/* Number of directory entries whose name starts with prefix. */
static inline int t_count_files(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  int n = 0;
  if (!d)
    return -1;
  struct dirent *e;
  while ((e = readdir(d)))
    if (!strncmp(e->d_name, prefix, strlen(prefix)))
      n++;
  closedir(d);
  return n;
}

/* Open a ring of slots_ slots in a fresh temporary directory dir_ (an array). */
#define T_RING_OPEN(ring_, dir_, job_, slots_)                                       \
  do {                                                                               \
    t_tmpdir(dir_, sizeof dir_);                                                     \
    struct ntr_ring_config t_cfg_ = {.dir = dir_, .job_id = job_, .slots = slots_};  \
    NT_ASSERT_EQ(ntr_ring_open(ring_, &t_cfg_), 0);                                      \
  } while (0)

/* The test_ring_basic_* programs: a ring of `slots` slots for job `job` in
 * BASE/rings/sub (created by the open, parents too) under a fresh temporary
 * directory BASE.  base and dir are arrays. */
#define T_BASIC_OPEN(ring_, base_, dir_, job_, slots_)                               \
  do {                                                                               \
    t_tmpdir(base_, sizeof base_);                                                   \
    snprintf(dir_, sizeof dir_, "%s/rings/sub", base_);                              \
    struct ntr_ring_config t_cfg_ = {.dir = dir_, .job_id = job_, .slots = slots_};  \
    NT_ASSERT_EQ(ntr_ring_open(ring_, &t_cfg_), 0);                                      \
  } while (0)

/* This host's name as a ring file name carries it: [-.0-9A-Za-z] kept, '-'
 * and anything else as '_'. */
static inline void t_host_in_name(char *out, size_t cap) {
  char host[64];
  gethostname(host, sizeof host);
  host[sizeof host - 1] = 0;
  size_t i;
  for (i = 0; host[i] && i + 1 < cap && i < 63; i++)
    out[i] = (host[i] == '-' || host[i] == '.' || (host[i] >= '0' && host[i] <= '9') ||
              (host[i] >= 'a' && host[i] <= 'z') || (host[i] >= 'A' && host[i] <= 'Z'))
                 ? (host[i] == '-' ? '_' : host[i])
                 : '_';
  out[i] = 0;
}

/* The path a ring of job (as sanitized in the name) gets in dir, in this
 * process on this host. */
static inline void t_ring_path(char *out, size_t cap, const char *dir, const char *job) {
  char hs[64];
  t_host_in_name(hs, sizeof hs);
  snprintf(out, cap, "%s/nccltrace-%s-%s-%d.ring", dir, job, hs, (int)getpid());
}

/* Start the reader, then n writers (each gets its index as argument), join
 * the writers, set *done (release) and join the reader. */
static inline void t_run_writers(int n, void *(*writer)(void *), void *(*reader)(void *), int *done) {
  pthread_t w[64], rd;
  NT_ASSERT(n <= 64);
  NT_ASSERT_EQ(pthread_create(&rd, NULL, reader, NULL), 0);
  for (uintptr_t i = 0; i < (uintptr_t)n; i++)
    NT_ASSERT_EQ(pthread_create(&w[i], NULL, writer, (void *)i), 0);
  for (int i = 0; i < n; i++)
    pthread_join(w[i], NULL);
  __atomic_store_n(done, 1, __ATOMIC_RELEASE);
  pthread_join(rd, NULL);
}

/* Test-side body checksum: a record is "intact" when aux equals this. */
static inline unsigned long long t_mix(unsigned long long x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}
/* Fill every body word of a record from (writer, i); aux (the last word)
 * holds a checksum of the others, so a validated copy with a mixed body
 * is caught. */
static inline void t_fill(void *rec128, unsigned long long writer, unsigned long long i) {
  unsigned long long *w = (unsigned long long *)rec128;
  unsigned long long sum = 0;
  for (int k = 1; k < 15; k++)
    w[k] = t_mix((writer << 40) ^ (i << 4) ^ (unsigned long long)k);
  w[4] = (writer << 40) | i; /* count: who wrote it, which one */
  for (int k = 1; k < 15; k++)
    sum = t_mix(sum ^ w[k]);
  w[15] = sum;
}

static inline int t_intact(const void *rec128) {
  const unsigned long long *w = (const unsigned long long *)rec128;
  unsigned long long sum = 0;
  for (int k = 1; k < 15; k++)
    sum = t_mix(sum ^ w[k]);
  if (w[15] != sum)
    return 0;
  unsigned long long writer = w[4] >> 40, i = w[4] & ((1ull << 40) - 1);
  for (int k = 1; k < 15; k++)
    if (k != 4 && w[k] != t_mix((writer << 40) ^ (i << 4) ^ (unsigned long long)k))
      return 0;
  return 1;
}
#endif

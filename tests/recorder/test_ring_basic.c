/* test_ring_basic -- ring file creation: name, 0600 mode, 0700 directory,
 * header identity/offsets/clocks, the env block (secrets never recorded),
 * refusal of symlinked directories and planted symlinks (O_NOFOLLOW|O_EXCL),
 * leftover files from pid reuse, comm slot exhaustion, set_job rename. */
#include <errno.h>
#include <time.h>

#include "helpers.h"
#include "recorder/clock.h"
#include "recorder/env.h"
#include "recorder/ring.h"

static int env_has(const struct ntr_ring_header *h, const char *entry) {
  for (uint32_t off = 0; off < h->env_len;) {
    const char *e = h->env + off;
    if (!strcmp(e, entry))
      return 1;
    off += (uint32_t)strlen(e) + 1;
  }
  return 0;
}

static int env_has_name(const struct ntr_ring_header *h, const char *name) {
  size_t n = strlen(name);
  for (uint32_t off = 0; off < h->env_len;) {
    const char *e = h->env + off;
    if (!strncmp(e, name, n) && e[n] == '=')
      return 1;
    off += (uint32_t)strlen(e) + 1;
  }
  return 0;
}

int main(void) {
  char base[64], dir[128], path[512], host[64];
  t_tmpdir(base, sizeof base);
  snprintf(dir, sizeof dir, "%s/rings/sub", base); /* created, parents too */
  gethostname(host, sizeof host);
  host[sizeof host - 1] = 0;

  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("CUDA_VISIBLE_DEVICES", "0,1", 1);
  setenv("NCCL_IB_AUTH_TOKEN", "hunter2", 1);
  setenv("NCCLTRACE_SECRET", "s3cret", 1);
  setenv("nccl_password_x", "x", 1);
  setenv("HOME_TEST_VAR", "1", 1);
  static char big[NTR_ENV_BYTES + 100];
  memset(big, 'x', sizeof big - 1);
  setenv("NCCL_HUGE", big, 1); /* does not fit: left out whole, others kept */
  setenv("NCCL_IB_PASS", "pass-v1", 1);   /* not NCCL's: left out */
  setenv("CUDA_PWD", "pwd-v2", 1);        /* not CUDA's: left out */
  setenv("NCCL_MY_APP_SETTING", "1", 1);  /* NCCL_ prefix, not NCCL's variable */
  setenv("NCCL_IB_PKEY", "pkey-v3", 1);   /* NCCL's, name with KEY: masked */
  setenv("RANK", "3", 1);
  setenv("LOCAL_RANK", "1", 1);
  setenv("WORLD_SIZE", "8", 1);
  unsetenv("LOCAL_WORLD_SIZE");
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);

  struct ntr_ring_config cfg = {.dir = dir, .job_id = "job/1 x", .slots = 256};
  static struct ntr_ring ring;
  CHECK_EQ(ntr_ring_open(&ring, &cfg), 0);
  struct ntr_ring_header *h = ring.hdr;

  /* name: job sanitized, host, pid */
  char hs[64];
  size_t i;
  for (i = 0; host[i] && i < 63; i++)
    hs[i] = (host[i] == '-' || host[i] == '.' || (host[i] >= '0' && host[i] <= '9') ||
             (host[i] >= 'a' && host[i] <= 'z') || (host[i] >= 'A' && host[i] <= 'Z'))
                ? (host[i] == '-' ? '_' : host[i])
                : '_';
  hs[i] = 0;
  snprintf(path, sizeof path, "%s/nccltrace-job_1_x-%s-%d.ring", dir, hs, (int)getpid());
  CHECK(!strcmp(ring.path, path));

  struct stat st;
  CHECK_EQ(lstat(path, &st), 0);
  CHECK(S_ISREG(st.st_mode));
  CHECK_EQ(st.st_mode & 0777, 0600);
  CHECK_EQ((long long)st.st_size, (long long)h->file_size);
  CHECK_EQ(lstat(dir, &st), 0);
  CHECK_EQ(st.st_mode & 0777, 0700);

  /* header */
  CHECK(!memcmp(h->magic, NTR_RING_MAGIC, 8));
  CHECK_EQ(h->version, NTR_FORMAT_VERSION);
  CHECK_EQ(h->header_size, sizeof(struct ntr_ring_header));
  CHECK_EQ(h->record_size, 128);
  CHECK_EQ(h->slot_count, 256);
  CHECK_EQ(h->comm_max, NTR_COMM_MAX);
  CHECK_EQ(h->comm_recent, NTR_COMM_RECENT);
  CHECK_EQ(h->stack_max, NTR_STACK_MAX);
  CHECK_EQ(h->comm_offset, NTR_RING_HEADER_BYTES);
  CHECK(h->stack_offset >= h->comm_offset + NTR_COMM_MAX * sizeof(struct ntr_comm_state));
  CHECK(h->slot_offset >= h->stack_offset + NTR_STACK_MAX * sizeof(struct ntr_stack));
  CHECK(h->file_size >= h->slot_offset + 256 * 128);
  CHECK_EQ(h->slot_offset % 4096, 0);
  CHECK_EQ(h->pid, getpid());
  CHECK_EQ(h->ppid, getppid());
  CHECK_EQ(h->rank, 3);
  CHECK_EQ(h->local_rank, 1);
  CHECK_EQ(h->world_size, 8);
  CHECK_EQ(h->local_world_size, 4);
  CHECK(!strcmp(h->job_id, "job/1 x"));
  CHECK(!strcmp(h->host, host));
  CHECK(h->tracer_version[0] != 0);
  CHECK(h->exe[0] != 0 && !strncmp(h->exe, "test_ring_basic", strlen(h->exe)));
  CHECK_EQ(h->head, 0);
  CHECK_EQ(h->comm_count, 0);

  /* env block */
  CHECK(env_has(h, "NCCL_DEBUG=INFO"));
  CHECK(env_has(h, "CUDA_VISIBLE_DEVICES=0,1"));
  CHECK(env_has(h, "RANK=3"));
  CHECK(!env_has_name(h, "NCCL_IB_AUTH_TOKEN"));
  CHECK(!env_has_name(h, "NCCLTRACE_SECRET"));
  CHECK(!env_has_name(h, "nccl_password_x"));
  CHECK(!env_has_name(h, "HOME_TEST_VAR"));
  CHECK(!env_has_name(h, "PATH"));
  CHECK(memmem(h->env, h->env_len, "s3cret", 6) == NULL);
  CHECK(memmem(h->env, h->env_len, "hunter2", 7) == NULL);
  CHECK(h->env_len <= NTR_ENV_BYTES);
  CHECK(!env_has_name(h, "NCCL_HUGE"));
  CHECK(!env_has_name(h, "NCCL_IB_PASS"));
  CHECK(!env_has_name(h, "CUDA_PWD"));
  CHECK(!env_has_name(h, "NCCL_MY_APP_SETTING"));
  CHECK(env_has(h, "NCCL_IB_PKEY=***"));
  CHECK(memmem(h->env, h->env_len, "-v", 2) == NULL); /* none of the values above */
  CHECK_EQ(h->env[h->env_len - 1], '\0');
  {
    char small[16]; /* "RANK=3\0" fits, "NCCL_DEBUG=INFO\0" (16) fits, nothing cut */
    uint32_t n = ntr_env_capture(small, sizeof small);
    CHECK(n <= sizeof small);
    for (uint32_t off = 0; off < n;) {
      const char *e = small + off;
      size_t l = strnlen(e, n - off);
      CHECK(l < n - off);           /* NUL-terminated inside the buffer */
      CHECK(strchr(e, '=') != NULL); /* a whole NAME=VALUE */
      char name[16];
      size_t nl = (size_t)(strchr(e, '=') - e);
      memcpy(name, e, nl);
      name[nl] = '\0';
      CHECK(getenv(name) != NULL);
      off += (uint32_t)l + 1;
    }
  }
  CHECK_EQ(ntr_env_is_secret("NCCL_IB_Pkey"), 1);
  CHECK_EQ(ntr_env_is_secret("my_Credentials"), 1);
  CHECK_EQ(ntr_env_is_secret("OAuth"), 1);
  CHECK_EQ(ntr_env_is_secret("NCCL_SOCKET_IFNAME"), 0);
  CHECK_EQ(ntr_env_is_secret("NCCL_PASSPHRASE"), 1);
  CHECK_EQ(ntr_env_is_secret("cuda_pwd"), 1);
  CHECK_EQ(ntr_env_is_secret("NCCL_CREDS"), 1);

  /* clocks: ticks convert to the monotonic clock within 2 ms */
  CHECK(h->tsc_hz > 0);
  struct timespec ts;
  uint64_t t = ntr_clock_now();
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t mono = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  uint64_t conv = ntr_clock_to_mono_ns(h, t);
  CHECK(conv <= mono + 2000000 && conv + 2000000 >= mono);
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t real = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  conv = ntr_clock_to_real_ns(h, t);
  CHECK(conv <= real + 2000000 && conv + 2000000 >= real);
  CHECK(ntr_clock_to_mono_ns(h, h->tsc_base - 1000) <= h->mono_base_ns);
  /* tsc_hz 0 (uncalibrated or damaged header): the ticks are ns (clock.h) */
  static struct ntr_ring_header h0;
  h0 = *h;
  h0.tsc_hz = 0;
  CHECK_EQ(ntr_clock_to_mono_ns(&h0, h0.tsc_base + 1500), h0.mono_base_ns + 1500);
  CHECK_EQ(ntr_clock_to_real_ns(&h0, h0.tsc_base - 1500), h0.real_base_ns - 1500);

  /* comm slots: NTR_COMM_MAX, then NULL */
  for (unsigned c = 0; c < NTR_COMM_MAX; c++)
    CHECK(ntr_ring_comm_alloc(&ring) == &ring.comms[c]);
  CHECK(ntr_ring_comm_alloc(&ring) == NULL);
  CHECK(ntr_ring_comm_alloc(&ring) == NULL);
  CHECK_EQ(h->comm_count, NTR_COMM_MAX);

  /* set_job renames the file and records the id */
  CHECK_EQ(ntr_ring_set_job(&ring, "j2"), 0);
  CHECK(!strcmp(h->job_id, "j2"));
  CHECK(access(path, F_OK) != 0);
  snprintf(path, sizeof path, "%s/nccltrace-j2-%s-%d.ring", dir, hs, (int)getpid());
  CHECK(!strcmp(ring.path, path));
  CHECK_EQ(access(path, F_OK), 0);

  /* a leftover regular file of the same name (pid reuse): next name */
  static struct ntr_ring r2;
  struct ntr_ring_config cfg2 = {.dir = dir, .job_id = "j2", .slots = 64};
  CHECK_EQ(ntr_ring_open(&r2, &cfg2), 0);
  CHECK(strstr(r2.path, "~1.ring") != NULL);
  ntr_ring_close(&r2, 1);
  CHECK(access(r2.path, F_OK) != 0);

  /* a symlink planted at the ring path: open fails, target untouched */
  char victim[256];
  snprintf(victim, sizeof victim, "%s/victim", base);
  snprintf(path, sizeof path, "%s/nccltrace-evil-%s-%d.ring", dir, hs, (int)getpid());
  CHECK_EQ(symlink(victim, path), 0);
  struct ntr_ring_config cfg3 = {.dir = dir, .job_id = "evil", .slots = 64};
  int rc = ntr_ring_open(&r2, &cfg3);
  CHECK_EQ(rc, -EEXIST);
  CHECK(r2.hdr == NULL);
  CHECK(access(victim, F_OK) != 0);

  /* a ring directory that is a symlink: refused */
  char link_dir[256];
  snprintf(link_dir, sizeof link_dir, "%s/linkdir", base);
  CHECK_EQ(symlink(dir, link_dir), 0);
  struct ntr_ring_config cfg4 = {.dir = link_dir, .job_id = "x", .slots = 64};
  CHECK_EQ(ntr_ring_open(&r2, &cfg4), -ELOOP);
  /* not a directory */
  snprintf(link_dir, sizeof link_dir, "%s/file", base);
  FILE *f = fopen(link_dir, "w");
  CHECK(f != NULL);
  fclose(f);
  cfg4.dir = link_dir;
  CHECK(ntr_ring_open(&r2, &cfg4) < 0);
  /* not owned by us (only testable as root: chown to nobody) */
  if (geteuid() == 0) {
    char other[256];
    snprintf(other, sizeof other, "%s/other", base);
    CHECK_EQ(mkdir(other, 0700), 0);
    CHECK_EQ(chown(other, 65534, 65534), 0);
    cfg4.dir = other;
    CHECK_EQ(ntr_ring_open(&r2, &cfg4), -EPERM);
  }
  /* with fallback: the refused symlinked directory is replaced by a private
   * sibling (0700, ours), and the note says so */
  snprintf(link_dir, sizeof link_dir, "%s/linkdir", base);
  struct ntr_ring_config cfg5 = {.dir = link_dir, .job_id = "fb", .slots = 64, .fallback = 1};
  CHECK_EQ(ntr_ring_open(&r2, &cfg5), 0);
  CHECK(strstr(r2.note, "symlink") != NULL && strstr(r2.note, link_dir) != NULL);
  CHECK(!strncmp(r2.dir, link_dir, strlen(link_dir)) && r2.dir[strlen(link_dir)] == '-');
  CHECK_EQ(r2.own_dir, 1);
  CHECK_EQ(lstat(r2.dir, &st), 0);
  CHECK(S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700);
  CHECK_EQ(t_count_files(dir, "nccltrace-fb"), 0); /* nothing through the link */
  char fbdir[1024];
  snprintf(fbdir, sizeof fbdir, "%s", r2.dir);
  ntr_ring_close(&r2, 1);
  CHECK(access(fbdir, F_OK) != 0); /* the private directory goes with its ring */
  /* bad slot counts */
  cfg4.dir = dir;
  cfg4.slots = 100;
  CHECK_EQ(ntr_ring_open(&r2, &cfg4), -EINVAL);
  cfg4.slots = 32;
  CHECK_EQ(ntr_ring_open(&r2, &cfg4), -EINVAL);

  ntr_ring_close(&ring, 1);
  CHECK(access(ring.path, F_OK) != 0);
  t_rmtree(base);
  printf("ok\n");
  return 0;
}

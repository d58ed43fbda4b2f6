/* test_dump -- dump roundtrip and failure paths.
 * Roundtrip: a ring with records in the main ring and older ones only in a
 * quiet communicator's recent[]; the dump is decompressed here with
 * ZSTD_decompress and checked field by field with plain format.h code:
 * preamble, XXH64, the five sections, records deduplicated and oldest first,
 * the trigger's loss count, name, mode, no temp file.  ntr_dump_write_image
 * reproduces the same payload.  Failures (in children): RLIMIT_FSIZE ->
 * -EFBIG without dying of SIGXFSZ, an unwritable directory -> -EACCES, a
 * path under a file -> -ENOTDIR; never a temp file left behind. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <xxhash.h>
#include <zstd.h>

#include "helpers.h"
#include "recorder/dump.h"
#include "recorder/names.h"
#include "recorder/ring.h"

static struct ntr_ring ring;

static void put(unsigned long long writer, unsigned long long i, struct ntr_comm_state *cs) {
  uint64_t pos;
  struct ntr_record *r = t_reserve(&ring, &pos);
  t_fill(r, writer, i);
  ntr_ring_commit(&ring, r, pos, cs);
}

struct parsed {
  unsigned char *payload;
  size_t len;
  struct ntr_ring_header *hdr;
  struct ntr_comm_state *comms;
  size_t ncomms;
  struct ntr_stack *stacks;
  size_t nstacks;
  struct ntr_record *recs;
  size_t nrecs;
  struct ntr_trigger *trig;
  char *strs;
  uint32_t str_len;
};

static unsigned char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  NT_ASSERT(f != NULL);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = malloc((size_t)n);
  NT_ASSERT(buf && fread(buf, 1, (size_t)n, f) == (size_t)n);
  fclose(f);
  *len = (size_t)n;
  return buf;
}

static void parse_dump(const char *path, struct parsed *d) {
  size_t flen;
  unsigned char *file = read_file(path, &flen);
  struct ntr_dump_preamble pre;
  NT_ASSERT(flen >= sizeof pre);
  memcpy(&pre, file, sizeof pre);
  NT_ASSERT(!memcmp(pre.magic, NTR_DUMP_MAGIC, 8));
  NT_ASSERT_EQ(pre.version, NTR_FORMAT_VERSION);
  NT_ASSERT_EQ(pre.preamble_size, 64);
  NT_ASSERT_EQ(pre.section_count, 7);
  NT_ASSERT_EQ(pre.flags & 1, 0); /* compressed */
  NT_ASSERT_EQ(flen, sizeof pre + pre.compressed_size);
  NT_ASSERT_EQ(ZSTD_getFrameContentSize(file + 64, pre.compressed_size), pre.payload_size);
  d->payload = malloc(pre.payload_size);
  size_t got = ZSTD_decompress(d->payload, pre.payload_size, file + 64, pre.compressed_size);
  NT_ASSERT(!ZSTD_isError(got));
  NT_ASSERT_EQ(got, pre.payload_size);
  NT_ASSERT_EQ(XXH64(d->payload, got, 0), pre.checksum);
  d->len = got;
  free(file);

  size_t off = 0;
  uint32_t want = NTR_SEC_HEADER;
  while (off < d->len) {
    struct ntr_section sec;
    NT_ASSERT(off + sizeof sec <= d->len);
    memcpy(&sec, d->payload + off, sizeof sec);
    off += sizeof sec;
    NT_ASSERT(sec.length <= d->len - off);
    NT_ASSERT_EQ(sec.type, want); /* sections come in type order */
    void *body = d->payload + off;
    switch (sec.type) {
    case NTR_SEC_HEADER:
      NT_ASSERT_EQ(sec.length, sizeof(struct ntr_ring_header));
      d->hdr = body;
      break;
    case NTR_SEC_COMMS:
      NT_ASSERT_EQ(sec.length % sizeof(struct ntr_comm_state), 0);
      d->comms = body;
      d->ncomms = sec.length / sizeof(struct ntr_comm_state);
      break;
    case NTR_SEC_STACKS:
      NT_ASSERT_EQ(sec.length % sizeof(struct ntr_stack), 0);
      d->stacks = body;
      d->nstacks = sec.length / sizeof(struct ntr_stack);
      break;
    case NTR_SEC_RECORDS:
      NT_ASSERT_EQ(sec.length % 128, 0);
      d->recs = body;
      d->nrecs = sec.length / 128;
      break;
    case NTR_SEC_TRIGGER:
      NT_ASSERT_EQ(sec.length, sizeof(struct ntr_trigger));
      d->trig = body;
      break;
    case NTR_SEC_PYTHREADS:
      NT_ASSERT_EQ(sec.length % sizeof(struct ntr_pythread), 0);
      break;
    case NTR_SEC_STRINGS:
      NT_ASSERT_EQ(sec.length % 8, 0);
      d->strs = body;
      d->str_len = (uint32_t)sec.length;
      break;
    }
    off += sec.length;
    want++;
  }
  NT_ASSERT_EQ(want, NTR_SEC_STRINGS + 1);
  NT_ASSERT_EQ(off, d->len);
}

/* Concurrent dumps: each returns 0 or -EBUSY, never blocks, never mixes. */
static int dump_ok, dump_busy_seen, dump_other;

static void *dumper(void *arg) {
  (void)arg;
  for (int i = 0; i < 4; i++) {
    struct ntr_trigger t = {.kind = NTR_TRIG_USER};
    int rc = ntr_dump_write(&ring, &t, NULL, 0);
    __atomic_fetch_add(rc == 0 ? &dump_ok : rc == -EBUSY ? &dump_busy_seen : &dump_other, 1,
                       __ATOMIC_RELAXED);
  }
  return NULL;
}

static int tmp_files(const char *dir) { return t_count_files(dir, ".nccltrace-"); }

/* Run fn in a child; @return its exit status (1 when killed by a signal). */
static int in_child(int (*fn)(const char *), const char *arg) {
  pid_t pid = fork();
  NT_ASSERT(pid >= 0);
  if (pid == 0)
    _exit(fn(arg));
  int st;
  NT_ASSERT_EQ(waitpid(pid, &st, 0), pid);
  if (WIFSIGNALED(st)) {
    fprintf(stderr, "child killed by signal %d\n", WTERMSIG(st));
    return 1;
  }
  return WEXITSTATUS(st);
}

static int child_fsize(const char *dir) {
  struct rlimit rl = {4096, 4096};
  if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
    return 2;
  struct ntr_trigger t = {.kind = NTR_TRIG_USER};
  char path[1200] = "";
  int rc = ntr_dump_write(&ring, &t, path, sizeof path);
  if (rc != -EFBIG) {
    fprintf(stderr, "fsize: rc %d\n", rc);
    return 3;
  }
  sigset_t cur;
  sigprocmask(SIG_BLOCK, NULL, &cur);
  if (sigismember(&cur, SIGXFSZ))
    return 4; /* mask not restored */
  sigpending(&cur);
  if (sigismember(&cur, SIGXFSZ))
    return 5; /* our SIGXFSZ left pending */
  if (tmp_files(dir) != 0 || t_count_files(dir, "nccltrace-") != 0)
    return 6;
  return 0;
}

static int child_eacces(const char *dir) {
  if (geteuid() == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0)
      return 77;
  } else if (chmod(dir, 0500) != 0) {
    return 2;
  }
  struct ntr_trigger t = {.kind = NTR_TRIG_USER};
  int rc = ntr_dump_write(&ring, &t, NULL, 0);
  if (rc != -EACCES) {
    fprintf(stderr, "eacces: rc %d\n", rc);
    return 3;
  }
  return 0;
}

int main(void) {
  char base[64], dumps[128], path[1200];
  t_tmpdir(base, sizeof base);
  setenv("RANK", "5", 1);
  umask(022);
  struct ntr_ring_config cfg = {.dir = base, .job_id = "dj", .slots = 1024};
  NT_ASSERT_EQ(ntr_ring_open(&ring, &cfg), 0);
  struct ntr_comm_state *a = ntr_ring_comm_alloc(&ring), *b = ntr_ring_comm_alloc(&ring);
  a->comm_id = 0xaaaa;
  b->comm_id = 0xbbbb;
  for (unsigned i = 0; i < 20; i++)
    put(2, i, b);
  for (unsigned i = 0; i < 3000; i++)
    put(3, i, a);
  /* two stack entries by hand (stack.c fills them in real use) */
  ring.stacks[0].hash = 11;
  ring.stacks[0].depth = 1;
  ring.stacks[0].ip[0] = 0x1234;
  ring.stacks[1].hash = 22;
  ring.hdr->stack_count = 2;

  snprintf(dumps, sizeof dumps, "%s/dumps/x", base); /* created 0750: the directory mode of 0640 dumps */
  NT_ASSERT_EQ(ntr_dump_init(&ring, dumps, 0640), 0);
  struct ntr_trigger trig = {.kind = NTR_TRIG_SIGNAL, .signo = SIGTERM};
  snprintf(trig.reason, sizeof trig.reason, "test reason");
  NT_ASSERT_EQ(ntr_dump_write(&ring, &trig, path, sizeof path), 0);

  char host[64], want[1200];
  gethostname(host, sizeof host);
  host[63] = 0;
  for (char *c = host; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
          *c == '.' || *c == '_'))
      *c = '_';
  snprintf(want, sizeof want, "%s/nccltrace-dj-r5-%s-%d-0-sigterm.zst", dumps, host,
           (int)getpid());
  NT_ASSERT(!strcmp(path, want));
  struct stat st;
  NT_ASSERT_EQ(stat(path, &st), 0);
  NT_ASSERT_EQ(st.st_mode & 0777, 0640);
  NT_ASSERT_EQ(stat(dumps, &st), 0);
  NT_ASSERT_EQ(st.st_mode & 0777, 0750); /* made for 0640 dumps: ntr_safedir_dump_mode */
  NT_ASSERT_EQ(tmp_files(dumps), 0);

  struct parsed d = {0};
  parse_dump(path, &d);
  NT_ASSERT(!memcmp(d.hdr->magic, NTR_RING_MAGIC, 8));
  NT_ASSERT_EQ(d.hdr->pid, getpid());
  NT_ASSERT(d.hdr->head >= 3020 && d.hdr->head - 3020 < d.hdr->block_positions); /* one writer's blocks */
  NT_ASSERT_EQ(d.hdr->comm_count, 2);
  NT_ASSERT_EQ(d.ncomms, 2);
  NT_ASSERT_EQ(d.comms[0].comm_id, 0xaaaa);
  NT_ASSERT_EQ(d.comms[1].comm_id, 0xbbbb);
  NT_ASSERT_EQ(d.comms[1].rec_count, 20);
  NT_ASSERT_EQ(d.comms[1].recent[19].commit, 20);
  NT_ASSERT_EQ(d.nstacks, 2);
  NT_ASSERT_EQ(d.stacks[0].ip[0], 0x1234);
  NT_ASSERT_EQ(d.stacks[1].hash, 22);
  /* B's 20 (only in recent[]) + the ring's last 1024 positions (A's), less
   * the unused rest of the writer's open block, oldest first */
  NT_ASSERT_EQ(d.nrecs, 20 + 1024 - (d.hdr->head - 3020));
  for (size_t i = 0; i < d.nrecs; i++) {
    NT_ASSERT(t_intact(&d.recs[i]));
    if (i)
      NT_ASSERT(d.recs[i].commit > d.recs[i - 1].commit);
  }
  for (unsigned i = 0; i < 20; i++) {
    NT_ASSERT_EQ(d.recs[i].commit, i + 1);
    NT_ASSERT_EQ(d.recs[i].count, (2ull << 40) | i);
  }
  size_t na = d.nrecs - 20; /* A's newest, up to its last (3000 - 1) */
  for (unsigned i = 0; i < na; i++)
    NT_ASSERT_EQ(d.recs[20 + i].count, (3ull << 40) | (3000 - na + i));
  NT_ASSERT_EQ(d.trig->kind, NTR_TRIG_SIGNAL);
  NT_ASSERT_EQ(d.trig->signo, SIGTERM);
  /* the open block's unused rest counts as lost (recorder/ring.h) */
  NT_ASSERT_EQ(d.trig->lost, d.hdr->head - 1024);
  NT_ASSERT(d.trig->tsc != 0);
  NT_ASSERT(!strcmp(d.trig->reason, "test reason"));

  /* image writer: same payload from the parsed parts */
  char path2[1200];
  NT_ASSERT_EQ(ntr_dump_write_image(dumps, d.hdr, d.comms, (uint32_t)d.ncomms, d.stacks,
                                (uint32_t)d.nstacks, d.recs, d.nrecs, d.strs, d.str_len, d.trig, path2,
                                sizeof path2),
           0);
  NT_ASSERT(strcmp(path, path2) != 0); /* n = 0 existed: not replaced */
  struct parsed d2 = {0};
  parse_dump(path2, &d2);
  NT_ASSERT_EQ(d2.len, d.len);
  NT_ASSERT(!memcmp(d2.payload, d.payload, d.len));
  NT_ASSERT_EQ(stat(path2, &st), 0);
  NT_ASSERT_EQ(st.st_mode & 0777, 0600);

  /* second live dump: counter bumps, trigger named */
  struct ntr_trigger ex = {.kind = NTR_TRIG_EXIT, .exit_code = 3};
  NT_ASSERT_EQ(ntr_dump_write(&ring, &ex, path, sizeof path), 0);
  NT_ASSERT(strstr(path, "-1-exit.zst") != NULL);
  struct ntr_trigger fatal = {.kind = NTR_TRIG_FATAL_SIGNAL, .signo = SIGSEGV};
  NT_ASSERT_EQ(ntr_dump_write(&ring, &fatal, path, sizeof path), 0);
  NT_ASSERT(strstr(path, "-2-sigsegv.zst") != NULL);
  NT_ASSERT(!strcmp(ntr_name_trigger_tag(NTR_TRIG_MISMATCH), "mismatch"));
  NT_ASSERT(!strcmp(ntr_name_trigger_tag(999), "unknown"));
  NT_ASSERT_EQ(tmp_files(dumps), 0);
  free(d.payload);
  free(d2.payload);

  /* failure paths, each in a child so rlimits and uids stay there */
  char fdir[256];
  snprintf(fdir, sizeof fdir, "%s/fsize", base);
  NT_ASSERT_EQ(ntr_dump_init(&ring, fdir, 0600), 0);
  NT_ASSERT_EQ(in_child(child_fsize, fdir), 0);

  snprintf(fdir, sizeof fdir, "%s/ro", base);
  NT_ASSERT_EQ(mkdir(fdir, 0755), 0);
  NT_ASSERT_EQ(ntr_dump_init(&ring, fdir, 0600), 0);
  int rc = in_child(child_eacces, fdir);
  NT_ASSERT(rc == 0 || rc == 77);
  printf("unwritable directory: %s\n", rc == 0 ? "checked" : "skipped (cannot drop privileges)");
  NT_ASSERT_EQ(tmp_files(fdir), 0);
  NT_ASSERT_EQ(t_count_files(fdir, "nccltrace-"), 0);

  snprintf(fdir, sizeof fdir, "%s/afile", base);
  FILE *f = fopen(fdir, "w");
  NT_ASSERT(f);
  fclose(f);
  snprintf(fdir, sizeof fdir, "%s/afile/sub", base);
  NT_ASSERT_EQ(ntr_dump_init(&ring, fdir, 0600), 0);
  struct ntr_trigger u = {.kind = NTR_TRIG_USER};
  NT_ASSERT_EQ(ntr_dump_write(&ring, &u, NULL, 0), -ENOTDIR);
  /* the flag was released on failure: a good directory works again */
  NT_ASSERT_EQ(ntr_dump_init(&ring, dumps, 0600), 0);
  NT_ASSERT_EQ(ntr_dump_write(&ring, &u, NULL, 0), 0);

  /* two threads dumping at once */
  char cdir[256];
  snprintf(cdir, sizeof cdir, "%s/concurrent", base);
  NT_ASSERT_EQ(ntr_dump_init(&ring, cdir, 0600), 0);
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    NT_ASSERT_EQ(pthread_create(&th[i], NULL, dumper, NULL), 0);
  for (int i = 0; i < 2; i++)
    pthread_join(th[i], NULL);
  printf("concurrent dumps: %d written, %d busy\n", dump_ok, dump_busy_seen);
  NT_ASSERT_EQ(dump_other, 0);
  NT_ASSERT_EQ(dump_ok + dump_busy_seen, 8);
  NT_ASSERT(dump_ok >= 1);
  NT_ASSERT_EQ(t_count_files(cdir, "nccltrace-"), dump_ok);
  NT_ASSERT_EQ(tmp_files(cdir), 0);

  ntr_ring_close(&ring, 1);
  t_rmtree(base);
  printf("ok\n");
  return 0;
}

/* test_stack -- stack capture and deduplication in the ring's stack table
 * (same call site -> same id, distinct sites -> distinct ids, the table
 * fills at NTR_STACK_MAX and then returns 0, concurrent interning agrees on
 * ids), and the fatal-signal backtrace: a child faults in crash_here(), its
 * SIGSEGV handler calls ntr_stack_fatal with the signal context, and the
 * parent finds crash_here as frame 0 or 1 in the ring header it left. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <errno.h>
#include <zstd.h>

#include "helpers.h"
#include "recorder/stack.h"
#include "recorder/symbolize.h"

static struct ntr_ring ring;

__attribute__((noinline)) static uint32_t site_a(void) {
  uint32_t id = ntr_stack_capture(&ring);
  __asm__ volatile("" ::: "memory"); /* keep the call from becoming a tail call */
  return id;
}

__attribute__((noinline)) static uint32_t site_b(void) {
  uint32_t id = ntr_stack_capture(&ring);
  __asm__ volatile("" ::: "memory");
  return id;
}

__attribute__((noinline)) static void crash_here(volatile int *p) {
  *p = 42; /* p points into a PROT_NONE page */
  __asm__ volatile("" ::: "memory");
}

static void on_segv(int signo, siginfo_t *si, void *uc) {
  (void)si;
  ntr_stack_fatal(ring.hdr, signo, uc);
  _exit(42);
}

__attribute__((noinline)) static void direct_caller(void) {
  ntr_stack_fatal(ring.hdr, 0, NULL);
  __asm__ volatile("" ::: "memory");
}

#define MT_STACKS 200
#define MT_THREADS 4
static uint32_t mt_ids[MT_THREADS][MT_STACKS];

static void mt_stack(unsigned k, uint64_t ip[4]) {
  for (unsigned j = 0; j < 4; j++)
    ip[j] = 0x400000ull + k * 16 + j;
}

static void *mt_worker(void *arg) {
  unsigned t = (unsigned)(uintptr_t)arg;
  for (unsigned i = 0; i < MT_STACKS; i++) {
    unsigned k = (t & 1) ? MT_STACKS - 1 - i : i;
    uint64_t ip[4];
    mt_stack(k, ip);
    mt_ids[t][k] = ntr_stack_intern(&ring, ip, 4);
  }
  return NULL;
}

static int sym_is(const char *sym, const char *fn) {
  size_t n = strlen(fn);
  return !strncmp(sym, fn, n) && sym[n] == '+';
}

int main(void) {
  char dir[64];
  t_tmpdir(dir, sizeof dir);
  struct ntr_ring_config cfg = {.dir = dir, .job_id = "stk", .slots = 64};
  NT_ASSERT_EQ(ntr_ring_open(&ring, &cfg), 0);

  /* concurrent interning first, on an empty table */
  pthread_t th[MT_THREADS];
  for (uintptr_t t = 0; t < MT_THREADS; t++)
    NT_ASSERT_EQ(pthread_create(&th[t], NULL, mt_worker, (void *)t), 0);
  for (unsigned t = 0; t < MT_THREADS; t++)
    pthread_join(th[t], NULL);
  for (unsigned k = 0; k < MT_STACKS; k++) {
    uint32_t id = mt_ids[0][k];
    NT_ASSERT(id != 0);
    for (unsigned t = 1; t < MT_THREADS; t++)
      NT_ASSERT_EQ(mt_ids[t][k], id);
    uint64_t ip[4];
    mt_stack(k, ip);
    NT_ASSERT_EQ(ring.stacks[id - 1].depth, 4);
    NT_ASSERT(!memcmp(ring.stacks[id - 1].ip, ip, sizeof ip));
  }
  uint32_t base = ring.hdr->stack_count;
  NT_ASSERT(base >= MT_STACKS && base < MT_STACKS + MT_STACKS / 2); /* few wasted duplicates */

  /* real captures */
  uint32_t a[2], b1 = site_b();
  for (volatile int i = 0; i < 2; i++) /* one call site (not unrolled): the same stack twice */
    a[i] = site_a();
  uint32_t a1 = a[0], a2 = a[1];

  NT_ASSERT(a1 != 0 && b1 != 0);
  NT_ASSERT_EQ(a1, a2);
  NT_ASSERT(a1 != b1);
  NT_ASSERT_EQ(ring.hdr->stack_count, base + 2);
  const struct ntr_stack *sa = &ring.stacks[a1 - 1];
  NT_ASSERT(sa->depth >= 2 && sa->hash != 0);
  uintptr_t fa = (uintptr_t)site_a;
  NT_ASSERT(sa->ip[0] > fa && sa->ip[0] < fa + 256); /* frame 0: the caller of capture */

  /* fill the table: ids up to NTR_STACK_MAX, then 0; old ids still found */
  uint32_t last = 0;
  for (unsigned k = 0; last != 0 || k == 0; k++) {
    uint64_t ip[2] = {0x900000ull + k, 7};
    last = ntr_stack_intern(&ring, ip, 2);
    if (!last)
      break;
    NT_ASSERT(last <= NTR_STACK_MAX);
  }
  NT_ASSERT_EQ(ring.hdr->stack_count, NTR_STACK_MAX);
  {
    uint64_t ip[4];
    mt_stack(5, ip);
    NT_ASSERT_EQ(ntr_stack_intern(&ring, ip, 4), mt_ids[0][5]);
  }

  /* fatal backtrace from the signal context, in a child */
  pid_t pid = fork();
  NT_ASSERT(pid >= 0);
  if (pid == 0) {
    struct sigaction sa_;
    memset(&sa_, 0, sizeof sa_);
    sa_.sa_sigaction = on_segv;
    sa_.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa_, NULL);
    alarm(10);
    void *guard = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (guard == MAP_FAILED)
      _exit(4);
    crash_here(guard);
    _exit(3);
  }
  int st;
  NT_ASSERT_EQ(waitpid(pid, &st, 0), pid);
  NT_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 42);
  const struct ntr_ring_header *h = ring.hdr; /* MAP_SHARED: the child's writes are here */
  NT_ASSERT_EQ(h->bt_signo, SIGSEGV);
  NT_ASSERT_EQ(h->bt_tid, pid);
  NT_ASSERT(h->bt_depth >= 2 && h->bt_depth <= NTR_BT_DEPTH);
  for (uint32_t i = 0; i < h->bt_depth && i < 4; i++)
    printf("  #%u %#llx %s\n", i, (unsigned long long)h->bt_ip[i], h->bt_sym[i]);
  NT_ASSERT(sym_is(h->bt_sym[0], "crash_here") || sym_is(h->bt_sym[1], "crash_here"));
  uintptr_t fc = (uintptr_t)crash_here;
  NT_ASSERT(h->bt_ip[0] >= fc && h->bt_ip[0] < fc + 64); /* the faulting instruction */
  int main_seen = 0;
  for (uint32_t i = 0; i < h->bt_depth; i++)
    main_seen |= sym_is(h->bt_sym[i], "main");
  NT_ASSERT(main_seen);

  /* without a context: frame 0 is the caller */
  memset((void *)ring.hdr->bt_sym, 0, sizeof ring.hdr->bt_sym);
  ring.hdr->bt_depth = 0;
  direct_caller();
  NT_ASSERT(h->bt_depth >= 2);
  NT_ASSERT(sym_is(h->bt_sym[0], "direct_caller"));
  NT_ASSERT(sym_is(h->bt_sym[1], "main"));

  /* malloc-free symbolizer: a shared library's function, the main
   * program's static function (through /proc/self/exe), and garbage */
  struct ntr_sym_cache cache = {.path = "", .map = NULL, .len = 0};
  char sym[NTR_SYM_BYTES];
  NT_ASSERT_EQ(ntr_symbolize((uintptr_t)ZSTD_versionNumber + 3, 0, sym, sizeof sym, &cache), 0);
  NT_ASSERT(!strcmp(sym, "ZSTD_versionNumber+0x3"));
  NT_ASSERT_EQ(ntr_symbolize((uintptr_t)site_b + 1, 1, sym, sizeof sym, &cache), 0);
  NT_ASSERT(!strcmp(sym, "site_b+0x1"));
  NT_ASSERT_EQ(ntr_symbolize(0x10, 0, sym, sizeof sym, &cache), -ENOENT);
  NT_ASSERT(!strcmp(sym, "?"));
  ntr_symbolize_done(&cache);

  ntr_ring_close(&ring, 1);
  t_rmtree(dir);
  printf("ok\n");
  return 0;
}

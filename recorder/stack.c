/* stack.c -- deduplicated call stacks in the ring's stack table, and the
 * fatal-signal backtrace (see stack.h). */
#define UNW_LOCAL_ONLY /* unwind this process only: no ptrace/remote code paths */
#include "recorder/stack.h"

#include <dlfcn.h>
#include <errno.h>
#include <libunwind.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#define XXH_INLINE_ALL /* header-only: no libxxhash to load at every exec */
#include <xxhash.h>

#include "recorder/symbolize.h"

/* libunwind, opened by ntr_stack_load and never linked: loading it (and the
 * liblzma it needs) at every exec of every program under the preload cost
 * about 0.1 ms, for programs that never call NCCL (bench/run.sh, exec).
 * The names are libunwind's own macros turned into strings (the _UL
 * prefix of UNW_LOCAL_ONLY).  ok is published with release after the
 * table; readers load it with acquire. */
#define NTR_STR(x) #x
#define NTR_XSTR(x) NTR_STR(x)
static struct {
  int ok;
#if defined(__x86_64__)
  int (*getcontext)(unw_context_t *);
#endif
  int (*init_local)(unw_cursor_t *, unw_context_t *);
  int (*init_local2)(unw_cursor_t *, unw_context_t *, int);
  int (*step)(unw_cursor_t *);
  int (*get_reg)(unw_cursor_t *, unw_regnum_t, unw_word_t *);
  int (*is_signal_frame)(unw_cursor_t *);
  int (*backtrace)(void **, int);
} uw;
static pthread_once_t uw_once = PTHREAD_ONCE_INIT;

static void uw_open(void) {
  void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (!h)
    h = dlopen("libunwind.so", RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return;
#define UW_SYM(field, name) *(void **)&uw.field = dlsym(h, name)
#if defined(__x86_64__)
  UW_SYM(getcontext, NTR_XSTR(unw_tdep_getcontext));
  if (!uw.getcontext)
    return;
#endif
  UW_SYM(init_local, NTR_XSTR(unw_init_local));
  UW_SYM(init_local2, NTR_XSTR(unw_init_local2));
  UW_SYM(step, NTR_XSTR(unw_step));
  UW_SYM(get_reg, NTR_XSTR(unw_get_reg));
  UW_SYM(is_signal_frame, NTR_XSTR(unw_is_signal_frame));
  UW_SYM(backtrace, "unw_backtrace");
#undef UW_SYM
  if (uw.init_local && uw.init_local2 && uw.step && uw.get_reg && uw.is_signal_frame && uw.backtrace)
    __atomic_store_n(&uw.ok, 1, __ATOMIC_RELEASE);
}

int ntr_stack_load(void) {
  pthread_once(&uw_once, uw_open);
  return __atomic_load_n(&uw.ok, __ATOMIC_ACQUIRE) ? 0 : -ENOENT;
}

uint32_t ntr_stack_intern(struct ntr_ring *ring, const uint64_t *ip, uint32_t depth) {
  return ntr_stack_intern_kind(ring, NTR_STACK_NATIVE, ip, depth);
}

uint32_t ntr_stack_intern_kind(struct ntr_ring *ring, uint32_t kind, const uint64_t *ip,
                               uint32_t depth) {
  if (!ring->hdr || depth == 0)
    return 0;
  if (depth > NTR_STACK_DEPTH)
    depth = NTR_STACK_DEPTH;
  /* the kind is the seed: equal words of two kinds are two stacks */
  uint64_t h = XXH64(ip, depth * sizeof *ip, kind);
  if (h == 0)
    h = 1; /* 0 marks an entry whose content is not published yet */

  uint16_t mine = 0; /* our own table entry, allocated at the first empty bucket */
  for (uint32_t probe = 0; probe < NTR_STACK_INDEX; probe++) {
    uint16_t *bucket = &ring->stack_index[(h + probe) & (NTR_STACK_INDEX - 1)];
    /* Acquire pairs with the release CAS below: the entry a bucket names is
     * published before the bucket. */
    uint16_t v = __atomic_load_n(bucket, __ATOMIC_ACQUIRE);
    if (v == 0) {
      if (!mine) {
        /* Relaxed: the slot index only has to be unique; the entry is
         * published through its hash (release) and the bucket (release). */
        uint32_t s = __atomic_fetch_add(&ring->hdr->stack_count, 1, __ATOMIC_RELAXED);
        if (s >= NTR_STACK_MAX) {
          __atomic_store_n(&ring->hdr->stack_count, NTR_STACK_MAX, __ATOMIC_RELAXED);
          return 0;
        }
        struct ntr_stack *e = &ring->stacks[s];
        e->depth = depth;
        e->kind = kind;
        memcpy(e->ip, ip, depth * sizeof *ip);
        if (depth < NTR_STACK_DEPTH)
          memset(e->ip + depth, 0, (NTR_STACK_DEPTH - depth) * sizeof *ip);
        /* Release pairs with the acquire load of hash by a finder (below)
         * and by dump readers: depth and ips are visible before the hash. */
        __atomic_store_n(&e->hash, h, __ATOMIC_RELEASE);
        mine = (uint16_t)(s + 1);
      }
      uint16_t expected = 0;
      if (__atomic_compare_exchange_n(bucket, &expected, mine, 0, __ATOMIC_RELEASE,
                                      __ATOMIC_ACQUIRE))
        return mine;
      v = expected; /* another thread took this bucket first: compare with its entry */
    }
    const struct ntr_stack *e = &ring->stacks[v - 1];
    if (__atomic_load_n(&e->hash, __ATOMIC_ACQUIRE) == h && e->depth == depth && e->kind == kind &&
        memcmp(e->ip, ip, depth * sizeof *ip) == 0)
      return v; /* if we allocated an entry too, it stays as an unused duplicate */
  }
  return mine; /* every bucket full: cannot happen with twice NTR_STACK_MAX buckets */
}

__attribute__((noinline)) uint32_t ntr_stack_capture(struct ntr_ring *ring) {
  void *buf[NTR_STACK_DEPTH + 1];
  if (ntr_stack_load() != 0)
    return 0;
  /* unw_backtrace's frame 0 is this function: skip it */
  int n = uw.backtrace(buf, (int)(NTR_STACK_DEPTH + 1));
  if (n <= 1)
    return 0;
  uint64_t ip[NTR_STACK_DEPTH];
  uint32_t depth = (uint32_t)(n - 1);
  for (uint32_t i = 0; i < depth; i++)
    ip[i] = (uint64_t)(uintptr_t)buf[i + 1];
  return ntr_stack_intern(ring, ip, depth);
}

/* Start a cursor at the interrupted context (signal frame) or at our caller.
 * Always inlined: the context captured by unw_getcontext must be that of
 * ntr_stack_fatal's own frame, which stays alive while the cursor is used. */
static inline __attribute__((always_inline)) int fatal_cursor(unw_cursor_t *cur, unw_context_t *ctx, void *ucontext) {
  if (ucontext) {
    /* On the architectures libunwind supports for local unwinding on Linux
     * (x86-64, aarch64, ...) unw_context_t is the kernel's ucontext_t, so the
     * handler's third argument is a valid context.  UNW_INIT_SIGNAL_FRAME
     * tells libunwind that ip is the faulting instruction itself (not a
     * return address): frame 0 is the faulting function. */
    return uw.init_local2(cur, (unw_context_t *)ucontext, UNW_INIT_SIGNAL_FRAME);
  }
#if defined(__x86_64__)
  if (uw.getcontext(ctx) != 0) /* a function there; the caller's registers */
#else
  if (unw_getcontext(ctx) != 0) /* inline code elsewhere (aarch64): no symbol */
#endif
    return -1;
  int rc = uw.init_local(cur, ctx);
  if (rc == 0)
    rc = uw.step(cur) > 0 ? 0 : -1; /* skip ntr_stack_fatal itself */
  return rc;
}

/* What is async-signal-safe here, and why the rest is acceptable:
 * - unw_getcontext, unw_init_local(2), unw_get_reg, unw_is_signal_frame and
 *   unw_step with UNW_LOCAL_ONLY are documented by libunwind as signal-safe:
 *   they read registers and the stack, with an unwind-info cache guarded by
 *   blocking signals, not by a lock an interrupted thread could hold, and
 *   without malloc.
 * - Finding unwind tables goes through dl_iterate_phdr, and naming frames
 *   through dladdr1: both take the dynamic loader's lock, which is recursive
 *   (a fault inside dlopen on this thread is fine) but may be held by
 *   another thread that is inside dlopen right now; we would then wait for
 *   that dlopen to finish, which normally happens.  The ips are published
 *   (bt_depth) before any naming.
 * - unw_get_proc_name is deliberately NOT used: libunwind 1.6 mallocs on that
 *   path, and a crash inside malloc (heap corruption, the common case) would
 *   deadlock on the allocator's lock.  Names come from ntr_symbolize
 *   (symbolize.c), which maps the ELF file and reads .symtab without
 *   allocating.
 * Our own code here calls neither malloc nor stdio. */
void ntr_stack_fatal(struct ntr_ring_header *hdr, int signo, void *ucontext) {
  if (!hdr)
    return;
  unw_cursor_t cur;
  unw_context_t ctx;
  hdr->bt_signo = (uint32_t)signo;
  hdr->bt_tid = (uint32_t)syscall(SYS_gettid);
  /* never dlopen here (a handler): loaded at activation, or no backtrace */
  if (!__atomic_load_n(&uw.ok, __ATOMIC_ACQUIRE) || fatal_cursor(&cur, &ctx, ucontext) != 0)
    return;
  /* precise[i]: bt_ip[i] is the interrupted instruction itself (frame 0 of
   * a signal context, or the frame right above a signal trampoline), not a
   * return address */
  uint8_t precise[NTR_BT_DEPTH];
  uint32_t depth = 0;
  int next_precise = ucontext != NULL;
  do {
    unw_word_t ip = 0;
    if (uw.get_reg(&cur, UNW_REG_IP, &ip) != 0 || ip == 0)
      break;
    precise[depth] = (uint8_t)next_precise;
    hdr->bt_ip[depth++] = ip;
    next_precise = uw.is_signal_frame(&cur) > 0;
  } while (depth < NTR_BT_DEPTH && uw.step(&cur) > 0);
  /* Release pairs with a live reader's acquire load of bt_depth (nccltrace
   * status); post-mortem readers see the file after we are dead anyway. */
  __atomic_store_n(&hdr->bt_depth, depth, __ATOMIC_RELEASE);

  struct ntr_sym_cache cache = {.path = "", .map = NULL, .len = 0};
  for (uint32_t i = 0; i < depth; i++)
    ntr_symbolize((uintptr_t)hdr->bt_ip[i], !precise[i], hdr->bt_sym[i], NTR_SYM_BYTES, &cache);
  ntr_symbolize_done(&cache);
}

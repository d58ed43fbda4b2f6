/* pyframes.c -- Python call sites and thread stacks (see pyframes.h).
 *
 * How a CPython thread is read without the GIL.  Facts from CPython's
 * sources (3.11-3.14), no code of theirs:
 * - PyGILState_GetThisThreadState() returns the thread state bound to the
 *   calling OS thread: a thread-local lookup (pthread_getspecific, or a
 *   thread-local variable in 3.14), no lock, no allocation, no Python code,
 *   valid while the GIL is released (ctypes and c10d release it around the
 *   NCCL call).  Py_IsInitialized() reads one global.
 * - A thread's innermost frame is tstate->cframe->current_frame (3.11,
 *   3.12) or tstate->current_frame (3.13+); each _PyInterpreterFrame links
 *   to its caller through `previous`, holds a strong reference to its code
 *   object and the instruction it is executing (prev_instr in 3.11/3.12,
 *   instr_ptr in 3.13+; code units from co_code_adaptive).
 * - 3.13+ publish these offsets in _PyRuntime's first member,
 *   _Py_DebugOffsets ("xdebugpy" cookie, PY_VERSION_HEX), for readers like
 *   this one; 3.11 and 3.12 offsets are fixed per minor version (checked
 *   against the installed headers by tests/python/test_layout.py).
 *
 * Why reading our own thread's frames in a wrapper is safe: the calling
 * thread is inside our function, called (through ctypes or a C extension)
 * from its innermost Python frame.  Frames are pushed and popped only by
 * their own thread, so none of this thread's frames can be popped or
 * reused until we return; each frame holds a strong reference to its code
 * object, and a code object to its file name, qualified name and location
 * table (immutable objects), so all of them stay alive and unchanged too.
 * Another thread holding the GIL meanwhile runs its own frames, never ours.
 * Plain loads of those fields are therefore race-free, and the hot path
 * (a known site) uses them.  What is not proven by this argument -- that
 * our offsets fit this interpreter -- is checked once per thread state with
 * fault-safe reads (validate_ts) before any plain load, and every code
 * object's type is compared with &PyCode_Type on every walk.
 *
 * Other threads (dumps) are a different case: they run concurrently and
 * may free what we look at.  Everything of theirs is read with
 * process_vm_readv on ourselves (a bad address is EFAULT, never a signal),
 * every object's type is checked, and the work is capped (100 frames by
 * 100 threads).  A racing thread can give a wrong frame, never a crash.
 */
#include "interpose/pyframes.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "interpose/nti.h"
#include "interpose/comm.h"
#include "interpose/pycache.h"
#include "interpose/pyline.h"
#include "recorder/dump.h"
#include "recorder/pystr.h"
#include "recorder/stack.h"

#define NO_OFF UINT32_MAX

/* Where things are in this interpreter (filled once by nti_py_setup). */
struct layout {
  uint32_t version;                 /* PY_VERSION_HEX */
  uintptr_t runtime;                /* &_PyRuntime */
  uint32_t rt_interp_head, in_next, in_threads_head;
  uint32_t ts_next, ts_thread_id, ts_native_tid;
  uint32_t ts_cframe, cf_frame;     /* 3.11/3.12: tstate->cframe->current_frame */
  uint32_t ts_frame;                /* 3.13+: tstate->current_frame */
  uint32_t fr_previous, fr_code, fr_instr, fr_owner;
  uintptr_t code_mask;              /* 3.14: f_executable is a tagged reference */
  int owner_max;                    /* owner above this: a C-stack/interpreter frame, no code */
  uint32_t ob_type;
  uint32_t co_filename, co_qualname, co_linetable, co_firstlineno, co_code;
  uint32_t uni_state, uni_length, uni_ascii, uni_compact;
  uint32_t by_size, by_sval;
  uintptr_t code_type, unicode_type, bytes_type;
};
static struct layout L;
static void *(*get_tstate)(void);
static int (*py_initialized)(void);
static int py_on; /* 1 once setup validated the layout */
static pthread_mutex_t setup_lock = PTHREAD_MUTEX_INITIALIZER;
static int py_decided;               /* atomic: 1 once setup decided (on, unsupported, disabled) */
static unsigned long long seen_adds; /* dl_iterate_phdr's load count at the last attempt (setup_lock) */

/* ------------------------------------------------------- safe reads -- */

static pid_t self_pid;    /* ours (setup, fork child): process_vm_readv's target */
static int use_pipe;      /* process_vm_readv refused (seccomp): write(2) probe */
static int probe_fd[2] = {-1, -1};
static int probe_busy;    /* atomic try-lock of the pipe */

/* Copy n bytes at addr, or fail: never a signal.  Async-signal-safe. */
static int safe_read(const void *addr, void *dst, size_t n) {
  uintptr_t a = (uintptr_t)addr;
  if (a < 4096 || a + n < a)
    return -1;
  if (!use_pipe) {
    struct iovec l = {dst, n}, r = {(void *)addr, n};
    ssize_t got = syscall(SYS_process_vm_readv, self_pid, &l, 1UL, &r, 1UL, 0UL);
    return got == (ssize_t)n ? 0 : -1;
  }
  /* write() from a bad address is EFAULT, not SIGSEGV; the pipe then gives
   * the bytes back.  One reader at a time: a busy pipe is a failed read. */
  if (__atomic_exchange_n(&probe_busy, 1, __ATOMIC_ACQUIRE))
    return -1;
  int rc = -1;
  char *d = dst;
  const char *s = addr;
  while (n) {
    size_t k = n < 4096 ? n : 4096;
    if (write(probe_fd[1], s, k) != (ssize_t)k || read(probe_fd[0], d, k) != (ssize_t)k)
      break;
    s += k, d += k, n -= k;
  }
  if (!n)
    rc = 0;
  /* Release pairs with the acquire exchange of the next reader. */
  __atomic_store_n(&probe_busy, 0, __ATOMIC_RELEASE);
  return rc;
}

static int read_ptr(uintptr_t base, uint32_t off, uintptr_t *out) {
  return safe_read((const void *)(base + off), out, sizeof *out);
}

static int pyline_read(const void *src, void *dst, size_t n) { return safe_read(src, dst, n); }

static int type_is(uintptr_t obj, uintptr_t type) {
  uintptr_t t;
  return obj && read_ptr(obj, L.ob_type, &t) == 0 && t == type;
}

/* ------------------------------------------------------ strings -- */

static size_t put_utf8(char *out, size_t at, size_t cap, uint32_t c) {
  char b[4];
  size_t n;
  if (c < 0x80) {
    b[0] = (char)c, n = 1;
  } else if (c < 0x800) {
    b[0] = (char)(0xc0 | c >> 6), b[1] = (char)(0x80 | (c & 63)), n = 2;
  } else if (c < 0x10000) {
    b[0] = (char)(0xe0 | c >> 12), b[1] = (char)(0x80 | (c >> 6 & 63)), b[2] = (char)(0x80 | (c & 63)), n = 3;
  } else {
    b[0] = (char)(0xf0 | (c >> 18 & 7)), b[1] = (char)(0x80 | (c >> 12 & 63));
    b[2] = (char)(0x80 | (c >> 6 & 63)), b[3] = (char)(0x80 | (c & 63)), n = 4;
  }
  if (c == 0 || at + n > cap)
    return 0;
  memcpy(out + at, b, n);
  return n;
}

/* A str object as UTF-8 into out (cap bytes, not terminated): its last
 * max_chars characters when tail, else its first.  Compact strings only
 * (every str the compiler makes).  @return bytes written, 0 when unreadable. */
static size_t read_str(uintptr_t obj, char *out, size_t cap, size_t max_chars, int tail) {
  /* one read for the header: type, length and state lie in its first
   * asciiobject bytes */
  unsigned char hdr[64];
  uintptr_t type;
  uint32_t state;
  intptr_t length;
  if (!obj || L.uni_ascii > sizeof hdr || safe_read((const void *)obj, hdr, L.uni_ascii))
    return 0;
  memcpy(&type, hdr + L.ob_type, sizeof type);
  memcpy(&state, hdr + L.uni_state, sizeof state);
  memcpy(&length, hdr + L.uni_length, sizeof length);
  if (type != L.unicode_type || length < 0)
    return 0;
  unsigned kind = state >> 2 & 7, compact = state >> 5 & 1, ascii = state >> 6 & 1;
  if (!compact || (kind != 1 && kind != 2 && kind != 4))
    return 0;
  uintptr_t data = obj + (ascii ? L.uni_ascii : L.uni_compact);
  size_t first = 0, count = (size_t)length;
  if (count > max_chars) {
    first = tail ? count - max_chars : 0;
    count = max_chars;
  }
  size_t at = 0;
  unsigned char chunk[256];
  for (size_t i = 0; i < count;) {
    size_t k = count - i < sizeof chunk / kind ? count - i : sizeof chunk / kind;
    if (safe_read((const void *)(data + (first + i) * kind), chunk, k * kind))
      return 0;
    for (size_t j = 0; j < k; j++) {
      uint32_t c = kind == 1 ? chunk[j] : kind == 2 ? (uint32_t)chunk[2 * j] | (uint32_t)chunk[2 * j + 1] << 8
                                                    : (uint32_t)chunk[4 * j] | (uint32_t)chunk[4 * j + 1] << 8 |
                                                          (uint32_t)chunk[4 * j + 2] << 16 |
                                                          (uint32_t)chunk[4 * j + 3] << 24;
      size_t w = put_utf8(out, at, cap, c > 0x10ffff ? '?' : c);
      if (!w)
        return at;
      at += w;
    }
    i += k;
  }
  return at;
}

/* ------------------------------------------------------- frames -- */

/* Frames seen before: (code, instruction, check) -> frame word, so that
 * the outer frames of a new call site (usually known) cost a lookup.
 * check: the code object's co_filename pointer and co_firstlineno
 * (code_check), so a new code object at a freed one's address is not taken
 * for it (pycache.h).  Only frames whose strings were interned are kept. */
#define FRAME_SLOTS 8192u
static struct nti_pyc_frame frame_slots[FRAME_SLOTS];
static struct nti_pyc_frames frames = {frame_slots, FRAME_SLOTS - 1, 0};

static uint64_t code_check(uintptr_t filename, int32_t firstlineno) {
  return (uint64_t)filename * 0xc2b2ae3d27d4eb4full ^ (uint64_t)(uint32_t)firstlineno;
}

static uint64_t frame_key(uintptr_t code, int lasti, uint64_t check) {
  uint64_t k = ((uint64_t)code ^ (uint64_t)(uint32_t)lasti << 48 ^ (uint64_t)(uint32_t)lasti ^ check) *
               0x9e3779b97f4a7c15ull;
  k ^= k >> 31;
  return k ? k : 1;
}

static uint64_t resolve_uncached(uintptr_t code, int lasti);

/* One frame's (file, function, line) as a frame word (strings interned in
 * the ring).  code is a checked code object.  Fault-safe reads only. */
static uint64_t resolve(uintptr_t code, int lasti, uint64_t check) {
  uint64_t key = frame_key(code, lasti, check);
  uint64_t w = nti_pyc_frame_get(&frames, key);
  if (w)
    return w;
  w = resolve_uncached(code, lasti);
  if (ntr_pyframe_str(w))
    nti_pyc_frame_put(&frames, key, w);
  return w;
}

static uint64_t resolve_uncached(uintptr_t code, int lasti) {
  uintptr_t fname = 0, qname = 0, table = 0;
  int32_t first = 0;
  /* the fields we need lie within a few dozen bytes: one read */
  uint32_t lo = L.co_firstlineno, hi = L.co_firstlineno + 4;
  const uint32_t offs[3] = {L.co_filename, L.co_qualname, L.co_linetable};
  for (int i = 0; i < 3; i++) {
    lo = offs[i] < lo ? offs[i] : lo;
    hi = offs[i] + 8 > hi ? offs[i] + 8 : hi;
  }
  unsigned char cb[256];
  if (hi - lo > sizeof cb || safe_read((const void *)(code + lo), cb, hi - lo))
    return 0;
  memcpy(&fname, cb + L.co_filename - lo, 8);
  memcpy(&qname, cb + L.co_qualname - lo, 8);
  memcpy(&table, cb + L.co_linetable - lo, 8);
  memcpy(&first, cb + L.co_firstlineno - lo, 4);
  int line = 0;
  unsigned char th[40];
  uintptr_t ttype = 0;
  intptr_t tlen = -1;
  if (table && L.by_sval <= sizeof th && safe_read((const void *)table, th, L.by_sval) == 0) {
    memcpy(&ttype, th + L.ob_type, 8);
    memcpy(&tlen, th + L.by_size, 8);
  }
  if (ttype == L.bytes_type && tlen >= 0 && tlen < (1 << 24))
    line = nti_pyline(pyline_read, (const void *)(table + L.by_sval), (size_t)tlen, first, lasti);
  char file[NTR_PYSTR_FILE_MAX], func[NTR_PYSTR_FUNC_MAX];
  size_t fl = read_str(fname, file, sizeof file, NTR_PYSTR_FILE_MAX / 2, 1);
  size_t nl = read_str(qname, func, sizeof func, NTR_PYSTR_FUNC_MAX / 2, 0);
  if (!fl)
    memcpy(file, "?", fl = 1);
  if (!nl)
    memcpy(func, "?", nl = 1);
  uint32_t off1 = ntr_pystr_intern(&nti_proc.ring, file, fl, func, nl);
  return ntr_pyframe(line > 0 ? (uint32_t)line : 0, off1);
}

/* Innermost frame of a thread state, fault-safe.  0 when none. */
static uintptr_t ts_frame_safe(uintptr_t ts) {
  uintptr_t f = 0;
  if (L.ts_cframe != NO_OFF) {
    uintptr_t cf = 0;
    if (read_ptr(ts, L.ts_cframe, &cf) || !cf || read_ptr(cf, L.cf_frame, &f))
      return 0;
    return f;
  }
  return read_ptr(ts, L.ts_frame, &f) ? 0 : f;
}

/* code_check of a code object, fault-safe (0 when unreadable). */
static uint64_t code_check_safe(uintptr_t code) {
  uint32_t lo = L.co_filename < L.co_firstlineno ? L.co_filename : L.co_firstlineno;
  uint32_t hi = L.co_filename + 8 > L.co_firstlineno + 4 ? L.co_filename + 8 : L.co_firstlineno + 4;
  unsigned char b[128];
  uintptr_t fname;
  int32_t first;
  if (hi - lo > sizeof b || safe_read((const void *)(code + lo), b, hi - lo))
    return 0;
  memcpy(&fname, b + L.co_filename - lo, sizeof fname);
  memcpy(&first, b + L.co_firstlineno - lo, sizeof first);
  return code_check(fname, first);
}

/* The code object and instruction index of a frame, fault-safe.
 * @return 1 for a frame of Python code, 0 for one to skip, -1 unreadable. */
static int frame_safe(uintptr_t fr, uintptr_t *code, int *lasti) {
  int8_t owner;
  uintptr_t c, instr;
  if (safe_read((const void *)(fr + L.fr_owner), &owner, 1) || read_ptr(fr, L.fr_code, &c) ||
      read_ptr(fr, L.fr_instr, &instr))
    return -1;
  c &= L.code_mask;
  if (owner < 0 || owner > L.owner_max || !type_is(c, L.code_type))
    return 0;
  *code = c;
  *lasti = (int)(((intptr_t)instr - (intptr_t)(c + L.co_code)) / 2);
  return 1;
}

/* ---------------------------------------------------- site cache -- */

/* Known sites: hash of the (code, instruction, check) chain -> stack id
 * (pycache.h: bounded probe runs, the oldest entry replaced). */
#define SITE_SLOTS 4096u
static uint64_t site_words[SITE_SLOTS];
static struct nti_pyc_sites sites = {site_words, SITE_SLOTS - 1, 0};

/* ------------------------------------------------- own thread -- */

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v;
  h *= 0x9e3779b97f4a7c15ull;
  return h ^ (h >> 29);
}

/* First use of a thread state on this thread: is it ours, and do our
 * offsets walk its frames to code objects?  Fault-safe reads only. */
static int validate_ts(uintptr_t ts) {
  uintptr_t tid = 0;
  if (read_ptr(ts, L.ts_native_tid, &tid) || (uint32_t)tid != nti_tid())
    return 0;
  /* At least one frame of Python code, and every frame readable: a
   * thread in a wrapper was called from Python code. */
  uintptr_t fr = ts_frame_safe(ts);
  int found = 0;
  for (int n = 0; fr && n < 4 * (int)NTR_STACK_DEPTH; n++) {
    uintptr_t code;
    int lasti;
    int k = frame_safe(fr, &code, &lasti);
    if (k < 0)
      return 0;
    found += k;
    if (read_ptr(fr, L.fr_previous, &fr))
      return 0;
  }
  return found > 0;
}

static NTI_TLS uintptr_t my_ts; /* the thread state validate_ts accepted */

/* A new site found the stack table full.  The table is not evicted: the
 * records in the ring name its entries, and a reused entry would give them
 * another site.  So the site's records say NTR_PYSTACK_DROPPED (the site
 * cache remembers it as NTI_PYC_NONE), the header counts it, and the
 * process says it once. */
static void site_dropped(void) {
  struct ntr_ring_header *h = nti_proc.ring.hdr;
  /* Relaxed: a statistic; the first increment says the line. */
  if (h && __atomic_fetch_add(&h->py_sites_dropped, 1, __ATOMIC_RELAXED) == 0)
    nti_say("more than %u distinct call stacks: Python call sites past the first %u distinct stacks are "
            "not recorded (their records say so)", h->stack_max, h->stack_max);
}

uint32_t nti_py_site(void) {
  /* Acquire pairs with setup's release: the layout is complete. */
  if (!__atomic_load_n(&py_on, __ATOMIC_ACQUIRE))
    return 0;
  int saved = errno;
  uint32_t id = 0;
  uintptr_t ts = (uintptr_t)get_tstate();
  if (!ts)
    goto out;
  if (NTI_UNLIKELY(ts != my_ts)) {
    if (!validate_ts(ts))
      goto out;
    my_ts = ts;
  }
  /* Plain loads from here on: this thread's own frames (see the top). */
  const char *t = (const char *)ts;
  const char *fr;
  if (L.ts_cframe != NO_OFF) {
    const char *cf = *(const char *const *)(t + L.ts_cframe);
    fr = cf ? *(const char *const *)(cf + L.cf_frame) : NULL;
  } else {
    fr = *(const char *const *)(t + L.ts_frame);
  }
  uintptr_t code[NTR_STACK_DEPTH];
  int lasti[NTR_STACK_DEPTH];
  uint64_t check[NTR_STACK_DEPTH];
  uint32_t depth = 0;
  uint64_t key = 0x70797374ull;
  for (int hops = 0; fr && depth < NTR_STACK_DEPTH && hops < 4 * (int)NTR_STACK_DEPTH; hops++) {
    int owner = *(const int8_t *)(fr + L.fr_owner);
    uintptr_t c = *(const uintptr_t *)(fr + L.fr_code) & L.code_mask;
    if (owner >= 0 && owner <= L.owner_max && c && *(const uintptr_t *)(c + L.ob_type) == L.code_type) {
      uintptr_t instr = *(const uintptr_t *)(fr + L.fr_instr);
      code[depth] = c;
      lasti[depth] = (int)(((intptr_t)instr - (intptr_t)(c + L.co_code)) / 2);
      /* the code object's identity beyond its address (pycache.h) */
      check[depth] = code_check(*(const uintptr_t *)(c + L.co_filename), *(const int32_t *)(c + L.co_firstlineno));
      key = mix(mix(mix(key, c), check[depth]), (uint64_t)(uint32_t)lasti[depth]);
      depth++;
    }
    fr = *(const char *const *)(fr + L.fr_previous);
  }
  if (!depth)
    goto out;
  key = mix(key, depth);
  /* final avalanche: code objects of one module lie at a fixed stride,
   * and the slot is taken from the low bits */
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdull;
  key ^= key >> 33;
  key *= 0xc4ceb9fe1a85ec53ull;
  key ^= key >> 33;
  if (!key)
    key = 1;
  id = nti_pyc_site_get(&sites, key);
  if (NTI_LIKELY(id)) {
    id = id == NTI_PYC_NONE ? NTR_PYSTACK_DROPPED : id;
    goto out;
  }
  /* A new site (or one evicted since): resolve each frame once. */
  uint64_t words[NTR_STACK_DEPTH];
  for (uint32_t i = 0; i < depth; i++)
    words[i] = resolve(code[i], lasti[i], check[i]);
  id = ntr_stack_intern_kind(&nti_proc.ring, NTR_STACK_PYTHON, words, depth);
  nti_pyc_site_put(&sites, key, id);
  if (!id) {
    site_dropped();
    id = NTR_PYSTACK_DROPPED;
  }
out:
  errno = saved;
  return id;
}

void nti_py_forget(void) {
  memset(site_words, 0, sizeof site_words);   /* ids of the parent's stack table */
  memset(frame_slots, 0, sizeof frame_slots); /* offsets into the parent's string table */
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  setup_lock = m; /* may have been held by another parent thread */
  self_pid = getpid();
}

/* ---------------------------------------------------- all threads -- */

static void thread_name(uint32_t tid, char *name, size_t cap) {
  char path[48] = "/proc/self/task/", digits[12];
  size_t n = strlen(path), k = 0;
  do
    digits[k++] = (char)('0' + tid % 10);
  while ((tid /= 10) && k < sizeof digits);
  while (k)
    path[n++] = digits[--k];
  memcpy(path + n, "/comm", 6);
  memset(name, 0, cap);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return;
  ssize_t got = read(fd, name, cap - 1);
  close(fd);
  for (ssize_t i = 0; i < got; i++)
    if (name[i] == '\n')
      name[i] = '\0';
}

uint32_t nti_py_threads(struct ntr_pythread *out, uint32_t max) {
  if (!__atomic_load_n(&py_on, __ATOMIC_ACQUIRE) || !py_initialized())
    return 0;
  int saved = errno;
  uint32_t n = 0, me = (uint32_t)syscall(SYS_gettid);
  uintptr_t interp = 0;
  read_ptr(L.runtime, L.rt_interp_head, &interp);
  for (int ni = 0; interp && ni < 8 && n < max; ni++) {
    uintptr_t ts = 0;
    read_ptr(interp, L.in_threads_head, &ts);
    for (uint32_t steps = 0; ts && steps < 4 * max && n < max; steps++) {
      struct ntr_pythread *t = &out[n];
      memset(t, 0, sizeof *t);
      uintptr_t tid = 0, ident = 0;
      if (read_ptr(ts, L.ts_native_tid, &tid) || read_ptr(ts, L.ts_thread_id, &ident))
        break;
      t->tid = (uint32_t)tid;
      t->thread_id = ident;
      if (t->tid == me)
        t->flags |= NTR_PYT_DUMPER;
      if (t->tid)
        thread_name(t->tid, t->name, sizeof t->name);
      uintptr_t fr = ts_frame_safe(ts);
      for (int hops = 0; fr && hops < 4 * (int)NTR_PYTHREAD_DEPTH; hops++) {
        uintptr_t code;
        int lasti;
        int k = frame_safe(fr, &code, &lasti);
        if (k < 0)
          break;
        if (k > 0) {
          if (t->depth == NTR_PYTHREAD_DEPTH) {
            t->flags |= NTR_PYT_TRUNCATED;
            break;
          }
          t->frame[t->depth++] = resolve(code, lasti, code_check_safe(code));
        }
        if (read_ptr(fr, L.fr_previous, &fr))
          break;
      }
      n++;
      if (read_ptr(ts, L.ts_next, &ts))
        break;
    }
    if (read_ptr(interp, L.in_next, &interp))
      break;
  }
  errno = saved;
  return n;
}

/* -------------------------------------------------------- setup -- */

/* 3.11 and 3.12: offsets of the default (non-debug) build, per minor. */
static int layout_fixed(uint32_t minor) {
  L.ob_type = 8;
  L.by_size = 16, L.by_sval = 32;
  L.uni_state = 32, L.uni_length = 16;
  L.rt_interp_head = 40, L.in_next = 0;
  L.ts_next = 8;
  L.ts_frame = NO_OFF;
  L.code_mask = ~(uintptr_t)0;
  L.co_filename = 112, L.co_qualname = 128, L.co_linetable = 136;
  if (minor == 11) {
    L.in_threads_head = 16;
    L.ts_thread_id = 152, L.ts_native_tid = 160, L.ts_cframe = 56, L.cf_frame = 8;
    L.fr_previous = 48, L.fr_code = 32, L.fr_instr = 56, L.fr_owner = 69;
    L.owner_max = 2; /* thread, generator, frame object: all Python code */
    L.co_firstlineno = 72, L.co_code = 184;
    L.uni_ascii = 48, L.uni_compact = 72;
    return 0;
  }
  if (minor == 12) {
    L.in_threads_head = 72;
    L.ts_thread_id = 136, L.ts_native_tid = 144, L.ts_cframe = 56, L.cf_frame = 0;
    L.fr_previous = 8, L.fr_code = 0, L.fr_instr = 56, L.fr_owner = 70;
    L.owner_max = 2; /* 3: FRAME_OWNED_BY_CSTACK, an entry shim */
    L.co_firstlineno = 68, L.co_code = 192;
    L.uni_ascii = 40, L.uni_compact = 56;
    return 0;
  }
  return -1;
}

/* 3.13 and 3.14: _Py_DebugOffsets at the start of _PyRuntime.  Word
 * indices (8-byte fields after the 8-byte cookie count as words 1...) of
 * the fields we use, per minor, from the struct's declaration. */
enum { W_VERSION, W_FREE_THREADED, W_INTERP_HEAD, W_IN_NEXT, W_IN_THREADS, W_TS_NEXT, W_TS_FRAME, W_TS_THREAD_ID,
       W_TS_NATIVE, W_FR_PREV, W_FR_EXEC, W_FR_INSTR, W_FR_OWNER, W_CO_FILENAME, W_CO_QUALNAME, W_CO_LINETABLE,
       W_CO_FIRSTLINE, W_CO_CODE, W_OB_TYPE, W_BY_SIZE, W_BY_SVAL, W_UNI_STATE, W_UNI_LENGTH, W_UNI_ASCII, W_COUNT };
static const uint8_t words_313[W_COUNT] = {1, 2, 5, 8, 9, 21, 23, 24, 25, 29, 30, 31, 33, 35, 37, 38, 39, 43, 45, 65, 66, 68, 69, 70};
static const uint8_t words_314[W_COUNT] = {1, 2, 5, 8, 9, 24, 26, 27, 28, 32, 33, 34, 36, 40, 42, 43, 44, 48, 51, 75, 76, 78, 79, 80};

static int layout_debug_offsets(uint32_t minor, const char **why) {
  const uint8_t *w = minor == 13 ? words_313 : minor == 14 ? words_314 : NULL;
  if (!w)
    return -1;
  char cookie[8];
  uint64_t v[W_COUNT];
  if (safe_read((const void *)L.runtime, cookie, 8) || memcmp(cookie, "xdebugpy", 8)) {
    *why = "no _Py_DebugOffsets in _PyRuntime";
    return -1;
  }
  for (int i = 0; i < W_COUNT; i++)
    if (safe_read((const void *)(L.runtime + 8u * w[i]), &v[i], 8) ||
        (i != W_VERSION && i != W_FREE_THREADED && v[i] > (1u << 20))) {
      *why = "unreadable _Py_DebugOffsets";
      return -1;
    }
  if (v[W_VERSION] != L.version) {
    *why = "_Py_DebugOffsets of another version";
    return -1;
  }
  if (v[W_FREE_THREADED]) {
    *why = "free-threaded build";
    return -1;
  }
  /* Fields of the object headers that our string readers assume. */
  if (v[W_OB_TYPE] != 8 || v[W_BY_SIZE] != 16 || v[W_BY_SVAL] != 32 || v[W_UNI_STATE] != 32 ||
      v[W_UNI_LENGTH] != 16 || v[W_UNI_ASCII] != 40) {
    *why = "unexpected object layout in _Py_DebugOffsets";
    return -1;
  }
  L.rt_interp_head = (uint32_t)v[W_INTERP_HEAD], L.in_next = (uint32_t)v[W_IN_NEXT];
  L.in_threads_head = (uint32_t)v[W_IN_THREADS];
  L.ts_next = (uint32_t)v[W_TS_NEXT], L.ts_frame = (uint32_t)v[W_TS_FRAME];
  L.ts_thread_id = (uint32_t)v[W_TS_THREAD_ID], L.ts_native_tid = (uint32_t)v[W_TS_NATIVE];
  L.ts_cframe = NO_OFF;
  L.fr_previous = (uint32_t)v[W_FR_PREV], L.fr_code = (uint32_t)v[W_FR_EXEC];
  L.fr_instr = (uint32_t)v[W_FR_INSTR], L.fr_owner = (uint32_t)v[W_FR_OWNER];
  /* 3.14's f_executable is a _PyStackRef: tag bits below the alignment */
  L.code_mask = minor >= 14 ? ~(uintptr_t)7 : ~(uintptr_t)0;
  L.owner_max = 2; /* 3.13: 3 = C stack; 3.14: 3 = interpreter, 4 = C stack */
  L.co_filename = (uint32_t)v[W_CO_FILENAME], L.co_qualname = (uint32_t)v[W_CO_QUALNAME];
  L.co_linetable = (uint32_t)v[W_CO_LINETABLE], L.co_firstlineno = (uint32_t)v[W_CO_FIRSTLINE];
  L.co_code = (uint32_t)v[W_CO_CODE];
  L.ob_type = 8, L.by_size = 16, L.by_sval = 32, L.uni_state = 32, L.uni_length = 16;
  L.uni_ascii = 40, L.uni_compact = 56; /* + utf8_length, utf8 */
  return 0;
}

static void set_state(uint32_t state) {
  if (nti_proc.ring.hdr) {
    nti_proc.ring.hdr->py_version = L.version;
    nti_proc.ring.hdr->py_state = state;
  }
}

/* Python may come after our first NCCL call: a C program that embeds it
 * later, ctypes in a process whose NCCL was first called from C.  Setup
 * then runs again from the watchdog's poll (nti_py_poll) until it reaches
 * a decision: on, unsupported or disabled.  Nothing of this is on the
 * wrappers' path: they test one process-wide flag (nti_proc.sites), which
 * the decision sets.  setup_lock orders the attempts (activation, poll). */
/* setup_lock, py_decided, seen_adds: see nti_py_setup. */

/* A thread state of the interpreter's list, when the caller has none of
 * its own (the watchdog): is its native thread id one of ours?  A layout
 * that does not fit reads garbage there.  Fault-safe reads only. */
static int validate_listed(void) {
  uintptr_t interp = 0, ts = 0, tid = 0;
  if (read_ptr(L.runtime, L.rt_interp_head, &interp) || !interp || read_ptr(interp, L.in_threads_head, &ts))
    return 0;
  if (!ts)
    return 1; /* no thread yet: each thread is checked at its first call */
  return read_ptr(ts, L.ts_native_tid, &tid) == 0 && tid && tid < (1u << 30) &&
         syscall(SYS_tgkill, getpid(), (pid_t)tid, 0) == 0;
}

/* @return 1 when decided, 0 when there is no running Python yet. */
static int setup_locked(void);

static int count_adds(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  *(unsigned long long *)arg = info->dlpi_adds;
  return 1; /* the first object carries the process-wide count */
}

static int find_libpython(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  (void)arg;
  return info->dlpi_name && strstr(info->dlpi_name, "libpython") != NULL;
}

void nti_py_setup(void) {
  pthread_mutex_lock(&setup_lock);
  if (!__atomic_load_n(&py_decided, __ATOMIC_RELAXED) && setup_locked())
    __atomic_store_n(&py_decided, 1, __ATOMIC_RELEASE);
  unsigned long long adds = 0;
  dl_iterate_phdr(count_adds, &adds);
  seen_adds = adds; /* the watchdog looks again only after a dlopen */
  pthread_mutex_unlock(&setup_lock);
}

void nti_py_poll(void) {
  /* Acquire pairs with the release store of the decision. */
  if (__atomic_load_n(&py_decided, __ATOMIC_ACQUIRE) || pthread_mutex_trylock(&setup_lock))
    return;
  unsigned long long adds = 0;
  dl_iterate_phdr(count_adds, &adds);
  /* Python is loaded and not initialized yet, or a new object was loaded
   * and it is a libpython: only then dlsym, which on a miss allocates its
   * error text, and a malloc on the watchdog's thread costs it a glibc
   * arena (recorder/heap.h).  A Python linked into the program is found by
   * nti_py_setup on the application's thread. */
  if ((py_initialized || (adds != seen_adds && dl_iterate_phdr(find_libpython, NULL))) && setup_locked())
    __atomic_store_n(&py_decided, 1, __ATOMIC_RELEASE);
  seen_adds = adds;
  pthread_mutex_unlock(&setup_lock);
}

static int setup_locked(void) {
  py_initialized = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsInitialized");
  if (!py_initialized || !py_initialized())
    return 0; /* no Python (or not running yet): nothing changes, nothing said */
  const unsigned long *ver = dlsym(RTLD_DEFAULT, "Py_Version");
  L.version = ver ? (uint32_t)*ver : 0;
  if (!nti_cfg.pystacks) {
    set_state(NTR_PY_DISABLED);
    return 1;
  }
  uint32_t major = L.version >> 24, minor = L.version >> 16 & 0xff;
  const char *why = NULL;
  get_tstate = (void *(*)(void))dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
  L.runtime = (uintptr_t)dlsym(RTLD_DEFAULT, "_PyRuntime");
  L.code_type = (uintptr_t)dlsym(RTLD_DEFAULT, "PyCode_Type");
  L.unicode_type = (uintptr_t)dlsym(RTLD_DEFAULT, "PyUnicode_Type");
  L.bytes_type = (uintptr_t)dlsym(RTLD_DEFAULT, "PyBytes_Type");
  self_pid = getpid();
  /* Is process_vm_readv on ourselves allowed?  Else the pipe probe. */
  uint64_t probe = 0x1234, back = 0;
  struct iovec l = {&back, sizeof back}, r = {&probe, sizeof probe};
  if (syscall(SYS_process_vm_readv, getpid(), &l, 1UL, &r, 1UL, 0UL) != (ssize_t)sizeof back || back != probe)
    use_pipe = pipe2(probe_fd, O_CLOEXEC | O_NONBLOCK) == 0 ? 1 : -1;
  if (!ver)
    why = "older than 3.11";
  else if (major != 3 || minor < 11 || minor > 14)
    why = "not a version this nccltrace reads (3.11-3.14)";
  else if (!get_tstate || !L.runtime || !L.code_type || !L.unicode_type || !L.bytes_type)
    why = "interpreter symbols not exported";
  else if (use_pipe < 0)
    why = "no way to read memory safely";
  else if (minor <= 12 ? layout_fixed(minor) : layout_debug_offsets(minor, &why))
    why = why ? why : "unknown layout";
  /* The calling thread (the one making its first NCCL call) checks the
   * layout against itself now, so a mismatch is said here, once. */
  if (!why) {
    uintptr_t ts = (uintptr_t)get_tstate();
    if (ts ? !validate_ts(ts) : !validate_listed())
      why = "its thread state does not match the expected layout";
  }
  if (why) {
    set_state(NTR_PY_UNSUPPORTED);
    nti_say("Python %u.%u (%s): Python call sites and stacks are off", major, minor, why);
    return 1;
  }
  set_state(NTR_PY_ON);
  __atomic_store_n(&py_on, 1, __ATOMIC_RELEASE);
  __atomic_fetch_or(&nti_proc.sites, NTI_SITES_PY, __ATOMIC_RELEASE);
  nti_fast_off_all(); /* every call records its site now: the slow path's work */
  ntr_dump_set_pythreads(nti_py_threads);
  return 1;
}

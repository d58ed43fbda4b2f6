/* resolve.c -- find the real NCCL entry points, lazily, once each.
 *
 * Thread-safety: any thread may resolve; two threads racing on one symbol
 * both store the same address (benign).  The library handle fallback is
 * taken under a mutex (slow path only).
 * Signal-safety: not signal-safe (dlsym/dlopen may take loader locks);
 * signal handlers never resolve NCCL symbols.
 *
 * Order (design §3, drop-in mode): dlsym(RTLD_NEXT) -- the normal preload
 * case; then a handle: NCCLTRACE_REAL_NCCL, libnccl.so.2 already loaded
 * (RTLD_NOLOAD: a framework dlopen'ed it RTLD_LOCAL), libnccl.so.2 next to
 * libnccltrace.so, and finally the loader's search path.  A candidate that
 * resolves into libnccltrace.so itself is rejected (dladdr), or a drop-in
 * wrapper would call itself forever.
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "interpose/nti.h"
#include "interpose/resolve.h"
#include "recorder/diag.h"

#define NT_COLL(name, ...) nti_fn_##name##_t nti_real_##name;
#define NT_P2P NT_COLL
#define NT_GROUP NT_COLL
#define NT_LIFE NT_COLL
#define NT_COLL_CFG NT_COLL
#include "recorder/nccl_api.def"

static const char *const fn_names[NTI_FN_COUNT] = {
#define NT_COLL(name, ...) #name,
#define NT_P2P(name, ...) #name,
#define NT_GROUP(name, ...) #name,
#define NT_LIFE(name, ...) #name,
#define NT_COLL_CFG(name, ...) #name,
#include "recorder/nccl_api.def"
};

static void **const fn_slots[NTI_FN_COUNT] = {
#define NT_COLL(name, ...) (void **)&nti_real_##name,
#define NT_P2P(name, ...) (void **)&nti_real_##name,
#define NT_GROUP(name, ...) (void **)&nti_real_##name,
#define NT_LIFE(name, ...) (void **)&nti_real_##name,
#define NT_COLL_CFG(name, ...) (void **)&nti_real_##name,
#include "recorder/nccl_api.def"
};

static pthread_mutex_t handle_lock = PTHREAD_MUTEX_INITIALIZER;
static void *nccl_handle;      /* fallback library handle, under handle_lock */
static int handle_tried;       /* under handle_lock */
static int missing_said[NTI_FN_COUNT]; /* one message per missing function */

/* Both go through recorder/diag.h: one write per line (lines of several
 * ranks never interleave mid-line), never into an fd 2 that is not our
 * stderr any more, never blocking, never raising SIGPIPE or SIGXFSZ. */
void nti_say(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ntr_diag_vsay("nccltrace: ", fmt, ap);
  va_end(ap);
}

void nti_say_raw(const char *s) {
  /* Async-signal-safe: strlen and ntr_diag_write (which keeps errno: the
   * interrupted code may be between a failing call and its errno check). */
  ntr_diag_write(s, strlen(s));
}

uint32_t nti_tid_slow(void) {
  /* syscall(2) is async-signal-safe; cached so the hot path does none. */
  nti_tls.tid = (uint32_t)syscall(SYS_gettid);
  return nti_tls.tid;
}

/* Address of libnccltrace.so, to refuse resolving into ourselves. */
static int is_self(void *sym) {
  Dl_info a, b;
  if (!sym || !dladdr(sym, &a) || !dladdr((void *)&nti_resolve, &b))
    return 0;
  return a.dli_fbase == b.dli_fbase;
}

static void *try_handle(void *h, const char *name) {
  if (!h)
    return NULL;
  void *s = dlsym(h, name);
  if (s && is_self(s)) {
    /* Keep the handle usable for other symbols: the library found by path
     * may be ourselves (NCCLTRACE_REAL_NCCL pointing at libnccltrace.so). */
    return NULL;
  }
  return s;
}

static void *open_checked(const char *path, int flags) {
  void *h = dlopen(path, flags);
  if (!h)
    return NULL;
  /* A handle whose ncclGetVersion is ours is no real NCCL. */
  void *s = dlsym(h, "ncclGetVersion");
  if (s && is_self(s)) {
    dlclose(h);
    return NULL;
  }
  return h;
}

static void *fallback_handle(void) {
  pthread_mutex_lock(&handle_lock);
  if (!handle_tried) {
    handle_tried = 1;
    void *h = NULL;
    if (nti_cfg.real_nccl[0]) {
      h = open_checked(nti_cfg.real_nccl, RTLD_NOW | RTLD_LOCAL);
      if (!h)
        nti_say("NCCLTRACE_REAL_NCCL=%s cannot be loaded (%s)", nti_cfg.real_nccl, dlerror());
    }
    if (!h)
      h = open_checked("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
    if (!h) {
      Dl_info self;
      if (dladdr((void *)&nti_resolve, &self) && self.dli_fname) {
        char path[1024];
        snprintf(path, sizeof path, "%s", self.dli_fname);
        char *slash = strrchr(path, '/');
        if (slash) {
          snprintf(slash + 1, sizeof path - (size_t)(slash + 1 - path), "libnccl.so.2");
          h = open_checked(path, RTLD_NOW | RTLD_LOCAL);
        }
      }
    }
    if (!h)
      h = open_checked("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    __atomic_store_n(&nccl_handle, h, __ATOMIC_RELEASE);
  }
  void *h = nccl_handle;
  pthread_mutex_unlock(&handle_lock);
  return h;
}

/* Load bases of the objects two symbols are in (NULL: unknown). */
static void *object_of(void *sym) {
  Dl_info di;
  return sym && dladdr(sym, &di) ? di.dli_fbase : NULL;
}

int nti_resolve_adopt(void *h) {
  void *v = dlsym(h, "ncclGetVersion");
  if (!v || is_self(v))
    return 0;
  void *obj = object_of(v);
  int rc;
  pthread_mutex_lock(&handle_lock);
  void *g = dlsym(RTLD_NEXT, "ncclGetVersion");
  if (g && !is_self(g)) {
    rc = object_of(g) == obj ? 1 : -1;
  } else if (nccl_handle) {
    rc = object_of(dlsym(nccl_handle, "ncclGetVersion")) == obj ? 1 : -1;
  } else {
    /* First NCCL of the process: ours to call from now on (a lookup that
     * failed before stored nothing, so the next call finds it). */
    __atomic_store_n(&nccl_handle, h, __ATOMIC_RELEASE);
    handle_tried = 1;
    rc = 1;
  }
  pthread_mutex_unlock(&handle_lock);
  return rc;
}

static void *lookup(const char *name) {
  void *s = dlsym(RTLD_NEXT, name);
  if (s && !is_self(s))
    return s;
  return try_handle(fallback_handle(), name);
}

void *nti_resolve(enum nti_fn fn) {
  if ((unsigned)fn >= NTI_FN_COUNT)
    return NULL;
  void *s = __atomic_load_n(fn_slots[fn], __ATOMIC_ACQUIRE);
  if (s)
    return s;
  s = lookup(fn_names[fn]);
  if (!s) {
    if (!__atomic_exchange_n(&missing_said[fn], 1, __ATOMIC_RELAXED))
      nti_say("%s is not provided by the loaded NCCL (too old, or no libnccl.so.2 found); "
              "returning ncclInvalidUsage", fn_names[fn]);
    return NULL;
  }
  /* Release pairs with the acquire load in NTI_REAL: benign if two threads
   * store the same address. */
  __atomic_store_n(fn_slots[fn], s, __ATOMIC_RELEASE);
  return s;
}

struct nti_libc nti_libc;
int nti_libc_ready;

void nti_libc_resolve(void) {
#define NTI_LIBC_RESOLVE(name, ret, params)                                \
  {                                                                        \
    void *sym = dlsym(RTLD_NEXT, #name);                                   \
    ret(*fn) params;                                                       \
    memcpy(&fn, &sym, sizeof fn);                                          \
    __atomic_store_n(&nti_libc.name, fn, __ATOMIC_RELAXED);                \
  }
  NTI_LIBC_LIST(NTI_LIBC_RESOLVE)
#undef NTI_LIBC_RESOLVE
  /* Release: a reader that sees ready sees every pointer. */
  __atomic_store_n(&nti_libc_ready, 1, __ATOMIC_RELEASE);
}

void *nti_nccl_symbol(const char *name) {
  return lookup(name);
}

int nti_real_nccl_version(void) {
  /* ncclGetVersion is not a table row (nothing to record); it is looked up
   * the same way so drop-in mode reports the real version. */
  ncclResult_t (*fn)(int *) = (ncclResult_t(*)(int *))lookup("ncclGetVersion");
  int v = 0;
  if (fn && fn(&v) != ncclSuccess)
    v = 0;
  return v;
}

/* dlopen.c -- NCCL loaded with dlopen past the preload (ctypes, vLLM's
 * pynccl, CuPy, custom clients): docs/interposer.md "NCCL loaded with
 * dlopen".
 *
 * Thread-safety: any thread may dlopen; the route is a pure function of
 * its arguments, the caller's object is passed in a thread-local, and the
 * adoption of the real library is under resolve.c's handle lock.  Signal-
 * safety: none needed (dlopen is not async-signal-safe either).
 *
 * dlsym(handle, "ncclAllReduce") on a handle of the real libnccl finds the
 * real function: a preloaded wrapper is never in that handle's scope, so
 * such a client's calls were invisible.  dlopen is therefore interposed:
 * a name whose last component starts with "libnccl.so" is loaded as asked
 * (that library becomes the one our wrappers call), and the caller gets a
 * handle of libnccltrace.so instead, which exports every NCCL entry point
 * (check_exports: all of NCCL 2.32's 97), so its dlsym finds our wrappers.
 *
 * Every other dlopen jumps to the real one with the caller's return
 * address in place: glibc's dlopen takes its caller from that address (the
 * caller's RUNPATH, $ORIGIN and namespace decide what a name loads), and a
 * C wrapper that calls it would make every dlopen of the process look like
 * ours.  The jump is a few instructions of assembly (x86-64 only; other
 * architectures keep dlopen as it is and say so in the docs).  For NCCL's
 * own load the caller's search path is taken from dlinfo(RTLD_DI_SERINFO)
 * of the caller's object, so a bare "libnccl.so.2" finds the library that
 * caller would have found.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "interpose/nti.h"
#include "interpose/resolve.h"

#if defined(__x86_64__)

typedef void *(*dlopen_fn)(const char *, int);

/* The caller of the dlopen being routed to nti_dlopen_nccl. */
static NTI_TLS void *dlopen_caller;

/* A name of NCCL's library: libnccl.so, libnccl.so.2, libnccl.so.2.28.9
 * (never libnccl-net.so or libnccl-profiler.so, NCCL's own plugins). */
static int is_nccl_name(const char *file) {
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  return strncmp(base, "libnccl.so", 10) == 0 && (base[10] == 0 || base[10] == '.');
}

/* A dlopen of our own (resolve.c's fallbacks load the real NCCL by name,
 * under its handle lock): never routed. */
static int from_self(void *caller) {
  Dl_info a, b;
  return caller && dladdr(caller, &a) && dladdr((void *)&is_nccl_name, &b) && a.dli_fbase == b.dli_fbase;
}

static void *no_dlopen(const char *file, int flags) {
  (void)file;
  (void)flags;
  return NULL; /* dlerror() then says nothing: no real dlopen to say it */
}

/* The search path the caller's object would use (its RPATH or RUNPATH,
 * LD_LIBRARY_PATH, the system directories), tried in order for a bare
 * name.  NULL when none has it: the real dlopen from here then searches
 * LD_LIBRARY_PATH, ld.so.cache and the defaults. */
static void *open_as_caller(dlopen_fn real, const char *file, int flags, void *caller) {
  Dl_info di;
  struct link_map *lm = NULL;
  if (!caller || !dladdr1(caller, &di, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
    return NULL;
  void *obj = real(lm->l_name && lm->l_name[0] ? lm->l_name : NULL, RTLD_LAZY | RTLD_NOLOAD);
  if (!obj)
    return NULL;
  Dl_serinfo size;
  void *h = NULL;
  if (dlinfo(obj, RTLD_DI_SERINFOSIZE, &size) == 0 && size.dls_size > sizeof size) {
    Dl_serinfo *si = malloc(size.dls_size);
    if (si) {
      memcpy(si, &size, sizeof size);
      if (dlinfo(obj, RTLD_DI_SERINFO, si) == 0) {
        for (unsigned i = 0; i < si->dls_cnt && !h; i++) {
          char path[4096];
          const char *dir = si->dls_serpath[i].dls_name;
          int n = snprintf(path, sizeof path, "%s/%s", dir, file);
          if (n > 0 && (size_t)n < sizeof path && access(path, R_OK) == 0)
            h = real(path, flags);
        }
      }
      free(si);
    }
  }
  dlclose(obj);
  return h;
}

/* Loads the NCCL the caller asked for and hands back our own handle. */
static void *nti_dlopen_nccl(const char *file, int flags) {
  dlopen_fn real = (dlopen_fn)NTI_LIBC(dlopen);
  void *caller = dlopen_caller;
  void *h = NULL;
  if (!strchr(file, '/') && !(flags & RTLD_NOLOAD))
    h = open_as_caller(real, file, flags, caller);
  if (!h)
    h = real(file, flags);
  if (!h)
    return NULL;
  int rc = nti_resolve_adopt(h);
  if (rc <= 0) {
    if (rc < 0) {
      static int said; /* atomic */
      if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
        nti_say("%s loaded with dlopen is a second NCCL beside the one already in use: "
                "its calls are not recorded", file);
    }
    return h; /* ourselves, or a second NCCL: the caller keeps what it asked for */
  }
  Dl_info self;
  void *mine = NULL;
  if (dladdr((void *)&nti_dlopen_nccl, &self) && self.dli_fname)
    mine = real(self.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (!mine)
    return h;
  /* The real library stays loaded for our wrappers whatever the caller
   * closes later: its handle is now resolve.c's. */
  return mine;
}

/* Called by the stub with dlopen's arguments and its return address:
 * where to jump.  Hidden: the stub calls it directly. */
__attribute__((visibility("hidden"), used)) dlopen_fn nti_dlopen_route(const char *file, int flags,
                                                                       void *caller) {
  (void)flags;
  dlopen_fn real = (dlopen_fn)NTI_LIBC(dlopen);
  if (!real)
    return no_dlopen;
  if (!file || nti_proc.disabled || nti_cfg.disable || !is_nccl_name(file) || from_self(caller))
    return real;
  dlopen_caller = caller;
  return nti_dlopen_nccl;
}

/* dlopen: saves the two arguments, asks the route (with the return
 * address, the caller), restores them and jumps: the callee returns
 * straight to the caller, which glibc's dlopen sees as its own. */
__asm__(".text\n"
        ".globl dlopen\n"
        ".type dlopen, @function\n"
        "dlopen:\n"
        ".cfi_startproc\n"
        "  pushq %rdi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "  pushq %rsi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "  subq $8, %rsp\n"
        ".cfi_adjust_cfa_offset 8\n"
        "  movq 24(%rsp), %rdx\n"
        "  call nti_dlopen_route\n"
        "  addq $8, %rsp\n"
        ".cfi_adjust_cfa_offset -8\n"
        "  popq %rsi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "  popq %rdi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "  jmp *%rax\n"
        ".cfi_endproc\n"
        ".size dlopen, .-dlopen\n");

#endif /* __x86_64__ */

/* Every libnccl mapped in the process that is not the one our wrappers
 * call: its calls were invisible (a second NCCL, RTLD_DEEPBIND, dlmopen,
 * a non-x86-64 dlopen).  One line per process, at exit. */
struct unseen_walk {
  void *ours; /* load base of the NCCL we call, NULL when none */
  char path[256];
};

static int unseen_visit(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  struct unseen_walk *w = arg;
  const char *name = info->dlpi_name;
  if (!name || !name[0] || w->path[0])
    return 0;
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  if (strncmp(base, "libnccl.so", 10) != 0 || (base[10] != 0 && base[10] != '.'))
    return 0;
  if ((void *)info->dlpi_addr == w->ours)
    return 0;
  snprintf(w->path, sizeof w->path, "%s", name);
  return 0;
}

int nti_dlopen_unseen(char *path, size_t cap) {
  struct unseen_walk w = {0};
  void *v = nti_nccl_symbol("ncclGetVersion");
  Dl_info di;
  if (v && dladdr(v, &di))
    w.ours = di.dli_fbase;
  /* dli_fbase and dlpi_addr differ by the first segment's vaddr (0 for
   * shared objects, which is all a libnccl is). */
  dl_iterate_phdr(unseen_visit, &w);
  if (!w.path[0])
    return 0;
  snprintf(path, cap, "%s", w.path);
  return 1;
}

/* cuda_graph.c -- the interposed CUDA runtime and driver graph entry points
 * (interpose/cuda_graph.def), each forwarding to the real one.
 *
 * Thread-safety: any thread; resolution stores one pointer per row (racing
 * threads store the same value).  State lives in graph.c.
 * Signal-safety: not signal-safe (dlsym on first use).
 *
 * Safe for programs that never use graphs: nothing here runs until the
 * program calls one of these names, and then only a lookup.  The real
 * function is found with dlsym(RTLD_NEXT) -- the normal LD_PRELOAD case --
 * and else in a copy already loaded without global scope (a framework that
 * dlopen'ed libcudart RTLD_LOCAL): libcudart.so* found by dl_iterate_phdr,
 * libcuda.so.1 with RTLD_NOLOAD.  We never load a CUDA library ourselves,
 * and a candidate that is our own symbol is refused.  The file includes no
 * CUDA header: its prototypes are its own (cuda_graph.def says why they
 * are ABI-equal), and both APIs return an int-sized enum whose 999 is
 * "unknown error" (cudaErrorUnknown, CUDA_ERROR_UNKNOWN).
 */
#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "interpose/graph.h"

#define NTG_EXPORT __attribute__((visibility("default")))
#define NTG_UNKNOWN 999

void nti_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int find_cudart(struct dl_phdr_info *info, size_t size, void *out) {
  (void)size;
  const char *slash = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
  const char *base = slash ? slash + 1 : info->dlpi_name;
  if (base && strncmp(base, "libcudart.so", 12) == 0) {
    *(void **)out = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
    return *(void **)out != NULL;
  }
  return 0;
}

static void *ntg_resolve(const char *name) {
  void *f = dlsym(RTLD_NEXT, name);
  if (!f) {
    void *h = NULL;
    if (strncmp(name, "cuda", 4) == 0)
      dl_iterate_phdr(find_cudart, &h);
    else
      h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (h)
      f = dlsym(h, name);
  }
  Dl_info self, got;
  if (f && dladdr((void *)ntg_resolve, &self) && dladdr(f, &got) && self.dli_fbase == got.dli_fbase)
    f = NULL; /* ourselves: calling it would recurse */
  if (!f)
    nti_say("%s: the real function was not found; returning an error", name);
  return f;
}

#define NTG_REAL(name)                                                        \
  ({                                                                          \
    ntg_##name##_t f_ = __atomic_load_n(&ntg_real_##name, __ATOMIC_ACQUIRE);  \
    if (__builtin_expect(!f_, 0)) {                                           \
      f_ = (ntg_##name##_t)ntg_resolve(#name);                                \
      __atomic_store_n(&ntg_real_##name, f_, __ATOMIC_RELEASE);              \
    }                                                                         \
    f_;                                                                       \
  })

/* Role bodies: forward, and tell graph.c around the call. */
#define NTG_BODY_END(real, args, a, b)                                        \
  if (nti_graph_skip())                                                       \
    return real args;                                                         \
  uint64_t cid = nti_graph_end_pre(a);                                        \
  int rc = real args;                                                         \
  nti_graph_end_post(a, cid, (b) ? *(b) : NULL, rc);                          \
  return rc;
#define NTG_BODY_INST(real, args, a, b)                                       \
  int rc = real args;                                                         \
  if (!nti_graph_skip())                                                      \
    nti_graph_instantiated((a) ? *(a) : NULL, b, rc);                         \
  return rc;
/* The launch of a graph without NCCL calls: one lookup (graph.h). */
#define NTG_BODY_LAUNCH(real, args, a, b)                                     \
  struct nti_graph *e = nti_graph_exec_find(a);                               \
  if (__builtin_expect(!e, 1) || nti_graph_skip())                            \
    return real args;                                                         \
  struct nti_graph_launch l;                                                  \
  nti_graph_launch_pre(e, a, b, &l);                                          \
  int rc = real args;                                                         \
  nti_graph_launch_post(&l, b, rc);                                           \
  return rc;
#define NTG_BODY_XDESTROY(real, args, a, b)                                   \
  if (!nti_graph_skip())                                                      \
    nti_graph_exec_destroyed(a);                                              \
  return real args;
#define NTG_BODY_GDESTROY(real, args, a, b)                                   \
  if (!nti_graph_skip())                                                      \
    nti_graph_destroyed(a);                                                   \
  return real args;
#define NTG_BODY_UPDATE(real, args, a, b)                                     \
  int rc = real args;                                                         \
  if (!nti_graph_skip())                                                      \
    nti_graph_updated(a, b, rc);                                              \
  return rc;
#define NTG_BODY_CLONE(real, args, a, b)                                      \
  int rc = real args;                                                         \
  if (!nti_graph_skip())                                                      \
    nti_graph_cloned((a) ? *(a) : NULL, b, rc);                               \
  return rc;
#define NTG_BODY_CHILD(real, args, a, b)                                      \
  int rc = real args;                                                         \
  if (!nti_graph_skip())                                                      \
    nti_graph_child_added(a, b, rc);                                          \
  return rc;

#define NTG(name, ROLE, params, args, a, b)                                   \
  typedef int (*ntg_##name##_t) params;                                       \
  static ntg_##name##_t ntg_real_##name;                                      \
  NTG_EXPORT int name params;                                                 \
  NTG_EXPORT int name params {                                                \
    ntg_##name##_t real = NTG_REAL(name);                                     \
    if (__builtin_expect(!real, 0))                                           \
      return NTG_UNKNOWN;                                                     \
    NTG_BODY_##ROLE(real, args, a, b)                                         \
  }
#include "interpose/cuda_graph.def"

/* passthrough.c -- forwarders for the NCCL functions we export but do not
 * record (nccl_passthrough.def), and for the pnccl* profiling aliases of
 * every NCCL function (those rows and the rows of nccl_api.def).  Needed by
 * drop-in mode: a framework that loads libnccltrace.so as "the NCCL
 * library" looks up ncclGetVersion, ncclGetErrorString, ... on our handle
 * and must find every name the real libnccl.so.2 exports.
 *
 * pncclX is never recorded: it is the name a profiling layer calls to reach
 * NCCL underneath itself (as PMPI), so it goes straight to the real pncclX.
 * Recording it could also loop: a layer that defines ncclX and calls pncclX
 * would re-enter our ncclX through the real library's lookup of ncclX.
 *
 * Thread-safety: as the wrapped functions; the resolved pointer is cached with
 * an atomic store (two threads racing store the same address).
 * Signal-safety: none needed (these are never called from our handlers).
 */
#include "interpose/nti.h"
#include "interpose/resolve.h"

/* Resolve `name` once into *slot; NULL (and one line) when NCCL lacks it. */
static void *pass_resolve(void **slot, const char *name) {
  void *fn = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (NTI_LIKELY(fn != NULL))
    return fn;
  fn = nti_nccl_symbol(name);
  if (!fn) {
    nti_say("%s is not in the loaded NCCL library", name);
    return NULL;
  }
  __atomic_store_n(slot, fn, __ATOMIC_RELEASE); /* pairs with the load above */
  return fn;
}

#define PASS_FN(ret, fail, sym, str, params, args)                                      \
  NTI_EXPORT ret sym params {                                                           \
    static void *real;                                                                  \
    ret(*fn) params = (ret(*) params)pass_resolve(&real, str);                          \
    if (NTI_UNLIKELY(!fn))                                                              \
      return fail;                                                                      \
    return fn args;                                                                     \
  }
#define PASS_VOID_FN(sym, str, params, args)                                            \
  NTI_EXPORT void sym params {                                                          \
    static void *real;                                                                  \
    void(*fn) params = (void(*) params)pass_resolve(&real, str);                        \
    if (NTI_LIKELY(fn != NULL))                                                         \
      fn args;                                                                          \
  }

/* Unrecorded functions, both spellings. */
#define NT_PASS(ret, fail, name, params, args)                                          \
  PASS_FN(ret, fail, name, #name, params, args)                                         \
  PASS_FN(ret, fail, p##name, "p" #name, params, args)
#define NT_PASS_VOID(name, params, args)                                                \
  PASS_VOID_FN(name, #name, params, args)                                               \
  PASS_VOID_FN(p##name, "p" #name, params, args)
#define NT_PASS_VOID_NOALIAS(name, params, args) PASS_VOID_FN(name, #name, params, args)
#include "interpose/nccl_passthrough.def"

/* The profiling aliases of the recorded functions. */
#define PASS_P(name, params, args)                                                      \
  ncclResult_t p##name params;                                                          \
  PASS_FN(ncclResult_t, ncclInvalidUsage, p##name, "p" #name, params, args)
#define NT_COLL(name, KIND, params, args, ...) PASS_P(name, params, args)
#define NT_P2P NT_COLL
#define NT_GROUP(name, KIND, params, args) PASS_P(name, params, args)
#define NT_LIFE NT_GROUP
#define NT_COLL_CFG NT_COLL
#include "recorder/nccl_api.def"
#undef PASS_P

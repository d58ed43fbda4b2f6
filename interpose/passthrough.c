/* passthrough.c -- forwarders for the NCCL functions we export but do not
 * record (nccl_passthrough.def).  Needed by drop-in mode: a framework that
 * loads libnccltrace.so as "the NCCL library" looks up ncclGetVersion,
 * ncclGetErrorString, ... on our handle and must find them.
 *
 * Thread-safety: as the wrapped functions; the resolved pointer is cached with
 * an atomic store (two threads racing store the same address).
 * Signal-safety: none needed (these are never called from our handlers).
 */
#include "interpose/nti.h"

#define NT_PASS(ret, fail, name, params, args)                                          \
  NTI_EXPORT ret name params {                                                          \
    static ret(*real) params;                                                           \
    ret(*fn) params = __atomic_load_n(&real, __ATOMIC_ACQUIRE);                        \
    if (NTI_UNLIKELY(!fn)) {                                                            \
      fn = (ret(*) params)nti_nccl_symbol(#name);                                      \
      if (!fn) {                                                                        \
        nti_say("%s is not in the loaded NCCL library", #name);                         \
        return fail;                                                                    \
      }                                                                                 \
      __atomic_store_n(&real, fn, __ATOMIC_RELEASE); /* pairs with the load above */ \
    }                                                                                   \
    return fn args;                                                                     \
  }
#include "interpose/nccl_passthrough.def"
#undef NT_PASS

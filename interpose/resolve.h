/* resolve.h -- the real functions under our wrappers: one pointer per row
 * of recorder/nccl_api.def (NCCL, resolved on first use), and the libc
 * functions we interpose (NTI_LIBC_LIST, resolved once in init).
 *
 * Thread-safety: NCCL pointers are accessed with __atomic builtins only;
 * a racing second resolver stores the same value.  The libc table is
 * written by nti_libc_resolve before the library installs any handler or
 * registers its fork handlers, and only read after.
 * Signal-safety: NTI_REAL is async-signal-safe once the row is resolved
 * (one acquire load); resolving (dlsym, dlopen) is not.  NTI_LIBC is
 * async-signal-safe always: a plain load of the table.
 */
#ifndef NTI_RESOLVE_H
#define NTI_RESOLVE_H

#include <signal.h>

#include "interpose/nti.h"

/* Row index of every table entry (the order of recorder/nccl_api.def). */
enum nti_fn {
#define NT_COLL(name, ...) NTI_FN_##name,
#define NT_P2P(name, ...) NTI_FN_##name,
#define NT_GROUP(name, ...) NTI_FN_##name,
#define NT_LIFE(name, ...) NTI_FN_##name,
#define NT_COLL_CFG(name, ...) NTI_FN_##name,
#include "recorder/nccl_api.def"
  NTI_FN_COUNT
};

/* Real NCCL entry points: one pointer per table row, resolved on first use
 * and accessed with __atomic builtins only. */
#define NT_COLL(name, KIND, params, ...) typedef ncclResult_t (*nti_fn_##name##_t) params; \
  extern nti_fn_##name##_t nti_real_##name;
#define NT_P2P NT_COLL
#define NT_GROUP NT_COLL
#define NT_LIFE NT_COLL
#define NT_COLL_CFG NT_COLL
#include "recorder/nccl_api.def"

/* Resolve row fn (enum nti_fn) and store it in its pointer.
 * @return the function, or NULL when the loaded NCCL lacks it (said once). */
void *nti_resolve(enum nti_fn fn);
#define NTI_REAL(name)                                                      \
  ({                                                                        \
    nti_fn_##name##_t nti_fn_ =                                             \
        __atomic_load_n(&nti_real_##name, __ATOMIC_ACQUIRE);                \
    if (NTI_UNLIKELY(!nti_fn_))                                             \
      nti_fn_ = (__typeof__(nti_fn_))nti_resolve(NTI_FN_##name);   \
    nti_fn_;                                                                \
  })
/* The libc functions we interpose, one row each: name, return type,
 * parameters.  Their real versions (the next object's) are in nti_libc. */
#define NTI_LIBC_LIST(X)                                                   \
  X(sigaction, int, (int, const struct sigaction *, struct sigaction *))   \
  X(signal, sighandler_t, (int, sighandler_t))                             \
  X(_exit, void, (int))                                                    \
  X(_Exit, void, (int))                                                    \
  X(execve, int, (const char *, char *const[], char *const[]))             \
  X(execvpe, int, (const char *, char *const[], char *const[]))            \
  X(execv, int, (const char *, char *const[]))                             \
  X(execvp, int, (const char *, char *const[]))                            \
  X(fexecve, int, (int, char *const[], char *const[]))                     \
  X(execveat, int, (int, const char *, char *const[], char *const[], int)) \
  X(dlopen, void *, (const char *, int))

struct nti_libc {
#define NTI_LIBC_FIELD(name, ret, params) ret(*name) params; /* NULL: absent */
  NTI_LIBC_LIST(NTI_LIBC_FIELD)
#undef NTI_LIBC_FIELD
};
extern struct nti_libc nti_libc;
extern int nti_libc_ready; /* 1 once nti_libc is filled (atomic) */
/* Fill nti_libc (dlsym RTLD_NEXT).  Called first thing in init, before any
 * signal handler or fork handler of ours is installed; again only by a
 * wrapper called before init (another library's constructor).  Racing
 * calls store the same values.  Not async-signal-safe. */
void nti_libc_resolve(void);
/* The real libc function `name` (NULL when absent).  After init this is
 * one acquire load and one relaxed load, nothing else: our signal handlers
 * and fork children (both only exist after init) never reach dlsym, which
 * may take the loader's lock that the interrupted code or the forking
 * thread holds. */
#define NTI_LIBC(name)                                                     \
  ((NTI_UNLIKELY(!__atomic_load_n(&nti_libc_ready, __ATOMIC_ACQUIRE))      \
        ? nti_libc_resolve()                                               \
        : (void)0),                                                        \
   __atomic_load_n(&nti_libc.name, __ATOMIC_RELAXED))
/* Any symbol of the real NCCL (not a table row: ncclCommCount, ...),
 * found the same way as the rows.  NULL when absent. */
void *nti_nccl_symbol(const char *name);
/* h, a handle of a libnccl the application dlopen'ed (dlopen.c): make it
 * the library our wrappers call when none is in use yet.
 * @return 1 adopted (or already the one in use), 0 h is libnccltrace.so
 * itself, -1 another NCCL is in use.  Not signal-safe. */
int nti_resolve_adopt(void *h);
/* A libnccl mapped in this process that is not the one our wrappers call
 * (its calls are invisible): 1 and its path in path, else 0.  Walks the
 * loaded objects: not signal-safe (dlopen.c). */
int nti_dlopen_unseen(char *path, size_t cap);
/* ncclGetVersion of the real library, 0 when unavailable. */
int nti_real_nccl_version(void);

#endif /* NTI_RESOLVE_H */

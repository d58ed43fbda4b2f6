/* record.c -- records written outside the generated wrappers: results
 * stored after the call, tracer events, stack ids.
 *
 * Thread-safety: any thread.  Signal-safety: nti_record_patch and
 * nti_record_event are async-signal-safe (ring reserve/commit and plain
 * stores); nti_stack_id is not (libunwind may take locks).
 */
#include "interpose/nti.h"
#include "interpose/comm.h"
#include "interpose/record.h"
#include "interpose/pyframes.h"
#include "recorder/names.h"
#include "recorder/stack.h"

static void patch(struct ntr_record *e, int result, uint16_t flags, uint64_t tsc_done) {
  if (result != NTI_KEEP_RESULT)
    __atomic_store_n(&e->result, result, __ATOMIC_RELAXED);
  if (tsc_done)
    __atomic_store_n(&e->tsc_done, tsc_done, __ATOMIC_RELAXED);
  if (flags)
    __atomic_fetch_or(&e->flags, flags, __ATOMIC_RELAXED);
}

void nti_record_patch(uint64_t pos, const struct nti_comm *c, int result, uint16_t flags,
                      uint64_t tsc_done) {
  if (!nti_active())
    return;
  /* The slot may have been reused by a writer that lapped the ring while
   * the call ran; only touch it while it still holds our position.  The
   * window between the check and the store is a (documented) race worth one
   * wrong field after slot_count records, never a crash: the mapping stays. */
  struct ntr_record *r = &nti_proc.ring.slots[pos & nti_proc.ring.mask];
  if (__atomic_load_n(&r->commit, __ATOMIC_ACQUIRE) == pos + 1)
    patch(r, result, flags, tsc_done);
  if (!c)
    return;
  /* The copy in recent[] is most likely the newest one of this comm; look
   * there first, then further back (64 entries at most). */
  struct ntr_comm_state *cs = c->cs;
  uint64_t n = __atomic_load_n(&cs->rec_count, __ATOMIC_ACQUIRE);
  for (uint64_t k = 0; k < NTR_COMM_RECENT && k < n; k++) {
    struct ntr_record *e = &cs->recent[(n - 1 - k) & (NTR_COMM_RECENT - 1)];
    if (__atomic_load_n(&e->commit, __ATOMIC_ACQUIRE) == pos + 1) {
      patch(e, result, flags, tsc_done);
      return;
    }
  }
}

void nti_record_patch_aux(uint64_t pos, const struct nti_comm *c, uint64_t aux) {
  if (!nti_active())
    return;
  struct ntr_record *r = &nti_proc.ring.slots[pos & nti_proc.ring.mask];
  if (__atomic_load_n(&r->commit, __ATOMIC_ACQUIRE) == pos + 1)
    __atomic_store_n(&r->aux, aux, __ATOMIC_RELAXED);
  if (!c)
    return;
  struct ntr_comm_state *cs = c->cs;
  uint64_t n = __atomic_load_n(&cs->rec_count, __ATOMIC_ACQUIRE);
  for (uint64_t k = 0; k < NTR_COMM_RECENT && k < n; k++) {
    struct ntr_record *e = &cs->recent[(n - 1 - k) & (NTR_COMM_RECENT - 1)];
    if (__atomic_load_n(&e->commit, __ATOMIC_ACQUIRE) == pos + 1) {
      __atomic_store_n(&e->aux, aux, __ATOMIC_RELAXED);
      return;
    }
  }
}

void nti_record_event(unsigned kind, const struct nti_comm *c, const char *text, uint64_t count,
                      uint64_t aux, uint64_t seq) {
  if (!nti_active())
    return;
  uint64_t pos;
  struct ntr_record *r = nti_record_begin(&pos, kind, NTR_PHASE_EVENT, c);
  r->count = count;
  r->aux = aux;
  r->seq = seq;
  if (text) {
    /* NUL-padded, not necessarily terminated (format.h). */
    size_t i = 0;
    for (; i < sizeof r->u.text && text[i]; i++)
      r->u.text[i] = text[i];
    for (; i < sizeof r->u.text; i++)
      r->u.text[i] = 0;
  }
  nti_record_end(r, pos, c);
}

/* NCCLTRACE_STACKS=1: the stack id of a call site, by the return address
 * into the application, so a known site costs a probe, not an unwind.
 * Direct-mapped, one word per entry: ip (47 bits of a user address) << 17
 * | id (a stack table index + 1, <= NTR_STACK_MAX), written and read whole
 * (relaxed atomics: an entry is a hint; a torn or stale one cannot
 * happen, and a lost race only costs one more unwind).  The cache names a
 * site by where it calls from: a site reached through different callers
 * keeps the stack of its first call. */
#define SITE_CACHE 1024u
static uint64_t site_cache[SITE_CACHE];
_Static_assert(NTR_STACK_MAX < (1u << 17), "stack ids fit the cache word");

uint32_t nti_stack_id_at(const void *site) {
  uint64_t ip = (uint64_t)(uintptr_t)site;
  if ((ip - 1) >> 47) /* 0, or not a user address (0 wraps round) */
    return nti_stack_id();
  uint32_t h = (uint32_t)((ip * 0x9e3779b97f4a7c15ull) >> 54) & (SITE_CACHE - 1);
  uint64_t w = __atomic_load_n(&site_cache[h], __ATOMIC_RELAXED);
  /* ip != 0 here, so an empty entry (0) never matches; a stored id is
   * never 0 (below). */
  if (w >> 17 == ip)
    return (uint32_t)(w & 0x1ffffu);
  uint32_t id = nti_stack_id();
  if (id && id < (1u << 17))
    __atomic_store_n(&site_cache[h], ip << 17 | id, __ATOMIC_RELAXED);
  return id;
}

uint32_t nti_stack_id(void) {
  /* libunwind may set errno; the wrapper relies on its callees keeping it. */
  int saved = errno;
  uint32_t id = ntr_stack_capture(&nti_proc.ring);
  errno = saved;
  return id;
}

__attribute__((noinline)) void nti_sites(struct ntr_record *r, const void *site) {
  int s = nti_sites_on();
  if (s & NTI_SITES_NATIVE)
    r->stack_id = (uint16_t)(site ? nti_stack_id_at(site) : nti_stack_id());
  if (s & NTI_SITES_PY)
    r->pystack_id = (uint16_t)nti_py_site();
}

const char *nti_kind_name(unsigned kind) {
  const char *n = ntr_name_kind(kind);
  return n ? n : "Event";
}

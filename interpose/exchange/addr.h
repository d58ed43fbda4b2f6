/* addr.h -- TCP addresses of the checker, resolved once (prefix ntx_addr_).
 *
 * Thread-safety: thread-safe (a mutex around a small cache).  Not
 * async-signal-safe.
 *
 * getaddrinfo allocates (its result, NSS), and a malloc on one of the
 * tracer's threads costs that thread a 64 MiB glibc arena of address space
 * (recorder/heap.h).  So a numeric address is parsed without it, and a
 * name is resolved once -- primed by the thread that starts the exchange,
 * an application thread -- and kept: later connects and reconnects of the
 * tracer's threads reuse it.
 */
#ifndef NTX_ADDR_H
#define NTX_ADDR_H
#include <sys/socket.h>

struct ntx_addr {
  struct sockaddr_storage sa;
  socklen_t len;
  int family;
};

/* host port -> *out (the first address getaddrinfo gives, as before).
 * @return 0, or -EHOSTUNREACH (no such name, or the cache is full and the
 *         name is new: resolved then, not kept). */
int ntx_addr_get(const char *host, const char *port, struct ntx_addr *out);
#endif

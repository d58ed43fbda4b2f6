/* discover.h -- where the coordinator is, and whether this process hosts it
 * (docs/wire-protocol.md, "Discovery").
 *
 * Thread-safety: reads the environment; call from ntx_start (one thread).
 * Signal-safety: none.
 */
#ifndef NTX_DISCOVER_H
#define NTX_DISCOVER_H
#include <stdint.h>

struct ntx_discovery {
  int found;        /* a coordinator address is known */
  int host_here;    /* this process runs the embedded coordinator */
  char host[256];
  char port[16];
  char how[192];    /* one phrase for the startup line */
};

/* In order: coord ("host:port", NCCLTRACE_COORD) when set; else
 * MASTER_ADDR with port MASTER_PORT + port_offset, hosted by launcher rank 0;
 * else not found (d->how says why). */
void ntx_discover(const char *coord, int port_offset, int32_t launcher_rank, struct ntx_discovery *d);
#endif

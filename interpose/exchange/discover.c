/* discover.c -- coordinator discovery (contract: discover.h).
 *
 * Why MASTER_ADDR/MASTER_PORT: torchrun, DeepSpeed, Lightning, accelerate
 * and most MPI wrappers for PyTorch export them to every rank, and the rank
 * with RANK=0 runs on MASTER_ADDR.  We never talk to the launcher's own
 * store (its protocol is not ours to depend on); we only borrow the address
 * and a port next to it. */
#include "interpose/exchange/discover.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interpose/exchange/coord.h"

void ntx_discover(const char *coord, int port_offset, int32_t launcher_rank, struct ntx_discovery *d) {
  memset(d, 0, sizeof *d);
  if (coord && coord[0]) {
    if (ntx_split_hostport(coord, d->host, sizeof d->host, d->port, sizeof d->port) < 0 ||
        !strcmp(d->port, "0")) {
      snprintf(d->how, sizeof d->how, "NCCLTRACE_COORD='%.100s' is not host:port", coord);
      return;
    }
    d->found = 1;
    snprintf(d->how, sizeof d->how, "NCCLTRACE_COORD=%.150s", coord);
    return;
  }
  /* The launcher's variables, read when the exchange starts (first comm),
   * not at load: a script may still set them (os.environ) before
   * init_process_group, as it may for PyTorch's own rendezvous. */
  const char *addr = getenv("MASTER_ADDR"), *mport = getenv("MASTER_PORT");
  if (!addr || !addr[0] || !mport || !mport[0]) {
    snprintf(d->how, sizeof d->how, "neither NCCLTRACE_COORD nor MASTER_ADDR/MASTER_PORT is set");
    return;
  }
  char *end;
  long p = strtol(mport, &end, 10) + port_offset;
  if (*end || p <= 0 || p > 65535 || strlen(addr) >= sizeof d->host) {
    snprintf(d->how, sizeof d->how, "MASTER_PORT='%.20s' + %d is not a port", mport, port_offset);
    return;
  }
  snprintf(d->host, sizeof d->host, "%s", addr);
  snprintf(d->port, sizeof d->port, "%ld", p);
  d->found = 1;
  d->host_here = launcher_rank == 0;
  snprintf(d->how, sizeof d->how, "MASTER_ADDR:MASTER_PORT+%d = %.100s:%ld, hosted by rank 0",
           port_offset, addr, p);
}

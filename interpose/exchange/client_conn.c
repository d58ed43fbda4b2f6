/* client_conn.c -- the client's way to the checker (contract: client_conn.h). */
#include "interpose/exchange/client_conn.h"
#include "interpose/exchange/addr.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int ntx_conn_tcp(const char *host, const char *port) {
  struct ntx_addr a;
  if (ntx_addr_get(host, port, &a) != 0)
    return -EHOSTUNREACH;
  int fd = socket(a.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int rc = fd < 0 ? -errno : fd;
  if (fd >= 0) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (const struct sockaddr *)&a.sa, a.len) != 0 && errno != EINPROGRESS) {
      rc = -errno;
      close(fd);
    }
  }
  return rc;
}

void ntx_cagg_init(struct ntx_cagg *ca, const struct ntx_key *key, const char *job, const char *host_label,
                   const char *up_host, const char *up_port, int32_t lrank, int32_t world_size,
                   int32_t local_world_size, int want) {
  memset(ca, 0, sizeof *ca);
  /* single-host jobs stay direct: one hop less, nothing to gain */
  ca->on = want >= 0 ? want : world_size > 0 && local_world_size > 0 && world_size > local_world_size;
  ca->key = *key;
  ca->lrank = lrank;
  snprintf(ca->job, sizeof ca->job, "%s", job ? job : "");
  snprintf(ca->up_host, sizeof ca->up_host, "%s", up_host);
  snprintf(ca->up_port, sizeof ca->up_port, "%s", up_port);
  /* A host label (NCCLTRACE_AGG_HOST, tests) splits one machine into
   * several "hosts": it is mixed into the name, so each label elects its
   * own aggregator. */
  char scope[NTX_JOB + NTX_HOST + 2];
  if (host_label && host_label[0]) {
    snprintf(ca->host, sizeof ca->host, "%s", host_label);
    snprintf(scope, sizeof scope, "%s@%s", ca->job, host_label);
  } else {
    gethostname(ca->host, sizeof ca->host - 1);
    snprintf(scope, sizeof scope, "%s", ca->job); /* the abstract namespace is per host already */
  }
  ntx_agg_name(key, scope, ca->name, sizeof ca->name);
}

int ntx_cagg_connect(struct ntx_cagg *ca, int *hosted, char *err, size_t errlen) {
  *hosted = 0;
  if (err && errlen)
    err[0] = '\0';
  if (!ca->agg) { /* the election: binding the name is winning it */
    struct ntx_agg_cfg cfg;
    ntx_agg_default_cfg(&cfg);
    cfg.name = ca->name;
    cfg.up_host = ca->up_host;
    cfg.up_port = ca->up_port;
    cfg.keys = &ntx_keys; /* this process's: the clients of this host share its comms */
    cfg.key = ca->key;
    cfg.host = ca->host;
    cfg.job = ca->job;
    cfg.lrank = ca->lrank;
    char e[256] = "";
    int rc = ntx_agg_listen(&ca->agg, &cfg, e, sizeof e);
    if (rc == 0 && ntx_agg_start(ca->agg) != 0) {
      ntx_agg_stop(ca->agg);
      ca->agg = NULL;
      snprintf(e, sizeof e, "cannot start the node aggregator thread");
      rc = -EAGAIN;
    }
    if (rc == 0)
      *hosted = 1;
    else if (rc != -EADDRINUSE && err && errlen)
      snprintf(err, errlen, "%s", e);
  }
  int32_t pid = -1;
  uint32_t uid = 0;
  int fd = ntx_agg_connect_peer(ca->name, &pid, &uid);
  if (fd == -EACCES && err && errlen)
    snprintf(err, errlen, "the name @%s is held by pid %d of uid %u, not by this user: refused", ca->name,
             (int)pid, (unsigned)uid);
  return fd;
}

void ntx_cagg_stop(struct ntx_cagg *ca) {
  if (ca->agg)
    ntx_agg_stop(ca->agg);
  ca->agg = NULL;
}

void ntx_cagg_forget_in_child(struct ntx_cagg *ca) {
  ntx_agg_forget_in_child(ca->agg);
  ca->agg = NULL; /* its memory is the parent's copy: left alone */
  ca->on = 0;     /* checking is off in a fork child anyway (client.c) */
}

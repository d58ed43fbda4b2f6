/* addr.c -- the checker's TCP addresses, resolved once (contract: addr.h). */
#include "interpose/exchange/addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NCACHE 4

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
  char host[256], port[16];
  struct ntx_addr a;
} cache[NCACHE];
static int ncache;

/* A numeric port, 1..65535; -1 else. */
static int port_num(const char *port) {
  char *end;
  long p = strtol(port, &end, 10);
  return *port && !*end && p > 0 && p < 65536 ? (int)p : -1;
}

/* An IPv4 or IPv6 literal: no allocation. */
static int numeric(const char *host, int port, struct ntx_addr *out) {
  memset(out, 0, sizeof *out);
  struct sockaddr_in *v4 = (struct sockaddr_in *)&out->sa;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&out->sa;
  if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons((uint16_t)port);
    out->len = sizeof *v4;
  } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons((uint16_t)port);
    out->len = sizeof *v6;
  } else {
    return -1;
  }
  out->family = out->sa.ss_family;
  return 0;
}

int ntx_addr_get(const char *host, const char *port, struct ntx_addr *out) {
  if (!host || !port)
    return -EHOSTUNREACH;
  int pn = port_num(port);
  if (pn > 0 && numeric(host, pn, out) == 0)
    return 0;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < ncache; i++)
    if (!strcmp(cache[i].host, host) && !strcmp(cache[i].port, port)) {
      *out = cache[i].a;
      pthread_mutex_unlock(&mu);
      return 0;
    }
  pthread_mutex_unlock(&mu);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *ai = NULL;
  if (getaddrinfo(host, port, &hints, &ai) != 0 || !ai || ai->ai_addrlen > sizeof out->sa) {
    if (ai)
      freeaddrinfo(ai);
    return -EHOSTUNREACH;
  }
  memset(out, 0, sizeof *out);
  memcpy(&out->sa, ai->ai_addr, ai->ai_addrlen);
  out->len = ai->ai_addrlen;
  out->family = ai->ai_family;
  freeaddrinfo(ai);
  pthread_mutex_lock(&mu);
  if (ncache < NCACHE && strlen(host) < sizeof cache[0].host && strlen(port) < sizeof cache[0].port) {
    strcpy(cache[ncache].host, host);
    strcpy(cache[ncache].port, port);
    cache[ncache].a = *out;
    ncache++;
  }
  pthread_mutex_unlock(&mu);
  return 0;
}

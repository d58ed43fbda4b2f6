/* coord_main.c -- `nccltrace coord --listen HOST:PORT`: the standalone
 * coordinator, for large jobs and for runs where no rank should host it
 * (contract: coord.h).  Runs until SIGINT/SIGTERM, then prints its counters. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interpose/exchange/coord.h"

static struct ntx_coord *the_coord;

static void on_signal(int sig) {
  (void)sig;
  if (the_coord)
    ntx_coord_request_stop(the_coord); /* one write(2): async-signal-safe */
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: nccltrace coord --listen HOST:PORT [--skew S] [--init-wait S] [--max-clients N] [--quiet]\n"
          "  --listen HOST:PORT  where the ranks connect (their NCCLTRACE_COORD)\n"
          "  --skew S        a rank S seconds behind its peers on a comm is reported (30;\n"
          "                  the ranks' NCCLTRACE_SKEW_S sets it for a coordinator a rank hosts)\n"
          "  --init-wait S   a communicator whose init has not completed on every rank\n"
          "                  S seconds after the first registered is reported (30)\n"
          "  --max-clients N connections served at once, 2 to 1048576 (8192)\n"
          "  --quiet         no per-event lines (verdicts, rejections) on standard output;\n"
          "                  the listening and final counter lines remain, and the ranks\n"
          "                  still get every report\n"
          "  NCCLTRACE_SECRET is required: export the same value to the coordinator\n"
          "  and to every rank.  Without it ranks authenticate with their\n"
          "  communicators' unique ids, which a standalone coordinator never sees,\n"
          "  so it refuses to start (see docs/wire-protocol.md).\n");
}

static int parse_double(const char *s, double *out) {
  char *end;
  double v = strtod(s, &end);
  if (*end || v < 0)
    return -1;
  *out = v;
  return 0;
}

int ntx_coord_main(int argc, char **argv) {
  static const struct option opts[] = {
      {"listen", required_argument, NULL, 'l'}, {"skew", required_argument, NULL, 's'},
      {"init-wait", required_argument, NULL, 'i'}, {"max-clients", required_argument, NULL, 'm'},
      {"quiet", no_argument, NULL, 'q'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  struct ntx_coord_cfg cfg;
  ntx_coord_default_cfg(&cfg);
  cfg.log = stdout;
  char host[256] = "", port[16] = "";
  const char *listen = NULL;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "l:s:i:m:qh", opts, NULL)) != -1) {
    switch (c) {
    case 'l': listen = optarg; break;
    case 's':
      if (parse_double(optarg, &cfg.lim.skew_s) < 0) {
        fprintf(stderr, "nccltrace coord: --skew %s is not a number of seconds\n", optarg);
        return 2;
      }
      break;
    case 'i':
      if (parse_double(optarg, &cfg.lim.init_wait_s) < 0) {
        fprintf(stderr, "nccltrace coord: --init-wait %s is not a number of seconds\n", optarg);
        return 2;
      }
      break;
    case 'm': {
      long v = strtol(optarg, NULL, 10);
      if (v < 2 || v > 1 << 20) {
        fprintf(stderr, "nccltrace coord: --max-clients %s is out of range\n", optarg);
        return 2;
      }
      cfg.lim.max_clients = (uint32_t)v;
      break;
    }
    case 'q': cfg.log = NULL; break;
    case 'h': usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
  }
  if (!listen || ntx_split_hostport(listen, host, sizeof host, port, sizeof port) < 0) {
    usage(stderr);
    return 2;
  }
  char what[128], err[256];
  /* A program of its own: the interposer's config (read in its
   * constructor) is not there to ask. */
  const char *secret = getenv("NCCLTRACE_SECRET");
  /* Ranks without a secret authenticate with keys of their communicators'
   * unique ids, which a coordinator outside the job never sees. */
  if (ntx_key_derive(secret ? secret : "", &cfg.key, what, sizeof what) != NTX_KEY_SECRET) {
    fprintf(stderr, "nccltrace coord: NCCLTRACE_SECRET is required (export the same value to every rank): "
                    "without it ranks authenticate with their communicators' unique ids, which a "
                    "standalone coordinator does not have\n");
    return 2;
  }
  cfg.host = host;
  cfg.port = port;
  if (ntx_coord_listen(&the_coord, &cfg, err, sizeof err) < 0) {
    fprintf(stderr, "nccltrace coord: %s\n", err);
    return 1;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  fprintf(stdout, "nccltrace coord: listening on %s:%d\n", host[0] ? host : "*", ntx_coord_port(the_coord));
  fflush(stdout);
  ntx_coord_run(the_coord);
  struct ntx_coord_stats st;
  struct ntx_check_stats cs;
  ntx_coord_get_stats(the_coord, &st, &cs);
  fprintf(stdout,
          "nccltrace coord: %llu connections, %llu rejected (auth %llu, malformed %llu, full %llu, slow %llu), "
          "%llu fingerprints, %llu mismatches, %llu p2p mismatches, %llu lost, %llu messages dropped, "
          "%llu status queries answered (%llu refused)\n",
          (unsigned long long)st.accepted,
          (unsigned long long)(st.rejected_auth + st.rejected_malformed + st.rejected_full + st.slow_closed),
          (unsigned long long)st.rejected_auth, (unsigned long long)st.rejected_malformed,
          (unsigned long long)st.rejected_full, (unsigned long long)st.slow_closed,
          (unsigned long long)cs.fps, (unsigned long long)cs.mismatches,
          (unsigned long long)cs.p2p_mismatches, (unsigned long long)cs.lost,
          (unsigned long long)st.out_dropped, (unsigned long long)st.queries,
          (unsigned long long)st.queries_refused);
  ntx_coord_stop(the_coord, 0);
  the_coord = NULL;
  return 0;
}

/* test_live_stress.c -- the reader's seqlock against a real writer.
 *
 * A child process writes records into a real ring (recorder/ring.h, 1024
 * slots, so it wraps every few microseconds) as fast as it can in bursts;
 * every record's body is a function of its position (count = seq = pos,
 * stream = ~pos, sendbuf = pos ^ K; aux, which readers clear on op
 * records, is not checked), and every fourth one also goes to a
 * communicator's recent[].  Meanwhile this process loads the live ring over
 * and over with ntt_image_load.  Proves: no record the reader returns is
 * torn (each body matches its position), positions are strictly increasing,
 * and the reader keeps returning records while the ring is overwritten.
 * Exit 0 pass, 1 fail.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "tools/reader.h"
#include "recorder/ring.h"

#define KEY 0x5a5a5a5a5a5a5a5aull
#define RUN_NS 1500000000ull

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void writer(struct ntr_ring *ring) {
  struct ntr_comm_state *cs = ntr_ring_comm_alloc(ring);
  if (!cs)
    _exit(1);
  cs->comm_id = 0x1234;
  cs->nranks = 1;
  cs->lifecycle = NTR_COMM_READY;
  uint64_t end = now_ns() + RUN_NS + 500000000ull;
  struct ntr_ring_cursor cur = {0}; /* a writer thread's block, as the interposer's */
  while (now_ns() < end) {
    for (int i = 0; i < 2000; i++) {
      uint64_t pos;
      struct ntr_record *r = ntr_ring_reserve_in(ring, &cur, 0, &pos);
      r->tsc = pos;
      r->tsc_done = 0;
      r->comm_id = pos % 4 == 0 ? cs->comm_id : 0;
      r->count = pos;
      r->u.buf.sendbuf = pos ^ KEY;
      r->u.buf.recvbuf = pos;
      r->u.buf.stream = ~pos;
      r->seq = pos;
      r->kind = NTR_KIND_ALLREDUCE;
      r->phase = NTR_PHASE_CALL;
      r->dtype = 7;
      r->redop = 0;
      r->rank = 0;
      r->nranks = 1;
      r->peer = -1;
      r->result = 0;
      r->aux = ~pos;
      ntr_ring_commit(ring, r, pos, pos % 4 == 0 ? cs : NULL);
    }
    /* Bursts, not a spin: leave the shared cores some air. */
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
  _exit(0);
}

int main(void) {
  char dir[] = "/tmp/ntt-stress-XXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  struct ntr_ring ring;
  struct ntr_ring_config cfg = {.dir = dir, .job_id = "stress", .slots = 1024};
  int rc = ntr_ring_open(&ring, &cfg);
  if (rc) {
    fprintf(stderr, "ntr_ring_open: %s\n", strerror(-rc));
    return 1;
  }
  char path[sizeof ring.path];
  memcpy(path, ring.path, sizeof path);
  pid_t pid = fork();
  if (pid < 0)
    return 1;
  if (pid == 0)
    writer(&ring);

  int bad = 0;
  uint64_t loads = 0, recs = 0, torn = 0, last_head = 0;
  uint64_t end = now_ns() + RUN_NS;
  while (now_ns() < end && !bad) {
    struct ntt_image img;
    char err[512];
    if (ntt_image_load(path, 0, &img, err, sizeof err)) {
      fprintf(stderr, "FAIL: live load: %s\n", err);
      bad = 1;
      break;
    }
    loads++;
    recs += img.nrecs;
    torn += img.torn;
    last_head = img.hdr.head;
    for (uint64_t i = 0; i < img.nrecs && !bad; i++) {
      const struct ntr_record *r = &img.recs[i];
      uint64_t p = r->commit - 1;
      if (r->count != p || r->seq != p || r->u.buf.stream != ~p || r->u.buf.sendbuf != (p ^ KEY) ||
          r->u.buf.recvbuf != p || r->u.buf.stream != ~p || r->tsc != p) {
        fprintf(stderr, "FAIL: torn record accepted at position %llu (count %llu, stream %llx)\n",
                (unsigned long long)p, (unsigned long long)r->count, (unsigned long long)r->u.buf.stream);
        bad = 1;
      }
      if (i && img.recs[i - 1].commit >= r->commit) {
        fprintf(stderr, "FAIL: positions out of order\n");
        bad = 1;
      }
    }
    ntt_image_free(&img);
  }
  kill(pid, SIGKILL);
  int st;
  waitpid(pid, &st, 0);
  ntr_ring_close(&ring, 1);
  rmdir(dir);
  printf("%llu loads, %llu records checked, %llu torn slots skipped, head %llu\n", (unsigned long long)loads,
         (unsigned long long)recs, (unsigned long long)torn, (unsigned long long)last_head);
  if (!bad && (loads < 10 || recs == 0 || last_head < 4096)) {
    fprintf(stderr, "FAIL: too little happened to prove anything\n");
    bad = 1;
  }
  return bad;
}

/* live_writer.c -- a traced process stand-in that writes a REAL ring with the
 * recorder library (recorder/ring.h), then waits to be killed.  The tools'
 * tests read it live (status, decode) and after SIGKILL (collect), so the
 * reader is checked against the recorder's writer, not only the fixtures.
 *
 *   live_writer RING_DIR [DUMP_DIR]
 *       prints the ring path; with DUMP_DIR also writes a dump of the ring
 *       with the recorder's signal-safe writer (ntr_dump_write, trigger
 *       "user") and prints its path; then prints "ready" and sleeps
 *
 * Content: job "job-live"; comm abcdef0123456789 rank 1 of 2, ready, with
 * AllReduce(count=16, float32, sum) seq 1 completed and seq 2 pending (issued
 * now); comm 1111222233334444 rank 1 of 2 in init, blocked in CommInitRank
 * since now; a Mark(live=7).  Exit status: 1 when the ring cannot be opened.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "recorder/clock.h"
#include "recorder/dump.h"
#include "recorder/ring.h"

static void put(struct ntr_ring *ring, struct ntr_comm_state *cs, unsigned kind, uint64_t seq, int done) {
  uint64_t pos;
  struct ntr_record *r = ntr_ring_reserve(ring, &pos);
  memset((char *)r + 8, 0, sizeof *r - 8); /* commit stays 0 until ntr_ring_commit */
  r->tsc = ntr_clock_now();
  r->kind = (uint16_t)kind;
  r->phase = kind == NTR_KIND_MARK ? NTR_PHASE_EVENT : NTR_PHASE_CALL;
  r->dtype = 0xff;
  r->redop = -1;
  r->peer = -1;
  r->result = -1;
  r->rank = -1;
  r->tid = (uint32_t)getpid();
  if (cs) {
    r->comm_id = cs->comm_id;
    r->rank = cs->rank;
    r->nranks = cs->nranks;
  }
  if (kind == NTR_KIND_MARK) {
    r->count = 7;
    snprintf(r->u.text, sizeof r->u.text, "live");
  } else {
    r->count = 16;
    r->dtype = 7;
    r->redop = 0;
    r->seq = seq;
    r->result = 0;
    if (done) {
      r->tsc_done = ntr_clock_now();
      r->flags = NTR_REC_COMPLETED;
    }
  }
  ntr_ring_commit(ring, r, pos, cs);
}

int main(int argc, char **argv) {
  if (argc != 2 && argc != 3) {
    fprintf(stderr, "usage: live_writer RING_DIR [DUMP_DIR]\n");
    return 1;
  }
  struct ntr_ring ring;
  struct ntr_ring_config cfg = {.dir = argv[1], .job_id = "job-live", .slots = 1024};
  int rc = ntr_ring_open(&ring, &cfg);
  if (rc) {
    fprintf(stderr, "live_writer: ntr_ring_open: %s\n", strerror(-rc));
    return 1;
  }
  struct ntr_comm_state *a = ntr_ring_comm_alloc(&ring);
  struct ntr_comm_state *b = ntr_ring_comm_alloc(&ring);
  if (!a || !b)
    return 1;
  a->rank = 1;
  a->nranks = 2;
  a->lifecycle = NTR_COMM_READY;
  a->comm_id = 0xabcdef0123456789ull;
  b->rank = 1;
  b->nranks = 2;
  b->lifecycle = NTR_COMM_INIT;
  b->comm_id = 0x1111222233334444ull;
  put(&ring, a, NTR_KIND_ALLREDUCE, 1, 1);
  put(&ring, a, NTR_KIND_ALLREDUCE, 2, 0);
  put(&ring, NULL, NTR_KIND_MARK, 0, 0);
  a->coll_seq = a->last_enqueued = 2;
  a->last_completed = 1;
  b->blocked_kind = NTR_KIND_COMM_INIT_RANK;
  b->blocked_tid = (uint32_t)getpid();
  b->blocked_since = ntr_clock_now();
  printf("%s\n", ring.path);
  if (argc == 3) {
    struct ntr_trigger trig = {.kind = NTR_TRIG_USER, .tsc = ntr_clock_now()};
    char path[4096] = "";
    snprintf(trig.reason, sizeof trig.reason, "live_writer");
    if ((rc = ntr_dump_init(&ring, argv[2], 0600)) != 0 || (rc = ntr_dump_write(&ring, &trig, path, sizeof path)) != 0) {
      fprintf(stderr, "live_writer: dump: %s\n", strerror(-rc));
      return 1;
    }
    printf("%s\n", path);
  }
  printf("ready\n");
  fflush(stdout);
  for (;;)
    pause();
}

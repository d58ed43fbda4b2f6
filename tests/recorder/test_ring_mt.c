/* test_ring_mt -- 8 writer threads lap a small ring (and two communicators'
 * recent[]) while a reader thread copies slots with the seqlock protocol:
 * every copy the reader accepts must have an intact body (checksummed), and
 * at the end every slot holds an intact record of the last lap, in per-writer
 * order.  Runs under TSan in CI (suite tsan). */
#include <pthread.h>

#include "helpers.h"
#include "recorder/ring.h"

#define WRITERS 8
#define SLOTS 1024u

static struct ntr_ring ring;
static struct ntr_comm_state *comm[2];
static unsigned long per_writer = 100000;
static int done; /* atomic: writers finished */
static unsigned long long validated, rejected, bad;

static void *writer(void *arg) {
  unsigned long long id = (unsigned long long)(uintptr_t)arg;
  for (unsigned long long i = 0; i < per_writer; i++) {
    uint64_t pos;
    struct ntr_record *r = t_reserve(&ring, &pos);
    t_fill(r, id, i);
    ntr_ring_commit(&ring, r, pos, (i & 1) ? comm[id & 1] : NULL);
  }
  return NULL;
}

static void check_copy(const struct ntr_record *copy) {
  if (t_intact(copy))
    validated++;
  else
    bad++;
}

static void *reader(void *arg) {
  (void)arg;
  struct ntr_record copy;
  while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
    for (uint64_t s = 0; s < SLOTS; s++) {
      uint64_t c = ntr_ring_read_slot(&ring.slots[s], &copy);
      if (!c) {
        rejected++;
        continue;
      }
      if (((c - 1) & ring.mask) != s)
        bad++;
      check_copy(&copy);
    }
    for (int k = 0; k < 2; k++)
      for (unsigned s = 0; s < NTR_COMM_RECENT; s++) {
        if (ntr_ring_read_slot(&comm[k]->recent[s], &copy))
          check_copy(&copy);
        else
          rejected++;
      }
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 1)
    per_writer = strtoul(argv[1], NULL, 10);
  char dir[64];
  T_RING_OPEN(&ring, dir, "mt", SLOTS);
  comm[0] = ntr_ring_comm_alloc(&ring);
  comm[1] = ntr_ring_comm_alloc(&ring);
  NT_ASSERT(comm[0] && comm[1]);

  t_run_writers(WRITERS, writer, reader, &done);

  uint64_t head = ring.hdr->head;
  printf("head %llu (records %llu), reader: %llu validated, %llu rejected, %llu bad\n",
         (unsigned long long)head, (unsigned long long)WRITERS * per_writer, validated, rejected,
         bad);
  NT_ASSERT_EQ(bad, 0);
  NT_ASSERT(validated > 0);
  /* every record reserved one position; skipped positions (holes, a writer
   * lapped mid-record) add to head beyond the records written */
  NT_ASSERT(head >= (uint64_t)WRITERS * per_writer);

  /* final state: each slot holds an intact record of the last lap (or is a
   * hole), and per writer the positions order the records */
  unsigned long long last_i[WRITERS];
  memset(last_i, 0xff, sizeof last_i);
  unsigned holes = 0;
  for (uint64_t pos = head - SLOTS; pos < head; pos++) {
    struct ntr_record copy;
    uint64_t c = ntr_ring_read_slot(&ring.slots[pos & ring.mask], &copy);
    if (c != pos + 1) {
      holes++;
      continue;
    }
    NT_ASSERT(t_intact(&copy));
    unsigned long long wid = copy.count >> 40, i = copy.count & ((1ull << 40) - 1);
    NT_ASSERT(wid < WRITERS);
    NT_ASSERT(last_i[wid] == ~0ull || i > last_i[wid]);
    last_i[wid] = i;
  }
  printf("holes in the last lap: %u\n", holes);
  NT_ASSERT(holes < SLOTS / 4);
  for (int k = 0; k < 2; k++) {
    NT_ASSERT_EQ(comm[k]->rec_count, (WRITERS / 2) * (per_writer / 2));
    for (unsigned s = 0; s < NTR_COMM_RECENT; s++) {
      struct ntr_record copy;
      if (ntr_ring_read_slot(&comm[k]->recent[s], &copy)) {
        NT_ASSERT(t_intact(&copy));
        NT_ASSERT_EQ((copy.count >> 40) & 1, k);
      }
    }
  }
  ntr_ring_close(&ring, 1);
  t_rmtree(dir);
  printf("ok\n");
  return 0;
}

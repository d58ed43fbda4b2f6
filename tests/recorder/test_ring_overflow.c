/* test_ring_overflow -- single writer laps the ring: the loss counter is
 * exactly records - slots, the ring holds the newest slot_count records in
 * order; retention: after 1,000,000 records on comm A, the last 64 records
 * of comm B are still readable from B's recent[]. */
#include "helpers.h"
#include "recorder/ring.h"

static struct ntr_ring ring;

static void put(unsigned long long writer, unsigned long long i, struct ntr_comm_state *cs) {
  uint64_t pos;
  struct ntr_record *r = ntr_ring_reserve(&ring, &pos);
  t_fill(r, writer, i);
  ntr_ring_commit(&ring, r, pos, cs);
}

int main(void) {
  char dir[64];
  t_tmpdir(dir, sizeof dir);
  struct ntr_ring_config cfg = {.dir = dir, .job_id = "ovf", .slots = 1024};
  CHECK_EQ(ntr_ring_open(&ring, &cfg), 0);

  for (unsigned i = 0; i < 1000; i++)
    put(1, i, NULL);
  CHECK_EQ(ntr_ring_lost(&ring), 0);
  for (unsigned i = 1000; i < 1024; i++)
    put(1, i, NULL);
  CHECK_EQ(ntr_ring_lost(&ring), 0);
  put(1, 1024, NULL);
  CHECK_EQ(ntr_ring_lost(&ring), 1);
  for (unsigned i = 1025; i < 10000; i++)
    put(1, i, NULL);
  CHECK_EQ(ntr_ring_lost(&ring), 10000 - 1024);
  CHECK_EQ(ring.hdr->head, 10000);
  for (uint64_t pos = 10000 - 1024; pos < 10000; pos++) {
    struct ntr_record copy;
    CHECK_EQ(ntr_ring_read_slot(&ring.slots[pos & ring.mask], &copy), pos + 1);
    CHECK(t_intact(&copy));
    CHECK_EQ(copy.count, (1ull << 40) | pos);
  }

  /* retention */
  struct ntr_comm_state *a = ntr_ring_comm_alloc(&ring), *b = ntr_ring_comm_alloc(&ring);
  CHECK(a && b);
  for (unsigned i = 0; i < 74; i++)
    put(2, i, b);
  uint64_t b_last_pos = ring.hdr->head - 1;
  for (unsigned i = 0; i < 1000000; i++)
    put(3, i, a);
  CHECK_EQ(ntr_ring_lost(&ring), ring.hdr->head - 1024);
  CHECK_EQ(b->rec_count, 74);
  CHECK_EQ(a->rec_count, 1000000);
  int seen[74] = {0};
  for (unsigned s = 0; s < NTR_COMM_RECENT; s++) {
    struct ntr_record copy;
    uint64_t c = ntr_ring_read_slot(&b->recent[s], &copy);
    CHECK(c != 0);
    CHECK(t_intact(&copy));
    CHECK_EQ(copy.count >> 40, 2);
    unsigned i = (unsigned)(copy.count & 0xffffff);
    CHECK(i >= 10 && i < 74);
    CHECK_EQ(c - 1, b_last_pos - (73 - i)); /* commit carries the global position */
    seen[i]++;
  }
  for (unsigned i = 10; i < 74; i++)
    CHECK_EQ(seen[i], 1);
  /* and A's recent[] holds A's last 64 */
  for (unsigned s = 0; s < NTR_COMM_RECENT; s++) {
    struct ntr_record copy;
    CHECK(ntr_ring_read_slot(&a->recent[s], &copy));
    CHECK((copy.count & 0xffffff) >= 1000000 - 64);
  }
  ntr_ring_close(&ring, 1);
  t_rmtree(dir);
  printf("ok\n");
  return 0;
}

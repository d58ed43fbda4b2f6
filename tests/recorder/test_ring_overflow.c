/* test_ring_overflow -- single writer laps the ring: the loss counter is
 * exactly records - slots once the writer's block is given back (an open
 * block's unused rest counts as lost until then, recorder/ring.h), the
 * ring holds the newest records in order; retention: after 1,000,000 records on comm A, the last 64 records
 * of comm B are still readable from B's recent[]. */
#include "helpers.h"
#include "recorder/ring.h"

static struct ntr_ring ring;

static uint64_t put(unsigned long long writer, unsigned long long i, struct ntr_comm_state *cs) {
  uint64_t pos;
  struct ntr_record *r = t_reserve(&ring, &pos);
  t_fill(r, writer, i);
  ntr_ring_commit(&ring, r, pos, cs);
  return pos;
}

int main(void) {
  char dir[64];
  t_tmpdir(dir, sizeof dir);
  struct ntr_ring_config cfg = {.dir = dir, .job_id = "ovf", .slots = 1024};
  NT_ASSERT_EQ(ntr_ring_open(&ring, &cfg), 0);

  for (unsigned i = 0; i < 1000; i++)
    put(1, i, NULL);
  NT_ASSERT_EQ(ntr_ring_lost(&ring), 0);
  for (unsigned i = 1000; i < 1024; i++)
    put(1, i, NULL);
  NT_ASSERT_EQ(ntr_ring_lost(&ring), 0);
  put(1, 1024, NULL);
  /* its block holds 1 record and block - 1 unused positions */
  NT_ASSERT_EQ(ntr_ring_lost(&ring), ring.block);
  ntr_ring_release(&ring, &t_cur);
  NT_ASSERT_EQ(ntr_ring_lost(&ring), 1);
  uint64_t skip = ring.block - 1; /* records from 1025 on: position = index + skip */
  for (unsigned i = 1025; i < 10000; i++)
    put(1, i, NULL);
  ntr_ring_release(&ring, &t_cur);
  NT_ASSERT_EQ(ntr_ring_lost(&ring), 10000 - 1024);
  NT_ASSERT_EQ(ring.hdr->head, 10000 + skip + (ring.block - (10000 + skip) % ring.block) % ring.block);
  for (uint64_t i = 10000 - 1000; i < 10000; i++) {
    struct ntr_record copy;
    uint64_t pos = i + skip;
    NT_ASSERT_EQ(ntr_ring_read_slot(&ring.slots[pos & ring.mask], &copy), pos + 1);
    NT_ASSERT(t_intact(&copy));
    NT_ASSERT_EQ(copy.count, (1ull << 40) | i);
  }

  /* retention */
  struct ntr_comm_state *a = ntr_ring_comm_alloc(&ring), *b = ntr_ring_comm_alloc(&ring);
  NT_ASSERT(a && b);
  uint64_t b_last_pos = 0;
  for (unsigned i = 0; i < 74; i++)
    b_last_pos = put(2, i, b); /* one writer: consecutive positions */
  for (unsigned i = 0; i < 1000000; i++)
    put(3, i, a);
  ntr_ring_release(&ring, &t_cur);
  NT_ASSERT_EQ(ntr_ring_lost(&ring), ring.hdr->head - ring.hdr->unused - 1024);
  NT_ASSERT_EQ(b->rec_count, 74);
  NT_ASSERT_EQ(a->rec_count, 1000000);
  int seen[74] = {0};
  for (unsigned s = 0; s < NTR_COMM_RECENT; s++) {
    struct ntr_record copy;
    uint64_t c = ntr_ring_read_slot(&b->recent[s], &copy);
    NT_ASSERT(c != 0);
    NT_ASSERT(t_intact(&copy));
    NT_ASSERT_EQ(copy.count >> 40, 2);
    unsigned i = (unsigned)(copy.count & 0xffffff);
    NT_ASSERT(i >= 10 && i < 74);
    NT_ASSERT_EQ(c - 1, b_last_pos - (73 - i)); /* commit carries the global position */
    seen[i]++;
  }
  for (unsigned i = 10; i < 74; i++)
    NT_ASSERT_EQ(seen[i], 1);
  /* and A's recent[] holds A's last 64 */
  for (unsigned s = 0; s < NTR_COMM_RECENT; s++) {
    struct ntr_record copy;
    NT_ASSERT(ntr_ring_read_slot(&a->recent[s], &copy));
    NT_ASSERT((copy.count & 0xffffff) >= 1000000 - 64);
  }
  ntr_ring_close(&ring, 1);
  t_rmtree(dir);
  printf("ok\n");
  return 0;
}

/* test_ring_basic_comm_slots -- a ring hands out its NTR_COMM_MAX comm
 * slots in order, then NULL (and NULL again), and counts them. */
#include "helpers.h"

int main(void) {
  char base[64], dir[128];
  static struct ntr_ring ring;
  T_BASIC_OPEN(&ring, base, dir, "job/1 x", 256);

  for (unsigned c = 0; c < NTR_COMM_MAX; c++)
    NT_ASSERT(ntr_ring_comm_alloc(&ring) == &ring.comms[c]);
  NT_ASSERT(ntr_ring_comm_alloc(&ring) == NULL);
  NT_ASSERT(ntr_ring_comm_alloc(&ring) == NULL);
  NT_ASSERT_EQ(ring.hdr->comm_count, NTR_COMM_MAX);

  ntr_ring_close(&ring, 1);
  t_rmtree(base);
  printf("ok\n");
  return 0;
}

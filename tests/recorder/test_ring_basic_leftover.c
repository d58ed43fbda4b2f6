/* test_ring_basic_leftover -- a leftover regular file of a ring's name (a
 * reused pid) is kept and the new ring takes the next name (~1); that
 * ring goes with ntr_ring_close(..., 1). */
#include "helpers.h"

int main(void) {
  char base[64], dir[128];
  static struct ntr_ring ring, r2;
  T_BASIC_OPEN(&ring, base, dir, "j2", 256);

  struct ntr_ring_config cfg2 = {.dir = dir, .job_id = "j2", .slots = 64};
  NT_ASSERT_EQ(ntr_ring_open(&r2, &cfg2), 0);
  NT_ASSERT(strstr(r2.path, "~1.ring") != NULL);
  ntr_ring_close(&r2, 1);
  NT_ASSERT(access(r2.path, F_OK) != 0);
  NT_ASSERT_EQ(access(ring.path, F_OK), 0);

  ntr_ring_close(&ring, 1);
  t_rmtree(base);
  printf("ok\n");
  return 0;
}

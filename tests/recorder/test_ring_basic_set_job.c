/* test_ring_basic_set_job -- ntr_ring_set_job records the job id in the
 * header and renames the file to the new job's name. */
#include "helpers.h"

int main(void) {
  char base[64], dir[128], path[512];
  static struct ntr_ring ring;
  T_BASIC_OPEN(&ring, base, dir, "job/1 x", 256);
  t_ring_path(path, sizeof path, dir, "job_1_x");
  NT_ASSERT(!strcmp(ring.path, path));

  NT_ASSERT_EQ(ntr_ring_set_job(&ring, "j2"), 0);
  NT_ASSERT(!strcmp(ring.hdr->job_id, "j2"));
  NT_ASSERT(access(path, F_OK) != 0);
  t_ring_path(path, sizeof path, dir, "j2");
  NT_ASSERT(!strcmp(ring.path, path));
  NT_ASSERT_EQ(access(path, F_OK), 0);

  ntr_ring_close(&ring, 1);
  NT_ASSERT(access(ring.path, F_OK) != 0);
  t_rmtree(base);
  printf("ok\n");
  return 0;
}

/* test_ring_basic_name -- a ring file is named
 * nccltrace-JOB-HOST-PID.ring (job and host sanitized), is a regular 0600
 * file of the header's file_size in a 0700 directory created with its
 * parents, and goes with ntr_ring_close(..., 1). */
#include "helpers.h"

int main(void) {
  char base[64], dir[128], path[512];
  static struct ntr_ring ring;
  T_BASIC_OPEN(&ring, base, dir, "job/1 x", 256);

  t_ring_path(path, sizeof path, dir, "job_1_x");
  NT_ASSERT(!strcmp(ring.path, path));

  struct stat st;
  NT_ASSERT_EQ(lstat(path, &st), 0);
  NT_ASSERT(S_ISREG(st.st_mode));
  NT_ASSERT_EQ(st.st_mode & 0777, 0600);
  NT_ASSERT_EQ((long long)st.st_size, (long long)ring.hdr->file_size);
  NT_ASSERT_EQ(lstat(dir, &st), 0);
  NT_ASSERT_EQ(st.st_mode & 0777, 0700);

  ntr_ring_close(&ring, 1);
  NT_ASSERT(access(ring.path, F_OK) != 0);
  t_rmtree(base);
  printf("ok\n");
  return 0;
}

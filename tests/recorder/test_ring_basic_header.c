/* test_ring_basic_header -- a fresh ring's header: identity, sizes and
 * offsets of its regions, the process (pid, ppid, launcher ranks from the
 * environment, job, host, tracer version, exe), head and comm count 0. */
#include "helpers.h"

int main(void) {
  char base[64], dir[128], host[64];
  gethostname(host, sizeof host);
  host[sizeof host - 1] = 0;
  setenv("RANK", "3", 1);
  setenv("LOCAL_RANK", "1", 1);
  setenv("WORLD_SIZE", "8", 1);
  unsetenv("LOCAL_WORLD_SIZE");
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);

  static struct ntr_ring ring;
  T_BASIC_OPEN(&ring, base, dir, "job/1 x", 256);
  struct ntr_ring_header *h = ring.hdr;

  NT_ASSERT(!memcmp(h->magic, NTR_RING_MAGIC, 8));
  NT_ASSERT_EQ(h->version, NTR_FORMAT_VERSION);
  NT_ASSERT_EQ(h->header_size, sizeof(struct ntr_ring_header));
  NT_ASSERT_EQ(h->record_size, 128);
  NT_ASSERT_EQ(h->slot_count, 256);
  NT_ASSERT_EQ(h->comm_max, NTR_COMM_MAX);
  NT_ASSERT_EQ(h->comm_recent, NTR_COMM_RECENT);
  NT_ASSERT_EQ(h->stack_max, NTR_STACK_MAX);
  NT_ASSERT_EQ(h->comm_offset, NTR_RING_HEADER_BYTES);
  NT_ASSERT(h->stack_offset >= h->comm_offset + NTR_COMM_MAX * sizeof(struct ntr_comm_state));
  NT_ASSERT(h->slot_offset >= h->stack_offset + NTR_STACK_MAX * sizeof(struct ntr_stack));
  NT_ASSERT(h->file_size >= h->slot_offset + 256 * 128);
  NT_ASSERT_EQ(h->slot_offset % 4096, 0);
  NT_ASSERT_EQ(h->pid, getpid());
  NT_ASSERT_EQ(h->ppid, getppid());
  NT_ASSERT_EQ(h->rank, 3);
  NT_ASSERT_EQ(h->local_rank, 1);
  NT_ASSERT_EQ(h->world_size, 8);
  NT_ASSERT_EQ(h->local_world_size, 4);
  NT_ASSERT(!strcmp(h->job_id, "job/1 x"));
  NT_ASSERT(!strcmp(h->host, host));
  NT_ASSERT(h->tracer_version[0] != 0);
  /* the comm name: this program's name cut to 15 bytes */
  NT_ASSERT(h->exe[0] != 0 && !strncmp(h->exe, "test_ring_basic", strlen(h->exe)));
  NT_ASSERT_EQ(h->head, 0);
  NT_ASSERT_EQ(h->comm_count, 0);

  ntr_ring_close(&ring, 1);
  t_rmtree(base);
  printf("ok\n");
  return 0;
}

/* test_ring_basic_env -- the header's env block holds NCCL's, CUDA's and
 * the launcher's variables as whole NAME=VALUE entries: secrets and
 * secret-looking names never (NCCL's own masked as ***), foreign and
 * oversized variables left out whole; ntr_env_capture into a small buffer
 * cuts nothing; which names ntr_env_is_secret calls secret. */
#include "helpers.h"
#include "recorder/env.h"

static int env_has(const struct ntr_ring_header *h, const char *entry) {
  for (uint32_t off = 0; off < h->env_len;) {
    const char *e = h->env + off;
    if (!strcmp(e, entry))
      return 1;
    off += (uint32_t)strlen(e) + 1;
  }
  return 0;
}

static int env_has_name(const struct ntr_ring_header *h, const char *name) {
  size_t n = strlen(name);
  for (uint32_t off = 0; off < h->env_len;) {
    const char *e = h->env + off;
    if (!strncmp(e, name, n) && e[n] == '=')
      return 1;
    off += (uint32_t)strlen(e) + 1;
  }
  return 0;
}

int main(void) {
  char base[64], dir[128];
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("CUDA_VISIBLE_DEVICES", "0,1", 1);
  setenv("NCCL_IB_AUTH_TOKEN", "hunter2", 1);
  setenv("NCCLTRACE_SECRET", "s3cret", 1);
  setenv("nccl_password_x", "x", 1);
  setenv("HOME_TEST_VAR", "1", 1);
  static char big[NTR_ENV_BYTES + 100];
  memset(big, 'x', sizeof big - 1);
  setenv("NCCL_HUGE", big, 1); /* does not fit: left out whole, others kept */
  setenv("NCCL_IB_PASS", "pass-v1", 1);   /* not NCCL's: left out */
  setenv("CUDA_PWD", "pwd-v2", 1);        /* not CUDA's: left out */
  setenv("NCCL_MY_APP_SETTING", "1", 1);  /* NCCL_ prefix, not NCCL's variable */
  setenv("NCCL_IB_PKEY", "pkey-v3", 1);   /* NCCL's, name with KEY: masked */
  setenv("RANK", "3", 1);

  static struct ntr_ring ring;
  T_BASIC_OPEN(&ring, base, dir, "job/1 x", 256);
  struct ntr_ring_header *h = ring.hdr;

  NT_ASSERT(env_has(h, "NCCL_DEBUG=INFO"));
  NT_ASSERT(env_has(h, "CUDA_VISIBLE_DEVICES=0,1"));
  NT_ASSERT(env_has(h, "RANK=3"));
  NT_ASSERT(!env_has_name(h, "NCCL_IB_AUTH_TOKEN"));
  NT_ASSERT(!env_has_name(h, "NCCLTRACE_SECRET"));
  NT_ASSERT(!env_has_name(h, "nccl_password_x"));
  NT_ASSERT(!env_has_name(h, "HOME_TEST_VAR"));
  NT_ASSERT(!env_has_name(h, "PATH"));
  NT_ASSERT(memmem(h->env, h->env_len, "s3cret", 6) == NULL);
  NT_ASSERT(memmem(h->env, h->env_len, "hunter2", 7) == NULL);
  NT_ASSERT(h->env_len <= NTR_ENV_BYTES);
  NT_ASSERT(!env_has_name(h, "NCCL_HUGE"));
  NT_ASSERT(!env_has_name(h, "NCCL_IB_PASS"));
  NT_ASSERT(!env_has_name(h, "CUDA_PWD"));
  NT_ASSERT(!env_has_name(h, "NCCL_MY_APP_SETTING"));
  NT_ASSERT(env_has(h, "NCCL_IB_PKEY=***"));
  NT_ASSERT(memmem(h->env, h->env_len, "-v", 2) == NULL); /* none of the values above */
  NT_ASSERT_EQ(h->env[h->env_len - 1], '\0');
  {
    char small[16]; /* "RANK=3\0" fits, "NCCL_DEBUG=INFO\0" (16) fits, nothing cut */
    uint32_t n = ntr_env_capture(small, sizeof small);
    NT_ASSERT(n <= sizeof small);
    for (uint32_t off = 0; off < n;) {
      const char *e = small + off;
      size_t l = strnlen(e, n - off);
      NT_ASSERT(l < n - off);           /* NUL-terminated inside the buffer */
      NT_ASSERT(strchr(e, '=') != NULL); /* a whole NAME=VALUE */
      char name[16];
      size_t nl = (size_t)(strchr(e, '=') - e);
      memcpy(name, e, nl);
      name[nl] = '\0';
      NT_ASSERT(getenv(name) != NULL);
      off += (uint32_t)l + 1;
    }
  }
  NT_ASSERT_EQ(ntr_env_is_secret("NCCL_IB_Pkey"), 1);
  NT_ASSERT_EQ(ntr_env_is_secret("my_Credentials"), 1);
  NT_ASSERT_EQ(ntr_env_is_secret("OAuth"), 1);
  NT_ASSERT_EQ(ntr_env_is_secret("NCCL_SOCKET_IFNAME"), 0);
  NT_ASSERT_EQ(ntr_env_is_secret("NCCL_PASSPHRASE"), 1);
  NT_ASSERT_EQ(ntr_env_is_secret("cuda_pwd"), 1);
  NT_ASSERT_EQ(ntr_env_is_secret("NCCL_CREDS"), 1);

  ntr_ring_close(&ring, 1);
  t_rmtree(base);
  printf("ok\n");
  return 0;
}

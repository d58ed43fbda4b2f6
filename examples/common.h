/* common.h -- what every example needs: rank and size from the launcher's
 * environment (RANK, WORLD_SIZE, LOCAL_RANK as torchrun sets them), the
 * ncclUniqueId shared through a file (UNIQUE_ID_FILE or --id-file), error
 * checks, and a completion wait that also watches NCCL's async error state.
 *
 * Thread-safety: single-threaded example programs.  Not signal-safe.
 * Compiled against the real nccl.h/cuda_runtime_api.h: the same binary runs
 * on a GPU machine and on the CPU emulator (LD_LIBRARY_PATH=tests/emu build).
 */
#ifndef EXAMPLES_COMMON_H
#define EXAMPLES_COMMON_H
#include <cuda_runtime_api.h>
#include <errno.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CUDA_CHECK(x)                                                                    \
  do {                                                                                   \
    cudaError_t e_ = (x);                                                                \
    if (e_ != cudaSuccess) {                                                             \
      fprintf(stderr, "rank %d: %s:%d: %s: %s\n", ex_rank, __FILE__, __LINE__, #x,       \
              cudaGetErrorString(e_));                                                   \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

#define NCCL_CHECK(x)                                                                    \
  do {                                                                                   \
    ncclResult_t r_ = (x);                                                               \
    if (r_ != ncclSuccess && r_ != ncclInProgress) {                                     \
      fprintf(stderr, "rank %d: %s:%d: %s: %s\n", ex_rank, __FILE__, __LINE__, #x,       \
              ncclGetErrorString(r_));                                                   \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

static int ex_rank = -1, ex_size = -1, ex_local = 0;

static inline int ex_env_int(const char *name, int dflt) {
  const char *v = getenv(name);
  if (!v || !*v)
    return dflt;
  char *end;
  long x = strtol(v, &end, 10);
  return *end || x < 0 || x > 1 << 20 ? dflt : (int)x;
}

static inline void ex_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Rank 0 creates the id and publishes it atomically (write a temp file, then
 * rename); the others poll for the file.  A stale file from an earlier run
 * would pair ranks of different jobs: launch.sh hands out a fresh path. */
static inline void ex_unique_id(const char *path, ncclUniqueId *id) {
  if (ex_rank == 0) {
    NCCL_CHECK(ncclGetUniqueId(id));
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(id, sizeof(*id), 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0) {
      fprintf(stderr, "rank 0: cannot publish the unique id at %s: %s\n", path, strerror(errno));
      exit(1);
    }
    return;
  }
  for (int waited = 0; waited < 120000; waited += 10) {
    FILE *f = fopen(path, "rb");
    if (f) {
      size_t n = fread(id, sizeof(*id), 1, f);
      fclose(f);
      if (n == 1)
        return;
    }
    ex_sleep_ms(10);
  }
  fprintf(stderr, "rank %d: no unique id at %s after 120 s\n", ex_rank, path);
  exit(1);
}

/* Parse the environment and --id-file; select this rank's device. */
static inline const char *ex_setup(int *argc, char **argv) {
  ex_rank = ex_env_int("RANK", -1);
  ex_size = ex_env_int("WORLD_SIZE", -1);
  ex_local = ex_env_int("LOCAL_RANK", ex_rank < 0 ? 0 : ex_rank);
  const char *idfile = getenv("UNIQUE_ID_FILE");
  int w = 1;
  for (int i = 1; i < *argc; i++) {
    if (strcmp(argv[i], "--id-file") == 0 && i + 1 < *argc)
      idfile = argv[++i];
    else
      argv[w++] = argv[i];
  }
  *argc = w;
  if (ex_rank < 0 || ex_size < 1 || ex_rank >= ex_size || !idfile || !*idfile) {
    fprintf(stderr, "set RANK, WORLD_SIZE (and LOCAL_RANK) like torchrun does, and UNIQUE_ID_FILE "
                    "or --id-file PATH; examples/launch.sh N CMD does all of that\n");
    exit(2);
  }
  int ndev = 0;
  CUDA_CHECK(cudaGetDeviceCount(&ndev));
  CUDA_CHECK(cudaSetDevice(ndev > 0 ? ex_local % ndev : 0));
  return idfile;
}

/* Wait for the stream like a framework's blocking wait: poll completion and
 * the communicator's async error.  On an NCCL error, abort the communicator
 * and exit 1 (PyTorch's TORCH_NCCL_ASYNC_ERROR_HANDLING=1 behaviour). */
static inline void ex_wait(cudaStream_t s, ncclComm_t comm) {
  for (;;) {
    cudaError_t q = cudaStreamQuery(s);
    if (q == cudaSuccess)
      return;
    if (q != cudaErrorNotReady) {
      fprintf(stderr, "rank %d: stream error: %s\n", ex_rank, cudaGetErrorString(q));
      exit(1);
    }
    ncclResult_t ae = ncclSuccess;
    if (comm && ncclCommGetAsyncError(comm, &ae) == ncclSuccess && ae != ncclSuccess &&
        ae != ncclInProgress) {
      fprintf(stderr, "rank %d: NCCL async error: %s; aborting the communicator\n", ex_rank,
              ncclGetErrorString(ae));
      ncclCommAbort(comm);
      exit(1);
    }
    ex_sleep_ms(1);
  }
}
#endif

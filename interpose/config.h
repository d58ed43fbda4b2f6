/* config.h -- every NCCLTRACE_* knob, read once in the library constructor.
 * A value that does not parse is reported on stderr, once per job (config.c),
 * and the default used.
 * Other programs' variables (MASTER_ADDR/PORT, NCCL_COMM_BLOCKING) are read
 * where they are used, when NCCL or the launcher would read them; the
 * exchange's key derivation hashes raw environment text (exchange/auth.c).
 *
 * Thread-safety: nti_config_load runs once before any other thread of ours
 * exists; afterwards nti_cfg is read-only, with one exception: when no job
 * id was given, job is filled once at the first communicator init (under
 * the interposer's lifecycle lock, before that comm is registered with the
 * exchange).  Signal-safety: reading is safe.
 */
#ifndef NTI_CONFIG_H
#define NTI_CONFIG_H
#include <stdint.h>

enum nti_check_mode { NTI_CHECK_OFF = 0, NTI_CHECK_ASYNC = 1, NTI_CHECK_STRICT = 2 };
enum nti_env_check { NTI_ENV_CHECK_OFF = 0, NTI_ENV_CHECK_WARN = 1, NTI_ENV_CHECK_ABORT = 2 };

struct nti_config {
  int disable;                 /* NCCLTRACE_DISABLE (0) */
  char dir[1024];              /* NCCLTRACE_DIR (dumps; default ./nccltrace-dumps) */
  char ring_dir[1024];         /* NCCLTRACE_RING_DIR (default /dev/shm/nccltrace-<uid>) */
  char job[128];               /* NCCLTRACE_JOB, else launcher id, else "" (derived at first comm) */
  uint32_t ring_slots;         /* NCCLTRACE_RING (65536, rounded up to a power of two) */
  double timeout_s;            /* NCCLTRACE_TIMEOUT (300) */
  uint32_t max_dumps;          /* NCCLTRACE_MAX_DUMPS (100): dumps per process, final ones apart */
  uint32_t dir_max_dumps;      /* NCCLTRACE_DIR_MAX_DUMPS (5000): dump files in the directory, final ones apart; 0 off */
  int check;                   /* NCCLTRACE_CHECK: off|async|strict (async when a coordinator is found) */
  int check_explicit;          /* set when NCCLTRACE_CHECK was given */
  char coord[256];             /* NCCLTRACE_COORD host:port ("" = discover) */
  double strict_timeout_s;     /* NCCLTRACE_STRICT_TIMEOUT (10) */
  double skew_s;               /* NCCLTRACE_SKEW_S (30) */
  int env_check;               /* NCCLTRACE_ENV_CHECK: off|warn|abort (warn) */
  char secret[256];            /* NCCLTRACE_SECRET ("" = derived) */
  int stacks;                  /* NCCLTRACE_STACKS (0) */
  int pystacks;                /* NCCLTRACE_PYSTACKS (1): Python call sites and thread stacks */
  char real_nccl[1024];        /* NCCLTRACE_REAL_NCCL (drop-in mode) */
  unsigned dump_mode;          /* NCCLTRACE_DUMP_MODE (0600) */
  int coord_port_offset;       /* NCCLTRACE_COORD_PORT_OFFSET (MASTER_PORT + 17) */
  int verbose;                 /* NCCLTRACE_VERBOSE (0) */
  double straggler_ms;         /* NCCLTRACE_STRAGGLER_MS (10): median lateness that names a straggler; 0 off */
  uint32_t straggler_window;   /* NCCLTRACE_STRAGGLER_WINDOW (200): collectives per comm judged together */
  uint32_t start_every;        /* NCCLTRACE_START_EVERY (1): a device start event every Nth collective; 0 off */
  int agg;                     /* NCCLTRACE_AGG: 0|1, -1 unset (the exchange decides: 1 for a multi-host job) */
  int strict_shm;              /* NCCLTRACE_STRICT_SHM: 0|1, -1 unset (the exchange decides: 1 for a one-host job) */
  char agg_host[64];           /* NCCLTRACE_AGG_HOST ("" = gethostname): tests play several hosts on one */
  char metrics[256];           /* NCCLTRACE_METRICS ADDR:PORT, PORT alone = 127.0.0.1:PORT ("" = off) */
};

extern struct nti_config nti_cfg;

/* Set by `nccltrace run` for CMD: the hash (16 hex digits) of the settings
 * whose problems run has said (config.c, "Said once per job"). */
#define NTI_SETTINGS_SAID "NCCLTRACE_SETTINGS_SAID"

/* Who reads the settings: the tracer keeps what a process of unknown rank
 * would say until its first NCCL call; `nccltrace run` says it at once. */
enum { NTI_CONFIG_TRACER, NTI_CONFIG_RUN };
void nti_config_load_as(int who);
void nti_config_load(void); /* nti_config_load_as(NTI_CONFIG_TRACER) */
/* At the first NCCL call: say what a process of unknown rank kept. */
void nti_config_say_kept(void);
#endif

/* errfile.c -- torchelastic's error file (errfile.h has the contract).
 *
 * The shape is the one torch.distributed.elastic's ErrorHandler writes and
 * its ProcessFailure reads: {"message": {"message": TEXT, "extraInfo":
 * {"py_callstack": TEXT, "timestamp": "SECONDS"}}}; the summary printed by
 * torchrun shows py_callstack.  The file is created with O_EXCL: a file
 * the application (its @record decorator) wrote first is never replaced,
 * and one it writes later replaces ours.
 */
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "interpose/errfile.h"
#include "interpose/nti.h"
#include "recorder/env.h"
#include "recorder/util.h"

static char errfile_path[512];
static char cause_text[600];
static char cause_dump[512];
static int cause_taken; /* atomic: 1 once the first cause is being kept */
static int cause_ready; /* atomic: 1 once it is complete */
static int written;     /* atomic */

void nti_errfile_init(void) {
  const char *p = ntr_env_get("TORCHELASTIC_ERROR_FILE");
  size_t n = p ? strlen(p) : 0;
  if (n && n < sizeof errfile_path)
    memcpy(errfile_path, p, n + 1);
}

static void copy_cut(char *dst, size_t cap, const char *src) {
  size_t n = src ? strlen(src) : 0;
  if (n >= cap)
    n = cap - 1;
  memcpy(dst, src ? src : "", n);
  dst[n] = 0;
}

void nti_errfile_cause(const char *reason, const char *dump_path) {
  if (!errfile_path[0] || !reason || __atomic_exchange_n(&cause_taken, 1, __ATOMIC_ACQ_REL))
    return;
  copy_cut(cause_text, sizeof cause_text, reason);
  copy_cut(cause_dump, sizeof cause_dump, dump_path);
  __atomic_store_n(&cause_ready, 1, __ATOMIC_RELEASE);
}

/* s as the inside of a JSON string. */
static void sb_json(struct ntr_sb *sb, const char *s) {
  static const char hex[] = "0123456789abcdef";
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    char e[7] = {0};
    if (c == '"' || c == '\\') {
      e[0] = '\\';
      e[1] = (char)c;
    } else if (c == '\n') {
      memcpy(e, "\\n", 2);
    } else if (c < 0x20) {
      memcpy(e, "\\u00", 4);
      e[4] = hex[c >> 4];
      e[5] = hex[c & 15];
    } else {
      e[0] = (char)c;
    }
    ntr_sb_str(sb, e);
  }
}

void nti_errfile_write(int signo, int exit_code) {
  if (!errfile_path[0] || !__atomic_load_n(&cause_ready, __ATOMIC_ACQUIRE) ||
      __atomic_exchange_n(&written, 1, __ATOMIC_ACQ_REL))
    return;
  int fd = open(errfile_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return; /* the application's own, or no such directory: nothing to add */
  char msg[800], stack[1600], out[3000];
  struct ntr_sb m, st, o;
  ntr_sb_init(&m, msg, sizeof msg);
  ntr_sb_str(&m, "nccltrace: ");
  ntr_sb_str(&m, cause_text);
  ntr_sb_init(&st, stack, sizeof stack);
  ntr_sb_str(&st, msg);
  ntr_sb_str(&st, "\nThe tracer knew this first cause when this rank ended (");
  if (signo) {
    ntr_sb_str(&st, "signal ");
    ntr_sb_i64(&st, signo);
  } else {
    ntr_sb_str(&st, "exit code ");
    ntr_sb_i64(&st, exit_code);
  }
  ntr_sb_str(&st, ").\n");
  if (cause_dump[0]) {
    ntr_sb_str(&st, "Its dump: ");
    ntr_sb_str(&st, cause_dump);
    ntr_sb_str(&st, "\n");
  }
  ntr_sb_str(&st, "Every rank's evidence together: nccltrace analyze <the dump directory>\n");
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ntr_sb_init(&o, out, sizeof out);
  ntr_sb_str(&o, "{\"message\": {\"message\": \"");
  sb_json(&o, msg);
  ntr_sb_str(&o, "\", \"extraInfo\": {\"py_callstack\": \"");
  sb_json(&o, stack);
  ntr_sb_str(&o, "\", \"timestamp\": \"");
  ntr_sb_i64(&o, (int64_t)ts.tv_sec);
  ntr_sb_str(&o, "\"}}}\n");
  if (o.overflow) {
    /* never a cut JSON: the file must parse */
    ntr_sb_init(&o, out, sizeof out);
    ntr_sb_str(&o, "{\"message\": {\"message\": \"nccltrace: this rank's first cause is in its dump\", "
                   "\"extraInfo\": {\"py_callstack\": \"");
    sb_json(&o, cause_dump);
    ntr_sb_str(&o, "\", \"timestamp\": \"");
    ntr_sb_i64(&o, (int64_t)ts.tv_sec);
    ntr_sb_str(&o, "\"}}}\n");
  }
  const char *p = out;
  size_t left = o.len;
  while (left > 0) {
    ssize_t w = write(fd, p, left);
    if (w <= 0)
      break;
    p += w;
    left -= (size_t)w;
  }
  close(fd);
}

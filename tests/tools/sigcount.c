/* sigcount.c -- a command for `nccltrace run` tests that counts the signals
 * it receives: it prints "ready" once its handlers are set, one letter per
 * signal as it arrives (U: SIGUSR2, C: SIGCONT), and at SIGTERM the totals
 * ("usr2=N cont=M") before it exits 0.  SIGTSTP keeps its default action,
 * so the command stops on it as any program would.
 *
 * Thread-safety: single-threaded.  Signal-safety: the handlers only bump a
 * counter and write(2).
 */
#include <signal.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t n_usr2, n_cont;

static void put(const char *s) {
  size_t n = strlen(s);
  while (n > 0) {
    ssize_t w = write(1, s, n);
    if (w <= 0)
      return;
    s += w;
    n -= (size_t)w;
  }
}

static void put_num(long v) {
  char b[24];
  int i = (int)sizeof b;
  b[--i] = 0;
  do
    b[--i] = (char)('0' + v % 10);
  while ((v /= 10) > 0 && i > 0);
  put(&b[i]);
}

static void on_sig(int sig) {
  if (sig == SIGUSR2) {
    n_usr2++;
    put("U");
  } else if (sig == SIGCONT) {
    n_cont++;
    put("C");
  } else {
    put("\nusr2=");
    put_num(n_usr2);
    put(" cont=");
    put_num(n_cont);
    put("\n");
    _exit(0);
  }
}

int main(void) {
  struct sigaction sa = {.sa_handler = on_sig};
  sigfillset(&sa.sa_mask); /* one handler at a time: the totals are whole */
  sigaction(SIGUSR2, &sa, NULL);
  sigaction(SIGCONT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  put("ready\n");
  for (;;)
    pause();
}

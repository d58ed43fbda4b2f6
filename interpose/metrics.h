/* metrics.h -- the OpenMetrics endpoint (NCCLTRACE_METRICS; prefix nti_met_;
 * docs/user-guide.md, "Metrics").
 *
 * Thread-safety: nti_met_start is called once, by the application thread
 * that runs the first communicator init (init.c: nti_first_comm), after the
 * watchdog and the exchange have started; everything else runs on the one
 * metrics thread, which reads the ring files of the job's processes on this
 * host (the comm states the watchdog and the exchange client keep) and never
 * takes a lock or touches memory a wrapper writes, beyond loading the
 * counters it reads.  nti_met_forget_in_child runs in a fork child (the
 * thread did not survive).  Signal-safety: none of it is signal-safe.
 *
 * One endpoint per host and job: each process tries to bind the address;
 * the first one serves and reads every process of the job on the host, the
 * others try again every NTI_MET_RETRY_S seconds (so one takes over when the
 * serving process exits).  Hostile scrapers are bounded: at most
 * NTI_MET_CONNS connections (the rest closed at accept), a request head of
 * at most NTI_MET_HEAD bytes read within NTI_MET_HEAD_S, a response written
 * within NTI_MET_SEND_S, and NTI_MET_OUT_MAX bytes of unsent responses in
 * all.
 */
#ifndef NTI_METRICS_H
#define NTI_METRICS_H
#include <stddef.h>
#include <stdint.h>

#define NTI_MET_CONNS 16u
#define NTI_MET_HEAD 4096u
#define NTI_MET_HEAD_S 2.0
#define NTI_MET_SEND_S 5.0
#define NTI_MET_OUT_MAX (8u << 20)
#define NTI_MET_RETRY_S 2.0
#define NTI_MET_MAX_SERIES 128u /* (process, comm, rank) series exported; the rest counted */
#define NTI_MET_MAX_PROCS 64u   /* processes read per scrape */

/* Start the metrics thread when NCCLTRACE_METRICS is set.  Failure is one
 * line on stderr, never the job's. */
void nti_met_start(void);
void nti_met_forget_in_child(void);

/* What a request head asks for (pure; tests/interpose/unit_metrics.c).
 * @return 200 for GET /metrics (or /metrics?...), 404 another path, 405
 * another method, 400 a head that is not HTTP/1.x; *om is set when its
 * Accept header names application/openmetrics-text. */
int nti_met_parse_head(const char *head, size_t len, int *om);

/* ---- the collector (metrics_collect.c), on the metrics thread only ---- */

/* A growing text buffer on the tracer heap (recorder/heap.h). */
struct nti_met_buf {
  char *p;
  size_t len, cap;
  int oom;
};
void nti_met_printf(struct nti_met_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Exporter counters, kept by metrics.c. */
struct nti_met_self {
  uint64_t scrapes, refused, bad_requests, timeouts;
};

/* Read the rings and append the whole exposition to b: OpenMetrics 1.0.0
 * (om) or the Prometheus text format 0.0.4 (what promtool and curl read). */
void nti_met_collect(struct nti_met_buf *b, int om, const struct nti_met_self *self);
/* Once a second: sample the lateness reports into the histograms and
 * publish this process's tracer CPU time into its ring header. */
void nti_met_tick(void);
#endif

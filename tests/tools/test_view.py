#!/usr/bin/env python3
"""test_view.py NCCLTRACE MKFIX CASE -- what export, collect and status show
of a job: one case per meson test (CASES says what each proves).
Exit 0 pass, 1 fail.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from toolcheck import check, failures, finish, run  # noqa: E402,F401
import jsonschema_lite  # noqa: E402

NT, MKFIX, CASE = sys.argv[1], sys.argv[2], sys.argv[3]
SCHEMA = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "trace_event_schema.json")))


def mk(kind, path, **kw):
    args = [MKFIX, kind, path]
    for k, v in kw.items():
        args += ["--" + k.replace("_", "-"), str(v)]
    p = run(*args)
    check(p.returncode == 0, "mkfix %s: %s" % (args, p.stderr))


def export(out, *args):
    p = run(NT, "export", "--chrome", *args, "-o", out)
    doc = None
    if p.returncode == 0:
        doc = json.load(open(out))
        errs = jsonschema_lite.validate(doc, SCHEMA)
        check(not errs, "schema: %s" % errs[:5])
    return p, doc


def dead_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def export_hung_end(d):
    """A process left a dump at its watchdog timeout (+10 ms) and a later one
    at exit (+50 ms), the timeout's read first: an op never completed (the
    Send enqueued at +5 ms) runs to +50 ms, the last timestamp of all the
    evidence, not to the first timeout; its args say it did not complete."""
    mk("dump", os.path.join(d, "a-timeout.zst"), pid=1000, host="hostA", trigger=4, trigger_ms=10)
    mk("dump", os.path.join(d, "b-exit.zst"), pid=1000, host="hostA", trigger_ms=50)
    out = os.path.join(d, "t.json")
    p, doc = export(out, os.path.join(d, "a-timeout.zst"), os.path.join(d, "b-exit.zst"))
    check(p.returncode == 0, "export exit 0: %r" % p.stderr)
    if not doc:
        return
    send = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["name"].startswith("Send")]
    got = [(e["ts"], e["dur"], e["args"].get("incomplete"), e["args"].get("completed")) for e in send]
    check(len(send) == 1 and abs(send[0]["ts"] - 4000) < 0.01 and abs(send[0]["dur"] - 45000) < 0.01,
          "the hung Send runs from +5 ms to +50 ms (ts 4000, dur 45000 us): %r" % got)
    check(len(send) == 1 and send[0]["args"].get("incomplete") is True and send[0]["args"].get("completed") is False,
          "the hung Send is marked not completed: %r" % got)
    dumps = [e for e in doc["traceEvents"] if e["ph"] == "i" and e["name"].startswith("dump:")]
    check(len(dumps) == 2, "both dumps are instants: %r" % [e["name"] for e in dumps])


def export_job(d):
    """Two jobs in one directory: without --job export reads one, the one
    analyze reads (the most recent), and says so on stderr with --job;
    --job picks the other; an absent job is exit 2 naming those present."""
    ev = os.path.join(d, "ev")
    os.mkdir(ev)
    mk("dump", os.path.join(ev, "old0.zst"), pid=1000, host="h", job="job-old", rank=0, trigger_ms=20)
    mk("dump", os.path.join(ev, "old1.zst"), pid=1001, host="h", job="job-old", rank=1, trigger_ms=20)
    mk("dump", os.path.join(ev, "new0.zst"), pid=2000, host="h", job="job-new", rank=0, trigger_ms=90)
    out = os.path.join(d, "t.json")
    p, doc = export(out, ev)
    check(p.returncode == 0, "export exit 0: %r" % p.stderr)
    a = run(NT, "analyze", "--json", ev)
    want = json.loads(a.stdout)["inputs"]["job"] if a.stdout.startswith("{") else None
    check(want == "job-new", "analyze reads job-new: %r" % a.stdout[:300])
    if doc:
        procs = {e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"
                 and e["pid"] < 2000000}
        check(procs == {"rank 0 (h:2000)"} and doc["otherData"].get("job") == want,
              "only analyze's job is exported: %r, job %r" % (procs, doc["otherData"].get("job")))
    check("2 jobs" in p.stderr and "job-new" in p.stderr and "job-old" in p.stderr and "--job" in p.stderr,
          "stderr says which job and how to pick another: %r" % p.stderr)
    p, doc = export(out, ev, "--job", "job-old")
    check(p.returncode == 0 and "2 jobs" not in p.stderr, "--job job-old exit 0, nothing to say: %r" % p.stderr)
    if doc:
        procs = {e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"
                 and e["pid"] < 2000000}
        check(procs == {"rank 0 (h:1000)", "rank 1 (h:1001)"}, "--job job-old exports its two ranks: %r" % procs)
    p, _ = export(out, ev, "--job", "nope")
    check(p.returncode == 2 and "no evidence of job nope" in p.stderr and "job-old" in p.stderr,
          "absent --job: exit 2 naming the jobs present: %d %r" % (p.returncode, p.stderr))


def export_filters(d):
    """--rank keeps those launcher ranks, --comm those communicators (the
    process-wide marker stays), --since/--until the events touching the
    window (seconds after the first record; negative: before the last)."""
    ev = os.path.join(d, "ev")
    os.mkdir(ev)
    mk("dump", os.path.join(ev, "r0.zst"), pid=1000, host="h", rank=0)
    mk("dump", os.path.join(ev, "r1.zst"), pid=1001, host="h", rank=1)
    out = os.path.join(d, "t.json")
    p, full = export(out, ev)
    check(p.returncode == 0, "unfiltered export: %r" % p.stderr)
    p, doc = export(out, ev, "--rank", "1")
    check(p.returncode == 0, "--rank 1 exit 0: %r" % p.stderr)
    if doc:
        pids = {e["pid"] for e in doc["traceEvents"] if e["pid"] < 2000000}
        check(pids == {1}, "--rank 1: rank 1 only: %r" % pids)
        check(doc["otherData"]["t0_ns"] == full["otherData"]["t0_ns"], "filters keep the job's t0")
    p, doc = export(out, ev, "--comm", "9F2C")
    check(p.returncode == 0 and doc and len(doc["traceEvents"]) == len(full["traceEvents"]),
          "--comm 9F2C (a prefix, any case) keeps all: %r" % p.stderr)
    p, doc = export(out, ev, "--comm", "abcd")
    check(p.returncode == 0, "--comm abcd exit 0: %r" % p.stderr)
    if doc:
        evs = doc["traceEvents"]
        check(not [e for e in evs if e.get("args", {}).get("comm")], "--comm abcd: no event of comm 9f2c...")
        check(not [e for e in evs if e["ph"] == "M" and e["name"] == "thread_name" and "comm" in e["args"]["name"]],
              "--comm abcd: no comm track")
        check(len([e for e in evs if e["name"] == "Mark(step=1234)"]) == 2, "the process-wide markers stay")
    # records 1 ms apart from t0: [4.5, 4.9] ms holds only the Send (enqueued at
    # 4 ms, never completed); the Mark is at 5 ms, the Broadcast ended at 3.5 ms
    p, doc = export(out, ev, "--since", "0.0045", "--until", "0.0049")
    check(p.returncode == 0, "--since/--until exit 0: %r" % p.stderr)
    if doc:
        ts = [(e["ts"], e["ts"] + e.get("dur", 0)) for e in doc["traceEvents"] if e["ph"] != "M"]
        check(ts and all(a <= 4900 and b >= 4500 for a, b in ts), "every event touches [4.5, 4.9] ms: %r" % ts)
        names = {e["name"] for e in doc["traceEvents"] if e["ph"] != "M"}
        check(names == {"Send(count=8, float32, peer=1)"}, "the window's events: %r" % names)
    # the end is +20 ms (the triggers), t0 +1 ms: the last 10 ms are after +9 ms after t0
    p, doc = export(out, ev, "--since", "-0.010")
    if doc:
        ts = [e["ts"] + e.get("dur", 0) for e in doc["traceEvents"] if e["ph"] != "M"]
        check(ts and min(ts) >= 9000 - 0.01, "--since -0.010: events ending in the last 10 ms: %r" % sorted(ts)[:5])
    for bad in (["--rank", "x"], ["--comm", "zz"], ["--since", "soon"]):
        p, _ = export(out, ev, *bad)
        check(p.returncode == 2 and "nccltrace: export:" in p.stderr, "%s: usage error: %r" % (bad, p.stderr))


def collect_job(d):
    """collect --job ID turns that job's dead rings into dumps and leaves
    another job's ring alone, saying so."""
    rings, dumps = os.path.join(d, "rings"), os.path.join(d, "dumps")
    os.mkdir(rings, 0o700)
    a, b = os.path.join(rings, "a.ring"), os.path.join(rings, "b.ring")
    mk("ring", a, pid=dead_pid(), job="job-a")
    mk("ring", b, pid=dead_pid(), job="job-b")
    p = run(NT, "collect", "--rings", rings, "--dir", dumps, "--job", "job-a")
    check(p.returncode == 0, "collect --job exit 0: %r" % p.stderr)
    check(not os.path.exists(a) and os.path.exists(b), "job-a's ring collected, job-b's kept")
    check(any("job job-b, not job-a: left alone" in l and b in l for l in p.stdout.splitlines()),
          "the other job's ring is named: %r" % p.stdout)
    made = os.listdir(dumps) if os.path.isdir(dumps) else []
    check(len(made) == 1, "one dump: %r" % made)


def status_rings(d, *specs):
    rings = os.path.join(d, "rings")
    os.makedirs(rings, 0o700, exist_ok=True)
    for i, kw in enumerate(specs):
        mk("ring", os.path.join(rings, "r%d.ring" % i), pid=dead_pid(), **kw)
    return rings


def status_inflight(d):
    """status names the operation each rank has in flight: op, seq, comm and
    for how long."""
    rings = status_rings(d, {"rank": 0})
    p = run(NT, "status", "--rings", rings)
    check(p.returncode == 0, "status exit 0: %r" % p.stderr)
    got = [l for l in p.stdout.splitlines() if "in flight:" in l]
    check(len(got) == 1 and "comm 9f2c0123" in got[0] and "rank 0" in got[0]
          and "Send(count=8, float32, peer=1) #1 for " in got[0] and got[0].endswith(" s"),
          "the in-flight Send is named: %r" % p.stdout)


def status_legend(d):
    """The LATE column is explained: a legend line under the tables, and in
    status --help."""
    rings = status_rings(d, {"rank": 0})
    p = run(NT, "status", "--rings", rings)
    check(any(l.startswith("LATE:") and "coordinator" in l for l in p.stdout.splitlines()),
          "a LATE legend line: %r" % p.stdout)
    h = run(NT, "status", "--help")
    check("LATE" in h.stdout and "NCCLTRACE_STRAGGLER_WINDOW" in h.stdout and "median" in h.stdout,
          "status --help explains LATE: %r" % h.stdout)


def status_missing(d):
    """A job of WORLD_SIZE 2 with only rank 0's ring here: "rank 1 missing"
    on its job line; with both, nothing missing."""
    rings = status_rings(d, {"rank": 0})
    p = run(NT, "status", "--rings", rings)
    job = [l for l in p.stdout.splitlines() if l.startswith("job job-test:")]
    check(len(job) == 1 and "rank 1 missing" in job[0] and "of 2 ranks" in job[0], "rank 1 missing: %r" % p.stdout)
    mk("ring", os.path.join(rings, "x.ring"), pid=dead_pid(), rank=1)
    p = run(NT, "status", "--rings", rings)
    job = [l for l in p.stdout.splitlines() if l.startswith("job job-test:")]
    check(len(job) == 1 and "missing" not in job[0] and "2 processes" in job[0], "none missing: %r" % p.stdout)


def status_verdict(d):
    """status shows the live verdict: analyze's own verdict line on the same
    rings."""
    rings = status_rings(d, {"rank": 0}, {"rank": 1})
    a = run(NT, "analyze", rings)
    want = a.stdout.splitlines()[0] if a.stdout else "?"
    p = run(NT, "status", "--rings", rings)
    got = [l for l in p.stdout.splitlines() if "live verdict" in l]
    check(len(got) == 1 and got[0].endswith(": " + want), "status's live verdict is analyze's %r: %r" % (want, got))


def status_norings(d):
    """A --rings directory that does not exist: exit 2 and one clear line."""
    p = run(NT, "status", "--rings", os.path.join(d, "nope"))
    check(p.returncode == 2 and "no such directory" in p.stderr and "nope" in p.stderr and not p.stdout,
          "status --rings DIR missing: exit 2 with a line: %d %r %r" % (p.returncode, p.stdout, p.stderr))


CASES = {
    "export_hung_end": export_hung_end,
    "export_job": export_job,
    "export_filters": export_filters,
    "collect_job": collect_job,
    "status_inflight": status_inflight,
    "status_legend": status_legend,
    "status_missing": status_missing,
    "status_verdict": status_verdict,
    "status_norings": status_norings,
}


def main():
    with tempfile.TemporaryDirectory() as d:
        CASES[CASE](d)
    return finish()


if __name__ == "__main__":
    sys.exit(main())

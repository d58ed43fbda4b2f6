#!/usr/bin/env python3
"""test_export.py NCCLTRACE MKFIX -- `export --chrome` writes a valid Chrome
trace event file with the documented layout.

Proves: the output validates against trace_event_schema.json; one process
per rank named "rank R (host:pid)", one track per communicator named
"comm <id8>"; a complete event per operation from enqueue to completion
(AllReduce seq 1: 250 us), an op never completed runs to the last timestamp
of the evidence with args.incomplete, a call that failed is an error instant
and not in flight; lifecycle calls are slices from enter
to exit; markers and dump triggers are instant events; a directory input is
walked recursively (other files ignored); a ring and a dump of the same
process merge without duplicates; unreadable input gives exit 2.
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

NT, MKFIX = sys.argv[1], sys.argv[2]
SCHEMA = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "trace_event_schema.json")))
def export(out, *inputs):
    p = run(NT, "export", "--chrome", *inputs, "-o", out)
    doc = None
    if p.returncode == 0:
        doc = json.load(open(out))
        errs = jsonschema_lite.validate(doc, SCHEMA)
        check(not errs, "schema: %s" % errs[:5])
    return p, doc


def main():
    # The validator itself must reject what is wrong.
    bad = {"traceEvents": [{"name": "x", "ph": "X", "ts": 1, "dur": -1, "pid": 0, "tid": 0}]}
    check(jsonschema_lite.validate(bad, SCHEMA), "validator rejects a negative duration")
    check(jsonschema_lite.validate({"traceEvents": [{"ph": "i"}]}, SCHEMA), "validator rejects a bare event")

    with tempfile.TemporaryDirectory() as d:
        ev = os.path.join(d, "evidence", "job")
        os.makedirs(ev)
        r0, r1 = os.path.join(ev, "r0.zst"), os.path.join(ev, "sub", "r1.ring")
        os.makedirs(os.path.dirname(r1))
        run(MKFIX, "dump", r0, "--rank", "0", "--pid", "1000", "--host", "hostA")
        run(MKFIX, "ring", r1, "--rank", "1", "--pid", "1001", "--host", "hostB", "--error")
        open(os.path.join(ev, "README.txt"), "w").write("not evidence\n")
        out = os.path.join(d, "trace.json")

        p, doc = export(out, os.path.join(d, "evidence"))
        check(p.returncode == 0, "export exit 0: %r" % p.stderr)
        if not doc:
            return finish()
        evs = doc["traceEvents"]
        names = {(e["pid"], e["args"]["name"]) for e in evs if e["ph"] == "M" and e["name"] == "process_name"}
        check(names == {(0, "rank 0 (hostA:1000)"), (1, "rank 1 (hostB:1001)"), (2000000, "lateness per comm")},
              "process names %r" % names)
        # the lateness track: a counter per seq both ranks issued, each rank's arrival after the first
        cs = [e for e in evs if e["ph"] == "C" and e["pid"] == 2000000]
        check(cs and all(e["name"] == "lateness 9f2c0123" and set(e["args"]) == {"rank 0", "rank 1"}
                         and min(e["args"].values()) == 0.0 for e in cs), "lateness counters %r" % cs[:2])
        threads = {(e["pid"], e["tid"], e["args"]["name"]) for e in evs if e["ph"] == "M" and e["name"] == "thread_name"}
        check((0, 1, "comm 9f2c0123") in threads and (1, 1, "comm 9f2c0123") in threads, "comm tracks %r" % threads)

        x = [e for e in evs if e["ph"] == "X" and e["pid"] == 0]
        ar = [e for e in x if e["name"].startswith("AllReduce") and e["args"].get("seq") == 1]
        check(len(ar) == 1 and abs(ar[0]["dur"] - 250.0) < 0.01 and ar[0]["tid"] == 1
              and ar[0]["name"] == "AllReduce(count=64, float32, sum)", "AllReduce seq 1 slice %r" % ar)
        # t0 = the earliest record (+1 ms); the dump's trigger (+20 ms) is the last timestamp.
        send = [e for e in x if e["name"].startswith("Send")]
        check(len(send) == 1 and send[0]["args"].get("incomplete") is True and abs(send[0]["ts"] - 4000) < 0.01
              and abs(send[0]["dur"] - 15000) < 0.01, "pending Send runs to the end: %r" % send)
        init = [e for e in x if e["name"] == "CommInitRank"]
        check(len(init) == 1 and abs(init[0]["dur"] - 1000) < 0.01 and init[0]["cat"] == "lifecycle",
              "init slice enter->exit %r" % init)
        inst = [e for e in evs if e["ph"] == "i"]
        check(any(e["name"] == "Mark(step=1234)" and e["pid"] == 0 for e in inst), "marker instant")
        check(any(e["name"] == "dump: exit" and e["pid"] == 0 for e in inst), "dump trigger instant")
        check(not any(e["name"].startswith("dump:") and e["pid"] == 1 for e in inst), "a ring has no trigger")
        check(any(e["name"] == "AllReduce -> ncclRemoteError" and e["pid"] == 1 and e["cat"] == "error" for e in inst),
              "error instant for a failed call")
        failed = [e for e in evs if e["ph"] == "X" and e["pid"] == 1 and e["args"].get("seq") == 3]
        check(len(failed) == 1 and failed[0]["args"].get("enqueued") is False and failed[0]["dur"] == 0,
              "a failed call is not shown as in flight: %r" % failed)

        # Same process as a ring and a dump: merged, no duplicate slices.
        same = os.path.join(d, "same.ring")
        run(MKFIX, "ring", same, "--rank", "0", "--pid", "1000", "--host", "hostA")
        p, doc = export(out, r0, same)
        check(p.returncode == 0, "merge export exit 0")
        if doc:
            pids = {e["pid"] for e in doc["traceEvents"]}
            ars = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["name"].startswith("AllReduce")]
            check(pids == {0} and len(ars) == 2, "ring + dump of one process merge: pids %r, %d AllReduce" %
                  (pids, len(ars)))

        p, _ = export(out, r0, os.path.join(d, "missing.zst"))
        check(p.returncode == 2 and "missing.zst" in p.stderr, "unreadable input -> exit 2")
        p = run(NT, "export", r0, "-o", out)
        check(p.returncode == 2, "export without --chrome is a usage error")
    return finish()


if __name__ == "__main__":
    sys.exit(main())

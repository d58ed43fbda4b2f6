#!/usr/bin/env python3
"""test_live.py NCCLTRACE MKFIX LIVE_WRITER -- status, decode and collect on
rings of live and dead processes.

Proves: `status` shows a live process from the ring the real recorder wrote
(pid, running, its communicators with enqueued/completed seq, in-flight age,
the blocked init and for how long) without signalling it; `decode --json`
reads the live ring (pid_alive); `collect` leaves the live ring and a ring
from another host alone, turns a dead process's ring into a "collected" dump
holding its records and removes the ring; after SIGKILL of the live writer,
collect recovers its records (the flight recorder survives SIGKILL); a dump
written by the recorder's own ntr_dump_write decodes to the same records; a dump
directory that cannot be created keeps the ring (exit 1); status --rings of a
directory that does not exist is exit 2.
Exit 0 pass, 1 fail.
"""
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from toolcheck import check, failures, finish, run  # noqa: E402,F401

NT, MKFIX, WRITER = sys.argv[1], sys.argv[2], sys.argv[3]
def dead_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def main():
    with tempfile.TemporaryDirectory() as d:
        rings, dumps = os.path.join(d, "rings"), os.path.join(d, "dumps")
        os.mkdir(rings, 0o700)
        w = subprocess.Popen([WRITER, rings, os.path.join(d, "own")], stdout=subprocess.PIPE, text=True)
        try:
            live_ring = w.stdout.readline().strip()
            own_dump = w.stdout.readline().strip()
            check(w.stdout.readline().strip() == "ready", "live writer ready")
            dead = dead_pid()
            dead_ring = os.path.join(rings, "dead.ring")
            foreign_ring = os.path.join(rings, "foreign.ring")
            run(MKFIX, "ring", dead_ring, "--pid", str(dead))
            run(MKFIX, "ring", foreign_ring, "--pid", str(dead), "--host", "some-other-host")
            time.sleep(0.3)  # let the blocked init and the pending op age

            p = run(NT, "status", "--rings", rings)
            out = p.stdout
            check(p.returncode == 0, "status exit 0: %r" % p.stderr)
            check("pid %d " % w.pid in out and "running" in out, "status shows the live pid running:\n" + out)
            check("job job-live" in out and "abcdef01" in out and "11112222" in out, "status comm ids:\n" + out)
            live_line = [l for l in out.splitlines() if l.strip().startswith("abcdef01")]
            check(len(live_line) == 1 and "1/2" in live_line[0] and " 2 " in live_line[0] and " 1 " in live_line[0]
                  and " s " in live_line[0], "status enqueued 2 / completed 1 / in-flight age: %r" % live_line)
            init_line = [l for l in out.splitlines() if l.strip().startswith("11112222")]
            check(len(init_line) == 1 and "CommInitRank for" in init_line[0] and "init" in init_line[0],
                  "status shows the blocked init: %r" % init_line)
            check("pid %d " % dead in out and "gone" in out, "status shows the dead ring as gone")
            check(w.poll() is None, "status did not disturb the live process")

            watch = subprocess.Popen([NT, "status", "--rings", rings, "--watch", "0.2"], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
            time.sleep(0.9)
            watch.send_signal(signal.SIGINT)
            wout, _ = watch.communicate(timeout=10)
            check(wout.count("nccltrace status") >= 2 and wout.count("pid %d " % w.pid) >= 2,
                  "--watch refreshes until interrupted:\n" + wout[-500:])

            p = run(NT, "decode", "--json", live_ring)
            check(p.returncode == 0, "decode live ring: %r" % p.stderr)
            doc = json.loads(p.stdout)
            check(doc["header"]["pid"] == w.pid and doc["header"]["pid_alive"] is True
                  and doc["header"]["job"] == "job-live", "live ring header")
            kinds = [(r["kind"], r["seq"], r["completed"]) for r in doc["records"]]
            check(kinds == [("AllReduce", 1, True), ("AllReduce", 2, False), ("Mark", 0, False)],
                  "live ring records %r" % kinds)
            p = run(NT, "decode", "--json", own_dump)
            check(p.returncode == 0, "decode the recorder's own dump: %r" % p.stderr)
            if p.returncode == 0:
                own = json.loads(p.stdout)
                check(own["trigger"]["kind"] == "user" and own["trigger"]["reason"] == "live_writer"
                      and [(r["pos"], r["kind"]) for r in own["records"]] == [(r["pos"], r["kind"]) for r in doc["records"]]
                      and {c["id"] for c in own["comms"]} == {c["id"] for c in doc["comms"]},
                      "ntr_dump_write dump matches the ring")
            blocked = [c for c in doc["comms"] if c["id"] == "1111222233334444"]
            check(blocked and blocked[0]["blocked_kind"] == "CommInitRank" and blocked[0]["blocked_for_ns"] > 1e8,
                  "blocked_for_ns of the live init: %r" % blocked)

            open(os.path.join(d, "afile"), "w").close()
            p = run(NT, "collect", "--rings", rings, "--dir", os.path.join(d, "afile", "x"))
            check(p.returncode == 1 and os.path.exists(dead_ring), "unwritable dump dir: exit 1, ring kept")

            p = run(NT, "collect", "--rings", rings, "--dir", dumps)
            check(p.returncode == 0, "collect exit 0: %r" % p.stderr)
            lines = p.stdout.strip().splitlines()
            check(len(lines) == 3, "one line per ring: %r" % lines)
            check(any("alive" in l and live_ring in l for l in lines), "live ring left alone")
            check(any("some-other-host" in l and "left alone" in l for l in lines), "foreign ring left alone")
            check(os.path.exists(live_ring) and os.path.exists(foreign_ring), "live and foreign rings kept")
            check(not os.path.exists(dead_ring), "dead ring removed")
            made = glob.glob(os.path.join(dumps, "*.zst"))
            check(len(made) == 1, "one dump made: %r" % made)
            if made:
                doc = json.loads(run(NT, "decode", "--json", made[0]).stdout)
                check(doc["format"] == "dump" and doc["trigger"]["kind"] == "collected"
                      and doc["header"]["pid"] == dead and len(doc["records"]) == 7
                      and doc["comms"][0]["id"] == "9f2c0123456789ab", "collected dump content")
        finally:
            w.send_signal(signal.SIGKILL)
            w.wait()

        # SIGKILL left the real ring behind: collect recovers it.
        p = run(NT, "collect", "--rings", rings, "--dir", dumps)
        check(p.returncode == 0 and not os.path.exists(live_ring), "killed writer's ring collected: %r" % p.stdout)
        made = [m for m in glob.glob(os.path.join(dumps, "*.zst"))
                if json.loads(run(NT, "decode", "--json", m).stdout)["header"]["job"] == "job-live"]
        check(len(made) == 1, "dump of the killed writer: %r" % glob.glob(os.path.join(dumps, "*")))
        if made:
            doc = json.loads(run(NT, "decode", "--json", made[0]).stdout)
            kinds = [(r["kind"], r["seq"]) for r in doc["records"]]
            check(kinds == [("AllReduce", 1), ("AllReduce", 2), ("Mark", 0)], "killed writer's records %r" % kinds)
            check("vanished" in doc["trigger"]["reason"], "trigger reason says the process vanished")

        p = run(NT, "status", "--rings", os.path.join(d, "nope"))
        check(p.returncode == 2 and "no such directory" in p.stderr, "status --rings of no directory: exit 2")

    return finish()


if __name__ == "__main__":
    sys.exit(main())

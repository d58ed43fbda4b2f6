#!/usr/bin/env python3
"""status_job.py -- acceptance tests of `nccltrace status --job`, the
status query of the exchange protocol (docs/wire-protocol.md, "Status
query"): 4 emulator ranks on 2 simulated hosts (accept_exchange.py's
agg_env: hostA = ranks 0,1, hostB = ranks 2,3, each behind its own node
aggregator, the coordinator in rank 0), NCCLTRACE_SECRET set, and the
query made as a user on another node would: only MASTER_ADDR,
MASTER_PORT and NCCLTRACE_SECRET in its environment.  One test per
invocation:

  job          mid-run, `status --job --json` lists the one communicator
               with all 4 ranks connected, each on its host with its
               process's pid and launcher rank and a seq past 0, and both
               aggregators; the text form names both hosts; the ranks run
               on.  Then SIGKILL of the rank of hostB that does not host
               its aggregator: the next query shows that rank LOST with
               its pid, the other 3 connected, and the coordinator's
               verdict names the lost rank
  auth         a query with a wrong secret and one without a secret fail
               with exit 2 and one line saying why; garbage bytes and an
               HTTP request to the coordinator's port, and a burst of
               queries past the rate limit (exit 1, "at most 2 status
               queries a second"), disturb nothing: the ranks keep
               calling, nobody reports a lost rank or a mismatch, and a
               good query afterwards still gets all 4 ranks
  unreachable  nothing listening: exit 2 with one "unreachable" line
               within 2.5 s; a listener that never speaks: exit 2 within
               2.5 s, naming the missing CHALLENGE; no address at all:
               exit 2 naming what to set

Paths from the environment (meson): NTX_LIB, NTX_EMU, NTX_TOOL, NTX_RANK.
Exit: 0 pass, 1 fail, 77 skip.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from accept_exchange import Job, N, agg_env, agg_hosts, check, free_port  # noqa: E402

SECRET = "status-job-test-secret"


def query_env(port, secret=SECRET):
    """A user's shell on another node: the job's address and secret, nothing else of ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCLTRACE_") and k != "LD_PRELOAD"}
    env.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port - 17)})
    if secret is not None:
        env["NCCLTRACE_SECRET"] = secret
    return env


def status_job(env, *args):
    t0 = time.time()
    p = subprocess.run([os.environ["NTX_TOOL"], "status", "--job"] + list(args), env=env,
                       capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout, p.stderr, time.time() - t0


def view(port):
    rc, out, err, _ = status_job(query_env(port), "--json")
    check(rc == 0, "status --job --json: exit %d: %s" % (rc, err.strip()))
    return json.loads(out)


def ranks_of(v):
    check(len(v["comms"]) == 1, "want 1 communicator, the view has %d: %s" % (len(v["comms"]), v["comms"]))
    c = v["comms"][0]
    check(c["nranks"] == N and len(c["ranks"]) == N, "comm %s: %d of %d ranks" % (c["comm"], len(c["ranks"]), N))
    return {r["rank"]: r for r in c["ranks"]}


def start(tmp):
    port = free_port()
    job = Job(tmp, "loop", {"NCCLTRACE_CHECK": "async", "NCCLTRACE_SECRET": SECRET}, rank_env=agg_env, port=port)
    if not job.wait_text("out", range(N), "calls 50", 30):
        job.kill_all()
        job.show()
        check(False, "ranks not calling")
    return job, port


def calls(job, r):
    n = 0
    for line in job.text("out", r).splitlines():
        if line.startswith("calls "):
            n = int(line.split()[1])
    return n


def check_all_connected(job, v, want_seq=True):
    rk = ranks_of(v)
    for r in range(N):
        x = rk[r]
        host = "hostA" if r < 2 else "hostB"
        check(x["state"] == "connected", "rank %d: state %s" % (r, x["state"]))
        check(x["host"] == host, "rank %d: host %s, want %s" % (r, x["host"], host))
        check(x["pid"] == job.procs[r].pid, "rank %d: pid %d, want %d" % (r, x["pid"], job.procs[r].pid))
        check(x["launcher_rank"] == r, "rank %d: launcher rank %d" % (r, x["launcher_rank"]))
        check(not want_seq or x["last_seq"] > 0, "rank %d: last seq %d" % (r, x["last_seq"]))
    return rk


def t_job(tmp):
    job, port = start(tmp)
    try:
        v = view(port)
        print("summary: %s" % v["summary"])
        check_all_connected(job, v)
        aggs = sorted(c["host"] for c in v["connections"] if c["aggregator"])
        check(aggs == ["hostA", "hostB"], "aggregators of %s, want hostA and hostB" % aggs)
        check("no problem seen" in v["summary"], "verdict: %s" % v["summary"])
        rc, out, err, _ = status_job(query_env(port))
        check(rc == 0, "status --job: exit %d: %s" % (rc, err.strip()))
        print(out)
        for h in ("hostA", "hostB"):
            check("host %s:" % h in out, "the text view does not name %s" % h)
        check("live verdict (the coordinator's, the whole job)" in out, "no verdict line")
        before = calls(job, 0)
        check(job.wait_text("out", [0], "calls %d" % (before + 50), 10), "rank 0 stopped calling after the query")
        hosts = agg_hosts(job)
        victim = 5 - hosts["hostB"]
        job.procs[victim].send_signal(signal.SIGKILL)
        check(job.wait_text("err", [0, 1], "nccltrace: lost rank %d (host hostB" % victim, 5),
              "ranks 0,1 were not told of the lost rank %d" % victim)
        v = view(port)
        print("after SIGKILL of rank %d: %s" % (victim, v["summary"]))
        rk = ranks_of(v)
        check(rk[victim]["state"] == "lost", "rank %d: state %s, want lost" % (victim, rk[victim]["state"]))
        check(rk[victim]["pid"] == job.procs[victim].pid and rk[victim]["host"] == "hostB",
              "lost rank %d: pid %d host %s" % (victim, rk[victim]["pid"], rk[victim]["host"]))
        for r in range(N):
            if r != victim:
                check(rk[r]["state"] == "connected", "rank %d: state %s" % (r, rk[r]["state"]))
        check("lost rank %d of comm %s" % (victim, v["comms"][0]["comm"]) in v["summary"],
              "the verdict does not name the lost rank: %s" % v["summary"])
        rc, out, err, _ = status_job(query_env(port))
        check(rc == 0 and "LOST" in out and "lost: rank %d" % victim in out, "text view after the loss:\n" + out + err)
        print(out)
    finally:
        job.kill_all()


def t_auth(tmp):
    job, port = start(tmp)
    try:
        rc, out, err, _ = status_job(query_env(port, "not-the-secret"))
        print("wrong secret: exit %d: %s" % (rc, err.strip()))
        check(rc == 2 and "does not hold the key" in err and len(err.strip().splitlines()) == 1,
              "wrong secret: exit %d, stderr %r" % (rc, err))
        rc, out, err, _ = status_job(query_env(port, None))
        print("no secret: exit %d: %s" % (rc, err.strip()))
        check(rc == 2 and "NCCLTRACE_SECRET is not set" in err, "no secret: exit %d, stderr %r" % (rc, err))
        for junk in (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", os.urandom(4096), b"NX\x05\x0f" + os.urandom(60)):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            try:
                s.sendall(junk)
                s.settimeout(5)
                while s.recv(4096):  # the coordinator closes it
                    pass
            except (ConnectionResetError, socket.timeout):
                pass
            s.close()
        results = [status_job(query_env(port), "--json")[0] for _ in range(8)]
        print("8 queries at once: exits %s" % results)
        check(results.count(1) >= 2 and 0 in results and set(results) <= {0, 1},
              "the rate limit: exits %s" % results)
        rc, out, err, _ = status_job(query_env(port))
        check(rc in (0, 1), "status --job: exit %d" % rc)
        if rc == 1:
            check("at most 2 status queries a second" in err, "busy: %r" % err)
        time.sleep(1.5)  # the bucket refills
        before = [calls(job, r) for r in range(N)]
        v = view(port)
        check_all_connected(job, v)
        check("no problem seen" in v["summary"], "verdict after the hostile queries: %s" % v["summary"])
        check(job.wait_text("out", range(N), "calls %d" % (max(before) + 50), 10), "the ranks stopped calling")
        for r in range(N):
            err = job.text("err", r)
            check("lost rank" not in err and "mismatch" not in err, "rank %d reported something:\n%s" % (r, err))
    finally:
        job.kill_all()


def t_unreachable(tmp):
    port = free_port()
    rc, out, err, dt = status_job(query_env(port))
    print("nothing listening: exit %d in %.3f s: %s" % (rc, dt, err.strip()))
    check(rc == 2 and "unreachable" in err and len(err.strip().splitlines()) == 1 and dt < 2.5,
          "nothing listening: exit %d in %.2f s, stderr %r" % (rc, dt, err))
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(4)
    silent = ls.getsockname()[1]
    rc, out, err, dt = status_job(query_env(port), "--coord", "127.0.0.1:%d" % silent)
    ls.close()
    print("a silent listener: exit %d in %.3f s: %s" % (rc, dt, err.strip()))
    check(rc == 2 and "no CHALLENGE within 2 s" in err and 1.5 < dt < 2.5,
          "a silent listener: exit %d in %.2f s, stderr %r" % (rc, dt, err))
    env = query_env(port)
    del env["MASTER_ADDR"], env["MASTER_PORT"]
    rc, out, err, dt = status_job(env)
    print("no address: exit %d: %s" % (rc, err.strip()))
    check(rc == 2 and "--coord HOST:PORT" in err and "NCCLTRACE_COORD" in err, "no address: exit %d, %r" % (rc, err))


def main():
    for k in ("NTX_LIB", "NTX_EMU", "NTX_TOOL", "NTX_RANK"):
        if not os.environ.get(k):
            print("skip: %s not set" % k)
            sys.exit(77)
    test = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="ntx-status-job-")
    os.chmod(tmp, 0o700)
    try:
        {"job": t_job, "auth": t_auth, "unreachable": t_unreachable}[test](tmp)
    finally:
        if os.environ.get("NTX_KEEP"):
            print("kept " + tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print("%s: ok" % test)


if __name__ == "__main__":
    main()

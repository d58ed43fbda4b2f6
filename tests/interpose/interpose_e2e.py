#!/usr/bin/env python3
"""interpose_e2e.py -- end-to-end tests of libnccltrace.so (tests/interpose).

Each test runs programs with LD_PRELOAD=libnccltrace.so (on the CPU emulator
unless said otherwise), then decodes what was left behind with
`nccltrace decode --json` and checks it.  One test per invocation:

  interpose_e2e.py TEST   (paths come from the environment, see main())

Exit: 0 pass, 1 fail, 77 skip.  Every test cleans up its processes and its
temporary directory.
"""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ENV = {}
TMP = None


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def base_env(preload=True, emu=True):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("NCCLTRACE_") or k in ("LD_PRELOAD", "NCCLEMU_FAULT"):
            del env[k]
    if emu:
        env["LD_LIBRARY_PATH"] = ENV["emu"]
        env["NCCLEMU_DEVICES"] = "8"
    if preload:
        env["LD_PRELOAD"] = ENV["lib"]
    env["NCCLTRACE_RING_DIR"] = os.path.join(TMP, "rings")
    env["NCCLTRACE_DIR"] = os.path.join(TMP, "dumps")
    if os.environ.get("NTI_TEST_CHECK_DEFAULT") is None:
        env["NCCLTRACE_CHECK"] = "off"
    return env


def decode(path):
    p = subprocess.run([ENV["tool"], "decode", "--json", path], capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, "nccltrace decode %s failed: %s" % (path, p.stderr.strip()))
    return json.loads(p.stdout)


def dumps(pattern="*"):
    return sorted(glob.glob(os.path.join(TMP, "dumps", "nccltrace-" + pattern + ".zst")))


def dump_of(pid, trigger):
    for f in dumps("*-%d-*-%s" % (pid, trigger)):
        return f
    fail("no %s dump of pid %d among %s" % (trigger, pid, [os.path.basename(x) for x in dumps()]))


def start_ranks(mode, n, env, extra=None):
    # a fresh rendezvous directory per launch: stale unique-id files of an
    # earlier launch must never be read
    iddir = tempfile.mkdtemp(prefix="ids-", dir=TMP)
    procs = []
    for r in range(n):
        e = dict(env)
        e["RANK"] = str(r)
        e["WORLD_SIZE"] = str(n)
        if extra:
            e.update(extra)
        procs.append(subprocess.Popen([ENV["rank"], mode, str(r), str(n), iddir], env=e,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return procs


def finish(procs, timeout=60):
    out = []
    deadline = time.time() + timeout
    for p in procs:
        try:
            o, e = p.communicate(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            kill_all(procs)
            fail("rank %d timed out" % procs.index(p))
        out.append((p.returncode, o, e))
    return out


LEFT = {}  # pid -> (stdout, stderr) read by kill_all


def kill_all(procs):
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        try:
            LEFT[p.pid] = p.communicate(timeout=10)
        except Exception:
            pass


def wait_line(p, text, timeout=30):
    """Read p's stdout until a line equals text."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        if line.strip() == text:
            return
    fail("no %r from pid %d" % (text, p.pid))


def calls(d, phase="call"):
    return [r for r in d["records"] if r["phase"] == phase]


COLL = {"AllReduce", "Broadcast", "Bcast", "Reduce", "AllGather", "ReduceScatter", "AlltoAll", "Gather", "Scatter"}

# ----------------------------------------------------------------- tests --


def t_all():
    n = 4
    res = finish(start_ranks("all", n, base_env()))
    for r, (rc, o, e) in enumerate(res):
        check(rc == 0, "rank %d exited %d: %s" % (r, rc, e))
    decoded = []
    for r, (rc, o, e) in enumerate(res):
        pids = set(re.findall(r"-(\d+)-\d+-exit\.zst", " ".join(dumps())))
        d = None
        for f in dumps("*-exit"):
            dd = decode(f)
            if dd["header"]["rank"] == r:
                d = dd
        check(d is not None, "no exit dump for rank %d (dumps of pids %s)" % (r, sorted(pids)))
        decoded.append(d)
        expect = [ln.split() for ln in o.splitlines() if ln.strip()]
        recs = [x for x in calls(d) if x["kind"] in COLL or x["kind"] in ("Send", "Recv")]
        check(len(recs) == len(expect), "rank %d: %d op records, program made %d:\n%s" %
              (r, len(recs), len(expect), "\n".join("%s %s" % (x["kind"], x["seq"]) for x in recs)))
        main_comm = recs[0]["comm"]
        seq = 0
        for x, ex in zip(recs, expect):
            tag = ex[0] if ex[0] not in ("split", "nb") else ex[1]
            fields = ex[1:] if ex[0] not in ("split", "nb") else ex[2:]
            check(x["kind"] == tag, "rank %d: record %s, expected %s" % (r, x["kind"], tag))
            check(str(x["count"]) == fields[0], "rank %d %s: count %s != %s" % (r, tag, x["count"], fields[0]))
            check(x["dtype"] == fields[1], "rank %d %s: dtype %s != %s" % (r, tag, x["dtype"], fields[1]))
            if tag in COLL:
                want_redop = None if fields[2] == "-" else fields[2]
                check(x["redop"] == want_redop, "rank %d %s: redop %s != %s" % (r, tag, x["redop"], want_redop))
                want_root = None if fields[3] == "-" else int(fields[3])
                check(x["root"] == want_root, "rank %d %s: root %s != %s" % (r, tag, x["root"], want_root))
                if ex[0] not in ("split", "nb"):
                    seq += 1
                    check(x["comm"] == main_comm and x["seq"] == seq,
                          "rank %d %s: comm %s seq %s, expected seq %d" % (r, tag, x["comm"], x["seq"], seq))
                else:
                    check(x["comm"] != main_comm and x["seq"] == 1, "rank %d %s on %s: seq %s" % (r, ex[0], x["comm"], x["seq"]))
            else:
                check(x["peer"] == int(fields[3]) and x["seq"] == 1, "rank %d %s: peer %s seq %s" % (r, tag, x["peer"], x["seq"]))
                check("in_group" in x["flags"] and x["group_id"] > 0, "rank %d %s not marked in a group" % (r, tag))
            check(x["result"] == "ncclSuccess" or (ex[0] == "nb" and x["result"] == "ncclInProgress"),
                  "rank %d %s: result %s" % (r, tag, x["result"]))
            check(x["completed"], "rank %d %s seq %s: not completed at exit" % (r, tag, x["seq"]))
            if ex[0] == "nb":
                check("nonblocking" in x["flags"], "rank %d: nonblocking comm's op not flagged" % r)
        # nested group: both AllReduces share one group id, depths 2 and 1
        g = [x for x in recs if x["kind"] == "AllReduce" and x["count"] in (4, 8) and x["dtype"] == "int32"]
        check(len(g) == 2 and g[0]["group_id"] == g[1]["group_id"] and g[0]["group_depth"] == 2 and
              g[1]["group_depth"] == 1, "rank %d: nested group records wrong: %s" % (r, g))
        starts = [x for x in calls(d) if x["kind"] == "GroupStart"]
        ends = [x for x in calls(d) if x["kind"] == "GroupEnd"]
        check(len(starts) == 3 and len(ends) == 3, "rank %d: %d GroupStart, %d GroupEnd" % (r, len(starts), len(ends)))
        # lifecycle: enter and exit of each
        for kind, k in (("CommInitRank", 1), ("CommInitRankConfig", 1), ("CommSplit", 1),
                        ("CommFinalize", 2), ("CommDestroy", 3)):
            en = [x for x in d["records"] if x["kind"] == kind and x["phase"] == "enter"]
            ex_ = [x for x in d["records"] if x["kind"] == kind and x["phase"] == "exit"]
            check(len(en) == k and len(ex_) == k, "rank %d: %s enter %d exit %d, want %d" % (r, kind, len(en), len(ex_), k))
        check(not [x for x in d["records"] if x["kind"] == "CommGetAsyncError"],
              "rank %d: ncclCommGetAsyncError polls were recorded" % r)
        check([x for x in d["records"] if x["kind"] == "Broadcast"].__len__() == 1,
              "rank %d: Bcast produced a Broadcast record too" % r)
        # The emulator, like NCCL 2.28, calls ncclBroadcast from ncclBcast and
        # ncclCommGetAsyncError from every enqueue (twice on a nonblocking
        # comm) through its exported names: the guard keeps them unrecorded.
        check([x["kind"] for x in d["records"]].count("Bcast") == 1,
              "rank %d: one ncclBcast call gave %d Bcast records" %
              (r, [x["kind"] for x in d["records"]].count("Bcast")))
        nb_id = [x for x in recs if "nonblocking" in x["flags"]][0]["comm"]
        name = {0: "ncclSuccess", 7: "ncclInProgress"}  # aux holds the new value as a number
        # In time order: positions come from per-thread blocks, so the
        # watchdog's record of a change can sit after later ones of the app.
        nb_async = [(x["result"], name.get(x["aux"], x["aux"])) for x in
                    sorted((x for x in d["records"] if x["kind"] == "AsyncError" and x["comm"] == nb_id),
                           key=lambda x: x["t_ns"])]
        # Only real changes of the value, each recorded once, chained old ->
        # new, between ncclInProgress and ncclSuccess (how many depends on
        # when the application's polls catch a nonblocking call in progress).
        ok = bool(nb_async) and all(o != n and {o, n} == {"ncclInProgress", "ncclSuccess"} for o, n in nb_async)
        ok = ok and all(nb_async[i][1] == nb_async[i + 1][0] for i in range(len(nb_async) - 1))
        check(ok, "rank %d: nonblocking comm's AsyncError records are not one chain of changes: %s" % (r, nb_async))
        comms = {c["id"]: c for c in d["comms"]}
        mc = comms.get(main_comm)
        check(mc and mc["coll_seq"] == 11 and mc["last_enqueued"] == 11 and mc["last_completed"] == 11,
              "rank %d: main comm state %s" % (r, mc))
        check(mc["lifecycle"] == "destroyed", "rank %d: main comm lifecycle %s" % (r, mc["lifecycle"]))
        check(d["trigger"]["kind"] == "exit" and d["trigger"]["exit_code"] == 0, "rank %d: trigger %s" % (r, d["trigger"]))
    # identity across ranks
    def op_comm(d, tag):
        return [x["comm"] for x in calls(d) if x["kind"] == "AllReduce"]
    ids = [op_comm(d, "") for d in decoded]
    check(all(i[0] == ids[0][0] for i in ids), "main comm ids differ across ranks: %s" % [i[0] for i in ids])
    split = [i[-2] for i in ids]
    nb = [i[-1] for i in ids]
    check(split[0] == split[2] and split[1] == split[3] and split[0] != split[1],
          "split comm ids not by color: %s" % split)
    check(len(set(nb)) == 1 and nb[0] != ids[0][0], "nonblocking comm ids: %s" % nb)
    check(not glob.glob(os.path.join(TMP, "rings", "*.ring")), "ring files left after exit dumps")


def t_kill():
    procs = start_ranks("kill", 1, base_env())
    try:
        wait_line(procs[0], "ready")
        time.sleep(0.1)
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait(timeout=10)
    finally:
        kill_all(procs)
    rings = glob.glob(os.path.join(TMP, "rings", "*.ring"))
    check(len(rings) == 1, "expected one ring file, found %s" % rings)
    check(not dumps(), "a SIGKILLed process cannot have dumped: %s" % dumps())
    d = decode(rings[0])
    ar = [x for x in calls(d) if x["kind"] == "AllReduce"]
    check([x["seq"] for x in ar] == [1, 2, 3, 4, 5], "ring holds AllReduce seqs %s" % [x["seq"] for x in ar])
    check(all(x["result"] == "ncclSuccess" for x in ar), "results %s" % [x["result"] for x in ar])
    check(d["header"]["proc_state"] == "running", "proc_state %s" % d["header"]["proc_state"])


def t_hang():
    env = base_env()
    env["NCCLTRACE_TIMEOUT"] = "1"
    procs = start_ranks("hang", 2, env)
    try:
        deadline = time.time() + 20
        f = None
        while time.time() < deadline and not f:
            f = next(iter(dumps("*-%d-*-timeout" % procs[0].pid)), None)
            time.sleep(0.2)
        check(f, "no timeout dump from rank 0 within 20 s")
        time.sleep(0.3)  # the dump is renamed into place complete
    finally:
        kill_all(procs)
    err = LEFT.get(procs[0].pid, ("", ""))[1] or ""
    d = decode(f)
    ar = [x for x in calls(d) if x["kind"] == "AllReduce"]
    comm = ar[0]["comm"]
    c = [x for x in d["comms"] if x["id"] == comm][0]
    check(c["last_enqueued"] == 3 and c["last_completed"] == 2,
          "comm state: enqueued %s completed %s" % (c["last_enqueued"], c["last_completed"]))
    check(not ar[2]["completed"] and ar[1]["completed"], "completion flags %s" % [x["completed"] for x in ar])
    check(d["trigger"]["kind"] == "timeout" and "seq 3 AllReduce" in d["trigger"]["reason"],
          "trigger %s" % d["trigger"])
    to = [x for x in d["records"] if x["kind"] == "Timeout"]
    check(len(to) == 1 and to[0]["seq"] == 3, "timeout records %s" % to)
    want = "nccltrace: timeout: comm %s rank 0 seq 3 AllReduce not complete after" % comm
    check(want in err, "stderr lacks %r: %s" % (want, err))


def t_segv():
    res = finish(start_ranks("segv", 1, base_env()))
    rc, o, e = res[0]
    check(rc == -signal.SIGSEGV, "exit status %s, expected death by SIGSEGV" % rc)
    f = dumps("*-sigsegv")
    check(len(f) == 1, "dumps: %s" % dumps())
    d = decode(f[0])
    frames = [fr["sym"] for fr in d["backtrace"]["frames"]]
    check(any(s.startswith("crash_here") for s in frames[:3]), "backtrace does not start at crash_here: %s" % frames)
    check(d["header"]["proc_state"] == "signaled" and d["header"]["signo"] == 11, "header %s" % d["header"])
    check(len([x for x in calls(d) if x["kind"] == "AllReduce"]) == 5, "records lost")


def t_term():
    procs = start_ranks("term", 1, base_env())
    try:
        wait_line(procs[0], "ready")
        procs[0].send_signal(signal.SIGTERM)
        procs[0].wait(timeout=20)
    finally:
        kill_all(procs)
    check(procs[0].returncode == -signal.SIGTERM, "exit status %s, expected death by SIGTERM" % procs[0].returncode)
    f = dumps("*-sigterm")
    check(len(f) == 1, "dumps: %s" % dumps())
    d = decode(f[0])
    check(d["trigger"]["signo"] == 15, "trigger %s" % d["trigger"])
    check(len([x for x in calls(d) if x["kind"] == "AllReduce"]) == 5, "records lost")


def t_exit42():
    env = base_env()
    env["NCCLTRACE_STACKS"] = "1"  # and per-call stacks on the way
    res = finish(start_ranks("exit42", 1, env))
    check(res[0][0] == 42, "exit status %s, expected 42" % res[0][0])
    f = dumps("*-exit")
    check(len(f) == 1, "dumps: %s" % dumps())
    d = decode(f[0])
    check(d["trigger"]["exit_code"] == 42 and d["header"]["exit_code"] == 42 and
          d["header"]["proc_state"] == "exited", "trigger %s header %s" % (d["trigger"], d["header"]))
    ar = [x for x in calls(d) if x["kind"] == "AllReduce"]
    check(ar and all(x["stack_id"] > 0 for x in ar), "NCCLTRACE_STACKS=1: stack ids %s" % [x["stack_id"] for x in ar])
    check(len(set(x["stack_id"] for x in ar)) == 1 and d["stacks"], "one call site should be one stack")


def t_dumpstorm():
    """40 SIGUSR1 in a row: at most the burst of dumps, one line saying the
    rest were skipped, and the skips counted in the ring (a storm of
    triggers must not write a dump each)."""
    env = base_env()
    env["NCCLTRACE_RING"] = "4096"  # small dumps: the storm is about their number
    res = finish(start_ranks("usr1storm", 1, env))
    code, out, err = res[0]
    check(code == 0 and "storm done" in out, "exit %s, stdout %r, stderr %r" % (code, out, err))
    n = len(dumps("*-sigusr1"))
    check(1 <= n <= 5, "%d SIGUSR1 dumps from 40 signals (budget 5): %s" % (n, dumps()))
    check(err.count("dumps for trigger sigusr1 at once: further ones are skipped") == 1,
          "not exactly one line about the skipped dumps: %r" % err)
    notes = [x for x in decode(dumps("*-exit")[0])["records"]
             if x["kind"] == "Note" and x.get("text") == "dump-limited"]
    check(len(notes) == 40 - n, "%d dump-limited notes for %d skipped dumps" % (len(notes), 40 - n))


def t_dumpcap():
    """Issue 27, low item: a total cap on dumps.  NCCLTRACE_MAX_DUMPS=2: of
    40 SIGUSR1 only 2 dumps, one line naming the knob, the rest dump-capped
    Notes; NCCLTRACE_DIR_MAX_DUMPS=10 with 10 dumps already in the
    directory: no SIGUSR1 dump at all.  The exit dump is written in both."""
    env = base_env()
    env["NCCLTRACE_RING"] = "4096"
    env["NCCLTRACE_MAX_DUMPS"] = "2"
    code, out, err = finish(start_ranks("usr1storm", 1, env))[0]
    check(code == 0 and "storm done" in out, "exit %s, stdout %r, stderr %r" % (code, out, err))
    n = len(dumps("*-sigusr1"))
    capped = [x for x in decode(dumps("*-exit")[0])["records"] if x["kind"] == "Note" and x.get("text") == "dump-capped"]
    print("NCCLTRACE_MAX_DUMPS=2: %d SIGUSR1 dumps, %d dump-capped notes, exit dumps %d" %
          (n, len(capped), len(dumps("*-exit"))))
    check(n == 2, "%d SIGUSR1 dumps under NCCLTRACE_MAX_DUMPS=2: %s" % (n, dumps()))
    check(err.count("NCCLTRACE_MAX_DUMPS=2 dumps written by this process: further dumps are skipped") == 1,
          "not exactly one line about the cap: %r" % err)
    check(len(capped) == 38, "%d dump-capped notes for 38 skipped dumps" % len(capped))
    for f in dumps():
        os.unlink(f)
    for i in range(10):  # another job's dumps in the same directory
        with open(os.path.join(TMP, "dumps", "nccltrace-other-r%d-h-1-0-exit.zst" % i), "wb") as f:
            f.write(b"x")
    env = base_env()
    env["NCCLTRACE_RING"] = "4096"
    env["NCCLTRACE_DIR_MAX_DUMPS"] = "10"
    code, out, err = finish(start_ranks("usr1storm", 1, env))[0]
    check(code == 0 and "storm done" in out, "exit %s, stdout %r, stderr %r" % (code, out, err))
    n = len(dumps("*-sigusr1"))
    print("NCCLTRACE_DIR_MAX_DUMPS=10, 10 there: %d SIGUSR1 dumps, exit dumps %d" % (n, len(dumps("*-exit")) - 10))
    check(n == 0, "%d SIGUSR1 dumps with the directory at NCCLTRACE_DIR_MAX_DUMPS: %s" % (n, dumps()))
    check(err.count("(NCCLTRACE_DIR_MAX_DUMPS=10): further dumps are skipped") == 1, "no line: %r" % err)
    check(len(dumps("*-exit")) == 11, "the exit dump was not written: %s" % dumps())


def rings(pattern="*"):
    return sorted(glob.glob(os.path.join(TMP, "rings", "nccltrace-" + pattern + ".ring*")))


def exec_records(d):
    return [x for x in d["records"] if x["kind"] == "Exec"]


EXEC_HOWS = ["execve", "execv", "execvp", "execvpe", "execl", "execlp", "execle", "execveat", "fexecve"]


def t_exec():
    # 2 ranks: collectives, then execve("/bin/true"): same exit status as
    # untraced, and each rank's ring is left with proc_state exec and an
    # Exec record naming the path, no EXIT phase (the exec succeeded).
    plain = finish(start_ranks("exec", 2, base_env(preload=False)))
    traced = finish(start_ranks("exec", 2, base_env()))
    check([r[0] for r in traced] == [r[0] for r in plain] == [0, 0],
          "exit status traced %s, untraced %s: %s" % ([r[0] for r in traced], [r[0] for r in plain],
                                                    [r[2][-300:] for r in traced]))
    check(not dumps(), "an exec took a dump: %s" % dumps())
    rs = rings()
    check(len(rs) == 2, "rings left: %s" % rs)
    for f in rs:
        d = decode(f)
        check(d["header"]["proc_state"] == "exec", "%s: proc_state %s" % (f, d["header"]["proc_state"]))
        ex = exec_records(d)
        check(len(ex) == 1 and ex[0]["phase"] == "enter" and ex[0]["text"] == "/bin/true" and ex[0]["count"] == 9,
              "%s: Exec records %s" % (f, ex))
        ar = [x for x in calls(d) if x["kind"] == "AllReduce"]
        check(len(ar) == 5 and ar[-1]["pos"] < ex[0]["pos"], "%s: AllReduce records %s" % (f, ar))
    # analyze: an exec is no death (not rank_killed): both ranks exec'd
    # after agreeing on every collective, so the job was healthy
    an = subprocess.run([ENV["tool"], "analyze", "--json", os.path.join(TMP, "rings")], capture_output=True,
                        text=True, timeout=60)
    check(an.returncode == 0, "analyze of exec'd rings failed: %s" % an.stderr)
    v = json.loads(an.stdout)
    check(v["verdict"]["class"] == "healthy", "verdict of an exec'd healthy job: %s" % v["verdict"])
    check(sorted(r["state"] for r in v["ranks"]) == ["exec'd", "exec'd"], "rank states %s" % v["ranks"])
    check(any(e["kind"] == "exec" for e in v["evidence"]), "no exec event in the evidence")
    # The exec'd program runs on under the same pid: its old ring has no
    # writer any more, so status says so and collect turns it into a dump
    # while the pid is still alive.
    shutil.rmtree(os.path.join(TMP, "rings"), ignore_errors=True)
    script = os.path.join(TMP, "sleeper.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\nsleep 3\n")
    os.chmod(script, 0o755)
    env = base_env()
    env["LD_PRELOAD"] = ""  # the sleeper itself needs no tracing
    procs = start_ranks("exec", 1, base_env(), {"RANK_EXEC_TARGET": script})
    deadline = time.time() + 20
    while time.time() < deadline:
        rs = rings()
        if rs and decode(rs[0])["header"]["proc_state"] == "exec":
            break
        time.sleep(0.05)
    check(procs[0].poll() is None, "the exec'd sleeper is not running any more")
    st = subprocess.run([ENV["tool"], "status", "--rings", os.path.join(TMP, "rings")], env=env,
                        capture_output=True, text=True, timeout=60)
    check(st.returncode == 0 and "exec'd" in st.stdout, "status of an exec'd ring: %s %s" % (st.stdout, st.stderr))
    col = subprocess.run([ENV["tool"], "collect", "--rings", os.path.join(TMP, "rings"), "--dir",
                          os.path.join(TMP, "collected")], env=env, capture_output=True, text=True, timeout=60)
    got = glob.glob(os.path.join(TMP, "collected", "*.zst"))
    check(col.returncode == 0 and len(got) == 1, "collect of an exec'd ring: %s %s %s" % (got, col.stdout, col.stderr))
    check("replaced its program by exec" in decode(got[0])["trigger"]["reason"],
          "collected trigger: %s" % decode(got[0])["trigger"])
    check(procs[0].poll() is None, "the sleeper ended before status/collect ran: the test proves nothing")
    finish(procs)
    # Every member of the family is reached (glibc's execv, execl, ... call
    # its internal __execve, not the execve symbol): one rank each.
    for how in EXEC_HOWS:
        shutil.rmtree(os.path.join(TMP, "rings"), ignore_errors=True)
        res = finish(start_ranks("exec", 1, base_env(), {"RANK_EXEC_HOW": how}))
        check(res[0][0] == 0, "%s: exit status %s: %s" % (how, res[0][0], res[0][2][-300:]))
        rs = rings()
        check(len(rs) == 1, "%s: rings %s" % (how, rs))
        d = decode(rs[0])
        ex = exec_records(d)
        want = "/bin/true" if how != "fexecve" else None
        check(d["header"]["proc_state"] == "exec" and len(ex) == 1 and
              (ex[0]["text"] == want if want else ex[0]["text"].startswith("fd ")),
              "%s: proc_state %s, Exec records %s" % (how, d["header"]["proc_state"], ex))


def t_execfail():
    # Every family member on a missing path: the same return values, errno
    # and exit status as untraced; each attempt is an Exec ENTER + EXIT
    # (aux = errno) pair, the process goes on and exits with its dump.
    plain = finish(start_ranks("execfail", 2, base_env(preload=False)))
    traced = finish(start_ranks("execfail", 2, base_env()))
    for (pc, po, pe), (tc, to, te) in zip(plain, traced):
        check(pc == tc == 0, "exit status traced %s untraced %s: %s" % (tc, pc, te[-300:]))
        check(po == to and len(po.splitlines()) == len(EXEC_HOWS),
              "outputs differ:\nuntraced %r\ntraced %r" % (po, to))
    errnos = [int(ln.split()[2]) for ln in traced[0][1].splitlines()]
    f = dumps("*-exit")
    check(len(f) == 2, "dumps: %s" % dumps())
    for x in f:
        d = decode(x)
        check(d["header"]["proc_state"] == "exited" and d["header"]["exit_code"] == 0, "header %s" % d["header"])
        ex = exec_records(d)
        check([e["phase"] for e in ex] == ["enter", "exit"] * len(EXEC_HOWS), "Exec records %s" % ex)
        check([e["aux"] for e in ex[1::2]] == errnos, "errno in Exec records %s, program saw %s"
              % ([e["aux"] for e in ex[1::2]], errnos))
        check(all(e["text"].endswith("nccltrace-exec-test") and e["count"] == 32 for e in ex[0:-2:2]),
              "paths %s" % [(e["text"], e["count"]) for e in ex[0::2]])
        ar = [x for x in calls(d) if x["kind"] == "AllReduce"]
        check(len(ar) == 10 and ar[-1]["pos"] > ex[-1]["pos"], "AllReduce after the failed execs: %s" % len(ar))
        # the text names the errno by its text too, not by number alone
        t = subprocess.run([ENV["tool"], "decode", x], capture_output=True, text=True, timeout=60).stdout
        want = "Exec(failed: %s, errno %d)" % (os.strerror(errnos[0]), errnos[0])
        check(want in t, "decode text lacks %r: %s" % (want, [ln for ln in t.splitlines() if "Exec(" in ln][:3]))


def t_execself():
    # The new image (same pid, LD_PRELOAD inherited) makes its own ring: with
    # a fixed job id it has the same name, so it must take "~1" and leave the
    # old image's ring intact.
    env = base_env()
    env["NCCLTRACE_JOB"] = "execself"
    res = finish(start_ranks("exec", 1, env, {"RANK_EXEC_TARGET": ENV["rank"]}))
    check(res[0][0] == 0 and "uid done" in res[0][1], "exit status %s: %s" % (res[0][0], res[0][2][-300:]))
    rs = rings()
    check(len(rs) == 1 and re.search(r"-\d+\.ring$", rs[0]), "rings %s" % rs)
    pid = int(re.search(r"-(\d+)\.ring$", rs[0]).group(1))
    old = decode(rs[0])
    check(old["header"]["proc_state"] == "exec" and len(exec_records(old)) == 1 and
          len([x for x in calls(old) if x["kind"] == "AllReduce"]) == 5, "old image ring %s" % old["header"])
    new = decode(dump_of(pid, "exit"))
    kinds = [x["kind"] for x in new["records"]]
    check(new["header"]["pid"] == pid and new["header"]["proc_state"] == "exited" and
          "GetUniqueId" in kinds and "AllReduce" not in kinds and "Exec" not in kinds,
          "new image dump: %s %s" % (new["header"], kinds))


def t_asyncerr():
    env = base_env()
    env["NCCLEMU_FAULT"] = "async_error:3:remote"
    procs = start_ranks("term", 1, env)
    try:
        deadline = time.time() + 20
        f = None
        while time.time() < deadline and not f:
            f = next(iter(dumps("*-async_error")), None)
            time.sleep(0.2)
        check(f, "no async_error dump within 20 s: %s" % dumps())
        time.sleep(0.3)
    finally:
        kill_all(procs)
    d = decode(f)
    ev = [x for x in d["records"] if x["kind"] == "AsyncError"]
    check(ev and ev[-1]["aux"] == 6, "async error records %s" % ev)  # ncclRemoteError = 6
    c = d["comms"][0]
    check(c["async_error"] == "ncclRemoteError", "comm async_error %s" % c["async_error"])


def t_nbdefer():
    """A nonblocking comm whose enqueue NCCL defers (ncclInProgress): the
    ops never run (stall:1 and :2), so neither may be marked completed -- an
    event recorded when the call returned, before the work reached the
    stream, would have completed at once."""
    env = base_env()
    env["NCCLEMU_FAULT"] = "stall:1,stall:2"
    env["NCCLEMU_NB_DEFER_MS"] = "100"
    out = finish(start_ranks("nbdefer", 1, env))
    check(out[0][0] == 0 and "nb issued" in out[0][1], "nbdefer rank failed: %s" % (out[0],))
    d = decode(next(iter(dumps("*-exit")), None) or fail("no exit dump: %s" % dumps()))
    ops = [x for x in calls(d) if x["kind"] == "AllReduce" and x["count"] in (4, 8)]
    check(len(ops) == 2, "AllReduce records: %s" % ops)
    done = [x for x in ops if "completed" in x["flags"]]
    check(not done, "ops NCCL had not enqueued were marked completed: %s" % done)
    nb = [c for c in d["comms"] if c["last_enqueued"] == 2]
    check(nb and nb[0]["last_completed"] == 0, "nonblocking comm state: %s" % d["comms"])
    # the same without the stall: both are evented once enqueued, and complete
    for f in dumps():
        os.unlink(f)
    del env["NCCLEMU_FAULT"]
    out = finish(start_ranks("nbdefer", 1, env))
    check(out[0][0] == 0 and "nb issued" in out[0][1], "nbdefer rank failed: %s" % (out[0],))
    d = decode(next(iter(dumps("*-exit")), None) or fail("no exit dump: %s" % dumps()))
    ops = [x for x in calls(d) if x["kind"] == "AllReduce" and x["count"] in (4, 8)]
    check(len(ops) == 2 and all("completed" in x["flags"] for x in ops), "deferred ops not completed: %s" % ops)
    nb = [c for c in d["comms"] if c["last_enqueued"] == 2]
    check(nb and nb[0]["last_completed"] == 2, "nonblocking comm state: %s" % d["comms"])


def t_disable():
    outs = []
    for pre in (False, True):
        env = base_env(preload=pre)
        if pre:
            env["NCCLTRACE_DISABLE"] = "1"
        res = finish(start_ranks("all", 2, env))
        outs.append([(rc, o, e) for rc, o, e in res])
    check(outs[0] == outs[1], "output differs with NCCLTRACE_DISABLE=1:\n%s\n---\n%s" % (outs[0], outs[1]))
    check(not os.path.exists(os.path.join(TMP, "rings")) and not os.path.exists(os.path.join(TMP, "dumps")),
          "NCCLTRACE_DISABLE=1 left files: %s" % [x for x in os.listdir(TMP) if not x.startswith("ids-")])


def t_handlers():
    results = []
    for pre in (False, True):
        env = base_env(preload=pre)
        res = finish(start_ranks("handlers", 1, env, {"RANK_EARLY_HANDLERS": "1"}))
        results.append(res[0])
    for rc, o, e in results:
        check(rc == 3, "exit status %s (stderr %s)" % (rc, e))
        check("app SIGUSR1 handler (after)" in o and "app SIGTERM handler" in o, "app handlers did not run: %r" % o)
    check(results[0][1] == results[1][1], "stdout differs under nccltrace: %r vs %r" % (results[0][1], results[1][1]))
    check(dumps("*-sigusr1") and dumps("*-sigterm"), "no sigusr1/sigterm dumps: %s" % dumps())
    f = dumps("*-exit")
    check(len(f) == 1 and decode(f[0])["trigger"]["exit_code"] == 3, "exit dump: %s" % f)


def t_dlopen_real():
    """ctypes.CDLL of the real NCCL, by full path and by name: under the
    preload the handle is libnccltrace.so's (interpose/dlopen.c) and its
    ncclGetVersion answers the real library's version; without it, the real
    library's own handle."""
    real = ENV.get("real_nccl")
    if not real or not os.path.exists(real):
        print("SKIP: no real libnccl.so.2")
        sys.exit(77)
    code = ("import ctypes, sys\n"
            "n = ctypes.CDLL(sys.argv[1])\n"
            "v = ctypes.c_int()\n"
            "print(n.ncclGetVersion(ctypes.byref(v)), v.value, hasattr(n, 'nccltrace_version'))\n")
    for lib in (real, "libnccl.so.2"):
        got = []
        for pre in (False, True):
            env = base_env(preload=pre, emu=False)
            env["LD_LIBRARY_PATH"] = os.path.dirname(real)
            p = subprocess.run([sys.executable, "-c", code, lib], env=env, capture_output=True, text=True, timeout=60)
            check(p.returncode == 0, "%s (preload %s): %s" % (lib, pre, p.stderr[-400:]))
            got.append(p.stdout.split())
        check(len(got[0]) == 3 and got[0][0] == "0" and int(got[0][1]) > 0 and got[0][2] == "False",
              "%s untraced: %s" % (lib, got[0]))
        check(got[1] == [got[0][0], got[0][1], "True"],
              "%s under the preload: %s (untraced %s): not our handle, or not the real version" % (lib, got[1], got[0]))


def t_real():
    if not ENV.get("real_prog") or not os.path.exists(ENV["real_prog"]):
        print("SKIP: no real libnccl.so.2")
        sys.exit(77)
    outs = []
    for pre in (False, True):
        env = base_env(preload=pre, emu=False)
        p = subprocess.run([ENV["real_prog"]], env=env, capture_output=True, text=True, timeout=120)
        outs.append((p.returncode, p.stdout))
    check(outs[0] == outs[1], "real NCCL results differ under nccltrace: %s vs %s" % (outs[0], outs[1]))
    check("ncclGetVersion=0" in outs[0][1] and "ncclGetUniqueId=0" in outs[0][1], "unexpected %s" % outs[0][1])
    f = dumps("*-exit")
    check(len(f) == 1, "dumps: %s" % dumps())
    d = decode(f[0])
    init = [x for x in d["records"] if x["kind"] == "CommInitRank" and x["phase"] == "exit"]
    m = re.search(r"ncclCommInitRank=(\d+)", outs[0][1])
    check(init and m, "no CommInitRank exit record")
    check(d["header"]["nccl_version"] > 0, "nccl_version not recorded")


def t_exports():
    p = subprocess.run(["nm", "-D", "--defined-only", ENV["lib"]], capture_output=True, text=True)
    check(p.returncode == 0, "nm failed: %s" % p.stderr)
    got = {ln.split()[-1] for ln in p.stdout.splitlines() if ln.strip()}
    rows = re.findall(r"^NT_(?:COLL|P2P|GROUP|LIFE|COLL_CFG)\((\w+),", open(ENV["def"]).read(), re.M)
    # forwarders for drop-in mode (interpose/nccl_passthrough.def)
    interpose_dir = os.path.join(os.path.dirname(os.path.dirname(ENV["def"])), "interpose")
    passdef = os.path.join(interpose_dir, "nccl_passthrough.def")
    # (the name is the argument followed by the parameter list; a failure
    # value may hold commas)
    passrows = re.findall(r"^NT_PASS(\w*)\(.*?\b(nccl[A-Z][A-Za-z0-9]*),\s*\((?!\()", open(passdef).read(), re.M | re.S)
    # every NCCL name also has its pnccl* profiling alias, except the NOALIAS rows
    aliased = rows + [n for cls, n in passrows if cls != "_VOID_NOALIAS"]
    rows += [n for _, n in passrows] + ["p" + n for n in aliased]
    # the CUDA graph entry points (interpose/cuda_graph.def)
    graphdef = os.path.join(interpose_dir, "cuda_graph.def")
    rows += re.findall(r"^NTG\((\w+),", open(graphdef).read(), re.M)
    # the profiler plugin's tables (interpose/profiler.c), one per version NCCL looks for
    rows += ["ncclProfiler_v%d" % v for v in range(1, 7)]
    want = set(rows) | {"nccltrace_mark", "nccltrace_dump", "nccltrace_version", "nccltrace_enabled",
                        "sigaction", "signal", "_exit", "_Exit", "execve", "execv", "execvp", "execvpe",
                        "execl", "execlp", "execle", "fexecve", "execveat", "dlopen"}
    check(got == want, "exported symbols differ: extra %s missing %s" % (sorted(got - want), sorted(want - got)))


def t_nested():
    env = base_env(emu=False)
    env["LD_LIBRARY_PATH"] = ENV["nested"]
    p = subprocess.run([ENV["nested_prog"]], env=env, capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and "nested done" in p.stdout, "nested program failed: %s" % p.stderr)
    m = re.search(r"parent (\d+) child (\d+)", p.stdout)
    parent, child = int(m.group(1)), int(m.group(2))
    d = decode(dump_of(parent, "exit"))
    kinds = [x["kind"] for x in calls(d)]
    check(kinds.count("Bcast") == 3, "Bcast records: %d" % kinds.count("Bcast"))
    check(kinds.count("Broadcast") == 0, "the nested ncclBroadcast was recorded")
    check(not [x for x in d["records"] if x["kind"] == "CommGetAsyncError"], "GetAsyncError recorded")
    known = [x for x in calls(d) if x["kind"] in COLL and x["comm"]]
    check([x["seq"] for x in known] == [1, 2, 3, 4, 5, 6], "collective seqs wrong: %s" % [x["seq"] for x in known])
    unknown = [x for x in calls(d) if x["kind"] in COLL and not x["comm"]]
    check(len(unknown) == 1 and unknown[0]["rank"] == -1 and unknown[0]["seq"] == 0 and
          unknown[0]["result"] == "ncclSuccess", "op on an unknown comm: %s" % unknown)
    check(d["header"]["pid"] == parent, "parent dump pid %s" % d["header"]["pid"])
    # the fork child: its own dump with its own calls, none in the parent's
    c = decode(dump_of(child, "exit"))
    ck = [(x["kind"], x["seq"]) for x in calls(c) if x["kind"] in COLL]
    check(ck == [("AllReduce", 1), ("AllReduce", 2)], "fork child records %s" % ck)
    check(c["header"]["pid"] == child and c["header"]["ppid"] == parent, "child header %s" % c["header"])
    check(not [x for x in calls(d) if x["kind"] == "AllReduce" and x["dtype"] == "int32"],
          "the child's records landed in the parent's ring")


def t_config():
    # a value that does not parse: one `nccltrace:` line naming it, default used
    env = base_env(emu=False)
    env["LD_LIBRARY_PATH"] = ENV["nested"]
    env["NCCLTRACE_RING"] = "lots"
    env["NCCLTRACE_TIMEOUT"] = "-3"
    p = subprocess.run([ENV["nested_prog"]], env=env, capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, "nested program failed: %s" % p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if "NCCLTRACE_RING=" in ln or "NCCLTRACE_TIMEOUT=" in ln]
    check(len(lines) == 2 and all(ln.startswith("nccltrace: ") for ln in lines),
          "bad values not reported once each: %s" % p.stderr)
    parent = int(re.search(r"parent (\d+)", p.stdout).group(1))
    d = decode(dump_of(parent, "exit"))
    check(d["header"]["slot_count"] == 65536, "slot_count %s" % d["header"]["slot_count"])
    # a valid size is rounded up to a power of two
    shutil.rmtree(os.path.join(TMP, "dumps"), ignore_errors=True)
    env["NCCLTRACE_RING"] = "100"
    del env["NCCLTRACE_TIMEOUT"]
    p = subprocess.run([ENV["nested_prog"]], env=env, capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and "nccltrace: NCCLTRACE" not in p.stderr, "NCCLTRACE_RING=100: %s" % p.stderr)
    parent = int(re.search(r"parent (\d+)", p.stdout).group(1))
    check(decode(dump_of(parent, "exit"))["header"]["slot_count"] == 128, "NCCLTRACE_RING=100 not rounded to 128")


def t_config_once():
    # Every rank reads the same bad settings: when the launcher rank is
    # known, only rank 0 says so; a process of unknown rank says it itself.
    # A bad NCCLTRACE_COORD is said at once, naming the value and why.
    env = base_env(emu=False)
    env["LD_LIBRARY_PATH"] = ENV["nested"]
    env["NCCLTRACE_TIMEOUT"] = "-3"
    env["NCCLTRACE_COORD"] = "coordhost"
    for k in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "LOCAL_RANK",
              "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_LOCAL_RANK", "SLURM_LOCALID"):
        env.pop(k, None)
    said = {}
    for var, rank in (("RANK", "0"), ("RANK", "1"), ("RANK", "3"), ("SLURM_PROCID", "2"), ("LOCAL_RANK", "1"),
                      (None, None)):
        e = dict(env)
        if var:
            e[var] = rank
        t = time.time()
        p = subprocess.run([ENV["nested_prog"]], env=e, capture_output=True, text=True, timeout=60)
        took = time.time() - t
        check(p.returncode == 0, "nested program failed: %s" % p.stderr)
        lines = [ln for ln in p.stderr.splitlines() if "NCCLTRACE_TIMEOUT=" in ln or "NCCLTRACE_COORD=" in ln]
        said[(var, rank)] = lines
        if var is None or rank == "0":
            coord = [ln for ln in lines if "NCCLTRACE_COORD=" in ln]
            check(len(lines) == 2 and len(coord) == 1 and '"coordhost"' in coord[0] and 'no ":port"' in coord[0],
                  "%s=%s: both bad values said once, COORD naming value and why: %s" % (var, rank, p.stderr))
            check(took < 8, "the COORD line came at once (the run took %.1f s)" % took)
        else:
            check(lines == [], "%s=%s: rank %s stays quiet: %s" % (var, rank, rank, lines))
    # A good value stays quiet and is used.
    e = dict(env, NCCLTRACE_COORD="127.0.0.1:1", RANK="0")
    del e["NCCLTRACE_TIMEOUT"]
    p = subprocess.run([ENV["nested_prog"]], env=e, capture_output=True, text=True, timeout=60)
    check("NCCLTRACE_COORD=" not in p.stderr, "a good NCCLTRACE_COORD is not reported: %s" % p.stderr)


def t_recent():
    # NCCLTRACE_RING=64 and 300 calls on a second comm: the main ring keeps
    # only the noise, the first comm's calls survive in its recent[] (copied
    # there by the watchdog, not by the wrappers)
    env = base_env(emu=False)
    env["LD_LIBRARY_PATH"] = ENV["nested"]
    env["NCCLTRACE_RING"] = "64"
    env["NESTED_NOISE"] = "300"
    p = subprocess.run([ENV["nested_prog"]], env=env, capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, "nested program failed: %s" % p.stderr)
    parent = int(re.search(r"parent (\d+)", p.stdout).group(1))
    d = decode(dump_of(parent, "exit"))
    check(d["header"]["lost"] > 0, "the ring did not wrap (lost %s)" % d["header"]["lost"])
    ar = [x for x in calls(d) if x["kind"] in COLL and x["comm"]]
    first = ar[0]["comm"]
    mine = [(x["kind"], x["seq"], x["result"]) for x in ar if x["comm"] == first]
    want = [("Bcast", 1, "ncclSuccess"), ("Bcast", 2, "ncclSuccess"), ("Bcast", 3, "ncclSuccess"),
            ("AllReduce", 4, "ncclSuccess"), ("AllReduce", 5, "ncclSuccess"),
            ("AllReduce", 6, "ncclSuccess")]
    check(mine == want, "first comm's history after the ring wrapped: %s" % mine)


def t_incall():
    # a collective that blocks inside the call (NCCL connecting to a peer
    # that never answers): the watchdog times it out like a lifecycle call
    env = base_env(emu=False)
    env["LD_LIBRARY_PATH"] = ENV["nested"]
    env["NOOP_BLOCK_AT"] = "1"  # the first ncclAllReduce: collective seq 4
    env["NCCLTRACE_TIMEOUT"] = "1"
    p = subprocess.run([ENV["nested_prog"]], env=env, capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and "nested done" in p.stdout, "nested program failed: %s" % p.stderr)
    parent = int(re.search(r"parent (\d+)", p.stdout).group(1))
    m = re.search(r"nccltrace: timeout: comm ([0-9a-f]{16}) rank 0 seq 4 AllReduce not complete after \d+ s", p.stderr)
    check(m, "no in-call timeout line: %s" % p.stderr)
    d = decode(dump_of(parent, "timeout"))
    c = [x for x in d["comms"] if x["id"] == m.group(1)][0]
    check(c["blocked_kind"] == "AllReduce" and c["coll_seq"] == 4 and c["last_enqueued"] == 3,
          "comm state in the timeout dump: %s" % c)


def t_burst():
    # 1,100 collectives in bursts of 100 (each burst takes more completion
    # and start events than a comm's pool holds between two watchdog
    # polls), then #1101 stalls on every rank, issued right after the last
    # burst: each rank still times it out, and still saw #1100 complete
    n = 3
    env = base_env()
    env["NCCLTRACE_TIMEOUT"] = "1"
    procs = start_ranks("manyops", n, env, {"NCCLEMU_FAULT": "stall:1101", "RANK_OPS": "1100"})
    try:
        deadline = time.time() + 20
        got = {}
        while time.time() < deadline and len(got) < n:
            for r, p in enumerate(procs):
                f = next(iter(dumps("*-%d-*-timeout" % p.pid)), None)
                if f:
                    got[r] = f
            time.sleep(0.2)
        time.sleep(0.3)  # the dump is renamed into place complete
    finally:
        kill_all(procs)
    check(len(got) == n, "timeout dumps from ranks %s of %d within 20 s" % (sorted(got), n))
    for r in range(n):
        d = decode(got[r])
        check("seq 1101 AllReduce" in d["trigger"]["reason"], "rank %d trigger %s" % (r, d["trigger"]))
        c = d["comms"][0]
        check(c["last_enqueued"] == 1101 and c["last_completed"] == 1100,
              "rank %d comm state: enqueued %s completed %s" % (r, c["last_enqueued"], c["last_completed"]))
        ar = [x for x in calls(d) if x["kind"] == "AllReduce"]
        check(len(ar) == 1101 and not ar[-1]["completed"] and "no_tracking" not in ar[-1]["flags"],
              "rank %d: %d AllReduce records, the last %s" % (r, len(ar), ar[-1] if ar else None))


def free_port():
    import socket
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


def t_strict():
    # NCCLTRACE_CHECK=strict with a standalone coordinator: a collective and
    # a group the ranks disagree on are refused (ncclInvalidUsage, nothing
    # enqueued: the job does not hang), agreed ones run
    port = free_port()
    cenv = dict(os.environ, NCCLTRACE_SECRET="nti-strict-test")
    coord = subprocess.Popen([ENV["tool"], "coord", "--listen", "127.0.0.1:%d" % port], env=cenv,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.3)
        if coord.poll() is not None:
            fail("coordinator did not start: %s" % coord.stderr.read())
        env = base_env()
        env.update(NCCLTRACE_CHECK="strict", NCCLTRACE_COORD="127.0.0.1:%d" % port,
                   NCCLTRACE_SECRET="nti-strict-test", NCCLTRACE_STRICT_TIMEOUT="8")
        res = finish(start_ranks("strict", 2, env), timeout=45)
    finally:
        coord.terminate()
        try:
            coord.communicate(timeout=10)
        except Exception:
            coord.kill()
    for r, (rc, o, e) in enumerate(res):
        check(rc == 0, "rank %d exited %d: %s" % (r, rc, e))
        check("strict single 5" in o and "strict group 5" in o and "strict after ok" in o,
              "rank %d: refused calls did not return ncclInvalidUsage: %r %s" % (r, o, e))
        check(e.count("nccltrace: strict:") == 2, "rank %d: strict messages: %s" % (r, e))
    for f in dumps("*-exit"):
        d = decode(f)
        blocks = [x for x in d["records"] if x["kind"] == "StrictBlock"]
        check(len(blocks) == 2, "StrictBlock records: %d" % len(blocks))
        refused = [x for x in calls(d) if x["kind"] == "AllReduce" and x["result"] == "ncclInvalidUsage"]
        check([x["seq"] for x in refused] == [2, 3], "refused seqs %s" % [x["seq"] for x in refused])


def t_dropin():
    for real in (None, os.path.join(ENV["emu"], "libnccl.so.2")):
        shutil.rmtree(os.path.join(TMP, "dumps"), ignore_errors=True)
        env = base_env(preload=False)
        if real:
            env["NCCLTRACE_REAL_NCCL"] = real
            env["LD_LIBRARY_PATH"] = ENV["emu"]  # cudart/cuda only; NCCL via the variable
        p = subprocess.run([ENV["dropin_prog"], ENV["lib"]], env=env, capture_output=True, text=True, timeout=60)
        check(p.returncode == 0 and "dropin ok" in p.stdout and "enabled=1" in p.stdout,
              "drop-in run failed (REAL_NCCL=%s): %s %s" % (real, p.stdout, p.stderr))
        f = dumps("*-exit")
        check(len(f) == 1, "dumps: %s" % dumps())
        d = decode(f[0])
        ar = [x for x in calls(d) if x["kind"] == "AllReduce"]
        check(len(ar) == 3 and all(x["result"] == "ncclSuccess" for x in ar), "drop-in records %s" % ar)


def t_newer():
    """NCCL 2.32's additions on 2 ranks (tests/interpose/newer.c): each
    nccl*Config collective is recorded as its plain twin -- same kind name,
    the comm's next seq, the twin's fingerprint -- and the comm-life calls
    each leave an ENTER and an EXIT on the comm."""
    n = 2
    iddir = tempfile.mkdtemp(prefix="ids-", dir=TMP)
    procs = [subprocess.Popen([ENV["newer"], str(r), str(n), iddir], env=dict(base_env(), RANK=str(r), WORLD_SIZE=str(n)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(n)]
    res = finish(procs)
    fps = []
    for r, (rc, o, e) in enumerate(res):
        check(rc == 0, "rank %d exited %d: %s" % (r, rc, e))
        check("grow %d" % 5 in e, "rank %d: the emulator's ncclCommGrow did not answer ncclInvalidUsage: %s" % (r, e))
        d = None
        for f in dumps("*-exit"):
            dd = decode(f)
            if dd["header"]["rank"] == r:
                d = dd
        check(d is not None, "no exit dump for rank %d" % r)
        expect = [ln.split() for ln in o.splitlines() if ln.strip()]
        recs = [x for x in calls(d) if x["kind"] in COLL]
        check(len(recs) == len(expect), "rank %d: %d collective records, program made %d: %s" %
              (r, len(recs), len(expect), [(x["kind"], x["seq"]) for x in recs]))
        comm = recs[0]["comm"]
        for i, (x, ex) in enumerate(zip(recs, expect)):
            check(x["kind"] == ex[0] and str(x["count"]) == ex[1] and x["dtype"] == ex[2],
                  "rank %d call %d: record %s %s %s, program %s" % (r, i, x["kind"], x["count"], x["dtype"], ex))
            check(x["redop"] == (None if ex[3] == "-" else ex[3]) and x["root"] == (None if ex[4] == "-" else int(ex[4])),
                  "rank %d call %d %s: redop %s root %s, program %s" % (r, i, x["kind"], x["redop"], x["root"], ex))
            check(x["comm"] == comm and x["seq"] == i + 1,
                  "rank %d call %d %s: comm %s seq %s, expected seq %d" % (r, i, x["kind"], x["comm"], x["seq"], i + 1))
            check(x["result"] == "ncclSuccess" and x["completed"], "rank %d call %d %s: %s completed %s" %
                  (r, i, x["kind"], x["result"], x["completed"]))
            check(x["fp"], "rank %d call %d %s: no fingerprint" % (r, i, x["kind"]))
        # calls 2k (plain) and 2k+1 (its Config twin, same arguments)
        for k in range(8):
            check(recs[2 * k]["fp"] == recs[2 * k + 1]["fp"],
                  "rank %d: %sConfig fingerprints %s, its twin %s" %
                  (r, recs[2 * k]["kind"], recs[2 * k + 1]["fp"], recs[2 * k]["fp"]))
        check("in_group" in recs[16]["flags"] and recs[16]["fp"] == recs[17]["fp"],
              "rank %d: the grouped AllReduceConfig %s" % (r, recs[16]))
        fps.append([x["fp"] for x in recs])
        life = {}
        for x in d["records"]:
            if x["kind"] in ("CommGetUniqueId", "CommSuspend", "CommResume", "CommGrow"):
                life.setdefault(x["kind"], []).append(x)
        for kind in ("CommSuspend", "CommResume", "CommGrow") + (("CommGetUniqueId",) if r == 0 else ()):
            got = life.get(kind, [])
            check([x["phase"] for x in got] == ["enter", "exit"] and all(x["comm"] == comm for x in got),
                  "rank %d: %s records %s" % (r, kind, [(x["phase"], x["comm"]) for x in got]))
        check(r == 0 or "CommGetUniqueId" not in life, "rank %d: a CommGetUniqueId it never called" % r)
        check(life["CommSuspend"][0]["aux"] == 1, "rank %d: suspend flags %s" % (r, life["CommSuspend"][0]["aux"]))
        check(life["CommGrow"][1]["result"] == "ncclInvalidUsage", "rank %d: grow %s" % (r, life["CommGrow"][1]))
        if r == 0:
            check(life["CommGetUniqueId"][1]["aux"] != 0 and life["CommGetUniqueId"][1]["result"] == "ncclSuccess",
                  "rank 0: CommGetUniqueId exit %s" % life["CommGetUniqueId"][1])
    check(fps[0] == fps[1], "fingerprints differ across ranks: %s" % fps)


TESTS = {n[2:]: f for n, f in globals().items() if n.startswith("t_")}


def main():
    global TMP
    if len(sys.argv) != 2 or sys.argv[1] not in TESTS:
        print("usage: interpose_e2e.py {%s}" % ",".join(sorted(TESTS)), file=sys.stderr)
        return 1
    for k in ("lib", "emu", "tool", "rank", "newer", "def", "real_prog", "real_nccl", "nested", "nested_prog",
              "dropin_prog"):
        ENV[k] = os.environ.get("NTI_TEST_" + k.upper(), "")
    if os.environ.get("NTI_TEST_SANITIZED", "none") not in ("", "none"):
        print("SKIP: LD_PRELOAD of a sanitizer-built libnccltrace.so into other programs")
        return 77
    if not ENV["tool"] or not os.path.exists(ENV["tool"]):
        print("SKIP: nccltrace tool not built")
        return 77
    TMP = tempfile.mkdtemp(prefix="nti-" + sys.argv[1] + "-")
    try:
        TESTS[sys.argv[1]]()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    print("PASS " + sys.argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""stress.py -- reliability and security tests of nccltrace (tests/stress).

  stress.py TEST [ARGS]     paths come from STRESS_* (tests/stress/meson.build)

Each test runs tests/stress/stress_prog on the CPU emulator, traced
(LD_PRELOAD=libnccltrace.so) and where it matters untraced, then judges what
the tracer left with `nccltrace decode --json` / `collect` / `analyze`.
docs/reliability.md lists what each test proves.  Figures a test measured are
printed as "FIGURE name=value" lines (run-long.sh collects them).

Exit: 0 pass, 1 fail, 77 skip.  Every process a test starts is killed and its
temporary directory removed before it returns.
"""
import glob
import json
import os
import random
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

E = {}
TMP = None
PROCS = []


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def figure(name, value):
    print("FIGURE %s=%s" % (name, value), flush=True)


def base_env(preload=True, tmp=None):
    tmp = tmp or TMP
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("NCCLTRACE_") or k.startswith("STRESS_") or k in ("LD_PRELOAD", "NCCLEMU_FAULT"):
            del env[k]
    env["LD_LIBRARY_PATH"] = E["emu"] + ":" + os.path.dirname(E["prog"])
    env["NCCLEMU_DEVICES"] = "8"
    if preload:
        env["LD_PRELOAD"] = E["lib"]
    env["NCCLTRACE_RING_DIR"] = os.path.join(tmp, "rings")
    env["NCCLTRACE_DIR"] = os.path.join(tmp, "dumps")
    env["NCCLTRACE_CHECK"] = "off"
    return env


def spawn(args, env, **kw):
    if len(args) > 3 and os.path.basename(args[0]) == "stress_prog":
        env = dict(env)
        env.update(RANK=args[2], LOCAL_RANK=args[2], WORLD_SIZE=args[3], LOCAL_WORLD_SIZE=args[3])
    p = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    PROCS.append(p)
    return p


def kill_all():
    for p in PROCS:
        if p.poll() is None:
            p.kill()
    for p in PROCS:
        try:
            p.communicate(timeout=10)
        except Exception:
            pass
    del PROCS[:]


def run_prog(mode, rank, nranks, iddir, args, env, timeout=60):
    p = spawn([E["prog"], mode, str(rank), str(nranks), iddir] + [str(a) for a in args], env)
    try:
        o, e = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_all()
        fail("%s rank %d did not finish within %d s (deadlock?)" % (mode, rank, timeout))
    return p.returncode, o, e


def tool(*args, timeout=120):
    return subprocess.run([E["tool"]] + list(args), capture_output=True, text=True, timeout=timeout)


def decode(path, salvage=False):
    args = ["decode", "--json", path] + (["--salvage"] if salvage else [])
    p = tool(*args)
    check(p.returncode == 0, "nccltrace decode %s failed (%d): %s" % (path, p.returncode, p.stderr.strip()))
    return json.loads(p.stdout)


def files_in(sub, pattern="*"):
    return sorted(glob.glob(os.path.join(TMP, sub, pattern)))


def ncc_lines(err):
    return [ln for ln in err.splitlines() if ln.startswith("nccltrace:")]


def mkdtemp(prefix):
    return tempfile.mkdtemp(prefix=prefix, dir=TMP)


# ------------------------------------------------------------------ kill --
# The formula of tests/stress/stress_expect.h.
DT = {2: "int32", 7: "float32"}
RO = {0: "sum", 2: "max"}


def expect(t, seq, nranks):
    bcast = seq % 3 == 0
    count = 1 + (seq * 131 + t * 977) % 1024
    dtype = DT[7 if seq % 2 else 2]
    if bcast:
        return ("Broadcast", count, dtype, None, (seq // 3) % nranks)
    return ("AllReduce", count, dtype, RO[2 if seq % 4 == 1 else 0], None)


def thread_of(rec, nthreads, nranks):
    """The load thread whose call #seq has exactly this record's fields, or None."""
    for t in range(nthreads):
        kind, count, dtype, redop, root = expect(t, rec["seq"], nranks)
        if (rec["kind"] == kind and rec["count"] == count and rec["dtype"] == dtype and
                rec["redop"] == redop and rec["root"] == root):
            return t
    return None


def check_ring(path, rank, nranks, nthreads, acks, stats):
    d = decode(path)
    h = d["header"]
    check(h["rank"] == rank, "%s: header rank %s, expected %d" % (path, h["rank"], rank))
    check(h["lost"] == 0, "%s: %d records overwritten; the trial is too long for the ring" % (path, h["lost"]))
    stats["torn"] += h["torn"]
    comm_of = {}
    seqs = {}
    for r in d["records"]:
        if r["kind"] not in ("AllReduce", "Broadcast"):
            continue
        stats["records"] += 1
        # a record the decoder reports as valid must be self-consistent
        t = thread_of(r, nthreads, nranks)
        check(t is not None, "%s: record pos %d (%s seq %s count %s %s) matches no call the program made: torn?"
              % (path, r["pos"], r["kind"], r["seq"], r["count"], r["dtype"]))
        check(r["rank"] == rank and r["nranks"] == nranks and r["comm"],
              "%s: record pos %d: rank %s/%s comm %s" % (path, r["pos"], r["rank"], r["nranks"], r["comm"]))
        check(r["phase"] == "call", "%s: record pos %d phase %s" % (path, r["pos"], r["phase"]))
        check(comm_of.setdefault(t, r["comm"]) == r["comm"],
              "%s: thread %d's calls on two comms %s %s" % (path, t, comm_of[t], r["comm"]))
        check(r["result"] in ("ncclSuccess", None),
              "%s: record pos %d result %s" % (path, r["pos"], r["result"]))
        s = seqs.setdefault(t, set())
        check(r["seq"] not in s, "%s: thread %d seq %d recorded twice" % (path, t, r["seq"]))
        s.add(r["seq"])
    check(len(set(comm_of.values())) == len(comm_of), "%s: threads share a comm id: %s" % (path, comm_of))
    for t in range(nthreads):
        got = seqs.get(t, set())
        acked = acks.get(t, [])
        if acked:
            check(acked == list(range(1, len(acked) + 1)), "rank %d thread %d: acks out of order" % (rank, t))
        top = max(got) if got else 0
        # no hole: the ring holds seq 1..top, and every acknowledged call
        missing = sorted(set(range(1, top + 1)) - got)
        check(not missing, "%s: thread %d: seqs %s missing below %d" % (path, t, missing[:10], top))
        lost = [s for s in acked if s not in got]
        stats["lost"] += len(lost)
        check(not lost, "%s: thread %d: %d acknowledged calls not in the ring (first %s)"
              % (path, t, len(lost), lost[:5]))
        stats["acked"] += len(acked)
        # a call acknowledged by the program had returned: its result is stored
        byseq = {r["seq"]: r for r in d["records"] if r["kind"] in ("AllReduce", "Broadcast")
                 and thread_of(r, nthreads, nranks) == t}
        for s in acked:
            check(byseq[s]["result"] == "ncclSuccess",
                  "%s: thread %d seq %d returned but its record says %s" % (path, t, s, byseq[s]["result"]))
        stats["inflight"] += top - len(acked)


def t_kill(ntrials="10"):
    ntrials = int(ntrials)
    nranks, nthreads = 4, 3
    rng = random.Random(int(os.environ.get("STRESS_SEED", str(int(time.time())))))
    stats = {"records": 0, "acked": 0, "lost": 0, "torn": 0, "inflight": 0, "survivor_dumps": 0}
    t0 = time.time()
    for trial in range(ntrials):
        tdir = mkdtemp("trial-")
        env = base_env(tmp=tdir)
        iddir = os.path.join(tdir, "ids")
        ackdir = os.path.join(tdir, "acks")
        os.makedirs(iddir)
        os.makedirs(ackdir)
        procs = [spawn([E["prog"], "load", str(r), str(nranks), iddir, str(nthreads), "0", ackdir], env)
                 for r in range(nranks)]
        for r, p in enumerate(procs):
            line = p.stdout.readline()
            if line.strip() != "ready":
                kill_all()
                fail("trial %d rank %d did not start: %r" % (trial, r, line))
        # a random point of the run: a random delay, then each rank killed at
        # its own random moment (one first, the others while it is dead)
        time.sleep(rng.uniform(0.0, 0.6))
        order = list(range(nranks))
        rng.shuffle(order)
        for r in order:
            procs[r].send_signal(signal.SIGKILL)
            time.sleep(rng.uniform(0.0, 0.02))
        for p in procs:
            p.wait(timeout=20)
            check(p.returncode == -signal.SIGKILL, "trial %d: rank exited %s before the kill" % (trial, p.returncode))
        kill_all()
        rings = sorted(glob.glob(os.path.join(tdir, "rings", "*.ring")))
        check(len(rings) == nranks, "trial %d: %d ring files: %s" % (trial, len(rings), rings))
        # a rank that outlived a killed peer by a few ms may have seen the
        # peer's death (ncclRemoteError) and dumped: that is evidence, not a
        # dump of a SIGKILLed process
        for f in glob.glob(os.path.join(tdir, "dumps", "*.zst")):
            trig = decode(f)["trigger"]["kind"]
            check(trig in ("async_error", "timeout", "peer_lost"), "trial %d: unexpected %s dump %s" % (trial, trig, f))
            stats["survivor_dumps"] += 1
        byrank = {}
        for f in rings:
            byrank[decode(f)["header"]["rank"]] = f
        for r in range(nranks):
            check(r in byrank, "trial %d: no ring of rank %d" % (trial, r))
            acks = {}
            for t in range(nthreads):
                try:
                    with open(os.path.join(ackdir, "ack-%d-%d" % (r, t))) as f:
                        acks[t] = [int(x) for x in f.read().split()]
                except FileNotFoundError:
                    acks[t] = []
            check_ring(byrank[r], r, nranks, nthreads, acks, stats)
        # collect turns the dead rings into dumps that say the same
        if trial == 0:
            p = tool("collect", "--rings", os.path.join(tdir, "rings"), "--dir", os.path.join(tdir, "coll"))
            check(p.returncode == 0, "collect failed: %s" % p.stderr)
            check(len(glob.glob(os.path.join(tdir, "coll", "*.zst"))) == nranks, "collect made %s" %
                  os.listdir(os.path.join(tdir, "coll")))
        shutil.rmtree(tdir, ignore_errors=True)
    print("kill: %d trials x %d ranks in %.1f s: %d records checked, %d acknowledged calls, %d lost, "
          "%d torn slots skipped, %d calls in flight at the kill, %d async-error dumps by survivors"
          % (ntrials, nranks, time.time() - t0, stats["records"], stats["acked"], stats["lost"],
             stats["torn"], stats["inflight"], stats["survivor_dumps"]))
    figure("kill_trials", ntrials)
    figure("kill_rings", ntrials * nranks)
    figure("kill_acked", stats["acked"])
    figure("kill_records", stats["records"])
    figure("kill_lost", stats["lost"])
    figure("kill_torn_reported_valid", 0)



# -------------------------------------------------------------- overflow --
def load_run(ring, nthreads, iters, extra_env=None):
    """One rank of load mode to its normal exit; returns the exit dump, decoded."""
    shutil.rmtree(os.path.join(TMP, "dumps"), ignore_errors=True)
    env = base_env()
    if ring:
        env["NCCLTRACE_RING"] = str(ring)
    env.update(extra_env or {})
    rc, o, e = run_prog("load", 0, 1, mkdtemp("ids-"), [nthreads, iters, mkdtemp("acks-")], env)
    check(rc == 0, "load run (ring %s) exited %s: %s" % (ring, rc, e))
    f = files_in("dumps", "*-exit.zst")
    check(len(f) == 1, "exit dumps: %s" % f)
    return decode(f[0])


# Positions reserved and never used (recorder/ring.h: a thread's block of
# positions, 1/64 of the ring up to 64; the rest of a block is given up when
# a reader fills it, when a communicator moves to another thread, and at
# exit): a few blocks' worth.
def unused_max(slots):
    return 8 * max(1, min(64, slots // 64))


def t_overflow():
    for nthreads, iters in ((1, 1000), (3, 400)):
        big = load_run(0, nthreads, iters)
        check(big["header"]["lost"] == 0, "default ring lost records")
        check(big["header"]["torn"] == 0, "default ring: %d torn slots" % big["header"]["torn"])
        # every record the program made; positions a thread reserved in its
        # block and did not use hold none (recorder/ring.h, holes and fillers)
        total = len(big["records"])
        ncoll = len([r for r in big["records"] if r["kind"] in ("AllReduce", "Broadcast")])
        ndev = len([r for r in big["records"] if r["kind"] == "DeviceArrive"])
        check(ncoll == nthreads * iters, "default ring: %d collectives, made %d" % (ncoll, nthreads * iters))
        for slots in (64, 256):
            d = load_run(slots, nthreads, iters)
            h = d["header"]
            pos = sorted(r["pos"] for r in d["records"])
            check(h["torn"] == 0, "ring %d: %d torn slots" % (slots, h["torn"]))
            # the same program makes the same records: all but the newest
            # were overwritten; lost also counts reserved, unused positions
            # DeviceArrive events are the watchdog's (one per start event it
            # saw complete): their number depends on timing, so this run's
            # own head, the Exit record's position + 1, is the reference
            head = max(pos) + 1
            check(head >= total - ndev, "ring %d: %d positions, the program made %d records"
                  % (slots, head, total - ndev))
            # lost counts overwritten records: the positions of skipped
            # blocks and the unused rest of released ones (hdr->unused) are
            # neither lost nor in the ring, a few blocks' worth either way
            check(head - slots - unused_max(slots) <= h["lost"] <= head - slots + unused_max(slots),
                  "ring %d: lost %d, but %d of %d records cannot fit" % (slots, h["lost"], head - slots, head))
            check(d["trigger"]["kind"] == "exit", "trigger %s" % d["trigger"])
            # the last lap: the slots' worth of positions below the head
            lap0 = head - slots
            inring = [p for p in pos if p >= lap0]
            holes = sorted(set(range(lap0, head)) - set(inring))
            check(len(holes) <= unused_max(slots), "ring %d: %d holes in the last lap" % (slots, len(holes)))
            print("overflow: ring %d: %d positions for %d records, %d unused in the last lap"
                  % (slots, head, total, len(holes)))
            # the ring keeps exactly the newest records: per comm, the seqs in
            # the last lap are the last ones made, without a gap
            per, allseqs = {}, {}
            for r in d["records"]:
                if r["kind"] in ("AllReduce", "Broadcast"):
                    # every record, from the ring or an older one kept in its
                    # comm's recent[], is intact
                    check(thread_of(r, nthreads, 1) is not None, "ring %d: record pos %d is not a call the "
                          "program made: %s" % (slots, r["pos"], r))
                    allseqs.setdefault(r["comm"], set()).add(r["seq"])
                    if r["pos"] >= lap0:
                        per.setdefault(r["comm"], []).append(r["seq"])
            # a thread's block may hold its newest records below the last
            # lap's start (positions follow claims, not time, across
            # threads): from the oldest seq seen in the last lap up to the
            # newest, every seq is somewhere in the dump.  One exception,
            # the documented bound of recent[] (docs/dump-format.md, "The
            # communicator's recent[]"): the watchdog copies a comm's
            # records at its next poll, so a comm whose thread finished
            # while the others still lapped this tiny ring within that poll
            # may lose its newest records -- only its tail, never a gap,
            # and never the comm of the last writer
            complete = 0
            for c, seqs in per.items():
                seqs.sort()
                missing = sorted(set(range(seqs[0], iters + 1)) - allseqs[c])
                tail = bool(missing) and missing[0] > max(allseqs[c]) and nthreads > 1
                check(not missing or tail, "ring %d comm %s: seqs %s..%s from the last lap on, %d missing (%s)"
                      % (slots, c, seqs[0], iters, len(missing), missing[:5]))
                complete += not missing
            check(not per or complete >= 1, "ring %d: no comm kept its newest records" % slots)
            print("overflow: %d thread(s) x %d calls, ring %d: %d records made, lost %d, retained %d in the ring"
                  " (+%d from comm recent[])" % (nthreads, iters, slots, total, h["lost"], len(inring),
                                                  len(pos) - len(inring)))
    figure("overflow_lost_bounded", 1)


# ----------------------------------------------------------- dump failure --
def collect_ring(what, ncoll_min):
    rings = files_in("rings", "*.ring")
    check(len(rings) == 1, "%s: the ring should stay for collect: %s" % (what, rings))
    out = mkdtemp("coll-")
    p = tool("collect", "--rings", os.path.join(TMP, "rings"), "--dir", out)
    check(p.returncode == 0, "%s: collect failed: %s" % (what, p.stderr))
    dd = glob.glob(os.path.join(out, "*.zst"))
    check(len(dd) == 1, "%s: collect made %s" % (what, dd))
    d = decode(dd[0])
    n = len([r for r in d["records"] if r["kind"] in ("AllReduce", "Broadcast")])
    check(n >= ncoll_min, "%s: collected dump holds %d collectives, want %d" % (what, n, ncoll_min))
    return d


def same_as_untraced(mode, args, extra_env, traced_env_fn=None):
    """Run untraced then traced; return both (rc, stdout, stderr)."""
    outs = []
    for pre in (False, True):
        env = base_env(preload=pre)
        env.update(extra_env)
        if pre and traced_env_fn:
            traced_env_fn(env)
        outs.append(run_prog(mode, 0, 1, mkdtemp("ids-"), args, env))
    check(outs[0][0] == outs[1][0], "%s %s: exit status %s untraced, %s traced (stderr %s)"
          % (mode, args, outs[0][0], outs[1][0], outs[1][2].strip()))
    check(outs[0][1] == outs[1][1], "%s %s: stdout %r untraced, %r traced" % (mode, args, outs[0][1], outs[1][1]))
    return outs


def dump_fail_lines(err):
    return [ln for ln in ncc_lines(err) if "cross-rank check off" not in ln]


def t_dump_dir():
    blocker = os.path.join(TMP, "not-a-dir")
    open(blocker, "w").close()

    def tenv(env):
        env["NCCLTRACE_DIR"] = os.path.join(blocker, "dumps")
    outs = same_as_untraced("load", [1, 200, ""], {}, tenv)
    lines = dump_fail_lines(outs[1][2])
    check(len(lines) == 1, "want one clear nccltrace: line about the failed dump, got %s" % lines)
    check("dump" in lines[0] and ("not-a-dir" in lines[0] or "Not a directory" in lines[0]),
          "the line does not say which directory and why: %s" % lines[0])
    d = collect_ring("unwritable dir", 200)
    check(d["header"]["proc_state"] == "exited" and d["header"]["exit_code"] == 0,
          "ring header after the failed exit dump: %s" % d["header"])
    print("dump_dir: %s" % lines[0])


def t_dump_full():
    # 0: nothing can be written; 8 KiB: the dump is cut in the middle
    for limit, n in ((0, 5), (8192, 3000)):
        for sub in ("rings", "dumps"):
            shutil.rmtree(os.path.join(TMP, sub), ignore_errors=True)
        outs = same_as_untraced("rlimit", [limit, n], {})
        check(outs[1][0] == 5 and "alive" in outs[1][1], "rlimit mode: %s" % (outs[1],))
        lines = dump_fail_lines(outs[1][2])
        check(len(lines) == 1 and "dump" in lines[0],
              "RLIMIT_FSIZE=%d: want one clear nccltrace: line about the failed dump, got %s" % (limit, lines))
        check(not files_in("dumps", "*.zst"), "a dump file was left under its final name: %s" % files_in("dumps"))
        d = collect_ring("RLIMIT_FSIZE", n + 5)
        check(d["header"]["exit_code"] == 5, "ring exit code %s" % d["header"]["exit_code"])
        print("dump_full: RLIMIT_FSIZE=%d: %s; leftovers %s" % (limit, lines[0], os.listdir(os.path.join(TMP, "dumps"))
                                                               if os.path.isdir(os.path.join(TMP, "dumps")) else []))


def t_dump_resignal():
    outcomes = []
    for seq_sigs in ((signal.SIGTERM, signal.SIGTERM, signal.SIGINT), (signal.SIGUSR1, signal.SIGTERM, signal.SIGTERM)):
        for sub in ("rings", "dumps"):
            shutil.rmtree(os.path.join(TMP, sub), ignore_errors=True)
        env = base_env()
        # 64 Ki records (8 MiB): the dump takes tens of ms, long enough for
        # signals 5 ms apart to arrive while it runs
        env["NCCLTRACE_RING"] = str(1 << 16)
        p = spawn([E["prog"], "marks", "0", "1", mkdtemp("ids-"), str(1 << 16)], env)
        line = p.stdout.readline()
        check(line.strip() == "ready", "marks mode: %r %s" % (line, p.stderr.read() if p.poll() is not None else ""))
        t0 = time.time()
        for sig in seq_sigs:
            p.send_signal(sig)
            time.sleep(0.005)
        try:
            o, e = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            kill_all()
            fail("signals %s during a dump: the process hung" % (seq_sigs,))
        took = time.time() - t0
        check(p.returncode == -signal.SIGTERM, "signals %s: exit status %s, expected death by SIGTERM (stderr %s)"
              % ([s.name for s in seq_sigs], p.returncode, e.strip()))
        # every dump under its final name is complete; the evidence is in a
        # dump or, when the dump did not finish, in the ring for collect
        complete = []
        for f in files_in("dumps", "*.zst"):
            complete.append(decode(f))
        marks = 0
        for d in complete:
            marks = max(marks, len([r for r in d["records"] if r["kind"] == "Mark"]))
        rings = files_in("rings", "*.ring")
        if rings:
            d = collect_ring("dump interrupted", 3)
            marks = max(marks, len([r for r in d["records"] if r["kind"] == "Mark"]))
        check(marks > 0, "no evidence left: dumps %s rings %s" % (files_in("dumps"), rings))
        outcomes.append("%s: died of SIGTERM after %.2f s, %d complete dump(s), ring %s, %d marks kept"
                        % ("+".join(s.name for s in seq_sigs), took, len(complete),
                           "left" if rings else "removed", marks))
    for x in outcomes:
        print("dump_resignal: " + x)


# --------------------------------------------------------------- signals --
# Combinations known to differ traced and untraced (docs/reliability.md
# lists them); `signals known` runs only these (suite stress-known).  Empty:
# every combination must behave the same traced and untraced.
KNOWN_SIGNALS = set()


def t_signals(which="fixed"):
    ran = 0
    bad = []
    for sig in ("TERM", "INT", "SEGV", "USR1"):
        for when in ("early", "after"):
            for behav in ("exit", "return", "reset", "default", "ignore"):
                if sig == "USR1" and behav == "default":
                    continue  # design §6: SIGUSR1 = dump and continue (its default would kill)
                if ((sig, behav) in KNOWN_SIGNALS) != (which == "known"):
                    continue
                extra = {}
                if when == "early":
                    extra = {"STRESS_EARLY_SIG": sig, "STRESS_EARLY_BEHAV": behav}
                outs = []
                for pre in (False, True):
                    env = base_env(preload=pre)
                    env.update(extra)
                    outs.append(run_prog("signal", 0, 1, mkdtemp("ids-"), [sig, when, behav], env, timeout=30))
                what = "SIG%s %s %s" % (sig, when, behav)
                if outs[0][0] != outs[1][0]:
                    bad.append("%s: exit status %s untraced, %s traced" % (what, outs[0][0], outs[1][0]))
                elif outs[0][1] != outs[1][1]:
                    bad.append("%s: stdout %r untraced, %r traced" % (what, outs[0][1], outs[1][1]))
                handler_ran = "app handler" in outs[0][1]
                check(handler_ran == (behav in ("exit", "return", "reset")), "%s: handler ran: %s" % (what, outs[0][1]))
                ran += 1
    for b in bad:
        print("MISMATCH " + b)
    check(not bad, "%d of %d combinations differ under the tracer" % (len(bad), ran))
    print("signals: %d combinations, same exit status and output traced and untraced" % ran)


# ------------------------------------------------------------------ fork --
def t_fork():
    nthreads, nforkers = 3, 4
    env = base_env()
    t0 = time.time()
    rc, o, e = run_prog("fork", 0, 1, mkdtemp("ids-"), [nthreads, nforkers], env, timeout=45)
    check(rc == 0, "fork mode exited %s: %s" % (rc, e.strip()[-500:]))
    m = re.search(r"^tids ([\d ]+)$", o, re.M)
    check(m, "no tids line: %r" % o)
    tids = set(int(x) for x in m.group(1).split())
    pid = min(tids)
    dumps = files_in("dumps", "*.zst")
    mine = [f for f in dumps if "-%d-" % pid in os.path.basename(f)]
    check(len(mine) == 1 and mine[0].endswith("-exit.zst"), "parent dumps %s (all: %s)" % (mine, dumps))
    d = decode(mine[0])
    h = d["header"]
    check(h["pid"] == pid and h["proc_state"] == "exited" and h["exit_code"] == 0, "parent header %s" % h)
    # the tracer's own threads (watchdog) may write too; no child ever does
    foreign = [r for r in d["records"] if r["tid"] not in tids and r["kind"] in ("AllReduce", "Broadcast", "Exit")]
    check(not foreign, "records of other threads/processes in the parent's ring: %s" % foreign[:3])
    exits = [r for r in d["records"] if r["kind"] == "Exit"]
    check(len(exits) == 1 and exits[0]["tid"] == pid, "Exit records in the parent's ring: %s" % exits)
    per = {}
    for r in d["records"]:
        if r["kind"] in ("AllReduce", "Broadcast"):
            per.setdefault(r["comm"], []).append(r["seq"])
    check(len(per) == nthreads and all(sorted(v) == list(range(1, 401)) for v in per.values()),
          "parent's collectives: %s" % {k: len(v) for k, v in per.items()})
    # children made no NCCL call: no ring, no dump of theirs
    others = [f for f in dumps if f not in mine] + files_in("rings", "*.ring")
    check(not others, "files left by fork children: %s" % others)
    print("fork: %d threads x 400 collectives while %d threads forked 8 children each "
          "(_exit, exit, exec, stdio) in %.1f s; parent ring clean" % (nthreads, nforkers, time.time() - t0))


# ------------------------------------------------------------------ ctor --
def t_ctor(which="early"):
    """main: the program's constructor and a dlopen()ed library; early: also
    a library constructor that runs before the tracer's own constructor."""
    early = which == "early"
    env = base_env()
    env.update(STRESS_CTOR="1", STRESS_DL_LIB=E["dl_lib"])
    if early:
        env["STRESS_EARLY_NCCL"] = "1"
    rc, o, e = run_prog("ctor", 0, 1, mkdtemp("ids-"), [], env)
    check(rc == 0 and "ctor ok" in o, "ctor mode exited %s: %s" % (rc, e.strip()[-500:]))
    f = files_in("dumps", "*-exit.zst")
    check(len(f) == 1, "dumps %s" % files_in("dumps"))
    d = decode(f[0])
    counts = [r["count"] for r in d["records"] if r["kind"] == "AllReduce"]
    # 22: library constructor (before the tracer's), 11: program constructor,
    # 33: dlopen()ed library, 44: main
    want = [22, 11, 33, 44] if early else [11, 33, 44]
    check(counts == want, "AllReduce counts in call order %s, want %s" % (counts, want))
    inits = [r for r in d["records"] if r["kind"] == "CommInitRank" and r["phase"] == "exit"]
    check(len(inits) == len(want) and all(r["result"] == "ncclSuccess" for r in inits), "inits %s" % inits)
    print("ctor: NCCL from %sthe program constructor and a dlopen()ed library: all traced"
          % ("a library constructor, " if early else ""))


# ------------------------------------------------------- real evidence --
def real_evidence(nranks=2, ring=1024):
    """Exit dumps of a small traced run and the ring of a SIGKILLed one."""
    env = base_env()
    env["NCCLTRACE_RING"] = str(ring)
    iddir = mkdtemp("ids-")
    procs = [spawn([E["prog"], "load", str(r), str(nranks), iddir, "2", "60", mkdtemp("acks-")], env)
             for r in range(nranks)]
    for p in procs:
        o, e = p.communicate(timeout=60)
        check(p.returncode == 0, "load run exited %s: %s" % (p.returncode, e))
    dumps = files_in("dumps", "*-exit.zst")
    check(len(dumps) == nranks, "exit dumps %s" % dumps)
    p = spawn([E["prog"], "marks", "0", "1", mkdtemp("ids-"), "100"], env)
    check(p.stdout.readline().strip() == "ready", "marks mode did not start")
    p.kill()
    p.wait()
    rings = files_in("rings", "*.ring")
    check(len(rings) == 1, "rings %s" % rings)
    return dumps, rings[0]


def t_valgrind_decode():
    vg = shutil.which("valgrind")
    if not vg:
        print("SKIP: valgrind not installed")
        sys.exit(77)
    dumps, ring = real_evidence()
    runs = [["decode", dumps[0]], ["decode", "--json", dumps[1]], ["decode", "--json", ring],
            ["analyze", "--json"] + dumps, ["analyze", dumps[0], ring], ["export", "--chrome"] + dumps +
            ["-o", os.path.join(TMP, "trace.json")]]
    bad = dumps[0] + ".cut"
    with open(dumps[0], "rb") as f:
        data = f.read()
    with open(bad, "wb") as f:
        f.write(data[:len(data) * 2 // 3])
    runs += [["decode", bad], ["decode", "--salvage", "--json", bad]]
    for args in runs:
        p = subprocess.run([vg, "-q", "--error-exitcode=99", "--leak-check=full", "--errors-for-leak-kinds=definite",
                            E["tool"]] + args, capture_output=True, text=True, timeout=300)
        check(p.returncode != 99, "valgrind errors in nccltrace %s:\n%s" % (" ".join(args), p.stderr[-3000:]))
        check(p.returncode in (0, 1, 2, 3),  # analyze: docs/analyze.md "Exit status"
               "nccltrace %s exited %d under valgrind: %s" % (args, p.returncode, p.stderr[-500:]))
        print("valgrind: nccltrace %s: exit %d, no errors" % (" ".join(os.path.basename(a) for a in args), p.returncode))
    figure("valgrind_runs", len(runs))


def t_corrupt_real():
    dumps, ring = real_evidence()
    with open(dumps[0], "rb") as f:
        data = f.read()
    good = decode(dumps[0])
    ngood = len(good["records"])
    rng = random.Random(7)
    cases = []
    for n in (0, 1, 8, 63, 64, 65, len(data) // 3, len(data) // 2, len(data) - 1):
        cases.append(("truncated at %d" % n, data[:n]))
    v = bytearray(data)
    v[8:12] = (99).to_bytes(4, "little")
    cases.append(("version 99", bytes(v)))
    for i in range(40):
        b = bytearray(data)
        k = rng.randrange(len(b))
        b[k] ^= 1 << rng.randrange(8)
        cases.append(("bit flip at %d" % k, bytes(b)))
    cases.append(("garbage", bytes(rng.randrange(256) for _ in range(4096))))
    cases.append(("appended bytes", data + b"\0" * 100))
    with open(ring, "rb") as f:
        rdata = f.read()
    cases.append(("ring truncated", rdata[:len(rdata) // 2]))
    rv = bytearray(rdata)
    rv[8:12] = (2).to_bytes(4, "little")
    cases.append(("ring version 2", bytes(rv)))
    refused = salvaged = 0
    for what, blob in cases:
        path = os.path.join(TMP, "bad.zst")
        with open(path, "wb") as f:
            f.write(blob)
        p = tool("decode", "--json", path)
        check(p.returncode in (0, 2), "%s: decode exited %d (crash?): %s" % (what, p.returncode, p.stderr[-400:]))
        if p.returncode == 2:
            refused += 1
            err = p.stderr.strip().splitlines()
            check(len(err) == 1 and "bad.zst" in err[0], "%s: want one line naming the file, got %s" % (what, err))
            if what.startswith("version") or what.startswith("ring version"):
                check("version" in err[0], "%s: message does not say version: %s" % (what, err[0]))
        else:
            # accepted: only harmless bytes can have changed
            check(not what.startswith("truncated") and what != "garbage", "%s accepted" % what)
        ps = tool("decode", "--json", "--salvage", path)
        check(ps.returncode in (0, 2), "%s: decode --salvage exited %d: %s" % (what, ps.returncode, ps.stderr[-400:]))
        if ps.returncode == 0:
            d = json.loads(ps.stdout)
            check(len(d["records"]) <= ngood + 64, "%s: salvage invented records" % what)
            if p.returncode == 2 and d["records"]:
                salvaged += 1
        try:
            pa = tool("analyze", "--json", path, timeout=30)
        except subprocess.TimeoutExpired:
            keep = os.path.join(os.environ.get("STRESS_KEEP", "/tmp"), "stress-analyze-hang.zst")
            shutil.copy(path, keep)
            fail("%s: nccltrace analyze did not finish in 30 s (input kept at %s)" % (what, keep))
        # a documented status (docs/analyze.md "Exit status"), never a crash
        check(pa.returncode in (0, 1, 2), "%s: analyze exited %d: %s" % (what, pa.returncode, pa.stderr[-400:]))
    # --salvage on a dump of several zstd blocks cut short: the header and the
    # records of the intact blocks come back
    shutil.rmtree(os.path.join(TMP, "dumps"), ignore_errors=True)
    big = load_run(0, 2, 1500)
    bigf = files_in("dumps", "*-exit.zst")[0]
    with open(bigf, "rb") as f:
        bdata = f.read()
    nbig = len(big["records"])
    recovered = []
    for frac in (0.5, 0.75, 0.95):
        path = os.path.join(TMP, "cut.zst")
        with open(path, "wb") as f:
            f.write(bdata[:int(len(bdata) * frac)])
        p = tool("decode", "--json", path)
        check(p.returncode == 2 and "truncated" in p.stderr, "cut dump: %d %s" % (p.returncode, p.stderr))
        ps = tool("decode", "--json", "--salvage", path)
        check(ps.returncode == 0, "salvage of a dump cut at %d%% failed: %s" % (frac * 100, ps.stderr))
        d = json.loads(ps.stdout)
        check(d["header"]["pid"] == big["header"]["pid"], "salvaged header differs")
        good_pos = {r["pos"]: r for r in big["records"]}
        for r in d["records"]:
            check(good_pos.get(r["pos"]) == r, "salvage returned a record that differs from the intact dump: %s" % r)
        recovered.append("%d%%: %d of %d records" % (frac * 100, len(d["records"]), nbig))
    check(any(not x.startswith("95%: 0 ") for x in recovered[-1:]), "salvage recovered nothing: %s" % recovered)
    print("corrupt_real: %d damaged inputs from real dumps/rings: %d refused with one line (exit 2), "
          "%d partly recovered by --salvage, no crash; cut multi-block dump salvaged: %s"
          % (len(cases), refused, salvaged, ", ".join(recovered)))


SECRETS = {"NCCL_IB_AUTH_TOKEN": "tok-ABCDEF123", "CUDA_API_KEY": "cudakey-4242", "AWS_SECRET_ACCESS_KEY": "aws-SeCrEt99",
           "MY_PASSWORD": "pw-hunter2", "HF_TOKEN": "hf_zzzz1234", "NCCLTRACE_SECRET": "tracesecret-777",
           "NCCL_PASSWD": "ncclpw-31337", "FOO": "foo-not-allowed-55"}


def t_files():
    env = base_env()
    env.update(SECRETS)
    env.update(NCCL_DEBUG="WARN", NCCL_PROTO="Simple", CUDA_VISIBLE_DEVICES="0,1", OMPI_COMM_WORLD_RANK="0")
    # 1. modes of rings, dumps and directories
    p = spawn([E["prog"], "marks", "0", "1", mkdtemp("ids-"), "10"], env)
    check(p.stdout.readline().strip() == "ready", "marks mode did not start")
    rings = files_in("rings", "*.ring")
    check(len(rings) == 1, "rings %s" % rings)
    rmode = stat.S_IMODE(os.stat(rings[0]).st_mode)
    dmode = stat.S_IMODE(os.stat(os.path.join(TMP, "rings")).st_mode)
    check(rmode == 0o600, "ring file mode %o" % rmode)
    check(dmode == 0o700, "ring directory mode %o" % dmode)
    with open(rings[0], "rb") as f:
        ring_bytes = f.read()
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=20)
    dumps = files_in("dumps", "*.zst")
    check(len(dumps) == 1, "dumps %s" % dumps)
    fmode = stat.S_IMODE(os.stat(dumps[0]).st_mode)
    check(fmode == 0o600, "dump mode %o" % fmode)
    # 2. what the environment section holds
    d = decode(dumps[0])
    # NCCL_*, CUDA_* and the launcher's rank variables (recorder/env.c), nothing else
    allowed = re.compile(r"^(NCCL_|CUDA_)|^(RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|GROUP_RANK|OMPI_COMM_WORLD_\w+|"
                         r"PMI_RANK|PMI_SIZE|PMI_LOCAL_RANK|PMIX_RANK|SLURM_PROCID|SLURM_LOCALID|SLURM_NTASKS|"
                         r"SLURM_NODEID|TORCHELASTIC_RESTART_COUNT|SLURM_RESTART_COUNT)$")
    for k in d["env"]:
        check(allowed.search(k), "environment variable %s recorded" % k)
    for k in ("NCCL_DEBUG", "NCCL_PROTO", "CUDA_VISIBLE_DEVICES"):
        check(d["env"].get(k) == env[k], "%s not recorded: %s" % (k, d["env"]))
    raw = subprocess.run(["zstd", "-dc"], input=open(dumps[0], "rb").read()[64:], capture_output=True).stdout \
        if shutil.which("zstd") else b""
    blobs = {"ring file": ring_bytes, "dump (decoded)": json.dumps(d).encode(), "dump (raw payload)": raw}
    for name, value in SECRETS.items():
        for where, blob in blobs.items():
            check(value.encode() not in blob, "%s's value found in the %s" % (name, where))
    # 3. NCCLTRACE_DUMP_MODE
    shutil.rmtree(os.path.join(TMP, "dumps"))
    env2 = base_env()
    env2["NCCLTRACE_DUMP_MODE"] = "0640"
    rc, o, e = run_prog("load", 0, 1, mkdtemp("ids-"), [1, 10, mkdtemp("acks-")], env2)
    check(rc == 0, "load: %s" % e)
    dumps = files_in("dumps", "*.zst")
    check(len(dumps) == 1 and stat.S_IMODE(os.stat(dumps[0]).st_mode) == 0o640,
          "NCCLTRACE_DUMP_MODE=0640: %s" % [(f, oct(os.stat(f).st_mode)) for f in dumps])
    # 4. no symlink following: a symlinked ring dir is refused (the job runs),
    # a symlink planted at the dump's name is never written through
    victim = os.path.join(TMP, "victim")
    with open(victim, "w") as f:
        f.write("precious")
    real = mkdtemp("realdir-")
    link = os.path.join(TMP, "linkdir")
    os.symlink(real, link)
    env3 = base_env()
    env3["NCCLTRACE_RING_DIR"] = link
    rc, o, e = run_prog("load", 0, 1, mkdtemp("ids-"), [1, 10, mkdtemp("acks-")], env3)
    check(rc == 0, "symlinked ring dir: the job failed: %s" % e)
    check(not os.listdir(real), "a ring was created through a symlinked directory: %s" % os.listdir(real))
    check(any("ring" in ln for ln in ncc_lines(e)), "no nccltrace: line about the refused ring dir: %s" % e)
    shutil.rmtree(os.path.join(TMP, "dumps"), ignore_errors=True)
    shutil.rmtree(os.path.join(TMP, "rings"), ignore_errors=True)
    env4 = base_env()
    p = spawn([E["prog"], "marks", "0", "1", mkdtemp("ids-"), "10"], env4)
    check(p.stdout.readline().strip() == "ready", "marks mode did not start")
    ring = os.path.basename(files_in("rings", "*.ring")[0])
    m = re.match(r"nccltrace-(.+)-(\d+)\.ring$", ring)
    check(m, "ring name %s" % ring)
    os.makedirs(os.path.join(TMP, "dumps"), mode=0o700, exist_ok=True)
    planted = []
    for seq in range(4):
        for mid in ("%s-r0-%s-%d" % (m.group(1).split("-")[0], socket.gethostname(), p.pid), m.group(1) + "-r0-%d" % p.pid):
            for trig in ("sigterm", "exit"):
                q = os.path.join(TMP, "dumps", "nccltrace-%s-%d-%s.zst" % (mid, seq, trig))
                if not os.path.lexists(q):
                    os.symlink(victim, q)
                    planted.append(q)
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=20)
    with open(victim) as f:
        check(f.read() == "precious", "a dump was written through a planted symlink")
    real_dumps = [f for f in files_in("dumps", "*.zst") if not os.path.islink(f)]
    print("files: ring 0600 in a 0700 dir, dumps 0600 (0640 with NCCLTRACE_DUMP_MODE); env holds %s; no secret "
          "value in ring or dump; symlinked ring dir refused; %d planted symlinks untouched, %d real dump(s)"
          % (sorted(d["env"]), len(planted), len(real_dumps)))


# ------------------------------------------------------------- coordinator --
def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for ln in f:
            if ln.startswith("VmRSS:"):
                return int(ln.split()[1])
    return -1


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def t_coord_flood():
    port = free_port()
    cenv = dict(os.environ)
    cenv["NCCLTRACE_SECRET"] = "stress-secret-1"
    coord = spawn([E["tool"], "coord", "--listen", "127.0.0.1:%d" % port], cenv)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    else:
        fail("coordinator did not listen: %s" % (coord.poll(),))
    time.sleep(0.3)
    rss0 = rss_kb(coord.pid)
    # a real job checked through this coordinator while the flood goes on
    jenv = base_env()
    # an explicit job id: keeps this job apart from the flood whatever the
    # derivation rule (stress_jobid_threads tests the derived one)
    jenv.update(NCCLTRACE_CHECK="async", NCCLTRACE_COORD="127.0.0.1:%d" % port, NCCLTRACE_SECRET="stress-secret-1",
                NCCLTRACE_JOB="stress-flood")
    iddir = mkdtemp("ids-")
    job = [spawn([E["prog"], "load", str(r), "2", iddir, "2", "300", mkdtemp("acks-")], jenv) for r in range(2)]
    rng = random.Random(3)
    held = []
    sent = 0
    peak = rss0
    t0 = time.time()
    for i in range(600):
        try:
            c = socket.create_connection(("127.0.0.1", port), timeout=2)
        except OSError:
            time.sleep(0.01)
            continue
        kind = i % 6
        try:
            if kind == 0:    # garbage
                c.sendall(bytes(rng.randrange(256) for _ in range(512)))
            elif kind == 1:  # a header announcing 256 MiB
                c.sendall(b"NX\x01\x02" + b"\0\0\0\x10" + b"\0" * 8)
            elif kind == 2:  # header that claims the max then dribbles
                c.sendall(b"NX\x01\x02\xff\xff\x00\x00")
            elif kind == 3:  # forged HELLO: right magic and type, bogus tag
                c.sendall(b"NX\x01\x02" + (200).to_bytes(4, "big") + b"\0" * 8 + bytes(rng.randrange(256) for _ in range(232)))
            elif kind == 4:  # slowloris: one byte, then hold the socket
                c.sendall(b"N")
            else:            # a zero-length-payload frame of every type, repeated (replay-like)
                for t in range(16):
                    c.sendall(b"NX\x01" + bytes([t]) + b"\0" * 12)
            sent += 1
        except OSError:
            pass
        held.append(c)
        if len(held) > 40:
            for x in held[:20]:
                x.close()
            del held[:20]
        if i % 50 == 0:
            peak = max(peak, rss_kb(coord.pid))
    for x in held:
        x.close()
    time.sleep(1.5)
    rss1 = rss_kb(coord.pid)
    peak = max(peak, rss1)
    res = []
    for pj in job:
        try:
            o, e = pj.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            kill_all()
            fail("the real job hung while the coordinator was flooded")
        res.append((pj.returncode, e))
    if coord.poll() is not None:
        fail("the coordinator died under the flood: %s" % (coord.communicate(timeout=5),))
    for rc, e in res:
        check(rc == 0, "a rank of the real job exited %s: %s" % (rc, e[-500:]))
        check(not [ln for ln in ncc_lines(e) if "mismatch" in ln or "lost" in ln],
              "the flood disturbed the job: %s" % ncc_lines(e))
        check(not [ln for ln in ncc_lines(e) if "check off" in ln or "cannot" in ln or "unreachable" in ln],
              "the job was not checked through the coordinator: %s" % ncc_lines(e))
    dumps = files_in("dumps", "*-exit.zst")
    check(len(dumps) == 2, "exit dumps %s" % dumps)
    pa = tool("analyze", "--json", *dumps)
    check(pa.returncode == 0 and json.loads(pa.stdout)["verdict"]["class"] == "healthy",
          "analyze after the flood: %s %s" % (pa.stdout[:300], pa.stderr))
    coord.terminate()
    print("coord_flood: rank 0 said %s" % ncc_lines(res[0][1]))
    print("coord_flood: %d hostile connections in %.1f s; coordinator RSS %d KiB before, %d KiB peak, %d KiB after; "
          "the 2-rank job checked through it exited 0, verdict healthy" % (sent, time.time() - t0, rss0, peak, rss1))
    figure("coord_rss_before_kib", rss0)
    figure("coord_rss_peak_kib", peak)
    figure("coord_rss_after_kib", rss1)
    check(peak - rss0 < 16 * 1024, "coordinator RSS grew by %d KiB under the flood" % (peak - rss0))


def t_analyze_hostile():
    """A ring file is not checksummed: any field can hold anything.  A
    collective whose seq is 2^40 (or 2^64-1) must not make analyze loop over
    the seq span."""
    import struct
    _, ring = real_evidence()
    d = decode(ring)
    slot_off, = struct.unpack_from("<Q", open(ring, "rb").read(), 56)
    mask = d["header"]["slot_count"] - 1
    ar = [r for r in d["records"] if r["kind"] == "AllReduce"]
    check(len(ar) >= 2, "ring holds %d AllReduce records" % len(ar))
    for big in (1 << 40, (1 << 64) - 1):
        bad = os.path.join(TMP, "bigseq-%x.ring" % big)
        b = bytearray(open(ring, "rb").read())
        struct.pack_into("<Q", b, slot_off + (ar[-1]["pos"] & mask) * 128 + 64, big)
        open(bad, "wb").write(b)
        t0 = time.time()
        try:
            p = tool("analyze", "--json", bad, timeout=20)
        except subprocess.TimeoutExpired:
            fail("analyze of a ring with one seq = %#x did not finish in 20 s" % big)
        check(p.returncode in (0, 1, 2), "analyze exited %d: %s" % (p.returncode, p.stderr[-300:]))
        print("analyze_hostile: seq %#x: exit %d in %.2f s" % (big, p.returncode, time.time() - t0))


def t_jobid_threads():
    """Ranks whose threads create several communicators concurrently, with no
    launcher job id: every rank must still land in the same job (design §6,
    docs/identity.md: the job id follows the largest InitRank-family
    communicator, then the smallest id, never "the first" one created), or
    analyze splits them."""
    nranks = 4
    env = base_env()
    iddir = mkdtemp("ids-")
    procs = [spawn([E["prog"], "load", str(r), str(nranks), iddir, "3", "20", mkdtemp("acks-")], env)
             for r in range(nranks)]
    for p in procs:
        o, e = p.communicate(timeout=60)
        check(p.returncode == 0, "rank exited %s: %s" % (p.returncode, e[-300:]))
    dumps = files_in("dumps", "*-exit.zst")
    check(len(dumps) == nranks, "dumps %s" % dumps)
    jobs = sorted(set(decode(f)["header"]["job"] for f in dumps))
    pa = tool("analyze", "--json", *dumps)
    check(pa.returncode == 0, "analyze: %s" % pa.stderr)
    a = json.loads(pa.stdout)
    print("jobid_threads: job ids of the %d ranks: %s; analyze verdict %s over %d rank(s)"
          % (nranks, jobs, a["verdict"]["class"], len(a.get("ranks", []))))
    check(len(jobs) == 1, "the ranks of one job got %d different job ids: %s" % (len(jobs), jobs))
    check(len(a.get("ranks", [])) == nranks and a["verdict"]["class"] == "healthy",
          "analyze sees %d ranks, verdict %s" % (len(a.get("ranks", [])), a["verdict"]))


# --------------------------------------------------------------- threads --
def tsan_reports(err):
    """Distinct TSan reports in err, each as 'first frame <-> second frame'."""
    libs = {os.path.basename(E["lib"]): E["lib"], os.path.basename(E["prog"]): E["prog"]}
    for f in glob.glob(os.path.join(E["emu"], "lib*.so*")):
        libs[os.path.basename(f)] = f
    cache = {}

    def sym(lib, off):
        path = libs.get(lib)
        if not path:
            return "%s+%s" % (lib, off)
        if (path, off) not in cache:
            r = subprocess.run(["addr2line", "-f", "-C", "-e", path, off], capture_output=True, text=True).stdout.split("\n")
            cache[(path, off)] = "%s %s" % (r[0], os.path.basename(r[1]) if len(r) > 1 else "")
        return cache[(path, off)]
    out = set()
    for rep in err.split("==================")[1:]:
        if "WARNING: ThreadSanitizer" not in rep:
            continue
        frames = re.findall(r"^\s+#0 .*?\((\S+)\+(0x[0-9a-f]+)\)", rep, re.M)
        kind = re.search(r"WARNING: ThreadSanitizer: ([\w -]+)", rep).group(1).strip()
        out.add("%s: %s" % (kind, " <-> ".join(sym(l, o) for l, o in frames[:2])))
    return sorted(out)


def t_threads(which="any"):
    """Many threads, each on its own communicator, in one traced process; in
    a sanitizer build the program, the emulator and libnccltrace.so are all
    instrumented and any report fails the run.  `threads tsan` runs only in
    a TSan build."""
    nthreads, iters = 8, 300
    env = base_env()
    san = E["sanitize"] not in ("", "none")
    if which == "tsan" and "thread" not in E["sanitize"]:
        print("SKIP: not a ThreadSanitizer build (CC=clang meson setup -Db_sanitize=thread -Db_lundef=false)")
        sys.exit(77)
    if san and "thread" in E["sanitize"] and E["cc_id"] != "clang":
        print("SKIP: preloading a TSan library needs clang's static runtime in the program")
        sys.exit(77)
    if san:
        # TSan's own start-up calls sigaction, which is ours (interposed and
        # instrumented) before TSan is initialized: its deadly-signal handlers
        # stay off.  Its symbolizer would inherit LD_PRELOAD: addresses are
        # symbolized here with addr2line instead.
        env["TSAN_OPTIONS"] = ("symbolize=0:handle_segv=0:handle_sigbus=0:handle_abort=0:handle_sigill=0:"
                               "handle_sigfpe=0:halt_on_error=0:exitcode=66:second_deadlock_stack=1")
        env["ASAN_OPTIONS"] = "verify_asan_link_order=0:detect_leaks=0:halt_on_error=1"
        env["UBSAN_OPTIONS"] = "halt_on_error=1:print_stacktrace=1"
    t0 = time.time()
    rc, o, e = run_prog("load", 0, 1, mkdtemp("ids-"), [nthreads, iters, mkdtemp("acks-")], env, timeout=110)
    races = tsan_reports(e)
    for r in races:
        print("TSAN " + r)
    check(not races, "%d distinct ThreadSanitizer reports (above)" % len(races))
    check("WARNING: ThreadSanitizer" not in e and "ERROR: AddressSanitizer" not in e and "runtime error:" not in e,
          "sanitizer report:\n%s" % e[-6000:])
    check(rc == 0, "load mode exited %s: %s" % (rc, e[-2000:]))
    f = files_in("dumps", "*-exit.zst")
    check(len(f) == 1, "dumps %s" % files_in("dumps"))
    d = decode(f[0]) if not san else json.loads(subprocess.run(
        [E["tool"], "decode", "--json", f[0]], capture_output=True, text=True, timeout=120,
        env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0")).stdout)
    per = {}
    for r in d["records"]:
        if r["kind"] in ("AllReduce", "Broadcast"):
            per.setdefault(r["comm"], []).append(r["seq"])
    check(len(per) == nthreads and all(sorted(v) == list(range(1, iters + 1)) for v in per.values()),
          "records per comm: %s" % {k: len(v) for k, v in per.items()})
    print("threads: %d threads x %d collectives on their own communicators (%s build) in %.1f s, all recorded"
          % (nthreads, iters, E["sanitize"] or "plain", time.time() - t0))


TESTS = {n[2:]: f for n, f in list(globals().items()) if n.startswith("t_")}


def main():
    global TMP
    if len(sys.argv) < 2 or sys.argv[1] not in TESTS:
        print("usage: stress.py {%s} [ARGS]" % ",".join(sorted(TESTS)), file=sys.stderr)
        return 1
    for k in ("lib", "tool", "emu", "prog", "dl_lib", "sanitize", "cc_id", "src"):
        E[k] = os.environ.get("STRESS_" + k.upper(), "")
    name = sys.argv[1]
    if E["sanitize"] not in ("", "none") and name in ("valgrind_decode", "signals"):
        print("SKIP: %s does not run in a sanitizer build (valgrind; ASan owns SIGSEGV)" % name)
        return 77
    for k in ("lib", "tool", "emu", "prog"):
        if not E[k] or not os.path.exists(E[k]):
            print("SKIP: STRESS_%s not built" % k.upper())
            return 77
    TMP = tempfile.mkdtemp(prefix="stress-" + name + "-")
    try:
        TESTS[name](*sys.argv[2:])
    finally:
        kill_all()
        shutil.rmtree(TMP, ignore_errors=True)
    print("PASS " + name)
    return 0


if __name__ == "__main__":
    sys.exit(main())

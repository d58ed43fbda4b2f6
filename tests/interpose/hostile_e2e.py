#!/usr/bin/env python3
"""hostile_e2e.py -- the tracer in hostile and cramped environments
(docs/reliability.md, "Hostile and cramped environments").

Each test runs tests/interpose/hostile.c under LD_PRELOAD=libnccltrace.so on
the CPU emulator and checks what the tracer did with its ring, its dump
directory and the environment it recorded; the round-two cases of its own
stderr lines and signals (issue 27) run tests/interpose/diag.c, traced and
untraced.  One test per invocation:

  hostile_e2e.py TEST   (paths come from the environment, as interpose_e2e.py)

Tests that mount a tmpfs or need a second user run as root only (77 else).
Exit: 0 pass, 1 fail, 77 skip.
"""
import glob
import json
import os
import pwd
import resource
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
MOUNTS = []
OTHER = "ntrhostile"  # the second local user (created when missing)


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def skip(msg):
    print("SKIP: " + msg)
    sys.exit(77)


def need_root():
    if os.geteuid() != 0:
        skip("needs root (tmpfs mounts, a second user)")


def base_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NCCLTRACE_", "NCCL_", "CUDA_")) and k not in ("LD_PRELOAD", "LOCAL_WORLD_SIZE")}
    env.update(LD_LIBRARY_PATH=E["emu"], NCCLEMU_DEVICES="8", LD_PRELOAD=E["lib"], NCCLTRACE_CHECK="off",
               NCCLTRACE_RING_DIR=os.path.join(TMP, "rings"), NCCLTRACE_DIR=os.path.join(TMP, "dumps"),
               TMPDIR=os.path.join(TMP, "tmp"))
    os.makedirs(env["TMPDIR"], exist_ok=True)
    env.update(extra)
    return env


def start(mode, n, env):
    return subprocess.Popen([E["prog"], mode, str(n)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(p, timeout=60):
    try:
        o, e = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        o, e = p.communicate()
        fail("pid %d timed out: %s" % (p.pid, e))
    return p.returncode, o, e


def lines(err, word=None):
    return [ln for ln in err.splitlines() if ln.startswith("nccltrace:") and (word is None or word in ln)]


def fallback_lines(err):
    return [ln for ln in lines(err) if "dump written" not in ln]


def mount_tmpfs(path, size):
    os.makedirs(path, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=1777" % size, "tmpfs", path],
                       capture_output=True, text=True)
    if r.returncode != 0:
        skip("cannot mount a tmpfs: %s" % r.stderr.strip())
    MOUNTS.append(path)


def used_bytes(path):
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def decode(path):
    p = subprocess.run([E["tool"], "decode", "--json", path], capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, "decode %s: %s" % (path, p.stderr))
    return p.stdout


def exit_dumps(dumpdir, pid):
    return glob.glob(os.path.join(dumpdir, "nccltrace-*-%d-*-exit.zst" % pid))


def other_user():
    try:
        pw = pwd.getpwnam(OTHER)
    except KeyError:
        r = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER],
                           capture_output=True, text=True)
        if r.returncode != 0 and "exists" not in r.stderr:
            skip("cannot create a second user: %s" % r.stderr.strip())
        pw = pwd.getpwnam(OTHER)
    return pw.pw_uid, pw.pw_gid


# ----------------------------------------------------------------- tests --


def t_shm_full():
    # Item 1: 8 ranks, rings on a 64 MiB tmpfs (Docker's default /dev/shm).
    # Each ring of the default 65536 records is 10.3 MiB: 8 do not fit.
    need_root()
    shm = os.path.join(TMP, "shm")
    mount_tmpfs(shm, "64m")
    for lws in ("8", None):  # torchrun says LOCAL_WORLD_SIZE; a bare launch does not
        extra = {"NCCLTRACE_RING_DIR": os.path.join(shm, "rings")}
        if lws:
            extra["LOCAL_WORLD_SIZE"] = lws
        procs = [start("fill", 70000, base_env(**extra)) for _ in range(8)]
        res = [finish(p) for p in procs]
        for p, (rc, o, e) in zip(procs, res):
            check(rc == 0, "LOCAL_WORLD_SIZE=%s: pid %d exited %d: %s" % (lws, p.pid, rc, e))
            fl = fallback_lines(e)
            check(len(fl) <= 1, "pid %d: more than one line about its ring: %s" % (p.pid, fl))
            if lws:
                check(len(fl) == 1 and "ring of" in fl[0] and "instead" in fl[0],
                      "pid %d: want one line saying which smaller ring was taken: %s" % (p.pid, e))
            check(len(exit_dumps(os.path.join(TMP, "dumps"), p.pid)) == 1, "pid %d left no exit dump" % p.pid)
        if not lws:
            check(sum(len(fallback_lines(e)) for _, _, e in res) >= 1, "8 full rings fit in 64 MiB?")
        left = os.listdir(os.path.join(shm, "rings"))
        check(not left, "clean exits left rings behind: %s" % left)
        check(used_bytes(shm) < 1 << 20, "the tmpfs is left with %d bytes used" % used_bytes(shm))
        print("LOCAL_WORLD_SIZE=%s: 8/8 exit 0; %s" % (lws, sorted(set(ln[11:60] for _, _, e in res for ln in fallback_lines(e)))))


def t_shm_tiny():
    # Item 1: a tmpfs too small for even the smallest ring (64 records, 2.4
    # MiB), and $TMPDIR on it too: the ring goes to /tmp; and where no file
    # can take a ring at all (RLIMIT_FSIZE under the smallest ring's size,
    # as /tmp could not be filled here without harm to others), to
    # anonymous memory.
    import resource
    need_root()
    shm = os.path.join(TMP, "tiny")
    mount_tmpfs(shm, "1m")
    env = base_env(NCCLTRACE_RING_DIR=os.path.join(shm, "rings"), TMPDIR=shm)
    p = start("fill", 10, env)
    rc, o, e = finish(p)
    fl = fallback_lines(e)
    mine = "/tmp/nccltrace-%d" % os.geteuid()
    check(rc == 0 and len(fl) == 1 and "is in " + mine in fl[0], "want one line saying the ring is in %s: %s" % (mine, e))
    print(fl[0])

    def fsize():
        resource.setrlimit(resource.RLIMIT_FSIZE, (2 << 20, 2 << 20))
    p = subprocess.Popen([E["prog"], "fill", "70000"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, preexec_fn=fsize)
    rc, o, e = finish(p)
    check(rc == 0, "exited %d: %s" % (rc, e))
    fl = fallback_lines(e)
    check(len(fl) == 1 and "anonymous memory" in fl[0] and "does not survive" in fl[0],
          "want one line saying the ring is in anonymous memory: %s" % e)
    dumps = exit_dumps(os.path.join(TMP, "dumps"), p.pid)
    check(len(dumps) == 1, "no exit dump from the anonymous ring")
    d = json.loads(decode(dumps[0]))
    check(sum(1 for r in d["records"] if r["kind"] == "Mark") > 1000, "the anonymous ring recorded no markers")
    check(used_bytes(shm) < 64 << 10, "the tiny tmpfs is used: %d bytes" % used_bytes(shm))
    print(fl[0])


def t_ring_cut():
    # Item 1: a ring file cut under the process (truncate) turns stores into
    # SIGBUS on the mapping: the tracer takes them, the application never does.
    p = start("wait", 70000, base_env())
    check(p.stdout.readline().strip() == "ready", "did not start")
    rings = glob.glob(os.path.join(TMP, "rings", "*.ring"))
    check(len(rings) == 1, "rings: %s" % rings)
    os.truncate(rings[0], 0)
    p.stdin.write("go\n")
    p.stdin.flush()
    rc, o, e = finish(p)
    check(rc == 0, "exited %d after its ring was cut: %s" % (rc, e))
    check(len(lines(e, "cut")) == 1, "want one line about the cut ring: %s" % e)


def start_all(n, env):
    # n processes that hold their rings open: all "ready" before any goes on
    procs = [start("wait", 10, env) for _ in range(n)]
    for p in procs:
        check(p.stdout.readline().strip() == "ready", "pid %d did not start" % p.pid)
    return procs


def go_all(procs):
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    return [finish(p, timeout=120) for p in procs]


def t_shm_budget():
    # Round two, item 3: without LOCAL_WORLD_SIZE, 8 and then 24 ranks on a
    # 64 MiB tmpfs.  All rings in the directory share one budget, a third of
    # the file system (docs/reliability.md): the tmpfs is never more than a
    # third full while every ring is held, and every rank exits 0.
    need_root()
    shm = os.path.join(TMP, "shm")
    mount_tmpfs(shm, "64m")
    total = os.statvfs(shm).f_blocks * os.statvfs(shm).f_frsize
    for n in (8, 24):
        procs = start_all(n, base_env(NCCLTRACE_RING_DIR=os.path.join(shm, "rings")))
        used = used_bytes(shm)
        rings = glob.glob(os.path.join(shm, "rings", "*.ring"))
        res = go_all(procs)
        print("%d ranks: tmpfs %.1f%% full with %d rings in it (%.1f MiB of %.1f)" %
              (n, 100.0 * used / total, len(rings), used / 1048576.0, total / 1048576.0))
        for p, (rc, o, e) in zip(procs, res):
            check(rc == 0, "%d ranks: pid %d exited %d: %s" % (n, p.pid, rc, e))
            check(len(fallback_lines(e)) <= 1, "pid %d: more than one line: %s" % (p.pid, e))
        check(used <= total // 3, "%d ranks filled the tmpfs to %.1f%%, past the budget of a third" %
              (n, 100.0 * used / total))
        check(rings, "%d ranks: no ring at all on the tmpfs" % n)
        check(not os.listdir(os.path.join(shm, "rings")), "clean exits left rings behind")


def t_shm_dead():
    # Round two, item 3: the ring of a SIGKILLed process stays (it is
    # evidence, `collect` has not taken it); it counts against the budget,
    # the next process says so in its one line, and nothing deletes it.
    need_root()
    shm = os.path.join(TMP, "shm")
    mount_tmpfs(shm, "64m")
    ringdir = os.path.join(shm, "rings")
    env = base_env(NCCLTRACE_RING_DIR=ringdir)
    victim = start_all(1, env)[0]
    victim.kill()
    victim.communicate()
    dead = glob.glob(os.path.join(ringdir, "*.ring"))
    check(len(dead) == 1, "the killed process left no ring: %s" % os.listdir(ringdir))
    p = start("fill", 10, env)
    rc, o, e = finish(p)
    check(rc == 0, "exited %d: %s" % (rc, e))
    fl = fallback_lines(e)
    check(len(fl) == 1 and "dead" in fl[0] and "collect" in fl[0] and ringdir in fl[0],
          "want one line naming the dead process's ring and `collect`: %s" % e)
    check(os.path.exists(dead[0]), "the dead process's ring was removed")
    c = subprocess.run([E["tool"], "collect", "--rings", ringdir, "--dir", os.path.join(TMP, "coll")],
                       capture_output=True, text=True, timeout=60)
    check(c.returncode == 0 and not os.path.exists(dead[0]), "collect: %s %s" % (c.stdout, c.stderr))
    print(fl[0])


def t_collect_fallback():
    # Round two, item 17: a ring directory too small for any ring sends the
    # ring to $TMPDIR; after a SIGKILL, `collect --rings DIR` (the user
    # guide's recovery command) must find it there, never say "nothing".
    need_root()
    shm = os.path.join(TMP, "tiny")
    mount_tmpfs(shm, "1m")
    ringdir = os.path.join(shm, "rings")
    env = base_env(NCCLTRACE_RING_DIR=ringdir)
    victim = start_all(1, env)[0]
    victim.kill()
    victim.communicate()
    moved = glob.glob(os.path.join(env["TMPDIR"], "nccltrace-*", "*.ring"))
    check(len(moved) == 1, "the ring did not fall back to $TMPDIR: %s" % os.listdir(env["TMPDIR"]))
    coll = os.path.join(TMP, "coll")
    tenv = {k: v for k, v in env.items() if k != "LD_PRELOAD"}
    c = subprocess.run([E["tool"], "collect", "--rings", ringdir, "--dir", coll], capture_output=True,
                       text=True, timeout=60, env=tenv)
    print(c.stdout.strip())
    check("nothing" not in c.stdout, "collect said nothing while a ring was in $TMPDIR: %s" % c.stdout)
    check(c.returncode == 0, "collect exited %d: %s" % (c.returncode, c.stderr))
    got = glob.glob(os.path.join(coll, "nccltrace-*-%d-*.zst" % victim.pid))
    check(len(got) == 1 and not os.path.exists(moved[0]), "the ring in $TMPDIR was not collected: %s" % c.stdout)
    # and with nothing anywhere, the places looked at are named; the real
    # /tmp/nccltrace-<uid> (another fallback place, shared with whatever
    # else runs here) is hidden under an empty tmpfs in a mount namespace
    mine = "/tmp/nccltrace-%d" % os.geteuid()
    hide = ("mount -t tmpfs -o mode=0700 none %s && " % mine) if os.path.isdir(mine) else ""
    c = subprocess.run(["unshare", "-m", "sh", "-c", hide + 'exec "$@"', "sh", E["tool"], "collect", "--rings",
                        ringdir, "--dir", coll], capture_output=True, text=True, timeout=60, env=tenv)
    check("nothing" in c.stdout and env["TMPDIR"] in c.stdout,
          "an empty collect does not name the fallback place: %s" % c.stdout)


def t_anon_kill():
    # Round two, item 10: rings in anonymous memory (neither the ring
    # directory nor $TMPDIR can hold a file), rank 1 SIGKILLed while rank 0
    # waits for it.  Rank 0's dump says where its ring was, and analyze
    # says that rank 1's ring could not survive the kill instead of
    # calling it a missing collective (a code bug).
    # No file can take a ring: RLIMIT_FSIZE under the smallest ring's size
    # (an unusable $TMPDIR would send the rings to the real /tmp, where a
    # killed rank's ring would stay behind).
    import resource

    def fsize():
        resource.setrlimit(resource.RLIMIT_FSIZE, (2 << 20, 2 << 20))
    env = base_env(NCCLTRACE_TIMEOUT="1")
    iddir = tempfile.mkdtemp(prefix="ids-", dir=TMP)
    procs = []
    for r in range(2):
        e = dict(env, RANK=str(r), WORLD_SIZE="2")
        procs.append(subprocess.Popen([E["rank"], "hang", str(r), "2", iddir], env=e, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, preexec_fn=fsize))
    try:
        for p in procs:
            check(p.stdout.readline().strip() == "issued", "pid %d did not issue" % p.pid)
        procs[1].kill()
        procs[1].wait()
        dumpdir = os.path.join(TMP, "dumps")
        f = None
        for _ in range(100):
            f = glob.glob(os.path.join(dumpdir, "nccltrace-*-%d-*-timeout.zst" % procs[0].pid))
            if f:
                break
            time.sleep(0.2)
        check(f, "no timeout dump from rank 0")
        time.sleep(0.3)  # renamed into place complete
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate()
    hdr = json.loads(decode(f[0]))["header"]
    check(hdr.get("ring_place") == "anonymous", "rank 0's dump does not say its ring was anonymous: %s" %
          hdr.get("ring_place"))
    a = subprocess.run([E["tool"], "analyze", dumpdir], capture_output=True, text=True, timeout=60)
    print(a.stdout)
    check("rank 1 left no evidence; its ring could not survive a kill" in a.stdout,
          "analyze does not say rank 1's ring could not survive a kill: %s %s" % (a.stdout, a.stderr))
    check("missing collective" not in a.stdout, "analyze still calls it a missing collective: %s" % a.stdout)


def free_port():
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


def t_many_comms():
    # Round two, item 14: 300 communicators made and destroyed (more than
    # the 256 comm slots of a ring), then a split of the world comm on
    # which the two ranks disagree on the count: the comm is still watched
    # -- the cross-rank check reports the mismatch, the watchdog times the
    # hung AllReduce out on both ranks -- and analyze says mismatch, not
    # healthy.  Each rank's ring says which old comms gave up their slots.
    port = free_port()
    secret = "nti-many-comms"
    coord = subprocess.Popen([E["tool"], "coord", "--listen", "127.0.0.1:%d" % port],
                             env=dict(os.environ, NCCLTRACE_SECRET=secret), stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    env = base_env(NCCLTRACE_TIMEOUT="1", NCCLTRACE_CHECK="async", NCCLTRACE_COORD="127.0.0.1:%d" % port,
                   NCCLTRACE_SECRET=secret)
    iddir = tempfile.mkdtemp(prefix="ids-", dir=TMP)
    procs = []
    dumpdir = os.path.join(TMP, "dumps")
    try:
        time.sleep(0.3)
        if coord.poll() is not None:
            fail("coordinator did not start: %s" % coord.stderr.read())
        for r in range(2):
            e = dict(env, RANK=str(r), WORLD_SIZE="2", RANK_COMMS="300")
            procs.append(subprocess.Popen([E["rank"], "manycomms", str(r), "2", iddir], env=e, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        for p in procs:
            check(p.stdout.readline().strip() == "issued", "pid %d did not issue" % p.pid)
        want = {(p.pid, k) for p in procs for k in ("timeout", "mismatch")}
        got = set()
        for _ in range(100):
            for pid, k in want - got:
                if glob.glob(os.path.join(dumpdir, "nccltrace-*-%d-*-%s.zst" % (pid, k))):
                    got.add((pid, k))
            if got == want:
                break
            time.sleep(0.2)
        time.sleep(0.3)  # renamed into place complete
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        errs = [p.communicate()[1] for p in procs]
        coord.kill()
        coord.communicate()
    check(got == want, "dumps (pid, trigger) %s, expected %s; stderr %s" % (sorted(got), sorted(want), errs))
    for p, err in zip(procs, errs):
        check(not lines(err, "communicators alive at once"), "pid %d says a comm went unwatched: %s" % (p.pid, err))
        f = glob.glob(os.path.join(dumpdir, "nccltrace-*-%d-*-timeout.zst" % p.pid))[0]
        d = json.loads(decode(f))
        check("seq 1 AllReduce" in d["trigger"]["reason"], "timeout trigger %s" % d["trigger"])
        reused = [x for x in d["records"] if x["kind"] == "Note" and x["text"] == "slot reused"]
        check(reused and all(x["comm"] for x in reused), "no slot-reuse notes naming the old comms: %s" % reused[:2])
    a = subprocess.run([E["tool"], "analyze", "--json", dumpdir, os.path.join(TMP, "rings")], capture_output=True,
                       text=True, timeout=120)
    v = json.loads(a.stdout)["verdict"]
    print(v["summary"])
    check(v["class"] == "collective_mismatch" and v.get("field") == "count", "verdict %s" % v)


def t_comms_unwatched():
    # Round two, item 14, the real limit: 300 communicators alive at once
    # (never destroyed) on one rank.  Past the 256 slots the process says
    # so once, names each comm it cannot watch in the ring, and analyze
    # says in its verdict which comms were not watched.
    env = base_env(NCCLTRACE_TIMEOUT="1", RANK_COMMS="300", RANK_KEEP="1")
    iddir = tempfile.mkdtemp(prefix="ids-", dir=TMP)
    p = subprocess.Popen([E["rank"], "manycomms", "0", "1", iddir], env=dict(env, RANK="0", WORLD_SIZE="1"),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        check(p.stdout.readline().strip() == "issued", "pid %d did not issue" % p.pid)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    said = lines(err, "communicators alive at once")
    check(len(said) == 1, "lines about unwatched comms: %s" % err)
    d = json.loads(decode(glob.glob(os.path.join(TMP, "dumps", "nccltrace-*-%d-*-sigterm.zst" % p.pid))[0]))
    notes = [x for x in d["records"] if x["kind"] == "Note" and x["text"] == "unwatched"]
    check(len(notes) == 300 + 2 - 256 and all(x["comm"] for x in notes), "%d unwatched notes" % len(notes))
    a = subprocess.run([E["tool"], "analyze", os.path.join(TMP, "dumps")], capture_output=True, text=True, timeout=60)
    print(a.stdout)
    check("not watched" in a.stdout and notes[0]["comm"][:8] in a.stdout,
          "analyze does not say which comms were not watched: %s %s" % (a.stdout, a.stderr))


# The tracer's address space on top of an untraced rank (docs/reliability.md,
# round two, item 8): ring and dump buffers, small thread stacks, its heap.
TRACER_AS_BUDGET = 64 << 20


def run_vm_job(env, limit=None):
    # 2 ranks of rank.c "vm"; each prints its VmPeak (kB) before exit 0
    iddir = tempfile.mkdtemp(prefix="ids-", dir=TMP)

    def lim():
        if limit:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    procs = [subprocess.Popen([E["rank"], "vm", str(r), "2", iddir], env=dict(env, RANK=str(r), WORLD_SIZE="2"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=lim)
             for r in range(2)]
    out = []
    for p in procs:
        try:
            o, e = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            o, e = p.communicate()
        peak = [int(ln.split()[1]) for ln in o.splitlines() if ln.startswith("vmpeak ")]
        out.append((p.returncode, peak[0] * 1024 if peak else None, e))
    return out


def t_ulimit_v():
    # Round two, item 8: a traced 2-rank job (watchdog, exchange client,
    # coordinator) costs at most TRACER_AS_BUDGET of address space more than
    # the untraced one; under `ulimit -v` = the untraced peak + that budget
    # it runs with tracing whole; and under a limit so tight that the
    # untraced job barely runs, the traced job runs too (a smaller ring, or
    # tracing off, one line), never a failed ncclCommInitRank.
    env = base_env(NCCLTRACE_CHECK="async", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(20000 + os.getpid() % 20000))
    plain = {k: v for k, v in env.items() if k != "LD_PRELOAD"}
    base = run_vm_job(plain)
    for rc, peak, e in base:
        check(rc == 0 and peak, "untraced rank failed (%s): %s" % (rc, e))
    untraced = max(pk for _, pk, _ in base)
    free = run_vm_job(env)
    print("VmPeak untraced %.1f MiB, traced %s MiB (no limit)" %
          (untraced / 1048576.0, ["%.1f" % (pk / 1048576.0) if pk else "-" for _, pk, _ in free]))
    for r, (rc, peak, e) in enumerate(free):
        check(rc == 0 and peak, "traced rank %d failed (%s): %s" % (r, rc, e))
        check(peak <= untraced + TRACER_AS_BUDGET, "traced rank %d: VmPeak %.1f MiB, more than the untraced %.1f "
              "MiB + the tracer's %d MiB" % (r, peak / 1048576.0, untraced / 1048576.0, TRACER_AS_BUDGET >> 20))
    limit = untraced + TRACER_AS_BUDGET
    for r, (rc, peak, e) in enumerate(run_vm_job(env, limit)):
        check(rc == 0, "rank %d exited %s under ulimit -v %d kB: %s" % (r, rc, limit // 1024, e))
        check(not fallback_lines(e), "rank %d under ulimit -v %d kB: tracing not whole: %s" %
              (r, limit // 1024, fallback_lines(e)))
    print("under ulimit -v %d kB (untraced peak + %d MiB): both ranks exit 0, tracing whole" %
          (limit // 1024, TRACER_AS_BUDGET >> 20))
    for tight in (40 << 20, 48 << 20):
        if any(rc != 0 for rc, _, _ in run_vm_job(plain, tight)):
            print("ulimit -v %d kB: the untraced job does not fit here either; not a case" % (tight // 1024))
            continue
        for r, (rc, peak, e) in enumerate(run_vm_job(env, tight)):
            check(rc == 0, "rank %d exited %s under ulimit -v %d kB where the untraced job runs: %s" %
                  (r, rc, tight // 1024, e))
            fl = fallback_lines(e)
            check(len(fl) <= 1, "rank %d: more than one line: %s" % (r, fl))
            print("ulimit -v %d kB: rank %d exit 0; %s" % (tight // 1024, r, fl))


def t_planted_dirs():
    # Item 6: another user pre-created the ring and dump directories, mode
    # 0777: the tracer records into private directories instead.
    need_root()
    uid, gid = other_user()
    planted = {}
    for name in ("rings", "dumps"):
        d = os.path.join(TMP, name)
        os.mkdir(d)
        os.chown(d, uid, gid)
        os.chmod(d, 0o777)
        planted[name] = d
    p = start("wait", 10, base_env())
    check(p.stdout.readline().strip() == "ready", "did not start")
    mine = [x for x in glob.glob(os.path.join(TMP, "rings-*")) if os.path.isdir(x)]
    check(len(mine) == 1, "no private ring directory next to the planted one: %s" % os.listdir(TMP))
    st = os.lstat(mine[0])
    check(st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o700, "private dir mode %o" % st.st_mode)
    check(len(glob.glob(os.path.join(mine[0], "*.ring"))) == 1, "no ring in %s" % mine[0])
    check(not os.listdir(planted["rings"]), "a ring in the planted directory: %s" % os.listdir(planted["rings"]))
    # The tools look where the tracer fell back to: status, pointed at the
    # refused directory, still shows the live process (from its sibling).
    st_ = subprocess.run([E["tool"], "status", "--rings", planted["rings"]], capture_output=True, text=True,
                         timeout=30)
    check(str(p.pid) in st_.stdout, "status does not find the ring in the private sibling: %s %s" %
          (st_.stdout, st_.stderr))
    p.stdin.write("go\n")
    p.stdin.flush()
    rc, o, e = finish(p)
    check(rc == 0, "exited %d: %s" % (rc, e))
    check(not os.listdir(planted["dumps"]), "a dump in the planted directory")
    rl = lines(e, "ring directory")
    dl = lines(e, "dump directory")
    check(len(rl) == 1 and planted["rings"] in rl[0] and "uid %d" % uid in rl[0],
          "want one line about the ring directory: %s" % e)
    check(len(dl) == 1 and planted["dumps"] in dl[0] and "private" in dl[0],
          "want one line about the dump directory: %s" % e)
    dumps = glob.glob(os.path.join(TMP, "dumps-*", "*-exit.zst"))
    check(len(dumps) == 1, "no exit dump in the private dump directory: %s" % os.listdir(TMP))
    check(not os.path.exists(mine[0]), "the private ring directory stays after a clean exit")
    print(rl[0])
    print(dl[0])


def t_dump_symlink():
    # Item 7: NCCLTRACE_DIR is (or passes through) a symlink another user
    # planted in a world-writable directory, pointing into their directory.
    need_root()
    uid, gid = other_user()
    pub = os.path.join(TMP, "pub")  # a shared scratch directory: 0777, no sticky bit
    os.mkdir(pub)
    os.chmod(pub, 0o777)
    theirs = os.path.join(TMP, "theirs")
    os.mkdir(theirs)
    os.chown(theirs, uid, gid)
    os.chmod(theirs, 0o755)
    for link, dumpdir in (("dumps", "dumps"), ("via", "via/sub")):
        lp = os.path.join(pub, link)
        os.symlink(theirs, lp)
        os.lchown(lp, uid, gid)
        p = start("fill", 10, base_env(NCCLTRACE_DIR=os.path.join(pub, dumpdir)))
        rc, o, e = finish(p)
        check(rc == 0, "exited %d: %s" % (rc, e))
        check(not os.listdir(theirs), "a dump was written through %s's symlink: %s" % (OTHER, os.listdir(theirs)))
        dl = lines(e, "dump directory")
        check(len(dl) == 1 and "symlink owned by uid %d" % uid in dl[0],
              "want one line refusing the symlink: %s" % e)
        print(dl[0])


def t_group_dir():
    # The rule's other side: our own group-writable dump directory (umask
    # 002, a team directory) is used as it is, and an other-writable one of
    # ours is replaced by a private one.
    for mode, used in ((0o775, True), (0o777, False)):
        d = os.path.join(TMP, "dumps-%o" % mode)
        os.mkdir(d)
        os.chmod(d, mode)
        p = start("fill", 10, base_env(NCCLTRACE_DIR=d))
        rc, o, e = finish(p)
        check(rc == 0, "exited %d: %s" % (rc, e))
        here = exit_dumps(d, p.pid)
        dl = lines(e, "dump directory")
        if used:
            check(len(here) == 1 and not dl, "mode %o: want the exit dump there, no line: %s %s" % (mode, here, e))
        else:
            check(not here and len(dl) == 1 and "writable by others" in dl[0],
                  "mode %o: want a private directory and one line: %s %s" % (mode, here, e))


def t_env_secrets():
    # Item 8: only NCCL's own variables are recorded, and secret-looking
    # values never reach the ring, the dump or decode --json.
    secrets = {"NCCL_IB_PASS": "hunter2", "CUDA_PWD": "cudapwd-x41", "NCCL_CREDS": "creds-y42",
               "NCCL_PASSPHRASE": "phrase-z43", "NCCL_IB_PKEY": "pkey-0x8001"}
    env = base_env(NCCL_DEBUG="WARN", CUDA_VISIBLE_DEVICES="0", **secrets)
    p = start("wait", 10, env)
    check(p.stdout.readline().strip() == "ready", "did not start")
    rings = glob.glob(os.path.join(TMP, "rings", "*.ring"))
    check(len(rings) == 1, "rings: %s" % rings)
    with open(rings[0], "rb") as f:
        ring = f.read()
    p.stdin.write("go\n")
    p.stdin.flush()
    rc, o, e = finish(p)
    check(rc == 0, "exited %d: %s" % (rc, e))
    dumps = exit_dumps(os.path.join(TMP, "dumps"), p.pid)
    check(len(dumps) == 1, "no exit dump")
    text = decode(dumps[0])
    for k, v in secrets.items():
        check(v.encode() not in ring, "%s's value is in the ring file" % k)
        check(v not in text, "%s's value is in decode --json" % k)
    envd = json.loads(text)["env"]
    check(envd.get("NCCL_DEBUG") == "WARN" and envd.get("CUDA_VISIBLE_DEVICES") == "0", "env: %s" % envd)
    check(envd.get("NCCL_IB_PKEY") == "***", "NCCL_IB_PKEY (NCCL's, name with KEY) not masked: %s" % envd)
    for k in ("NCCL_IB_PASS", "CUDA_PWD", "NCCL_CREDS", "NCCL_PASSPHRASE"):
        check(k not in envd, "%s (not NCCL's) recorded" % k)
    print("env recorded: %s" % sorted(envd))


# ------------------------------------------- round two (issue 27): diag --
# tests/interpose/diag.c; docs/reliability.md, "Hostile world, round two".


def run_diag(args, env, timeout=60, **kw):
    """Run diag with args; (returncode or None on a hang, stdout, stderr)."""
    try:
        r = subprocess.run([E["diag"]] + args, env=env, capture_output=True, text=True, timeout=timeout, **kw)
        return r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired as x:
        return None, x.stdout or "", x.stderr or ""


def untraced_env(**extra):
    env = base_env(**extra)
    env.pop("LD_PRELOAD")
    return env


def t_fd2_reused():
    # Item 5: the application closed stderr and opened a data file as fd 2.
    # The tracer's lines (a SIGUSR1 dump, the exit dump) must not land in it:
    # they go to a Note in the ring and a log file in the dump directory.
    data = os.path.join(TMP, "data.txt")
    rc, o, e = run_diag(["fd2", data], base_env())
    check(rc == 0 and "ok" in o, "exited %s: %s %s" % (rc, o, e))
    with open(data) as f:
        text = f.read()
    check(text == "data 1\ndata 2\n", "the application's data file holds tracer lines: %r" % text)
    dumpdir = os.path.join(TMP, "dumps")
    logs = glob.glob(os.path.join(dumpdir, "nccltrace-*.log"))
    check(len(logs) == 1, "want one log file in the dump directory: %s" % os.listdir(dumpdir))
    with open(logs[0]) as f:
        log = f.read().splitlines()
    check(len(log) == 2 and all(ln.startswith("nccltrace: dump written:") for ln in log),
          "want both dump lines in the log: %s" % log)
    check(stat.S_IMODE(os.stat(logs[0]).st_mode) & 0o077 == 0, "the log file is readable by others")
    dumps = exit_dumps(dumpdir, int(logs[0].rsplit("-", 1)[1][:-4]))
    check(len(dumps) == 1, "no exit dump")
    notes = [r for r in json.loads(decode(dumps[0]))["records"] if r["kind"] == "Note"]
    check(any("dump written" in json.dumps(r) for r in notes), "no Note for the SIGUSR1 dump's line: %s" % notes)
    print("data file clean; %s: %s" % (os.path.basename(logs[0]), log[0][:60]))


def diag_stderr_cases():
    """The three stderr traps of item 7: (name, stderr fd, preexec, cleanup)."""
    cases = []
    r, w = os.pipe()
    os.close(r)  # a dead tee
    cases.append(("dead pipe", w, None, [w]))
    log = os.path.join(TMP, "full.log")
    with open(log, "wb") as f:
        f.write(b"x" * 65536)
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)

    def fsize():
        import resource
        resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
    cases.append(("file at ulimit -f", fd, fsize, [fd]))
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        while True:
            os.write(w, b"y" * 4096)
    except BlockingIOError:
        pass
    os.set_blocking(w, True)
    cases.append(("full pipe, reader alive", w, None, [r, w]))
    return cases


def t_stderr_traps():
    # Item 7: no tracer line may kill (SIGPIPE 141, SIGXFSZ 153) or block
    # the job; a failed line is dropped.  A bad NCCLTRACE_* value adds a line
    # at load, before the first NCCL call.  Untraced, each case exits 0.
    for name, fd, pre, close in diag_stderr_cases():
        for traced in (False, True):
            env = base_env(NCCLTRACE_TIMEOUT="bogus") if traced else untraced_env()
            p = subprocess.Popen([E["diag"], "lines"], env=env, stdout=subprocess.PIPE, stderr=fd, text=True,
                                 preexec_fn=pre)
            try:
                o, _ = p.communicate(timeout=30)
                rc = p.returncode
            except subprocess.TimeoutExpired:
                p.kill()
                o, _ = p.communicate()
                rc = None
            what = "traced" if traced else "untraced"
            check(rc is not None, "%s, %s: hung (killed after 30 s): %s" % (name, what, o))
            check(rc == 0 and "ok" in o, "%s, %s: exit %s (want 0): %s" % (name, what, rc, o))
        for x in close:
            os.close(x)
        print("%s: traced and untraced exit 0" % name)


def t_vfork_sigaction():
    # Item 6: a vfork child that resets SIGTERM/SIGUSR1 to SIG_DFL before
    # exec (CPython's _posixsubprocess) must not change its parent's
    # handlers, which share the tracer's memory with it.
    for traced in (False, True):
        rc, o, e = run_diag(["vfork"], base_env() if traced else untraced_env())
        check(rc == 0 and "ok" in o, "%s: exit %s (want 0: its handlers ran): %s %s" %
              ("traced" if traced else "untraced", rc, o, e))
    print("vfork child reset SIGTERM/SIGUSR1: parent's handlers still run, traced and untraced")


def sig_caught(pid):
    with open("/proc/%d/status" % pid) as f:
        for ln in f:
            if ln.startswith("SigCgt:"):
                return int(ln.split()[1], 16)
    return 0


def t_usr1_no_nccl():
    # Item 12: a process under the preload that never calls NCCL (sleep, a
    # shell, python) keeps the default actions: SIGUSR1 kills it as untraced
    # (138), and it has no handler of ours.  A fork child of a traced process
    # that makes no NCCL call of its own dies of SIGUSR1 too.
    import signal
    progs = [[E["diag"], "idle"], [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"]]
    for argv in progs:
        for traced in (False, True):
            env = base_env() if traced else untraced_env()
            p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            check(p.stdout.readline().strip() == "ready", "%s did not start" % argv[0])
            caught = sig_caught(p.pid)
            p.send_signal(signal.SIGUSR1)
            rc, o, e = finish(p, timeout=15)
            what = "%s %s" % ("traced" if traced else "untraced", os.path.basename(argv[0]))
            check(rc == -signal.SIGUSR1, "%s: SIGUSR1 gave %s, want death by SIGUSR1: %s" % (what, rc, e))
            if traced:
                for s in (signal.SIGUSR1, signal.SIGTERM, signal.SIGSEGV):
                    check(not caught & (1 << (s - 1)), "%s: a handler for %s before any NCCL call" % (what, s.name))
    # sleep, started by the shell under the preload: exit status 138 as untraced
    r = subprocess.run(["sh", "-c", "sleep 30 & p=$!; sleep 0.5; kill -USR1 $p; wait $p; echo $?"],
                       env=base_env(), capture_output=True, text=True, timeout=60)
    check(r.stdout.strip() == "138", "LD_PRELOAD sleep, kill -USR1: exit %r, want 138: %s" % (r.stdout, r.stderr))
    p = subprocess.Popen([E["diag"], "forkidle"], env=base_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    ln = p.stdout.readline().split()
    check(len(ln) == 2 and ln[0] == "ready", "forkidle did not start: %s" % ln)
    os.kill(int(ln[1]), signal.SIGUSR1)
    rc, o, e = finish(p, timeout=15)
    check(rc == 0 and "child signal %d" % signal.SIGUSR1 in o, "fork child without NCCL: %s %s" % (o, e))
    print("SIGUSR1 kills diag idle, python, sleep and a fork child without NCCL, traced as untraced")


def t_fork_child_comm():
    # Item 9: a fork child (no exec) that makes its own comm, runs 20
    # AllReduce, synchronizes and ends with _exit(0), as Python's
    # multiprocessing children do.  Its exit dump must say all 20 completed
    # and analyze must not call its healthy run a stall.
    rc, o, e = run_diag(["forkcomm", "20"], base_env(NCCLTRACE_JOB="forkjob"))
    check(rc == 0 and "exit 0" in o, "exited %s: %s %s" % (rc, o, e))
    child = int(o.split("child ")[1].split()[0])
    dumpdir = os.path.join(TMP, "dumps")
    dumps = exit_dumps(dumpdir, child)
    check(len(dumps) == 1, "no exit dump of the child %d: %s" % (child, os.listdir(dumpdir)))
    comms = json.loads(decode(dumps[0]))["comms"]
    done = [(c["last_enqueued"], c["last_completed"]) for c in comms]
    an = subprocess.run([E["tool"], "analyze", "--json", dumpdir], capture_output=True, text=True, timeout=60)
    verdict = json.loads(an.stdout)["verdict"]["class"] if an.stdout.strip() else an.stderr
    print("fork child: (enqueued, completed) per comm %s; analyze: %s" % (done, verdict))
    check(done == [(20, 20)], "the child's dump: (enqueued, completed) %s, want [(20, 20)]" % done)
    check(verdict == "healthy", "analyze called the healthy parent and child %r" % verdict)


def t_fsize_ring():
    # Low item: a small `ulimit -f` limits every file the process writes;
    # the lines must name RLIMIT_FSIZE and its value, never "free space".
    import resource
    for lim, n in ((4 << 20, 10), (8 << 10, 70000)):
        def pre(lim=lim):
            resource.setrlimit(resource.RLIMIT_FSIZE, (lim, lim))
        p = subprocess.Popen([E["prog"], "fill", str(n)], env=base_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, preexec_fn=pre)
        rc, o, e = finish(p)
        check(rc == 0, "RLIMIT_FSIZE=%d: exited %d: %s" % (lim, rc, e))
        said = lines(e)
        print("RLIMIT_FSIZE=%d: %s" % (lim, said))
        check(not [ln for ln in said if "free space" in ln], "RLIMIT_FSIZE=%d reported as free space: %s" % (lim, said))
        check([ln for ln in said if "RLIMIT_FSIZE=%d" % lim in ln and "ring" in ln],
              "RLIMIT_FSIZE=%d: no ring line naming the limit: %s" % (lim, said))
        if lim < 64 << 10:  # the exit dump of 70000 markers is larger than that too
            check([ln for ln in said if "dump failed" in ln and "RLIMIT_FSIZE=%d" % lim in ln],
                  "RLIMIT_FSIZE=%d: no dump line naming the limit: %s" % (lim, said))


def t_tmpdir_unusable():
    # Low item: the ring directory and $TMPDIR both unusable (a regular file
    # in their path): the ring goes to /tmp/nccltrace-<uid>, not to
    # anonymous memory.
    blocker = os.path.join(TMP, "file")
    open(blocker, "w").close()
    env = base_env(NCCLTRACE_RING_DIR=os.path.join(blocker, "rings"), TMPDIR=os.path.join(blocker, "tmp"))
    p = start("wait", 10, env)
    check(p.stdout.readline().strip() == "ready", "did not start")
    mine = "/tmp/nccltrace-%d" % os.geteuid()
    rings = glob.glob(os.path.join(mine, "*-%d-*.ring" % p.pid)) + glob.glob(os.path.join(mine, "*-%d.ring" % p.pid))
    # the tools look there too: status from the default directory, with
    # the same unusable $TMPDIR
    senv = {k: v for k, v in env.items() if k not in ("NCCLTRACE_RING_DIR", "LD_PRELOAD")}
    st_ = subprocess.run([E["tool"], "status"], env=senv, capture_output=True, text=True, timeout=30)
    p.stdin.write("go\n")
    p.stdin.flush()
    rc, o, e = finish(p)
    check(rc == 0, "exited %d: %s" % (rc, e))
    fl = fallback_lines(e)
    print(fl)
    check(rings, "no ring of pid %d in %s: %s" % (p.pid, mine, os.listdir(mine) if os.path.isdir(mine) else "none"))
    check(len(fl) == 1 and mine in fl[0] and "anonymous" not in fl[0], "want one line naming %s: %s" % (mine, fl))
    check(str(p.pid) in st_.stdout, "status does not find the ring in %s: %s %s" % (mine, st_.stdout, st_.stderr))


TESTS = {k[2:]: v for k, v in globals().items() if k.startswith("t_")}


def main():
    global TMP
    if len(sys.argv) != 2 or sys.argv[1] not in TESTS:
        print("usage: hostile_e2e.py {%s}" % ",".join(sorted(TESTS)), file=sys.stderr)
        return 1
    for k in ("lib", "emu", "tool", "hostile", "diag", "rank"):
        E[k] = os.environ.get("NTI_TEST_" + k.upper(), "")
    E["prog"] = E["hostile"]
    if os.environ.get("NTI_TEST_SANITIZED", "none") not in ("", "none"):
        skip("LD_PRELOAD of a sanitizer-built libnccltrace.so into other programs")
    TMP = tempfile.mkdtemp(prefix="nti-hostile-" + sys.argv[1] + "-")
    try:
        TESTS[sys.argv[1]]()
    finally:
        for m in reversed(MOUNTS):
            subprocess.run(["umount", "-l", m], capture_output=True)
        shutil.rmtree(TMP, ignore_errors=True)
    print("PASS " + sys.argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())

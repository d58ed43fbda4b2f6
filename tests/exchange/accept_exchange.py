#!/usr/bin/env python3
"""accept_exchange.py -- acceptance tests of the cross-rank check with
LD_PRELOAD=libnccltrace.so on the CPU emulator (tests/emu), 4 ranks started
the way torchrun does (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), the
coordinator discovered from MASTER_ADDR/MASTER_PORT and hosted by rank 0
unless said otherwise.  One test per invocation:

  strict        NCCLTRACE_CHECK=strict, rank 1 Broadcast where the others
                AllReduce: ncclInvalidUsage on all 4, nothing enqueued (the
                next AllReduce sums right), stderr names seq, ranks, field
  async         NCCLTRACE_CHECK=async, NCCLTRACE_TIMEOUT=600, same mismatch:
                every rank prints it once, records it within 100 ms of the
                later rank's call (ring timestamps) and dumps
  sigkill       SIGKILL of rank 2: ranks 0,1,3 name it within 1 s and dump
  noinit        rank 3 never calls init: the others are told their init waits
                for rank 3
  coord_killed  standalone `nccltrace coord`, SIGKILLed mid-run: the ranks
                finish their collectives correctly and exit 0

Strict mode on one host (LOCAL_WORLD_SIZE=4: the shared-memory board,
docs/wire-protocol.md "Strict mode on one host"; `strict` above runs there
too and asserts it, by the "strict-shm" note each rank records):

  strict_noshm  `strict` with NCCLTRACE_STRICT_SHM=0: the coordinator path,
                no board used
  strict_shm_kill  rank 2 SIGKILLed while the others wait for it in a
                strict AllReduce: they proceed (the call is enqueued) within
                1 s, far below NCCLTRACE_STRICT_TIMEOUT=20, and say so
  strict_shm_stop  the same with rank 2 SIGSTOPped (alive, never comes) and
                NCCLTRACE_STRICT_TIMEOUT=2: the others proceed after that
                wait (not before, and within 2 s more), and say so once
  strict_shm_garbage  a job on a communicator id, then random bytes planted
                at its board's path, then `strict` again on the same id: the
                board is replaced, the verdict is the same, nothing crashes;
                then a symlink there: not followed, the coordinator path
                gives the same verdict

Through node aggregators: 2 "hosts" of 2 ranks on this machine
(WORLD_SIZE=4, LOCAL_WORLD_SIZE=2, NCCLTRACE_AGG_HOST=hostA|hostB: each
host elects its own aggregator, which connects to the root in rank 0):

  agg_async     the async mismatch above: reported on all 4 ranks through
                the aggregators, within 100 ms of the later call
  agg_sigkill   SIGKILL of the rank of hostB that does not host its
                aggregator: ranks 0,1 (behind hostA's) name it within 1 s
  agg_handover  the process hosting hostB's aggregator exits mid-run; the
                other rank of hostB elects a new one, and a mismatch on the
                3 remaining ranks is still reported on all 3 (and nobody
                reports a lost rank: it was a clean exit)
  agg_host_killed  SIGKILL of the rank hosting hostB's aggregator: ranks
                0,1 are told within 1 s that the process hosting it was
                lost; the other rank of hostB says so and elects a new one

Forgery: a forger (forge.c) that speaks protocol v3 but
holds only the key anyone can derive from public values (uid, job id,
MASTER_ADDR/PORT), never a unique id:

  squat         it binds MASTER_PORT+17 before rank 0 and plays the
                coordinator (WELCOME, forged MISMATCH and PEER_LOST
                verdicts, "mismatch" to every STRICT) to a 4-rank strict job
                on the coordinator path: every collective returns
                ncclSuccess, nobody reports or dumps anything, each rank
                says once that the coordinator could not prove it holds the
                key, and the forger never gets a REGISTER (comm ids, NCCL_*)
  forge         it connects 20 times to the real coordinator of an async
                job and says HELLO as rank 0, REGISTER, fingerprints, then
                closes without BYE: no connection is welcomed, no rank
                reports a lost rank or a mismatch, no dump

Paths come from the environment (set by meson): NTX_LIB, NTX_EMU, NTX_TOOL,
NTX_RANK, NTX_FORGE.  Exit: 0 pass, 1 fail, 77 skip.
"""
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

N = 4


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Job:
    def __init__(self, tmp, mode, extra_env, coord=None, rank_env=None, port=None):
        self.tmp = tmp
        self.procs = []
        port = port or free_port()
        idfile = os.path.join(tmp, "id")
        for r in range(N):
            env = dict(os.environ)
            for k in list(env):
                if k.startswith("NCCLTRACE_") or k in ("LD_PRELOAD", "NCCLEMU_FAULT"):
                    del env[k]
            env.update({
                "LD_LIBRARY_PATH": os.environ["NTX_EMU"], "NCCLEMU_DEVICES": "8",
                "LD_PRELOAD": os.environ["NTX_LIB"],
                "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(N),
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port - 17),
                "NCCLTRACE_RING_DIR": os.path.join(tmp, "rings"),
                "NCCLTRACE_DIR": os.path.join(tmp, "dumps"),
                "NCCLTRACE_JOB": "xacc",
            })
            if coord:
                env["NCCLTRACE_COORD"] = coord
            env.update(extra_env)
            if rank_env:
                env.update(rank_env(r))
            err = open(os.path.join(tmp, "err.%d" % r), "w")
            out = open(os.path.join(tmp, "out.%d" % r), "w")
            self.procs.append(subprocess.Popen(
                [os.environ["NTX_RANK"], mode, str(r), str(N), idfile],
                env=env, stdout=out, stderr=err))

    def text(self, kind, r):
        with open(os.path.join(self.tmp, "%s.%d" % (kind, r))) as f:
            return f.read()

    def wait_text(self, kind, ranks, needle, timeout):
        end = time.time() + timeout
        while time.time() < end:
            if all(needle in self.text(kind, r) for r in ranks):
                return True
            time.sleep(0.02)
        return False

    def wait(self, timeout):
        end = time.time() + timeout
        for p in self.procs:
            try:
                p.wait(max(0.1, end - time.time()))
            except subprocess.TimeoutExpired:
                pass
        return [p.poll() for p in self.procs]

    def kill_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()

    def show(self):
        for r in range(N):
            print("--- rank %d stdout:\n%s--- rank %d stderr:\n%s" % (r, self.text("out", r), r, self.text("err", r)))


def decode(path):
    p = subprocess.run([os.environ["NTX_TOOL"], "decode", "--json", path],
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, "decode %s: %s" % (path, p.stderr.strip()))
    return json.loads(p.stdout)


def rings(tmp):
    return sorted(glob.glob(os.path.join(tmp, "rings", "*.ring")))


def dump_triggers(tmp):
    out = []
    for d in glob.glob(os.path.join(tmp, "dumps", "*")):
        j = decode(d)
        out.append((j.get("header", {}).get("rank"), j.get("trigger", {}).get("kind")))
    return out


def wait_dumps(tmp, trigger, n, timeout):
    """Dumps are written by the rank after the line is printed: wait for them."""
    end = time.time() + timeout
    while time.time() < end:
        if len(glob.glob(os.path.join(tmp, "dumps", "*%s*" % trigger))) >= n:
            return True
        time.sleep(0.05)
    return False


def shm_notes(tmp):
    """Ranks whose ring (or, once it exited, its exit dump) says their
    strict calls went through a board."""
    out = set()
    paths = rings(tmp) + glob.glob(os.path.join(tmp, "dumps", "*-exit.zst"))
    for path in paths:
        recs = decode(path)["records"]
        out |= {x.get("rank") for x in recs if x["kind"] == "Note" and x.get("text") == "strict-shm"}
    return sorted(out)


def t_strict(tmp, shm=True, extra=None, board=None):
    env = {"NCCLTRACE_CHECK": "strict", "NCCLTRACE_STRICT_TIMEOUT": "20", "LOCAL_WORLD_SIZE": str(N)}
    if not shm:
        env["NCCLTRACE_STRICT_SHM"] = "0"
    env.update(extra or {})
    job = Job(tmp, "mismatch", env)
    codes = job.wait(40)
    job.kill_all()
    job.show()
    check(codes == [0] * N, "exit codes %s" % codes)
    for r in range(N):
        out, err = job.text("out", r), job.text("err", r)
        check("seq4 invalid usage" in out.lower() or "seq4 ncclinvalidusage" in out.lower(),
              "rank %d: seq 4 not refused: %s" % (r, out))
        check("after ok" in out, "rank %d: the AllReduce after the refusal failed" % r)
        check("seq 4 field op: rank 1 Broadcast(count=64, float32, root=0) vs ranks 0,2,3 "
              "AllReduce(count=64, float32, sum)" in err, "rank %d stderr lacks the verdict" % r)
        check(err.count("nccltrace: mismatch on comm") == 1, "rank %d: not exactly one mismatch line" % r)
    notes = shm_notes(tmp)
    if board is None:
        board = shm
    if board:
        check(notes == list(range(N)), "shared-memory path not taken on every rank: %s" % notes)
    else:
        check(not notes, "NCCLTRACE_STRICT_SHM=0 but a board was used: %s" % notes)
    check(wait_dumps(tmp, "mismatch", N, 10), "not every rank dumped the mismatch")


def t_strict_noshm(tmp):
    t_strict(tmp, shm=False)


def t_strict_shm_kill(tmp):
    job = Job(tmp, "strictkill", {"NCCLTRACE_CHECK": "strict", "NCCLTRACE_STRICT_TIMEOUT": "20",
                                  "LOCAL_WORLD_SIZE": str(N)})
    check(job.wait_text("out", range(N), "ready", 30), "ranks not ready")
    time.sleep(0.5)
    t0 = time.time()
    job.procs[2].send_signal(signal.SIGKILL)
    ok = job.wait_text("out", [0, 1, 3], "enqueued", 19)
    dt = time.time() - t0
    job.kill_all()
    job.show()
    check(ok and dt < 1.0, "survivors proceeded after %.3f s" % dt)
    for r in (0, 1, 3):
        check("enqueued no error" in job.text("out", r), "rank %d: the call was not accepted" % r)
        check("rank 2 (pid" in job.text("err", r) and "is gone" in job.text("err", r),
              "rank %d did not say rank 2 is gone" % r)
    check(shm_notes(tmp) == list(range(N)), "shared-memory path not taken: %s" % shm_notes(tmp))
    print("survivors of the SIGKILL proceeded within %.0f ms" % (dt * 1e3))


def t_strict_shm_stop(tmp):
    job = Job(tmp, "strictkill", {"NCCLTRACE_CHECK": "strict", "NCCLTRACE_STRICT_TIMEOUT": "2",
                                  "LOCAL_WORLD_SIZE": str(N)})
    check(job.wait_text("out", range(N), "ready", 30), "ranks not ready")
    job.procs[2].send_signal(signal.SIGSTOP)
    t0 = time.time()
    ok = job.wait_text("out", [0, 1, 3], "enqueued", 10)
    dt = time.time() - t0
    job.procs[2].send_signal(signal.SIGCONT)
    job.kill_all()
    job.show()
    check(ok and 1.5 < dt < 4.0, "survivors proceeded after %.3f s (timeout 2 s)" % dt)
    for r in (0, 1, 3):
        err = job.text("err", r)
        check(err.count("not every rank there within NCCLTRACE_STRICT_TIMEOUT=2s") == 1,
              "rank %d did not say once that it proceeded unchecked" % r)
    print("survivors of the SIGSTOP proceeded after %.0f ms" % (dt * 1e3))


def t_strict_shm_garbage(tmp):
    env = {"NCCLTRACE_CHECK": "strict", "NCCLTRACE_STRICT_TIMEOUT": "20", "LOCAL_WORLD_SIZE": str(N)}
    job = Job(tmp, "steady", env)
    check(job.wait_text("out", range(N), "ready", 30), "first job not ready")
    boards = glob.glob(os.path.join(tmp, "rings", "strict-*.board"))
    codes = job.wait(40)
    job.kill_all()
    check(codes == [0] * N and len(boards) == 1, "first job: codes %s boards %s" % (codes, boards))
    check(not os.path.exists(boards[0]), "the board outlived its job")
    for path in rings(tmp) + glob.glob(os.path.join(tmp, "dumps", "*")):
        os.unlink(path)
    fd = os.open(boards[0], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, os.urandom(8192))
    os.close(fd)
    t_strict(tmp, extra={"XRANK_REUSE_ID": "1"})
    check(not os.path.exists(boards[0]), "the replaced board outlived its job")
    # A symlink there is never followed: every rank uses the coordinator.
    for path in glob.glob(os.path.join(tmp, "dumps", "*")):
        os.unlink(path)
    target = os.path.join(tmp, "target")
    with open(target, "wb") as f:
        f.write(b"\0" * 8192)
    os.symlink(target, boards[0])
    t_strict(tmp, extra={"XRANK_REUSE_ID": "1"}, board=False)
    with open(target, "rb") as f:
        check(f.read() == b"\0" * 8192, "the symlink's target was written")


def check_op_verdict(job, tmp, how):
    """Rank 1's Broadcast at seq 4 against AllReduce: every rank printed
    exactly one mismatch line naming it, and recorded the verdict within
    100 ms of the later rank's call (both times from the rings)."""
    for r in range(N):
        err = job.text("err", r)
        check(err.count("nccltrace: mismatch on comm") == 1, "rank %d: not exactly one line" % r)
        check("seq 4 field op: rank 1 Broadcast" in err, "rank %d: wrong verdict" % r)
    calls, verdicts = [], []
    for path in rings(tmp):
        recs = decode(path)["records"]
        c = [x["t_ns"] for x in recs if x.get("seq") == 4 and x["kind"] in ("AllReduce", "Broadcast")]
        v = [x["t_ns"] for x in recs if x["kind"] == "Mismatch"]
        check(c and v, "%s: call %s verdict %s" % (path, c, v))
        if c and v:
            calls.append(min(c))
            verdicts.append(min(v))
    check(len(calls) == N, "expected %d rings, got %d" % (N, len(calls)))
    later = max(calls, default=0)
    for v in verdicts:
        ms = (v - later) / 1e6
        print("verdict recorded %.2f ms after the later rank's call%s" % (ms, how))
        check(0 <= ms < 100, "verdict %.2f ms after the later call" % ms)


def run_async_mismatch(tmp, rank_env=None):
    """The mismatch job in async mode, until every rank has told and dumped;
    returns it killed.  A small ring keeps the 4 dumps cheap: on 2 shared
    cores, dumps written by the first ranks told must not starve the last
    one (the latency measured is the check's, not the dump writer's)."""
    job = Job(tmp, "mismatch", {"NCCLTRACE_CHECK": "async", "NCCLTRACE_TIMEOUT": "600",
                                "NCCLTRACE_RING": "4096"}, rank_env=rank_env)
    ok = job.wait_text("err", range(N), "nccltrace: mismatch on comm", 20)
    job.wait_text("out", range(N), "hung", 5)
    wait_dumps(tmp, "mismatch", N, 10)
    job.kill_all()
    job.show()
    check(ok, "not every rank printed the mismatch")
    return job


def t_async(tmp):
    job = run_async_mismatch(tmp)
    check_op_verdict(job, tmp, "")
    trig = dump_triggers(tmp)
    check(sum(1 for _, k in trig if k == "mismatch") >= N, "mismatch dumps: %s" % trig)


def t_sigkill(tmp):
    job = Job(tmp, "idle", {"NCCLTRACE_CHECK": "async"})
    check(job.wait_text("out", range(N), "ready", 30), "ranks not ready")
    time.sleep(0.3)
    t0 = time.time()
    job.procs[2].send_signal(signal.SIGKILL)
    ok = job.wait_text("err", [0, 1, 3], "nccltrace: lost rank 2 (host", 5)
    dt = time.time() - t0
    wait_dumps(tmp, "peer_lost", 3, 10)
    job.kill_all()
    job.show()
    check(ok and dt < 1.0, "survivors told after %.3f s" % dt)
    print("survivors named rank 2 within %.0f ms" % (dt * 1e3))
    trig = dump_triggers(tmp)
    check(sum(1 for _, k in trig if k == "peer_lost") >= 3, "peer_lost dumps: %s" % trig)


def t_noinit(tmp):
    job = Job(tmp, "noinit", {"NCCLTRACE_CHECK": "async", "NCCLTRACE_SKEW_S": "2"})
    ok = job.wait_text("err", [0, 1, 2], "init: waiting for rank 3 (never joined)", 15)
    job.kill_all()
    job.show()
    check(ok, "ranks 0-2 were not told that rank 3 never joined")


def t_coord_killed(tmp):
    port = free_port()
    env = dict(os.environ, NCCLTRACE_SECRET="acceptance")
    coord = subprocess.Popen([os.environ["NTX_TOOL"], "coord", "--listen", "127.0.0.1:%d" % port, "--quiet"],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    job = Job(tmp, "steady", {"NCCLTRACE_CHECK": "async", "NCCLTRACE_SECRET": "acceptance"},
              coord="127.0.0.1:%d" % port)
    ready = job.wait_text("out", range(N), "ready", 30)
    coord.kill()
    coord.wait()
    codes = job.wait(30)
    job.kill_all()
    job.show()
    check(ready, "ranks not ready")
    check(codes == [0] * N, "exit codes %s" % codes)
    for r in range(N):
        check("done" in job.text("out", r), "rank %d did not finish" % r)
        check("lost the coordinator" in job.text("err", r), "rank %d did not say the coordinator went" % r)


def forge_env(port):
    """The environment a forger on this machine sees: what the ranks'
    public-value key is derived from (uid, job id, MASTER_ADDR/PORT)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCLTRACE_")}
    env.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port - 17), "NCCLTRACE_JOB": "xacc"})
    return env


def read_report(path):
    with open(path) as f:
        return {k: int(v) for k, v in (line.split() for line in f if line.strip())}


def check_nothing_forged(job, tmp):
    """No rank printed or dumped anything the forger tried to cause."""
    for r in range(N):
        err = job.text("err", r)
        for bad in ("mismatch on comm", "lost rank", "forged", "hosted the coordinator"):
            check(bad not in err, "rank %d printed %r: %s" % (r, bad, err))
    trig = dump_triggers(tmp)
    check(all(k == "exit" for _, k in trig), "dumps other than exit: %s" % trig)


def t_squat(tmp):
    port = free_port()
    report = os.path.join(tmp, "squat.report")
    forger = subprocess.Popen([os.environ["NTX_FORGE"], "squat", "127.0.0.1", str(port), report],
                              env=forge_env(port), stdout=subprocess.PIPE, text=True)
    check(forger.stdout.readline().strip() == "listening", "the forger did not bind")
    job = Job(tmp, "steady", {"NCCLTRACE_CHECK": "strict", "NCCLTRACE_STRICT_SHM": "0",
                              "NCCLTRACE_STRICT_TIMEOUT": "5", "LOCAL_WORLD_SIZE": str(N)}, port=port)
    codes = job.wait(40)
    job.kill_all()
    forger.terminate()
    forger.wait()
    job.show()
    got = read_report(report)
    print("the squatter got %s" % got)
    check(codes == [0] * N, "exit codes %s (a refused collective fails the rank)" % codes)
    for r in range(N):
        check("done" in job.text("out", r), "rank %d did not finish its 60 AllReduce" % r)
        check(job.text("err", r).count("could not prove it holds this job's key") == 1,
              "rank %d did not say once that the coordinator is not verified" % r)
    check(got["hello"] >= 1, "no rank even tried the squatter: the test proves nothing")
    check(got["register"] == 0 and got["strict"] == 0 and got["fp"] == 0,
          "the squatter received comm ids / fingerprints: %s" % got)
    check_nothing_forged(job, tmp)


def t_forge(tmp):
    port = free_port()
    job = Job(tmp, "idle", {"NCCLTRACE_CHECK": "async"}, port=port)
    check(job.wait_text("out", range(N), "ready", 30), "ranks not ready")
    report = os.path.join(tmp, "forge.report")
    p = subprocess.run([os.environ["NTX_FORGE"], "flood", "127.0.0.1", str(port), "20", report],
                       env=forge_env(port), timeout=30)
    check(p.returncode == 0, "forge flood failed")
    time.sleep(1.0)  # a believed loss is told within milliseconds, dumps within a second
    try:  # judged while the job runs: killing rank 0 is a loss the others report
        job.show()
        check_nothing_forged(job, tmp)
    finally:
        job.kill_all()
    with open(report) as f:
        line = f.read().strip()
    print("the forger: %s" % line)
    check(line == "welcomed 0 of 20", "the coordinator welcomed a forger: %s" % line)


def agg_env(r):
    """2 hosts of 2 ranks: hostA = ranks 0,1, hostB = ranks 2,3."""
    return {"LOCAL_RANK": str(r % 2), "LOCAL_WORLD_SIZE": "2",
            "NCCLTRACE_AGG_HOST": "hostA" if r < 2 else "hostB", "NCCLTRACE_VERBOSE": "1"}


AGG_HOSTED = "node aggregator for host %s started in this process"


def agg_hosts(job):
    """The rank hosting each host's aggregator (from the verbose lines); checks one each."""
    hosts = {}
    for name, ranks in (("hostA", (0, 1)), ("hostB", (2, 3))):
        h = [r for r in ranks if AGG_HOSTED % name in job.text("err", r)]
        check(len(h) == 1, "%s: aggregator hosted by ranks %s, want exactly one" % (name, h))
        hosts[name] = h[0]
    return hosts


def t_agg_async(tmp):
    job = run_async_mismatch(tmp, rank_env=agg_env)
    hosts = agg_hosts(job)
    print("aggregators hosted by ranks %s" % hosts)
    for r in range(N):
        err = job.text("err", r)
        check("through this host's node aggregator" in err, "rank %d did not connect through an aggregator" % r)
    check_op_verdict(job, tmp, " (through 2 aggregators)")


def t_agg_sigkill(tmp):
    job = Job(tmp, "idle", {"NCCLTRACE_CHECK": "async"}, rank_env=agg_env)
    check(job.wait_text("out", range(N), "ready", 30), "ranks not ready")
    time.sleep(0.3)
    hosts = agg_hosts(job)
    victim = 5 - hosts["hostB"]  # the rank of hostB that is only a client of its aggregator
    t0 = time.time()
    job.procs[victim].send_signal(signal.SIGKILL)
    needle = "nccltrace: lost rank %d (host hostB" % victim
    ok = job.wait_text("err", [0, 1], needle, 5)
    dt = time.time() - t0
    local = job.wait_text("err", [hosts["hostB"]], needle, 2)
    job.kill_all()
    job.show()
    check(ok and dt < 1.0, "ranks behind hostA's aggregator told after %.3f s" % dt)
    check(local, "rank %d (hosting hostB's aggregator) was not told" % hosts["hostB"])
    print("ranks 0,1 (hostA) named rank %d (hostB, behind an aggregator) within %.0f ms" % (victim, dt * 1e3))


def t_agg_handover(tmp):
    job = Job(tmp, "handover", {"NCCLTRACE_CHECK": "async", "NCCLTRACE_TIMEOUT": "600"}, rank_env=agg_env)
    check(job.wait_text("out", range(N), "ready", 30), "ranks not ready")
    hosts = agg_hosts(job)
    leaver = hosts["hostB"]
    if leaver == 0:  # rank 0 also hosts the root: its exit ends checking for everybody, by design
        job.kill_all()
        fail("rank 0 hosts hostB's aggregator: bad host split")
    with open(os.path.join(tmp, "id.leaver.tmp"), "w") as f:
        f.write("%d\n" % leaver)
    os.rename(os.path.join(tmp, "id.leaver.tmp"), os.path.join(tmp, "id.leaver"))
    rest = [r for r in range(N) if r != leaver]
    left = job.wait_text("out", [leaver], "left", 20)
    ok = job.wait_text("err", rest, "nccltrace: mismatch on comm", 20)
    errs = {r: job.text("err", r) for r in range(N)}  # before the kill, which is a loss
    job.kill_all()
    job.show()
    check(left and job.procs[leaver].returncode == 0, "rank %d did not leave cleanly" % leaver)
    check(ok, "the 3 remaining ranks did not all print the mismatch after the hand-over")
    other = 5 - leaver
    check(AGG_HOSTED % "hostB" in errs[other], "rank %d did not take over hostB's aggregator" % other)
    for r in rest:
        e = errs[r]
        check("lost" not in e, "rank %d reported a loss for a clean exit" % r)
        check("field op: rank 1 Broadcast" in e, "rank %d: wrong verdict" % r)
    print("rank %d left; rank %d took over hostB's aggregator; mismatch reported on ranks %s" % (leaver, other, rest))


def t_agg_host_killed(tmp):
    job = Job(tmp, "idle", {"NCCLTRACE_CHECK": "async"}, rank_env=agg_env)
    check(job.wait_text("out", range(N), "ready", 30), "ranks not ready")
    time.sleep(0.3)
    victim = agg_hosts(job)["hostB"]
    other = 5 - victim
    t0 = time.time()
    job.procs[victim].send_signal(signal.SIGKILL)
    ok = job.wait_text("err", [0, 1], "nccltrace: lost the process hosting the node aggregator of host hostB", 5)
    dt = time.time() - t0
    local = job.wait_text("err", [other], "which hosted the node aggregator", 2)
    again = job.wait_text("err", [other], AGG_HOSTED % "hostB", 3)
    job.kill_all()
    job.show()
    check(ok and dt < 1.0, "ranks behind hostA's aggregator told after %.3f s" % dt)
    check(local, "rank %d (hostB) did not report the loss of its aggregator's host" % other)
    check(again, "rank %d did not elect itself hostB's new aggregator" % other)
    print("rank %d (hosting hostB's aggregator) killed: ranks 0,1 told within %.0f ms; rank %d took over"
          % (victim, dt * 1e3, other))


def main():
    for k in ("NTX_LIB", "NTX_EMU", "NTX_TOOL", "NTX_RANK", "NTX_FORGE"):
        if not os.environ.get(k):
            print("skip: %s not set" % k)
            sys.exit(77)
    test = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="ntx-acc-")
    os.chmod(tmp, 0o700)
    try:
        {"strict": t_strict, "async": t_async, "sigkill": t_sigkill, "noinit": t_noinit,
         "coord_killed": t_coord_killed, "agg_async": t_agg_async, "agg_sigkill": t_agg_sigkill,
         "agg_handover": t_agg_handover, "agg_host_killed": t_agg_host_killed,
         "strict_noshm": t_strict_noshm, "strict_shm_kill": t_strict_shm_kill,
         "strict_shm_stop": t_strict_shm_stop,
         "strict_shm_garbage": t_strict_shm_garbage, "squat": t_squat, "forge": t_forge}[test](tmp)
    finally:
        if os.environ.get("NTX_KEEP"):
            print("kept " + tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print("%s: ok" % test)


if __name__ == "__main__":
    main()

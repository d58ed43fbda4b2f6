#!/usr/bin/env python3
"""hostile_exchange.py -- the exchange in a hostile or cramped process
(docs/reliability.md, items 2, 3 and 5), with LD_PRELOAD=libnccltrace.so
on the CPU emulator, ranks started as torchrun does (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT), the coordinator embedded in rank 0.  One test
per invocation:

  closefds   2 ranks, async check; after init each closes fds 3..1023,
             opens 8 files, writes known content, runs 5 more AllReduce and
             exits: both exit 0 within 10 s, the files hold exactly what was
             written (no tracer byte in them), and the processes used far
             less CPU than their wall time (no thread spinning on a
             descriptor that is not its own)
  flood      rank 0 alone under RLIMIT_NOFILE 1024 opens 32 files at a time
             in a loop while 1,100 idle TCP connections are made to the
             coordinator's port: no open() fails, exit 0, and the tracer
             uses under 10% of a core during the flood (process CPU over the
             flood window minus the same window before it)
  flood_mem  1,000 connections each send a frame header announcing 64 KiB
             and 60,000 bytes of it, then stall: rank 0's RSS grows by
             less than 16 MB
  agg_squat  (root) an unprivileged user binds the node aggregator's
             abstract name first (read from /proc/net/unix, as anyone can):
             a strict 2-rank job refuses it with a line naming its pid and
             uid, checks through the coordinator directly, and every
             collective succeeds without waiting for a strict timeout
  frozen_rank, frozen_rank0, frozen_remote
             3 ranks async, one SIGSTOPped 12 s during a loop of AllReduce:
             no "lost" line, no peer_lost dump, a mismatch planted after the
             resume still reported (frozen_remote, root: the coordinator
             under another host name cannot look; the resumed rank says it
             was stopped and reconnects)

Paths come from the environment (set by meson): NTX_LIB, NTX_EMU, NTX_RANK.
Exit: 0 pass, 1 fail, 77 skip.
"""
import os
import pwd
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SQUAT_USER = "nccltrace-squat"


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


def raise_nofile(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(n, hard) if hard != resource.RLIM_INFINITY else n
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


class Job:
    def __init__(self, tmp, mode, nranks, extra, nofile=None, port=None):
        self.tmp, self.n = tmp, nranks
        self.port = port or free_port()
        self.procs = []
        idfile = os.path.join(tmp, "id")
        for r in range(nranks):
            env = {k: v for k, v in os.environ.items()
                   if not k.startswith("NCCLTRACE_") and k not in ("LD_PRELOAD", "NCCLEMU_FAULT")}
            env.update({
                "LD_LIBRARY_PATH": os.environ["NTX_EMU"], "NCCLEMU_DEVICES": "8",
                "LD_PRELOAD": os.environ["NTX_LIB"],
                "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(nranks),
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(self.port - 17),
                "NCCLTRACE_RING_DIR": os.path.join(tmp, "rings"),
                "NCCLTRACE_DIR": os.path.join(tmp, "dumps"),
                "NCCLTRACE_JOB": "xhostile",
            })
            env.update(extra)

            def pre(n=nofile):
                if n:
                    resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
            out = open(os.path.join(tmp, "out.%d" % r), "w")
            err = open(os.path.join(tmp, "err.%d" % r), "w")
            self.procs.append(subprocess.Popen([os.environ["NTX_RANK"], mode, str(r), str(nranks), idfile],
                                               env=env, stdout=out, stderr=err, preexec_fn=pre))

    def text(self, kind, r):
        with open(os.path.join(self.tmp, "%s.%d" % (kind, r))) as f:
            return f.read()

    def wait_text(self, ranks, needle, timeout, kind="out"):
        end = time.time() + timeout
        while time.time() < end:
            if all(needle in self.text(kind, r) for r in ranks):
                return True
            time.sleep(0.02)
        return False

    def wait4(self, timeout):
        """(exit codes, CPU seconds of each process) -- None where still running at timeout."""
        end = time.time() + timeout
        codes, cpu = [None] * self.n, [None] * self.n
        while time.time() < end and None in codes:
            for r, p in enumerate(self.procs):
                if codes[r] is None:
                    pid, status, ru = os.wait4(p.pid, os.WNOHANG)
                    if pid:
                        p.returncode = os.waitstatus_to_exitcode(status)
                        codes[r] = p.returncode
                        cpu[r] = ru.ru_utime + ru.ru_stime
            time.sleep(0.01)
        return codes, cpu

    def kill_all(self):
        for p in self.procs:
            if p.returncode is None:
                try:
                    p.kill()
                    p.wait()
                except (ProcessLookupError, ChildProcessError):
                    pass

    def show(self):
        for r in range(self.n):
            print("--- rank %d stdout:\n%s--- rank %d stderr:\n%s" % (r, self.text("out", r), r, self.text("err", r)))


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def t_closefds(tmp):
    t0 = time.time()
    job = Job(tmp, "closefds", 2, {"NCCLTRACE_CHECK": "async", "NCCLTRACE_TIMEOUT": "600"})
    codes, cpu = job.wait4(10)
    wall = time.time() - t0
    job.kill_all()
    job.show()
    check(codes == [0, 0], "exit codes %s within 10 s, want [0, 0] (a hang at exit?)" % codes)
    for r in range(2):
        for k in range(8):
            with open(os.path.join(tmp, "id.data.%d.%d" % (r, k)), "rb") as f:
                data = f.read()
            want = bytes([ord("A") + k]) * 4096
            check(data == want, "rank %d file %d: %d bytes, %d not %r (the tracer wrote or read there)"
                  % (r, k, len(data), sum(1 for b in data if b != want[0]), chr(want[0])))
    # A thread spinning in epoll_wait/poll on a closed descriptor burns a
    # core for the whole run: the ranks together stay well below one.
    total = sum(cpu)
    print("2 ranks exited 0 in %.2f s, %.2f s of CPU; 16 files intact" % (wall, total))
    check(total < 0.5 * wall + 0.5, "the ranks used %.2f s of CPU in %.2f s: a tracer thread spins" % (total, wall))


def flood_connect(port, n, payload=b""):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        socks.append(s)
    if payload:
        time.sleep(0.2)
        for s in socks:
            try:
                s.send(payload)
            except OSError:
                pass
    return socks


def t_flood(tmp):
    raise_nofile(4096)
    job = Job(tmp, "openloop", 1, {"NCCLTRACE_CHECK": "async", "XRANK_LOOP_S": "5"}, nofile=1024)
    pid = job.procs[0].pid
    try:
        check(job.wait_text([0], "ready", 20), "rank 0 never got ready")
        time.sleep(0.3)
        c0, w0 = cpu_s(pid), time.time()
        time.sleep(1.0)
        c1, w1 = cpu_s(pid), time.time()
        socks = flood_connect(job.port, 1100)
        time.sleep(2.5)
        c2, w2 = cpu_s(pid), time.time()
        base = (c1 - c0) / (w1 - w0)
        flood = (c2 - c1) / (w2 - w1)
        codes, _ = job.wait4(15)
        for s in socks:
            s.close()
    finally:
        job.kill_all()
    job.show()
    out = job.text("out", 0)
    print("1,100 connections: CPU %.1f%% of a core before, %.1f%% during the flood" % (base * 100, flood * 100))
    check(codes == [0], "exit code %s, want 0" % codes)
    check("open failures 0 of" in out, "the application's open() failed: %s" % out.strip().splitlines()[-1:])
    check(flood - base < 0.10, "the tracer used %.0f%% of a core during the flood" % ((flood - base) * 100))


def t_flood_mem(tmp):
    raise_nofile(8192)
    job = Job(tmp, "idle", 1, {"NCCLTRACE_CHECK": "async"}, nofile=8192)
    pid = job.procs[0].pid
    try:
        check(job.wait_text([0], "ready", 20), "rank 0 never got ready")
        time.sleep(0.3)
        r0 = rss_kb(pid)
        # "NX", version 2, HELLO, length 65536, seq 0: judged valid so far
        hdr = b"NX" + bytes([2, 2]) + (65536).to_bytes(4, "little") + bytes(8)
        socks = flood_connect(job.port, 1000, hdr + bytes(60000))
        time.sleep(2.0)
        r1 = rss_kb(pid)
        alive = job.procs[0].poll() is None
        for s in socks:
            s.close()
    finally:
        job.kill_all()
    job.show()
    check(alive, "rank 0 died during the flood")
    print("1,000 unfinished 64 KiB frames: RSS %d -> %d KiB (+%.1f MB)" % (r0, r1, (r1 - r0) / 1024))
    check(r1 - r0 < 16 * 1024, "RSS grew by %.1f MB" % ((r1 - r0) / 1024))


def agg_names():
    with open("/proc/net/unix") as f:
        return sorted({w[1:] for line in f for w in line.split() if w.startswith("@nccltrace-agg-")})


def t_agg_squat(tmp):
    if os.geteuid() != 0:
        print("skip: needs root (a second user)")
        sys.exit(77)
    try:
        pw = pwd.getpwnam(SQUAT_USER)
    except KeyError:
        if subprocess.run(["useradd", "-M", "-r", "-s", "/usr/sbin/nologin", SQUAT_USER]).returncode != 0:
            print("skip: useradd failed")
            sys.exit(77)
        pw = pwd.getpwnam(SQUAT_USER)
    env = {"NCCLTRACE_CHECK": "strict", "NCCLTRACE_AGG": "1", "NCCLTRACE_STRICT_SHM": "0",
           "NCCLTRACE_STRICT_TIMEOUT": "20", "NCCLTRACE_VERBOSE": "1", "LOCAL_WORLD_SIZE": "2",
           "XRANK_REUSE_ID": "1"}
    port = free_port()
    before = set(agg_names())
    # the name, as another user sees it: one job, then /proc/net/unix
    job = Job(tmp, "idle", 2, env, port=port)
    ok = job.wait_text([0, 1], "ready", 20)
    names = sorted(set(agg_names()) - before)
    job.kill_all()
    check(ok and len(names) == 1, "the first job's aggregator name: %s" % names)
    name = names[0]
    rd, wr = os.pipe()
    squat = os.fork()
    if squat == 0:  # the other user: no exec needed (our interpreter may be unreadable to it)
        try:
            os.close(rd)
            os.setgroups([])
            os.setgid(pw.pw_gid)
            os.setuid(pw.pw_uid)
            s = socket.socket(socket.AF_UNIX)
            s.bind("\0" + name)
            s.listen(64)
            os.write(wr, b"bound\n")
            held = []
            while True:
                held.append(s.accept()[0])
        finally:
            os._exit(1)
    os.close(wr)
    try:
        check(os.read(rd, 16) == b"bound\n", "the squatter could not bind @%s" % name)
        t0 = time.time()
        for r in range(2):
            for kind in ("out", "err"):
                os.unlink(os.path.join(tmp, "%s.%d" % (kind, r)))
        job = Job(tmp, "steady", 2, env, port=port)
        codes, _ = job.wait4(15)
        wall = time.time() - t0
        job.kill_all()
        job.show()
    finally:
        os.kill(squat, 9)
        os.waitpid(squat, 0)
    check(codes == [0, 0], "exit codes %s within 15 s (waited for a strict timeout?)" % codes)
    check(wall < 10, "the job took %.1f s: strict calls waited on the squatter" % wall)
    needle = "held by pid %d of uid %d" % (squat, pw.pw_uid)
    for r in range(2):
        err = job.text("err", r)
        check(needle in err, "rank %d did not name the squatter (%r)" % (r, needle))
        check("cross-rank check strict: coordinator" in err, "rank %d never checked through the coordinator" % r)
        check("unchecked" not in err, "rank %d ran unchecked" % r)
    print("@%s squatted by uid %d: refused, named, checked directly; 2 x 60 AllReduce ok in %.1f s"
          % (name, pw.pw_uid, wall))


def need_root(what):
    if os.geteuid() != 0:
        print("skip: needs root (%s)" % what)
        sys.exit(77)


MOUNTS = []


def mount_tmpfs(path, size):
    os.makedirs(path, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=0700" % size, "tmpfs", path],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("skip: cannot mount a tmpfs: %s" % r.stderr.strip())
        sys.exit(77)
    MOUNTS.append(path)


def fill(path):
    """Fill the file system of directory path: a file of every block left."""
    fd = os.open(os.path.join(path, "filler"), os.O_WRONLY | os.O_CREAT, 0o600)
    for chunk in (65536, 512):
        try:
            while True:
                os.write(fd, bytes(chunk))
        except OSError:
            pass
    os.close(fd)


def t_strict_board_full(tmp):
    # Strict mode on one host with the ring directory on a full tmpfs: the
    # rings fall back to $TMPDIR, the board cannot be reserved there.  Every
    # rank says so once, checks through the coordinator (the planted
    # mismatch is still refused) and leaves no board or temporary file.
    need_root("a tmpfs mount")
    shm = os.path.join(tmp, "shm")
    mount_tmpfs(shm, "1m")
    rings = os.path.join(shm, "rings")
    os.makedirs(rings, mode=0o700)
    fill(shm)
    os.makedirs(os.path.join(tmp, "tmp"), exist_ok=True)
    env = {"NCCLTRACE_CHECK": "strict", "NCCLTRACE_STRICT_TIMEOUT": "20", "LOCAL_WORLD_SIZE": "2",
           "NCCLTRACE_RING_DIR": rings, "TMPDIR": os.path.join(tmp, "tmp")}
    job = Job(tmp, "mismatch", 2, env)
    codes, _ = job.wait4(40)
    job.kill_all()
    job.show()
    left = os.listdir(rings)
    check(codes == [0, 0], "exit codes %s, want [0, 0] (135: SIGBUS on the board)" % codes)
    for r in range(2):
        out, err = job.text("out", r), job.text("err", r)
        check("seq4 invalid usage" in out.lower() and "after ok" in out,
              "rank %d: the planted mismatch was not refused: %s" % (r, out))
        said = [ln for ln in err.splitlines() if "no shared-memory board" in ln]
        check(len(said) == 1 and "coordinator" in said[0],
              "rank %d: want one line saying the board could not be made: %s" % (r, said))
    check(not left, "left in the ring directory: %s" % left)
    print("2 ranks exit 0 on a full ring directory; %s" % said[0])


def t_strict_coord_stopped(tmp):
    # A standalone coordinator SIGSTOPped: its TCP connections stay up and
    # nothing is answered.  With NCCLTRACE_STRICT_TIMEOUT=1, 100 strict
    # AllReduce on 3 ranks take about one timeout, not 100 of them: the
    # first call waits it out, the later ones proceed at once, said in one
    # line.  After SIGCONT the coordinator answers again, strict checking
    # re-arms, and a planted mismatch is refused again.
    timeout = 1.0
    port = free_port()
    secret = "stopped-coordinator-test"
    cerr = open(os.path.join(tmp, "coord.err"), "w")
    coord = subprocess.Popen([os.environ["NTX_TOOL"], "coord", "--listen", "127.0.0.1:%d" % port],
                             env=dict(os.environ, NCCLTRACE_SECRET=secret), stdout=cerr, stderr=cerr)
    env = {"NCCLTRACE_CHECK": "strict", "NCCLTRACE_STRICT_TIMEOUT": "%g" % timeout, "NCCLTRACE_STRICT_SHM": "0",
           "NCCLTRACE_COORD": "127.0.0.1:%d" % port, "NCCLTRACE_SECRET": secret}
    n = 3
    job = Job(tmp, "stalled", n, env)
    idfile = os.path.join(tmp, "id")
    try:
        check(job.wait_text(range(n), "ready", 30), "ranks not ready")
        time.sleep(0.3)
        coord.send_signal(signal.SIGSTOP)
        open(idfile + ".go", "w").close()
        # 100 timeouts would be 100 s; the bound is one timeout and change
        done = job.wait_text(range(n), "loop done", 3 * timeout + 5)
        progress = [([ln for ln in job.text("out", r).splitlines() if ln.startswith("calls")] or ["calls 0"])[-1]
                    for r in range(n)]
        coord.send_signal(signal.SIGCONT)
        check(done, "100 strict calls not done %.0f s after the coordinator stopped: %s"
              % (3 * timeout + 5, progress))
        took = [float(job.text("out", r).split("loop done ")[1].split()[0]) for r in range(n)]
        time.sleep(1.0)  # the coordinator catches up and answers what was sent meanwhile
        open(idfile + ".cont", "w").close()
        codes, _ = job.wait4(30)
    finally:
        job.kill_all()
        coord.send_signal(signal.SIGCONT)
        coord.kill()
        coord.wait()
        cerr.close()
    job.show()
    print("100 strict AllReduce with the coordinator stopped took %s s (NCCLTRACE_STRICT_TIMEOUT=%g)"
          % (", ".join("%.2f" % t for t in took), timeout))
    for r in range(n):
        check(took[r] < 3 * timeout, "rank %d: 100 calls took %.2f s, more than 3 timeouts" % (r, took[r]))
        err = job.text("err", r)
        said = [ln for ln in err.splitlines() if "did not answer within NCCLTRACE_STRICT_TIMEOUT" in ln]
        check(len(said) == 1, "rank %d: want one line saying the coordinator stopped answering: %s" % (r, said))
        check(err.count("answers again; strict calls wait for it again") == 1, "rank %d: no line saying strict checking resumed" % r)
        out = job.text("out", r)
        check("mm invalid usage" in out and "after ok" in out,
              "rank %d: after SIGCONT the planted mismatch was not refused: %s" % (r, out.splitlines()[-3:]))
    check(codes == [0] * n, "exit codes %s" % codes)
    print(said[0])


def t_strict_board_cut(tmp):
    # The board file truncated under 2 ranks in the middle of their strict
    # calls (another process of ours, an administrator): the stores into it
    # fault; the tracer takes the SIGBUS, the comm proceeds unchecked with
    # one line per rank, and both ranks finish their 60 AllReduce.
    env = {"NCCLTRACE_CHECK": "strict", "NCCLTRACE_STRICT_TIMEOUT": "20", "LOCAL_WORLD_SIZE": "2"}
    job = Job(tmp, "steady", 2, env)
    check(job.wait_text([0, 1], "ready", 30), "ranks not ready")
    boards = [os.path.join(tmp, "rings", f) for f in os.listdir(os.path.join(tmp, "rings")) if f.endswith(".board")]
    check(len(boards) == 1, "want one board: %s" % boards)
    os.truncate(boards[0], 0)
    codes, _ = job.wait4(20)
    job.kill_all()
    job.show()
    check(codes == [0, 0], "exit codes %s, want [0, 0] (-7: SIGBUS on the board)" % codes)
    for r in range(2):
        err, out = job.text("err", r), job.text("out", r)
        said = [ln for ln in err.splitlines() if "was cut under this process" in ln]
        check(len(said) == 1, "rank %d: want one line saying the board was cut: %s" % (r, said))
        check("done" in out, "rank %d did not finish its calls" % r)
    print(said[0])


def nofile_case(tmp, limit):
    # 4 ranks under RLIMIT_NOFILE=limit, async check, rank 1 Broadcast where
    # the others AllReduce.  Either every rank reports the mismatch, or
    # (only allowed at 32) every rank says once that the check is off for
    # lack of descriptors, naming RLIMIT_NOFILE and its value; never a
    # silent check, nor "no coordinator answers" without the reason.
    n = 4
    # the application holds a quarter of the limit itself (its own files)
    job = Job(tmp, "mismatch", n, {"NCCLTRACE_CHECK": "async", "NCCLTRACE_TIMEOUT": "600",
                                   "XRANK_OPEN_FDS": str(limit // 4)}, nofile=limit)
    verdict = "mismatch on comm"
    named = "RLIMIT_NOFILE=%d" % limit
    end = time.time() + 15
    while time.time() < end:
        errs = [job.text("err", r) for r in range(n)]
        if all(verdict in e or named in e for e in errs) and all("hung" in job.text("out", r) for r in range(n)):
            break
        time.sleep(0.05)
    time.sleep(0.3)  # a second line, if any, has come by now
    job.kill_all()
    job.show()
    errs = [job.text("err", r) for r in range(n)]
    got = ["verdict" if verdict in e else "limit named" if named in e else "nothing" for e in errs]
    print("RLIMIT_NOFILE=%d: %s" % (limit, got))
    for r, e in enumerate(errs):
        lim_lines = [ln for ln in e.splitlines() if "RLIMIT_NOFILE" in ln]
        check(verdict in e or (limit <= 32 and len(lim_lines) == 1 and named in lim_lines[0]),
              "rank %d: no mismatch reported and no line naming %s: %r" % (r, named, e))
        check(len(lim_lines) <= 1, "rank %d: more than one line about the descriptor limit: %s" % (r, lim_lines))
        check("no coordinator answers" not in e or named in e,
              "rank %d: 'no coordinator answers' without naming the descriptor limit" % r)


def t_nofile_held(tmp):
    # RLIMIT_NOFILE=32 with the application holding all but 10 of them
    # from before init: the coordinator (rank 0) cannot take its peers and
    # says so once, naming the limit.
    n = 3
    job = Job(tmp, "mismatch", n, {"NCCLTRACE_CHECK": "async", "NCCLTRACE_TIMEOUT": "600",
                                   "XRANK_FREE_FDS": "10"}, nofile=32)
    named = "RLIMIT_NOFILE=32"
    ok = job.wait_text([0], named, 15, kind="err")
    time.sleep(0.5)
    job.kill_all()
    job.show()
    lim_lines = [ln for ln in job.text("err", 0).splitlines() if named in ln]
    check(ok and len(lim_lines) == 1, "rank 0: want one line naming %s: %s" % (named, lim_lines))
    print(lim_lines[0])


def t_nofile_32(tmp):
    nofile_case(tmp, 32)


def t_nofile_64(tmp):
    nofile_case(tmp, 64)


def t_nofile_80(tmp):
    nofile_case(tmp, 80)


def frozen_case(tmp, victim):
    # 3 ranks, async check, a loop of AllReduce 20 ms apart; rank `victim`
    # SIGSTOPped for 12 s (past the coordinator's 10 s dead timeout; its
    # peers block in their collectives meanwhile), then SIGCONT.  A frozen
    # rank is not a lost one: no "lost rank" line, no peer_lost dump; and
    # checking still works after the resume: a mismatch planted then is
    # reported by every rank.
    n = 3
    job = Job(tmp, "frozen", n, {"NCCLTRACE_CHECK": "async", "NCCLTRACE_TIMEOUT": "600"})
    idfile = os.path.join(tmp, "id")
    verdict = "mismatch on comm"
    try:
        check(job.wait_text(range(n), "calls 20", 30), "ranks not looping")
        job.procs[victim].send_signal(signal.SIGSTOP)
        time.sleep(12)
        job.procs[victim].send_signal(signal.SIGCONT)
        before = [job.text("out", r).count("calls") for r in range(n)]
        # the loop goes on after the resume
        check(job.wait_text(range(n), "calls %d" % (max(before) + 20), 20), "the loop did not resume")
        time.sleep(1.0)
        open(idfile + ".cont", "w").close()
        reported = job.wait_text(range(n), verdict, 20, kind="err")
        time.sleep(0.3)
        # what was said and dumped before the driver kills them (after
        # that, losing rank 0 is real)
        errs = [job.text("err", r) for r in range(n)]
        dumps = os.listdir(os.path.join(tmp, "dumps")) if os.path.isdir(os.path.join(tmp, "dumps")) else []
    finally:
        job.kill_all()
    job.show()
    lost = [(r, ln) for r in range(n) for ln in errs[r].splitlines() if "lost" in ln]
    print("rank %d stopped 12 s: lost-rank lines %d, peer_lost dumps %d, mismatch after resume reported by %d/%d"
          % (victim, len(lost), len([d for d in dumps if "peer_lost" in d]),
             sum(verdict in e for e in errs), n))
    check(not lost, "a frozen rank reported lost: %s" % lost)
    check(not [d for d in dumps if "peer_lost" in d], "peer_lost dumps: %s" % dumps)
    check(reported, "the mismatch planted after the resume was not reported by every rank: %s"
          % [verdict in e for e in errs])


def t_frozen_rank(tmp):
    frozen_case(tmp, 2)


def t_frozen_rank0(tmp):
    frozen_case(tmp, 0)


def t_frozen_remote(tmp):
    # (root: a UTS namespace) The coordinator runs as if on another host
    # (a standalone `nccltrace coord` under another host name), so it
    # cannot look at a silent rank's process: after 10 s it drops rank 2,
    # stopped for 12 s, and tells the others it was lost (all it can know).
    # The resumed rank must not take that for the coordinator's loss: it
    # says it was stopped, reconnects, is admitted again, and a mismatch
    # planted after the resume is reported by every rank, rank 2 included.
    if os.geteuid() != 0 or not shutil.which("unshare"):
        print("skip: needs root and unshare (a UTS namespace for another host name)")
        sys.exit(77)
    port = free_port()
    secret = "frozen-remote-test"
    cerr = open(os.path.join(tmp, "coord.err"), "w")
    coord = subprocess.Popen(["unshare", "--uts", "sh", "-c", 'hostname ntx-elsewhere && exec "$0" coord --listen '
                              '127.0.0.1:%d' % port, os.environ["NTX_TOOL"]],
                             env=dict(os.environ, NCCLTRACE_SECRET=secret), stdout=cerr, stderr=cerr)
    n, victim = 3, 2
    job = Job(tmp, "frozen", n, {"NCCLTRACE_CHECK": "async", "NCCLTRACE_TIMEOUT": "600",
                                 "NCCLTRACE_COORD": "127.0.0.1:%d" % port, "NCCLTRACE_SECRET": secret})
    idfile = os.path.join(tmp, "id")
    verdict = "mismatch on comm"
    try:
        check(job.wait_text(range(n), "calls 20", 30), "ranks not looping")
        job.procs[victim].send_signal(signal.SIGSTOP)
        time.sleep(12)
        job.procs[victim].send_signal(signal.SIGCONT)
        before = [job.text("out", r).count("calls") for r in range(n)]
        check(job.wait_text(range(n), "calls %d" % (max(before) + 20), 20), "the loop did not resume")
        time.sleep(1.5)  # reconnected and registered again by now
        open(idfile + ".cont", "w").close()
        reported = job.wait_text(range(n), verdict, 20, kind="err")
        time.sleep(0.3)
        errs = [job.text("err", r) for r in range(n)]
    finally:
        job.kill_all()
        coord.terminate()  # its counters
        try:
            coord.wait(5)
        except subprocess.TimeoutExpired:
            coord.kill()
            coord.wait()
        cerr.close()
    job.show()
    with open(os.path.join(tmp, "coord.err")) as f:
        print("--- coordinator:\n" + f.read())
    mine = [ln for ln in errs[victim].splitlines() if ln.startswith("nccltrace:")]
    print("rank %d stopped 12 s, coordinator on another host: its lines %s; mismatch after resume reported by %d/%d"
          % (victim, mine, sum(verdict in e for e in errs), n))
    check(not [ln for ln in mine if "lost" in ln], "the resumed rank took its dropped connection for a loss: %s" % mine)
    check(any("was stopped" in ln for ln in mine), "the resumed rank does not say it was stopped: %s" % mine)
    check(reported, "the mismatch planted after the resume was not reported by every rank: %s"
          % [verdict in e for e in errs])


def main():
    for k in ("NTX_LIB", "NTX_EMU", "NTX_RANK"):
        if not os.environ.get(k):
            print("skip: %s not set" % k)
            sys.exit(77)
    test = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="ntx-hostile-")
    os.chmod(tmp, 0o755 if test == "agg_squat" else 0o700)
    try:
        {k[2:]: v for k, v in globals().items() if k.startswith("t_")}[test](tmp)
    finally:
        for m in reversed(MOUNTS):
            subprocess.run(["umount", "-l", m], capture_output=True)
        if os.environ.get("NTX_KEEP"):
            print("kept " + tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print("%s: ok" % test)


if __name__ == "__main__":
    main()

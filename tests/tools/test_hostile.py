#!/usr/bin/env python3
"""test_hostile.py NCCLTRACE MKFIX CASE -- the tools on hostile input.
One CASE per meson test:

  owner     status/collect ignore, one line each, a ring directory or ring
            that another user planted or can write; collect makes no dump
            of it (needs root and useradd: else 77)
  loop      analyze of a tree with symbolic link loops (a/up -> .., b/up ->
            ..) ends at once and reads each file once
  fifo      a FIFO named x.zst is refused with a line by analyze DIR and
            decode, instead of hanging them
  bomb      a dump claiming more payload than its header's ring can hold is
            refused before it is decompressed; one that fits its geometry
            is refused past --max-memory, and the good dumps next to it are
            still analyzed (exit 2, one line)
  truncate  decode/status/collect read a ring that another process keeps
            truncating and extending: no run dies of a signal
  escape    header fields with ESC [2J and newlines, and a file name with
            ESC, reach no output of decode, analyze or status raw
  foreign   a 200 MiB zstd file of another program (a dataset shard) next
            to a dump: analyze names it in one line and its peak RSS stays
            under --max-memory 64M (the magic is checked before reading on)
  deep      a dump 40 directories down: the directory past the 32-level
            limit is named in one line, the dump at the top still analyzed

Exit 0 pass, 1 fail, 77 skip.
"""
import os
import pwd
import resource
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from toolcheck import check, finish, run  # noqa: E402

NT, MKFIX, CASE = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), sys.argv[3]


def timed(*args, timeout=10, **kw):
    """run() that reports a hang as a failed check instead of raising."""
    try:
        return run(*args, timeout=timeout, **kw)
    except subprocess.TimeoutExpired:
        check(False, "%s hung past %d s" % (" ".join(args[:3]), timeout))
        return None


def case_loop(d):
    run(MKFIX, "dump", os.path.join(d, "r0.zst"))
    for sub in ("a", "b", "c"):
        os.mkdir(os.path.join(d, sub))
        os.symlink("..", os.path.join(d, sub, "up"))
    os.symlink("r0.zst", os.path.join(d, "again.zst"))  # the same file twice
    t = time.time()
    p = timed(NT, "analyze", d, d + "/a/up", timeout=15)
    took = time.time() - t
    if p:
        # 1: the fixture's verdict, rank 1 of 2 left nothing (no input unreadable: that would be 2)
        check(p.returncode == 1, "analyze of a looping tree exits 1: %d %r" % (p.returncode, p.stderr[-300:]))
        check("inputs: 1 file, 1 process" in p.stdout, "each file read once: %r" % p.stdout[-200:])
        check(took < 5, "analyze of a looping tree took %.1f s" % took)


def case_fifo(d):
    good = os.path.join(d, "r0.zst")
    run(MKFIX, "dump", good)
    fifo = os.path.join(d, "x.zst")
    os.mkfifo(fifo)
    p = timed(NT, "analyze", d, timeout=10)
    if p:
        lines = [ln for ln in p.stderr.splitlines() if "x.zst" in ln]
        check(p.returncode == 2 and len(lines) == 1 and "not a regular file" in lines[0],
              "analyze DIR with a FIFO: exit 2 and one line naming it: %d %r" % (p.returncode, p.stderr))
        check("inputs: 2 files, 1 process" in p.stdout, "the good dump is still analyzed: %r" % p.stdout[-200:])
    p = timed(NT, "decode", fifo, timeout=10)
    if p:
        check(p.returncode == 2 and p.stderr.strip() == "nccltrace: %s: not a regular file (a FIFO): refused" % fifo,
              "decode of a FIFO refused: %d %r" % (p.returncode, p.stderr))
    os.mkfifo(os.path.join(d, "y.ring"))
    p = timed(NT, "status", "--rings", d, timeout=10)
    if p:
        check(p.returncode == 0, "status next to a FIFO ring exits 0: %d %r" % (p.returncode, p.stderr))


def maxrss_kb():
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss


def case_bomb(d):
    good = os.path.join(d, "good")
    os.mkdir(good)
    run(MKFIX, "dump", os.path.join(good, "r0.zst"), "--rank", "0")
    run(MKFIX, "dump", os.path.join(good, "r1.zst"), "--rank", "1", "--pid", "4243")
    # 1 GiB of empty records in a 33 KB file, from a ring of 64 slots.
    geo = os.path.join(good, "bomb.zst")
    run(MKFIX, "bomb", geo, "--zeros", str((1 << 30) // 128), "--pid", "999", "--rank", "2")  # its own rank
    check(os.path.getsize(geo) < 100000, "the bomb is small: %d bytes" % os.path.getsize(geo))
    t = time.time()
    p = timed(NT, "decode", geo, timeout=20)
    if p:
        check(p.returncode == 2 and "more than a dump of its ring (64 slots" in p.stderr,
              "decode refuses a payload its ring cannot hold: %r" % p.stderr)
    p = timed(NT, "analyze", good, timeout=20)
    took = time.time() - t
    if p:
        lines = [ln for ln in p.stderr.splitlines() if "bomb.zst" in ln]
        check(p.returncode == 2 and len(lines) == 1 and "more than a dump of its ring" in lines[0],
              "analyze refuses the bomb with one line: %d %r" % (p.returncode, p.stderr))
        check("inputs: 3 files, 3 processes" in p.stdout, "the good dumps are analyzed (the bomb as far as its geometry goes): %r" % p.stdout[-300:])
    check(took < 3, "geometry bombs refused in %.1f s" % took)
    check(maxrss_kb() < 200 * 1024, "geometry bombs cost %d KB RSS" % maxrss_kb())

    # A ring of 2^22 slots can dump 512 MiB: geometry lets it through, the
    # memory budget refuses it (and a good dump of another process loads).
    big = os.path.join(d, "big")
    os.mkdir(big)
    shutil.copy(os.path.join(good, "r0.zst"), big)
    run(MKFIX, "bomb", os.path.join(big, "fat.zst"), "--zeros", str((256 << 20) // 128), "--slots",
        str(1 << 22), "--pid", "998")
    p = timed(NT, "analyze", "--max-memory", "64M", big, timeout=20)
    if p:
        lines = [ln for ln in p.stderr.splitlines() if "fat.zst" in ln]
        check(p.returncode == 2 and len(lines) == 1 and "past the memory budget of 64.0 MiB" in lines[0],
              "--max-memory refuses the fat dump with one line: %d %r" % (p.returncode, p.stderr))
        check("inputs: 2 files, 1 process" in p.stdout, "the good dump is analyzed: %r" % p.stdout[-300:])
    p = timed(NT, "analyze", "--max-memory=1G", big, timeout=30)
    if p:
        # 1: nothing refused (that is 2), the fixtures' verdict is a fault
        check(p.returncode == 1 and "fat.zst" not in p.stderr,
              "within the budget the fat dump loads: %d %r" % (p.returncode, p.stderr))
    for bad in ("0", "12Q", "-5M", "M"):
        p = run(NT, "analyze", "--max-memory", bad, good)
        check(p.returncode == 2 and "--max-memory wants a size" in p.stderr, "--max-memory %s refused" % bad)


def case_truncate(d):
    ring = os.path.join(d, "r.ring")
    run(MKFIX, "ring", ring, "--slots", "65536", "--extra", "60000", "--pid", str(os.getpid()))
    data = open(ring, "rb").read()
    dumps = os.path.join(d, "dumps")
    # The writer: shrink the ring to a page, grow it back, over and over.
    w = subprocess.Popen([sys.executable, "-c", """
import os, sys, time
path, data = sys.argv[1], open(sys.argv[1], 'rb').read()
end = time.time() + 120
while time.time() < end:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.ftruncate(fd, 4096)
    os.pwrite(fd, data, 0)
    os.close(fd)
""", ring])
    signals = []
    runs = 0
    t = time.time()
    try:
        # 100 reader runs take seconds on an idle machine; a loaded one (CI
        # runs tests in parallel) gets up to 60 s, not fewer runs.
        while runs < 100 and time.time() - t < 60:
            for cmd in ((NT, "decode", ring), (NT, "decode", "--json", "--salvage", ring),
                        (NT, "status", "--rings", d), (NT, "collect", "--rings", d, "--dir", dumps)):
                p = subprocess.run(cmd, capture_output=True, timeout=20)
                runs += 1
                if p.returncode < 0 or p.returncode > 128:
                    signals.append((cmd[1], p.returncode))
    finally:
        w.kill()
        w.wait()
    check(runs >= 40, "enough reader runs: %d" % runs)
    check(not signals, "no reader died of a signal in %d runs: %r" % (runs, signals[:5]))
    del data


def no_raw_control(text, what):
    bad = [c for c in text if ord(c) < 0x20 and c not in "\n"]
    check(not bad, "%s: no raw control bytes (%r)" % (what, sorted(set(bad))))
    check(not any(ln.startswith("FAKE") for ln in text.splitlines()), "%s: no faked line" % what)


def case_escape(d):
    evil = "h\x1b[2J\nFAKE verdict: healthy"
    dump = os.path.join(d, "r0.zst")
    ring = os.path.join(d, "r1.ring")
    run(MKFIX, "dump", dump, "--host", evil, "--exe", "e\x1b]0;pwned\x07\nFAKE", "--job", "j\x1b[31m\nFAKE")
    run(MKFIX, "ring", ring, "--host", evil, "--exe", "e\x1b[2J\nFAKE", "--pid", "4242", "--rank", "1",
        "--job", "j\x1b[31m\nFAKE")
    junk = os.path.join(d, "x\x1b[2J\nFAKE.zst")
    with open(junk, "wb") as f:
        f.write(b"not a dump")
    for args in (("decode", dump, ring), ("analyze", d), ("status", "--rings", d), ("decode", junk)):
        p = run(NT, *args)
        no_raw_control(p.stdout, "%s stdout" % args[0])
        no_raw_control(p.stderr, "%s stderr" % args[0])
        check(p.returncode in (0, 2) and p.stdout + p.stderr, "%s ran: %d" % (args[0], p.returncode))


def zstd_frame(path, mib):
    """A valid zstd frame of mib MiB of zeros in raw blocks: as large on disk
    as a real shard, written in a fraction of a second."""
    block = 128 << 10
    hdr = (block << 3).to_bytes(3, "little")  # raw block, not last
    last = ((block << 3) | 1).to_bytes(3, "little")
    zeros = bytes(block)
    n = (mib << 20) // block
    with open(path, "wb") as f:
        f.write(b"\x28\xb5\x2f\xfd\x00\x38")  # magic; no content size; 128 KiB window
        for i in range(n):
            f.write(last if i == n - 1 else hdr)
            f.write(zeros)


def run_rss(*args):
    """Run a command; @return (exit status, stdout, stderr, peak RSS in KiB)."""
    with tempfile.TemporaryFile() as o, tempfile.TemporaryFile() as e:
        p = subprocess.Popen(list(args), stdout=o, stderr=e)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        o.seek(0)
        e.seek(0)
        return p.returncode, o.read().decode(errors="replace"), e.read().decode(errors="replace"), ru.ru_maxrss


def case_foreign(d):
    run(MKFIX, "dump", os.path.join(d, "r0.zst"))
    shard = os.path.join(d, "shard-00001.zst")
    zstd_frame(shard, 200)
    if shutil.which("zstd"):
        check(subprocess.run(["zstd", "-tq", shard]).returncode == 0, "the shard is a valid zstd frame")
    rc, out, err, rss = run_rss(NT, "analyze", "--max-memory", "64M", d)
    lines = [ln for ln in err.splitlines() if "shard-00001.zst" in ln]
    check(rc == 2 and len(lines) == 1 and "zstd" in lines[0] and "not a nccltrace" in lines[0],
          "one line names the foreign zstd file: %d %r" % (rc, err))
    check("inputs: 2 files, 1 process" in out, "the dump next to it is analyzed: %r" % out[-300:])
    check(rss < 64 * 1024, "peak RSS %d KiB stays under --max-memory 64M" % rss)


def case_deep(d):
    run(MKFIX, "dump", os.path.join(d, "r0.zst"))
    deep = d
    for i in range(40):
        deep = os.path.join(deep, "l%d" % i)
    os.makedirs(deep)
    run(MKFIX, "dump", os.path.join(deep, "r1.zst"), "--rank", "1", "--pid", "4243")
    p = timed(NT, "analyze", d, timeout=15)
    if p:
        lines = [ln for ln in p.stderr.splitlines() if "deep" in ln]
        cut = os.path.join(d, *["l%d" % i for i in range(33)])
        check(len(lines) == 1 and lines[0].startswith("nccltrace: %s: " % cut),
              "one line names the directory past the depth limit (%s): %r" % (cut, p.stderr))
        check(p.returncode == 2, "evidence left unread makes the exit status 2: %d" % p.returncode)
        check("inputs: 1 file, 1 process" in p.stdout, "the dump at the top is analyzed: %r" % p.stdout[-300:])


def users():
    """Two unprivileged users, created when missing."""
    out = []
    for name in ("nctr-victim", "nctr-other"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            if subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                              capture_output=True).returncode != 0:
                return None
        out.append(pwd.getpwnam(name))
    return out


def as_user(u, *args):
    def drop():
        os.setgid(u.pw_gid)
        os.setgroups([])
        os.setuid(u.pw_uid)
    e = dict(os.environ, HOME="/")
    e.pop("NCCLTRACE_RING_DIR", None)
    return subprocess.run(list(args), capture_output=True, text=True, timeout=20, preexec_fn=drop, env=e,
                          cwd="/")


def case_owner(d):
    if os.geteuid() != 0 or not shutil.which("useradd"):
        print("skip: needs root and useradd")
        return 77
    us = users()
    if not us:
        print("skip: useradd failed")
        return 77
    victim, other = us
    os.chmod(d, 0o755)
    # The build tree may be closed to other users: the victim runs a copy.
    nt = os.path.join(d, "nccltrace")
    shutil.copy(NT, nt)
    os.chmod(nt, 0o755)
    host = socket.gethostname()

    def plant(dirpath, owner, mode, ring_owner, ring_mode):
        os.mkdir(dirpath)
        ring = os.path.join(dirpath, "planted.ring")
        run(MKFIX, "ring", ring, "--pid", "999999", "--host", host)
        os.chown(ring, ring_owner.pw_uid, ring_owner.pw_gid)
        os.chmod(ring, ring_mode)
        os.chown(dirpath, owner.pw_uid, owner.pw_gid)
        os.chmod(dirpath, mode)
        return ring

    dumps = os.path.join(d, "dumps")
    os.mkdir(dumps)
    os.chown(dumps, victim.pw_uid, victim.pw_gid)
    # 1. The other user made the directory, mode 0777, and put a ring in it.
    r1 = plant(os.path.join(d, "planted"), other, 0o777, other, 0o600)
    # 2. The victim's own directory holds a ring of the other user's.
    r2 = plant(os.path.join(d, "mine"), victim, 0o700, other, 0o644)
    # 3. The victim's own ring, but writable by others.
    r3 = plant(os.path.join(d, "mine2"), victim, 0o700, victim, 0o666)
    for dirpath, ring, why in ((os.path.dirname(r1), r1, "owned by uid %d, not by you" % other.pw_uid),
                               (os.path.dirname(r2), r2, "not by the directory's owner"),
                               (os.path.dirname(r3), r3, "writable by others")):
        for cmd in (("status", "--rings", dirpath), ("collect", "--rings", dirpath, "--dir", dumps)):
            p = as_user(victim, nt, *cmd)
            lines = p.stderr.strip().splitlines()
            check(len(lines) == 1 and why in lines[0], "%s %s: one line saying %r: %r" % (cmd[0], dirpath, why,
                                                                                          p.stderr))
            check("999999" not in p.stdout, "%s %s: the planted ring is not shown: %r" % (cmd[0], dirpath, p.stdout))
        check(os.path.exists(ring), "the planted ring %s is left alone" % ring)
    check(os.listdir(dumps) == [], "collect made no dump of a planted ring: %r" % os.listdir(dumps))
    # The victim's own directory and ring are read as before.
    own = plant(os.path.join(d, "good"), victim, 0o700, victim, 0o600)
    p = as_user(victim, nt, "status", "--rings", os.path.dirname(own))
    check(p.returncode == 0 and "pid 999999" in p.stdout and not p.stderr, "own ring shown: %r %r" % (p.stdout,
                                                                                                     p.stderr))
    # Root, pointed at the victim's directory, reads the victim's rings.
    p = run(NT, "status", "--rings", os.path.dirname(own))
    check(p.returncode == 0 and "pid 999999" in p.stdout, "root reads a named directory of a user: %r" % p.stderr)
    # The default directory of root must be root's own.
    e = {"NCCLTRACE_RING_DIR": ""}
    shm = "/dev/shm/nccltrace-%d" % os.getuid()
    if not os.path.exists(shm) and os.path.isdir("/dev/shm"):
        os.mkdir(shm)
        os.chown(shm, other.pw_uid, other.pw_gid)
        try:
            p = run(NT, "status", env=e)
            check(p.returncode == 2 and "owned by uid %d" % other.pw_uid in p.stderr,
                  "root's default directory owned by another user is ignored: %r" % p.stderr)
        finally:
            os.rmdir(shm)
    return 0


def main():
    fn = globals().get("case_" + CASE)
    if not fn:
        print("unknown case", CASE)
        return 1
    with tempfile.TemporaryDirectory() as d:
        rc = fn(d)
    if rc == 77:
        return 77
    return finish()


if __name__ == "__main__":
    sys.exit(main())

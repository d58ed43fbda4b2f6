#!/usr/bin/env python3
"""test_run_config.py CASE NCCLTRACE LIBNCCLTRACE EMU_LIBDIR RANKPROG -- what the
tracer says about its settings, and where dumps go, said once and usefully.

Cases (one meson test each, tests/tools/meson.build):
  once      a 2-rank job under `nccltrace run` (a bash script that also runs
            mktemp, date and sleep, every one of them with the library
            preloaded) with a bad NCCLTRACE_TIMEOUT says it on one line;
            "cross-rank check off" comes once; NCCLTRACE_DISABLE=2 is said
            once, with what it is taken as, and the ranks are traced; a
            rank whose settings differ from run's says its own
  unranked  without run (LD_PRELOAD set by hand): processes that never call
            NCCL and have no launcher rank (a shell, date, sleep) say
            nothing; of ranks with RANK, rank 0 says it; with LOCAL_RANK
            only, local rank 0; two ranks of unknown rank, each one
  dir       run checks the dump directory before CMD runs: a missing one
            that can be made is fine (and not made for a clean exit); a
            regular file, a path through a file, an unwritable directory
            and one that cannot be made are refused with exit status 2,
            naming the directory and why, CMD never started
  dumpfail  a dump directory removed while the process runs is made again;
            one that cannot be made again gives a "dump failed" line naming
            the path, the errno text and what to do
Exit 0 pass, 1 fail.
"""
import ctypes
import os
import shutil
import stat
import subprocess
import sys
import tempfile

if len(sys.argv) == 3 and sys.argv[1] == "--dumper":
    # libnccltrace.so is preloaded: activate it, change the dump directory
    # under it as sys.argv[2] says, then ask for a dump
    how = sys.argv[2]
    lib = ctypes.CDLL(None)
    lib.ncclGetUniqueId(ctypes.create_string_buffer(128))
    d = os.environ["NCCLTRACE_DIR"]
    shutil.rmtree(os.path.dirname(d) if how == "blocked" else d)
    if how == "blocked":  # the parent is now a regular file: d cannot be made again
        open(os.path.dirname(d), "w").close()
    sys.exit(0 if lib.nccltrace_dump(b"asked") == 0 else 3)

CASE, NT, LIB, EMU, RANK = sys.argv[1], *(os.path.abspath(p) for p in sys.argv[2:6])
fails = []
TMP = tempfile.mkdtemp(prefix="ntrc-")
RANKVARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "LOCAL_RANK",
            "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_LOCAL_RANK", "SLURM_LOCALID", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
            "MASTER_ADDR", "MASTER_PORT")


def check(cond, what):
    if not cond:
        fails.append(what)


def base_env(**kw):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("NCCLTRACE_") and k not in RANKVARS and k != "LD_PRELOAD"}
    env.update(LD_LIBRARY_PATH=EMU, NCCLEMU_DEVICES="8", NCCLTRACE_LIB=LIB,
               NCCLTRACE_RING_DIR=os.path.join(TMP, "rings"), NCCLTRACE_DIR=os.path.join(TMP, "dumps"))
    env.update(kw)
    return env


def script(name, ranks):
    """A bash job: mktemp and date, then the ranks ("ENV... " prefixes) in
    the background, wait, sleep, date."""
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write("#!/bin/bash\nids=$(mktemp -d -p %s)\ndate >/dev/null\n" % TMP)
        for i, pre in enumerate(ranks):
            f.write("%s %s vm %d %d $ids >/dev/null &\n" % (pre, RANK, i, len(ranks)))
        f.write("wait\nsleep 0.05\ndate >/dev/null\n")
    os.chmod(path, 0o755)
    return path


def run(args, env, **kw):
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=120, **kw)


def said(stderr, text):
    return [ln for ln in stderr.splitlines() if text in ln]


def exit_dumps():
    d = os.path.join(TMP, "dumps")
    return sorted(f for f in os.listdir(d) if f.endswith("-exit.zst")) if os.path.isdir(d) else []


def case_once():
    two = script("job.sh", ["RANK=0 LOCAL_RANK=0 WORLD_SIZE=2", "RANK=1 LOCAL_RANK=1 WORLD_SIZE=2"])
    p = run([NT, "run", "--", two], base_env(NCCLTRACE_TIMEOUT="bogus"))
    check(p.returncode == 0, "2-rank job under run: rc %d\n%s" % (p.returncode, p.stderr))
    t = said(p.stderr, 'NCCLTRACE_TIMEOUT="bogus"')
    print("bad NCCLTRACE_TIMEOUT under run, 2 ranks: %d line(s)" % len(t))
    check(len(t) == 1, "the bad value on one line for the job, not %d:\n%s" % (len(t), p.stderr))
    c = said(p.stderr, "cross-rank check off")
    print("'cross-rank check off' under run, 2 ranks: %d line(s)" % len(c))
    check(len(c) == 1, "'cross-rank check off' once for the job, not %d:\n%s" % (len(c), p.stderr))
    check(len(exit_dumps()) == 2, "both ranks traced: %r" % exit_dumps())

    shutil.rmtree(os.path.join(TMP, "dumps"))
    p = run([NT, "run", "--", two], base_env(NCCLTRACE_DISABLE="2"))
    t = said(p.stderr, 'NCCLTRACE_DISABLE="2"')
    print("NCCLTRACE_DISABLE=2 under run, 2 ranks: %d line(s)" % len(t))
    check(len(t) == 1 and "tracing stays on" in t[0] and "1/yes/true/on" in t[0],
          "NCCLTRACE_DISABLE=2 said once, with what it takes and is taken as: %r\n%s" % (t, p.stderr))
    check(len(exit_dumps()) == 2, "NCCLTRACE_DISABLE=2 traces both ranks: %r" % exit_dumps())

    # a rank that sets a bad value run never saw says it itself (rank 0: the job's)
    own = script("own.sh", ["RANK=0 WORLD_SIZE=2 NCCLTRACE_RING=lots", "RANK=1 WORLD_SIZE=2 NCCLTRACE_RING=lots"])
    p = run([NT, "run", "--", own], base_env())
    r = said(p.stderr, 'NCCLTRACE_RING="lots"')
    check(len(r) == 1, "a setting of the ranks' own, said by rank 0 once: %r\n%s" % (r, p.stderr))


def case_unranked():
    env = base_env(NCCLTRACE_TIMEOUT="bogus", LD_PRELOAD=LIB)
    p = run(["bash", "-c", "date >/dev/null; sleep 0.01; x=$(mktemp -p %s); true" % TMP], env)
    t = said(p.stderr, "NCCLTRACE_TIMEOUT")
    print("processes without a rank and without NCCL: %d line(s)" % len(t))
    check(t == [], "processes that never call NCCL and have no rank say nothing: %r" % t)
    for name, ranks, want in (("ranked.sh", ["RANK=0 WORLD_SIZE=2", "RANK=1 WORLD_SIZE=2"], 1),
                              ("local.sh", ["LOCAL_RANK=0", "LOCAL_RANK=1"], 1),
                              ("none.sh", ["", ""], 2)):
        p = run([script(name, ranks)], env)
        t = said(p.stderr, 'NCCLTRACE_TIMEOUT="bogus"')
        print("%s without run: %d line(s)" % (name, len(t)))
        check(len(t) == want, "%s: %d line(s), want %d:\n%s" % (name, len(t), want, p.stderr))


def as_nobody():
    if os.geteuid() == 0:
        def drop():
            os.setgid(65534)
            os.setuid(65534)
        return drop
    return None


def case_dir():
    os.mkdir(os.path.join(TMP, "mark"))
    os.chmod(os.path.join(TMP, "mark"), 0o777)  # CMD may run as nobody
    marker = os.path.join(TMP, "mark", "cmd-ran")
    cmd = ["sh", "-c", "touch %s" % marker]
    fresh = os.path.join(TMP, "new", "deeper")
    p = run([NT, "run", "--dir", fresh, "--", "true"], base_env())
    check(p.returncode == 0 and not os.path.exists(os.path.join(TMP, "new")),
          "a missing directory that can be made: rc %d, made %s: %s" % (
              p.returncode, os.path.exists(os.path.join(TMP, "new")), p.stderr))
    afile = os.path.join(TMP, "afile")
    open(afile, "w").close()
    ro = os.path.join(TMP, "ro")  # ours (nobody's when we are root), not writable
    os.mkdir(ro)
    os.chmod(ro, 0o555)
    theirs = os.path.join(TMP, "theirs")  # root's, not writable for nobody
    os.mkdir(theirs)
    os.chmod(theirs, 0o555)
    if os.geteuid() == 0:
        os.chown(ro, 65534, 65534)
    os.chmod(TMP, 0o755)  # nobody must reach ro and run the script
    cases = [("a regular file", ["--dir", afile], {}, "not a directory", None),
             ("a path through a file", ["--dir", os.path.join(afile, "d")], {}, "not a directory", None),
             ("from NCCLTRACE_DIR", [], {"NCCLTRACE_DIR": afile}, "not a directory", None),
             ("cannot be made", ["--dir", "/proc/1/nccltrace-dumps"], {}, "cannot be made", None),
             ("unwritable", ["--dir", ro], {}, "permission denied", as_nobody()),
             ("unwritable parent", ["--dir", os.path.join(ro, "sub")], {}, "permission denied", as_nobody())]
    if os.geteuid() == 0:
        cases.append(("unwritable, not ours", ["--dir", theirs], {}, "permission denied", as_nobody()))
    for what, opt, extra, why, pre in cases:
        if os.path.exists(marker):
            os.unlink(marker)
        p = run([NT, "run"] + opt + ["--"] + cmd, base_env(**extra), preexec_fn=pre)
        named = opt[1] if opt else extra["NCCLTRACE_DIR"]
        line = [ln for ln in p.stderr.splitlines() if ln.startswith("nccltrace: run: ") and named in ln]
        print("%s: rc %d, %s" % (what, p.returncode, p.stderr.strip()))
        check(p.returncode == 2 and not os.path.exists(marker) and line and why in line[0].lower()
              and "NCCLTRACE_DIR" in line[0],
              "%s: exit 2 before CMD (ran: %s), naming %s and %r: rc %d %r" % (
                  what, os.path.exists(marker), named, why, p.returncode, p.stderr))


def case_dumpfail():
    me = os.path.abspath(__file__)
    env = base_env(NCCLTRACE_DIR=os.path.join(TMP, "p", "d"), LD_PRELOAD=LIB)
    p = run([sys.executable, me, "--dumper", "removed"], env)
    w = [ln for ln in said(p.stderr, "dump written: ") if ln.endswith("(asked)")]
    print("dump directory removed under the process: rc %d, %s" % (p.returncode, p.stderr.strip()))
    check(p.returncode == 0 and len(w) == 1 and os.path.isdir(os.path.join(TMP, "p", "d")),
          "a removed dump directory is made again: rc %d %r" % (p.returncode, p.stderr))
    p = run([sys.executable, me, "--dumper", "blocked"], env)
    f = said(p.stderr, "dump failed")
    print("dump directory that cannot be made again: %s" % f)
    d = os.path.join(TMP, "p", "d")
    check(p.returncode == 3 and [ln for ln in f if ln.endswith("(asked)")] and all(
        d in ln and "not a directory (errno 20)" in ln and "NCCLTRACE_DIR" in ln and "--dir" in ln for ln in f),
          "each dump failed line names the path, the errno text and what to do: %r" % f)


try:
    {"once": case_once, "unranked": case_unranked, "dir": case_dir, "dumpfail": case_dumpfail}[CASE]()
finally:
    os.chmod(TMP, 0o700)
    for root, dirs, _ in os.walk(TMP):
        for x in dirs:
            os.chmod(os.path.join(root, x), 0o700)
    shutil.rmtree(TMP, ignore_errors=True)
for f in fails:
    print("FAIL:", f)
if not fails:
    print("ok:", CASE)
sys.exit(1 if fails else 0)

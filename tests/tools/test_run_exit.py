#!/usr/bin/env python3
"""test_run_exit.py NCCLTRACE -- `nccltrace run` records how its command
ended, and analyze uses it:

1. a command that fails before any NCCL call (exit 127, as when the dynamic
   linker refuses it) leaves an exit-status file, and analyze reports it as
   "no evidence" with its code and the loader advice, never "rank -1";
2. a command killed by a signal: run exits as it did (the same signal), the
   file says which;
3. a clean exit where no dump directory exists leaves nothing behind, and a
   command that could not be executed records nothing;
4. a hostile exit-status file (escape sequences, huge) is unreadable input,
   said so, never echoed raw.
Exit 0 pass, 1 fail.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile

NT = sys.argv[1]
fails = []


def check(cond, what):
    if not cond:
        fails.append(what)


def run(*args, **kw):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=30, **kw)


with tempfile.TemporaryDirectory() as d:
    dumps = os.path.join(d, "dumps")
    env = dict(os.environ, NCCLTRACE_JOB="runexit", RANK="2")
    env.pop("LD_PRELOAD", None)
    p = run(NT, "run", "--dir", dumps, "--", "sh", "-c", "echo 'prog: symbol lookup error' >&2; exit 127", env=env)
    check(p.returncode == 127, "run passes exit 127 on (got %d)" % p.returncode)
    files = sorted(os.listdir(dumps)) if os.path.isdir(dumps) else []
    check(len(files) == 1 and files[0].startswith("nccltrace-runexit-") and files[0].endswith(".exit"),
          "one exit-status file, got %r" % files)
    if files:
        body = open(os.path.join(dumps, files[0])).read()
        check(body.startswith("nccltrace-run-exit 1\n") and "\nexited 127\n" in body and "\nrank 2\n" in body
              and "\nexe sh\n" in body, "file content: %r" % body)
    a = run(NT, "analyze", "--json", dumps)
    check(a.returncode == 1, "analyze of a lone exit-status file: rc %d (want 1, a fault found) %s" % (
        a.returncode, a.stderr))
    try:
        v = json.loads(a.stdout)["verdict"]
    except ValueError:
        v = {}
    check(v.get("class") == "rank_exit" and v.get("exit_code") == 127 and v.get("ranks") == [2],
          "verdict: %r" % v)
    check("none of its NCCL calls is known" in v.get("summary", "") and "dynamic linker" in v.get("summary", ""),
          "summary: %r" % v.get("summary"))
    t = run(NT, "analyze", dumps).stdout
    check("rank -1" not in t and "no ring or dump" in t, "text:\n" + t)

    # killed by a signal: run dies of the same signal; the file says it
    k = os.path.join(d, "k")
    p = run(NT, "run", "--dir", k, "--", "sh", "-c", "kill -9 $$", env=env)
    check(p.returncode == -signal.SIGKILL, "run dies of SIGKILL like its command (got %d)" % p.returncode)
    body = "".join(open(os.path.join(k, f)).read() for f in os.listdir(k)) if os.path.isdir(k) else ""
    check("\nsignaled 9\n" in body, "signal in the file: %r" % body)

    # a clean exit without a dump directory, and a command that never ran: nothing
    clean = os.path.join(d, "clean")
    p = run(NT, "run", "--dir", clean, "--", "true", env=env)
    check(p.returncode == 0 and not os.path.exists(clean), "clean exit leaves no directory")
    p = run(NT, "run", "--dir", clean, "--", "/nonexistent/cmd", env=env)
    check(p.returncode == 127 and not os.path.exists(clean), "a command that never ran records nothing")

    # hostile: escape sequences and a huge file are unreadable inputs
    h = os.path.join(d, "hostile")
    os.mkdir(h)
    with open(os.path.join(h, "a.exit"), "w") as f:
        f.write("nccltrace-run-exit 1\nhost \x1b[2Jevil\npid 5\nexited 1\n")
    with open(os.path.join(h, "b.exit"), "w") as f:
        f.write("nccltrace-run-exit 1\nhost vm\npid 6\nexited 1\n" + "x" * 10000)
    a = run(NT, "analyze", h)
    out = a.stdout + a.stderr
    check(a.returncode == 2 and "\x1b" not in out and out.count("exit-status file") >= 2,
          "hostile files: rc %d\n%s" % (a.returncode, out))

if fails:
    print("FAIL:\n  " + "\n  ".join(fails))
    sys.exit(1)
print("ok: nccltrace run records exit statuses; analyze uses them")

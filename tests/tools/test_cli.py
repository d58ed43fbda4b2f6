#!/usr/bin/env python3
"""test_cli.py NCCLTRACE -- usage, version, dispatch and `run`.

Proves: --version prints "nccltrace 0.1.0"; --help documents every
subcommand; unknown commands and bad options exit 2; `run` prepends the
library to LD_PRELOAD, passes --dir/--ring-dir/--check/--timeout as
NCCLTRACE_* variables, keeps CMD's own options, returns CMD's exit status
(127 when CMD does not exist), refuses a missing NCCLTRACE_LIB, and with
--coord either points NCCLTRACE_COORD at a listening coordinator or says the
coordinator is unavailable and runs anyway; every subcommand's --help is its
own (coord's says NCCLTRACE_SECRET is required).
Exit 0 pass, 1 fail.
"""
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from toolcheck import check, failures, finish, run  # noqa: E402,F401

NT = sys.argv[1]


def harmless_library():
    """A real shared library to preload that changes nothing and carries no
    sanitizer runtime (the tests also run in an ASan build): this Python's
    own libc, as mapped in this process."""
    for line in open("/proc/self/maps"):
        path = line.split()[-1]
        if "/libc.so" in path or "/libc-" in path:
            return path
    return None


DUMMY = harmless_library()
if not DUMMY:
    print("SKIP: no libc path in /proc/self/maps")
    sys.exit(77)
p = run(NT, "--version")
check(p.returncode == 0 and p.stdout == "nccltrace 0.1.0\n", "--version: %r" % p.stdout)
p = run(NT, "--help")
for cmd in ("run ", "decode ", "analyze ", "export --chrome", "collect ", "status ", "coord --listen", "--salvage",
            "--watch", "--json", "NCCLTRACE_DIR"):
    check(cmd in p.stdout, "--help mentions %r" % cmd)
check(run(NT, "frobnicate").returncode == 2, "unknown command exits 2")
check(run(NT).returncode == 2, "no command exits 2")
check(run(NT, "decode").returncode == 2, "decode without files exits 2")
check(run(NT, "decode", "--bogus", "x").returncode == 2, "bad option exits 2")
p = run(NT, "analyze", "--help")
check(p.returncode in (0, 1, 2) and ("not built" in p.stderr or p.returncode == 0 or "usage" in (p.stdout + p.stderr)),
      "analyze dispatches: %r" % p.stderr)

env = {"NCCLTRACE_LIB": DUMMY, "LD_PRELOAD": ""}
show = 'echo "P=$LD_PRELOAD"; echo "D=$NCCLTRACE_DIR"; echo "R=$NCCLTRACE_RING_DIR"; ' \
       'echo "C=$NCCLTRACE_CHECK"; echo "T=$NCCLTRACE_TIMEOUT"; echo "A=$1"; echo "K=$NCCLTRACE_COORD"; exit 3'
p = run(NT, "run", "--dir", "/tmp/dd", "--ring-dir", "/tmp/rr", "--check", "strict", "--timeout", "7", "--",
        "sh", "-c", show, "sh", "--not-ours", env=env)
out = dict(l.split("=", 1) for l in p.stdout.splitlines() if "=" in l)
check(p.returncode == 3, "run returns CMD's status (3), got %d: %r" % (p.returncode, p.stderr))
check(out.get("P") == DUMMY and out.get("D") == "/tmp/dd" and out.get("R") == "/tmp/rr" and out.get("C") == "strict"
      and out.get("T") == "7" and out.get("A") == "--not-ours", "run environment: %r" % out)

env2 = dict(env, LD_PRELOAD="libother.so")
p = run(NT, "run", "--", "sh", "-c", 'echo "P=$LD_PRELOAD"', env=env2)
check(p.stdout.strip() == "P=%s:libother.so" % DUMMY, "LD_PRELOAD prepended: %r" % p.stdout)

check(run(NT, "run", "--check", "sometimes", "--", "true", env=env).returncode == 2, "bad --check exits 2")
check(run(NT, "run", "--timeout", "-1", "--", "true", env=env).returncode == 2, "bad --timeout exits 2")
p = run(NT, "run", "--", "/nonexistent/cmd", env=env)
check(p.returncode == 127 and "/nonexistent/cmd" in p.stderr, "missing CMD -> 127")
p = run(NT, "run", "--", "true", env={"NCCLTRACE_LIB": "/nonexistent/lib.so"})
check(p.returncode == 1 and "NCCLTRACE_LIB" in p.stderr, "missing library refused: %r" % p.stderr)

p = run(NT, "run", "--coord", "--", "sh", "-c", show, env=env)
out = dict(l.split("=", 1) for l in p.stdout.splitlines() if "=" in l)
check(p.returncode == 3, "run --coord returns CMD's status, got %d: %r" % (p.returncode, p.stderr))
if out.get("K"):
    check(out["K"].startswith("127.0.0.1:"), "NCCLTRACE_COORD points at loopback: %r" % out["K"])
else:
    check("running without" in p.stderr, "coordinator unavailability is said: %r" % p.stderr)

# Each subcommand's --help is its own, not the global text; coord's says
# what its code enforces: NCCLTRACE_SECRET is required.
for sub in ("run", "decode", "analyze", "collect", "export", "status", "coord"):
    p = run(NT, sub, "--help")
    check(p.returncode == 0 and p.stdout.startswith("usage: nccltrace %s " % sub) and "Commands:" not in p.stdout,
          "%s --help prints its own help (rc %d):\n%s" % (sub, p.returncode, p.stdout[:300]))
# run's exit status is its command's: its help says so, and no other
p = run(NT, "run", "--help")
check("exit status is CMD's" in p.stdout and "unreadable input" not in p.stdout,
      "run --help states run's own exit status, not the readers':\n%s" % p.stdout)
p = run(NT, "coord", "--help")
check("NCCLTRACE_SECRET is required" in p.stdout and "derived" not in p.stdout,
      "coord --help says the secret is required:\n%s" % p.stdout)

sys.exit(finish())

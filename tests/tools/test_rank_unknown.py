#!/usr/bin/env python3
"""test_rank_unknown.py NCCLTRACE MKFIX -- a process without a launcher rank
is never shown as "rank -1".

A ring header's rank is the launcher's (RANK, OMPI_COMM_WORLD_RANK, ...):
-1 for a process that had none -- a launcher script, a process started
outside a launcher, or one whose launcher sets no rank variable.
Proves: `status` prints such a process as "rank ?" (with its pid), and a
process with a rank as "rank N"; `export --chrome` names its process
"rank ? (host:pid)" and the ranked one "rank N (host:pid)"; neither output
contains "rank -1" anywhere.
Exit 0 pass, 1 fail.
"""
import json
import os
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from toolcheck import check, finish, run  # noqa: E402

NT, MKFIX = sys.argv[1], sys.argv[2]

with tempfile.TemporaryDirectory() as d:
    rings = os.path.join(d, "rings")
    os.mkdir(rings, 0o700)
    # pids far above pid_max: never a live process, so status says "gone"
    norank = os.path.join(rings, "nccltrace-norank.ring")
    ranked = os.path.join(rings, "nccltrace-ranked.ring")
    check(run(MKFIX, "ring", norank, "--pid", "99999991", "--rank", "-1").returncode == 0, "mkfix -1")
    check(run(MKFIX, "ring", ranked, "--pid", "99999992", "--rank", "1").returncode == 0, "mkfix 1")
    p = run(NT, "status", "--rings", rings)
    check(p.returncode == 0, "status exit 0: %r" % p.stderr)
    print(p.stdout)
    check("rank -1" not in p.stdout, "status prints no 'rank -1':\n" + p.stdout)
    check("pid 99999991  rank ?  " in p.stdout, "status: the process without a rank is 'rank ?' with its pid")
    check("pid 99999992  rank 1  " in p.stdout, "status: the ranked process is 'rank 1'")

    out = os.path.join(d, "trace.json")
    p = run(NT, "export", "--chrome", norank, ranked, "-o", out)
    check(p.returncode == 0, "export exit 0: %r" % p.stderr)
    names = []
    if os.path.exists(out):
        with open(out) as f:
            text = f.read()
        check("rank -1" not in text, "export writes no 'rank -1'")
        ev = json.loads(text)
        ev = ev["traceEvents"] if isinstance(ev, dict) else ev
        names = sorted(e["args"]["name"] for e in ev if e.get("name") == "process_name")
    print(names)
    check(any(n.startswith("rank ? (") and ":99999991)" in n for n in names), "export: 'rank ? (host:pid)': %r" % names)
    check(any(n.startswith("rank 1 (") and ":99999992)" in n for n in names), "export: 'rank 1 (host:pid)': %r" % names)
sys.exit(finish())

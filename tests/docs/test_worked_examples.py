#!/usr/bin/env python3
"""test_worked_examples.py SRCDIR BUILDDIR FAULTS -- docs/worked-examples.md
is what docs/worked-examples.sh produces from the current code.

Proves: regenerating the page into a temporary directory (the three faults
run on the CPU emulator, FAULTS being examples/faults.c built by the
scenarios) gives the checked-in page once both are normalized by
`docs/worked-examples.sh --normalize` (pids, host names, communicator ids,
times and the interleaving of ranks: the script's header says how and why).
A change of verdict text, state, counts or next steps that is not carried
into the page fails here, with the difference printed.
Exit 0 pass, 1 fail.
"""
import difflib
import os
import subprocess
import sys
import tempfile

SRC, BUILD, FAULTS = (os.path.abspath(a) for a in sys.argv[1:4])
script = os.path.join(SRC, "docs", "worked-examples.sh")
page = os.path.join(SRC, "docs", "worked-examples.md")


def normalized(path):
    p = subprocess.run(["bash", script, "--normalize", path], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        print("FAIL: --normalize %s: %s" % (path, p.stderr))
        sys.exit(1)
    return p.stdout.splitlines()


with tempfile.TemporaryDirectory(prefix="nccltrace-we-") as d:
    out = os.path.join(d, "worked-examples.md")
    env = dict(os.environ, FAULTS=FAULTS, TMPDIR=d)
    p = subprocess.run(["bash", script, BUILD, out], capture_output=True, text=True, timeout=240, env=env)
    if p.returncode != 0 or not os.path.exists(out):
        print("FAIL: docs/worked-examples.sh exited %d: %s" % (p.returncode, p.stderr))
        sys.exit(1)
    want, got = normalized(page), normalized(out)
    diff = list(difflib.unified_diff(want, got, "docs/worked-examples.md (normalized)",
                                     "regenerated (normalized)", lineterm=""))
    if diff:
        print("FAIL: docs/worked-examples.md is stale (%d differing lines); regenerate it with "
              "docs/worked-examples.sh BUILD_DIR" % sum(1 for l in diff if l[:1] in "+-" and l[:3] not in ("+++", "---")))
        print("\n".join(diff))
        sys.exit(1)
print("docs/worked-examples.md matches a fresh generation (%d normalized lines)" % len(want))

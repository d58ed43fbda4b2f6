#!/usr/bin/env python3
"""test_golden.py NCCLTRACE GOLDEN_DIR -- the committed files of every
format version this nccltrace reads (GOLDEN_DIR/v<N>/, written by make.sh)
still decode, decode --json, analyze and export exactly as they did when
they were made, so a change made to writer and reader together cannot
silently break old dumps; and a file whose version field says 1 (a format
this nccltrace does not read) is refused with a reason naming both
versions, by every command."""
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile


def run(cmd, cwd):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=60)


def main():
    ntt, golden = os.path.abspath(sys.argv[1]), sys.argv[2]
    versions = sorted(d for d in os.listdir(golden) if d.startswith("v") and d[1:].isdigit())
    bad = []
    if not versions:
        bad.append("no golden directory under " + golden)
    with tempfile.TemporaryDirectory() as tmp:
        for v in versions:
            d = os.path.join(tmp, v)
            shutil.copytree(os.path.join(golden, v), d)
            for f in ("r0.zst", "r1.zst", "r0.ring"):
                for args, suffix in (([], ".decode"), (["--json"], ".json")):
                    p = run([ntt, "decode"] + args + [f], d)
                    want = open(os.path.join(d, f + suffix)).read()
                    if p.returncode != 0 or p.stdout != want:
                        bad.append("%s: decode %s%s: exit %d, output differs from %s%s\n%s" %
                                   (v, " ".join(args), f, p.returncode, f, suffix, p.stderr))
            p = run([ntt, "analyze", "r0.zst", "r1.zst"], d)
            if p.stdout != open(os.path.join(d, "analyze.txt")).read():
                bad.append("%s: analyze output differs from analyze.txt\n%s" % (v, p.stderr))
            p = run([ntt, "export", "--chrome", "r0.zst", "r1.zst", "-o", "out.json"], d)
            if p.returncode != 0 or not filecmp.cmp(os.path.join(d, "out.json"), os.path.join(d, "export.json"),
                                                    shallow=False):
                bad.append("%s: export --chrome differs from export.json (exit %d)\n%s" % (v, p.returncode, p.stderr))
        # The same bytes with version 1 in the field every file has at 8.
        src = os.path.join(tmp, versions[-1]) if versions else None
        for f in ("r0.zst", "r0.ring") if src else ():
            b = bytearray(open(os.path.join(src, f), "rb").read())
            b[8:12] = (1).to_bytes(4, "little")
            old = os.path.join(tmp, "v1-" + f)
            open(old, "wb").write(b)
            for cmd in (["decode", old], ["decode", "--json", old], ["analyze", old],
                        ["export", "--chrome", old, "-o", os.path.join(tmp, "v1.json")]):
                p = run([ntt] + cmd, tmp)
                if p.returncode == 0 or "unsupported format version 1 (this nccltrace reads" not in p.stderr:
                    bad.append("%s: a version-1 file: exit %d, stderr %r" % (" ".join(cmd[:-1]), p.returncode,
                                                                             p.stderr[:300]))
    for b in bad:
        print("test_golden: " + b)
    print("test_golden: %d version(s), %d problem(s)" % (len(versions), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

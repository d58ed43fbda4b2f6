#!/usr/bin/env python3
"""test_corrupt.py NCCLTRACE MKFIX -- damaged input is refused precisely,
and --salvage recovers what is intact.

Proves: bad magic, unsupported version, truncated dump and ring, bad checksum,
corrupt zstd frame, hostile header fields, empty and tiny files each give
exit 2 and exactly one stderr line "nccltrace: FILE: <reason>" naming the
cause, with nothing on stdout and no crash; other files on the same command
line still decode; --salvage returns the intact records of a truncated ring,
a dump with a bad checksum and a cut multi-block dump, marked salvaged.
Exit 0 pass, 1 fail.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from toolcheck import check, failures, finish, run  # noqa: E402,F401

NT, MKFIX = sys.argv[1], sys.argv[2]
def refused(path, reason, extra=()):
    """decode must exit 2 with one line naming path and reason."""
    p = run(NT, "decode", *extra, path)
    lines = p.stderr.strip().splitlines()
    ok = p.returncode == 2 and len(lines) == 1 and lines[0].startswith("nccltrace: %s: " % path) \
        and reason in lines[0] and p.stdout == ""
    check(ok, "%s: want exit 2 + %r, got %d %r %r" % (os.path.basename(path), reason, p.returncode, p.stderr,
                                                       p.stdout[:200]))
    return p


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def main():
    with tempfile.TemporaryDirectory() as d:
        ring, dump = os.path.join(d, "r.ring"), os.path.join(d, "d.zst")
        run(MKFIX, "ring", ring)
        run(MKFIX, "dump", dump)
        rb, db = open(ring, "rb").read(), open(dump, "rb").read()

        f = os.path.join(d, "junk.zst")
        write(f, b"hello, this is not a trace at all")
        refused(f, "bad magic")
        write(f, b"")
        refused(f, "empty file")
        write(f, b"NCTR")
        refused(f, "too short (4 bytes)")
        refused(os.path.join(d, "missing.zst"), "No such file or directory")
        refused(d, "is a directory")

        for name, data in (("v7.zst", db), ("v7.ring", rb)):
            write(f, data[:8] + struct.pack("<I", 7) + data[12:])
            refused(f, "unsupported format version 7 (this nccltrace reads 2)")

        comp = struct.unpack_from("<Q", db, 24)[0]
        write(f, db[:64 + 45])
        refused(f, "truncated: preamble says %d compressed bytes, file has 45" % comp)

        write(f, db[:40])
        refused(f, "truncated: a dump preamble needs 64 bytes, file has 40")

        bad = bytearray(db)
        bad[32] ^= 0xff
        write(f, bytes(bad))
        refused(f, "checksum mismatch")
        p = run(NT, "decode", "--json", "--salvage", f)
        check(p.returncode == 0, "salvage of a bad checksum exits 0")
        if p.returncode == 0:
            doc = json.loads(p.stdout)
            check(len(doc["records"]) == 7 and doc["header"]["salvaged"] is True, "salvaged bad-checksum dump")

        bad = bytearray(db)
        for i in range(64 + 20, len(bad) - 8, 7):
            bad[i] ^= 0x5a
        write(f, bytes(bad))
        p = run(NT, "decode", f)
        line = p.stderr.strip()
        check(p.returncode == 2 and len(line.splitlines()) == 1 and
              ("corrupt zstd frame" in line or "checksum mismatch" in line or "zstd frame holds" in line),
              "scrambled frame refused: %r" % line)
        p = run(NT, "decode", "--salvage", f)
        check(p.returncode in (0, 2) and "Traceback" not in p.stderr and p.returncode >= 0,
              "salvage of a scrambled frame does not crash (%d)" % p.returncode)

        bad = bytearray(db)
        struct.pack_into("<Q", bad, 16, 1 << 40)
        write(f, bytes(bad))
        refused(f, "exceeds the 4 GiB limit")

        g = os.path.join(d, "bad.ring")
        fsize = struct.unpack_from("<Q", rb, 64)[0]
        write(g, rb[:len(rb) // 2])
        refused(g, "truncated: header says %d bytes, file has %d" % (fsize, len(rb) // 2))

        slot_off = struct.unpack_from("<Q", rb, 56)[0]
        write(g, rb[:slot_off + 4 * 128])
        p = run(NT, "decode", "--json", "--salvage", g)
        check(p.returncode == 0, "salvage of a truncated ring exits 0: %r" % p.stderr)
        if p.returncode == 0:
            doc = json.loads(p.stdout)
            pos = [r["pos"] for r in doc["records"]]
            # slots 0..3 survive; the comm's recent[] also kept 4 and 6 (Mark, pos 5, has no comm)
            check(pos == [0, 1, 2, 3, 4, 6] and doc["header"]["salvaged"] is True,
                  "salvaged ring positions %r" % pos)

        write(g, rb[:20] + struct.pack("<I", 100) + rb[24:])
        refused(g, "slot_count 100 is not a power of two")
        write(g, rb[:40] + struct.pack("<Q", 1 << 40) + rb[48:])
        refused(g, "lies outside")
        write(g, rb[:12] + struct.pack("<I", 999) + rb[16:])
        refused(g, "header_size 999")

        # The good file still decodes next to a bad one; exit 2 overall.
        p = run(NT, "decode", "--json", ring, g)
        check(p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, "mixed inputs: exit 2, one error line")
        try:
            doc = json.loads(p.stdout)
            check(len(doc["files"]) == 1 and doc["files"][0]["file"] == ring, "mixed inputs: good file printed")
        except ValueError:
            check(False, "mixed inputs: stdout is JSON")

        # A cut multi-block dump: --salvage keeps the complete records of
        # the blocks before the cut.
        big = os.path.join(d, "big.zst")
        run(MKFIX, "dump", big, "--slots", "4096", "--extra", "2000")
        bb = open(big, "rb").read()
        best = None
        for frac in (0.9, 0.7, 0.5, 0.3):
            cut = int(len(bb) * frac)
            write(f, bb[:cut])
            refused(f, "truncated: preamble says")
            p = run(NT, "decode", "--json", "--salvage", f)
            check(p.returncode in (0, 2), "cut dump salvage exit %d" % p.returncode)
            if p.returncode == 0:
                doc = json.loads(p.stdout)
                n = len(doc["records"])
                pos = [r["pos"] for r in doc["records"]]
                check(pos == list(range(n)) and doc["header"]["salvaged"], "salvaged prefix is contiguous")
                if 0 < n < 2007:
                    best = n
        check(best is not None, "some cut of a multi-block dump salvages a proper prefix of records")

    return finish()


if __name__ == "__main__":
    sys.exit(main())

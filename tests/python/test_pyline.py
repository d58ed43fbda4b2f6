#!/usr/bin/env python3
"""test_pyline.py -- the location-table decoder (interpose/pyline.c) against
CPython's own answer: every instruction of every code object of a few
standard-library modules (and a file with long jumps, no-location code and
huge line gaps), expected line from co_lines().

  test_pyline.py PYLINE_CHECK    Exit: 0 pass, 1 fail, 77 skip (Python < 3.11).
"""
import subprocess
import sys
import types

if sys.version_info < (3, 11):
    print("skip: Python < 3.11 has no location table")
    sys.exit(77)

SRC = "x = 1\n" + "\n" * 5000 + """
def far(a):
    try:
        return [i for i in range(a)
                if i % 3]
    except Exception:
        pass
    finally:
        a = (1 +
             2)
""" + "\n" * 70000 + "def farther():\n    return 2\n"


def codes(co):
    yield co
    for c in co.co_consts:
        if isinstance(c, types.CodeType):
            yield from codes(c)


def cases():
    import json, os, threading, argparse
    tops = [compile(SRC, "gen.py", "exec")]
    for m in (json, os, threading, argparse):
        src = open(m.__file__).read()
        tops.append(compile(src, m.__file__, "exec"))
    for top in tops:
        for co in codes(top):
            want = {}
            for start, end, line in co.co_lines():
                for off in range(start, end, 2):
                    want[off // 2] = line or 0
            for lasti, line in sorted(want.items()):
                yield "%s %d %d %d\n" % (co.co_linetable.hex(), co.co_firstlineno, lasti, line)
            yield "%s %d %d %d\n" % (co.co_linetable.hex(), co.co_firstlineno, -1, co.co_firstlineno)


p = subprocess.run([sys.argv[1]], input="".join(cases()), capture_output=True, text=True)
sys.stdout.write(p.stdout)
sys.stderr.write(p.stderr)
sys.exit(p.returncode)

"""toolcheck.py -- what every test of the `nccltrace` command needs: a
failure list, check(), run() that fails the test on a sanitizer report, and
finish() for the exit status.  Imported by tests/tools/test_*.py (they put
this directory on sys.path and write no bytecode into the source tree).
"""
import os
import subprocess

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args, env=None, timeout=20):
    """Run a command, capture its output.  env: variables added to ours."""
    e = None
    if env:
        e = dict(os.environ)
        e.update(env)
    p = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, env=e)
    # UBSan reports and goes on: its report alone must fail the test.
    check("runtime error:" not in p.stderr and "Sanitizer" not in p.stderr, "sanitizer report: %s" % p.stderr[-2000:])
    return p


def finish():
    """0 when every check held, else 1 (after saying how many failed)."""
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("ok")
    return 0

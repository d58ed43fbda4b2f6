#!/usr/bin/env python3
"""test_progress.py NCCLTRACE MKFIX CASE -- the progress line of `analyze`
and `export` over many files (tools/progress.c): on a terminal (a
pseudo-terminal here) a line rewritten in place with '\\r' and erased before
the report; silent when stderr is a pipe.

  analyze_tty   stdout and stderr on the terminal; then stdout piped
                (analyze --json > file): the line still shows on stderr,
                stdout has none of it
  analyze_pipe  both piped: no progress text, no '\\r'
  export_tty    export --chrome -o FILE on the terminal
  export_pipe   both piped: nothing but the "wrote" line
Exit 0 pass, 1 fail.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
NT, MKFIX, CASE = sys.argv[1], sys.argv[2], sys.argv[3]
N = 24
FAIL = []
PROGRESS = re.compile(r"nccltrace: (analyze: headers|analyze: loading|export: reading) \d+/%d " % N)


def check(cond, msg):
    print("%s: %s" % ("ok" if cond else "FAIL", msg))
    if not cond:
        FAIL.append(msg)


def on_pty(cmd, stdout_pipe=False):
    """Run cmd with stderr (and stdout unless stdout_pipe) on a fresh
    pseudo-terminal.  @return (what the terminal got, stdout if piped, rc)."""
    master, slave = os.openpty()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE if stdout_pipe else slave,
                         stderr=slave)
    os.close(slave)
    got = b""
    while True:
        try:
            b = os.read(master, 65536)
        except OSError:  # EIO: every writer closed the terminal
            break
        if not b:
            break
        got += b
    os.close(master)
    out = p.stdout.read().decode() if stdout_pipe else ""
    rc = p.wait(timeout=60)
    return got.decode(errors="replace"), out, rc


def piped(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    return p.stdout, p.stderr, p.returncode


def erased_before(tty, marker, what):
    """The progress line showed, and was erased ('\\r', spaces, '\\r')
    before MARKER, after which no progress text comes."""
    at = tty.find(marker)
    check(PROGRESS.search(tty) is not None, "%s: a progress line on the terminal: %r" % (what, tty[:160]))
    check(re.search("\r" + PROGRESS.pattern, tty) is not None, "%s: the line starts with '\\r' (rewritten in place)" % what)
    check(at > 0 and re.search(r"\r +\r$", tty[:at]) is not None,
          "%s: erased before %r: %r" % (what, marker, tty[max(0, at - 120):at + 20]))
    check(at > 0 and not PROGRESS.search(tty[at:]), "%s: no progress text after the report starts" % what)


def main():
    tmp = tempfile.mkdtemp(prefix="nccltrace-progress-")
    d = os.path.join(tmp, "dumps")
    os.mkdir(d)
    for i in range(N):  # N processes: one dump each
        subprocess.run([MKFIX, "dump", os.path.join(d, "p%02d.zst" % i), "--pid", str(5000 + i),
                        "--host", "h%d" % i], check=True)
    if CASE == "analyze_tty":
        out, err, rc0 = piped([NT, "analyze", d])
        first = out.splitlines()[0] if out else "(none)"
        tty, _, rc = on_pty([NT, "analyze", d])
        check(rc == rc0, "same exit status on a terminal: %d, piped %d" % (rc, rc0))
        erased_before(tty, first, "analyze")
        tty, out2, rc = on_pty([NT, "analyze", "--json", d], stdout_pipe=True)
        erased_before(tty + "END", "END", "analyze --json >file")
        check("\r" not in out2 and not PROGRESS.search(out2) and out2.startswith("{"),
              "stdout (the JSON) holds none of it: %r" % out2[:80])
    elif CASE == "analyze_pipe":
        out, err, rc = piped([NT, "analyze", d])
        check(not PROGRESS.search(err) and "\r" not in err and "\r" not in out,
              "piped: no progress line: %r" % err[:300])
        check(out.startswith(out.splitlines()[0]) and "inputs: %d files" % N in out, "the report is whole")
    elif CASE == "export_tty":
        trace = os.path.join(tmp, "t.json")
        tty, _, rc = on_pty([NT, "export", "--chrome", d, "-o", trace])
        check(rc == 0 and os.path.getsize(trace) > 0, "export wrote the trace: rc %d" % rc)
        erased_before(tty, "nccltrace: wrote", "export")
    elif CASE == "export_pipe":
        trace = os.path.join(tmp, "t.json")
        out, err, rc = piped([NT, "export", "--chrome", d, "-o", trace])
        check(rc == 0 and err.startswith("nccltrace: wrote") and err.count("\n") == 1 and "\r" not in err,
              "piped: only the 'wrote' line: %r" % err[:300])
    else:
        check(False, "unknown case " + CASE)
    shutil.rmtree(tmp, ignore_errors=True)
    print("%s: %s" % (CASE, "FAIL" if FAIL else "PASS"))
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())

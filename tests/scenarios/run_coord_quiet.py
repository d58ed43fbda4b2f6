#!/usr/bin/env python3
"""run_coord_quiet.py -- an ordinary job under `nccltrace run --coord` says
nothing alarming about connections.

Proves: 2 ranks of examples/healthy on the CPU emulator, with the
cross-rank check async through the coordinator that `run --coord` starts,
exit 0 and verdict lines only: no "closed before authenticating" (run's own
readiness probe connects and closes without a byte; the coordinator logs
only connections that sent something and then closed unauthenticated),
while a stranger that sends a byte and goes is still logged, once.
usage: run_coord_quiet.py NCCLTRACE LAUNCH_SH EMU_LIBDIR HEALTHY
Exit 0 pass, 1 fail.
"""
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True


def main():
    nt, launch, emu, prog = sys.argv[1:5]
    tmp = tempfile.mkdtemp(prefix="nccltrace-coordquiet-")
    env = dict(os.environ)
    env.update({
        "LD_LIBRARY_PATH": emu,
        "NCCLTRACE_DIR": os.path.join(tmp, "dumps"),
        "NCCLTRACE_RING_DIR": os.path.join(tmp, "rings"),
        "NCCLEMU_DEVICES": "8",
        "UNIQUE_ID_FILE": os.path.join(tmp, "unique-id"),
        "LAUNCH_TIMEOUT": "40",
        "NCCLTRACE_JOB": "coordquiet-%d" % os.getpid(),
    })
    for k in ("NCCLEMU_FAULT", "NCCLTRACE_COORD", "NCCLTRACE_SECRET", "LD_PRELOAD"):
        env.pop(k, None)
    p = subprocess.run([nt, "run", "--coord", "--check", "async", "--", launch, "2", prog, "3"], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=90)
    out = p.stdout
    bad = []
    if p.returncode != 0:
        bad.append("exit %d" % p.returncode)
    if "listening on" not in out:
        bad.append("no coordinator started (cannot check what it says)")
    if "before authenticating" in out:
        bad.append("an ordinary run logs 'closed before authenticating'")
    # a stranger: 2 bytes, then gone; logged (bad magic), run's probe is not
    stranger = ("import os, socket, time; h, p = os.environ['NCCLTRACE_COORD'].rsplit(':', 1); "
                "s = socket.create_connection((h, int(p))); s.sendall(b'xx'); s.close(); time.sleep(0.5)")
    q = subprocess.run([nt, "run", "--coord", "--", sys.executable, "-c", stranger], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    if q.stdout.count("closed connection") != 1:
        bad.append("want one line for the stranger, none for run's probe:\n" + q.stdout)
    if bad:
        print("FAIL: %s\n--- output\n%s" % ("; ".join(bad), out))
        return 1
    print("ok: 2-rank async run under run --coord, no connection alarm")
    return 0


if __name__ == "__main__":
    sys.exit(main())

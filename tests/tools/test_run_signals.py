#!/usr/bin/env python3
"""test_run_signals.py NCCLTRACE SIGCOUNT CASE -- `nccltrace run` passes each
signal on to its command once, and job control works through it.

CMD is sigcount (it prints a letter per signal it gets, its totals at
SIGTERM); run leads a process group of its own in this test's session, as a
shell's job does.  Cases:

  group   20 x `kill -USR2 -PGID` (run and CMD both get each one from the
          kernel): CMD counts exactly 20, none passed on a second time;
  pid     `kill -USR2 RUNPID` (run only): passed on, CMD counts 1;
  jobctl  SIGTSTP to run stops CMD, then run; SIGCONT to run continues both;
          the same sent to the group; SIGSTOP (uncatchable) stops run only,
          and the SIGCONT that resumes it is passed on.  CMD counts each
          SIGCONT once.

Before each next signal the test waits for CMD to show the last one, so the
kernel never merges two; SIGTERM to run alone ends it, after (by signal
number order) any USR2 still pending in run or CMD.  Exit 0 pass, 1 fail.
"""
import os
import select
import signal
import subprocess
import sys
import time

NT, SIGCOUNT, CASE = sys.argv[1], sys.argv[2], sys.argv[3]
DEADLINE = 20.0  # seconds for any one expected change: generous, never a measure
fails = []


def check(cond, what):
    if not cond:
        fails.append(what)
    return cond


class Run:
    def __init__(self):
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        self.p = subprocess.Popen([NT, "run", "--", SIGCOUNT], stdout=subprocess.PIPE, process_group=0,
                                  env=env)
        self.out = b""
        self.wait_out(lambda o: b"ready\n" in o, "CMD ready")
        self.child = self.find_child()

    def find_child(self):
        end = time.monotonic() + DEADLINE
        while time.monotonic() < end:
            try:
                kids = open("/proc/%d/task/%d/children" % (self.p.pid, self.p.pid)).read().split()
            except OSError:
                kids = []
            for k in kids:
                try:
                    if open("/proc/%s/comm" % k).read().strip() == "sigcount":
                        return int(k)
                except OSError:
                    pass
            time.sleep(0.01)
        raise SystemExit("FAIL: no sigcount child of run")

    def wait_out(self, cond, what):
        end = time.monotonic() + DEADLINE
        fd = self.p.stdout.fileno()
        while not cond(self.out):
            left = end - time.monotonic()
            if left <= 0:
                check(False, "%s: output %r" % (what, self.out))
                return False
            r, _, _ = select.select([fd], [], [], left)
            if r:
                b = os.read(fd, 4096)
                if not b:
                    check(cond(self.out), "%s: EOF, output %r" % (what, self.out))
                    return cond(self.out)
                self.out += b
        return True

    def letters(self, c):
        return self.out.split(b"ready\n", 1)[-1].split(b"\n", 1)[0].count(c)

    def wait_state(self, pid, stopped, what):
        end = time.monotonic() + DEADLINE
        while time.monotonic() < end:
            try:
                st = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[0]
            except OSError:
                st = "?"
            if (st == "T") == stopped:
                return True
            time.sleep(0.01)
        return check(False, "%s (state %s)" % (what, st))

    def finish(self):
        os.kill(self.p.pid, signal.SIGTERM)
        self.wait_out(lambda o: b"cont=" in o and o.endswith(b"\n"), "totals at SIGTERM")
        try:
            self.p.wait(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            check(False, "run did not exit after SIGTERM")
        tot = {}
        for w in self.out.rsplit(b"\n", 2)[-2].split():
            k, _, v = w.partition(b"=")
            tot[k.decode()] = int(v) if v.isdigit() else -1
        return tot

    def kill_all(self):
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except OSError:
            pass


r = Run()
try:
    pg = r.p.pid  # run leads its group
    if CASE == "group":
        for i in range(1, 21):
            os.killpg(pg, signal.SIGUSR2)
            if not r.wait_out(lambda o, i=i: r.letters(b"U") >= i, "USR2 #%d reached CMD" % i):
                break
        tot = r.finish()
        check(tot.get("usr2") == 20, "20 group-wide USR2: CMD counted %r (passed on twice?)" % tot.get("usr2"))
        print("group: CMD counted %r USR2 for 20 sent to the group" % tot.get("usr2"))
    elif CASE == "pid":
        os.kill(r.p.pid, signal.SIGUSR2)
        r.wait_out(lambda o: r.letters(b"U") >= 1, "USR2 to run passed on")
        tot = r.finish()
        check(tot.get("usr2") == 1, "one USR2 to run: CMD counted %r" % tot.get("usr2"))
        print("pid: CMD counted %r USR2 for 1 sent to run" % tot.get("usr2"))
    elif CASE == "jobctl":
        os.kill(r.p.pid, signal.SIGTSTP)
        r.wait_state(r.child, True, "SIGTSTP to run stops CMD")
        r.wait_state(r.p.pid, True, "run stops after CMD")
        os.kill(r.p.pid, signal.SIGCONT)
        r.wait_state(r.child, False, "SIGCONT to run continues CMD")
        r.wait_state(r.p.pid, False, "run continues")
        r.wait_out(lambda o: r.letters(b"C") >= 1, "CMD saw SIGCONT")
        os.killpg(pg, signal.SIGTSTP)
        r.wait_state(r.child, True, "SIGTSTP to the group stops CMD")
        r.wait_state(r.p.pid, True, "and run")
        os.killpg(pg, signal.SIGCONT)
        r.wait_state(r.child, False, "SIGCONT to the group continues CMD")
        r.wait_state(r.p.pid, False, "and run")
        r.wait_out(lambda o: r.letters(b"C") >= 2, "CMD saw the group's SIGCONT")
        # A group-wide send the kernel merged for run stays unmatched at
        # run's helper for up to 2 s, and a signal to run alone in that
        # window is not passed on (docs/user-guide.md, the rule's limits):
        # the part below tests signals to run alone, after that window.
        time.sleep(2.2)
        os.kill(r.p.pid, signal.SIGSTOP)
        r.wait_state(r.p.pid, True, "SIGSTOP stops run")
        time.sleep(0.2)  # CMD must still be running: give a wrong stop the time to show
        r.wait_state(r.child, False, "SIGSTOP to run leaves CMD running")
        os.kill(r.p.pid, signal.SIGCONT)
        r.wait_state(r.p.pid, False, "SIGCONT continues run")
        r.wait_out(lambda o: r.letters(b"C") >= 3, "the SIGCONT to run passed on")
        tot = r.finish()
        check(tot.get("cont") == 3, "3 SIGCONT (run, group, run): CMD counted %r" % tot.get("cont"))
        print("jobctl: CMD counted %r SIGCONT for 3 sent" % tot.get("cont"))
    else:
        raise SystemExit("unknown case " + CASE)
finally:
    r.kill_all()

for f in fails:
    print("FAIL:", f)
sys.exit(1 if fails else 0)

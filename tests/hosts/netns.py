"""netns.py -- hosts made of Linux namespaces for the multi-host tests
(tests/hosts/hosts_e2e.py; docs/user-guide.md, "Many hosts").

Each host is a network namespace ntr-hK with a loopback, one veth link
(eth0, 10.77.0.K+1/24) to a bridge in a namespace of its own, ntr-sw (the
switch), so nothing is added to the root namespace and no traffic leaves
these namespaces.  A process runs in a host through `ip netns exec` and
`unshare --uts` with the host's name as its hostname: the tracer sees
different hosts (gethostname), and each network namespace has its own
abstract Unix namespace, so each host elects its own node aggregator.  The
file system, /dev/shm and the pid namespace stay shared (the emulator's NCCL
meets through /dev/shm; docs/emulator.md, "How it crosses namespaces").

Hosts.wire(k, ...) replaces host k's cable with a user-space one that
delays and loses what the host sends (tests/hosts/wire.py), the fault `tc
netem` makes, for a kernel without sch_netem.

Hosts are always removed: Hosts is a context manager, an atexit hook
removes them too (and ends every wire process first), and creating them first removes any stale ntr-*
namespace a killed run left behind.  Needs root.

Thread-safety: none (one test driver thread).
"""
import atexit
import os
import subprocess
import sys

PREFIX = "ntr-"
SWITCH = PREFIX + "sw"
NET = "10.77.0."


def sh(*args, check=True):
    p = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    if check and p.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(args), p.stderr.strip()))
    return p


def stale():
    out = sh("ip", "netns", "list", check=False).stdout
    return [ln.split()[0] for ln in out.splitlines() if ln.split() and ln.split()[0].startswith(PREFIX)]


WIRES = []  # wire.py processes, ended before their namespaces go


def remove_all():
    """Deleting a namespace destroys its veth and TAP devices, and a veth's
    peer with it."""
    while WIRES:
        w = WIRES.pop()
        w.terminate()
        try:
            w.wait(5)
        except subprocess.TimeoutExpired:
            w.kill()
            w.wait()
    for ns in stale():
        sh("ip", "netns", "del", ns, check=False)


def can_create():
    """None when namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", "unshare"):
        if subprocess.run(["sh", "-c", "command -v " + tool], capture_output=True).returncode != 0:
            return "%s is missing (apt-get install iproute2 util-linux)" % tool
    return None


class Hosts:
    """n hosts h0..h{n-1}; host k is ntr-hk at 10.77.0.(k+1)."""

    def __init__(self, n):
        self.n = n
        self.names = ["h%d" % k for k in range(n)]

    def ns(self, k):
        return PREFIX + self.names[k]

    def addr(self, k):
        return NET + str(k + 1)

    def switch_port(self, k):
        return "sw-" + self.names[k]

    def __enter__(self):
        remove_all()
        atexit.register(remove_all)
        try:
            sh("ip", "netns", "add", SWITCH)
            sh("ip", "-n", SWITCH, "link", "add", "br0", "type", "bridge")
            sh("ip", "-n", SWITCH, "link", "set", "br0", "up")
            sh("ip", "-n", SWITCH, "link", "set", "lo", "up")
            for k in range(self.n):
                ns, port = self.ns(k), self.switch_port(k)
                sh("ip", "netns", "add", ns)
                sh("ip", "-n", SWITCH, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
                sh("ip", "-n", SWITCH, "link", "set", port, "master", "br0", "up")
                sh("ip", "-n", ns, "link", "set", "lo", "up")
                sh("ip", "-n", ns, "addr", "add", self.addr(k) + "/24", "dev", "eth0")
                sh("ip", "-n", ns, "link", "set", "eth0", "up")
        except BaseException:
            remove_all()
            raise
        return self

    def __exit__(self, *exc):
        remove_all()
        return False

    def argv(self, k, cmd):
        """cmd (a list) run in host k with hostname hk; the process exec'd
        in place (ip netns exec, unshare and sh all exec), so the pid of
        the Popen is the program's."""
        return ["ip", "netns", "exec", self.ns(k), "unshare", "--uts", "sh", "-c",
                'hostname "$0" && exec "$@"', self.names[k]] + list(cmd)

    def run(self, k, cmd, **kw):
        return subprocess.run(self.argv(k, cmd), **kw)

    def popen(self, k, cmd, **kw):
        return subprocess.Popen(self.argv(k, cmd), **kw)

    def link(self, k, up):
        """Cut (or restore) host k's cable at the switch."""
        sh("ip", "-n", SWITCH, "link", "set", self.switch_port(k), "up" if up else "down")

    def wire(self, k, delay_ms, loss):
        """Host k's cable becomes wire.py: what h_k sends waits delay_ms and
        is lost with probability loss.  Its eth0 and switch port become TAP
        devices (same names and address).  @return the wire process, once
        it has attached both ends (RuntimeError saying why if it cannot)."""
        ns, port = self.ns(k), self.switch_port(k)
        sh("ip", "-n", ns, "link", "del", "eth0")  # the veth, and with it sw-hk
        sh("ip", "-n", ns, "tuntap", "add", "dev", "eth0", "mode", "tap")
        sh("ip", "-n", SWITCH, "tuntap", "add", "dev", port, "mode", "tap")
        sh("ip", "-n", SWITCH, "link", "set", port, "master", "br0", "up")
        sh("ip", "-n", ns, "addr", "add", self.addr(k) + "/24", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        here = os.path.dirname(os.path.abspath(__file__))
        w = subprocess.Popen([sys.executable, os.path.join(here, "wire.py"), ns, SWITCH, port,
                              str(delay_ms), str(loss)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        WIRES.append(w)
        first = w.stdout.readline()
        if not first.startswith("wire up"):
            w.kill()
            raise RuntimeError("the user-space wire of %s did not start: %s%s" % (ns, first, w.stdout.read()))
        return w

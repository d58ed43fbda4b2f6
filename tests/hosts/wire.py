"""wire.py -- a host's cable with delay and loss, made in user space, for a
kernel without sch_netem (tests/hosts/netns.py Hosts.wire; docs/emulator.md,
"How it crosses namespaces").

    python3 wire.py HOST_NS SWITCH_NS PORT DELAY_MS LOSS

HOST_NS's eth0 and SWITCH_NS's PORT are TAP devices (made by the caller,
PORT a member of the switch's bridge); this process is the cable between
them.  Frames from the host to the switch wait DELAY_MS and are dropped
with probability LOSS, independently, as `tc qdisc add dev eth0 root netem
delay DELAY_MS loss LOSS` on the host's eth0 does to what it sends; frames
the other way pass at once.  The delay keeps the frames' order (netem's
with a fixed delay does too).  It prints "wire up" once both ends are
attached, then one line of counts when SIGTERM ends it.

Why TAP and not a packet socket on a veth: a veth hands a packet socket
TCP segments of up to 64 KiB (segmentation offload), which cannot be sent
out again as one frame; a TAP device without IFF_VNET_HDR gets frames of
its MTU only.

Thread-safety: one thread.  Signal-safety: the SIGTERM handler only sets a
flag.
"""
import collections
import ctypes
import fcntl
import os
import random
import select
import signal
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NO_PI = 0x0002, 0x1000
CLONE_NEWNET = 0x40000000

libc = ctypes.CDLL(None, use_errno=True)


def setns(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise OSError(e, "setns %s: %s" % (path, os.strerror(e)))
    finally:
        os.close(fd)


def attach(ns, ifname):
    """An fd on TAP device ifname of network namespace ns (TUNSETIFF binds
    in the namespace of the calling thread, hence the setns around it)."""
    home = "/proc/self/ns/net"
    keep = os.open(home, os.O_RDONLY)
    try:
        setns("/run/netns/" + ns)
        fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", ifname.encode(), IFF_TAP | IFF_NO_PI))
        return fd
    finally:
        if libc.setns(keep, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns back")
        os.close(keep)


def main():
    if len(sys.argv) != 6:
        sys.exit("usage: wire.py HOST_NS SWITCH_NS PORT DELAY_MS LOSS")
    host_ns, sw_ns, port = sys.argv[1:4]
    delay, loss = float(sys.argv[4]) / 1000.0, float(sys.argv[5])
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    host = attach(host_ns, "eth0")
    sw = attach(sw_ns, port)
    rng = random.Random(int(os.environ.get("NTR_WIRE_SEED", "1")))
    queue = collections.deque()  # (due, frame): host -> switch, in order
    n = {"up": 0, "dropped": 0, "down": 0}
    print("wire up: %s eth0 -> %s %s delay %.0f ms loss %.1f%%" % (host_ns, sw_ns, port, delay * 1e3, loss * 100),
          flush=True)
    while not stop:
        now = time.monotonic()
        while queue and queue[0][0] <= now:
            try:
                os.write(sw, queue.popleft()[1])
            except OSError:
                n["dropped"] += 1  # the switch end's queue is full: a loss, as on a real cable
        wait = max(0.0, queue[0][0] - now) if queue else 0.2
        try:
            ready, _, _ = select.select([host, sw], [], [], wait)
        except InterruptedError:
            continue
        for fd in ready:
            while True:
                try:
                    frame = os.read(fd, 65536)
                except BlockingIOError:
                    break
                if fd == host:
                    if rng.random() < loss:
                        n["dropped"] += 1
                    else:
                        n["up"] += 1
                        queue.append((time.monotonic() + delay, frame))
                else:
                    n["down"] += 1
                    try:
                        os.write(host, frame)
                    except OSError:
                        pass
    print("wire down: %d frames delayed to the switch, %d dropped, %d to the host" % (n["up"], n["dropped"], n["down"]),
          flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A delay line for kernels without netem or fq (this one has neither): every packet routed
into TUN device DEV comes back out of it DELAY later, in order. Put it in a namespace between
two others and route through it (scripts/delayline.py --help shows the policy routing), and the
path between them has DELAY added one way, or 2 x DELAY round trip when both directions pass.

    scripts/delayline.py --dev dl0 --delay 20ms --for 60s [--limit 20000]

Run it in the namespace that holds DEV (`ip tuntap add dev dl0 mode tun` made it persistent).
It stops by itself after --for; at most --limit packets wait at once (more are dropped and
counted, as a full queue drops them). On exit it prints what it carried and dropped.

Routing in the middle namespace M, between its veths MA (toward A) and MB (toward B):
    ip -n M link set dl0 up
    ip -n M rule add iif MA lookup 100; ip -n M rule add iif MB lookup 100
    ip -n M route add default dev dl0 table 100
    ip netns exec M sysctl -w net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.dl0.rp_filter=0
Packets the line writes back arrive on dl0 and follow the main table to their destination.
"""

import argparse
import collections
import fcntl
import os
import select
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000


def duration(text: str) -> float:
    """Seconds of '20ms', '1.5s', '250us' or a bare number of seconds."""
    for suffix, scale in (("us", 1e-6), ("ms", 1e-3), ("s", 1.0)):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * scale
    return float(text)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dev", required=True, help="the TUN device (made with ip tuntap add)")
    p.add_argument("--delay", required=True, type=duration, help="added one way, e.g. 20ms")
    p.add_argument("--for", dest="lifetime", required=True, type=duration, help="stop after, e.g. 60s")
    p.add_argument("--limit", type=int, default=20000, help="packets waiting at most (default 20000)")
    a = p.parse_args()
    if not 0 <= a.delay <= 10 or not 0 < a.lifetime <= 3600 or not 0 < a.limit <= 1_000_000:
        print("delayline: --delay 0..10s, --for up to 3600s, --limit 1..1000000", file=sys.stderr)
        return 2
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", a.dev.encode(), IFF_TUN | IFF_NO_PI))
    os.set_blocking(fd, False)
    queue: collections.deque = collections.deque()
    carried = dropped = 0
    end = time.monotonic() + a.lifetime
    poll = select.poll()
    poll.register(fd, select.POLLIN)
    while True:
        now = time.monotonic()
        if now >= end:
            break
        while queue and queue[0][0] <= now:
            try:
                os.write(fd, queue.popleft()[1])
                carried += 1
            except OSError:
                dropped += 1
        wait = min(end, queue[0][0]) - now if queue else end - now
        if not poll.poll(max(0.0, wait) * 1000):
            continue
        due = time.monotonic() + a.delay
        for _ in range(256):
            try:
                pkt = os.read(fd, 65536)
            except BlockingIOError:
                break
            if len(queue) >= a.limit:
                dropped += 1
            else:
                queue.append((due, pkt))
    print(f"delayline {a.dev}: {carried} packets carried, {dropped} dropped, {len(queue)} left waiting")
    return 0


if __name__ == "__main__":
    sys.exit(main())

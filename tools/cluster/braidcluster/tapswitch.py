"""A userspace Ethernet switch with delay, loss and a per-port rate, for kernels without netem.

Run as a script inside the switch namespace: it opens one TAP device per host (t0, t1, ...),
prints "ready", and then forwards frames between them: it learns which port owns each source
MAC, floods broadcasts and unknown destinations, and releases each frame `delay` seconds after
it finished crossing the output port (serialized at `rate` bits/s when given; a port whose queue
would exceed `queue` seconds drops the frame, as a tbf queue does). `loss` drops a share of the
frames at random. braid-cluster then moves each TAP into its host namespace; the devices vanish
when this process dies (their file descriptors are ours), so killing it tears the links down.
"""
import fcntl
import heapq
import os
import random
import select
import signal
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000
BATCH = 64  # frames read from one port before looking at the others


def open_tap(name):
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
    return fd


class Switch:
    def __init__(self, fds, delay, rate, loss, queue, seed=None):
        self.fds = fds
        self.port_of_fd = {fd: i for i, fd in enumerate(fds)}
        self.delay = delay
        self.rate = rate  # bits per second, or 0
        self.loss = loss  # probability
        self.queue = queue  # seconds of backlog a port may hold
        self.rng = random.Random(seed)
        self.macs = {}
        self.heap = []  # (due, seq, port, frame)
        self.seq = 0
        self.free_at = [0.0] * len(fds)  # when each output port finishes what it holds
        self.dropped = 0

    def enqueue(self, port, frame, now):
        if self.rate:
            start = max(now, self.free_at[port])
            if start - now > self.queue:
                self.dropped += 1
                return
            done = start + len(frame) * 8 / self.rate
            self.free_at[port] = done
        else:
            done = now
        self.seq += 1
        heapq.heappush(self.heap, (done + self.delay, self.seq, port, frame))

    def receive(self, in_port, frame, now):
        if len(frame) < 14:
            return
        if self.loss and self.rng.random() < self.loss:
            self.dropped += 1
            return
        dst, src = frame[0:6], frame[6:12]
        if not src[0] & 1:
            self.macs[src] = in_port
        out = self.macs.get(dst) if not dst[0] & 1 else None
        if out is not None:
            if out != in_port:
                self.enqueue(out, frame, now)
            return
        for port in range(len(self.fds)):
            if port != in_port:
                self.enqueue(port, frame, now)

    def release(self, now):
        while self.heap and self.heap[0][0] <= now:
            _, _, port, frame = heapq.heappop(self.heap)
            try:
                os.write(self.fds[port], frame)
            except OSError:
                pass  # device down or full: the frame is lost, as on a wire

    def run(self):
        poller = select.poll()
        for fd in self.fds:
            poller.register(fd, select.POLLIN)
        while True:
            now = time.monotonic()
            self.release(now)
            wait = max(0.0, (self.heap[0][0] - now) * 1000) if self.heap else 1000
            for fd, _ in poller.poll(wait):
                port = self.port_of_fd[fd]
                for _ in range(BATCH):
                    try:
                        frame = os.read(fd, 65536)
                    except (BlockingIOError, OSError):
                        break
                    self.receive(port, frame, time.monotonic())


def main():
    hosts, delay_ms, rate, loss_pct, queue_ms = (int(sys.argv[1]), float(sys.argv[2]),
                                                 int(sys.argv[3]), float(sys.argv[4]),
                                                 float(sys.argv[5]))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    fds = [open_tap(f"t{i}") for i in range(hosts)]
    print("ready", flush=True)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # nobody reads our stdout any more
    Switch(fds, delay_ms / 1000, rate, loss_pct / 100, queue_ms / 1000).run()


if __name__ == "__main__":
    main()

"""TCP stream throughput between two hosts of a cluster (the "link bound").

measure() starts a receiver in one host namespace and a sender in another, each as this file
run as a script; the receiver times each stream from accept() to its last byte and prints the
rate. Every socket has a timeout, so a broken link ends in an error, never a hang.
"""
import os
import socket
import statistics
import subprocess
import sys
import time

PORT = 29400
SOCKET_TIMEOUT = 60.0
CHUNK = 1 << 20


def serve(port, nbytes, runs):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("0.0.0.0", port))
        listener.listen(1)
        listener.settimeout(SOCKET_TIMEOUT)
        print("ready", flush=True)
        buf = bytearray(CHUNK)
        for _ in range(runs):
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(SOCKET_TIMEOUT)
                start = time.monotonic()
                got = 0
                while got < nbytes:
                    n = conn.recv_into(buf, min(CHUNK, nbytes - got))
                    if n == 0:
                        raise SystemExit(f"receiver: stream ended after {got} of {nbytes} bytes")
                    got += n
                seconds = time.monotonic() - start
                conn.sendall(b"k")  # the sender waits for this, so runs do not overlap
            print(f"{nbytes * 8 / seconds:.0f}", flush=True)


def send(host, port, nbytes, runs):
    payload = b"\xa5" * CHUNK
    for _ in range(runs):
        with socket.create_connection((host, port), timeout=SOCKET_TIMEOUT) as conn:
            left = nbytes
            while left > 0:
                n = min(left, CHUNK)
                conn.sendall(payload[:n])
                left -= n
            if conn.recv(1) != b"k":
                raise SystemExit("sender: no acknowledgement from the receiver")


def measure(cluster, src, dst, nbytes, runs=3, port=PORT, timeout=120.0):
    """Bits per second of each of `runs` streams of `nbytes` from host src to host dst."""
    from .netns import host_argv  # here: this file also runs as a plain script

    me = os.path.abspath(__file__)
    recv = subprocess.Popen(host_argv(cluster.ns(dst), [sys.executable, me, "serve", str(port),
                                                        str(nbytes), str(runs)]),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if recv.stdout.readline().strip() != "ready":  # bounded by the receiver's own timeout
            raise RuntimeError(f"receiver in h{dst} did not start: {recv.stderr.read().strip()}")
        sender = subprocess.run(host_argv(cluster.ns(src), [sys.executable, me, "send",
                                                            cluster.address(dst), str(port),
                                                            str(nbytes), str(runs)]),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                timeout=timeout)
        if sender.returncode != 0:
            raise RuntimeError(f"sender in h{src} failed: {sender.stderr.strip()}")
        out, err = recv.communicate(timeout=timeout)
        if recv.returncode != 0:
            raise RuntimeError(f"receiver in h{dst} failed: {err.strip()}")
        return [float(x) for x in out.split()]
    finally:
        if recv.poll() is None:
            recv.kill()
            recv.wait()


def median(rates):
    return statistics.median(rates)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "serve":
        serve(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    elif mode == "send":
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    else:
        raise SystemExit(f"unknown mode {mode}")

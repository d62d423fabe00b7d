"""Running a set of processes as one job: output relayed with a per-process prefix, a deadline,
the first failure propagated (the others are stopped), and signals forwarded.

Each process runs in its own session (so stopping it stops what it started) and dies with us
(PR_SET_PDEATHSIG), so even a SIGKILLed braid-cluster leaves no ranks behind.
"""
import ctypes
import os
import selectors
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1
DRAIN_SECONDS = 2.0  # output still in flight after the last process exits is relayed this long


def _die_with_parent():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except OSError:
        pass  # best effort: `down` also kills what lives in the namespaces


class Proc:
    """One process of the job: what to run, its output prefix, the CPU it is pinned to (None:
    not pinned), and how it went."""

    def __init__(self, label, argv, env, prefix, cpu=None):
        self.label = label  # for messages, e.g. "rank 3 (h1)"
        self.argv = argv
        self.env = env
        self.cpu = cpu
        self.prefix = prefix.encode() if prefix else b""
        self.popen = None
        self.code = None
        self.partial = {}  # fd -> unfinished line


class Job:
    """Runs `procs` to completion; run() returns the job's exit code."""

    def __init__(self, procs, timeout, grace=5.0, name="braid-cluster"):
        self.procs = procs
        self.timeout = timeout
        self.grace = grace
        self.name = name
        self.signalled = None  # first signal number received
        self.kill_at = None
        self.code = 0
        self.failed = False

    def note(self, text):
        sys.stderr.buffer.write(f"{self.name}: {text}\n".encode())
        sys.stderr.buffer.flush()

    def on_signal(self, sig, frame):
        if self.signalled is None:
            self.signalled = sig
        else:
            self.stop(signal.SIGKILL)  # a second Ctrl-C: no more grace

    def stop(self, sig):
        for p in self.procs:
            if p.popen is not None and p.code is None:
                try:
                    os.killpg(p.popen.pid, sig)
                except (ProcessLookupError, PermissionError):
                    try:
                        p.popen.send_signal(sig)
                    except ProcessLookupError:
                        pass
        if sig != signal.SIGKILL and self.kill_at is None:
            self.kill_at = time.monotonic() + self.grace

    def _fail(self, code, why, sig=signal.SIGTERM):
        if self.failed:
            return
        self.failed = True
        self.code = code
        running = any(p.code is None for p in self.procs if p.popen is not None)
        self.note(why + ("; stopping the others" if running else ""))
        if running:
            self.stop(sig)

    def _relay(self, proc, fd, out, sel):
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return
        if not data:
            stream = sel.get_key(fd).data[2]
            sel.unregister(fd)
            stream.close()
            rest = proc.partial.pop(fd, b"")
            if rest:
                out.write(proc.prefix + rest + b"\n")
                out.flush()
            return
        text = proc.partial.get(fd, b"") + data
        lines = text.split(b"\n")
        proc.partial[fd] = lines.pop()
        if lines:
            out.write(b"".join(proc.prefix + line + b"\n" for line in lines))
            out.flush()

    def _start(self, proc, sel):
        def child_setup():
            _die_with_parent()
            if proc.cpu is not None:
                os.sched_setaffinity(0, {proc.cpu})

        proc.popen = subprocess.Popen(proc.argv, env=proc.env, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      start_new_session=True, preexec_fn=child_setup)
        for stream, out in ((proc.popen.stdout, sys.stdout.buffer),
                            (proc.popen.stderr, sys.stderr.buffer)):
            fd = stream.fileno()
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ, (proc, out, stream))

    def run(self):
        sel = selectors.DefaultSelector()
        start = time.monotonic()
        deadline = start + self.timeout if self.timeout else None
        try:
            for proc in self.procs:
                if self.signalled is not None:
                    break
                try:
                    self._start(proc, sel)
                except OSError as e:
                    self._fail(127, f"cannot start {proc.label} ({proc.argv[0]}): {e}")
                    break
            drain_until = None
            while True:
                for proc in self.procs:
                    if proc.popen is not None and proc.code is None:
                        rc = proc.popen.poll()
                        if rc is not None:
                            proc.code = rc
                            if rc != 0:
                                if rc < 0:
                                    sig = -rc
                                    why = (f"{proc.label} was killed by signal {sig} "
                                           f"({signal.Signals(sig).name})")
                                    code = 128 + sig
                                else:
                                    why, code = f"{proc.label} exited with code {rc}", rc
                                self._fail(code, why)
                now = time.monotonic()
                if self.signalled is not None and not self.failed:
                    name = signal.Signals(self.signalled).name
                    self._fail(128 + self.signalled, f"got {name}", self.signalled)
                if deadline is not None and now > deadline and not self.failed:
                    self._fail(124, f"timed out after {self.timeout:g} s")
                if self.kill_at is not None and now > self.kill_at:
                    self.stop(signal.SIGKILL)
                    self.kill_at = None
                running = any(p.popen is not None and p.code is None for p in self.procs)
                if not running:
                    if drain_until is None:
                        drain_until = now + DRAIN_SECONDS
                    if not sel.get_map() or now > drain_until:
                        break
                for key, _ in sel.select(timeout=0.1):
                    proc, out, _ = key.data
                    self._relay(proc, key.fd, out, sel)
        finally:
            # Whatever happened (an exception included), nothing we started outlives run().
            leftover = [p for p in self.procs if p.popen is not None and p.popen.poll() is None]
            if leftover:
                self.stop(signal.SIGKILL)
                for p in leftover:
                    try:
                        p.popen.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        pass
            for fd in list(sel.get_map()):
                key = sel.get_key(fd)
                proc, out, stream = key.data
                rest = proc.partial.pop(fd, b"")
                if rest:
                    out.write(proc.prefix + rest + b"\n")
                sel.unregister(fd)
                stream.close()
            sel.close()
            sys.stdout.flush()
        return self.code

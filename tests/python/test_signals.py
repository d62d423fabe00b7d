"""A process that uses braid keeps its own signal handling.

braid's optional transports' libraries used to come with braid_torch into every process:
Debian's libfabric pulled in PSM's libinfinipath, whose load-time handlers turned SIGTERM and
SIGINT into exit() inside the handler (a rank of PyTorch's suite that got SIGTERM while exiting
deadlocked there for good; Ctrl-C no longer raised KeyboardInterrupt), and UCX's libucs took
SIGHUP (the process survived it). Now they load only when their backend is used, with every
signal's disposition kept (transport/shared_library.h).

Two ranks: after an all_reduce over braid, each checks that the kernel sees the same signals
caught as before braid_torch was imported (SIGHUP, SIGINT, SIGTERM, SIGSEGV, SIGBUS, SIGILL,
SIGABRT, SIGFPE), that SIGINT raises KeyboardInterrupt, then rank 0 sends itself SIGTERM and
rank 1 SIGHUP: both must die of that signal (exit status -15 and -1).

    /usr/bin/python3 tests/python/test_signals.py          (PYTHONPATH=build/python)
"""
import os
import signal
import sys
import time
from datetime import timedelta

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

WATCHED = [signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGSEGV, signal.SIGBUS,
           signal.SIGILL, signal.SIGABRT, signal.SIGFPE]


def caught():
    """The watched signals the kernel has a handler for (SigCgt of /proc/self/status)."""
    with open("/proc/self/status") as f:
        mask = int(next(line for line in f if line.startswith("SigCgt:")).split()[1], 16)
    return {signal.Signals(s).name for s in WATCHED if mask & (1 << (s - 1))}


def worker():
    import torch
    before = caught()  # torch's own, and Python's (SIGINT)
    import torch.distributed as dist
    import braid_torch  # noqa: F401

    dist.init_process_group("braid", timeout=timedelta(seconds=30))
    rank = dist.get_rank()
    t = torch.ones(4)
    dist.all_reduce(t)
    assert t.tolist() == [2.0] * 4, t
    after = caught()
    assert after == before, f"rank {rank}: handlers for {sorted(after ^ before)} changed " \
                            f"(before braid_torch: {sorted(before)}, after: {sorted(after)})"
    try:
        signal.raise_signal(signal.SIGINT)
        time.sleep(1)
        raise AssertionError(f"rank {rank}: SIGINT did not raise KeyboardInterrupt")
    except KeyboardInterrupt:
        pass
    dist.barrier()
    print(f"rank {rank}: signals as before braid ({sorted(before)} caught); KeyboardInterrupt "
          f"on SIGINT; now {'SIGTERM' if rank == 0 else 'SIGHUP'}", flush=True)
    os.kill(os.getpid(), signal.SIGTERM if rank == 0 else signal.SIGHUP)
    time.sleep(10)
    print(f"rank {rank}: still alive 10 s after the signal", flush=True)
    sys.exit(3)


def main():
    harness.require_braid_torch()
    harness.report(harness.launch(os.path.abspath(__file__), 2, timeout=60),
                   expected=[-signal.SIGTERM, -signal.SIGHUP])


if __name__ == "__main__":
    if harness.is_worker():
        worker()
    else:
        main()

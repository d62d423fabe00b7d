"""Timeouts say "timed out": a barrier that a peer never reaches, and a monitored_barrier that
names the missing rank. Three ranks:

- rank 1 stays away from a barrier on the group {0, 1} (timeout 2 s): rank 0's barrier must raise
  a RuntimeError saying "timed out" within 2 s + slack;
- rank 1 stays away from a monitored_barrier (timeout 3 s, wait_all_ranks) on the world: rank 0
  must raise "timed out" naming rank 1 (and rank 2 as unconfirmed: braid receives in rank order)
  within 3 s + slack; rank 2, waiting for rank 0's answer, must raise too, seeing rank 0's abort
  (the group is aborted).

Then every rank meets on a Gloo group and tears the braid groups down: under 2.x
destroy_process_group shuts each braid backend down (a bounded barrier, then an abort), which
must be quick even for the broken groups.
"""
import os
import sys
import time
from datetime import timedelta

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

SLACK_S = 5


def worker():
    import torch
    import torch.distributed as dist
    import braid_torch  # noqa: F401

    dist.init_process_group("braid", timeout=timedelta(seconds=30))
    rank = dist.get_rank()
    gloo = dist.new_group(backend="gloo")
    pair = dist.new_group([0, 1], backend="braid", timeout=timedelta(seconds=2))
    watched = dist.new_group(backend="braid", timeout=timedelta(seconds=30))
    dist.all_reduce(torch.ones(4))  # the world works first

    def expect(call, limit, *words):
        t0 = time.monotonic()
        try:
            call()
        except RuntimeError as e:
            elapsed = time.monotonic() - t0
            msg = str(e)
            print(f"rank {rank}: raised after {elapsed:.2f} s: {msg.splitlines()[0]}", flush=True)
            assert all(w in msg for w in words), f"want {words} in: {msg}"
            assert elapsed < limit + SLACK_S, f"took {elapsed:.1f} s"
        else:
            raise AssertionError(f"rank {rank}: {words}: returned")

    if rank == 0:
        expect(lambda: dist.barrier(group=pair), 2, "braid barrier", "timed out")
    dist.barrier(group=gloo)  # the monitored barrier's ranks start together
    if rank in (0, 2):
        def monitored():
            if harness.torch_major() >= 2:
                dist.monitored_barrier(group=watched, timeout=timedelta(seconds=3),
                                       wait_all_ranks=True)
            else:  # 1.13's dist.monitored_barrier takes Gloo groups only
                watched.monitored_barrier(timedelta(seconds=3), wait_all_ranks=True)
        if rank == 0:
            expect(monitored, 3, "braid monitored_barrier timed out", "rank 1 did not arrive",
                   "ranks 2..2 are unconfirmed")
        else:
            # Rank 0 reports and aborts after 3 s; rank 2 (which would give up after 3 + 5 s)
            # sees that abort.
            expect(monitored, 3, "braid monitored_barrier", "rank 0 called abort()")
    dist.barrier(group=gloo)
    t0 = time.monotonic()
    dist.destroy_process_group()
    elapsed = time.monotonic() - t0
    print(f"rank {rank}: destroy_process_group took {elapsed:.2f} s", flush=True)
    assert elapsed < 10, f"destroy_process_group took {elapsed:.1f} s"


def main():
    harness.require_braid_torch()
    harness.report(harness.launch(os.path.abspath(__file__), 3, timeout=60))


if __name__ == "__main__":
    if harness.is_worker():
        worker()
    else:
        main()

"""A killed or frozen peer makes the survivor's wait() raise braid's error within the timeout.

Three ranks; rank 0 shares a braid group with rank 1 and another with rank 2 (timeout 5 s each).
Rank 1 SIGKILLs itself: rank 0's async all_reduce on their group must raise in wait() (braid
sees the peer gone). Rank 2 SIGSTOPs itself: rank 0's all_reduce on their group must raise
braid's timeout within 5 s + slack. Rank 0 then SIGKILLs the frozen rank 2. Afterwards each
broken group keeps failing at once.
"""
import os
import signal
import sys
import time
from datetime import timedelta

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

TIMEOUT_S = 5
SLACK_S = 5


def expect_failure(dist, torch, group, what):
    work = dist.all_reduce(torch.ones(1 << 20), group=group, async_op=True)
    t0 = time.monotonic()
    try:
        work.wait()
    except RuntimeError as e:
        elapsed = time.monotonic() - t0
        print(f"rank 0, {what}: wait() raised after {elapsed:.2f} s: {str(e).splitlines()[0]}")
        assert "braid allreduce" in str(e), str(e)
        assert elapsed < TIMEOUT_S + SLACK_S, f"{what}: took {elapsed:.1f} s"
    else:
        raise AssertionError(f"{what}: wait() returned")
    t0 = time.monotonic()
    try:
        dist.all_reduce(torch.ones(4), group=group)
    except RuntimeError:
        print(f"rank 0, {what}: the next all_reduce raised after {time.monotonic() - t0:.2f} s")
    else:
        raise AssertionError(f"{what}: all_reduce on a broken group returned")


def worker():
    import torch
    import torch.distributed as dist
    import braid_torch  # noqa: F401

    dist.init_process_group("braid", timeout=timedelta(seconds=30))
    rank = dist.get_rank()
    timeout = timedelta(seconds=TIMEOUT_S)
    killed = dist.new_group([0, 1], backend="braid", timeout=timeout)
    frozen = dist.new_group([0, 2], backend="braid", timeout=timeout)
    pids = torch.zeros(3, dtype=torch.int64)
    pids[rank] = os.getpid()
    dist.all_reduce(pids)  # also proves the world works first
    if rank in (0, 1):
        t = torch.ones(1000)
        dist.all_reduce(t, group=killed)
        assert t[0].item() == 2
    if rank in (0, 2):
        t = torch.ones(1000)
        dist.all_reduce(t, group=frozen)
        assert t[0].item() == 2
    sys.stdout.flush()
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    if rank == 2:
        os.kill(os.getpid(), signal.SIGSTOP)
        raise AssertionError("rank 2 continued after SIGSTOP")
    time.sleep(0.5)
    try:
        expect_failure(dist, torch, killed, "killed peer")
        expect_failure(dist, torch, frozen, "frozen peer")
    finally:
        os.kill(int(pids[2]), signal.SIGKILL)
    sys.stdout.flush()
    os._exit(0)  # the world group has dead members; skip tearing it down


def main():
    harness.require_braid_torch()
    results = harness.launch(os.path.abspath(__file__), 3, timeout=60)
    harness.report(results, expected=[0, -signal.SIGKILL, -signal.SIGKILL])


if __name__ == "__main__":
    if harness.is_worker():
        worker()
    else:
        main()

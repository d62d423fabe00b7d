"""braid_torch's point-to-point ops posted together: dist.batch_isend_irecv at 2 ranks with the
irecv before the isend (its usual order, which hung while braid ran ops one at a time) and after
it, small tensors and 16 MiB ones (more than a channel holds), several ops to the peer in one
batch, and plain isend/irecv both posted before either wait. Every element is checked.

    /usr/bin/python3 tests/python/test_p2p.py                 (PYTHONPATH=build/python)
    $(tools/torch2-env) tests/python/test_p2p.py              (PYTHONPATH=build/python-torch2)
"""
import os
import sys
import warnings
from datetime import timedelta

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

SIZES = [1, 1031, (16 << 20) // 4]  # float32 elements; the last is 16 MiB


def worker():
    import torch
    import torch.distributed as dist
    import braid_torch  # noqa: F401  (registers "braid")

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning)
    dist.init_process_group("braid", timeout=timedelta(seconds=30))
    rank, world = dist.get_rank(), dist.get_world_size()
    assert world == 2, "test_p2p runs at 2 ranks"
    peer = 1 - rank

    def message(src, n, k):
        """What rank `src` sends as its k-th message of n elements (the same in every process)."""
        return torch.arange(n, dtype=torch.float32) * 3 + src * 1000003 + k * 7

    def check(got, src, k, what):
        want = message(src, got.numel(), k)
        if not torch.equal(got, want):
            bad = (got != want).nonzero()[0].item()
            raise AssertionError(f"rank {rank}: {what}: element {bad} is {got[bad].item()}, "
                                 f"want {want[bad].item()}")

    for n in SIZES:
        for recv_first in (True, False):
            out, got = message(rank, n, 0), torch.full((n,), -1.0)
            ops = [dist.P2POp(dist.irecv, got, peer), dist.P2POp(dist.isend, out, peer)]
            if not recv_first:
                ops.reverse()
            for work in dist.batch_isend_irecv(ops):
                work.wait()
            check(got, peer, 0, f"batch_isend_irecv n={n} recv_first={recv_first}")

    # Several ops to the peer in one batch: matched in their order per direction.
    sizes = [5, 1031, (16 << 20) // 4, 1031]
    outs = [message(rank, n, k) for k, n in enumerate(sizes)]
    gots = [torch.full((n,), -1.0) for n in sizes]
    ops = []
    for k in range(len(sizes)):
        ops.append(dist.P2POp(dist.isend, outs[k], peer))
        ops.append(dist.P2POp(dist.irecv, gots[k], peer))
    for work in reversed(dist.batch_isend_irecv(ops)):
        work.wait()
    for k, got in enumerate(gots):
        check(got, peer, k, f"batch of {len(ops)}, message {k}")

    # isend and irecv of 16 MiB both posted before either wait, then a collective.
    n = (16 << 20) // 4
    out, got = message(rank, n, 9), torch.full((n,), -1.0)
    send, recv = dist.isend(out, peer), dist.irecv(got, peer)
    send.wait()
    recv.wait()
    check(got, peer, 9, "isend then irecv of 16 MiB")
    total = torch.ones(3)
    dist.all_reduce(total)
    assert torch.equal(total, torch.full((3,), 2.0)), f"rank {rank}: all_reduce after: {total}"
    dist.destroy_process_group()
    print(f"rank {rank}: ok")


if __name__ == "__main__":
    harness.main(__file__, 2, worker, timeout=90)

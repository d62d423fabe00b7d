"""braid_torch's point-to-point ops posted together: dist.batch_isend_irecv at 2 ranks with the
irecv before the isend (its usual order, which hung while braid ran ops one at a time) and after
it, small tensors and 16 MiB ones (more than a channel holds), several ops to the peer in one
batch, and plain isend/irecv both posted before either wait. Every element is checked.

    /usr/bin/python3 tests/python/test_p2p.py                 (PYTHONPATH=build/python)
    $(tools/torch2-env) tests/python/test_p2p.py              (PYTHONPATH=build/python-torch2)
"""
import os
import sys

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from p2p_kit import check as check_from, finish, message, start  # noqa: E402

SIZES = [1, 1031, (16 << 20) // 4]  # float32 elements; the last is 16 MiB


def worker():
    torch, dist, rank = start(2)
    peer = 1 - rank

    def check(got, src, k, what):
        check_from(rank, got, src, k, what)

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
    finish(rank)


if __name__ == "__main__":
    harness.main(__file__, 2, worker, timeout=90)

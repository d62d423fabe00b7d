"""braid_torch's receives from any source at 3 ranks: dist.recv(t) without src returns the
sender's rank, dist.irecv(t) and the Work's source rank (source_rank() on 1.13, _source_rank() on
2.x), both senders' messages taken in each sender's order with every element checked, small and
16 MiB tensors, tags choosing among posted receives, and the errors: a message of another size than
the tensor (smaller: the recv fails and the group goes on; larger: braid's mismatch).

    /usr/bin/python3 tests/python/test_p2p_any_source.py      (PYTHONPATH=build/python)
    $(tools/torch2-env) tests/python/test_p2p_any_source.py   (PYTHONPATH=build/python-torch2)
"""
import os
import sys
from datetime import timedelta

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from p2p_kit import check as check_from, finish, message, start  # noqa: E402

PER_SENDER = 4


def worker():
    torch, dist, rank = start(3)

    def check(got, src, k, what):
        check_from(rank, got, src, k, what)

    def source_of(work):
        # 1.13 names it source_rank(), 2.x _source_rank().
        get = getattr(work, "_source_rank", None) or getattr(work, "source_rank")
        return get()

    # Both senders' messages, blocking recv and irecv alternating, small and 16 MiB.
    for n in (1031, (16 << 20) // 4):
        if rank != 0:
            for k in range(PER_SENDER):
                dist.send(message(rank, n, k), 0)
        else:
            seen = {1: 0, 2: 0}
            for m in range(2 * PER_SENDER):
                got = torch.full((n,), -1.0)
                if m % 2 == 0:
                    src = dist.recv(got)
                else:
                    work = dist.irecv(got)
                    work.wait()
                    src = source_of(work)
                assert src in seen, f"recv from any source returned {src}"
                check(got, src, seen[src], f"n={n}, receive {m}")
                seen[src] += 1
            assert seen == {1: PER_SENDER, 2: PER_SENDER}, seen
        dist.barrier()

    # Tags: receives for tag 1 and tag 2 posted first; rank 1 sends tag 2, rank 2 (told by rank 0
    # once tag 2 arrived) tag 1.
    n = 257
    if rank == 0:
        one, two = torch.full((n,), -1.0), torch.full((n,), -1.0)
        w1, w2 = dist.irecv(one, tag=1), dist.irecv(two, tag=2)
        w2.wait()
        assert not w1.is_completed(), "the tag-1 receive finished before any tag-1 send"
        dist.send(torch.ones(1), 2, tag=3)
        w1.wait()
        assert source_of(w1) == 2 and source_of(w2) == 1, (source_of(w1), source_of(w2))
        check(one, 2, 0, "tag 1")
        check(two, 1, 0, "tag 2")
    elif rank == 1:
        dist.send(message(1, n, 0), 0, tag=2)
    else:
        go = torch.zeros(1)
        dist.recv(go, 0, tag=3)
        dist.send(message(2, n, 0), 0, tag=1)
    dist.barrier()

    # A smaller message than the tensor: that recv fails naming both sizes, the group goes on.
    if rank == 1:
        dist.send(message(1, 5, 0), 0, tag=4)
    elif rank == 0:
        try:
            dist.recv(torch.full((8,), -1.0), tag=4)
            raise AssertionError("a 5-element message filled an 8-element recv")
        except RuntimeError as e:
            msg = str(e)
            assert "rank 1 sent a message of 20 bytes, the tensor holds 32 bytes" in msg, msg
            print(f"smaller message: {msg.splitlines()[0]}")
    dist.barrier()

    # A larger one: braid's mismatch, on a group of its own (it breaks that group).
    bad = dist.new_group([0, 1], backend="braid", timeout=timedelta(seconds=10))
    if rank == 1:
        dist.send(message(1, 10, 0), 0, group=bad)
    elif rank == 0:
        try:
            dist.recv(torch.full((4,), -1.0), group=bad)
            raise AssertionError("a 10-element message fit a 4-element recv")
        except RuntimeError as e:
            msg = str(e)
            for part in ("recv from any source", "rank 0", "peer rank 1", "10 x float",
                         "buffer's 4 elements"):
                assert part in msg, f"no {part!r} in {msg}"
            print(f"larger message: {msg.splitlines()[0]}")
    dist.barrier()
    finish(rank)


if __name__ == "__main__":
    harness.main(__file__, 3, worker, timeout=110)

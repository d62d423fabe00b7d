"""braid_torch collectives against Gloo in the same world: every supported op and dtype, async
handles and futures, non-contiguous tensors, unsupported ops and a shape mismatch.

    /usr/bin/python3 tests/python/test_collectives.py --world 2   (PYTHONPATH=build/python)
    $(tools/torch2-env) tests/python/test_collectives.py --world 2   (PYTHONPATH=build/python-torch2)
"""
import argparse
import warnings
import os
import sys
import time
import zlib
from datetime import timedelta

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

DTYPE_NAMES = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64",
               "bool"]
SIZES = [1, 1000, 70001]  # one element, one chunk, several 128 KiB chunks (odd split)


def worker():
    import torch
    import torch.distributed as dist
    import braid_torch  # noqa: F401  (registers "braid")

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message=".*all_reduce_coalesced will be deprecated")
    R = dist.ReduceOp
    dist.init_process_group("braid", timeout=timedelta(seconds=30))  # env:// as torchrun
    rank, world = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    assert dist.get_backend() == "braid", dist.get_backend()
    dtypes = [getattr(torch, n) for n in DTYPE_NAMES]
    checks = 0

    def gloo_dtype(dt):
        # Gloo lacks bfloat16 and bool: compare through types that hold those values exactly.
        return {torch.bfloat16: torch.float32, torch.bool: torch.uint8}.get(dt, dt)

    def ops_for(dt):
        """Op names (ReduceOp objects neither compare with None nor print stably)."""
        if dt == torch.bool:
            return ["MAX", "MIN"]
        ops = ["SUM", "PRODUCT", "MIN", "MAX"]
        return ops + ["AVG"] if dt.is_floating_point else ops

    def make(dt, n, op, src_rank, salt):
        """Rank `src_rank`'s input: small integers, so every reduction is exact in every dtype."""
        seed = zlib.crc32(f"{src_rank}/{salt}/{n}/{dt}/{op}".encode())  # same in every process
        g = torch.Generator().manual_seed(seed)
        if dt == torch.bool:
            return torch.randint(0, 2, (n,), generator=g).to(torch.bool)
        if op == "PRODUCT":
            lo, hi = (-1, 3) if dt != torch.uint8 else (1, 3)
            v = torch.randint(lo, hi, (n,), generator=g)
            v[v == 0] = 1
        else:
            lo = 0 if dt == torch.uint8 else -9
            v = torch.randint(lo, lo + 10, (n,), generator=g)
        return v.to(dt)

    def gloo_reduce_all(x, op):
        ref = x.to(gloo_dtype(x.dtype)).clone()
        dist.all_reduce(ref, op=R.SUM if op == "AVG" else getattr(R, op), group=gloo)
        if op == "AVG":
            return (ref.double() / world).to(x.dtype)
        return ref.to(x.dtype)

    def same(got, ref, what, op=None):
        nonlocal checks
        checks += 1
        if op == "AVG" and got.dtype in (torch.float16, torch.bfloat16):
            ok = torch.allclose(got.double(), ref.double(), rtol=1e-2, atol=1e-2)
        elif op == "AVG":
            ok = torch.allclose(got.double(), ref.double(), rtol=1e-6, atol=1e-6)
        else:
            ok = torch.equal(got, ref)
        if not ok:
            bad = (got.double() != ref.double()).nonzero()[:5].flatten().tolist()
            raise AssertionError(f"rank {rank}: {what}: differs from gloo at {bad}: "
                                 f"{got.flatten()[bad].tolist()} vs {ref.flatten()[bad].tolist()}")

    # all_reduce: every dtype x op x size.
    for dt in dtypes:
        for op in ops_for(dt):
            for n in SIZES:
                x = make(dt, n, op, rank, "ar")
                got = x.clone()
                dist.all_reduce(got, op=getattr(R, op))
                same(got, gloo_reduce_all(x, op), f"all_reduce {dt} {op} n={n}", op)

    # broadcast and reduce from every root.
    for dt in dtypes:
        for root in range(world):
            x = make(dt, 1000, None, rank, "bc")
            got = x.clone()
            dist.broadcast(got, src=root)
            ref = x.to(gloo_dtype(dt)).clone()
            dist.broadcast(ref, src=root, group=gloo)
            same(got, ref.to(dt), f"broadcast {dt} root {root}")
            for op in ops_for(dt):
                x = make(dt, 1000, op, rank, "rd")
                got = x.clone()
                dist.reduce(got, dst=root, op=getattr(R, op))
                ref = gloo_reduce_all(x, op)
                if rank == root:
                    same(got, ref, f"reduce {dt} {op} root {root}", op)

    # all_gather (list and into one tensor) and reduce_scatter (list and tensor).
    for dt in dtypes:
        for n in (1, 1000, 33333):
            x = make(dt, n, None, rank, "ag")
            want = [make(dt, n, None, r, "ag") for r in range(world)]
            outs = [torch.empty(n, dtype=dt) for _ in range(world)]
            dist.all_gather(outs, x)
            gl = [torch.empty(n, dtype=gloo_dtype(dt)) for _ in range(world)]
            dist.all_gather(gl, x.to(gloo_dtype(dt)), group=gloo)
            for r in range(world):
                same(outs[r], gl[r].to(dt), f"all_gather {dt} n={n} from {r}")
                same(outs[r], want[r], f"all_gather {dt} n={n} from {r} (seeded)")
            flat = torch.empty(world * n, dtype=dt)
            dist.all_gather_into_tensor(flat, x)
            same(flat, torch.cat(want), f"all_gather_into_tensor {dt} n={n}")
        for op in ops_for(dt):
            n = 4099
            x = make(dt, world * n, op, rank, "rs")
            full = gloo_reduce_all(x, op)  # Gloo 1.13 has no reduce_scatter: all_reduce + slice
            mine = full[rank * n:(rank + 1) * n]
            got = torch.empty(n, dtype=dt)
            dist.reduce_scatter(got, list(x.chunk(world)), op=getattr(R, op))
            same(got, mine, f"reduce_scatter {dt} {op}", op)
            got = torch.empty(n, dtype=dt)
            dist.reduce_scatter_tensor(got, x, op=getattr(R, op))
            same(got, mine, f"reduce_scatter_tensor {dt} {op}", op)

    # all_reduce_coalesced (deprecated in 1.13, still used): mixed shapes, one dtype per call.
    for dts in ([torch.float32] * 3, [torch.bfloat16] * 2, [torch.int64]):
        xs = [make(dt, 7 * (i + 1), "SUM", rank, f"co{i}").reshape(-1, 7) for i, dt in enumerate(dts)]
        got = [x.clone() for x in xs]
        dist.all_reduce_coalesced(got, op=R.SUM)
        for i, (g, x) in enumerate(zip(got, xs)):
            same(g, gloo_reduce_all(x, "SUM"), f"all_reduce_coalesced #{i} {x.dtype}")

    # send / recv: every ordered pair in one global order (braid matches p2p in issue order).
    for a in range(world):
        for b in range(world):
            if a == b:
                continue
            for dt in (torch.float32, torch.bfloat16, torch.int8):
                msg = make(dt, 5000, None, a, f"p2p{b}")
                if rank == a:
                    dist.send(msg, dst=b)
                elif rank == b:
                    got = torch.empty_like(msg)
                    dist.recv(got, src=a)
                    same(got, msg, f"recv {dt} {a}->{b}")

    # Non-contiguous tensors: staged through a contiguous copy and written back.
    base = make(torch.float32, 64 * 6, "SUM", rank, "nc").reshape(64, 6)
    t = base.clone()
    view = t[:, 1::2]  # strided view; the other columns must stay untouched
    assert not view.is_contiguous()
    dist.all_reduce(view)
    same(view.contiguous(), gloo_reduce_all(base[:, 1::2].contiguous(), "SUM"), "all_reduce strided")
    same(t[:, 0::2].contiguous(), base[:, 0::2].contiguous(), "all_reduce strided: untouched")
    tt = make(torch.float32, 30, None, rank, "nct").reshape(5, 6).t()
    ref = tt.contiguous()
    dist.broadcast(ref, src=world - 1, group=gloo)
    dist.broadcast(tt, src=world - 1)
    same(tt.contiguous(), ref, "broadcast transposed")
    outs = [torch.zeros(6, 4).t() for _ in range(world)]
    dist.all_gather(outs, torch.full((4, 6), float(rank)))
    for r in range(world):
        same(outs[r].contiguous(), torch.full((4, 6), float(r)), f"all_gather strided from {r}")

    # Zero elements.
    z = torch.empty(0)
    dist.all_reduce(z)

    # async_op handles: wait, is_completed, get_future and its callbacks.
    xs = [make(torch.float32, n, "SUM", rank, f"as{n}") for n in (10, 100000, 3)]
    got = [x.clone() for x in xs]
    works = [dist.all_reduce(g, async_op=True) for g in got]
    fut = works[1].get_future()
    doubled = fut.then(lambda f: f.value()[0] * 2)
    for w in works:
        w.wait()
        assert w.is_completed()
    for g, x in zip(got, xs):
        same(g, gloo_reduce_all(x, "SUM"), "async all_reduce")
    same(fut.wait()[0], got[1], "future value")
    same(doubled.wait(), got[1] * 2, "future.then")
    w = dist.all_reduce(torch.ones(1000), async_op=True)
    deadline = time.monotonic() + 20
    while not w.is_completed():  # polling alone must finish it
        assert time.monotonic() < deadline, "is_completed() never became true"
        time.sleep(0.001)
    w.wait()
    w = dist.broadcast(torch.ones(10), src=0, async_op=True)
    w.get_future().wait()
    assert w.is_completed()
    w = dist.barrier(async_op=True)
    w.wait()
    checks += 1

    # barrier really waits for the last rank.
    if rank == 0:
        time.sleep(0.3)
    t0 = time.monotonic()
    dist.barrier()
    if rank != 0:
        assert time.monotonic() - t0 > 0.2, "barrier returned before rank 0 arrived"

    # Unsupported ops: a clear error naming the op, raised before anything runs (gather, scatter,
    # all-to-all, monitored_barrier and tags: test_ops.py; recv from any source: test_p2p.py).
    cases = {
        "BXOR": lambda: dist.all_reduce(torch.ones(2, dtype=torch.int32), op=R.BXOR),
        "Short": lambda: dist.all_reduce(torch.ones(2, dtype=torch.int16)),
    }
    for name, call in cases.items():
        try:
            call()
        except RuntimeError as e:
            msg = str(e)
            assert "not supported by braid" in msg and name in msg, f"{name}: unclear error: {msg}"
            if rank == 0:
                print(f"unsupported {name}: {msg.splitlines()[0]}")
        else:
            raise AssertionError(f"{name} did not raise")
        checks += 1
    dist.barrier()  # the group still works after refused calls

    # Mismatched shapes across ranks: braid's mismatch error, raised on every rank, naming the op.
    bad = dist.new_group(backend="braid", timeout=timedelta(seconds=10))
    t0 = time.monotonic()
    try:
        dist.all_reduce(torch.ones(4 + rank), group=bad)
    except RuntimeError as e:
        msg = str(e)
        assert "allreduce" in msg, msg
        if rank == 0:
            print(f"mismatch after {time.monotonic() - t0:.2f} s: {msg.splitlines()[0]}")
    else:
        raise AssertionError("mismatched all_reduce did not raise")
    checks += 1

    dist.barrier(group=gloo)
    print(f"rank {rank}: {checks} checks passed")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--world", type=int, default=2)
    args = parser.parse_args()
    harness.require_braid_torch()
    harness.report(harness.launch(os.path.abspath(__file__), args.world, timeout=80))


if __name__ == "__main__":
    if harness.is_worker():
        worker()
    else:
        main()

"""CUDA tensors through braid_torch (braid's device path; needs a GPU, else it skips).

--world ranks (default 2) share the machine's GPU(s) (rank r on cuda:r % count). On each rank,
every element against a reference computed on the CPU from every rank's inputs: all_reduce (sum,
avg, max; float32, bfloat16, int64; a non-contiguous tensor), broadcast and reduce from each root,
all_gather (list form), all_gather_into_tensor, reduce_scatter_tensor, the coalesced forms;
all_to_all_single with equal splits, uneven row splits (zero pairs, and rank 0 sending nothing)
and a non-contiguous output, all_to_all's list form, gather and scatter from every root (sizes
1, 1001, 100003; float32, bfloat16, int64); async_op works whose wait() orders the current
stream and whose get_future() value is right; then a DDP step on a small MLP that must equal a
single-process reference (the mean gradient of every rank's batch) to 1e-5. Bad input is
refused naming rank, op and what was wrong (split sizes that do not add up, a rank's own blocks
of different sizes, CPU and CUDA tensors mixed in one call); ops CUDA tensors do not reach
(send/recv) raise naming the device; last, ranks whose splits disagree fail on every rank with
braid's size mismatch, raised by the Work (CUDA errors are asynchronous).

    $(tools/torch2-env) tests/python/test_cuda.py --world 3     (PYTHONPATH=build/python-torch2)
"""
import argparse
import os
import sys
from datetime import timedelta

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

def inputs(rank, n, dtype, device):
    import torch
    g = torch.Generator().manual_seed(1000 + rank * 17 + n)
    if dtype.is_floating_point:
        t = torch.randn(n, generator=g).to(dtype)
    else:
        t = torch.randint(-1000, 1000, (n,), generator=g).to(dtype)
    return t.to(device)


def worker():
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    import braid_torch  # noqa: F401

    dist.init_process_group("braid", timeout=timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    checks = 0

    def same(got, want, what, tol=0.0):
        got = got.cpu()
        if tol == 0.0:
            assert torch.equal(got, want), f"rank {rank}: {what}: {got[:6]} vs {want[:6]}"
        else:
            assert torch.allclose(got.float(), want.float(), atol=tol, rtol=tol), \
                f"rank {rank}: {what}: max |diff| {(got.float() - want.float()).abs().max()}"

    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        for n in (1, 1001, 300007):
            every = [inputs(r, n, dtype, "cpu") for r in range(world)]
            # bfloat16: each rank order rounds differently (up to ~1 ulp per rank past the first)
            tol = 3e-2 if dtype == torch.bfloat16 else (1e-6 if dtype.is_floating_point else 0.0)
            for op, ref in ((dist.ReduceOp.SUM, lambda: sum(every[1:], every[0].clone())),
                            (dist.ReduceOp.MAX, lambda: torch.stack(every).max(0).values)):
                t = every[rank].to(dev)
                dist.all_reduce(t, op=op)
                same(t, ref(), f"all_reduce {op} {dtype} n={n}", tol)
                checks += 1
            if dtype.is_floating_point:
                t = every[rank].to(dev)
                dist.all_reduce(t, op=dist.ReduceOp.AVG)
                same(t, (sum(every[1:], every[0].clone()).float() / world).to(dtype),
                     f"all_reduce avg {dtype} n={n}", tol)
                checks += 1
            for root in range(world):
                t = every[rank].to(dev)
                dist.broadcast(t, src=root)
                same(t, every[root], f"broadcast root {root} {dtype} n={n}")
                t = every[rank].to(dev)
                dist.reduce(t, dst=root)
                if rank == root:
                    same(t, sum(every[1:], every[0].clone()), f"reduce root {root}", tol)
                checks += 2
            outs = [torch.empty(n, dtype=dtype, device=dev) for _ in range(world)]
            dist.all_gather(outs, every[rank].to(dev))
            for r in range(world):
                same(outs[r], every[r], f"all_gather from {r} {dtype} n={n}")
            flat = torch.empty(world * n, dtype=dtype, device=dev)
            dist.all_gather_into_tensor(flat, every[rank].to(dev))
            same(flat, torch.cat(every), f"all_gather_into_tensor {dtype} n={n}")
            big = [inputs(r, world * n, dtype, "cpu") for r in range(world)]
            out = torch.empty(n, dtype=dtype, device=dev)
            dist.reduce_scatter_tensor(out, big[rank].to(dev))
            same(out, sum(big[1:], big[0].clone())[rank * n:(rank + 1) * n],
                 f"reduce_scatter_tensor {dtype} n={n}", tol)
            checks += 3

    # A non-contiguous tensor (a transposed view), and a work waited on with its future.
    base = [torch.arange(12.0).reshape(3, 4) + 100 * r for r in range(world)]
    t = base[rank].to(dev).t()
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future()
    work.wait()
    same(t, sum(base[1:], base[0].clone()).t(), "all_reduce of a transposed view")
    same(fut.wait()[0], sum(base[1:], base[0].clone()).t(), "the future's value")
    checks += 2

    # Coalesced all-reduce: two shapes through torch.distributed (which wants one dtype), then
    # two dtypes handed to the backend directly (one flat all-reduce per dtype).
    def summed(n, dtype):
        return sum(inputs(r, n, dtype, "cpu") for r in range(world))

    a, a2 = inputs(rank, 33, torch.float32, dev), inputs(rank, 12, torch.float32, dev).reshape(3, 4)
    dist.all_reduce_coalesced([a, a2])
    same(a, summed(33, torch.float32), "all_reduce_coalesced float32", 1e-6)
    same(a2, summed(12, torch.float32).reshape(3, 4), "all_reduce_coalesced float32 3x4", 1e-6)
    c, b = inputs(rank, 5, torch.float32, dev), inputs(rank, 7, torch.int64, dev)
    dist.group.WORLD._get_backend(dev).allreduce_coalesced([c, b]).wait()
    same(c, summed(5, torch.float32), "backend allreduce_coalesced float32", 1e-6)
    same(b, summed(7, torch.int64), "backend allreduce_coalesced int64")
    checks += 2

    # all_to_all_single, all_to_all, gather and scatter (braid's allToAllv, gather and scatter on
    # the device). block(src, dst, rows): rank src's rows for rank dst, COLS wide.
    COLS = 3

    def block(src, dst, rows, dtype):
        return inputs(src * 1000 + dst, rows * COLS, dtype, "cpu").reshape(rows, COLS)

    def exchange(dtype, rows_of, what):
        """all_to_all_single and all_to_all with rows_of(src, dst) rows per pair."""
        send = [rows_of(rank, q) for q in range(world)]
        recv = [rows_of(q, rank) for q in range(world)]
        mine = [block(rank, q, send[q], dtype) for q in range(world)]
        want = torch.cat([block(q, rank, recv[q], dtype) for q in range(world)])
        out = torch.full((sum(recv), COLS), 7, dtype=dtype, device=dev)
        dist.all_to_all_single(out, torch.cat(mine).to(dev), recv, send)
        same(out, want, f"all_to_all_single {what} {dtype}")
        # A non-contiguous output (a transposed view) is written back where it lies.
        strided = torch.full((COLS, sum(recv)), 7, dtype=dtype, device=dev).t()
        dist.all_to_all_single(strided, torch.cat(mine).to(dev), recv, send)
        same(strided, want, f"all_to_all_single {what} {dtype} into a transposed view")
        outs = [torch.full((recv[q], COLS), 7, dtype=dtype, device=dev) for q in range(world)]
        dist.all_to_all(outs, [t.to(dev) for t in mine])
        for q in range(world):
            same(outs[q], block(q, rank, recv[q], dtype), f"all_to_all {what} from {q} {dtype}")

    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        for n in (1, 1001, 100003):
            # Equal splits (no split lists): n elements per pair.
            x = torch.cat([block(rank, q, n, dtype) for q in range(world)]).reshape(-1)
            out = torch.empty(world * n * COLS, dtype=dtype, device=dev)
            dist.all_to_all_single(out, x.to(dev))
            same(out, torch.cat([block(q, rank, n, dtype).reshape(-1) for q in range(world)]),
                 f"all_to_all_single equal n={n} {dtype}")
            checks += 1
            every = [inputs(r, n, dtype, "cpu") for r in range(world)]
            for root in range(world):
                lst = [torch.empty(n, dtype=dtype, device=dev) for _ in range(world)]
                dist.gather(every[rank].to(dev), lst if rank == root else None, dst=root)
                if rank == root:
                    for r in range(world):
                        same(lst[r], every[r], f"gather root {root} from {r} n={n} {dtype}")
                pieces = [block(root, q, n, dtype) for q in range(world)]
                out = torch.empty(n, COLS, dtype=dtype, device=dev)
                dist.scatter(out, [p.to(dev) for p in pieces] if rank == root else None,
                             src=root)
                same(out, pieces[rank], f"scatter root {root} n={n} {dtype}")
                checks += 2
        # Uneven: some pairs exchange nothing; then rank 0 sends nothing at all (its allToAllv's
        # count is 0) but receives from everyone.
        exchange(dtype, lambda s, d: 0 if (s + 2 * d) % 3 == 0 else 1000 * ((s + d) % 2) + s + 1,
                 "uneven")
        exchange(dtype, lambda s, d: 0 if s == 0 else 50 * d + s, "rank 0 sends nothing")
        checks += 6
    # async: the work's wait() orders the current stream, its future holds the outputs.
    x = torch.cat([block(rank, q, 4, torch.float32) for q in range(world)]).to(dev)
    out = torch.empty_like(x)
    work = dist.all_to_all_single(out, x, async_op=True)
    fut = work.get_future()
    work.wait()
    want = torch.cat([block(q, rank, 4, torch.float32) for q in range(world)])
    same(out, want, "async all_to_all_single")
    same(fut.wait()[0], want, "async all_to_all_single's future")
    checks += 2

    def refused(call, *words):
        try:
            call()
        except RuntimeError as e:
            msg = str(e)
            assert all(w in msg for w in words), f"rank {rank}: unclear error (want {words}): {msg}"
            return msg.splitlines()[0]
        raise AssertionError(f"rank {rank}: {words}: did not raise")

    # Bad input, refused at the call naming rank, op and what was wrong; the group goes on.
    ones = torch.ones(world * 2, device=dev)
    msgs = [
        refused(lambda: dist.all_to_all_single(torch.empty(world * 2, device=dev), ones,
                                               [1] * world, [2] * world),
                "alltoall_base", f"rank {rank}", f"output split sizes add up to {world} rows"),
        refused(lambda: dist.all_to_all_single(
                    torch.empty(world * 2 + 1, device=dev), ones,
                    [2 + (q == rank) for q in range(world)], [2] * world),
                "alltoall_base", f"rank {rank}", "sends itself 2 elements", "receives 3"),
        refused(lambda: dist.all_to_all_single(torch.empty(world * 2), ones),
                "alltoall_base", "is on cpu but the input on cuda"),
        refused(lambda: dist.all_to_all([torch.empty(2, device=dev) for _ in range(world)],
                                        [torch.ones(2)] * (world - 1) + [torch.ones(2, device=dev)]),
                "alltoall", "is on cuda", "the input on cpu"),
        refused(lambda: dist.gather(torch.ones(2, device=dev),
                                    [torch.empty(2) for _ in range(world)] if rank == 0 else None,
                                    dst=0),
                "gather", "is on cpu but the input on cuda") if rank == 0 else None,
        refused(lambda: dist.scatter(torch.empty(2, device=dev),
                                     [torch.ones(3, device=dev) for _ in range(world)]
                                     if rank == 0 else None, src=0),
                "scatter", "rank 0", "has 3 elements but the output has 2") if rank == 0 else None,
    ]
    if rank == 0:
        for m in msgs:
            print(f"refused: {m}")
    checks += len([m for m in msgs if m])

    # Ops without a CUDA path say so.
    try:
        dist.send(torch.ones(2, device=dev), dst=(rank + 1) % world)
        raise AssertionError("send of a CUDA tensor was accepted")
    except RuntimeError as e:
        assert "cuda" in str(e) and "CPU tensors" in str(e), e
    checks += 1

    # A DDP step equals the single-process reference: the mean gradient of both ranks' batches.
    torch.manual_seed(7)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(dev)
    ref_model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    ref_model.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    ddp = DDP(model, device_ids=[dev.index])
    batches = [(torch.randn(8, 16, generator=torch.Generator().manual_seed(r)),
                torch.randint(0, 4, (8,), generator=torch.Generator().manual_seed(50 + r)))
               for r in range(world)]
    x, y = batches[rank]
    nn.functional.cross_entropy(ddp(x.to(dev)), y.to(dev)).backward()
    for r in range(world):
        nn.functional.cross_entropy(ref_model(batches[r][0]), batches[r][1]).div(world).backward()
    for p, q in zip(model.parameters(), ref_model.parameters()):
        same(p.grad, q.grad, "DDP gradient", 1e-5)
    checks += 1

    # Ranks whose splits disagree: rank 1 sends rank 0 one row fewer than rank 0 expects. braid
    # fails the op on every rank (a size mismatch); on the device the error is asynchronous: the
    # stream is released and the Work raises it. The device communicator is broken after it.
    send = [2] * world
    if rank == 1:
        send[0] = 1
    work = dist.all_to_all_single(torch.empty(world * 2, device=dev),
                                  torch.ones(sum(send), device=dev), [2] * world, send,
                                  async_op=True)
    torch.cuda.current_stream(dev).synchronize()
    msg = refused(lambda: work.wait(), "alltoall_base", "bytes were expected")
    print(f"rank {rank}: disagreeing splits: {msg}")
    checks += 1

    torch.cuda.synchronize()
    print(f"rank {rank}: {checks} CUDA checks passed on {dev} ({torch.cuda.get_device_name(dev)})")
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--world", type=int, default=2)
    args = parser.parse_args()
    harness.require_braid_torch()
    import torch
    if not torch.cuda.is_available():
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                        "support"))
        import braid_skip
        braid_skip.skip_no_device(f"no CUDA device for torch {torch.__version__}")
    harness.report(harness.launch(os.path.abspath(__file__), args.world, timeout=240))


if __name__ == "__main__":
    if harness.is_worker():
        worker()
    else:
        main()

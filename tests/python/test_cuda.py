"""CUDA tensors through braid_torch (braid's device path; needs a GPU, else it skips).

Two ranks share the machine's GPU(s) (rank r on cuda:r % count). On each rank, against a
reference computed on the CPU from every rank's inputs: all_reduce (sum, avg, max; float32,
bfloat16, int64; a non-contiguous tensor), broadcast and reduce from each root, all_gather (list
form), all_gather_into_tensor, reduce_scatter_tensor, the coalesced forms; async_op works whose
wait() orders the current stream and whose get_future() value is right; then a DDP step on a
small MLP that must equal a single-process reference (the mean gradient of both ranks' batches)
to 1e-5. Ops CUDA tensors do not reach (send/recv) raise naming the device.

    $(tools/torch2-env) tests/python/test_cuda.py     (PYTHONPATH=build/python-torch2)
"""
import os
import sys
from datetime import timedelta

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

WORLD = 2


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
            tol = 1e-2 if dtype == torch.bfloat16 else (1e-6 if dtype.is_floating_point else 0.0)
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

    # Coalesced all-reduce of tensors of two dtypes.
    a, b = inputs(rank, 33, torch.float32, dev), inputs(rank, 7, torch.int64, dev)
    ref_a = sum(inputs(r, 33, torch.float32, "cpu") for r in range(world))
    ref_b = sum(inputs(r, 7, torch.int64, "cpu") for r in range(world))
    dist.all_reduce_coalesced([a, b])
    same(a, ref_a, "all_reduce_coalesced float32", 1e-6)
    same(b, ref_b, "all_reduce_coalesced int64")
    checks += 1

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

    torch.cuda.synchronize()
    print(f"rank {rank}: {checks} CUDA checks passed on {dev} ({torch.cuda.get_device_name(dev)})")
    dist.destroy_process_group()


def main():
    harness.require_braid_torch()
    import torch
    if not torch.cuda.is_available():
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                        "support"))
        import braid_skip
        braid_skip.skip_no_device(f"no CUDA device for torch {torch.__version__}")
    harness.report(harness.launch(os.path.abspath(__file__), WORLD, timeout=240))


if __name__ == "__main__":
    if harness.is_worker():
        worker()
    else:
        main()

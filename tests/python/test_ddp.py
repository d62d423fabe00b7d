"""DistributedDataParallel over braid matches the same training run over Gloo.

Two ranks train a small MLP (float32, Adam, several gradient buckets) for 12 steps, once with a
Gloo group and once with a braid group, from the same initial weights and the same data. With two
ranks a sum does not depend on order, so the parameters must agree to within 1e-6 absolute
(+1e-5 relative; in practice they are identical), and be bitwise identical across ranks. A third
run uses the Python comm hook allreduce_hook (the future path), a fourth a bfloat16-compressing
hook (bfloat16 all-reduce, which Gloo cannot do; 1.13's bf16_compress_hook insists on NCCL) and
is checked against the Gloo run loosely (max |diff| < 1e-2).
"""
import os
import sys
from datetime import timedelta

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

STEPS = 12
ATOL, RTOL = 1e-6, 1e-5


def worker():
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP
    import braid_torch  # noqa: F401

    torch.set_num_threads(1)
    dist.init_process_group("braid", timeout=timedelta(seconds=30))
    rank, world = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    braid = dist.group.WORLD

    def bf16_hook(group, bucket):
        """Gradients all-reduced in bfloat16 (averaged), decompressed in the future's callback."""
        buf = bucket.buffer()
        compressed = buf.to(torch.bfloat16).div_(world)
        fut = dist.all_reduce(compressed, group=group, async_op=True).get_future()

        def decompress(f):
            buf.copy_(f.value()[0])
            return buf
        return fut.then(decompress)

    def train(group, hook=None):
        torch.manual_seed(1234)
        model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                              nn.Linear(64, 10))
        # Different start on each rank: DDP must broadcast rank 0's weights.
        with torch.no_grad():
            for p in model.parameters():
                p.add_(rank * 0.01)
        ddp = DDP(model, process_group=group, bucket_cap_mb=0.02)  # several buckets
        if hook is not None:
            ddp.register_comm_hook(group, hook)
        opt = torch.optim.Adam(ddp.parameters(), lr=1e-3)
        for step in range(STEPS):
            g = torch.Generator().manual_seed(100 * step + rank)
            x = torch.randn(32, 64, generator=g)
            y = torch.randint(0, 10, (32,), generator=g)
            opt.zero_grad()
            loss = nn.functional.cross_entropy(ddp(x), y)
            loss.backward()
            opt.step()
        return torch.cat([p.detach().reshape(-1) for p in model.parameters()])

    ref = train(gloo)
    got = train(braid)
    hooked = train(braid, default_hooks.allreduce_hook)
    bf16 = train(braid, bf16_hook)

    diff = (got - ref).abs().max().item()
    assert torch.allclose(got, ref, atol=ATOL, rtol=RTOL), f"braid vs gloo: max |diff| {diff}"
    hdiff = (hooked - ref).abs().max().item()
    assert torch.allclose(hooked, ref, atol=ATOL, rtol=RTOL), f"allreduce_hook: max |diff| {hdiff}"
    bdiff = (bf16 - ref).abs().max().item()
    assert bdiff < 1e-2, f"bf16 hook drifted: max |diff| {bdiff}"
    # Identical on every rank (gathered over Gloo, compared bitwise).
    for name, params in (("plain", got), ("allreduce_hook", hooked), ("bf16", bf16)):
        all_params = [torch.empty_like(params) for _ in range(world)]
        dist.all_gather(all_params, params, group=gloo)
        for r in range(world):
            assert torch.equal(all_params[r], all_params[0]), f"{name}: rank {r} differs"
    print(f"rank {rank}: {got.numel()} params after {STEPS} Adam steps: max |braid - gloo| "
          f"{diff:.3g}, allreduce_hook {hdiff:.3g}, bf16 hook {bdiff:.3g}; "
          f"identical across ranks")
    dist.destroy_process_group()


def main():
    harness.require_braid_torch()
    harness.report(harness.launch(os.path.abspath(__file__), 2, timeout=80))


if __name__ == "__main__":
    if harness.is_worker():
        worker()
    else:
        main()

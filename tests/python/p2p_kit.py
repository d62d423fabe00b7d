"""What braid_torch's point-to-point tests share, inside a rank: joining the braid group, and the
messages they send (a function of sender, length and number, so any receiver can check them)."""
import warnings
from datetime import timedelta


def start(world):
    """Imports torch and braid_torch, joins a braid group of `world` ranks (30 s timeout);
    returns (torch, dist, rank)."""
    import torch
    import torch.distributed as dist
    import braid_torch  # noqa: F401  (registers "braid")

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning)
    dist.init_process_group("braid", timeout=timedelta(seconds=30))
    assert dist.get_world_size() == world, f"this test runs at {world} ranks"
    return torch, dist, dist.get_rank()


def message(src, n, k):
    """What rank `src` sends as its k-th message of n elements (the same in every process)."""
    import torch
    return torch.arange(n, dtype=torch.float32) * 3 + src * 1000003 + k * 7


def check(rank, got, src, k, what):
    """Raises naming the first element of `got` that differs from message k of `src`."""
    import torch
    want = message(src, got.numel(), k)
    if not torch.equal(got, want):
        bad = (got != want).nonzero()[0].item()
        raise AssertionError(f"rank {rank}: {what}: element {bad} is {got[bad].item()}, "
                             f"want {want[bad].item()} (message {k} of rank {src})")


def finish(rank):
    """After the point-to-point part: an all-reduce that must still be right, then leaves."""
    import torch
    import torch.distributed as dist
    world = dist.get_world_size()
    total = torch.ones(3)
    dist.all_reduce(total)
    assert torch.equal(total, torch.full((3,), float(world))), \
        f"rank {rank}: all_reduce after: {total}"
    dist.destroy_process_group()
    print(f"rank {rank}: ok")

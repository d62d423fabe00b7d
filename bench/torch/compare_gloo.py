#!/usr/bin/python3
"""braid vs Gloo as PyTorch's distributed backend, measured alternately in one sitting.

Two ranks (CPU tensors, 1 math thread per rank; --bind pins rank i to CPU i) hold a braid group
and a Gloo group in the same world and alternate between them, so both see the same machine load.
Ranks are left unpinned by default: on a machine shared with other jobs a pinned rank waits behind
whatever else runs on its core, which made every number (both backends) erratic. Per alternation:
  - dist.all_reduce of 64 MiB float32 (median of --iters-large calls),
  - dist.all_reduce of 8 bytes (2 float32; median of --iters-small calls),
  - DDP training of the MLP 784-256-128-10 (Adam, global batch 128, Fashion-MNIST) for
    --ddp-steps steps: samples/s.
Reported: the median over --alternations of each, and braid's speed-up.

    PYTHONPATH=build/python /usr/bin/python3 bench/torch/compare_gloo.py [--json out.json]
"""
import argparse
import importlib.util
import json
import os
import socket
import statistics
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

HERE = os.path.dirname(os.path.abspath(__file__))
TRAINER_REF = os.path.join(HERE, "..", "trainer", "torch_ddp.py")


def load_trainer_reference():
    """bench/trainer/torch_ddp.py (the lead's Gloo reference): its model and data loader."""
    spec = importlib.util.spec_from_file_location("torch_ddp", TRAINER_REF)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def time_allreduce(tensor, group, iters):
    """Median seconds of one blocking all_reduce (after one warm-up call)."""
    dist.all_reduce(tensor, group=group)
    times = []
    for _ in range(iters):
        dist.barrier(group=group)
        t0 = time.perf_counter()
        dist.all_reduce(tensor, group=group)
        times.append(time.perf_counter() - t0)
    # Every rank must agree on the number; rank 0's median is what we report.
    return statistics.median(times)


def worker(rank, args, port):
    world = 2
    cpus = sorted(os.sched_getaffinity(0))
    if args.bind and len(cpus) >= world:
        os.sched_setaffinity(0, {cpus[rank]})
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import braid_torch  # noqa: F401

    dist.init_process_group("braid", rank=rank, world_size=world, timeout=timedelta(seconds=120))
    groups = {"braid": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}

    ref = load_trainer_reference()
    x_train, y_train = ref.load_split(args.data, "train")
    per_rank = args.batch // world
    models = {}
    for name, group in groups.items():
        torch.manual_seed(0)
        model = DDP(ref.make_model("mlp"), process_group=group)
        models[name] = (model, torch.optim.Adam(model.parameters(), lr=1e-3))
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(0)
    perm = torch.randperm(len(x_train), generator=g)
    cursor = {"braid": 0, "gloo": 0}

    def train_steps(name, steps):
        model, opt = models[name]
        dist.barrier(group=groups[name])
        t0 = time.perf_counter()
        for _ in range(steps):
            base = cursor[name] % (len(x_train) - args.batch)
            cursor[name] += args.batch
            idx = perm[base + rank * per_rank: base + (rank + 1) * per_rank]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x_train[idx]), y_train[idx])
            loss.backward()
            opt.step()
        elapsed = time.perf_counter() - t0
        return steps * args.batch / elapsed

    large = torch.ones(args.large_mib * (1 << 20) // 4)
    small = torch.ones(2)
    results = {k: {"braid": [], "gloo": []} for k in ("large_s", "small_s", "ddp_samples_s")}
    train_steps("braid", 5)  # warm-up: threads, buffers, first-touch
    train_steps("gloo", 5)
    for alt in range(args.alternations):
        order = ["braid", "gloo"] if alt % 2 == 0 else ["gloo", "braid"]
        for name in order:
            results["large_s"][name].append(time_allreduce(large, groups[name], args.iters_large))
            results["small_s"][name].append(time_allreduce(small, groups[name], args.iters_small))
            results["ddp_samples_s"][name].append(train_steps(name, args.ddp_steps))
        if rank == 0:
            line = "  ".join(
                f"{k} braid {results[k]['braid'][-1]:.3g} gloo {results[k]['gloo'][-1]:.3g}"
                for k in results)
            print(f"alternation {alt + 1}/{args.alternations}: {line}", flush=True)

    if rank == 0:
        med = {k: {n: statistics.median(v) for n, v in r.items()} for k, r in results.items()}
        speed = {
            "allreduce_64MiB": med["large_s"]["gloo"] / med["large_s"]["braid"],
            "allreduce_8B": med["small_s"]["gloo"] / med["small_s"]["braid"],
            "ddp_mlp": med["ddp_samples_s"]["braid"] / med["ddp_samples_s"]["gloo"],
        }
        mib = args.large_mib
        print(f"\ntorch {torch.__version__}, 2 ranks, 1 thread/rank, "
              f"{'pinned' if args.bind else 'unpinned'}, median of {args.alternations} "
              f"alternations, BRAID_SPIN_US={os.environ.get('BRAID_SPIN_US')}")
        print(f"{'measure':<34}{'braid':>14}{'gloo':>14}{'braid speed-up':>16}{'target':>8}")
        print(f"{f'all_reduce {mib} MiB float32':<34}{med['large_s']['braid'] * 1e3:>11.2f} ms"
              f"{med['large_s']['gloo'] * 1e3:>11.2f} ms{speed['allreduce_64MiB']:>15.2f}x"
              f"{'3x':>8}")
        print(f"{'all_reduce 8 B':<34}{med['small_s']['braid'] * 1e6:>11.1f} us"
              f"{med['small_s']['gloo'] * 1e6:>11.1f} us{speed['allreduce_8B']:>15.2f}x"
              f"{'10x':>8}")
        print(f"{'DDP MLP 784-256-128-10 samples/s':<34}{med['ddp_samples_s']['braid']:>14.0f}"
              f"{med['ddp_samples_s']['gloo']:>14.0f}{speed['ddp_mlp']:>15.2f}x{'1.3x':>8}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"torch": torch.__version__, "args": vars(args), "median": med,
                           "speedup": speed, "raw": results}, f, indent=2)
    dist.barrier(group=groups["gloo"])
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--alternations", type=int, default=5)
    p.add_argument("--large-mib", type=int, default=64)
    p.add_argument("--iters-large", type=int, default=5)
    p.add_argument("--iters-small", type=int, default=200)
    p.add_argument("--ddp-steps", type=int, default=60)
    p.add_argument("--batch", type=int, default=128, help="global batch (2 ranks)")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--bind", action="store_true", help="pin rank i to CPU i")
    p.add_argument("--json", help="also write the numbers here")
    args = p.parse_args()
    if args.alternations < 1 or args.batch % 2:
        p.error("need >= 1 alternation and an even batch")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(args, port), nprocs=2, join=True)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""PyTorch DDP (Gloo) reference for braid-train's MLP and ResNet on Fashion-MNIST.

Same models (--model mlp: 784-256-128-10 with ReLU; --model resnet: braid-train's small ResNet,
see trainer/nn/models.h), PyTorch default init, Adam lr 1e-3 (or --optimizer sgd), global batch
split evenly over the ranks, the same normalisation. Prints per epoch: train loss, test accuracy and
global samples/s of the training loop only (evaluation excluded), like braid-train.

Run with Debian's torch (python3-torch): /usr/bin/python3 bench/trainer/torch_ddp.py --ranks 2 [--model resnet]
"""

import argparse
import gzip
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

MEAN = 0.2860
STD = 0.3530


def read_idx(path, magic, dims):
    """Reads a gzip IDX file; fails with the file name and what was expected."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    header = 4 + 4 * dims
    if len(data) < header:
        sys.exit(f"{path}: truncated IDX header (expected {header} bytes)")
    got_magic = struct.unpack(">I", data[:4])[0]
    if got_magic != magic:
        sys.exit(f"{path}: IDX magic {got_magic:#x}, expected {magic:#x}")
    shape = struct.unpack(">" + "I" * dims, data[4:header])
    count = int(np.prod(shape))
    if len(data) - header != count:
        sys.exit(f"{path}: {len(data) - header} data bytes, expected {count}")
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


def load_split(data_dir, prefix):
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"), 0x803, 3)
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"), 0x801, 1)
    x = (images.reshape(len(images), -1).astype(np.float32) / 255.0 - MEAN) / STD
    return torch.from_numpy(x), torch.from_numpy(labels.astype(np.int64))


class ResidualBlock(nn.Module):
    """braid-train's block: conv3x3-BN-ReLU-conv3x3-BN plus identity or 1x1 projection, ReLU."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(cin, cout, 3, stride, 1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(),
            nn.Conv2d(cout, cout, 3, 1, 1, bias=False),
            nn.BatchNorm2d(cout),
        )
        self.proj = None
        if cin != cout or stride != 1:
            self.proj = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, 0, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x):
        return torch.relu(self.main(x) + (x if self.proj is None else self.proj(x)))


def make_model(name="mlp"):
    if name == "mlp":
        return nn.Sequential(
            nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10)
        )
    # stem 1->16 at 28x28; stages 16 (28x28), 32 (14x14), 64 (7x7); global average pool; fc.
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, 1, 1, bias=False),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        ResidualBlock(16, 16, 1),
        ResidualBlock(16, 32, 2),
        ResidualBlock(32, 64, 2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, 10),
    )


def worker(rank, args, port):
    if args.bind:
        cpus = sorted(os.sched_getaffinity(0))
        if args.ranks <= len(cpus):  # like braidrun --bind-to core: rank i on the i-th CPU
            os.sched_setaffinity(0, {cpus[rank]})
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks)

    x_train, y_train = load_split(args.data, "train")
    x_test, y_test = load_split(args.data, "t10k")
    if args.limit_train > 0:
        x_train, y_train = x_train[: args.limit_train], y_train[: args.limit_train]
    if args.limit_test > 0:
        x_test, y_test = x_test[: args.limit_test], y_test[: args.limit_test]

    if args.model == "resnet":
        x_train, x_test = x_train.view(-1, 1, 28, 28), x_test.view(-1, 1, 28, 28)
    torch.manual_seed(args.seed)  # same init on all ranks; DDP also broadcasts rank 0's
    model = DistributedDataParallel(make_model(args.model))
    if args.optimizer == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=args.lr or 1e-3)
    else:
        opt = torch.optim.SGD(
            model.parameters(), lr=args.lr or 0.05, momentum=0.9, weight_decay=args.weight_decay
        )
    loss_fn = nn.CrossEntropyLoss()

    per_rank = args.batch // args.ranks
    n = len(x_train)
    # Like braid-train's sampler: every epoch a seeded shuffle of the whole set, global batches
    # split evenly over the ranks; the short last batch is kept (split evenly too).
    batches = [(b, min(args.batch, n - b) // args.ranks) for b in range(0, n, args.batch)]
    batches = [(b, m) for b, m in batches if m > 0]
    if rank == 0:
        print(
            f"torch {torch.__version__} DDP gloo: {args.model}, {args.optimizer}, {args.ranks} ranks, global batch {args.batch} "
            f"({per_rank}/rank), {args.threads} thread(s)/rank, {n} train / {len(x_test)} test "
            f"samples, {len(batches)} steps/epoch",
            flush=True,
        )
    for epoch in range(args.epochs):
        g = torch.Generator()
        g.manual_seed(args.seed * 1000003 + epoch)
        perm = torch.randperm(n, generator=g)
        model.train()
        sums = torch.zeros(3, dtype=torch.float64)  # loss x samples, correct, samples
        dist.barrier()
        t0 = time.perf_counter()
        for base, m in batches:
            idx = perm[base + rank * m : base + (rank + 1) * m]
            xb, yb = x_train[idx], y_train[idx]
            opt.zero_grad(set_to_none=True)
            logits = model(xb)
            loss = loss_fn(logits, yb)
            loss.backward()
            opt.step()
            sums[0] += loss.item() * m
            sums[1] += (logits.detach().argmax(dim=1) == yb).sum().item()
            sums[2] += m
        elapsed = time.perf_counter() - t0  # rank 0's training time, evaluation excluded
        dist.all_reduce(sums)
        train_loss = sums[0].item() / sums[2].item()
        train_acc = sums[1].item() / sums[2].item()

        model.eval()
        with torch.no_grad():  # each rank evaluates its strided share of the test set
            pred = model.module(x_test[rank :: args.ranks]).argmax(dim=1)
            correct = torch.tensor([(pred == y_test[rank :: args.ranks]).sum().item()])
        dist.all_reduce(correct)
        acc = correct.item() / len(x_test)
        if rank == 0:
            print(
                f"epoch {epoch + 1}/{args.epochs}  train loss {train_loss:.4f}  "
                f"train acc {100 * train_acc:.2f}%  test acc {100 * acc:.2f}%  "
                f"samples/s {sums[2].item() / elapsed:.0f}  ({elapsed:.2f} s)",
                flush=True,
            )
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--batch", type=int, default=128, help="GLOBAL batch, split over the ranks")
    p.add_argument("--limit-train", type=int, default=0, help="first N training samples (0: all)")
    p.add_argument("--limit-test", type=int, default=0, help="first N test samples (0: all)")
    p.add_argument("--model", choices=["mlp", "resnet"], default="mlp")
    p.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
    p.add_argument("--lr", type=float, default=0, help="default 1e-3 for adam, 0.05 for sgd")
    p.add_argument("--weight-decay", type=float, default=0.0, help="SGD weight decay")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument(
        "--threads", type=int, default=0, help="math threads per rank (default: cores / ranks, >= 1)"
    )
    p.add_argument("--no-bind", dest="bind", action="store_false", help="do not pin ranks to CPUs")
    args = p.parse_args()
    if args.ranks < 1 or args.batch % args.ranks != 0:
        p.error(f"--batch {args.batch} must be a positive multiple of --ranks {args.ranks}")
    if args.threads <= 0:
        args.threads = max(1, len(os.sched_getaffinity(0)) // args.ranks)
    import socket

    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(args, port), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""PyTorch reference for braid-train: the same models, loss, optimizers and data, timed.

The PyTorch side of the side-by-side GPU benchmark (bench/gpu/README.md). It builds exactly the
models of trainer/nn/models.cc (the MLP 784-256-128-10 and the small ResNet, parameter names as in
braid's ParamStore), trains them with the optimizer semantics of trainer/nn/optimizer.cc on
Fashion-MNIST normalised as trainer/data/dataset.cc does, keeps the whole training set on the
device, and measures training throughput:

  --steps N     time N optimizer steps (full batches, after --timing-warmup untimed steps), split
                into --windows windows; reports the median samples/s and every window's rate
  --epochs E    train E epochs from a fresh model and report the test accuracy after each

The last line printed is one JSON object (model, device, precision, batch, samples/s, ...).
Works with PyTorch 1.13 (Debian) and 2.x. Only numpy and torch are needed; no downloads.

Differences from braid-train, on purpose or unavoidable:
  * --warmup-steps is braid-train's LEARNING-RATE warm-up; the untimed steps before timing are
    --timing-warmup.
  * Initial values have braid's distributions (PyTorch's defaults are the same) but not its exact
    random streams, and the shuffle order differs (Fisher-Yates/xoshiro there, randperm here).
  * fp16 here is autocast float16 compute + torch GradScaler (dynamic: init --init-scale, halve
    on inf/NaN, double after 2000 good steps, the same rule as braid's LossScaler). A fixed
    --loss-scale is not offered. Warm-up/cosine count loop steps, skipped fp16 steps included.
"""

import argparse
import collections
import contextlib
import gzip
import json
import math
import os
import platform
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# trainer/nn/models.h: parameter counts and forward FLOP per sample (GEMM multiply-adds x 2).
EXPECTED_PARAMS = {"mlp": 235_146, "resnet": 77_754}
FORWARD_FLOP = {"mlp": 469_504, "resnet": 18_691_840}
# trainer/data/dataset.h
DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"
FASHION_MEAN = 0.2860
FASHION_STD = 0.3530


def fail(message):
    print("train_torch_reference: error: " + message, file=sys.stderr)
    sys.exit(2)


# ----------------------------------------------------------------------------------------------
# Models: trainer/nn/models.cc, residual.cc. Module names give braid's parameter names
# (fc1.weight, stem.conv.weight, stage2.block0.proj.bn.bias, ...) in braid's registration order.


def make_mlp(inputs=784, hidden=(256, 128), classes=10):
    """Flatten -> Linear(784,256) -> ReLU -> Linear(256,128) -> ReLU -> Linear(128,10)."""
    layers = collections.OrderedDict(flatten=nn.Flatten())
    width = inputs
    for i, h in enumerate(hidden):
        layers["fc%d" % (i + 1)] = nn.Linear(width, h)
        layers["relu%d" % (i + 1)] = nn.ReLU(inplace=True)
        width = h
    layers["fc%d" % (len(hidden) + 1)] = nn.Linear(width, classes)
    return nn.Sequential(layers)


def conv_bn(cin, cout, kernel, stride, padding):
    """Conv2d without bias (batch norm follows) + BatchNorm2d(momentum 0.1, eps 1e-5)."""
    return nn.Sequential(
        collections.OrderedDict(
            conv=nn.Conv2d(cin, cout, kernel, stride=stride, padding=padding, bias=False),
            bn=nn.BatchNorm2d(cout, eps=1e-5, momentum=0.1),
        )
    )


class ResidualBlock(nn.Module):
    """relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)); conv1 3x3 with `stride`, conv2 3x3
    stride 1, both without bias; shortcut = identity, or 1x1 conv (stride, no bias) + BN when
    in != out or stride != 1."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.proj = conv_bn(cin, cout, 1, stride, 0) if (cin != cout or stride != 1) else None

    def forward(self, x):
        main = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        shortcut = x if self.proj is None else self.proj(x)
        return F.relu(main + shortcut)


class ResNet(nn.Module):
    """stem conv3x3 1->16 (no bias) + BN + ReLU; blocks 16 s1, 32 s2 (proj), 64 s2 (proj);
    global average pool; Linear(64, 10)."""

    def __init__(self, in_channels=1, classes=10, stage_channels=(16, 32, 64), blocks=1):
        super().__init__()
        c = stage_channels[0]
        self.stem = conv_bn(in_channels, c, 3, 1, 1)
        for s, out in enumerate(stage_channels):
            stage = collections.OrderedDict()
            for b in range(blocks):
                stride = 2 if (s > 0 and b == 0) else 1
                stage["block%d" % b] = ResidualBlock(c, out, stride)
                c = out
            setattr(self, "stage%d" % (s + 1), nn.Sequential(stage))
        self.num_stages = len(stage_channels)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        x = F.relu(self.stem(x))
        for s in range(self.num_stages):
            x = getattr(self, "stage%d" % (s + 1))(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def make_model(name):
    """PyTorch's default init is braid's: U(+-1/sqrt(fanIn)) weights and biases, BN 1/0."""
    model = make_mlp() if name == "mlp" else ResNet()
    count = sum(p.numel() for p in model.parameters())
    if count != EXPECTED_PARAMS[name]:
        raise SystemExit(
            "train_torch_reference: FATAL: %s has %d parameters, trainer/nn/models.h says %d; "
            "the PyTorch model does not match braid's" % (name, count, EXPECTED_PARAMS[name])
        )
    return model, count


# ----------------------------------------------------------------------------------------------
# Data: trainer/data/idx.cc, dataset.cc. Files {train,t10k}-{images-idx3,labels-idx1}-ubyte,
# ".gz" preferred when present; pixels (x / 255 - 0.2860) / 0.3530 in float32.


def find_file(data_dir, stem):
    for name in (stem + ".gz", stem):
        path = os.path.join(data_dir, name)
        if os.path.isfile(path):
            return path
    fail(
        "%s(.gz) not found in %s: pass --data DIR (Fashion-MNIST IDX files) or install Debian's "
        "dataset-fashion-mnist package" % (stem, data_dir)
    )


def read_idx(path, want_dims):
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        fail("cannot read %s: %s" % (path, e))
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        fail("%s is not an unsigned-byte IDX file (magic %s)" % (path, raw[:4].hex()))
    dims = raw[3]
    if dims != want_dims:
        fail("%s has %d dimensions, expected %d" % (path, dims, want_dims))
    header = 4 + 4 * dims
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(dims))
    if len(raw) != header + int(np.prod(shape)):
        fail("%s: %d bytes, header %s needs %d" % (path, len(raw), shape, header + np.prod(shape)))
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(shape)


def load_split(data_dir, prefix, limit):
    images = read_idx(find_file(data_dir, prefix + "-images-idx3-ubyte"), 3)
    labels = read_idx(find_file(data_dir, prefix + "-labels-idx1-ubyte"), 1)
    if images.shape[0] != labels.shape[0]:
        fail("%s: %d images but %d labels" % (prefix, images.shape[0], labels.shape[0]))
    if limit > 0:
        images, labels = images[:limit], labels[:limit]
    # The same float32 operations as braid's normalizePixel, through a 256-entry table.
    table = (np.arange(256, dtype=np.float32) / np.float32(255.0) - np.float32(FASHION_MEAN)) / (
        np.float32(FASHION_STD)
    )
    x = table[images][:, None, :, :]  # [N, 1, 28, 28]
    return torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(labels.astype(np.int64))


# ----------------------------------------------------------------------------------------------
# Optimizer and learning rate: trainer/nn/optimizer.cc, trainer/train/options.cc.


def make_optimizer(args, params):
    if args.optimizer == "sgd":
        return torch.optim.SGD(params, lr=args.base_lr, momentum=args.momentum,
                               weight_decay=args.weight_decay)
    cls = torch.optim.Adam if args.optimizer == "adam" else torch.optim.AdamW
    return cls(params, lr=args.base_lr, betas=(0.9, 0.999), eps=1e-8,
               weight_decay=args.weight_decay)


def learning_rate(args, step, decay_steps):
    """braid's Optimizer::learningRate for 0-based step `step`."""
    lr = args.base_lr
    if step < args.warmup_steps:
        return lr * (step + 1) / args.warmup_steps
    if args.lr_schedule == "cosine" and decay_steps > 0:
        span = max(1, decay_steps - args.warmup_steps)
        progress = min(1.0, (step - args.warmup_steps) / span)
        return lr * 0.5 * (1.0 + math.cos(math.pi * progress))
    return lr


def make_scaler(args, device):
    if args.precision != "fp16":
        return None
    if hasattr(torch.amp, "GradScaler"):  # PyTorch >= 2.3; main() refuses CPU fp16 before
        return torch.amp.GradScaler(device.type, init_scale=args.init_scale, growth_factor=2.0,
                                    backoff_factor=0.5, growth_interval=2000)
    return torch.cuda.amp.GradScaler(init_scale=args.init_scale, growth_factor=2.0,
                                     backoff_factor=0.5, growth_interval=2000)


# ----------------------------------------------------------------------------------------------
# Training


class Trainer:
    def __init__(self, args, device, train_x, train_y):
        torch.manual_seed(args.seed)
        self.args, self.device = args, device
        self.model, self.params = make_model(args.model)
        self.model.to(device)
        if args.channels_last:
            self.model.to(memory_format=torch.channels_last)
        self.model.train()
        self.opt = make_optimizer(args, self.model.parameters())
        self.scaler = make_scaler(args, device)
        self.train_x, self.train_y = train_x, train_y
        self.gen = torch.Generator(device=device)
        self.gen.manual_seed(args.seed)
        self.step_count = 0
        self.decay_steps = 0
        self.schedule = args.warmup_steps > 0 or args.lr_schedule == "cosine"

    def autocast(self):
        if self.args.precision != "fp16":
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=torch.float16)

    def permutation(self):
        n = self.train_x.shape[0]
        return torch.randperm(n, generator=self.gen, device=self.device)

    def step(self, idx):
        """One optimizer step on the samples `idx` (a device index tensor)."""
        x = self.train_x.index_select(0, idx)
        y = self.train_y.index_select(0, idx)
        if self.args.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        if self.schedule:
            lr = learning_rate(self.args, self.step_count, self.decay_steps)
            for group in self.opt.param_groups:
                group["lr"] = lr
        self.opt.zero_grad(set_to_none=True)
        with self.autocast():
            logits = self.model(x)
        loss = F.cross_entropy(logits.float(), y)  # softmax cross entropy, mean over the batch
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            loss.backward()
            self.opt.step()
        self.step_count += 1
        return loss, logits, y

    @torch.no_grad()
    def evaluate(self, test_x, test_y, batch=1000):
        self.model.eval()
        correct = torch.zeros((), dtype=torch.int64, device=self.device)
        for i in range(0, test_x.shape[0], batch):
            x = test_x[i : i + batch]
            if self.args.channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            with self.autocast():
                logits = self.model(x)
            correct += (logits.argmax(1) == test_y[i : i + batch]).sum()
        self.model.train()
        return correct.item() / test_x.shape[0]


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(args, trainer, device):
    """--timing-warmup untimed steps, then --steps timed ones in --windows windows; full batches,
    reshuffled whenever the permutation runs out. Returns samples/s of every window."""
    n = trainer.train_x.shape[0]
    per_epoch = n // args.batch
    trainer.decay_steps = args.timing_warmup + args.steps
    state = {"perm": trainer.permutation(), "pos": 0}

    def next_batch():
        if state["pos"] == per_epoch:
            state["perm"], state["pos"] = trainer.permutation(), 0
        b = state["pos"]
        state["pos"] += 1
        return state["perm"][b * args.batch : (b + 1) * args.batch]

    for _ in range(args.timing_warmup):
        trainer.step(next_batch())
    synchronize(device)
    windows = min(args.windows, args.steps)
    sizes = [args.steps // windows + (1 if w < args.steps % windows else 0) for w in range(windows)]
    rates = []
    for size in sizes:
        synchronize(device)
        start = time.perf_counter()
        for _ in range(size):
            loss, _, _ = trainer.step(next_batch())
        synchronize(device)
        seconds = time.perf_counter() - start
        rates.append(size * args.batch / seconds)
        print("  window: %d steps in %.3f s, %.0f samples/s (loss %.4f)"
              % (size, seconds, rates[-1], loss.item()), flush=True)
    return rates, sizes


def train_epochs(args, trainer, device, test_x, test_y):
    """braid-train's epochs: every sample once per epoch (the short last batch kept)."""
    n = trainer.train_x.shape[0]
    steps_per_epoch = (n + args.batch - 1) // args.batch
    trainer.decay_steps = steps_per_epoch * args.epochs
    results = []
    for epoch in range(args.epochs):
        perm = trainer.permutation()
        loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        correct = torch.zeros((), dtype=torch.int64, device=device)
        synchronize(device)
        start = time.perf_counter()
        for b in range(steps_per_epoch):
            loss, logits, y = trainer.step(perm[b * args.batch : (b + 1) * args.batch])
            loss_sum += loss.detach().double() * y.shape[0]
            correct += (logits.detach().argmax(1) == y).sum()
        synchronize(device)
        seconds = time.perf_counter() - start
        test_acc = trainer.evaluate(test_x, test_y)
        r = {"epoch": epoch + 1, "train_loss": loss_sum.item() / n,
             "train_acc": correct.item() / n, "test_acc": test_acc,
             "samples_per_s": n / seconds, "seconds": seconds}
        if trainer.scaler is not None:
            r["loss_scale"] = trainer.scaler.get_scale()
        results.append(r)
        print("epoch %d/%d  train loss %.4f  train acc %.2f%%  test acc %.2f%%  samples/s %.0f  "
              "(%.1f s)%s" % (epoch + 1, args.epochs, r["train_loss"], 100 * r["train_acc"],
                              100 * test_acc, r["samples_per_s"], seconds,
                              "  loss scale %g" % r["loss_scale"] if "loss_scale" in r else ""),
              flush=True)
    return results


# ----------------------------------------------------------------------------------------------


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="PyTorch reference of braid-train (same models, loss, optimizers, data): "
        "training throughput and accuracy, one JSON line at the end.")
    # braid-train's flags, with its defaults (trainer/train/options.cc).
    p.add_argument("--model", choices=["mlp", "resnet"], default="mlp")
    p.add_argument("--optimizer", choices=["sgd", "adam", "adamw"], default="adam")
    p.add_argument("--lr", type=float,
                   help="base learning rate (default 1e-3 adam/adamw, 0.05 sgd)")
    p.add_argument("--momentum", type=float, default=0.9, help="SGD momentum (default 0.9)")
    p.add_argument("--weight-decay", type=float, default=0.0,
                   help="L2 for sgd/adam, decoupled for adamw (default 0)")
    p.add_argument("--lr-schedule", choices=["constant", "cosine"], default="constant")
    p.add_argument("--warmup-steps", type=int, default=0,
                   help="linear LEARNING-RATE warm-up steps, as braid-train (default 0)")
    p.add_argument("--scale-lr", action="store_true", help="lr x batch / 256")
    p.add_argument("--precision", choices=["fp32", "fp16"], default="fp32",
                   help="fp32, or fp16: autocast float16 + dynamic loss scaling (GradScaler)")
    p.add_argument("--init-scale", type=float, default=65536.0, help="fp16: first loss scale")
    p.add_argument("--epochs", type=int, default=0,
                   help="train this many epochs and report test accuracy (default 0: only time)")
    p.add_argument("--batch", type=int, default=128, help="batch size (default 128)")
    p.add_argument("--data", default=DEFAULT_DATA, help="Fashion-MNIST directory (default %s)"
                   % DEFAULT_DATA)
    p.add_argument("--seed", type=int, default=0, help="seed of initialisation and shuffling")
    p.add_argument("--limit-train", type=int, default=0, help="use the first N train samples")
    p.add_argument("--limit-test", type=int, default=0, help="use the first N test samples")
    p.add_argument("--threads", type=int, default=0, help="CPU threads (default: PyTorch's)")
    # This script's own.
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--steps", type=int,
                   help="time this many steps, no full epoch (default 200 without --epochs, "
                   "else 0)")
    p.add_argument("--timing-warmup", type=int, default=20,
                   help="untimed steps before the timed ones (default 20)")
    p.add_argument("--windows", type=int, default=5,
                   help="timed windows the --steps are split into; the median is reported")
    p.add_argument("--tf32", action="store_true",
                   help="allow TF32 in fp32 matmuls and convolutions (default: off, true fp32)")
    p.add_argument("--no-cudnn-benchmark", action="store_true",
                   help="cudnn.benchmark off (default on)")
    p.add_argument("--channels-last", action="store_true",
                   help="NHWC activations and weights (default NCHW, as braid)")
    args = p.parse_args(argv)
    if args.steps is None:
        args.steps = 200 if args.epochs == 0 else 0
    if args.batch < 1:
        p.error("--batch %d must be at least 1" % args.batch)
    if args.lr is not None and not (args.lr > 0 and math.isfinite(args.lr)):
        p.error("--lr %g must be positive" % args.lr)
    if not (args.init_scale > 0 and math.isfinite(args.init_scale)):
        p.error("--init-scale %g must be positive and finite" % args.init_scale)
    for flag in ("epochs", "steps", "timing_warmup", "warmup_steps", "limit_train",
                 "limit_test", "threads"):
        if getattr(args, flag) < 0:
            p.error("--%s %d must not be negative" % (flag.replace("_", "-"), getattr(args, flag)))
    if args.windows < 1:
        p.error("--windows %d must be at least 1" % args.windows)
    if args.steps == 0 and args.epochs == 0:
        p.error("nothing to do: give --steps N (timing) and/or --epochs E (training)")
    args.base_lr = args.lr if args.lr is not None else (0.05 if args.optimizer == "sgd" else 1e-3)
    if args.scale_lr:
        args.base_lr *= args.batch / 256.0
    return args


def main(argv):
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.precision == "fp16" and args.device == "cpu" and not hasattr(torch.amp, "GradScaler"):
        fail("--precision fp16 on the CPU needs PyTorch >= 2.3 (torch.amp.GradScaler); this is "
             "%s: use --device cuda or --precision fp32" % torch.__version__)
    if args.device == "cuda":
        if not torch.cuda.is_available():
            fail("--device cuda but CUDA is not available (torch %s, built for CUDA %s); use "
                 "--device cpu" % (torch.__version__, torch.version.cuda))
        device = torch.device("cuda", torch.cuda.current_device())
        device_name = torch.cuda.get_device_name(device)
        torch.backends.cudnn.benchmark = not args.no_cudnn_benchmark
        # True fp32 unless --tf32 (cuDNN allows TF32 convolutions by default; turn it off too).
        torch.backends.cuda.matmul.allow_tf32 = args.tf32
        torch.backends.cudnn.allow_tf32 = args.tf32
    else:
        device = torch.device("cpu")
        device_name = platform.processor() or platform.machine()

    train_x, train_y = load_split(args.data, "train", args.limit_train)
    test_x, test_y = load_split(args.data, "t10k", args.limit_test)
    if args.steps > 0 and train_x.shape[0] < args.batch:
        fail("--batch %d is larger than the %d training samples" % (args.batch, train_x.shape[0]))
    train_x, train_y = train_x.to(device), train_y.to(device)
    test_x, test_y = test_x.to(device), test_y.to(device)

    print("train_torch_reference: %s, %s %s, batch %d, %s lr %g, torch %s, %d train / %d test "
          "samples on %s%s" % (args.model, args.device, args.precision, args.batch,
                               args.optimizer, args.base_lr, torch.__version__, train_x.shape[0],
                               test_x.shape[0], device_name,
                               ", TF32 allowed" if args.tf32 and args.device == "cuda" else ""),
          flush=True)
    result = collections.OrderedDict(
        model=args.model, device=args.device, device_name=device_name,
        precision=args.precision, batch=args.batch, optimizer=args.optimizer, lr=args.base_lr,
        tf32=bool(args.tf32 and args.device == "cuda"),
        cudnn_benchmark=bool(args.device == "cuda" and not args.no_cudnn_benchmark),
        channels_last=args.channels_last, torch=torch.__version__, cuda=torch.version.cuda,
        python=platform.python_version(), threads=torch.get_num_threads())

    if args.steps > 0:
        trainer = Trainer(args, device, train_x, train_y)
        result["params"] = trainer.params
        print("timing: %d warm-up steps, then %d steps in %d window(s) (%d params)"
              % (args.timing_warmup, args.steps, min(args.windows, args.steps), trainer.params),
              flush=True)
        rates, sizes = time_steps(args, trainer, device)
        median = statistics.median(rates)
        result.update(samples_per_s=median, window_samples_per_s=rates, window_steps=sizes,
                      timing_warmup=args.timing_warmup, step_ms=1000.0 * args.batch / median,
                      train_tflops=3 * FORWARD_FLOP[args.model] * median / 1e12)
        print("median %.0f samples/s (%.3f ms/step, ~%.3f TFLOP/s at 3x forward FLOP)"
              % (median, result["step_ms"], result["train_tflops"]), flush=True)
        del trainer
    if args.epochs > 0:
        trainer = Trainer(args, device, train_x, train_y)  # fresh from --seed
        result["params"] = trainer.params
        epochs = train_epochs(args, trainer, device, test_x, test_y)
        result.update(epochs=epochs, test_acc=epochs[-1]["test_acc"],
                      epoch_samples_per_s=epochs[-1]["samples_per_s"])
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

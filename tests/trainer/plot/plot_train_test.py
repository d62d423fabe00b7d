#!/usr/bin/python3
"""braid-plot-train on the JSON log of a short real training (2 ranks, the performance monitor's
fields filled) and on a ps log (monitor fields null): each gives a non-empty PNG. Skips (recorded)
without matplotlib or Fashion-MNIST.

Usage: plot_train_test.py BRAID_TRAIN BRAIDRUN BRAID_PLOT_TRAIN"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
import braid_skip  # noqa: E402

train, braidrun, plot = sys.argv[1:4]
try:
    import matplotlib  # noqa: F401
except ImportError:
    braid_skip.skip_missing("matplotlib is not importable (apt-get install python3-matplotlib)")
data = "/usr/share/datasets/fashion-mnist"
if not any(os.path.exists(os.path.join(data, f"train-images-idx3-ubyte{ext}"))
           for ext in ("", ".gz")):
    braid_skip.skip_missing("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)")


def run(args):
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{' '.join(args)} failed ({r.returncode}):\n{r.stdout}{r.stderr}"
    return r


with tempfile.TemporaryDirectory() as tmp:
    common = ["--quiet", "--model", "mlp", "--batch", "64", "--epochs", "2", "--limit-train", "640",
              "--limit-test", "100"]
    ddp_log = os.path.join(tmp, "ddp.json")
    run([braidrun, "-n", "2", train, *common, "--bucket-mb", "0.25", "--log", ddp_log])
    ps_log = os.path.join(tmp, "ps.json")
    run([braidrun, "-n", "2", train, *common, "--strategy", "ps", "--ps", "1", "--log", ps_log])
    for logs in ([ddp_log], [ddp_log, ps_log]):
        out = os.path.join(tmp, f"plot{len(logs)}.png")
        r = run([plot, out, *logs, "--title", "monitor"])
        assert os.path.getsize(out) > 1000, f"{out}: {os.path.getsize(out)} bytes"
        with open(out, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n", f"{out} is not a PNG"
        print(r.stdout.strip())
print("ok")

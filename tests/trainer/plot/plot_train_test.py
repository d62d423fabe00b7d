#!/usr/bin/python3
"""braid-plot-train on the logs of short real trainings: a 2-rank ddp JSON log (the performance
monitor's fields filled) and its --log-steps file, a ps log (its fields summed over the workers),
a CSV log and a --report scaling log: each set gives a non-empty PNG, and the curves it reports
per panel are the ones those logs carry. Skips (recorded) without matplotlib or Fashion-MNIST.

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
    log = {name: os.path.join(tmp, name)
           for name in ("ddp.json", "steps.jsonl", "ps.json", "ddp.csv", "scaling.json")}
    run([braidrun, "-n", "2", train, *common, "--bucket-mb", "0.25", "--log", log["ddp.json"],
         "--log-steps", log["steps.jsonl"]])
    run([braidrun, "-n", "2", train, *common, "--strategy", "ps", "--ps", "1", "--log",
         log["ps.json"]])
    run([braidrun, "-n", "2", train, *common, "--log", log["ddp.csv"]])
    run([train, *common, "--report", "scaling", "--report-ranks", "1,2", "--braidrun", braidrun,
         "--log", log["scaling.json"]])
    # (logs, curves per panel: loss, accuracy (test + train), throughput, shares (3 per run),
    # all-reduce, scaling)
    cases = [(["ddp.json"], "loss 1, accuracy 2, throughput 1, shares 3, all-reduce 1, scaling 0"),
             (["ddp.json", "ps.json"],
              "loss 2, accuracy 4, throughput 2, shares 6, all-reduce 2, scaling 0"),
             (["ddp.csv", "steps.jsonl", "scaling.json"],
              "loss 1, accuracy 2, throughput 2, shares 6, all-reduce 2, scaling 1")]
    for i, (names, series) in enumerate(cases):
        out = os.path.join(tmp, f"plot{i}.png")
        r = run([plot, out, *(log[n] for n in names), "--title", "monitor"])
        assert os.path.getsize(out) > 1000, f"{out}: {os.path.getsize(out)} bytes"
        with open(out, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n", f"{out} is not a PNG"
        assert r.stdout.strip().endswith(f"curves per panel: {series}"), \
            f"{names}: expected '{series}', got: {r.stdout}"
        print(r.stdout.strip())
    # Not a log: named.
    bad = os.path.join(tmp, "bad.json")
    with open(bad, "w") as f:
        f.write('{"epochs": [{"epoch": 1}]}')
    r = subprocess.run([plot, os.path.join(tmp, "bad.png"), bad], capture_output=True, text=True)
    assert r.returncode == 2 and "bad.json: row 1 lacks one of" in r.stderr, r.stderr
print("ok")

#!/usr/bin/python3
"""Smoke test of braid-plot-train: a CSV and a JSON log give a PNG; a bad log is refused naming
the file. Skips (exit 77) without matplotlib."""
import json, os, subprocess, sys, tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import braid_skip  # noqa: E402

script = sys.argv[1]
try:
    import matplotlib  # noqa: F401
except ImportError:
    braid_skip.skip_missing("matplotlib is not importable (apt-get install python3-matplotlib)")
with tempfile.TemporaryDirectory() as tmp:
    csv_path = os.path.join(tmp, "a.csv")
    with open(csv_path, "w") as f:
        f.write("epoch,steps,train_loss,train_acc,test_acc,samples_per_s,comm_wait_share,seconds\n")
        for e in range(1, 4):
            f.write(f"{e},10,{1.0 / e},{0.5 + e / 10},{0.45 + e / 10},1000,0.1,1.0\n")
    json_path = os.path.join(tmp, "b.json")
    with open(json_path, "w") as f:
        json.dump({"run": {}, "epochs": [{"epoch": 1, "train_loss": 0.9, "train_acc": 0.6,
                                          "test_acc": 0.55, "samples_per_s": 900}]}, f)
    out = os.path.join(tmp, "out.png")
    r = subprocess.run([script, out, csv_path, json_path, "--title", "t"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    with open(out, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n", "not a PNG"
    bad = os.path.join(tmp, "bad.csv")
    with open(bad, "w") as f:
        f.write("epoch,loss\n1,2\n")
    r = subprocess.run([script, out, bad], capture_output=True, text=True)
    assert r.returncode != 0 and "bad.csv" in r.stderr, (r.returncode, r.stderr)
print("ok")

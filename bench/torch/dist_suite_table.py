#!/usr/bin/env python3
"""Runs PyTorch's distributed test suite (tests/python/dist_suite.py) against braid and Gloo and
prints the table bench/RESULTS.md keeps: per test group, passed / failed / skipped for each
backend, then every test Gloo passes and braid does not, with braid's reason.

  bench/torch/dist_suite_table.py --python PY --pythonpath build/python --world 2 [--k PATTERN]
  bench/torch/dist_suite_table.py --from-json a.jsonl b.jsonl   # tables of earlier runs

Each backend runs in its own process, one after the other (the ranks of a test are spawned by
the suite); --k limits both to the tests whose names contain PATTERN.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SUITE = os.path.join(HERE, "..", "..", "tests", "python", "dist_suite.py")

# Test name (after "test_") -> group, first match wins.
GROUPS = [
    ("ddp", "DDP"), ("DistributedDataParallel", "DDP"), ("join", "DDP"), ("sync_bn", "DDP"),
    ("send", "p2p"), ("recv", "p2p"), ("isend", "p2p"), ("irecv", "p2p"),
    ("group", "groups"), ("new_subgroups", "groups"), ("backend_", "groups"),
    ("all_reduce", "collectives"), ("allreduce", "collectives"), ("reduce", "collectives"),
    ("broadcast", "collectives"), ("all_gather", "collectives"), ("allgather", "collectives"),
    ("gather", "collectives"), ("scatter", "collectives"), ("all_to_all", "collectives"),
    ("alltoall", "collectives"), ("barrier", "collectives"),
]


def group_of(test):
    name = test[len("test_"):] if test.startswith("test_") else test
    for key, group in GROUPS:
        if key in name:
            return group
    return "others"


def run(backend, args, out):
    env = dict(os.environ, BACKEND=backend, WORLD_SIZE=str(args.world))
    if args.pythonpath:
        env["PYTHONPATH"] = args.pythonpath
    cmd = [args.python, SUITE, "--summary", out]
    if args.k:
        cmd += ["-k", args.k]
    print(f"# {backend}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=args.timeout)


def load(path):
    rows = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            rows[r["test"]] = r
    return rows


def table(results):
    backends = list(results)
    any_rows = next(iter(results[backends[0]].values()), None)
    if any_rows:
        print(f"torch {any_rows['torch']}, WORLD_SIZE={any_rows['world']}\n")
    counts = {b: collections.defaultdict(collections.Counter) for b in backends}
    for b in backends:
        for test, r in results[b].items():
            outcome = {"error": "failed"}.get(r["outcome"], r["outcome"])
            counts[b][group_of(test)][outcome] += 1
            counts[b]["all"][outcome] += 1
    groups = ["collectives", "p2p", "groups", "DDP", "others", "all"]
    head = " | ".join(f"{b} passed / failed / skipped" for b in backends)
    print(f"| group | {head} |")
    print("|---|" + "---|" * len(backends))
    for g in groups:
        cells = []
        for b in backends:
            c = counts[b][g]
            cells.append(f"{c['passed']} / {c['failed']} / {c['skipped']}")
        print(f"| {g} | " + " | ".join(cells) + " |")
    if "gloo" in results and "braid" in results:
        print("\nGloo passes, braid does not:\n")
        for test, r in sorted(results["gloo"].items()):
            b = results["braid"].get(test)
            if r["outcome"] == "passed" and (b is None or b["outcome"] != "passed"):
                why = "not run" if b is None else f"{b['outcome']}: {b['detail'].strip()}"
                why = " ".join(why.split())[-240:]
                print(f"- {test} ({group_of(test)}): {why}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--pythonpath", default="")
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--k", default="")
    p.add_argument("--timeout", type=float, default=4 * 3600)
    p.add_argument("--backends", default="gloo,braid")
    p.add_argument("--keep", default="", help="directory for the JSON lines of each backend")
    p.add_argument("--from-json", nargs="*", default=None)
    args = p.parse_args()
    results = {}
    if args.from_json:
        for path in args.from_json:
            rows = load(path)
            if rows:
                results[next(iter(rows.values()))["backend"]] = rows
    else:
        folder = args.keep or tempfile.mkdtemp(prefix="braid-dist-table-")
        os.makedirs(folder, exist_ok=True)
        for backend in args.backends.split(","):
            out = os.path.join(folder, f"{backend}-w{args.world}.jsonl")
            if os.path.exists(out):
                os.remove(out)
            run(backend, args, out)
            results[backend] = load(out) if os.path.exists(out) else {}
    table(results)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Runs a *_perf command and checks its nccl-tests table.

perf_smoke.py [--sizes 8,64,...] [--groups N] [--baseline] [--json FILE] [--bus-factor F]
              [--threads T] [--ranks N] [--expect-fail REGEX] [--timeout S] [--needs-gpu]
              -- COMMAND [ARGS...]

Checks: exit code 0, the header lines, one row per size per (type, op, root) group, every #wrong
column 0, the footer "Out of bounds values : 0 OK"; with --baseline the MPI columns; with --json
the -J file's rows; with --bus-factor, busbw = algbw x F in every row (both columns, within the
table's rounding to 0.01); "# nThread T" (-t, default 1); with --ranks, N ranks in the preamble
(the "# braid" line and one "#  Rank" line each, ranks 0..N-1). With --expect-fail: a non-zero exit and stderr matching REGEX instead.
With --needs-gpu: skips (device) on a machine without an NVIDIA GPU.
"""

import argparse
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import braid_skip  # noqa: E402

PREFIX = re.compile(r"^\[\d+\]\s?")  # braidrun's "[rank] " line prefix


def fail(message, output=""):
    print(f"FAIL: {message}", file=sys.stderr)
    if output:
        print("---- output ----\n" + output, file=sys.stderr)
    sys.exit(1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="")
    parser.add_argument("--groups", type=int, default=1)
    parser.add_argument("--baseline", action="store_true")
    parser.add_argument("--json", default="")
    parser.add_argument("--bus-factor", type=float, default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ranks", type=int, default=None)
    parser.add_argument("--expect-fail", default="")
    parser.add_argument("--timeout", type=float, default=240)
    parser.add_argument("--needs-gpu", action="store_true")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        fail("no command")
    if args.needs_gpu and not os.path.exists("/dev/nvidiactl"):
        braid_skip.skip_no_device("no NVIDIA GPU on this machine (/dev/nvidiactl)")
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired as err:
        fail(f"timed out after {args.timeout}s: {' '.join(command)}", str(err.stdout or ""))
    output = proc.stdout + "\n---- stderr ----\n" + proc.stderr

    if args.expect_fail:
        if proc.returncode == 0:
            fail("expected a failure, got exit code 0", output)
        if not re.search(args.expect_fail, proc.stderr + proc.stdout):
            fail(f"expected stderr to match '{args.expect_fail}'", output)
        print(f"ok: failed as expected (exit {proc.returncode})")
        return

    if proc.returncode != 0:
        fail(f"exit code {proc.returncode}", output)
    lines = [PREFIX.sub("", line) for line in proc.stdout.splitlines()]
    for needle in (f"# nThread {args.threads} nGpus 1 minBytes", "# Using devices", "#  Rank  0 Group  0 Pid",
                   "#       size         count      type   redop    root     time   algbw   busbw"
                   " #wrong     time   algbw   busbw #wrong",
                   "# Out of bounds values : 0 OK", "# Avg bus bandwidth    : "):
        if not any(line.startswith(needle) for line in lines):
            fail(f"no line starting with '{needle}'", output)
    if args.ranks is not None:
        ranks = [int(m.group(1)) for m in map(re.compile(r"^#  Rank +(\d+) Group").match, lines) if m]
        if ranks != list(range(args.ranks)):
            fail(f"'#  Rank' lines for ranks {ranks}, expected 0..{args.ranks - 1}", output)
        if not any(re.match(rf"# braid \w+: {args.ranks} ranks[ ,]", line) for line in lines):
            fail(f"no '# braid ...: {args.ranks} ranks' line", output)
    rows = [line.split() for line in lines if line.strip() and not line.startswith("#")]
    width = 16 if args.baseline else 13
    sizes = {}
    for row in rows:
        if len(row) != width:
            fail(f"row has {len(row)} fields, expected {width}: {' '.join(row)}", output)
        if row[8] != "0" or row[12] != "0":
            fail(f"wrong elements in row: {' '.join(row)}", output)
        for field in (row[5], row[6], row[7], row[9], row[10], row[11]):
            float(field)
        if args.bus_factor is not None:
            for algbw, busbw in ((row[6], row[7]), (row[10], row[11])):
                if abs(float(busbw) - float(algbw) * args.bus_factor) > 0.011:
                    fail(f"busbw {busbw} is not algbw {algbw} x {args.bus_factor}: "
                         f"{' '.join(row)}", output)
        sizes[int(row[0])] = sizes.get(int(row[0]), 0) + 1
    if args.sizes:
        for size in (int(s) for s in args.sizes.split(",")):
            if sizes.get(size, 0) != args.groups:
                fail(f"size {size}: {sizes.get(size, 0)} rows, expected {args.groups}", output)
        if len(rows) != args.groups * len(args.sizes.split(",")):
            fail(f"{len(rows)} rows, expected {args.groups * len(args.sizes.split(','))}", output)
    if args.json:
        with open(args.json, encoding="utf-8") as handle:
            doc = json.load(handle)
        if len(doc["rows"]) != len(rows) or doc["wrong_total"] != 0:
            fail(f"{args.json}: {len(doc['rows'])} rows, wrong_total {doc['wrong_total']}", output)
        if args.baseline and not any(r["baseline"] for r in doc["rows"]):
            fail(f"{args.json}: no baseline numbers", output)
        # Two ranks on this host: the placement probe measured before and after every size.
        if doc["ranks"] >= 2:
            probe = doc["placement"]
            if not (probe["round_trip_ns_start"] or 0) > 0 or probe["class"] == "n/a":
                fail(f"{args.json}: no placement probe: {probe}", output)
            for r in doc["rows"]:
                p = r["placement_ns"]
                if not ((p["before"] or 0) > 0 and (p["after"] or 0) > 0):
                    fail(f"{args.json}: size {r['size']}: placement {p}", output)
            if "# Placement: ranks 0 and 1 on CPUs" not in output:
                fail("no placement line in the preamble", output)
    print(f"ok: {len(rows)} rows, all #wrong 0")


if __name__ == "__main__":
    main()

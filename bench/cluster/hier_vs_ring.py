#!/usr/bin/python3
"""Ring vs hierarchical all-reduce vs MPI_Allreduce on a simulated 2-host cluster whose host
links are shaped with tbf, against the link bound.

  bench/cluster/hier_vs_ring.py [--build build] [--hosts 2] [--ranks-per-host 2] [--rate 1gbit]
                                [--size 64M] [--iters 5] [--runs 1] [--out results.md]

(a) link bound: a plain TCP stream of 64 MiB from host 0 to host 1 (median of 3);
(b) all_reduce_perf -b S -e S -c 1 -n 5 -d float with BRAID_ALGO=ring, BRAID_ALGO=hier (launched
    by braid-cluster run) and MPI_Allreduce (braid-cluster mpirun ... --baseline mpi);
(c) per algorithm: time, busbw, and the achieved inter-host rate per direction, taking the
    minimum a host must send over its link, 2(N-1)/N x S for N hosts, over the time, as a share
    of the link bound (1.0 = the link is the only limit); and what host 0 really sent on its
    link per all-reduce (interface counters over the braid run / the all-reduces it made).
Needs root (network namespaces). A variant that cannot run (hier before it exists) is reported
as such; the others still run. The cluster is always torn down.
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "tools", "cluster", "braid-cluster")


def parse_size(text):
    m = re.match(r"^(\d+)([KMG]?)$", text, re.I)
    if not m:
        sys.exit(f"size '{text}' is not like 64M")
    return int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]


def tool(args, env=None, timeout=900):
    return subprocess.run([sys.executable, TOOL] + args, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=env, timeout=timeout)


def last_error(r):
    lines = [l for l in (r.stderr + r.stdout).splitlines()
             if "error" in l.lower() or "cannot" in l.lower() or "exited" in l.lower()]
    return (lines[0] if lines else f"exit code {r.returncode}").strip()[:160]


def perf_args(a, json_path, extra=()):
    return [os.path.join(a.build, "bench", "all_reduce_perf"), "-b", a.size, "-e", a.size, "-c",
            "1", "-n", str(a.iters), "-d", "float", "-J", json_path,
            *(["-w", str(a.warmup)] if a.warmup is not None else []), *extra]


def tx_bytes(ns):
    """Bytes host namespace `ns` has sent on its link (eth0) so far."""
    out = subprocess.run(["ip", "-n", ns, "-s", "-j", "link", "show", "eth0"],
                         stdout=subprocess.PIPE, text=True, check=True).stdout
    return json.loads(out)[0]["stats64"]["tx"]["bytes"]


def run_braid(a, algo, tmp, i):
    """(time_us, busbw, wrong, wire bytes per op) of one braid run with BRAID_ALGO=algo, or an
    error string. Wire bytes: what host 0 sent on its link over the run, divided by the
    all-reduces the run made (warm-up, out-of-place and in-place iters, one check each)."""
    path = os.path.join(tmp, f"{algo}{i}.json")
    env = dict(os.environ, BRAID_ALGO=algo)
    env.update(kv.split("=", 1) for kv in a.env)
    before = tx_bytes(f"{a.name}-h0")
    r = tool(["run", "--reuse", "--name", a.name, "--ranks-per-host", str(a.ranks_per_host),
              "--timeout", str(a.timeout), "--"] + perf_args(a, path), env=env)
    if r.returncode != 0 or not os.path.exists(path):
        return last_error(r)
    ops = (5 if a.warmup is None else a.warmup) + 2 * a.iters + 2
    wire = (tx_bytes(f"{a.name}-h0") - before) / ops
    with open(path) as f:
        row = json.load(f)["rows"][0]
    o = row["out_of_place"]
    return o["time_us"], o["busbw"], (o["wrong"] or 0) + (row["in_place"]["wrong"] or 0), wire


def run_mpi(a, tmp, i):
    """(time_us, busbw) of MPI_Allreduce under mpirun across the namespaces, or an error."""
    path = os.path.join(tmp, f"mpi{i}.json")
    env = dict(os.environ)
    env.update(kv.split("=", 1) for kv in a.env)
    r = tool(["mpirun", "--reuse", "--name", a.name, "--ranks-per-host", str(a.ranks_per_host),
              "--timeout", str(a.timeout), "--"] + perf_args(a, path, ["--baseline", "mpi"]),
             env=env)
    if r.returncode != 0 or not os.path.exists(path):
        return last_error(r)
    with open(path) as f:
        row = json.load(f)["rows"][0]
    b = row["baseline"]
    if not b:
        return "no MPI baseline in the output (built without MPI?)"
    o = row["out_of_place"]
    wrong = (o["wrong"] or 0) + (row["in_place"]["wrong"] or 0)
    return b["time_us"], b["busbw"], wrong, None, (o["time_us"], o["busbw"], row.get("algo"))


def rounds_text(runs):
    """Each run's time in ms (or why it could not run), in run order."""
    return " ".join(f"{r[0] / 1e3:.0f}" if not isinstance(r, str) else "failed" for r in runs)


def median_of(results):
    ok = [r for r in results if not isinstance(r, str)]
    if not ok:
        return results[0]
    wires = [r[3] for r in ok if r[3] is not None]
    return (statistics.median(r[0] for r in ok), statistics.median(r[1] for r in ok),
            sum(r[2] for r in ok), statistics.median(wires) if wires else None)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--name", default="bhr", help="cluster name (namespace prefix)")
    p.add_argument("--hosts", type=int, default=2)
    p.add_argument("--ranks-per-host", type=int, default=2)
    p.add_argument("--rate", default="1gbit", help="tbf rate of each host link; none: unshaped")
    p.add_argument("--delay-ms", type=float, default=0,
                   help="one-way switch delay (braid-cluster's userspace switch)")
    p.add_argument("--size", default="64M")
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=None, help="-w (default: the bench's, 5)")
    p.add_argument("--runs", type=int, default=1, help="runs per variant (median)")
    p.add_argument("--stream-bytes", default="64M")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--env", action="append", default=[],
                   help="KEY=VALUE for the braid runs (repeat), e.g. BRAID_CHUNK=4M")
    p.add_argument("--out", default="", help="also write the table (markdown) here")
    a = p.parse_args()
    size = parse_size(a.size)
    if os.geteuid() != 0:
        sys.exit("hier_vs_ring: needs root (network namespaces)")
    # SIGTERM/SIGHUP unwind like Ctrl-C, so the finally below always tears the cluster down.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.default_int_handler)
    shaped = a.rate not in ("", "none")
    r = tool(["up", "--name", a.name, "--hosts", str(a.hosts)]
             + (["--rate", a.rate] if shaped else [])
             + (["--delay-ms", str(a.delay_ms)] if a.delay_ms else []))
    if r.returncode != 0:
        sys.exit(f"hier_vs_ring: cannot bring the cluster up: {r.stderr.strip()}")
    try:
        print(r.stdout.strip(), flush=True)
        bw = tool(["bw", "--reuse", "--name", a.name, "--bytes", a.stream_bytes, "--runs", "3",
                   "--json"])
        if bw.returncode != 0:
            sys.exit(f"hier_vs_ring: link measurement failed: {bw.stderr.strip()}")
        link = json.loads(bw.stdout)["median_bits_per_second"] / 8  # bytes/s
        print(f"link bound: TCP stream h0 -> h1, {a.stream_bytes} x 3, median "
              f"{link * 8 / 1e6:.0f} Mbit/s = {link / 1e6:.1f} MB/s", flush=True)
        results, rounds = {}, {}
        with tempfile.TemporaryDirectory() as tmp:
            for algo in ("ring", "hier"):
                runs = [run_braid(a, algo, tmp, i) for i in range(a.runs)]
                rounds[algo] = runs
                results[algo] = median_of(runs)
                print(f"  {algo}: {results[algo]}", flush=True)
            mpi = [run_mpi(a, tmp, i) for i in range(a.runs)]
            rounds["mpi"] = mpi
            results["mpi"] = median_of(mpi)
            print(f"  mpi: {results['mpi']}", flush=True)
            auto = [m[4] for m in mpi if not isinstance(m, str)]
    finally:
        tool(["down", "--name", a.name])
    n_hosts, ranks = a.hosts, a.hosts * a.ranks_per_host
    per_dir = 2 * (n_hosts - 1) / n_hosts * size
    lines = [
        f"all_reduce of {a.size} float on {a.hosts} hosts x {a.ranks_per_host} ranks "
        f"({ranks} ranks), "
        + (f"host links shaped to {a.rate} with tbf" if shaped else "host links unshaped (veth)")
        + (f", {a.delay_ms:g} ms one-way delay" if a.delay_ms else "")
        + f"; link bound (TCP stream) {link * 8 / 1e6:.0f} Mbit/s; "
        f"minimum inter-host bytes per direction "
        f"2(N-1)/N x S = {per_dir / 2**20:.0f} MiB; -n {a.iters}, "
        f"median of {a.runs} run(s)" + (f"; braid runs with {' '.join(a.env)}" if a.env else "")
        + ".", "",
        "| variant | time (ms) | busbw (GB/s) | #wrong | inter-host MB/s per direction | "
        "of link bound | lower-bound time (ms) | h0 sent per op (MiB) | rounds (ms) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    names = {"ring": "braid ring (BRAID_ALGO=ring)", "hier": "braid hier (BRAID_ALGO=hier)",
             "mpi": "MPI_Allreduce (Open MPI, tcp)"}
    for key in ("ring", "hier", "mpi"):
        res = results[key]
        if isinstance(res, str):
            lines.append(f"| {names[key]} | cannot run: {res} | | | | | | | |")
            continue
        t_us, busbw, wrong, wire = res
        achieved = per_dir / (t_us / 1e6)
        wire_text = f"{wire / 2**20:.1f}" if wire is not None else "n/a"
        lines.append(f"| {names[key]} | {t_us / 1e3:.1f} | {busbw:.3f} | {wrong} | "
                     f"{achieved / 1e6:.1f} | {achieved / link:.2f} | "
                     f"{per_dir / link * 1e3:.0f} | {wire_text} | {rounds_text(rounds[key])} |")
    if auto:
        t_us = statistics.median(x[0] for x in auto)
        achieved = per_dir / (t_us / 1e6)
        lines.append(f"| braid auto under mpirun ({auto[0][2]}) | {t_us / 1e3:.1f} | "
                     f"{statistics.median(x[1] for x in auto):.3f} | | {achieved / 1e6:.1f} | "
                     f"{achieved / link:.2f} | {per_dir / link * 1e3:.0f} | n/a | "
                     f"{' '.join(f'{x[0] / 1e3:.0f}' for x in auto)} |")
    text = "\n".join(lines)
    print()
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()

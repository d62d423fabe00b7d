#!/usr/bin/python3
"""Transports side by side on one build: all_reduce_perf with --transport X for each
configuration, alternating (ofi, tcp, ucx, ofi, tcp, ucx, ...) so all see the same machine, and
prints per size the median out-of-place time and bus bandwidth of each.

  bench/host/compare_transports.py --build build --ranks 2 --runs 5 -b 8 -e 64M -f 4 \
      --config "ofi:BRAID_OFI_PROVIDER=tcp;ofi_rxm" --config tcp --config "ucx:UCX_TLS=tcp" \
      [--out results.md]
  bench/host/compare_transports.py --build build --hosts 2 --ranks 2 --rate 1gbit ...

Without --hosts the ranks run on this host under braidrun; with --hosts H, `--ranks` per host on
a namespace cluster (tools/cluster/braid-cluster, brought up once, `--rate` shaping each host
link; run --reuse for every run, torn down at the end). A --config is "<transport>[:VAR=value]"
(one variable; its value may hold commas); its label is the whole text. Every run must have 0
wrong values, out of place and in place (the script stops otherwise).
"""
import argparse, json, os, statistics, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_mpi import human, report  # noqa: E402


def run_once(args, config, out_json):
    transport, _, env_text = config.partition(":")
    env = dict(os.environ)
    if env_text:
        key, _, value = env_text.partition("=")
        env[key] = value
    if args.hosts:
        launcher = [os.path.join(args.build, "tools", "braid-cluster"), "run", "--reuse", "--name",
                    args.name, "--ranks-per-host", str(args.ranks), "--timeout", "600", "--"]
    else:
        launcher = [os.path.join(args.build, "tools", "braidrun"), "-n", str(args.ranks),
                    "--timeout", "600"]
    cmd = launcher + [os.path.join(args.build, "bench", "all_reduce_perf"), "--transport", transport,
           "-b", args.b, "-e", args.e, "-f", args.f, "-w", str(args.warmup), "-n", str(args.iters),
           "-J", out_json]
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    with open(out_json) as f:
        data = json.load(f)
    for row in data["rows"]:
        for place in ("out_of_place", "in_place"):
            if row.get(place, {}).get("wrong", 0) not in (0, None):
                sys.exit(f"compare_transports: {config}: {row['size']} bytes: wrong values")
    return data, (f"'{env_text}' " if env_text else "") + " ".join(cmd)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--config", action="append", required=True)
    p.add_argument("-b", default="8"); p.add_argument("-e", default="64M"); p.add_argument("-f", default="4")
    p.add_argument("--warmup", type=int, default=3); p.add_argument("--iters", type=int, default=10)
    p.add_argument("--out", default="")
    p.add_argument("--hosts", type=int, default=0, help="namespace hosts (0: braidrun here)")
    p.add_argument("--rate", default="", help="with --hosts: each host link's rate (1gbit)")
    p.add_argument("--name", default=f"ct{os.getpid() % 100000}", help="with --hosts: its name")
    args = p.parse_args()
    runs = {c: [] for c in args.config}
    commands = {}
    cluster = os.path.join(args.build, "tools", "braid-cluster")
    if args.hosts:
        up = [cluster, "up", "--hosts", str(args.hosts), "--name", args.name]
        subprocess.run(up + (["--rate", args.rate] if args.rate else []), check=True,
                       stdout=subprocess.DEVNULL)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.runs):
                for n, config in enumerate(args.config):
                    data, commands[config] = run_once(args, config,
                                                      os.path.join(tmp, f"{n}-{i}.json"))
                    runs[config].append(data)
    finally:
        if args.hosts:
            subprocess.run([cluster, "down", "--name", args.name], stdout=subprocess.DEVNULL)
    where = (f"{args.hosts} namespace hosts x {args.ranks} ranks, link {args.rate or 'unshaped'}"
             if args.hosts else f"{args.ranks} ranks on this host")
    lines = [f"{where}; {args.runs} rounds, alternating; median per size (out-of-place time us / "
             "busbw GB/s)", ""]
    lines += [f"    {commands[c]}" for c in args.config]
    lines += ["", "| size | " + " | ".join(args.config) + " |", "|---|" + "---|" * len(args.config)]
    first = runs[args.config[0]][0]["rows"]
    for i, row in enumerate(first):
        cells = []
        for c in args.config:
            t = statistics.median(r["rows"][i]["out_of_place"]["time_us"] for r in runs[c])
            bw = statistics.median(r["rows"][i]["out_of_place"]["busbw"] for r in runs[c])
            cells.append(f"{t:.1f} us / {bw:.3f}")
        lines.append(f"| {human(row['size'])} | " + " | ".join(cells) + " |")
    report("\n".join(lines), args.out)


if __name__ == "__main__":
    main()

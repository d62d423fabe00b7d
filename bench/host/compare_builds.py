#!/usr/bin/python3
"""Two builds of braid side by side: runs one *_perf binary of each under mpirun with
--baseline mpi, alternating (A, B, A, B, ...) so both see the same machine, and prints per size
the median out-of-place time of each, B/A, and each one's ratio to MPI_Allreduce timed in the same
run (the ratio to MPI cancels most of the noise a shared machine adds).

  bench/host/compare_builds.py --build-a /path/before/build --build-b build --ranks 2 --runs 5 \
      -b 8 -e 64M -f 4 [--bench all_reduce_perf] [--extra "-z 1"] [--out results.md]

Used for the redesign's before/after figures (bench/RESULTS.md).
"""
import argparse, os, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_mpi import human, median_rows, report, run_once  # noqa: E402  (one way to run a bench)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build-a", required=True, help="build directory A (e.g. before)")
    p.add_argument("--build-b", required=True, help="build directory B (e.g. after)")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--bench", default="all_reduce_perf")
    p.add_argument("-b", default="8"); p.add_argument("-e", default="64M"); p.add_argument("-f", default="4")
    p.add_argument("--warmup", type=int, default=3); p.add_argument("--iters", type=int, default=10)
    p.add_argument("--extra", default="")
    p.add_argument("--out", default="")
    args = p.parse_args()
    for build in (args.build_a, args.build_b):
        if not os.access(os.path.join(build, "bench", args.bench), os.X_OK):
            sys.exit(f"compare_builds: {build}/bench/{args.bench} not found; build it first")
    runs = {"a": [], "b": []}
    command = ""
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            for key in ("a", "b"):
                data, command = run_once(args, getattr(args, "build_" + key), os.path.join(tmp, f"{key}{i}.json"))
                runs[key].append(data)
    a, b = median_rows(runs["a"]), median_rows(runs["b"])
    lines = [f"{args.ranks} ranks, `{command}` with A = {args.build_a}, B = {args.build_b}, alternating, "
             f"{args.runs} runs each, medians per size (out-of-place).", "",
             "| size | A us | B us | B/A | A: MPI/braid | B: MPI/braid |",
             "|---:|---:|---:|---:|---:|---:|"]
    for (size, ta, _, ma, _, _), (_, tb, _, mb, _, _) in zip(a, b):
        lines.append(f"| {human(size)} | {ta:.2f} | {tb:.2f} | {tb / ta:.2f} | {ma / ta:.2f} | "
                     f"{mb / tb:.2f} |")
    report("\n".join(lines), args.out)


if __name__ == "__main__":
    main()

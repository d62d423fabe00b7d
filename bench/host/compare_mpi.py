#!/usr/bin/python3
"""Runs a braid *_perf binary under mpirun with --baseline mpi several times and prints the
median per size: braid time/busbw, MPI time/busbw, the ratio, and the memory-bandwidth bound;
over all rounds, then over the rounds of each placement the bench's probe saw (ranks 0 and 1
sharing an L3 cache or apart), each with its number of rounds.

  bench/host/compare_mpi.py --ranks 2 --runs 3 -b 8 -e 256M -f 2 [--bench all_reduce_perf]
                            [--copy-gbps X] [--extra "-z 1"] [--ideal [--ideal-outputs 2]]
                            [--before DIR]
                            [--before-extra "-R 0"] [--out results.md]

--before DIR: each round first runs the same command with DIR's build (an earlier commit), so
the two alternate in one sitting; the tables add its median time per size over its rounds in
the same placement, and now/before. --before-extra FLAGS: the before run's flags instead of
--extra's (with --before the same build: one build, two settings, e.g. -R 0 against -R 2).

--ideal (2-rank all_reduce_perf): each round also runs bench/single_copy_ideal (two threads on
CPUs 0 and 1, each reading its half of both inputs once and writing its half of one output: the
single-copy ideal, with its own placement probe) right after braid and MPI, and the tables add
its median time and braid's bandwidth as a fraction of it, per placement. --ideal-outputs 2: the
ideal writes its half into two outputs, one per rank (what an all-reduce produces; the default 1
is the issue's yardstick, a quarter less memory written than any all-reduce of two ranks).

The bound: every rank must read its input and write its output once (2*S bytes per rank for
all_reduce and alltoall; 2*S in all for gather and scatter), all ranks at once over the
aggregate copy bandwidth measured alongside
(micro_kernels memcpy 64 MiB in min(ranks, cores) processes at once, bytes read plus written).
"""
import argparse, json, os, statistics, subprocess, sys, tempfile

def run_once(args, build, out_json, extra=None):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    # mpirun's defaults bind a rank to a core while ranks <= cores; more ranks than cores need
    # --oversubscribe and run unbound.
    cmd = ["mpirun", "-np", str(args.ranks), "--mca", "btl", "self,vader"]
    if args.ranks > os.cpu_count():
        cmd += ["--oversubscribe", "--bind-to", "none"]
    cmd += [os.path.join(build, "bench", args.bench), "-b", args.b, "-e", args.e, "-f", args.f,
            "-w", str(args.warmup), "-n", str(args.iters), "--baseline", "mpi", "-J", out_json]
    cmd += (args.extra if extra is None else extra).split()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"run failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    with open(out_json) as f:
        data = json.load(f)
    if data.get("wrong_total", 0):
        sys.exit(f"run had {data['wrong_total']} wrong elements: {' '.join(cmd)}\n{r.stdout}")
    return data, " ".join(cmd)

def before_medians(befores, placement):
    """size -> (median out-of-place us, rounds) of the --before build's rounds in `placement`
    (None: all), each row by its own probe."""
    by_size = {}
    for run in befores:
        for i, row in enumerate(run["rows"]):
            if placement is None or placement_of(run, i) == placement:
                by_size.setdefault(row["size"], []).append(row["out_of_place"]["time_us"])
    return {k: (statistics.median(v), len(v)) for k, v in by_size.items()}

def run_ideal(args, build, out_json):
    """One round of the two-thread single-copy ideal over the same sizes (sizes below 64 B are
    left out: it times whole cache lines)."""
    cmd = [os.path.join(build, "bench", "single_copy_ideal"), "-b", args.b, "-e", args.e, "-f",
           args.f, "-w", str(args.warmup), "-n", str(args.iters), "--outputs",
           str(args.ideal_outputs), "-J", out_json]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"ideal failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    with open(out_json) as f:
        data = json.load(f)
    if data.get("wrong_total", 0):
        sys.exit(f"run had {data['wrong_total']} wrong elements: {' '.join(cmd)}\n{r.stdout}")
    return data, " ".join(cmd)

def ideal_medians(ideals, placement):
    """size -> (median ideal us, rounds) over the ideal's rounds whose own probe saw `placement`
    (None: all)."""
    by_size = {}
    for run in ideals:
        for row in run["rows"]:
            if placement is None or row["placement_ns"]["class"] == placement:
                by_size.setdefault(row["size"], []).append(row["time_us"])
    return {k: (statistics.median(v), len(v)) for k, v in by_size.items()}

def copy_gbps(build, copiers):
    """Aggregate copy bandwidth (bytes read + written per wall second) of `copiers` processes
    each running memcpy of 64 MiB at the same time: what the ranks share."""
    cmd = [os.path.join(build, "bench", "micro_kernels"), "--benchmark_filter=^memcpy/64MiB$",
           "--benchmark_format=json", "--benchmark_repetitions=5",
           "--benchmark_report_aggregates_only=true"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for _ in range(copiers)]
    total = 0.0
    for p in procs:
        out, _ = p.communicate()
        data = json.loads(out)
        for b in data["benchmarks"]:
            if b.get("aggregate_name") == "median":
                # Google Benchmark divides by CPU time; use real time for a wall-clock rate.
                total += b["bytes_per_second"] * b["cpu_time"] / b["real_time"] / 1e9
    return total

def bound_bytes(bench, size, n):
    """Bytes the whole job must read plus write at the least for one op of `size` (the bench's
    size column): all_reduce and alltoall read an input and write an output of `size` on every
    rank; gather and scatter move `size` once in all (the root's buffer, the others' blocks)."""
    if bench in ("gather_perf", "scatter_perf"):
        return 2 * size
    return 2 * size * n

def placement_of(run, i):
    """The placement class ("same L3", "apart", "sharing a CPU", "n/a") the probe saw before row
    i of a run."""
    return (run["rows"][i].get("placement_ns") or {}).get("class", "n/a")

def median_rows(runs, placement=None):
    """Per size over several runs' JSON: (size, braid us, braid busbw, MPI us, MPI busbw, rounds)
    medians of the out-of-place column and the MPI baseline; with `placement`, only the rounds
    whose probe saw that placement before the size (sizes with none are left out)."""
    rows = []
    for i, row in enumerate(runs[0]["rows"]):
        chosen = [r for r in runs if placement is None or placement_of(r, i) == placement]
        if not chosen:
            continue
        def med(col, key):
            return statistics.median(r["rows"][i][col][key] for r in chosen)
        rows.append((row["size"], med("out_of_place", "time_us"), med("out_of_place", "busbw"),
                     med("baseline", "time_us"), med("baseline", "busbw"), len(chosen)))
    return rows

def report(text, out):
    """Prints a result table, and appends it to `out` when given."""
    print(text)
    if out:
        with open(out, "a") as f:
            f.write(text + "\n\n")

def human(n):
    for unit, s in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= s and n % s == 0:
            return f"{n // s}{unit}"
    return f"{n}"

def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--bench", default="all_reduce_perf")
    p.add_argument("-b", default="8"); p.add_argument("-e", default="256M"); p.add_argument("-f", default="2")
    p.add_argument("--warmup", type=int, default=3); p.add_argument("--iters", type=int, default=10)
    p.add_argument("--extra", default="")
    p.add_argument("--build", default="build")
    p.add_argument("--copy-gbps", type=float, default=0)
    p.add_argument("--out", default="")
    p.add_argument("--ideal", action="store_true")
    p.add_argument("--ideal-outputs", type=int, choices=(1, 2), default=1)
    p.add_argument("--before", default="")
    p.add_argument("--before-extra", default=None)
    args = p.parse_args()
    if args.ideal and (args.ranks != 2 or args.bench != "all_reduce_perf"):
        sys.exit("--ideal compares a 2-rank all_reduce_perf only")
    copiers = min(args.ranks, os.cpu_count())
    gbps = args.copy_gbps or copy_gbps(args.build, copiers)
    runs, ideals, befores, command, ideal_cmd = [], [], [], "", ""
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            if args.before:
                data, _ = run_once(args, args.before, os.path.join(tmp, f"b{i}.json"),
                                   args.before_extra)
                befores.append(data)
            data, command = run_once(args, args.build, os.path.join(tmp, f"r{i}.json"))
            runs.append(data)
            if args.ideal:
                data, ideal_cmd = run_ideal(args, args.build, os.path.join(tmp, f"i{i}.json"))
                ideals.append(data)
    n = args.ranks
    moved = ("the root's buffer and the others' blocks are read and written once"
             if args.bench in ("gather_perf", "scatter_perf")
             else "every rank reads its input and writes its output once")
    lines = [f"`{command}` x {args.runs}, median per size. Bound: {moved}, all ranks sharing "
             f"{gbps:.1f} GB/s (memcpy of 64 MiB in {copiers} processes at once, bytes read + "
             f"written per wall second)."]
    if args.ideal:
        lines[0] += (f" Ideal: `{ideal_cmd}` after each round, its median per size over its "
                     f"rounds in the same placement (its own probe); of ideal = ideal us / braid us.")
    if args.before:
        flags = ("" if args.before_extra is None
                 else f" and flags `{args.before_extra}` instead of `{args.extra}`")
        lines[0] += (f" Before: the same command with {args.before}'s binary{flags}, run first in "
                     f"each round; now/before = braid us / before us.")
    # All rounds, then (ranks 0 and 1 probed: bench/perf/placement.h) the rounds of each
    # placement apart, since the host moves the vCPUs between runs.
    classes = sorted({placement_of(r, i) for r in runs for i in range(len(r["rows"]))} - {"n/a"})
    for placement in [None] + (classes if classes else []):
        title = "all rounds" if placement is None else f"rounds with ranks 0 and 1 {placement}"
        ideal = ideal_medians(ideals, placement) if args.ideal else {}
        before = before_medians(befores, placement) if args.before else {}
        lines += ["", f"{title}:", "",
                  "| size | rounds | braid us | braid busbw | MPI us | MPI busbw | braid/MPI | "
                  "bound us | of bound |" + (" ideal us (rounds) | of ideal |" if args.ideal else "")
                  + (" before us (rounds) | now/before |" if args.before else ""),
                  "|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if args.ideal else "")
                  + ("---:|---:|" if args.before else "")]
        for size, t, bw, mt, mbw, k in median_rows(runs, placement):
            # Each rank reads its input and writes its output once; all ranks share the memory.
            bound_us = bound_bytes(args.bench, size, n) / (gbps * 1e9) * 1e6
            line = (f"| {human(size)} | {k} | {t:.2f} | {bw:.2f} | {mt:.2f} | {mbw:.2f} | "
                    f"{mt / t:.2f} | {bound_us:.1f} | {bound_us / t:.0%} |")
            if args.ideal:
                it, ik = ideal.get(size, (None, 0))
                line += (f" {it:.2f} ({ik}) | {it / t:.0%} |" if it else " - | - |")
            if args.before:
                bt, bk = before.get(size, (None, 0))
                line += (f" {bt:.2f} ({bk}) | {t / bt:.2f} |" if bt else " - | - |")
            lines.append(line)
    report("\n".join(lines), args.out)

if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Link faults between namespace hosts (tools/cluster/braid-cluster): the link of one host is cut
in the middle of a job, or turned into a blackhole, or flaps. A job whose link stays broken must
end on every rank with an error naming a peer within the deadline (BRAID_TIMEOUT plus a margin);
a job whose link comes back within the deadline must complete with every element right.

  bench/faults/link_faults.py --build build --trials 3 --transports tcp,ucx

Faults (applied to host 1's link --at seconds after rank 0 has joined and printed its preamble,
so that they land among the all-reduces, not in init):
  cut        host 1's eth0 set down (its routes vanish; sends fail locally)
  blackhole  host 1's port taken off the switch's bridge (carrier stays up; frames vanish)
  flap       blackhole for --flap seconds, then the port goes back (must complete correctly)
Needs root and iproute2. Prints a Markdown table; exits 1 if any trial broke a rule.
"""
import argparse
import os
import re
import secrets
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.realpath(__file__))
CLUSTER = os.path.join(HERE, "..", "..", "tools", "cluster", "braid-cluster")
NAME = "braidlf"


def sh(*cmd, check=True):
    return subprocess.run(list(cmd), check=check, capture_output=True, text=True)


def cluster_up(hosts):
    sh(CLUSTER, "down", "--name", NAME, check=False)
    sh(CLUSTER, "up", "--hosts", str(hosts), "--name", NAME, "--subnet", "10.214.0")


def cluster_down():
    sh(CLUSTER, "down", "--name", NAME, check=False)


def apply(fault, restore=False):
    host, sw, port = f"{NAME}-h1", f"{NAME}-sw", "p1"
    if fault == "cut":
        sh("ip", "-n", host, "link", "set", "eth0", "up" if restore else "down")
        if restore:  # routes go with the link: put the subnet route back
            sh("ip", "-n", host, "route", "replace", "10.214.0.0/24", "dev", "eth0", check=False)
    else:  # blackhole / flap
        if restore:
            sh("ip", "-n", sw, "link", "set", port, "master", "br0")
        else:
            sh("ip", "-n", sw, "link", "set", port, "nomaster")


def trial(args, transport, fault):
    cluster_up(2)
    try:
        secret = secrets.token_hex(16)
        procs = []
        for r in range(2):
            env = {"RANK": str(r), "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                   "MASTER_ADDR": "10.214.0.1", "MASTER_PORT": "29611", "BRAID_SECRET": secret,
                   "BRAID_TIMEOUT": str(args.timeout), "BRAID_TRANSPORT": transport,
                   "BRAID_HOSTNAME": f"{NAME}-h{r}", "PATH": os.environ.get("PATH", "")}
            cmd = [CLUSTER, "exec", "--name", NAME, f"h{r}", "--", "env"] + \
                [f"{k}={v}" for k, v in env.items()] + \
                [os.path.abspath(os.path.join(args.build, "bench", "all_reduce_perf")),
                 "-b", args.bytes, "-e", args.bytes, "-n", str(args.iters), "-w", "1", "-c", "1",
                 "-z", "1"]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          text=True))
        # Rank 0's output, read as it comes: its preamble ("# braid ...") means init is over.
        joined = threading.Event()
        lines0 = []

        def read0():
            for line in procs[0].stdout:
                lines0.append(line)
                if line.startswith("# braid "):
                    joined.set()
            joined.set()

        reader = threading.Thread(target=read0, daemon=True)
        reader.start()
        joined.wait(timeout=args.timeout * 4)
        time.sleep(args.at)
        t0 = time.monotonic()
        apply(fault)
        if fault == "flap":
            time.sleep(args.flap)
            apply(fault, restore=True)
        # A broken link must end the job within the timeout; a flapping one must let it finish
        # (its remaining all-reduces take as long as they take on a busy machine).
        deadline = t0 + (args.flap + args.finish if fault == "flap" else args.timeout + args.margin)
        problems, ends, outs = [], [], []
        for r, p in enumerate(procs):
            try:
                if r == 0:
                    p.wait(timeout=max(0.0, deadline - time.monotonic()))
                    reader.join(timeout=5)
                    out = "".join(lines0)
                else:
                    out, _ = p.communicate(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                if r == 0:
                    p.wait()
                    reader.join(timeout=5)
                    out = "".join(lines0)
                else:
                    out, _ = p.communicate()
                problems.append(f"rank {r} still running past the deadline")
            ends.append(time.monotonic() - t0)
            outs.append(out)
        for r, (p, out) in enumerate(zip(procs, outs)):
            lines = out.strip().splitlines()
            last = lines[-1][:240] if lines else "(no output)"
            if fault == "flap":
                # Every rank validates its elements; rank 0 prints the count of wrong ones.
                wrong = re.findall(r"Out of bounds values : (\d+)", out)
                if p.returncode != 0 or (r == 0 and (not wrong or wrong[-1] != "0")):
                    problems.append(f"rank {r} did not complete correctly (exit {p.returncode}): "
                                    f"{last}")
            else:
                if p.returncode == 0:
                    problems.append(f"rank {r} exited 0 although its link stayed broken")
                elif not re.search(r"\b(peer )?rank [01]\b", out):
                    problems.append(f"rank {r}'s error names no peer: {last}")
        return {"worst": max(ends), "problems": problems,
                "sample": next((l for o in outs for l in o.splitlines() if "error" in l
                                or "timeout" in l), "")}
    finally:
        cluster_down()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--transports", default="tcp,ucx")
    ap.add_argument("--faults", default="cut,blackhole,flap")
    ap.add_argument("--bytes", default="4M", help="all-reduce size")
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--at", type=float, default=0.5,
                    help="seconds after rank 0 joined to break the link")
    ap.add_argument("--flap", type=float, default=1.0, help="seconds the flapping link is gone")
    ap.add_argument("--timeout", type=float, default=8, help="BRAID_TIMEOUT for the ranks")
    ap.add_argument("--margin", type=float, default=4, help="seconds allowed past the timeout")
    ap.add_argument("--finish", type=float, default=120,
                    help="seconds a job whose link came back may take to finish")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("link_faults.py: needs root (network namespaces)", file=sys.stderr)
        return 2
    bad = 0
    print(f"# link faults between 2 namespace hosts: {args.bytes} all-reduces, fault "
          f"{args.at:g} s after init, BRAID_TIMEOUT={args.timeout:g}, flap {args.flap:g} s")
    print("| transport | fault | trials | ok | worst s from fault to last exit | example error |")
    print("|---|---|---|---|---|---|")
    for transport in args.transports.split(","):
        for fault in args.faults.split(","):
            results = [trial(args, transport, fault) for _ in range(args.trials)]
            broken = [r for r in results if r["problems"]]
            bad += len(broken)
            sample = next((r["sample"] for r in results if r["sample"]), "")
            sample = re.sub(r"\s+", " ", sample)[:160].replace("|", "/")
            print(f"| {transport} | {fault} | {len(results)} | {len(results) - len(broken)} | "
                  f"{max(r['worst'] for r in results):.2f} | {sample} |", flush=True)
            for r in broken[:3]:
                print("#   " + "; ".join(r["problems"]), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Kill -9 soak: a random rank of a running job is killed at a random moment; every survivor must
end with an error naming it within the timeout, and nothing may be left behind (no process, no
listening socket on the job's port, no /dev/shm entry of braid's).

  bench/faults/soak.py --build build --trials 100 --transports shm,tcp,ucx --ranks 2,4,8

Ranks are started directly (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, BRAID_SECRET), not by
braidrun, which would stop the survivors itself. The worker is all_reduce_perf looping on 1 MiB
all-reduces. The moment is uniform in [0, --window] s after launch, so some kills land in init.
Prints one line per (transport, ranks) and a total; exits 1 if any trial broke a rule.
"""
import argparse
import os
import random
import re
import secrets
import signal
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def shm_entries():
    try:
        return {e for e in os.listdir("/dev/shm") if e.startswith("braid")}
    except FileNotFoundError:
        return set()


def listening(port, pids):
    """Whether one of `pids` (the trial's ranks) still listens on `port`. Other jobs on this
    machine may have taken the same port number since: their listeners are not ours."""
    out = subprocess.run(["ss", "-Htlnp", f"sport = :{port}"], capture_output=True, text=True)
    owners = {int(p) for p in re.findall(r"pid=(\d+)", out.stdout)}
    return out.stdout.strip() != "" and (not owners or owners & set(pids))


def trial(args, transport, n, rng):
    port = free_port()
    secret = secrets.token_hex(16)
    before = shm_entries()
    victim = rng.randrange(n)
    delay = rng.uniform(0, args.window)
    procs = []
    for r in range(n):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n), LOCAL_RANK=str(r),
                   LOCAL_WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   BRAID_SECRET=secret, BRAID_TIMEOUT=str(args.timeout), BRAID_TRANSPORT=transport)
        cmd = [os.path.join(args.build, "bench", "all_reduce_perf"), "-b", "1M", "-e", "1M",
               "-n", "1000000", "-w", "0", "-c", "0", "-z", "1"]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True))
    time.sleep(delay)
    killed_at = time.monotonic()
    procs[victim].send_signal(signal.SIGKILL)
    problems = []
    ends = {}
    deadline = killed_at + args.timeout + args.margin
    for r, p in enumerate(procs):
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            problems.append(f"rank {r} still running {args.timeout + args.margin:.0f} s after the kill")
            p.kill()
            p.wait()
        ends[r] = time.monotonic() - killed_at
    named = 0
    for r, p in enumerate(procs):
        err = p.stderr.read()
        if r == victim:
            continue
        last = (err.strip().splitlines()[-1:] or ["(no output)"])[0][:300]
        if p.returncode == 0:
            problems.append(f"rank {r} exited 0 after rank {victim} was killed")
        elif re.search(rf"\brank {victim}\b", err):
            named += 1
        elif not re.search(r"\bpeer rank", err):
            # Ranks that fail because another survivor failed first may name that one (the
            # cause they saw); an error that names no peer at all is a problem.
            problems.append(f"rank {r}'s error names no peer: {last}")
    time.sleep(0.05)
    if listening(port, [p.pid for p in procs]):
        problems.append(f"port {port} still listening")
    left = shm_entries() - before
    if left:
        # Other jobs on this machine make and unlink entries too: only what stays is a leak.
        time.sleep(3)
        left &= shm_entries()
    if left:
        problems.append(f"/dev/shm entries left: {sorted(left)[:4]}")
    survivors = [ends[r] for r in range(n) if r != victim]
    return {"victim": victim, "delay": delay, "worst": max(survivors), "named": named,
            "problems": problems}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--transports", default="shm,tcp,ucx")
    ap.add_argument("--ranks", default="2,4,8")
    ap.add_argument("--window", type=float, default=1.5, help="kill moment: uniform in [0, W] s")
    ap.add_argument("--timeout", type=float, default=10, help="BRAID_TIMEOUT for the ranks")
    ap.add_argument("--margin", type=float, default=5, help="seconds past the timeout to allow")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    bad = 0
    print(f"# kill -9 soak: {args.trials} trials per row, kill moment uniform in [0, {args.window}] s, "
          f"BRAID_TIMEOUT={args.timeout:g}")
    print("| transport | ranks | trials | survivors naming the victim (the rest name the peer "
          "whose failure they saw) | median / worst s to exit after the kill | trials with a "
          "problem |")
    print("|---|---|---|---|---|---|")
    for transport in args.transports.split(","):
        for n in [int(x) for x in args.ranks.split(",")]:
            results = [trial(args, transport, n, rng) for _ in range(args.trials)]
            worst = sorted(r["worst"] for r in results)
            named = sum(r["named"] for r in results)
            broken = [r for r in results if r["problems"]]
            bad += len(broken)
            print(f"| {transport} | {n} | {len(results)} | {named}/{len(results) * (n - 1)} | "
                  f"{worst[len(worst) // 2]:.2f} / {worst[-1]:.2f} | {len(broken)} |", flush=True)
            for r in broken[:5]:
                print(f"#   victim {r['victim']} at {r['delay']:.3f} s: " + "; ".join(r["problems"]),
                      flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

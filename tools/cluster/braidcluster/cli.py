"""braid-cluster's command line: up, down, list, exec, run, mpirun, bw."""
import argparse
import os
import signal
import sys

from . import netns, rate, throughput
from .launch import Job
from .mpi import mpirun_proc
from .ranks import DEFAULT_MASTER_PORT, rank_procs

USAGE = """braid-cluster: a simulated multi-host cluster on one machine (network namespaces).

  braid-cluster up --hosts H [--rate 1gbit] [--delay-ms D] [--loss-pct P] [--mtu M]
                   [--queue-ms Q]
                   [--name PREFIX] [--subnet 10.213.0]
  braid-cluster down [--name PREFIX]
  braid-cluster list
  braid-cluster exec [--name PREFIX] HOST -- CMD ARGS...
  braid-cluster run --hosts H --ranks-per-host R [--rate ..] [--timeout S] [--bind-to core|none]
                    -- CMD ARGS...
  braid-cluster mpirun --hosts H --ranks-per-host R [--rate ..] [--timeout S] -- CMD ARGS...
  braid-cluster bw --hosts 2 [--rate ..] [--bytes 64M] [--runs 3]

Every host is a namespace PREFIX-hN whose eth0 has address SUBNET.(N+1), linked to a switch in
PREFIX-sw: a kernel bridge, or with --delay-ms/--loss-pct a userspace switch (the kernel here
has no netem) that delays, drops and serializes frames. --rate shapes each host link in both
directions (tbf on the host side; tbf or the userspace switch on the switch side). run/mpirun/bw
bring a cluster up and always tear it down (also on errors, timeouts and Ctrl-C), unless
--reuse names one made by `up`.
"""


class Interrupted(Exception):
    def __init__(self, sig):
        super().__init__(f"interrupted by {signal.Signals(sig).name}")
        self.sig = sig


def _raise_interrupted(sig, frame):
    raise Interrupted(sig)


HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _handle_signals(handler):
    for sig in HANDLED:
        signal.signal(sig, handler)


def _add_cluster_args(p, hosts_required):
    p.add_argument("--name", default=netns.DEFAULT_NAME, help="namespace prefix (default braid)")
    p.add_argument("--hosts", type=int, required=hosts_required, help="number of hosts")
    p.add_argument("--rate", default=None, help="shape each host link to this rate, e.g. 1gbit")
    p.add_argument("--delay-ms", type=float, default=0.0,
                   help="one-way delay through the switch (userspace switch; RTT = 2x)")
    p.add_argument("--loss-pct", type=float, default=0.0,
                   help="share of frames the switch drops at random (userspace switch)")
    p.add_argument("--mtu", type=int, default=None, help="MTU of the host links (default 1500)")
    p.add_argument("--queue-ms", type=float, default=netns.SWITCH_QUEUE_MS,
                   help="backlog a shaped port holds before it drops, in ms at --rate (default "
                        "25; 1 is a switch with shallow buffers, where flows converging on one "
                        "port see incast drops)")
    p.add_argument("--subnet", default=netns.DEFAULT_SUBNET,
                   help="first three octets of the private /24 (default 10.213.0)")
    p.add_argument("--reuse", action="store_true",
                   help="use the cluster --name made by `up` and leave it up")


def _add_job_args(p):
    p.add_argument("--ranks-per-host", type=int, required=True)
    p.add_argument("--timeout", type=float, default=600.0,
                   help="seconds until the job is stopped (default 600; 0 = none)")
    p.add_argument("--grace", type=float, default=5.0,
                   help="seconds between SIGTERM and SIGKILL when stopping ranks")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ARGS...")


def _command(args):
    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise netns.ClusterError("no command given (put it after --)")
    return cmd


def _parser():
    p = argparse.ArgumentParser(prog="braid-cluster", description=USAGE,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="verb", required=True)
    s = sub.add_parser("up", help="create a cluster and print its host addresses")
    _add_cluster_args(s, True)
    s = sub.add_parser("down", help="remove a cluster (also a half-made one)")
    s.add_argument("--name", default=netns.DEFAULT_NAME)
    sub.add_parser("list", help="list the clusters that are up")
    s = sub.add_parser("exec", help="run one command in one host's namespace")
    s.add_argument("--name", default=netns.DEFAULT_NAME)
    s.add_argument("host", help="h0, 1, the namespace name or the address")
    s.add_argument("command", nargs=argparse.REMAINDER)
    s = sub.add_parser("run", help="run a torchrun-style job over a cluster")
    _add_cluster_args(s, False)
    _add_job_args(s)
    s.add_argument("--master-port", type=int, default=DEFAULT_MASTER_PORT)
    s.add_argument("--bind-to", choices=["core", "none"], default=None,
                   help="core: pin local rank i of every host to the i-th usable CPU; none: no "
                        "pinning (default: core where the ranks of a host fit the CPUs, as "
                        "braidrun)")
    s = sub.add_parser("mpirun", help="run an Open MPI job over a cluster")
    _add_cluster_args(s, False)
    _add_job_args(s)
    s.add_argument("--mpi-arg", action="append", default=[],
                   help="extra mpirun argument (repeat), e.g. --mpi-arg=--tag-output")
    s = sub.add_parser("bw", help="measure TCP stream throughput from host 0 to host 1")
    _add_cluster_args(s, False)
    s.add_argument("--bytes", default="64M", help="bytes per stream (default 64M)")
    s.add_argument("--runs", type=int, default=3)
    s.add_argument("--src", default="h0")
    s.add_argument("--dst", default="h1")
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    return p


def _with_cluster(args, body):
    """Brings a cluster up (or loads it with --reuse), runs body(cluster) and always tears down
    what it brought up; signals during all of it end in a teardown too. Returns body's code."""
    _handle_signals(_raise_interrupted)
    cluster = None
    made = False
    try:
        if args.reuse:
            cluster = netns.load(args.name)
        else:
            if not args.hosts:
                raise netns.ClusterError("--hosts is required (or --reuse a cluster made by up)")
            netns.check_free(args.name)
            made = True  # from here on, what exists under this name is ours to remove
            cluster = netns.up(args.name, args.hosts, args.rate, args.subnet, args.delay_ms,
                               args.loss_pct, args.mtu, args.queue_ms)
        return body(cluster)
    except Interrupted as e:
        print(f"braid-cluster: {e}; tearing down", file=sys.stderr)
        return 128 + e.sig
    finally:
        for sig in HANDLED:
            signal.signal(sig, signal.SIG_IGN)  # teardown is short; let it finish
        if made:
            try:
                netns.down(args.name, quiet=True)
            except netns.ClusterError as e:
                print(f"braid-cluster: teardown: {e}", file=sys.stderr)


def _run_job(procs, args, name):
    job = Job(procs, args.timeout or None, args.grace, name)
    _handle_signals(job.on_signal)
    return job.run()


def _verb_run(args):
    cmd = _command(args)
    if args.ranks_per_host < 1:
        raise netns.ClusterError("--ranks-per-host must be at least 1")
    return _with_cluster(args, lambda c: _run_job(
        rank_procs(c, args.ranks_per_host, cmd, args.master_port,
                   bind=None if args.bind_to is None else args.bind_to == "core"),
        args, "braid-cluster"))


def _verb_mpirun(args):
    cmd = _command(args)
    if args.ranks_per_host < 1:
        raise netns.ClusterError("--ranks-per-host must be at least 1")
    return _with_cluster(args, lambda c: _run_job(
        [mpirun_proc(c, args.ranks_per_host, cmd, args.mpi_arg)], args, "braid-cluster"))


def _verb_bw(args):
    nbytes = rate.parse_bytes(args.bytes)

    def body(cluster):
        src, dst = cluster.host_index(args.src), cluster.host_index(args.dst)
        rates = throughput.measure(cluster, src, dst, nbytes, args.runs)
        med = throughput.median(rates)
        if args.json:
            import json
            print(json.dumps({"src": src, "dst": dst, "bytes": nbytes, "bits_per_second": rates,
                              "median_bits_per_second": med, "rate": cluster.rate}))
        else:
            each = ", ".join(rate.human_bits(r) for r in rates)
            print(f"h{src} -> h{dst}: {nbytes} bytes x {len(rates)}: {each}; "
                  f"median {rate.human_bits(med)}"
                  + (f" (links shaped to {cluster.rate})" if cluster.rate else ""))
        return 0

    return _with_cluster(args, body)


def _verb_exec(args):
    cluster = netns.load(args.name)
    cmd = _command(args)
    i = cluster.host_index(args.host)
    os.environ["BRAID_HOSTNAME"] = cluster.ns(i)
    argv = netns.host_argv(cluster.ns(i), cmd)
    os.execvp(argv[0], argv)


def main(argv=None):
    args = _parser().parse_args(argv)
    try:
        if args.verb == "up":
            _handle_signals(_raise_interrupted)
            try:
                cluster = netns.up(args.name, args.hosts, args.rate, args.subnet,
                                   args.delay_ms, args.loss_pct, args.mtu, args.queue_ms)
            except Interrupted as e:
                print(f"braid-cluster: {e}; removed the half-made cluster", file=sys.stderr)
                return 128 + e.sig
            print(cluster.describe())
            return 0
        if args.verb == "down":
            removed = netns.down(args.name)
            print(f"braid-cluster: removed {', '.join(removed)}" if removed
                  else f"braid-cluster: nothing named '{args.name}' was up")
            return 0
        if args.verb == "list":
            netns.preflight()
            names = sorted({ns.rsplit("-", 1)[0] for ns in netns.list_namespaces()
                            if ns.endswith("-sw")})
            for name in names:
                try:
                    print(netns.load(name).describe())
                except netns.ClusterError as e:
                    print(f"cluster '{name}': {e}")
            return 0
        if args.verb == "exec":
            return _verb_exec(args)
        if args.verb == "run":
            return _verb_run(args)
        if args.verb == "mpirun":
            return _verb_mpirun(args)
        if args.verb == "bw":
            return _verb_bw(args)
    except (netns.ClusterError, rate.RateError, RuntimeError) as e:
        print(f"braid-cluster: {e}", file=sys.stderr)
        return 1
    return 2

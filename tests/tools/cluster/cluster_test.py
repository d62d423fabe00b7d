#!/usr/bin/python3
"""Tests of tools/cluster/braid-cluster: reachability, rate shaping, teardown (also after a
failing command, a timeout and a signal), the launcher's variables and prefixes, and braid's
all_reduce_perf across namespace hosts, plain and under mpirun, and collectives over libfabric
(ofi, tcp;ofi_rxm) between the hosts.

  cluster_test.py --tool PATH --build DIR [TestCase.test_name ...]

Exit 77 (CTest's skip) with a one-line reason when namespaces cannot be made here. Each skip reason
starts with its kind ("device: " or "missing: ", as in tests/support/braid_skip.py)."""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
import braid_skip  # noqa: E402

TOOL = None
BUILD = None
SUBNET = "10.213.0"


def sh(*argv, check=True, timeout=60, **kw):
    r = subprocess.run(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def tool(*args, check=True, timeout=120):
    return sh(sys.executable, TOOL, *args, check=check, timeout=timeout)


def namespaces(name):
    out = sh("ip", "netns", "list").stdout
    return [l.split()[0] for l in out.splitlines() if l.split() and
            re.match(rf"^{name}-(sw|h\d+)$", l.split()[0])]


def root_links():
    return set(re.findall(r"^\d+: ([^:@]+)", sh("ip", "-o", "link").stdout, re.M))


def in_ns(ns, *argv, check=True, timeout=30):
    return sh("ip", "netns", "exec", ns, *argv, check=check, timeout=timeout)


def skip_reason():
    """Why namespaces cannot be made here ("kind: reason"), or None."""
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "missing: iproute2 (ip, tc) is not installed"
    if os.geteuid() != 0:
        return "device: network namespaces need root"
    probe = f"bcprobe{os.getpid() % 100000}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    if r.returncode != 0:
        return f"device: cannot create a network namespace: {r.stderr.strip()}"
    return None


class ClusterTest(unittest.TestCase):
    def setUp(self):
        reason = skip_reason()
        if reason:
            self.skipTest(reason)
        # Unique per test and process, so tests may run in parallel.
        self.name = f"bt{os.getpid() % 100000}"
        self.links_before = root_links()

    def tearDown(self):
        if hasattr(self, "name"):
            subprocess.run([sys.executable, TOOL, "down", "--name", self.name],
                           capture_output=True, timeout=60)

    def assertGone(self):
        self.assertEqual(namespaces(self.name), [])
        self.assertFalse(os.path.exists(f"/run/braid-cluster/{self.name}.json"))
        self.assertNotIn(f"{SUBNET}.", sh("ip", "-o", "addr").stdout)
        # Nothing new in the root namespace (we never create links there).
        self.assertLessEqual(root_links(), self.links_before)

    def test_reach(self):
        out = tool("up", "--hosts", "2", "--name", self.name).stdout
        self.assertIn(f"h0  {SUBNET}.1", out)
        self.assertIn(f"h1  {SUBNET}.2", out)
        h0, h1 = f"{self.name}-h0", f"{self.name}-h1"
        # Each host sees loopback and its own link only, and routes only the cluster subnet.
        for ns in (h0, h1):
            links = set(re.findall(r"^\d+: ([^:@]+)", in_ns(ns, "ip", "-o", "link").stdout, re.M))
            self.assertEqual(links, {"lo", "eth0"})
            routes = in_ns(ns, "ip", "-4", "route").stdout.strip().splitlines()
            self.assertEqual(len(routes), 1, routes)
            self.assertTrue(routes[0].startswith(f"{SUBNET}.0/24"), routes)
        # TCP both ways between the hosts, loopback inside a host.
        probe = ("import socket,sys;s=socket.socket();s.settimeout(5);"
                 "s.bind(('0.0.0.0',0));s.listen(1);print(s.getsockname()[1],flush=True);"
                 "c,_=s.accept();c.sendall(b'hi');c.close()")
        for server, client, addr in ((h1, h0, f"{SUBNET}.2"), (h0, h1, f"{SUBNET}.1"),
                                     (h0, h0, "127.0.0.1")):
            p = subprocess.Popen(["ip", "netns", "exec", server, sys.executable, "-c", probe],
                                 stdout=subprocess.PIPE, text=True)
            try:
                port = p.stdout.readline().strip()
                got = in_ns(client, sys.executable, "-c",
                            f"import socket;c=socket.create_connection(('{addr}',{port}),5);"
                            "print(c.recv(2).decode())").stdout.strip()
                self.assertEqual(got, "hi", f"{client} -> {addr}")
            finally:
                p.wait(timeout=10)
        # Nothing beyond the subnet: the root namespace's own address is unreachable.
        outside = re.findall(r"inet (\d+\.\d+\.\d+\.\d+)/", sh("ip", "-4", "-o", "addr").stdout)
        outside = [a for a in outside if not a.startswith("127.")] or ["192.0.2.1"]
        r = in_ns(h0, sys.executable, "-c",
                  f"import socket\ntry:\n socket.create_connection(('{outside[0]}',22),2)\n"
                  "except OSError as e:\n print('unreachable', e.errno)", check=False)
        self.assertIn("unreachable", r.stdout)
        # The root namespace holds no address in the subnet.
        self.assertNotIn(f"{SUBNET}.", sh("ip", "-o", "addr").stdout)

    def test_rate(self):
        # tbf at 100 Mbit/s: TCP goodput lands a few percent under the rate, never above it. The
        # lower bound is loose: on a loaded 2-core machine the Python receiver itself lags.
        for src, dst in (("h0", "h1"), ("h1", "h0")):
            r = tool("bw", "--hosts", "2", "--name", self.name, "--rate", "100mbit", "--bytes",
                     "4M", "--runs", "3", "--src", src, "--dst", dst, "--json")
            result = json.loads(r.stdout)
            mbit = result["median_bits_per_second"] / 1e6
            self.assertLess(mbit, 102, result)
            self.assertGreater(mbit, 50, result)
        self.assertGone()

    def test_up_down_leaves_nothing(self):
        tool("up", "--hosts", "3", "--name", self.name, "--rate", "1gbit")
        self.assertEqual(len(namespaces(self.name)), 4)
        qdisc = in_ns(f"{self.name}-h2", "tc", "qdisc", "show", "dev", "eth0").stdout
        self.assertIn("tbf", qdisc)
        self.assertIn("1Gbit", qdisc)
        qdisc = in_ns(f"{self.name}-sw", "tc", "qdisc", "show", "dev", "p2").stdout
        self.assertIn("1Gbit", qdisc)
        # exec runs in the host, under the host's own hostname and BRAID_HOSTNAME.
        r = tool("exec", "--name", self.name, "h2", "--", "sh", "-c",
                 "hostname; echo $BRAID_HOSTNAME; ip -4 -o addr show eth0")
        lines = r.stdout.splitlines()
        self.assertEqual(lines[:2], [f"{self.name}-h2"] * 2)
        self.assertIn(f"{SUBNET}.3/24", lines[2])
        self.assertIn(f"cluster '{self.name}': 3 hosts", tool("list").stdout)
        # A second cluster under the same name is refused clearly, and the first one survives.
        r = tool("up", "--hosts", "2", "--name", self.name, check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("in use", r.stderr)
        self.assertEqual(len(namespaces(self.name)), 4)
        r = tool("run", "--hosts", "2", "--name", self.name, "--ranks-per-host", "1", "--", "true",
                 check=False)
        self.assertIn("in use", r.stderr)
        self.assertEqual(len(namespaces(self.name)), 4)
        # A leftover process in a host is killed so its namespace really goes.
        subprocess.Popen(["ip", "netns", "exec", f"{self.name}-h1", "sleep", "60"],
                         start_new_session=True)
        tool("down", "--name", self.name)
        self.assertGone()

    def test_queue_ms(self):
        # --queue-ms bounds each shaped port's backlog (tbf's latency): a shallow-buffer switch.
        out = tool("up", "--hosts", "2", "--name", self.name, "--rate", "1gbit", "--queue-ms",
                   "1").stdout
        self.assertIn("1 ms queues", out)
        for ns, dev in ((f"{self.name}-h1", "eth0"), (f"{self.name}-sw", "p0")):
            qdisc = in_ns(ns, "tc", "qdisc", "show", "dev", dev).stdout
            self.assertIn("lat 1ms", qdisc)
        tool("down", "--name", self.name)
        self.assertGone()
        r = tool("up", "--hosts", "2", "--name", self.name, "--queue-ms", "0", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--queue-ms must be between", r.stderr)
        self.assertGone()

    def roundTripsMs(self, ns, addr, n=5):
        """Round trips h0 -> addr: the time a connect to a closed port takes to be refused."""
        code = ("import socket,time\nfor i in range(%d):\n t=time.monotonic()\n try:\n"
                "  socket.create_connection(('%s',9),5)\n except ConnectionRefusedError:\n"
                "  print((time.monotonic()-t)*1e3)\n" % (n, addr))
        return [float(x) for x in in_ns(ns, sys.executable, "-c", code).stdout.split()]

    def test_delay_and_loss_switch(self):
        out = tool("up", "--hosts", "2", "--name", self.name, "--delay-ms", "10").stdout
        self.assertIn("10 ms one-way delay", out)
        rtts = sorted(self.roundTripsMs(f"{self.name}-h0", f"{SUBNET}.2"))
        self.assertEqual(len(rtts), 5)
        # Two switch traversals per round trip: ~20 ms (the first also resolves ARP).
        self.assertGreater(rtts[2], 19, rtts)
        self.assertLess(rtts[2], 60, rtts)
        tool("down", "--name", self.name)
        self.assertGone()
        # At 10% frame loss the link still carries a stream (TCP retransmits). Not more: the switch
        # drops both directions, and at 30% a segment and its retransmits were lost often enough
        # (RTO doubling each time) to outlast the tool's 60 s socket timeout in 2 of 3 runs.
        r = tool("bw", "--hosts", "2", "--name", self.name, "--loss-pct", "10", "--bytes", "64K",
                 "--runs", "1", "--json")
        self.assertGreater(json.loads(r.stdout)["median_bits_per_second"], 0)
        self.assertGone()
        # Without --delay-ms the kernel bridge answers well under a millisecond or so.
        tool("up", "--hosts", "2", "--name", self.name)
        rtts = sorted(self.roundTripsMs(f"{self.name}-h0", f"{SUBNET}.2"))
        self.assertLess(rtts[2], 5, rtts)

    def test_down_half_made(self):
        sh("ip", "netns", "add", f"{self.name}-h0")
        sh("ip", "netns", "add", f"{self.name}-sw")
        r = tool("down", "--name", self.name)
        self.assertIn(f"{self.name}-h0", r.stdout)
        self.assertGone()

    def test_run_env_and_prefix(self):
        script = ('echo "$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $GROUP_RANK $MASTER_ADDR '
                  '$MASTER_PORT $BRAID_HOSTNAME $(hostname) ${#BRAID_SECRET} '
                  '$(ip -4 -o addr show eth0 | awk \'{print $4}\')"')
        r = tool("run", "--hosts", "2", "--ranks-per-host", "2", "--name", self.name, "--", "sh",
                 "-c", script)
        lines = sorted(r.stdout.strip().splitlines())
        self.assertEqual(len(lines), 4, r.stdout)
        for rank, line in enumerate(lines):
            host, local = divmod(rank, 2)
            ns = f"{self.name}-h{host}"
            self.assertEqual(
                line, f"[h{host}.r{rank}] {rank} 4 {local} 2 {host} {SUBNET}.1 29500 {ns} {ns} 32 "
                f"{SUBNET}.{host + 1}/24")
        self.assertGone()

    def test_run_binds_local_ranks(self):
        # As braidrun on one host: local rank i pinned to the i-th usable CPU where a host's ranks
        # fit the CPUs (every namespace host the same), none with --bind-to none.
        usable = sorted(os.sched_getaffinity(0))
        everything = ",".join(str(c) for c in usable)
        script = 'echo "$RANK $(grep Cpus_allowed_list /proc/self/status | cut -f2)"'

        def allowed(*flags):
            r = tool("run", "--hosts", "2", "--ranks-per-host", "2", "--name", self.name,
                     *flags, "--", "sh", "-c", script)
            out = {}
            for line in r.stdout.strip().splitlines():
                rank, cpus = line.split("] ", 1)[1].split()
                out[int(rank)] = cpus
            self.assertEqual(sorted(out), [0, 1, 2, 3], r.stdout)
            return out

        def listed(cpus):  # "0-1" / "0,1" as the kernel prints it, as a sorted list
            result = []
            for part in cpus.split(","):
                lo, _, hi = part.partition("-")
                result += list(range(int(lo), int(hi or lo) + 1))
            return result

        pinned = allowed()
        for rank, cpus in pinned.items():
            want = [usable[(rank % 2) % len(usable)]] if len(usable) >= 2 else usable
            self.assertEqual(listed(cpus), want, f"rank {rank}: {pinned}")
        free = allowed("--bind-to", "none")
        for rank, cpus in free.items():
            self.assertEqual(listed(cpus), usable, f"rank {rank}: {free} (all of {everything})")
        self.assertGone()

    def test_run_failure_stops_others_and_tears_down(self):
        start = time.monotonic()
        r = tool("run", "--hosts", "2", "--ranks-per-host", "2", "--name", self.name, "--",
                 "sh", "-c", 'if [ "$RANK" = 2 ]; then echo bad >&2; exit 3; fi; exec sleep 60',
                 check=False)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("[h1.r2] bad", r.stderr)
        self.assertIn("rank 2 (h1) exited with code 3", r.stderr)
        self.assertLess(time.monotonic() - start, 30)
        self.assertGone()

    def test_run_missing_command(self):
        r = tool("run", "--hosts", "1", "--ranks-per-host", "1", "--name", self.name, "--",
                 "/nonexistent/braid-binary", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertGone()

    def test_run_timeout_tears_down(self):
        start = time.monotonic()
        r = tool("run", "--hosts", "2", "--ranks-per-host", "1", "--name", self.name,
                 "--timeout", "2", "--grace", "1", "--", "sh", "-c", "trap '' TERM; sleep 60",
                 check=False)
        self.assertEqual(r.returncode, 124, r.stderr)
        self.assertIn("timed out after 2 s", r.stderr)
        self.assertLess(time.monotonic() - start, 30)
        self.assertGone()

    def test_signal_tears_down(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            p = subprocess.Popen([sys.executable, TOOL, "run", "--hosts", "2", "--ranks-per-host",
                                  "1", "--name", self.name, "--", "sh", "-c",
                                  "echo started; exec sleep 60"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                # Wait (bounded) until the ranks run, then interrupt.
                self.assertIn("started", p.stdout.readline())
                p.send_signal(sig)
                _, err = p.communicate(timeout=30)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            self.assertEqual(p.returncode, 128 + sig, err)
            self.assertGone()

    def perf(self):
        path = os.path.join(BUILD, "bench", "all_reduce_perf")
        if not os.access(path, os.X_OK):
            self.skipTest(f"missing: {path} is not built (build target all_reduce_perf)")
        return path

    def checkPerfOutput(self, out, ranks, collective="all_reduce", sizes=None):
        """The nccl-tests table of rank 0: every row's #wrong 0 (out of place and in place), one
        row per size in `sizes` (in order) when given, and the footer's 0 out of bounds."""
        self.assertIn("Out of bounds values : 0 OK", out)
        rows = [l for l in out.splitlines() if re.match(r"^(\[h0\.r0\])?\s+\d+\s+\d+\s+float", l)]
        self.assertGreater(len(rows), 0, out)
        seen = []
        for row in rows:
            cols = row.split()
            if cols[0].startswith("["):
                cols = cols[1:]
            self.assertEqual(cols[8], "0", row)  # out-of-place #wrong
            self.assertEqual(cols[12], "0", row)  # in-place #wrong
            seen.append(int(cols[0]))
        if sizes is not None:
            self.assertEqual(seen, sizes, out)
        self.assertIn(f"{collective}: {ranks} ranks", out)

    def test_all_reduce_perf_across_hosts(self):
        perf = self.perf()
        env = dict(os.environ, BRAID_DEBUG="INFO")
        r = sh(sys.executable, TOOL, "run", "--hosts", "2", "--ranks-per-host", "2", "--name",
               self.name, "--timeout", "120", "--", perf, "-b", "8", "-e", "1M", "-f", "4", "-c",
               "1", check=False, timeout=180, env=env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.checkPerfOutput(r.stdout, 4)
        # Ranks on different hosts were grouped apart (so they connected over tcp).
        self.assertRegex(r.stdout + r.stderr, rf"rank 2/4: connected \(.*host {self.name}-h1\b")
        self.assertGone()

    def test_ofi_across_hosts(self):
        """libfabric's tcp;ofi_rxm between namespace hosts, 2 hosts x 2 ranks, both data paths
        (remote writes, tagged messages): every rank connects its 3 peers over ofi on that
        provider, and every element of every size of the collectives is right."""
        tool("up", "--hosts", "2", "--name", self.name)
        bench = os.path.join(BUILD, "bench")
        # (data path, BRAID_OFI_RMA, binary, smallest, largest, factor): sizes past the 1 MiB
        # slots between hosts, so messages are also cut into slots.
        runs = (("remote writes", "auto", "all_reduce_perf", 8, 4 << 20, 4),
                ("remote writes", "auto", "alltoall_perf", 64, 4 << 20, 8),
                ("tagged messages", "off", "all_reduce_perf", 8, 4 << 20, 8),
                ("tagged messages", "off", "reduce_scatter_perf", 64, 4 << 20, 8))
        for path, rma, binary, low, high, factor in runs:
            perf = os.path.join(bench, binary)
            self.assertTrue(os.access(perf, os.X_OK), f"{perf} is not built")
            env = dict(os.environ, BRAID_DEBUG="INFO", BRAID_OFI_PROVIDER="tcp;ofi_rxm",
                       BRAID_OFI_RMA=rma)
            env.pop("BRAID_TRANSPORT", None)
            r = sh(sys.executable, TOOL, "run", "--reuse", "--name", self.name,
                   "--ranks-per-host", "2", "--timeout", "120", "--", perf, "--transport", "ofi",
                   "-b", str(low), "-e", str(high), "-f", str(factor), "-c", "1", "-n", "5",
                   "-w", "1", check=False, timeout=180, env=env)
            out = r.stdout + r.stderr
            what = f"{binary} over ofi ({path})"
            self.assertEqual(r.returncode, 0, f"{what}:\n{out}")
            sizes = []
            size = low
            while size <= high:
                sizes.append(size)
                size *= factor
            collective = binary[:-len("_perf")]
            self.checkPerfOutput(r.stdout, 4, collective, sizes)
            self.assertIn("transport ofi", r.stdout)
            for rank in range(4):
                host = f"h{rank // 2}"
                self.assertRegex(out, rf"\[{host}\.r{rank}\] .* rank {rank}: ofi: libfabric "
                                 rf"provider tcp;ofi_rxm \(BRAID_OFI_PROVIDER\); data as {path}",
                                 what)
                self.assertRegex(out, rf"\[{host}\.r{rank}\] .* rank {rank}: transport connected "
                                 r"\(4 ranks: 3 ofi peers;", what)
                self.assertRegex(out, rf"rank {rank}/4: connected \(.*host {self.name}-{host}\b",
                                 what)
        tool("down", "--name", self.name)
        self.assertGone()

    def test_all_reduce_perf_mpirun(self):
        perf = self.perf()
        if shutil.which("mpirun") is None:
            self.skipTest("missing: mpirun (Open MPI) is not installed")
        r = tool("mpirun", "--hosts", "2", "--ranks-per-host", "2", "--name", self.name,
                 "--timeout", "120", "--", perf, "-b", "8", "-e", "64K", "-f", "8", "-c", "1",
                 "--baseline", "mpi", "-w", "1", "-n", "2", check=False, timeout=180)
        if "built without MPI" in r.stderr:
            self.skipTest("missing: all_reduce_perf was built without MPI")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.checkPerfOutput(r.stdout, 4)
        self.assertIn("launcher mpirun", r.stdout)
        self.assertRegex(r.stdout, rf"Rank  2 Group +\d+ Pid +\d+ on +{self.name}-h1")
        self.assertGone()


def main():
    global TOOL, BUILD
    p = argparse.ArgumentParser()
    p.add_argument("--tool", required=True)
    p.add_argument("--build", required=True)
    p.add_argument("tests", nargs="*")
    args = p.parse_args()
    TOOL, BUILD = args.tool, args.build
    loader = unittest.defaultTestLoader
    module = sys.modules[__name__]
    suite = (loader.loadTestsFromNames(args.tests, module) if args.tests
             else loader.loadTestsFromModule(module))
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if result.wasSuccessful() and result.testsRun and len(result.skipped) == result.testsRun:
        kind, _, reason = result.skipped[0][1].partition(": ")
        braid_skip.skip(kind, reason, test=" ".join(args.tests) or "cluster_test")
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()

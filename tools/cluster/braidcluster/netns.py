"""Bringing a simulated cluster up and down: one network namespace per host, a switch namespace
holding a bridge, a veth pair per host link, optional tbf shaping on both ends of each link.

Nothing here touches the root namespace's interfaces or routes: every link is created directly
inside the namespaces (`ip -n HOST link add ... peer ... netns SWITCH`), so a half-made cluster
never leaves anything behind in the root namespace, and deleting the namespaces removes it all.
"""
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time

from . import rate as ratemod

STATE_DIR = "/run/braid-cluster"
DEFAULT_NAME = "braid"
DEFAULT_SUBNET = "10.213.0"  # hosts get .1, .2, ...; a /24 unlikely to clash with real networks
HOST_IF = "eth0"  # the host's end of its link, inside the host namespace
SWITCH_QUEUE_MS = 25.0  # default backlog a shaped port holds before it drops (tbf's `latency` too)
SWITCH_START_SECONDS = 10.0
BRIDGE = "br0"  # inside the switch namespace
MAX_HOSTS = 200
NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,11}$")


class ClusterError(Exception):
    """A cluster operation failed; the message says which and why."""


def check_name(name):
    if not NAME_RE.match(name):
        raise ClusterError(
            f"cluster name '{name}' must be 1-12 lowercase letters/digits starting with a letter")


def check_subnet(subnet):
    parts = subnet.split(".")
    if len(parts) != 3 or not all(p.isdigit() and 0 <= int(p) <= 255 for p in parts):
        raise ClusterError(f"subnet '{subnet}' must be the first three octets, e.g. 10.213.0")


def switch_ns(name):
    return f"{name}-sw"


def host_ns(name, index):
    return f"{name}-h{index}"


def host_address(subnet, index):
    return f"{subnet}.{index + 1}"


def state_path(name):
    return os.path.join(STATE_DIR, name + ".json")


def preflight():
    """Raises ClusterError with a one-line reason when namespaces cannot be made here."""
    if os.geteuid() != 0:
        raise ClusterError("network namespaces need root (run as root)")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise ClusterError(f"'{tool}' (iproute2) is not installed")


def _ip(*args, check=True):
    """Runs an iproute2 command; raises ClusterError naming it when it fails."""
    r = subprocess.run(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=30)
    if check and r.returncode != 0:
        raise ClusterError(f"'{' '.join(args)}' failed: {r.stderr.strip() or r.returncode}")
    return r


def list_namespaces():
    r = _ip("ip", "netns", "list", check=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def namespaces_of(name):
    """The namespaces cluster `name` owns that exist now (hosts in order, then the switch)."""
    pattern = re.compile(rf"^{re.escape(name)}-(sw|h(\d+))$")
    hosts, switch = [], []
    for ns in list_namespaces():
        m = pattern.match(ns)
        if m and m.group(2) is not None:
            hosts.append((int(m.group(2)), ns))
        elif m:
            switch.append(ns)
    return [ns for _, ns in sorted(hosts)] + switch


class Cluster:
    """A cluster that is up: its name, subnet, host namespaces and addresses."""

    def __init__(self, name, hosts, subnet=DEFAULT_SUBNET, rate=None, delay_ms=0.0, loss_pct=0.0,
                 mtu=None, queue_ms=SWITCH_QUEUE_MS):
        self.name = name
        self.queue_ms = queue_ms
        self.hosts = hosts
        self.subnet = subnet
        self.rate = rate
        self.delay_ms = delay_ms
        self.loss_pct = loss_pct
        self.mtu = mtu

    @property
    def userspace_switch(self):
        """Delay and loss need the userspace switch (tapswitch.py); otherwise a kernel bridge."""
        return bool(self.delay_ms or self.loss_pct)

    def ns(self, index):
        return host_ns(self.name, index)

    def address(self, index):
        return host_address(self.subnet, index)

    @property
    def cidr(self):
        return f"{self.subnet}.0/24"

    def host_index(self, host):
        """Index of a host given as 'h1', '1', 'NAME-h1' or its address."""
        text = str(host)
        for i in range(self.hosts):
            if text in (str(i), f"h{i}", self.ns(i), self.address(i)):
                return i
        raise ClusterError(
            f"no host '{text}' in cluster '{self.name}' (hosts h0..h{self.hosts - 1})")

    def to_json(self):
        return {"name": self.name, "hosts": self.hosts, "subnet": self.subnet, "rate": self.rate,
                "delay_ms": self.delay_ms, "loss_pct": self.loss_pct, "mtu": self.mtu,
                "queue_ms": self.queue_ms,
                "namespaces": [self.ns(i) for i in range(self.hosts)],
                "addresses": [self.address(i) for i in range(self.hosts)],
                "switch": switch_ns(self.name)}

    def describe(self):
        shaped = f", links shaped to {self.rate} each way" if self.rate else ", links unshaped"
        if self.delay_ms:
            shaped += f", {self.delay_ms:g} ms one-way delay through the switch"
        if self.loss_pct:
            shaped += f", {self.loss_pct:g}% frame loss"
        if self.mtu:
            shaped += f", mtu {self.mtu}"
        if self.rate and self.queue_ms != SWITCH_QUEUE_MS:
            shaped += f", {self.queue_ms:g} ms queues"
        lines = [f"cluster '{self.name}': {self.hosts} hosts on {self.cidr}{shaped}"]
        for i in range(self.hosts):
            lines.append(f"  h{i}  {self.address(i):<15}  netns {self.ns(i)}")
        return "\n".join(lines)


def load(name):
    """The cluster `name` as recorded by up(); ClusterError when it is not up."""
    check_name(name)
    try:
        with open(state_path(name)) as f:
            data = json.load(f)
    except FileNotFoundError:
        raise ClusterError(f"cluster '{name}' is not up (start it with: braid-cluster up "
                           f"--name {name} --hosts H)") from None
    cluster = Cluster(name, int(data["hosts"]), data["subnet"], data.get("rate"),
                      data.get("delay_ms", 0.0), data.get("loss_pct", 0.0), data.get("mtu"),
                      data.get("queue_ms", SWITCH_QUEUE_MS))
    missing = [cluster.ns(i) for i in range(cluster.hosts)
               if cluster.ns(i) not in list_namespaces()]
    if missing:
        raise ClusterError(f"cluster '{name}' is half-made (missing {', '.join(missing)}); "
                           f"run: braid-cluster down --name {name}")
    return cluster


def check_free(name):
    """Raises ClusterError when namespaces or a state file of cluster `name` exist."""
    preflight()
    check_name(name)
    existing = namespaces_of(name)
    if existing or os.path.exists(state_path(name)):
        what = ", ".join(existing) if existing else state_path(name)
        raise ClusterError(f"cluster name '{name}' is in use ({what}); pick another --name or "
                           f"run: braid-cluster down --name {name}")


def _shape(ns, dev, bits, queue_ms):
    # tbf: `burst` bytes may pass at line speed; 1 ms worth of the rate (at least 16 KiB so a
    # few full-size frames fit) keeps the rate accurate without starving TCP. `latency` bounds
    # the queue (25 ms unless --queue-ms) so TCP sees drops instead of unbounded delay; a short
    # queue is a switch with shallow port buffers, where flows converging on one port drop.
    burst = max(bits // 8 // 1000, 16 * 1024)
    _ip("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", f"{bits}bit",
        "burst", str(burst), "latency", f"{queue_ms:g}ms")


def up(name, hosts, rate=None, subnet=DEFAULT_SUBNET, delay_ms=0.0, loss_pct=0.0, mtu=None,
       queue_ms=SWITCH_QUEUE_MS):
    """Creates cluster `name` with `hosts` hosts; returns the Cluster. Refuses when the name is
    in use; removes what it made when a step fails. With delay_ms or loss_pct the hosts hang
    off a userspace switch (tapswitch.py) instead of a kernel bridge."""
    preflight()
    check_name(name)
    check_subnet(subnet)
    if not 1 <= hosts <= MAX_HOSTS:
        raise ClusterError(f"--hosts must be between 1 and {MAX_HOSTS}, got {hosts}")
    if delay_ms < 0 or delay_ms > 10000:
        raise ClusterError(f"--delay-ms must be between 0 and 10000, got {delay_ms:g}")
    if not 0 <= loss_pct < 100:
        raise ClusterError(f"--loss-pct must be in [0, 100), got {loss_pct:g}")
    if mtu is not None and not 576 <= mtu <= 65000:
        raise ClusterError(f"--mtu must be between 576 and 65000, got {mtu}")
    if not 0.1 <= queue_ms <= 1000:
        raise ClusterError(f"--queue-ms must be between 0.1 and 1000, got {queue_ms:g}")
    bits = ratemod.parse_rate(rate) if rate else None
    check_free(name)
    cluster = Cluster(name, hosts, subnet, rate, delay_ms, loss_pct, mtu, queue_ms)
    os.makedirs(STATE_DIR, exist_ok=True)
    # The state file goes first so that `down` finds a half-made cluster too.
    with open(state_path(name), "w") as f:
        json.dump(cluster.to_json(), f, indent=1)
    try:
        sw = switch_ns(name)
        _ip("ip", "netns", "add", sw)
        _ip("ip", "-n", sw, "link", "set", "lo", "up")
        for i in range(hosts):
            _ip("ip", "netns", "add", cluster.ns(i))
            _ip("ip", "-n", cluster.ns(i), "link", "set", "lo", "up")
        if cluster.userspace_switch:
            _links_via_tapswitch(cluster, bits)
        else:
            _links_via_bridge(cluster, bits)
        for i in range(hosts):
            ns = cluster.ns(i)
            if mtu:
                _ip("ip", "-n", ns, "link", "set", HOST_IF, "mtu", str(mtu))
            _ip("ip", "-n", ns, "addr", "add", f"{cluster.address(i)}/24", "dev", HOST_IF)
            _ip("ip", "-n", ns, "link", "set", HOST_IF, "up")
            if bits:
                _shape(ns, HOST_IF, bits, cluster.queue_ms)  # host -> switch
        _wait_links(cluster)
    except BaseException:
        down(name, quiet=True)
        raise
    return cluster


def _links_via_bridge(cluster, bits):
    """A veth pair per host: eth0 in the host, pN on a bridge in the switch namespace, shaped
    switch -> host there (the host side is shaped by the caller)."""
    sw = switch_ns(cluster.name)
    _ip("ip", "-n", sw, "link", "add", BRIDGE, "type", "bridge")
    _ip("ip", "-n", sw, "link", "set", BRIDGE, "up")
    for i in range(cluster.hosts):
        ns, port = cluster.ns(i), f"p{i}"
        _ip("ip", "-n", ns, "link", "add", HOST_IF, "type", "veth", "peer", "name", port,
            "netns", sw)
        if cluster.mtu:
            _ip("ip", "-n", sw, "link", "set", port, "mtu", str(cluster.mtu))
        _ip("ip", "-n", sw, "link", "set", port, "master", BRIDGE)
        _ip("ip", "-n", sw, "link", "set", port, "up")
        if bits:
            _shape(sw, port, bits, cluster.queue_ms)  # switch -> host


def _links_via_tapswitch(cluster, bits):
    """Starts tapswitch.py in the switch namespace (it outlives us: `down` kills it) and moves
    its TAP devices into the hosts as eth0. The switch delays, drops and, with a rate,
    serializes each frame at its output port (switch -> host)."""
    sw = switch_ns(cluster.name)
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tapswitch.py")
    log = open(os.path.join(STATE_DIR, cluster.name + ".switch.log"), "w")
    with log:
        proc = subprocess.Popen(
            ["ip", "netns", "exec", sw, sys.executable, script, str(cluster.hosts),
             str(cluster.delay_ms), str(bits or 0), str(cluster.loss_pct), str(cluster.queue_ms)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
            start_new_session=True)
    ready, _, _ = select.select([proc.stdout], [], [], SWITCH_START_SECONDS)
    line = proc.stdout.readline() if ready else b""
    proc.stdout.close()
    if line.strip() != b"ready":
        raise ClusterError(f"the userspace switch did not start within {SWITCH_START_SECONDS:g} "
                           f"s (see {log.name})")
    for i in range(cluster.hosts):
        _ip("ip", "-n", sw, "link", "set", f"t{i}", "netns", cluster.ns(i))
        _ip("ip", "-n", cluster.ns(i), "link", "set", f"t{i}", "name", HOST_IF)


def _wait_links(cluster, seconds=5.0):
    """Waits (bounded) until every host's link reports carrier, so the first packet is not lost."""
    deadline = time.monotonic() + seconds
    for i in range(cluster.hosts):
        while True:
            r = _ip("ip", "-n", cluster.ns(i), "-o", "link", "show", HOST_IF, check=False)
            if "LOWER_UP" in r.stdout:
                break
            if time.monotonic() > deadline:
                raise ClusterError(f"link of host h{i} ({cluster.ns(i)}) did not come up in "
                                   f"{seconds:.0f} s")
            time.sleep(0.02)


def host_argv(ns, command):
    """argv that runs `command` in host namespace `ns`, in a UTS namespace of its own whose
    hostname is `ns`: tools that name shared files after the hostname (Open MPI's session
    directory and shared-memory segments) then keep the hosts apart, as on real machines."""
    if shutil.which("unshare") is None:
        return ["ip", "netns", "exec", ns] + list(command)
    return ["ip", "netns", "exec", ns, "unshare", "--uts", "/bin/sh", "-c",
            'hostname "$0" && exec "$@"', ns] + list(command)


def kill_processes(ns):
    """SIGKILLs every process living in namespace `ns` (leftover ranks, daemons); returns the
    count."""
    r = _ip("ip", "netns", "pids", ns, check=False)
    pids = [int(p) for p in r.stdout.split() if p.isdigit()]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(pids)


def down(name, quiet=False):
    """Removes everything cluster `name` made (also a half-made cluster); returns the namespaces
    removed. Processes still living in them are killed first, so their links go too."""
    preflight()
    check_name(name)
    removed = []
    for ns in namespaces_of(name):
        killed = kill_processes(ns)
        if killed and not quiet and ns != switch_ns(name):  # the switch's own is the tapswitch
            print(f"braid-cluster: killed {killed} leftover process(es) in {ns}")
    # A killed process leaves its namespace once reaped; give them a moment (bounded).
    deadline = time.monotonic() + 5.0
    for ns in namespaces_of(name):
        while kill_processes(ns) and time.monotonic() < deadline:
            time.sleep(0.05)
        _ip("ip", "netns", "del", ns, check=False)
        removed.append(ns)
    left = namespaces_of(name)
    for path in (state_path(name), os.path.join(STATE_DIR, name + ".switch.log")):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    if left:
        raise ClusterError(f"could not remove namespaces {', '.join(left)}")
    return removed

"""Open MPI across a cluster's namespaces.

mpirun cannot enter namespaces itself, so it runs inside host 0's namespace and reaches the
other hosts through `netns-rsh`, a plm_rsh_agent that runs the daemon (orted) it is given in
the namespace that owns the host address it is asked for. Hosts are named by address (no
/etc/hosts edits); orted dials back to mpirun over the cluster subnet. Point-to-point traffic
is forced onto ob1 + tcp over the subnet (vader only within a host), so a UCX pml cannot slip
in shared memory between hosts. Every host gets its own hostname (a UTS namespace): Open MPI
names its session directory and vader segments after it, and with one shared /tmp and /dev/shm
two hosts called alike overwrite each other's segments (MPI_Bcast then segfaults in vader).
"""
import os
import shutil

from .launch import Proc
from .netns import host_argv

RSH_AGENT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                         "netns-rsh")


def mpirun_argv(cluster, ranks_per_host, command, extra=()):
    hosts = ",".join(f"{cluster.address(i)}:{ranks_per_host}" for i in range(cluster.hosts))
    return host_argv(cluster.ns(0), [
            shutil.which("mpirun") or "mpirun",
            "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
            "-np", str(cluster.hosts * ranks_per_host), "--host", hosts,
            "--mca", "plm_rsh_agent", RSH_AGENT,
            "--mca", "pml", "ob1", "--mca", "btl", "self,vader,tcp",
            "--mca", "btl_tcp_if_include", cluster.cidr,
            "--mca", "oob_tcp_if_include", cluster.cidr,
            *_forwarded_env(), *extra, *command])


def _forwarded_env():
    """-x for the sanitizer settings in our environment: orted on the other hosts does not pass
    the launcher's environment on by itself."""
    names = ("ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS")
    return [arg for name in names if name in os.environ for arg in ("-x", name)]


def mpirun_proc(cluster, ranks_per_host, command, extra=(), base_env=None):
    """The one process to run: mpirun in host 0's namespace."""
    env = dict(os.environ if base_env is None else base_env)
    env.update({
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        # netns-rsh maps a host address to its namespace with this; the ranks of host 0 get
        # BRAID_HOSTNAME from here, the others from netns-rsh.
        "BRAID_CLUSTER_HOSTMAP": ",".join(f"{cluster.address(i)}={cluster.ns(i)}"
                                          for i in range(cluster.hosts)),
        "BRAID_HOSTNAME": cluster.ns(0),
    })
    return Proc("mpirun", mpirun_argv(cluster, ranks_per_host, command, extra), env, "")

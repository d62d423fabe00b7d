"""The processes of a torchrun-style job spread over a cluster's host namespaces."""
import os
import secrets

from .launch import Proc
from .netns import host_argv

DEFAULT_MASTER_PORT = 29500  # torchrun's default; every cluster's namespaces are fresh


def local_cpus(ranks_per_host, bind=None):
    """The CPU each local rank of a host is pinned to, or None for all: as braidrun does on one
    host (`--bind-to core`, its default where the ranks fit the usable CPUs), local rank i on the
    i-th usable CPU. Every namespace host poses as a machine of its own, so each pins its ranks
    the same way. bind None: pin when ranks_per_host fits; True/False: always/never."""
    usable = sorted(os.sched_getaffinity(0))
    if bind is None:
        bind = 0 < ranks_per_host <= len(usable)
    if not bind or not usable:
        return [None] * ranks_per_host
    return [usable[i % len(usable)] for i in range(ranks_per_host)]


def rank_procs(cluster, ranks_per_host, command, master_port=DEFAULT_MASTER_PORT, base_env=None,
               bind=None):
    """One Proc per rank: rank r lives on host r // ranks_per_host, with torchrun's variables
    (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR = host 0's
    address, MASTER_PORT), BRAID_HOSTNAME = the host's namespace name (braid groups ranks into
    nodes by it) and one BRAID_SECRET for the whole job, as braidrun sets them; pinned as
    local_cpus(ranks_per_host, bind) says."""
    env0 = dict(os.environ if base_env is None else base_env)
    cpus = local_cpus(ranks_per_host, bind)
    world = cluster.hosts * ranks_per_host
    secret = secrets.token_hex(16)
    procs = []
    for host in range(cluster.hosts):
        for local in range(ranks_per_host):
            rank = host * ranks_per_host + local
            env = dict(env0)
            env.update({
                "RANK": str(rank),
                "WORLD_SIZE": str(world),
                "LOCAL_RANK": str(local),
                "LOCAL_WORLD_SIZE": str(ranks_per_host),
                "GROUP_RANK": str(host),
                "GROUP_WORLD_SIZE": str(cluster.hosts),
                "MASTER_ADDR": cluster.address(0),
                "MASTER_PORT": str(master_port),
                "BRAID_HOSTNAME": cluster.ns(host),
                "BRAID_SECRET": secret,
            })
            argv = host_argv(cluster.ns(host), command)
            procs.append(Proc(f"rank {rank} (h{host})", argv, env, f"[h{host}.r{rank}] ",
                              cpus[local]))
    return procs

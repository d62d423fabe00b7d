"""braid as a PyTorch distributed backend.

    import torch.distributed as dist, braid_torch   # importing registers the "braid" backend
    dist.init_process_group("braid")                 # env:// (braidrun, mpirun; torchrun on 2.x)

Collectives run on CPU tensors over braid's shared-memory / TCP transports, and under PyTorch 2.x
built with CUDA also on CUDA tensors through braid's device path. See README.md in braid's python/
folder for what is supported.
"""
import inspect
import os

# A PyTorch process computes on the cores its collectives wait on (DDP all-reduces buckets on a
# helper thread while backward runs on the main one): braid's default 2 ms spin takes that CPU
# from the compute the peer is waiting for (DDP ran at 1.08x Gloo with it, unpinned), while no
# spin at all makes every piece of a large all-reduce pay a futex wake-up (64 MiB at 2.5x). A
# 50 us spin keeps both: 6.6x on 64 MiB, 58x on 8 B, 2.0x on DDP (bench/torch/README.md).
# BRAID_SPIN_US set by the user wins. (Read once, when _C loads.)
os.environ.setdefault("BRAID_SPIN_US", "50")

import torch  # noqa: E402  (loads libtorch before the extension needs it)
import torch.distributed as dist  # noqa: E402

from . import _C  # noqa: E402

__all__ = ["BACKEND_NAME", "create_process_group", "register"]

BACKEND_NAME = "braid"
create_process_group = _C.create_process_group
_TORCH_MAJOR = int(torch.__version__.split(".")[0])


def _check_torch_version():
    built = _C.built_with_torch.split(".")[:2]
    running = torch.__version__.split("+")[0].split(".")[:2]
    if built != running:
        raise ImportError(
            f"braid_torch was built against torch {_C.built_with_torch} but torch "
            f"{torch.__version__} is imported; rebuild braid with this Python "
            f"(-DBRAID_TORCH_PYTHON=...)")


def _env_from_mpirun():
    """Under mpirun, fills in env://'s RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE from
    Open MPI's variables (MASTER_ADDR and MASTER_PORT still come from the command line, e.g.
    mpirun -x MASTER_ADDR=host -x MASTER_PORT=29500). Variables already set win."""
    mpi = {"RANK": "OMPI_COMM_WORLD_RANK", "WORLD_SIZE": "OMPI_COMM_WORLD_SIZE",
           "LOCAL_RANK": "OMPI_COMM_WORLD_LOCAL_RANK",
           "LOCAL_WORLD_SIZE": "OMPI_COMM_WORLD_LOCAL_SIZE"}
    if "RANK" not in os.environ and "OMPI_COMM_WORLD_RANK" in os.environ:
        for ours, theirs in mpi.items():
            if theirs in os.environ:
                os.environ.setdefault(ours, os.environ[theirs])


def _create_backend(opts, backend_options=None):
    """The creator torch 2.x calls with extended_api=True: c10d's _DistributedBackendOptions
    (store, group_rank, group_size, timeout, ...) and the backend options (none for braid)."""
    return _C.create_process_group(opts.store, opts.group_rank, opts.group_size, opts.timeout)


def register():
    """Registers the "braid" backend with torch.distributed (done on import; idempotent).

    PyTorch 2.x: a c10d Backend for the "cpu" and "cuda" devices (CUDA tensors take braid's
    device path where the module was built with it, else they are refused saying why), created
    through the extended API. 1.13: a ProcessGroup created from (store, rank, world_size,
    timeout)."""
    if BACKEND_NAME.upper() in getattr(dist.Backend, "_plugins", {}):
        return
    params = inspect.signature(dist.Backend.register_backend).parameters
    if _TORCH_MAJOR >= 2 and "extended_api" in params and "devices" in params:
        dist.Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True,
                                      devices=["cpu", "cuda"])
    else:
        dist.Backend.register_backend(BACKEND_NAME, _C.create_process_group)


_check_torch_version()
_env_from_mpirun()
register()

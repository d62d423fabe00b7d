"""braid as a PyTorch distributed backend.

    import torch.distributed as dist, braid_torch   # importing registers the "braid" backend
    dist.init_process_group("braid")                 # env:// as usual (torchrun, braidrun, mpirun)

Collectives run on CPU tensors over braid's shared-memory / TCP transports. See README.md in
braid's python/ folder for what is supported.
"""
import inspect
import os

# A PyTorch process computes on the cores its collectives wait on (DDP all-reduces buckets on a
# helper thread while backward runs on the main one): a wait that spins before sleeping takes
# that CPU from the compute the peer is waiting for, and DDP ran slower with braid's 2 ms spin in
# every probe on a busy 2-core machine (bench/torch/README.md). So braid's waits here sleep on
# the doorbell right after a short pause loop, unless BRAID_SPIN_US says otherwise. (Read once,
# when _C loads.)
os.environ.setdefault("BRAID_SPIN_US", "0")

import torch  # noqa: E402  (loads libtorch before the extension needs it)
import torch.distributed as dist  # noqa: E402

from . import _C  # noqa: E402

__all__ = ["BACKEND_NAME", "create_process_group", "register"]

BACKEND_NAME = "braid"
create_process_group = _C.create_process_group


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


def register():
    """Registers the "braid" backend with torch.distributed (done on import; idempotent)."""
    if BACKEND_NAME.upper() in getattr(dist.Backend, "_plugins", {}):
        return
    kwargs = {}
    # PyTorch 2.x can map devices to backends; braid serves CPU tensors.
    if "devices" in inspect.signature(dist.Backend.register_backend).parameters:
        kwargs["devices"] = ["cpu"]
    dist.Backend.register_backend(BACKEND_NAME, _C.create_process_group, **kwargs)


_check_torch_version()
_env_from_mpirun()
register()

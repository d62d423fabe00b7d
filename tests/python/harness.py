"""Shared helpers for braid_torch's tests: skip when torch or the module is absent, launch N ranks
as processes with env:// variables (as torchrun would), and collect their results."""
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import braid_skip  # noqa: E402


def skip(reason):
    """A missing torch or braid_torch (the TORCH part)."""
    braid_skip.skip_missing(reason)


def require_braid_torch():
    """Skips (exit 77) with a one-line reason when torch, gloo or braid_torch is missing."""
    try:
        import torch  # noqa: F401
        import torch.distributed as dist
    except ImportError as e:
        skip(f"torch is not importable by {sys.executable}: {e}")
    want = os.environ.get("BRAID_TEST_TORCH_MAJOR")  # the torch2_ tests: PyTorch 2.x wanted
    if want and torch.__version__.split(".")[0] != want:
        state = os.environ.get("BRAID_TEST_TORCH2_STATE", "")
        skip(f"this test wants torch {want}.x, {sys.executable} has {torch.__version__} "
             f"(part TORCH2: {state or 'unknown'})")
    if not dist.is_available() or not dist.is_gloo_available():
        skip("this torch has no distributed/gloo support")
    try:
        import braid_torch  # noqa: F401
    except ImportError as e:
        skip(f"braid_torch is not built or not on PYTHONPATH (BRAID_WITH_TORCH, build/python; "
             f"BRAID_WITH_TORCH2, build/python-torch2): {e}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torch_major():
    import torch
    return int(torch.__version__.split(".")[0])


def is_worker():
    return "RANK" in os.environ


def launch(script, world, args=(), timeout=60, env=None):
    """Runs `script` as `world` ranks; returns [(returncode, output)] per rank. Kills every rank
    still running after `timeout` seconds (then their return code is None)."""
    port = free_port()
    procs = []
    for rank in range(world):
        e = dict(os.environ)
        e.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                 LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                 OMP_NUM_THREADS="1")
        e.update(env or {})
        procs.append(subprocess.Popen([sys.executable, script, *args], env=e,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    deadline = time.monotonic() + timeout
    results = []
    for rank, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
            results.append((p.returncode, out))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
            results.append((None, out + f"\n[rank {rank} killed after {timeout} s]"))
    return results


def report(results, expected=None):
    """Prints every rank's output; exits 1 unless rank r's return code equals expected[r]
    (default 0 everywhere)."""
    expected = expected or [0] * len(results)
    ok = True
    for rank, ((rc, out), want) in enumerate(zip(results, expected)):
        print(f"---- rank {rank}: exit {rc} (expected {want}) ----")
        print(out.rstrip())
        ok = ok and rc == want
    print("PASS" if ok else "FAIL", flush=True)
    sys.exit(0 if ok else 1)


def main(script, world, worker, timeout=60):
    """A test script's entry: in a rank process runs worker(); else launches `world` ranks of
    `script` and reports (exits)."""
    if is_worker():
        worker()
        return
    require_braid_torch()
    report(launch(os.path.abspath(script), world, timeout=timeout))

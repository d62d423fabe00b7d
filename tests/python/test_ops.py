"""braid_torch's ops beyond test_collectives.py: gather and scatter from every root,
all_to_all_single (equal and uneven splits) and all_to_all, all_gather_coalesced,
monitored_barrier, tags, refused all-to-all splits (not adding up, too many, a rank's own
blocks of different sizes), the device check; under PyTorch 2.x also the registration
(extended API, "cpu" and "cuda"), the coalescing manager's fast paths
(allgather_into_tensor_coalesced, reduce_scatter_tensor_coalesced), _abort_process_group and
destroy_process_group's shutdown.

    /usr/bin/python3 tests/python/test_ops.py --world 3          (PYTHONPATH=build/python)
    $(tools/torch2-env) tests/python/test_ops.py --world 3       (PYTHONPATH=build/python-torch2)
"""
import argparse
import os
import sys
import time
import warnings
import zlib
from datetime import timedelta

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

DTYPE_NAMES = ["float32", "bfloat16", "int64", "uint8", "bool"]
SIZES = [1, 1000, 70001]


def worker():
    import torch
    import torch.distributed as dist
    import braid_torch  # noqa: F401  (registers "braid")

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning)
    major = harness.torch_major()
    dist.init_process_group("braid", timeout=timedelta(seconds=30))
    rank, world = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    dtypes = [getattr(torch, n) for n in DTYPE_NAMES]
    checks = 0

    def make(dt, n, src, salt):
        seed = zlib.crc32(f"{src}/{salt}/{n}/{dt}".encode())  # the same in every process
        g = torch.Generator().manual_seed(seed)
        v = torch.randint(0, 100, (n,), generator=g)
        return (v % 2).to(torch.bool) if dt == torch.bool else v.to(dt)

    def same(got, want, what):
        nonlocal checks
        checks += 1
        if not torch.equal(got, want):
            raise AssertionError(f"rank {rank}: {what}: got {got.flatten()[:8].tolist()}, "
                                 f"want {want.flatten()[:8].tolist()}")

    def refused(call, *words):
        """call() raises a RuntimeError whose message holds every one of `words`."""
        nonlocal checks
        try:
            call()
        except RuntimeError as e:
            msg = str(e)
            assert all(w in msg for w in words), f"unclear error (want {words}): {msg}"
            checks += 1
            return msg.splitlines()[0]
        raise AssertionError(f"{words}: did not raise")

    # gather: every root, dtype and size; a strided output on the root; async.
    for root in range(world):
        for dt in dtypes:
            for n in SIZES:
                x = make(dt, n, rank, f"g{root}")
                outs = [torch.empty(n, dtype=dt) for _ in range(world)] if rank == root else None
                dist.gather(x, outs, dst=root)
                if rank == root:
                    for r in range(world):
                        same(outs[r], make(dt, n, r, f"g{root}"), f"gather {dt} n={n} from {r}")
        outs = [torch.zeros(6, 4).t() for _ in range(world)] if rank == root else None
        work = dist.gather(torch.full((4, 6), float(rank)), outs, dst=root, async_op=True)
        work.wait()
        if rank == root:
            for r in range(world):
                same(outs[r].contiguous(), torch.full((4, 6), float(r)), f"gather strided {r}")

    # scatter: every root, dtype and size; a strided input; async.
    for root in range(world):
        for dt in dtypes:
            for n in SIZES:
                ins = [make(dt, n, r, f"s{root}") for r in range(world)] if rank == root else None
                got = torch.empty(n, dtype=dt)
                dist.scatter(got, ins, src=root)
                same(got, make(dt, n, rank, f"s{root}"), f"scatter {dt} n={n} root {root}")
        ins = ([torch.full((6, 4), float(r)).t() for r in range(world)] if rank == root else None)
        got = torch.zeros(6, 4).t()
        dist.scatter(got, ins, src=root, async_op=True).wait()
        same(got.contiguous(), torch.full((4, 6), float(rank)), f"scatter strided root {root}")

    # all_to_all_single: equal splits and uneven row splits (zeros included), every dtype and
    # size; all_to_all's list form with uneven shapes; async; checked against Gloo's.
    for dt in dtypes:
        for n in SIZES:
            x = make(dt, n * world, rank, "a2a")
            got = torch.empty(n * world, dtype=dt)
            dist.all_to_all_single(got, x)
            want = torch.cat([make(dt, n * world, r, "a2a")[rank * n:(rank + 1) * n]
                              for r in range(world)])
            same(got, want, f"all_to_all_single {dt} n={n}")

    def rows(src, dst):  # rows rank src sends rank dst: uneven, some zero
        return 0 if (src + 2 * dst) % 3 == 0 else src + 2 * dst + 1

    send_rows = [rows(rank, q) for q in range(world)]
    recv_rows = [rows(q, rank) for q in range(world)]
    x = make(torch.float32, sum(send_rows) * 3, rank, "a2av").reshape(-1, 3)
    got = torch.empty(sum(recv_rows), 3)
    dist.all_to_all_single(got, x, recv_rows, send_rows)
    want = torch.empty_like(got)
    dist.all_to_all_single(want, x, recv_rows, send_rows, group=gloo)
    same(got, want, "all_to_all_single uneven splits (vs Gloo)")
    ins = [make(torch.int64, rows(rank, q) * 2, rank, f"a2al{q}").reshape(-1, 2)
           for q in range(world)]
    outs = [torch.empty(rows(q, rank), 2, dtype=torch.int64) for q in range(world)]
    dist.all_to_all(outs, ins, async_op=True).wait()
    for q in range(world):
        same(outs[q], make(torch.int64, rows(q, rank) * 2, q, f"a2al{rank}").reshape(-1, 2),
             f"all_to_all list from {q}")

    # all_gather_coalesced: several inputs of different shapes (torch wants one dtype), one call.
    inputs = [make(torch.int64, 10, rank, "c0").reshape(2, 5), make(torch.int64, 7, rank, "c1")]
    # outputs[r] is rank r's list, one tensor per input (torch's documented layout, Gloo's).
    outputs = [[torch.empty_like(t) for t in inputs] for _ in range(world)]
    dist.all_gather_coalesced(outputs, inputs)
    for i, t in enumerate(inputs):
        for r in range(world):
            same(outputs[r][i], make(t.dtype, t.numel(), r, f"c{i}").reshape(t.shape),
                 f"all_gather_coalesced #{i} from {r}")

    # monitored_barrier. dist.monitored_barrier takes Gloo only in 1.13 and again from 2.11
    # ("only implemented for GLOO backend"): there, ask the group, which reaches braid's own.
    public = major >= 2
    if public:
        try:
            dist.monitored_barrier(timeout=timedelta(seconds=20))
            dist.monitored_barrier(timeout=timedelta(seconds=20), wait_all_ranks=True)
        except ValueError as e:
            if "GLOO" not in str(e):
                raise
            public = False
    if not public:
        dist.group.WORLD.monitored_barrier(timedelta(seconds=20))
    checks += 1

    # Tags: matched in posting order and checked (each rank's tag is 7 + its rank).
    peer, prev = (rank + 1) % world, (rank - 1) % world
    got = torch.empty(3)
    reqs = [dist.isend(torch.full((3,), float(rank)), dst=peer, tag=7 + rank),
            dist.irecv(got, src=prev, tag=7 + prev)]
    for r in reqs:
        r.wait()
    same(got, torch.full((3,), float(prev)), "tagged isend/irecv")

    # Refused: negative tags, all-to-all splits that do not fit, tensors off the CPU.
    msgs = [
        refused(lambda: dist.send(torch.ones(2), dst=peer, tag=-7), "tag -7", "send",
                "negative"),
        refused(lambda: dist.all_to_all_single(torch.empty(world * 2), torch.ones(world * 2),
                                               [1] * world, [2] * world),
                "alltoall_base", f"(rank {rank})", f"output split sizes add up to {world} rows",
                f"the tensor has {world * 2}"),
        refused(lambda: dist.all_to_all_single(torch.empty(world * 2), torch.ones(world * 2),
                                               [2] * world, [2] * (world + 1)),
                "alltoall_base", f"(rank {rank})", f"{world + 1} input split sizes for a group "
                f"of {world} ranks"),
        refused(lambda: dist.all_to_all_single(torch.empty(world * 2 + 1), torch.ones(world * 2),
                                               [2 + (q == rank) for q in range(world)],
                                               [2] * world),
                "alltoall_base", f"(rank {rank})", "sends itself 2 elements", "receives 3"),
        # Rank 0 alone (it fails at the call, before any message).
        refused(lambda: dist.all_to_all([torch.empty(2) for _ in range(world)],
                                        [torch.ones(3)] + [torch.ones(2)] * (world - 1)),
                "alltoall", "(rank 0)", "sends itself 3 elements", "receives 2")
        if rank == 0 else None,
    ]
    if major >= 2:
        # Registered for "cpu" and "cuda" (one braid backend serves both), created through the
        # extended API; a tensor that is not on the CPU is refused naming its device. (No CUDA
        # here: a meta tensor goes through the same check, handed to the backend directly.)
        pg = dist.group.WORLD
        assert {d.type for d in pg._device_types} >= {"cpu", "cuda"}, pg._device_types
        backend = pg._get_backend(torch.device("cuda"))
        assert backend is pg._get_backend(torch.device("cpu")) or \
            backend.name() == "braid", backend
        assert dist.Backend._plugins["BRAID"].extended_api
        msgs.append(refused(lambda: backend.allreduce([torch.ones(2, device="meta")]).wait(),
                            "allreduce", "meta", "not supported by braid yet"))
    if rank == 0:
        for m in msgs:
            print(f"refused: {m}")
    dist.barrier()  # the group still works after refused calls

    if major >= 2:
        # The coalescing manager's fast paths, blocking and async.
        for async_ops in (False, True):
            ag = [torch.empty(world * n, dtype=torch.float32) for n in (3, 5000)]
            rs = [torch.empty(n, dtype=torch.float32) for n in (3, 5000)]
            with dist._coalescing_manager(async_ops=async_ops) as cm:
                for o in ag:
                    dist.all_gather_into_tensor(o, make(torch.float32, o.numel() // world, rank,
                                                        "agc"))
            if async_ops:
                cm.wait()
            with dist._coalescing_manager(async_ops=async_ops) as cm:
                for o in rs:
                    dist.reduce_scatter_tensor(o, make(torch.float32, o.numel() * world, rank,
                                                       "rsc"))
            if async_ops:
                cm.wait()
            for o in ag:
                n = o.numel() // world
                same(o, torch.cat([make(torch.float32, n, r, "agc") for r in range(world)]),
                     f"allgather_into_tensor_coalesced n={n} async={async_ops}")
            for o in rs:
                n = o.numel()
                full = sum(make(torch.float32, n * world, r, "rsc") for r in range(world))
                same(o, full[rank * n:(rank + 1) * n],
                     f"reduce_scatter_tensor_coalesced n={n} async={async_ops}")

        # _abort_process_group: rank 0 aborts a group while the others wait in it; they fail
        # promptly, and rank 0's next call on it fails too.
        doomed = dist.new_group(backend="braid", timeout=timedelta(seconds=20))
        dist.all_reduce(torch.ones(4), group=doomed)
        dist.barrier(group=gloo)
        t0 = time.monotonic()
        if rank == 0:
            backend = doomed._get_backend(torch.device("cpu"))  # the group is gone after this
            time.sleep(0.3)
            dist.distributed_c10d._abort_process_group(doomed)
            msg = refused(lambda: backend.allreduce([torch.ones(4)]).wait(), "braid allreduce",
                          "abort")
        else:
            msg = refused(lambda: dist.all_reduce(torch.ones(1 << 16), group=doomed),
                          "braid allreduce", "rank 0 called abort()")
            assert time.monotonic() - t0 < 10, f"the abort took {time.monotonic() - t0:.1f} s"
        print(f"rank {rank}: after _abort_process_group: {msg}")
        dist.barrier(group=gloo)

    print(f"rank {rank}: {checks} checks passed", flush=True)
    # destroy_process_group: 2.x shuts every braid backend down (a barrier, then an abort):
    # quick, and a backend someone still holds is aborted.
    world_backend = dist.group.WORLD._get_backend(torch.device("cpu")) if major >= 2 else None
    t0 = time.monotonic()
    dist.destroy_process_group()
    assert time.monotonic() - t0 < 10, f"destroy_process_group took {time.monotonic() - t0:.1f} s"
    if world_backend is not None:
        refused(lambda: world_backend.allreduce([torch.ones(2)]).wait(), "braid allreduce",
                "aborted")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--world", type=int, default=2)
    args = parser.parse_args()
    harness.require_braid_torch()
    harness.report(harness.launch(os.path.abspath(__file__), args.world, timeout=90))


if __name__ == "__main__":
    if harness.is_worker():
        worker()
    else:
        main()

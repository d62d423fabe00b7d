#!/usr/bin/env python3
"""CTest rxe.pingpong (label rxe): boots the rxe-vm guest (tools/rxe-vm/run) and runs
tools/rxe-vm/pingpong there, real verbs traffic over Soft-RoCE rxe0, then checks what the guest
printed: the rxe0 device was listed, ibv_rc_pingpong's server and client each report their bytes,
iterations and rate, ib_write_bw's client reports its table, and every side said OK.

Skips (recorded, kind "device": the machine has no RDMA device, and the VM that stands in for one
is an opt-in) when qemu-system-x86_64 is not installed or the guest image is not built
or out of date (tools/rxe-vm/build-image, about 2 minutes once), or when BRAID_RXE_VM=0.

    pingpong_test.py [--timeout SECONDS]"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import rxe_vm  # noqa: E402

TEST = "rxe.pingpong"
# ibv_rc_pingpong prints, on each side: "<bytes> bytes in <s> seconds = <rate> Mbit/sec" and
# "<n> iters in <s> seconds = <usec> usec/iter".
RC_BYTES = re.compile(r"^(server|client): (\d+) bytes in [\d.]+ seconds = [\d.]+ Mbit/sec$", re.M)
RC_ITERS = re.compile(r"^(server|client): (\d+) iters in [\d.]+ seconds = [\d.]+ usec/iter$", re.M)
# ib_write_bw's client table row: "#bytes #iterations BW peak BW average MsgRate".
BW_ROW = re.compile(r"^client: \s*65536\s+500\s+[\d.]+\s+[\d.]+\s+[\d.]+\s*$", re.M)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--timeout", type=int, default=840)
    ap.add_argument("--iters", type=int, default=1000)
    args = ap.parse_args()

    rxe_vm.require_vm(TEST)

    cmd = [os.path.join(HERE, "run"), "--timeout", str(args.timeout), "--",
           os.path.join(HERE, "pingpong"), str(args.iters)]
    print("+", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, errors="replace",
                          timeout=args.timeout + 60)
    out = proc.stdout
    sys.stdout.write(out)
    problems = []
    if proc.returncode != 0:
        problems.append(f"tools/rxe-vm/run exited {proc.returncode}")
    if not re.search(r"^\s*rxe0\s+[0-9a-f]{16}\s*$", out, re.M):
        problems.append("ibv_devices did not list rxe0")
    if not re.search(r"state:\s+PORT_ACTIVE", out):
        problems.append("ibv_devinfo did not show rxe0's port ACTIVE")
    for side in ("server", "client"):
        got = [m for m in RC_BYTES.finditer(out) if m.group(1) == side]
        if not got:
            problems.append(f"ibv_rc_pingpong {side}: no 'bytes in ... Mbit/sec' line")
        iters = [int(m.group(2)) for m in RC_ITERS.finditer(out) if m.group(1) == side]
        if iters != [args.iters]:
            problems.append(f"ibv_rc_pingpong {side}: iterations {iters}, expected [{args.iters}]")
    if not BW_ROW.search(out):
        problems.append("ib_write_bw client: no result row for 65536 bytes x 500")
    for name in ("ibv_rc_pingpong", "ib_write_bw"):
        if f"OK: {name}" not in out:
            problems.append(f"{name}: the guest did not report OK")
    return rxe_vm.finish(TEST, problems, "real verbs traffic over Soft-RoCE in the VM")


if __name__ == "__main__":
    sys.exit(main())

"""What the rxe-vm CTest scripts (pingpong_test.py, verbs_test.py) share: the skip when the
Soft-RoCE VM cannot run here (recorded, kind "device": the machine has no RDMA device, and the VM
that stands in for one is opt-in)."""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
import braid_skip  # noqa: E402


def require_vm(test):
    """Skips `test` when BRAID_RXE_VM=0, qemu-system-x86_64 is missing or the guest image is not
    built or out of date (tools/rxe-vm/build-image)."""
    if os.environ.get("BRAID_RXE_VM") == "0":
        braid_skip.skip_no_device("BRAID_RXE_VM=0: the Soft-RoCE VM is turned off", test)
    if shutil.which("qemu-system-x86_64") is None:
        braid_skip.skip_no_device("no RDMA device, and no qemu-system-x86_64 for the Soft-RoCE VM "
                                  "(apt-get install qemu-system-x86; tools/rxe-vm/README.md)", test)
    if subprocess.run([os.path.join(HERE, "build-image"), "--check"],
                      stderr=subprocess.DEVNULL).returncode != 0:
        braid_skip.skip_no_device("no RDMA device, and the Soft-RoCE VM image is not built or out "
                                  "of date (tools/rxe-vm/build-image; tools/rxe-vm/README.md)",
                                  test)


def finish(test, problems, ok):
    """The script's exit status: 1 listing `problems`, else 0 saying `ok`."""
    if problems:
        print(f"\n{test} FAILED:\n  " + "\n  ".join(problems), flush=True)
        return 1
    print(f"\n{test}: OK ({ok})", flush=True)
    return 0

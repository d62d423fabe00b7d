"""What the rxe-vm CTest scripts (pingpong_test.py, verbs_test.py, two_guests_test.py) share: the
skip when the Soft-RoCE VM cannot run here (recorded, kind "device": the machine has no RDMA
device, and the VM that stands in for one is opt-in), the check of an all_reduce_perf table a
guest wrote, and the verdict."""
import argparse
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


def start(test, binaries):
    """A test script's arguments (--build BUILD, --timeout SECONDS) and its skips (require_vm,
    require_binaries); returns (BUILD as an absolute path, the timeout)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--timeout", type=int, default=1500)
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    require_vm(test)
    require_binaries(test, build, binaries)
    return build, args.timeout


def require_binaries(test, build, binaries):
    """Skips `test` (recorded as missing) when BUILD lacks one of `binaries`, naming the build
    that makes them."""
    missing = [b for b in binaries if not os.access(os.path.join(build, b), os.X_OK)]
    if missing:
        braid_skip.skip_missing(
            f"the guest's binaries are not built in {build} ({', '.join(missing)}): the test "
            "command's build makes them where the VM runs (cmake/BraidRxeGuest.cmake, "
            "build/rxe-guest/); by hand: cmake -S . -B build-vm -G Ninja -DCMAKE_BUILD_TYPE=Release "
            "-DBRAID_NATIVE=OFF -DBRAID_WITH_VERBS=ON && cmake --build build-vm --target "
            + " ".join(os.path.basename(b) for b in binaries), test)


def check_table(path, sizes, what):
    """Checks the all_reduce_perf table in `path` with tests/bench/perf_smoke.py (a row for each
    of `sizes`, #wrong 0 in and out of place, 0 out of bounds), printing its verdict; a problem
    text, or None."""
    if not os.path.exists(path):
        return f"{what}: no table ({path})"
    check = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "bench", "perf_smoke.py"),
                            "--sizes", sizes, "--", "cat", path],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(f"{what}: {check.stdout.strip()}", flush=True)
    return f"{what}: its table failed the check" if check.returncode != 0 else None


def finish(test, problems, ok):
    """The script's exit status: 1 listing `problems`, else 0 saying `ok`."""
    if problems:
        print(f"\n{test} FAILED:\n  " + "\n  ".join(problems), flush=True)
        return 1
    print(f"\n{test}: OK ({ok})", flush=True)
    return 0

"""braid-doctor with faults injected: a low open-file limit, a port another process holds, and
(in its own test, as root in a mount namespace) a tiny shared-memory mount; each must fail with
the finding and its fix, and a healthy run must pass.

    python3 tests/tools/doctor_test.py build/tools/braid-doctor [all|tiny_shm]
"""
import os
import resource
import socket
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import braid_skip  # noqa: E402


def doctor(tool, *args, preexec=None, wrap=()):
    r = subprocess.run([*wrap, sys.executable, tool, *args], capture_output=True, text=True,
                       timeout=60, preexec_fn=preexec)
    return r.returncode, r.stdout + r.stderr


def expect(cond, what, out):
    if not cond:
        print(f"FAIL: {what}\n--- braid-doctor said:\n{out}")
        sys.exit(1)


def main():
    tool, which = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "all")
    if which == "tiny_shm":
        if os.geteuid() != 0:
            braid_skip.skip_no_device("a tiny /dev/shm needs root (a tmpfs in a mount namespace)")
        mnt = "/tmp/braid-doctor-tiny-shm"
        os.makedirs(mnt, exist_ok=True)
        script = (f"mount -t tmpfs -o size=64k tmpfs {mnt} && "
                  f"{sys.executable} {tool} -n 8 --shm {mnt}")
        r = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True,
                           timeout=60)
        out = r.stdout + r.stderr
        if "braid-doctor on" not in out:
            braid_skip.skip_no_device(f"no mount namespace with a tmpfs here: {out.strip()[:200]}")
        expect(r.returncode == 1, "exit 1 for a tiny shared-memory mount", out)
        expect("FAIL  shared memory: " + mnt in out and "8 ranks need about" in out,
               "the shared-memory finding", out)
        expect("fix: grow it (mount -o remount,size=" in out, "its fix", out)
        print("ok: a 64 KiB shared-memory mount fails with its fix")
        return

    rc, out = doctor(tool, "-n", "2", "--port", "0")
    expect(rc == 0, "a healthy run exits 0", out)
    for what in ("shared memory:", "open files:", "locked memory:", "CPUs:", "bootstrap port",
                 "0 failed"):
        expect(what in out, f"the report has '{what}'", out)

    def low_files():
        resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))
    rc, out = doctor(tool, "-n", "8", "--port", "0", preexec=low_files)
    expect(rc == 1, "exit 1 with 32 open files for 8 ranks", out)
    expect("FAIL  open files: limit 32" in out, "the open-files finding", out)
    expect("fix: raise it: ulimit -n" in out, "its fix", out)

    holder = socket.socket()
    holder.bind(("0.0.0.0", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    rc, out = doctor(tool, "-n", "2", "--port", str(port))
    holder.close()
    expect(rc == 1, "exit 1 when the port is held", out)
    expect(f"FAIL  bootstrap port {port}: cannot listen on it here" in out, "the port finding", out)
    expect("fix: pick a free one" in out, "its fix", out)

    rc, out = doctor(tool, "--bogus")
    expect(rc == 2 and "unknown argument --bogus" in out, "bad usage exits 2 naming it", out)
    print("ok: healthy, low open-file limit, held port, bad usage")


if __name__ == "__main__":
    main()

"""braid-doctor with faults injected: a low open-file limit, a port another process holds, ranks
with another libbraid or a skewed clock (as a job of 2-3 ranks on this machine), and
(in its own test, as root in a mount namespace) a tiny shared-memory mount; each must fail with
the finding and its fix, and a healthy run must pass.

    python3 tests/tools/doctor_test.py build/tools/braid-doctor [all|tiny_shm]
"""
import os
import re
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


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ranks(tool, per_rank, lib_of=lambda r: None):
    """Runs braid-doctor as ranks 0..n-1 of one job (as braidrun would); their outputs."""
    port = free_port()
    procs = []
    for r, extra in enumerate(per_rank):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(len(per_rank)),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), **extra)
        args = [sys.executable, tool, "-n", str(len(per_rank))]
        if lib_of(r):
            args += ["--lib", lib_of(r)]
        procs.append(subprocess.Popen(args, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    return [(p.wait(timeout=60), p.stdout.read()) for p in procs]


def across_ranks(tool):
    # Healthy: three ranks, the same library, one clock.
    outs = ranks(tool, [{}, {}, {}])
    for rc, out in outs:
        expect(rc == 0, "a healthy 3-rank run exits 0", out)
    expect("ok    libbraid: the same on all 3 ranks" in outs[0][1],
           "rank 0 says the library agrees", outs[0][1])
    # Rank 1 on another host whose clock is 0.4 s ahead, with another library.
    other = os.path.realpath(sys.executable)
    outs = ranks(tool, [{}, {"BRAID_HOSTNAME": "hostB", "BRAID_DOCTOR_CLOCK_SKEW": "0.4"}],
                 lib_of=lambda r: other if r == 1 else None)
    zero, one = outs[0][1], outs[1][1]
    expect(outs[0][0] == 1 and "FAIL  libbraid differs from rank 0's" in zero and
           f"rank 1 on hostB: {other}" in zero, "rank 0 names the rank with another libbraid", zero)
    expect("fix: install the same braid on every host" in zero, "its fix", zero)
    # 400 ms, give or take half the round trip (the machine may be busy).
    skew = re.search(r"WARN  clock of hostB \(rank 1\): \+([0-9.]+) ms", zero)
    expect(skew and 250 < float(skew.group(1)) < 550, "rank 0 names the skewed host", zero)
    skew = re.search(r"WARN  clock: \+([0-9.]+) ms", one)
    expect(outs[1][0] == 1 and "FAIL  libbraid: this rank's" in one and skew and
           250 < float(skew.group(1)) < 550, "rank 1 says both about itself", one)
    print("ok: across ranks: same library and clock; another library and a skewed clock named")


def peer_access_matrix(tool):
    # nvidia-smi topo -p2p r's matrix as a 4-GPU machine prints it, GPUs 1 and 3 without access.
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("braid_doctor", tool)
    spec = importlib.util.spec_from_loader("braid_doctor", loader)
    doc = importlib.util.module_from_spec(spec)
    loader.exec_module(doc)
    matrix = (" \tGPU0\tGPU1\tGPU2\tGPU3\t\n"
              " GPU0\tX\tOK\tOK\tOK\t\n GPU1\tOK\tX\tOK\tCNS\t\n"
              " GPU2\tOK\tOK\tX\tOK\t\n GPU3\tOK\tCNS\tOK\tX\t\n\nLegend:\n\n"
              "  X    = Self\n  OK   = Status Ok\n  CNS  = Chipset not supported\n")
    got = doc.parse_p2p(matrix)
    expect(got == [(1, 3, "CNS")], "GPUs 1-3 without peer access found", repr(got))
    expect(doc.parse_p2p("") == [], "no matrix: nothing missing", "")
    print("ok: GPU peer-access matrix read")


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

    across_ranks(tool)
    peer_access_matrix(tool)

    rc, out = doctor(tool, "--bogus")
    expect(rc == 2 and "unknown argument --bogus" in out, "bad usage exits 2 naming it", out)
    print("ok: healthy, low open-file limit, held port, bad usage")


if __name__ == "__main__":
    main()

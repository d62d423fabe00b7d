#!/usr/bin/env python3
"""Installed braid, used the way a user would (issue: braid as a library people install).

  install_test.py cmake     cmake --install into a scratch prefix; a consumer project built with
                            find_package(braid); its C++ and C programs run on 2 ranks with the
                            prefix's braidrun; the prefix holds only public headers, a versioned
                            SONAME, the tools, and braid_torch where the Python finds it
  install_test.py pkgconfig the same prefix layout, the consumer compiled by hand with
                            `pkg-config --cflags --libs braid`
  install_test.py deb       cpack -G DEB; dpkg -x into a scratch root; the consumer built against
                            it (find_package) and run with its braidrun

Common flags: --build DIR --work DIR --source DIR [--torch-python PY --torch-dir REL]."""
import argparse
import glob
import os
import shutil
import subprocess
import sys

PUBLIC_HEADERS = {"braid.h", "braid.hpp", "deadline.hpp", "error.hpp", "store.hpp", "types.hpp"}
PROGRAMS = ["braidrun", "braid-topo", "braid-sim", "all_reduce_perf", "braid-plot", "braid-cluster",
            "braid-trace", "braid-doctor"]


def run(*argv, cwd=None, env=None, timeout=600):
    print("+ " + " ".join(argv), flush=True)
    r = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        sys.stdout.write(r.stdout[-4000:])
        sys.stdout.write(r.stderr[-4000:])
        raise SystemExit(f"FAILED ({r.returncode}): {' '.join(argv)}")
    return r.stdout


def check_layout(prefix, args):
    """Public headers only, a versioned library with its SONAME, the programs, braid_torch."""
    headers = {os.path.basename(p) for p in glob.glob(os.path.join(prefix, "include", "braid", "**"),
                                                      recursive=True) if os.path.isfile(p)}
    if headers != PUBLIC_HEADERS:
        raise SystemExit(f"FAILED: {prefix}/include/braid holds {sorted(headers)}, "
                         f"expected exactly {sorted(PUBLIC_HEADERS)}")
    libs = glob.glob(os.path.join(prefix, "lib*", "**", "libbraid.so.*.*.*"), recursive=True)
    if len(libs) != 1:
        raise SystemExit(f"FAILED: expected one versioned libbraid.so.X.Y.Z under {prefix}, got {libs}")
    soname = [l for l in run("readelf", "-d", libs[0]).splitlines() if "SONAME" in l]
    if not soname or "libbraid.so." not in soname[0]:
        raise SystemExit(f"FAILED: {libs[0]} has no versioned SONAME: {soname}")
    print(f"library {os.path.relpath(libs[0], prefix)}: {soname[0].split()[-1]}")
    # braid's NCCL API: libnccl.so.2 beside libbraid.so (which its $ORIGIN RPATH finds), and
    # its nccl.h in a folder of its own.
    nccl = os.path.join(os.path.dirname(libs[0]), "libnccl.so.2")
    nccl_soname = [l for l in run("readelf", "-d", nccl).splitlines() if "SONAME" in l]
    if not nccl_soname or "[libnccl.so.2]" not in nccl_soname[0]:
        raise SystemExit(f"FAILED: {nccl} has SONAME {nccl_soname}, expected libnccl.so.2")
    if "not found" in run("ldd", nccl):
        raise SystemExit(f"FAILED: {nccl} does not find its libraries: {run('ldd', nccl)}")
    if not os.path.isfile(os.path.join(prefix, "include", "braid-nccl", "nccl.h")):
        raise SystemExit(f"FAILED: {prefix}/include/braid-nccl/nccl.h is not installed")
    print(f"library {os.path.relpath(nccl, prefix)}: libnccl.so.2, header include/braid-nccl/nccl.h")
    for prog in PROGRAMS:
        path = os.path.join(prefix, "bin", prog)
        if not os.access(path, os.X_OK):
            raise SystemExit(f"FAILED: {path} is not installed")
    run(os.path.join(prefix, "bin", "braid-cluster"), "-h")  # finds its package through the link
    if args.torch_python:
        if os.path.isabs(args.torch_dir):
            raise SystemExit(f"FAILED: BRAID_TORCH_INSTALL_DIR={args.torch_dir} is absolute, so "
                             "braid_torch would be installed outside the prefix")
        env = dict(os.environ, PYTHONPATH=os.path.join(prefix, args.torch_dir))
        out = run(args.torch_python, "-c", "import braid_torch, os; print(braid_torch.__file__)",
                  env=env)
        if not out.strip().startswith(os.path.join(prefix, args.torch_dir)):
            raise SystemExit(f"FAILED: braid_torch came from {out.strip()}, not the prefix")
        print(f"braid_torch imports from {out.strip()}")


def run_consumers(prefix, bindir):
    braidrun = os.path.join(prefix, "bin", "braidrun")
    for prog in ("consumer", "consumer_c"):
        out = run(braidrun, "-n", "2", "--timeout", "120", os.path.join(bindir, prog))
        for rank in (0, 1):
            if f"rank {rank} of 2 ok" not in out:
                raise SystemExit(f"FAILED: {prog} rank {rank} did not report ok:\n{out}")
        print(out.strip())


def build_with_cmake(prefix, args, work):
    bindir = os.path.join(work, "consumer")
    extra = " ".join(args.consumer_flag)
    run("cmake", "-S", os.path.join(args.source, "tests", "install", "consumer"), "-B", bindir,
        "-G", "Ninja", f"-DCMAKE_PREFIX_PATH={prefix}", "-DCMAKE_BUILD_TYPE=Release",
        f"-DCMAKE_C_FLAGS={extra}", f"-DCMAKE_CXX_FLAGS={extra}",
        f"-DCMAKE_EXE_LINKER_FLAGS={extra}")
    run("cmake", "--build", bindir)
    return bindir


def build_with_pkgconfig(prefix, args, work):
    bindir = os.path.join(work, "consumer")
    os.makedirs(bindir)
    pcdirs = glob.glob(os.path.join(prefix, "lib*", "**", "pkgconfig"), recursive=True)
    env = dict(os.environ, PKG_CONFIG_PATH=":".join(pcdirs))
    flags = run("pkg-config", "--cflags", "--libs", "braid", env=env).split()
    libdir = run("pkg-config", "--variable=libdir", "braid", env=env).strip()
    src = os.path.join(args.source, "tests", "install", "consumer")
    rpath = f"-Wl,-rpath,{libdir}"
    extra = args.consumer_flag
    run("c++", "-std=c++17", "-O2", *extra, os.path.join(src, "consumer.cc"), "-o",
        os.path.join(bindir, "consumer"), *flags, rpath)
    run("cc", "-O2", *extra, os.path.join(src, "consumer_c.c"), "-o",
        os.path.join(bindir, "consumer_c"), *flags, rpath)
    return bindir


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["cmake", "pkgconfig", "deb"])
    p.add_argument("--build", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--source", required=True)
    p.add_argument("--torch-python")
    p.add_argument("--torch-dir")
    # A sanitized libbraid needs sanitized consumers (the runtime must come first).
    p.add_argument("--consumer-flag", action="append", default=[])
    args = p.parse_args()
    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    if args.mode == "deb":
        out = os.path.join(work, "deb")
        run("cpack", "-G", "DEB", "--config", os.path.join(args.build, "CPackConfig.cmake"),
            "-B", out, timeout=900)
        debs = glob.glob(os.path.join(out, "*.deb"))
        if len(debs) != 1:
            raise SystemExit(f"FAILED: cpack made {debs}")
        info = run("dpkg-deb", "--info", debs[0])
        print("\n".join(l for l in info.splitlines() if l.strip().startswith(("Package", "Version", "Depends"))))
        root = os.path.join(work, "root")
        run("dpkg", "-x", debs[0], root)
        prefix = os.path.join(root, "usr")
    else:
        prefix = os.path.join(work, "prefix")
        run("cmake", "--install", args.build, "--prefix", prefix)

    check_layout(prefix, args)
    build = build_with_pkgconfig if args.mode == "pkgconfig" else build_with_cmake
    run_consumers(prefix, build(prefix, args, work))
    print(f"install_test {args.mode}: ok")


if __name__ == "__main__":
    main()
